"""int8 unary math ops against tests/int8_ref.py (r1.1's arithmetic_self int8), exact equality
over every int8 value, under several quant params."""
import numpy as np
import pytest

from msv0.errors import InputError

from int8_ref import qp, unary_s8
from oprun import run_op

OPS = ["Abs", "Floor", "Ceil", "Round", "Sin", "Cos", "Log", "Sqrt", "Rsqrt", "Reciprocal", "Square"]
PARAMS = [(0.1, 3, 0.1, 3), (0.05, -128, 0.02, 127), (0.37, 127, 0.9, -128), (0.0123, -7, 0.004, 11)]
ALL = np.arange(-128, 128, dtype=np.int8).reshape(4, 64)


@pytest.mark.parametrize("p", PARAMS, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_unary_s8(op, p):
    want = unary_s8(ALL, op, *p)
    run = lambda x: run_op(op, [x], out_dtypes=[np.int8], in_quant=[qp(*p[:2])], out_quant=[qp(*p[2:])])[0]  # noqa: E731
    if want is None:  # some int8 value is outside the op's domain for these params
        with pytest.raises(InputError, match=f"{op.lower()}_node"):
            run(ALL)
        x = ALL[:, 32:][ALL[:, 32:] > p[1]][None] if op != "Log" else ALL[ALL > p[1] + 1][None]
        if x.size == 0 or unary_s8(x, op, *p) is None:
            return
        np.testing.assert_array_equal(run(x), unary_s8(x, op, *p))
        return
    np.testing.assert_array_equal(run(ALL), want)

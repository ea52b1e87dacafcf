"""The plan-time composition of an int8 lookup and an element-wise Binary of its input
(msv0/int8_tables.py): YOLO's SiLU, Mul(x, Sigmoid(x)), runs as one LookupS8 step and gives
what tests/int8_ref.py's sigmoid and Mul give; where the lookup's output is read elsewhere, or
the Binary's other operand is not x, nothing is composed."""
import numpy as np
import pytest

import msv0
from msv0.builder import Builder
from msv0.fb.ActivationType import ActivationType

from int8_ref import add_s8, mul_s8, qp, sigmoid_s8

X_Q, S_Q = (0.05, 3), (1 / 256, -128)


def _model(op, x_first: bool, extra_use: bool = False, other_input: bool = False):
    b = Builder()
    x = b.input("x", (1, 13, 17, 5), np.int8, quant=qp(*X_Q))
    s = b.node("Activation", [x], out_dtype=np.int8, out_quant=qp(*S_Q), type=ActivationType.SIGMOID)
    other = b.input("z", (1, 13, 17, 5), np.int8, quant=qp(*X_Q)) if other_input else x
    y = b.node(op, [other, s] if x_first else [s, other], out_dtype=np.int8, out_quant=qp(0.03, -10))
    b.output(y, *([s] if extra_use else []))
    return b.finish()


def _ops(session, feeds):
    return [a.op for a in session.profile(feeds)[1]]


@pytest.mark.parametrize("x_first", [True, False])
@pytest.mark.parametrize("op,ref", [("Mul", mul_s8), ("Add", add_s8)])
@pytest.mark.parametrize("threads", [1, 2])
def test_silu_is_one_lookup(rng, x_first, op, ref, threads):
    x = rng.integers(-128, 128, (1, 13, 17, 5), dtype=np.int8)
    x.reshape(-1)[:2] = [-128, 127]
    session = msv0.Session(_model(op, x_first), num_threads=threads)
    s = sigmoid_s8(x, *X_Q)
    want = ref(x, s, *X_Q, *S_Q, 0.03, -10) if x_first else ref(s, x, *S_Q, *X_Q, 0.03, -10)
    np.testing.assert_array_equal(session.run({"x": x})[session.outputs[0].name], want)
    assert _ops(session, {"x": x}) == [f"Activation+{op}"]


def test_lookup_read_elsewhere_or_other_operand_stays(rng):
    x = rng.integers(-128, 128, (1, 13, 17, 5), dtype=np.int8)
    session = msv0.Session(_model("Mul", True, extra_use=True))
    assert _ops(session, {"x": x}) == ["Activation", "Mul"]
    s = sigmoid_s8(x, *X_Q)
    np.testing.assert_array_equal(session.run({"x": x})[session.outputs[0].name], mul_s8(x, s, *X_Q, *S_Q, 0.03, -10))
    session = msv0.Session(_model("Mul", True, other_input=True))
    assert _ops(session, {"x": x, "z": x}) == ["Activation", "Mul"]

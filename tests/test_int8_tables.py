"""Element-wise runs from an int8 tensor to an int8 tensor folded into one LookupS8 step
(msv0/int8_tables.py): YOLO's SiLU, Mul(x, Sigmoid(x)), gives what tests/int8_ref.py's sigmoid
and Mul give; a QDQ-style dequantize -> per-channel Mul -> HardSwish-like float ops -> quantize
run gives NumPy's float32 arithmetic between int8_ref's casts, per channel over an odd channel
count. Where an intermediate is read elsewhere, or an operand is computed outside the run, the
run stops there."""
import numpy as np
import pytest

import msv0
from msv0.builder import Builder
from msv0.fb.ActivationType import ActivationType
from msv0.fb.TypeId import TypeId

from int8_ref import add_s8, dequantize, mul_s8, qp, quantize, sigmoid_s8

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


SCALE = np.array([0.5, -1.25, 2.0, 0.01, 3.0], np.float32)


def _qdq_model(read_inside_elsewhere: bool = False, shape=(1, 7, 9, 5)):
    f32, i8 = TypeId.kNumberTypeFloat32, TypeId.kNumberTypeInt8
    b = Builder()
    x = b.input("x", shape, np.int8, quant=qp(*X_Q))
    d = b.node("QuantDTypeCast", [x], srcT=i8, dstT=f32)
    m = b.node("Mul", [d, b.const("scale", SCALE)])
    h = b.node("Activation", [b.node("Add", [m, b.const("three", np.float32(3))])], type=ActivationType.RELU6)
    y = b.node("Div", [b.node("Mul", [m, h]), b.const("six", np.float32(6))])
    q = b.node("QuantDTypeCast", [y], srcT=f32, dstT=i8, out_dtype=np.int8, out_quant=qp(0.02, 7))
    b.output(q, *([m] if read_inside_elsewhere else []))
    return b.finish()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(1, 7, 9, 5), (1, 181, 149, 5)], ids=str)
def test_dequantize_float_ops_quantize_is_one_lookup_per_channel(rng, threads, shape):
    """The larger shape splits across 2 threads at an element that is not a pixel's first."""
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    x.reshape(-1)[:2] = [-128, 127]
    session = msv0.Session(_qdq_model(shape=shape), num_threads=threads)
    assert len(_ops(session, {"x": x})) == 1
    m = dequantize(x, *X_Q) * SCALE
    h = np.clip(m + np.float32(3), np.float32(0), np.float32(6))
    want = quantize(m * h / np.float32(6), 0.02, 7)
    np.testing.assert_array_equal(session.run({"x": x})[session.outputs[0].name], want)


def test_run_stops_before_a_tensor_read_elsewhere(rng):
    """The Mul's output is also a graph output: only the dequantize and Mul could go, and they
    end in float, so nothing is folded."""
    x = rng.integers(-128, 128, (1, 7, 9, 5), dtype=np.int8)
    session = msv0.Session(_qdq_model(read_inside_elsewhere=True))
    assert "QuantDTypeCast" in _ops(session, {"x": x})
    m = dequantize(x, *X_Q) * SCALE
    h = np.clip(m + np.float32(3), np.float32(0), np.float32(6))
    np.testing.assert_array_equal(session.run({"x": x})[session.outputs[0].name],
                                  quantize(m * h / np.float32(6), 0.02, 7))

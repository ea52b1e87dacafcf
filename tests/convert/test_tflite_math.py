"""TFLite math, normalisation and shape builtins (msv0/convert/tflite_math.py): small graphs with
graph-input operands on odd shapes, converted, run and compared with the LiteRT interpreter;
integer, boolean and rounding results exactly, with the edge values where r1.1's ops differ
from TFLite's (ties, negative operands, zeros, infinities, large magnitudes)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert.interpreter")

import msv0  # noqa: E402
from msv0 import gelu  # noqa: E402
from msv0.convert import convert  # noqa: E402
from test_tflite_convert import NONE, RELU, RELU6, RELU_N1_TO_1, SAME, VALID, check, f32  # noqa: E402
from tflitewriter import TFLiteWriter  # noqa: E402

R = np.random.default_rng(3)
TANH = 4
S = (3, 5, 7)
INF, NAN = np.inf, np.nan


# LiteRT registers these builtins from a later version than the 1 TFLiteWriter writes.
VERSIONS = {"BROADCAST_TO": 2}


class Writer(TFLiteWriter):
    def scalar(self, value, dtype) -> int:
        """A 0-D constant (TFLiteWriter.const makes a 0-D array 1-D)."""
        a = np.array(value, dtype)
        return self._tensor(f"scalar_{len(self.tensors)}", [], a.dtype, a.tobytes())

    def finish(self) -> bytes:
        import flatbuffers
        from ai_edge_litert import schema_py_generated as schema
        from tflite.BuiltinOperator import BuiltinOperator

        data = super().finish()
        bumps = {getattr(BuiltinOperator, k): v for k, v in VERSIONS.items()}
        model = schema.ModelT.InitFromPackedBuf(data, 0)
        if not any(c.builtinCode in bumps for c in model.operatorCodes):
            return data
        for c in model.operatorCodes:
            c.version = bumps.get(c.builtinCode, c.version)
        b = flatbuffers.Builder(1024)
        b.Finish(model.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())


def exact(w: TFLiteWriter, feeds, dtype):
    """Bit-for-bit agreement with LiteRT (NaN matching NaN) and outputs of `dtype`."""
    m = check(w, feeds, rtol=0, atol=0)
    assert [t.dtype for t in m.outputs] == [np.dtype(dtype)] * len(m.outputs)
    return m


def unary(code, x, out_dtype=None, options=None, **opts):
    """x fed as graph input "x" through one builtin."""
    w = Writer()
    w.output(w.op(code, [w.input("x", x.shape, x.dtype)], x.shape, options, out_dtype=out_dtype or x.dtype, **opts))
    return w, {"x": x}


def binary(code, a, b, options=None):
    w = Writer()
    shape = np.broadcast_shapes(a.shape, b.shape)
    w.output(w.op(code, [w.input("a", a.shape, a.dtype), w.input("b", b.shape, b.dtype)], shape, options,
                  out_dtype=a.dtype))
    return w, {"a": a, "b": b}


def ints(dtype, *shape, lo=-50, hi=50, nonzero=False):
    v = R.integers(lo, hi, shape).astype(dtype)
    return np.where(v == 0, 1, v).astype(dtype) if nonzero else v


def with_edges(x: np.ndarray, edges) -> np.ndarray:
    x = x.copy()
    x.reshape(-1)[:len(edges)] = edges
    return x


def reasons(w: TFLiteWriter) -> dict[str, str]:
    with pytest.raises(msv0.UnsupportedOpError) as err:
        convert(w.finish())
    return {op: why for _, op, why in err.value.nodes}


# ---- CAST ----------------------------------------------------------------------------------

CAST_CASES = {
    np.dtype(np.float16): with_edges(f32(*S, lo=-100, hi=100).astype(np.float16), [0.0, -0.0, 65504.0]),
    np.dtype(np.float32): with_edges(f32(*S, lo=-1e4, hi=1e4), [0.0, -0.0, 0.5, -0.5, 2.9999998, -2.9999998, 1e9]),
    np.dtype(np.int32): with_edges(ints(np.int32, *S, lo=-(2**31), hi=2**31 - 1), [0, 1, -1, 2**24 + 1, -(2**31)]),
    np.dtype(np.int64): with_edges(ints(np.int64, *S), [0, 2**40, -(2**40)]),
    np.dtype(np.bool_): R.integers(0, 2, S).astype(np.bool_),
    np.dtype(np.uint8): with_edges(ints(np.uint8, *S, lo=0, hi=256), [0, 255]),
}


@pytest.mark.parametrize("src,dst", [(np.float32, np.int32), (np.float32, np.int64), (np.int32, np.float32),
                                     (np.int32, np.int64), (np.bool_, np.float32), (np.bool_, np.int32),
                                     (np.bool_, np.int64), (np.uint8, np.float32), (np.uint8, np.int32),
                                     (np.float32, np.float16), (np.float16, np.float32), (np.float32, np.bool_),
                                     (np.int32, np.bool_), (np.int64, np.bool_), (np.uint8, np.bool_),
                                     (np.float32, np.float32)])
def test_cast(src, dst):
    x = CAST_CASES[np.dtype(src)]
    if src == np.float32 and dst == np.bool_:
        x = with_edges(x, [NAN, INF, -0.0])
    exact(*unary("CAST", x, dst), dst)


# ---- element-wise functions ----------------------------------------------------------------

def test_elu():
    check(*unary("ELU", with_edges(f32(*S, lo=-8, hi=4), [0.0, -0.0, -30.0, -1e-7, 1e-7])))


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu(approximate):
    x = with_edges(f32(*S, lo=-6, hi=6), [0.0, -0.0, -20.0, 20.0, -3.0, 1e-6])
    m = check(*unary("GELU", x, options="GeluOptions", approximate=approximate))
    # msv0.gelu's form node for node, which Sessions run as one native step
    assert len(m.nodes) == len(gelu.TANH_FORM if approximate else gelu.ERF_FORM)
    assert len(msv0.Session(m).plan_info.steps) == 1


@pytest.mark.parametrize("case", ["scalar", "integral", "runtime", "per_element", "broadcast"])
def test_pow(case):
    w = Writer()
    x = f32(*S, lo=0.1, hi=4)
    feeds = {"x": x}
    if case == "scalar":
        p = w.const(np.array(2.5, np.float32))
    elif case == "integral":  # repeated squaring, negative bases and a negative power
        feeds["x"] = x = with_edges(f32(*S, lo=-3, hi=3), [0.0, -0.0, -2.0])
        p = w.const(np.array([3, -2, 0, 5, 1, 4, -1], np.float32))
    elif case == "runtime":
        p = w.input("p", [1])
        feeds["p"] = np.array([-1.7], np.float32)
    elif case == "per_element":
        p = w.const(f32(5, 7, lo=-2, hi=2))
    else:  # x [5, 7] against an exponent [3, 1, 7]
        feeds["x"] = x = f32(5, 7, lo=0.1, hi=4)
        p = w.const(f32(3, 1, 7, lo=-2, hi=2) + np.float32(0.25))
    w.output(w.op("POW", [w.input("x", x.shape), p], S))
    check(w, feeds)


def test_round_ties_to_even():
    ties = np.arange(-6, 7, dtype=np.float32) + np.float32(0.5)
    edges = [*ties, 0.49999997, -0.49999997, 0.0, -0.0, 4194304.5, 4194305.5, 8388607.5, -8388606.5, 1e10, -1e10,
             INF, -INF, NAN, 1.5e-45]
    exact(*unary("ROUND", with_edges(f32(*S, lo=-100, hi=100), edges)), np.float32)


FLOOR_A = [7, -7, 7, -7, 0, -0.0, 0.3, -0.3, 1.0, -1.0, 6.0, -6.0, 1e-30, -1e-30, 5.5, -5.5, INF, -INF, -1, 1, 2,
           NAN, 1e-30]
FLOOR_B = [2, 2, -2, -2, 3, 3, 0.1, 0.1, 0.1, -0.1, 3.0, 3.0, 7.0, 7.0, -0.5, 0.5, 3, 3, INF, -INF, INF, 2, -1e30]


@pytest.mark.parametrize("code", ["FLOOR_DIV", "FLOOR_MOD"])
def test_floor_div_mod_float(code):
    """Exactly, also where floorf(a/b) steps over an integer (1.0/0.1: 9.99999985 in double, 10 in float)."""
    a = with_edges(f32(*S, lo=-20, hi=20), FLOOR_A)
    b = with_edges(f32(*S, lo=0.2, hi=3) * np.where(R.random(S) < 0.5, -1, 1).astype(np.float32), FLOOR_B)
    exact(*binary(code, a, b), np.float32)


@pytest.mark.parametrize("code", ["FLOOR_DIV", "FLOOR_MOD"])
def test_floor_div_mod_float_broadcast_and_large(code):
    a = with_edges(f32(*S, lo=-1e9, hi=1e9), [3e38, -3e38, 1e10, -1e10])
    b = with_edges(f32(7, lo=-3, hi=3), [3.3, -3.3, 0.01, -0.01])
    check(*binary(code, a, b))


@pytest.mark.parametrize("code,dtype", [("FLOOR_DIV", np.int32), ("FLOOR_MOD", np.int32), ("FLOOR_MOD", np.int64)])
def test_floor_div_mod_int(code, dtype):
    big = np.iinfo(dtype)
    a = with_edges(ints(dtype, *S), [7, -7, 7, -7, 0, 6, -6, big.max, big.min, big.max, big.min, -1, 1])
    b = with_edges(ints(dtype, *S, nonzero=True), [2, 2, -2, -2, -3, 3, 3, big.min, big.max, -big.max, 3, big.max,
                                                      big.min])
    exact(*binary(code, a, b), dtype)
    exact(*binary(code, a, ints(dtype, 7, lo=-9, hi=9, nonzero=True)), dtype)  # b broadcast


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_sign(dtype):
    if dtype == np.float32:
        x = with_edges(f32(*S, lo=-3, hi=3), [0.0, -0.0, NAN, INF, -INF, 1e-45, -1e-45])
    else:
        x = with_edges(ints(np.int32, *S), [0, np.iinfo(np.int32).min, np.iinfo(np.int32).max])
    exact(*unary("SIGN", x), dtype)


def test_atan2():
    check(*binary("ATAN2", f32(*S, lo=-5, hi=5), with_edges(f32(*S, lo=-5, hi=5), [0.0, -0.0])), atol=1e-6)


def test_atan2_every_ieee_quadrant():
    """C's atan2 on signed zeros, infinities, NaN and extreme ratios."""
    v = np.array([0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 1e-30, -1e-30, 3e38, -3e38], np.float32)
    y, x = (np.ascontiguousarray(g) for g in np.meshgrid(v, v, indexing="ij"))
    check(*binary("ATAN2", y, x), atol=1e-6)


# ---- n-ary, like-shaped and shape builtins -------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_add_n(dtype):
    w = Writer()
    xs = [w.input(f"x{k}", S, dtype) for k in range(3)]
    w.output(w.op("ADD_N", xs, S, out_dtype=dtype))
    if dtype == np.float32:
        check(w, {f"x{k}": f32(*S, lo=-1e3, hi=1e3) for k in range(3)})
    else:
        exact(w, {f"x{k}": ints(np.int32, *S, lo=-10**6, hi=10**6) for k in range(3)}, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_zeros_like(dtype):
    x = CAST_CASES[np.dtype(dtype)]
    exact(*unary("ZEROS_LIKE", x), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.bool_])
def test_fill_from_shape(dtype):
    """FILL whose dims are SHAPE of a graph input (a constant once converted), value a graph input."""
    w = Writer()
    x = w.input("x", S)
    dims = w.op("SHAPE", [x], [3], "ShapeOptions", out_dtype=np.int32, out_type=2)
    w.output(w.op("FILL", [dims, w.input("v", [], dtype)], S, out_dtype=dtype))
    exact(w, {"x": f32(*S), "v": np.array(-3 if dtype != np.bool_ else True, dtype)}, dtype)


def test_fill_constant_value():
    w = Writer()
    fill = w.op("FILL", [w.const(np.array([3, 1, 7], np.int64)), w.scalar(2.5, np.float32)], [3, 1, 7])
    w.output(w.op("ADD", [w.input("x", S), fill], S, "AddOptions"))
    check(w, {"x": f32(*S)})


@pytest.mark.parametrize("out_type,dtype", [(2, np.int32), (4, np.int64)])
def test_shape_is_a_constant(out_type, dtype):
    w = Writer()
    w.output(w.op("SHAPE", [w.input("x", S)], [3], "ShapeOptions", out_dtype=dtype, out_type=out_type))
    m = exact(w, {"x": f32(*S)}, dtype)
    assert not m.nodes


def test_sum_over_range_of_rank():
    """SUM(x, RANGE(0, RANK(x), 1)), as TensorFlow writes a reduction over every axis: constant axes."""
    w = Writer()
    x = w.input("x", S)
    rank = w.op("RANK", [x], [], out_dtype=np.int32)
    axes = w.op("RANGE", [w.scalar(0, np.int32), rank, w.scalar(1, np.int32)], [3], out_dtype=np.int32)
    w.output(w.op("SUM", [x, axes], [], "ReducerOptions", keep_dims=False))
    m = check(w, {"x": f32(*S)})
    assert [n.op for n in m.nodes] == ["Reduce"]


@pytest.mark.parametrize("start,limit,delta", [(3, -8, -3), (0, 7, 1), (5, 6, 2), (0.5, 3.7, 0.4), (-1.0, 1.0, 0.1),
                                               (2**40, 2**40 + 10, 3)])
def test_range_of_constants(start, limit, delta):
    dtype = np.float32 if isinstance(start, float) else np.int64 if start > 2**31 else np.int32
    n = (int(np.ceil(abs((np.float32(limit) - np.float32(start)) / np.float32(delta)))) if dtype == np.float32
         else -(-abs(limit - start) // abs(delta)))
    w = Writer()
    r = w.op("RANGE", [w.scalar(v, dtype) for v in (start, limit, delta)], [n], out_dtype=dtype)
    w.output(w.op("ADD", [w.input("x", [2, n], dtype), r], [2, n], "AddOptions", out_dtype=dtype))
    exact(w, {"x": np.zeros((2, n), dtype)}, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.bool_])
def test_broadcast_to(dtype):
    x = CAST_CASES[np.dtype(dtype)][:1, :, :1].reshape(5, 1)
    w = Writer()
    w.output(w.op("BROADCAST_TO", [w.input("x", x.shape, x.dtype), w.const(np.array(S, np.int32))], S,
                  out_dtype=dtype))
    exact(w, {"x": x}, dtype)


def test_broadcast_args_of_shapes():
    """BROADCAST_TO(x, BROADCAST_ARGS(SHAPE(x), SHAPE(y))) + y, as exporters write a broadcast."""
    w = Writer()
    x, y = w.input("x", [5, 1]), w.input("y", [3, 1, 7])
    sx = w.op("SHAPE", [x], [2], "ShapeOptions", out_dtype=np.int64, out_type=4)
    sy = w.op("SHAPE", [y], [3], "ShapeOptions", out_dtype=np.int64, out_type=4)
    full = w.op("BROADCAST_ARGS", [sx, sy], [3], out_dtype=np.int64)
    w.output(w.op("ADD", [w.op("BROADCAST_TO", [x, full], S), y], S, "AddOptions"))
    w.output(full)
    check(w, {"x": f32(5, 1), "y": f32(3, 1, 7)}, rtol=0, atol=0)


# ---- normalisations, pooling and reductions ------------------------------------------------

def test_log_softmax():
    x = f32(*S, lo=-20, hi=20)
    x[0] += np.float32(1e4)  # far from 0: the max is taken out first
    x[1, 0] = -1e4  # one tiny probability, whose log must not underflow
    check(*unary("LOG_SOFTMAX", x))


def test_l2_normalization():
    x = f32(*S, lo=-3, hi=3)
    x[0, 0] = 0  # divides by LiteRT's 1e-6 floor
    x[0, 1] = f32(7, lo=-1e-7, hi=1e-7)
    check(*unary("L2_NORMALIZATION", x, options="L2NormOptions", fused_activation_function=NONE))


def test_local_response_normalization():
    x = f32(2, 5, 6, 9, lo=-3, hi=3)
    check(*unary("LOCAL_RESPONSE_NORMALIZATION", x, options="LocalResponseNormalizationOptions", radius=2, bias=1.5,
                 alpha=0.3, beta=0.6))


@pytest.mark.parametrize("pad,stride,k,act", [(SAME, 2, 3, NONE), (VALID, 1, 2, RELU6), (SAME, 3, 2, RELU),
                                              (VALID, 2, 3, RELU_N1_TO_1)])
def test_l2_pool(pad, stride, k, act):
    x = f32(2, 9, 8, 3, lo=-10, hi=10)
    oh, ow = ((-(-9 // stride), -(-8 // stride)) if pad == SAME else ((9 - k) // stride + 1, (8 - k) // stride + 1))
    w = Writer()
    w.output(w.op("L2_POOL_2D", [w.input("x", x.shape)], [2, oh, ow, 3], "Pool2DOptions", padding=pad, stride_h=stride,
                  stride_w=stride, filter_height=k, filter_width=k, fused_activation_function=act))
    check(w, {"x": x})


@pytest.mark.parametrize("code", ["REDUCE_ANY", "REDUCE_ALL"])
@pytest.mark.parametrize("axes,keep", [([1, -1], False), ([0], True), ([2, 0, 1], True)])
def test_reduce_any_all(code, axes, keep):
    x = R.random(S) < (0.2 if code == "REDUCE_ANY" else 0.8)
    x[0] = code == "REDUCE_ALL"  # a slice that is all true (ALL) or all false (ANY)
    reduced = {a % 3 for a in axes}
    out = [1 if i in reduced else d for i, d in enumerate(S) if keep or i not in reduced]
    w = Writer()
    w.output(w.op(code, [w.input("x", S, np.bool_), w.const(np.array(axes, np.int32))], out, "ReducerOptions",
                  out_dtype=np.bool_, keep_dims=keep))
    exact(w, {"x": x}, np.bool_)


# ---- refusals ------------------------------------------------------------------------------

REFUSALS = {
    "CAST": (lambda w: w.op("CAST", [w.input("x", [4], np.int64)], [4]), "v0's Cast has no such pair"),
    "POW int32": (lambda w: w.op("POW", [w.input("x", [4], np.int32), w.const(np.array(2, np.int32))], [4],
                                 out_dtype=np.int32), "float32 only"),
    "POW computed exponent": (lambda w: w.op("POW", [w.input("x", [2, 3]), w.input("p", [2, 3])], [2, 3]),
                              "computed exponent"),
    "POW mixed exponents": (lambda w: w.op("POW", [w.input("x", [3]), w.const(np.array([2, 0.5, 1], np.float32))],
                                           [3]), "first exponent is integral"),
    "FLOOR_DIV": (lambda w: w.op("FLOOR_DIV", [w.input("a", [3], np.int64), w.input("b", [3], np.int64)], [3],
                                 out_dtype=np.int64), "of int64"),
    "ZEROS_LIKE": (lambda w: w.op("ZEROS_LIKE", [w.input("x", [3], np.bool_)], [3], out_dtype=np.bool_), "of bool"),
    "L2_NORMALIZATION": (lambda w: w.op("L2_NORMALIZATION", [w.input("x", [2, 3])], [2, 3], "L2NormOptions",
                                        fused_activation_function=RELU), "rejects it too"),
    "L2_POOL_2D": (lambda w: w.op("L2_POOL_2D", [w.input("x", [1, 4, 4, 2])], [1, 2, 2, 2], "Pool2DOptions",
                                  padding=VALID, stride_h=2, stride_w=2, filter_height=2, filter_width=2,
                                  fused_activation_function=TANH), "ignores it"),
    "RANGE computed": (lambda w: w.op("RANGE", [w.input("s", [], np.int32), w.const(np.array(5, np.int32)),
                                                w.const(np.array(1, np.int32))], [5], out_dtype=np.int32),
                       "start must be a constant"),
    "RANGE zero delta": (lambda w: w.op("RANGE", [w.const(np.array(v, np.int32)) for v in (0, 5, 0)], [0],
                                        out_dtype=np.int32), "LiteRT rejects it"),
    "FILL": (lambda w: w.op("FILL", [w.input("d", [2], np.int32), w.const(np.array(1.0, np.float32))], [2, 2]),
             "dims must be a constant"),
    "BROADCAST_TO": (lambda w: w.op("BROADCAST_TO", [w.input("x", [1, 3]), w.input("s", [2], np.int32)], [2, 3]),
                     "shape must be a constant"),
    "REDUCE_ANY": (lambda w: w.op("REDUCE_ANY", [w.input("x", [2, 3], np.bool_), w.input("a", [1], np.int32)], [2],
                                  "ReducerOptions", out_dtype=np.bool_, keep_dims=False), "axes must be a constant"),
    "LOG_SOFTMAX": (lambda w: w.op("LOG_SOFTMAX", [w.input("x", [2, 3], np.int32)], [2, 3], out_dtype=np.int32),
                    "of int32"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusal_names_the_operator(case):
    build, why = REFUSALS[case]
    w = Writer()
    w.output(build(w))
    code = case.split()[0]
    got = reasons(w)
    assert list(got) == [code] and code in got[code] and why in got[code], got


@pytest.mark.parametrize("shape,fft_w", [((3, 1, 400), 512), ((2, 4, 1, 17), 32), ((5, 3, 20), 16)])
def test_rfft2d_abs_real_imag(shape, fft_w):
    """RFFT2D at fft_length [1, w] (YAMNet's spectrogram: frames zero-padded to a power of two, as
    LiteRT requires), then COMPLEX_ABS, REAL and IMAG; more than one row keeps the first, a
    shorter w truncates."""
    w = Writer()
    x = w.input("x", list(shape))
    bins = fft_w // 2 + 1
    spec_shape = [*shape[:-2], 1, bins]
    spec = w.op("RFFT2D", [x, w.const(np.array([1, fft_w], np.int32))], spec_shape, out_dtype=np.complex64)
    for code in ("COMPLEX_ABS", "REAL", "IMAG"):
        w.output(w.op(code, [spec], spec_shape))
    check(w, {"x": f32(*shape, lo=-1, hi=1)}, rtol=1e-4, atol=2e-5 * np.sqrt(fft_w))


def test_rfft2d_squeezed_and_cast():
    """BirdNET's spectrogram: RFFT2D, SQUEEZE of its unit row, CAST complex64 -> float32 (the real
    part, as LiteRT's static_cast of std::real)."""
    w = Writer()
    x = w.input("x", [3, 1, 16])
    spec = w.op("RFFT2D", [x, w.const(np.array([1, 16], np.int32))], [3, 1, 9], out_dtype=np.complex64)
    flat = w.op("SQUEEZE", [spec], [3, 9], "SqueezeOptions", out_dtype=np.complex64, squeeze_dims=[1])
    w.output(w.op("CAST", [flat], [3, 9]))
    check(w, {"x": f32(3, 1, 16, lo=-1, hi=1)}, rtol=1e-4, atol=1e-4)


def test_complex_graph_output_is_reported():
    w = Writer()
    x = w.input("x", [2, 1, 8])
    w.output(w.op("RFFT2D", [x, w.const(np.array([1, 8], np.int32))], [2, 1, 5], out_dtype=np.complex64))
    with pytest.raises(msv0.UnsupportedOpError, match=r"graph output \(complex64\)"):
        convert(w.finish())

"""int8 layout ops against tests/int8_ref.py (r1.1's int8 kernels), exact equality: equal and
different quant params, zero points at -128/127, saturation, and the r1.1 rules that differ
from fp32 (which scale ratio, copy or requantize, what each kernel ignores)."""
import numpy as np
import pytest

from msv0.errors import ModelError

from int8_ref import (mbqm, qp, quantize_round_parameter, requant_double, requant_float, resize_bilinear_s8,
                      resize_nearest_index)
from oprun import Const, run_op

I8 = [np.int8]
# (s_in, zp_in, s_out, zp_out): equal, shrinking, saturating, zero points at the limits
PARAMS = [(0.1, 3, 0.1, 3), (0.1, 3, 0.15, -1), (0.05, -128, 0.01, 127), (0.3, 127, 0.7, -128),
          (0.02, 0, 0.0123456, 5), (0.0962, -53, 0.0728, 10)]  # the last: s_in/s_out ≠ s_in·(1/s_out)


def q8(rng, shape):
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    x.reshape(-1)[:2] = [-128, 127]
    return x


def run1(op, inputs, p, **attrs):
    s_in, zp_in, s_out, zp_out = p
    n_in = sum(not isinstance(v, Const) for v in inputs)
    return run_op(op, inputs, out_dtypes=I8, in_quant=[qp(s_in, zp_in)] * n_in, out_quant=[qp(s_out, zp_out)],
                  **attrs)[0]


@pytest.mark.parametrize("p", PARAMS, ids=str)
@pytest.mark.parametrize("axis,b_shape", [(-2, (2, 4, 5)), (0, (1, 3, 5)), (2, (2, 3, 1))])
def test_concat_s8(rng, p, axis, b_shape):
    """A copied input (equal params) beside requantized ones, along an inner axis (rows of the
    output), the first (one run per input) and the last."""
    a, b, c = q8(rng, (2, 3, 5)), q8(rng, b_shape), q8(rng, (2, 3, 5))
    s_in, zp_in, s_out, zp_out = p
    y = run_op("Concat", [a, b, c], out_dtypes=I8, in_quant=[qp(s_in, zp_in), qp(0.08, -7), qp(s_out, zp_out)],
               out_quant=[qp(s_out, zp_out)], axis=axis, native=True)[0]
    want_a = a if (s_in, zp_in) == (s_out, zp_out) else requant_float(a, s_in, zp_in, s_out, zp_out)
    want = np.concatenate([want_a, requant_float(b, 0.08, -7, s_out, zp_out), c], axis)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("threads", [1, 2])
def test_concat_s8_rows_across_threads(rng, isa, threads):
    """Enough output rows that a 2-thread pool splits them, and that a short requantized piece
    (3 channels a pixel) takes several passes through the lookup's buffer; a copied piece beside."""
    a, b, c = q8(rng, (1, 181, 97, 3)), q8(rng, (1, 181, 97, 64)), q8(rng, (1, 181, 97, 5))
    y = run_op("Concat", [a, b, c], out_dtypes=I8, in_quant=[qp(0.2, 3), qp(0.05, -2), qp(0.1, 3)],
               out_quant=[qp(0.1, 3)], axis=3, num_threads=threads)[0]
    want = [requant_float(a, 0.2, 3, 0.1, 3), requant_float(b, 0.05, -2, 0.1, 3), c]
    np.testing.assert_array_equal(y, np.concatenate(want, 3))


@pytest.mark.parametrize("p", PARAMS, ids=str)
def test_reshape_depth_batch_s8(rng, p):
    x = q8(rng, (4, 2, 3, 8))
    want = x if p[:2] == p[2:] else requant_float(x, *p)
    np.testing.assert_array_equal(run1("Reshape", [x], p, shape=[8, 24]), want.reshape(8, 24))
    d2s = want.reshape(4, 2, 3, 2, 2, 2).transpose(0, 1, 3, 2, 4, 5).reshape(4, 4, 6, 2)
    np.testing.assert_array_equal(run1("DepthToSpace", [x], p, blockSize=2), d2s)
    b2s = want.reshape(2, 2, 1, 2, 3, 8).transpose(2, 3, 0, 4, 1, 5).reshape(1, 4, 6, 8)
    np.testing.assert_array_equal(run1("BatchToSpace", [x], p, blockShape=[2, 2], crops=[0, 0, 0, 0]), b2s)


@pytest.mark.parametrize("p", PARAMS, ids=str)
def test_squeeze_always_requantizes(rng, p):
    x = q8(rng, (1, 7, 1, 3))
    np.testing.assert_array_equal(run1("Squeeze", [x], p, axis=[0, 2]), requant_float(x, *p).reshape(7, 3))


def test_byte_movers_ignore_quant_params(rng):
    """Unsqueeze reads its output params from the input; ExpandDims, Transpose, StridedSlice
    never read them."""
    x = q8(rng, (2, 3, 4))
    p = (0.1, 3, 0.7, -100)
    np.testing.assert_array_equal(run1("Unsqueeze", [x], p, axis=[1]), x.reshape(2, 1, 3, 4))
    np.testing.assert_array_equal(run1("ExpandDims", [x], p, dim=3), x.reshape(2, 3, 4, 1))
    np.testing.assert_array_equal(run1("Transpose", [x], p, perm=[2, 0, 1]), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(run1("StridedSlice", [x], p, begin=[0, 2, 0], end=[2, 0, 4], stride=[1, -1, 2]),
                                  x[:, 2:0:-1, 0:4:2])


@pytest.mark.parametrize("p", PARAMS, ids=str)
def test_split_divides_scales(rng, p):
    x = q8(rng, (3, 6))
    s_in, zp_in, s_out, zp_out = p
    outs = run_op("Split", [x], outputs=2, out_dtypes=I8 * 2, in_quant=[qp(s_in, zp_in)],
                  out_quant=[qp(s_in, zp_in), qp(s_out, zp_out)], numberSplit=2, sizeSplits=[2, -1], splitDim=1)
    np.testing.assert_array_equal(outs[0], x[:, :2])
    want = x[:, 2:] if p[:2] == p[2:] else requant_float(x[:, 2:], *p, divide=True)
    np.testing.assert_array_equal(outs[1], want)


@pytest.mark.parametrize("p", PARAMS, ids=str)
def test_slice_double_ratio(rng, p):
    x = q8(rng, (2, 5, 4))
    s_in, zp_in, s_out, zp_out = p
    alpha = float(np.float32(s_in)) / float(np.float32(s_out))
    y = run1("Slice", [x], p, axes=[1, 2], begin=[1, 0], size=[3, -1])
    np.testing.assert_array_equal(y, requant_double(x[:, 1:4], alpha, zp_in, zp_out))


@pytest.mark.parametrize("p", PARAMS, ids=str)
def test_crop_single_offset_every_dim(rng, p):
    x = q8(rng, (2, 6, 7, 5))
    ref = np.zeros((2, 3, 4, 2), np.int8)
    y = run_op("Crop", [x, ref], out_dtypes=I8, in_quant=[qp(*p[:2]), qp(1, 0)], out_quant=[qp(*p[2:])],
               axis=1, offsets=[2])[0]
    np.testing.assert_array_equal(y, requant_float(x[:, 2:5, 2:6, 2:4], *p, divide=True))
    y = run_op("Crop", [x, ref], out_dtypes=I8, in_quant=[qp(*p[:2]), qp(1, 0)], out_quant=[qp(*p[2:])],
               axis=1, offsets=[1, 3, 0])[0]
    np.testing.assert_array_equal(y, requant_float(x[:, 1:4, 3:7, 0:2], *p, divide=True))


@pytest.mark.parametrize("p", PARAMS, ids=str)
def test_gather_and_gather_nd(rng, p):
    x = q8(rng, (3, 5, 2))
    s_in, zp_in, s_out, zp_out = p
    alpha = s_in / s_out
    y = run1("Gather", [x, Const(np.array([[4, 0], [2, 2]], np.int32))], p, axis=1)
    np.testing.assert_array_equal(y, requant_double(x[:, [[4, 0], [2, 2]]], alpha, zp_in, zp_out))
    idx = np.array([[22, 41], [0, 3]], np.int8)  # with scale 0.1, zp 2: (2, 4) and (0, 0)
    y = run1("GatherNd", [x, Const(idx, quant=qp(0.1, 2))], p)
    np.testing.assert_array_equal(y, requant_double(x[[2, 0], [4, 0]], alpha, zp_in, zp_out))


def test_pad_s8(rng):
    x = q8(rng, (2, 3, 4))
    p = (0.1, -3, 0.1, -3)
    y = run1("Pad", [x], p, paddings=[0, 1, 2, 0, 1, 1], constantValue=20.0, native=True)  # 200 − 3 = 197 wraps to −59
    want = np.full((3, 5, 6), -59, np.int8)
    want[:2, 2:, 1:5] = x
    np.testing.assert_array_equal(y, want)
    pads = np.array([0, 0, 1, 2, 2, 1], np.int32)
    y = run1("Pad", [x, Const(pads)], p, paddingMode=1, native=True)
    np.testing.assert_array_equal(y, np.pad(x, [(0, 0), (1, 2), (2, 1)], mode="reflect"))
    with pytest.raises(ModelError, match="equal input and output"):
        run1("Pad", [x], (0.1, -3, 0.2, -3), paddings=[0, 1, 2, 0, 1, 1])
    with pytest.raises(ModelError, match="input 1"):
        run1("Pad", [x], p, paddings=[0, 1, 2, 0, 1, 1], paddingMode=2)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(5, 7), (2, 3), (1, 1)], ids=str)
def test_resize_nearest_s8(rng, align, size):
    x = q8(rng, (2, 3, 4, 3))
    ys, xs = resize_nearest_index(3, size[0], align), resize_nearest_index(4, size[1], align)
    moved = x[:, ys][:, :, xs]
    np.testing.assert_array_equal(run1("Resize", [x], (0.1, 3, 0.1000005, 3), method=1, newHeight=size[0],
                                       newWidth=size[1], alignCorners=align, native=True), moved)  # |Δscale| < 1e-6: a copy
    y = run1("Resize", [x], (0.1, 3, 0.3, -20), method=1, newHeight=size[0], newWidth=size[1], alignCorners=align)
    m, left, right = quantize_round_parameter(float(np.float32(0.1) / np.float32(0.3)))
    want = mbqm(moved.astype(np.int64) - 3, m, left + 20, right + 20) - 20
    np.testing.assert_array_equal(y, np.clip(want, -128, 127))


@pytest.mark.parametrize("zp_in", [0, 5, -128])
@pytest.mark.parametrize("align", [False, True])
def test_resize_bilinear_s8_ignores_output_params(rng, zp_in, align):
    x = q8(rng, (2, 3, 5, 4))
    x[0] = -128
    y = run1("Resize", [x], (0.1, zp_in, 0.9, 50), method=0, newHeight=7, newWidth=4, alignCorners=align)
    np.testing.assert_array_equal(y, resize_bilinear_s8(x, 7, 4, align, zp_in))


@pytest.mark.parametrize("zp_in", [0, 5])
def test_resize_bilinear_s8_in_row_blocks(rng, zp_in):
    """An output of 70 rows x 512 x 64 runs as blocks of 32 rows (8 MiB of int64 temporaries)."""
    x = q8(rng, (1, 9, 40, 64))
    y = run1("Resize", [x], (0.1, zp_in, 0.9, 50), method=0, newHeight=70, newWidth=512, alignCorners=False)
    np.testing.assert_array_equal(y, resize_bilinear_s8(x, 70, 512, False, zp_in))


def test_space_to_batch_pads_with_output_zero_point(rng):
    x = q8(rng, (1, 3, 2, 2))
    y = run1("SpaceToBatch", [x], (0.1, 3, 0.5, 77), blockShape=[2, 2], paddings=[1, 0, 0, 2])
    padded = np.full((1, 4, 4, 2), 77, np.int8)
    padded[:, 1:, :2] = x
    np.testing.assert_array_equal(y, padded.reshape(1, 2, 2, 2, 2, 2).transpose(2, 4, 0, 1, 3, 5).reshape(4, 2, 2, 2))


@pytest.mark.parametrize("ordered", [True, False])
def test_topk_s8_stable_ties(ordered):
    x = np.array([[3, -1, 3, 7, -1, 3]], np.int8)
    vals, idx = run_op("TopK", [x], outputs=2, out_dtypes=[np.int8, np.int32], k=4, sorted=ordered)
    order = [3, 0, 2, 5] if ordered else [1, 4, 0, 2]
    np.testing.assert_array_equal(idx, [order])
    np.testing.assert_array_equal(vals, x[:, order])


@pytest.mark.parametrize("op,attrs", [("Concat", {"axis": 0}), ("Reshape", {"shape": [6]}),
                                      ("Squeeze", {"axis": []}), ("Slice", {"begin": [0], "size": [1]})])
def test_quant_param_errors_name_the_node(rng, op, attrs):
    x = q8(rng, (2, 3))
    with pytest.raises(ModelError, match=f"{op.lower()}_node.*output 0 needs exactly one quantParam, has 0"):
        run_op(op, [x], out_dtypes=I8, in_quant=[qp(0.1, 0)], **attrs)
    with pytest.raises(ModelError, match=f"{op.lower()}_node.*needs exactly one quantParam, has 2"):
        run_op(op, [x], out_dtypes=I8, in_quant=[qp(0.1, 0) * 2], out_quant=[qp(0.1, 0)], **attrs)


def test_crop_negative_axis_and_errors(rng):
    x = q8(rng, (5, 6))
    p = (0.1, 0, 0.1, 0)
    y = run_op("Crop", [x, np.zeros((2, 3), np.int8)], out_dtypes=I8, in_quant=[qp(0.1, 0), qp(1, 0)],
               out_quant=[qp(0.1, 0)], axis=-1, offsets=[2])[0]  # r1.1 compares the axis raw: every dim
    np.testing.assert_array_equal(y, x[2:4, 2:5])
    for axis, offsets, match in [(-1, [1, 1], "negative axis"), (2, [1], "out of range")]:
        with pytest.raises(ModelError, match=match):
            run_op("Crop", [x, np.zeros((2, 3), np.int8)], out_dtypes=I8, in_quant=[qp(*p[:2]), qp(1, 0)],
                   out_quant=[qp(*p[2:])], axis=axis, offsets=offsets)
    with pytest.raises(ModelError, match="ranks 1 to 4"):
        run1("Crop", [q8(rng, (1, 1, 1, 1, 2)), np.zeros((1, 1, 1, 1, 1), np.int8)], p, axis=0, offsets=[0])


def test_gather_index_dtype_errors(rng):
    x = q8(rng, (4, 3))
    p = (0.1, 0, 0.2, 0)
    with pytest.raises(ModelError, match="gather_node.*int32"):
        run1("Gather", [x, Const(np.array([1], np.int64))], p, axis=0)
    with pytest.raises(ModelError, match="gathernd_node.*indices must be int8"):
        run1("GatherNd", [x, Const(np.array([[1]], np.int32))], p)


def test_resize_bilinear_rounded_ratio_past_the_input(rng):
    with pytest.raises(ModelError, match="read past the input"):
        run1("Resize", [q8(rng, (1, 2, 1, 1))], (0.1, 0, 0.1, 0), method=0, newHeight=3000, newWidth=1)

"""Array ops against NumPy references (format-v0.md §5)."""
import msv0
import numpy as np
import pytest
from oprun import Const, ort_run, run_op

I32 = np.int32


def test_crop_offsets_from_axis(rng):
    x = rng.standard_normal((2, 5, 7, 3)).astype(np.float32)
    ref = np.zeros((2, 3, 4, 3), np.float32)
    (y,) = run_op("Crop", [x, ref], axis=1, offsets=[1, 2])
    np.testing.assert_array_equal(y, x[:, 1:4, 2:6, :])


def test_crop_single_offset_applies_to_axis_only(rng):
    x = rng.standard_normal((1, 6, 6, 2)).astype(np.float32)
    (y,) = run_op("Crop", [x, np.zeros((1, 4, 4, 2), np.float32)], axis=-3, offsets=[2])
    np.testing.assert_array_equal(y, x[:, 2:6, 0:4, :])


def test_crop_out_of_bounds():
    with pytest.raises(msv0.ModelError):
        run_op("Crop", [np.zeros((1, 4, 4, 2), np.float32), np.zeros((1, 3, 3, 2), np.float32)], axis=1, offsets=[2])


@pytest.mark.parametrize("start,limit,delta", [(0, 10, 3), (5, -4, -2), (3, 3, 1), (4, 1, 1)])
def test_range_tensors_int(start, limit, delta):
    (y,) = run_op("Range", [Const(np.array([start], I32)), Const(np.array([limit], I32)), Const(np.array([delta], I32))],
                  out_dtypes=[I32])
    np.testing.assert_array_equal(y, np.arange(start, limit, delta, dtype=I32))


def test_range_tensors_float_repeated_addition():
    """r1.1 adds delta step by step in float32: over thousands of steps that drifts from start + i·delta."""
    s, l, d = np.float32(0.1), np.float32(2000.0), np.float32(0.3)
    (y,) = run_op("Range", [Const(np.array([s])), Const(np.array([l])), Const(np.array([d]))])
    want, acc = [], s
    for _ in range(int(np.ceil((l - s) / d))):
        want.append(acc)
        acc = np.float32(acc + d)
    np.testing.assert_array_equal(y, np.array(want, np.float32))
    assert not np.array_equal(y, s + np.arange(len(want), dtype=np.float32) * d)


def test_range_attributes():
    (y,) = run_op("Range", [], out_dtypes=[I32], start=2, limit=11, delta=4)
    np.testing.assert_array_equal(y, np.array([2, 6, 10], I32))


def test_range_bad():
    with pytest.raises(msv0.ModelError):
        run_op("Range", [], out_dtypes=[I32], start=0, limit=5, delta=0)
    with pytest.raises(msv0.ModelError):
        run_op("Range", [], out_dtypes=[I32], start=5, limit=0, delta=1)
    with pytest.raises(msv0.ModelError, match="runtime data"):
        run_op("Range", [np.array([0], I32), Const(np.array([5], I32)), Const(np.array([1], I32))], out_dtypes=[I32])


def test_tile_attrs_and_input(rng):
    x = rng.standard_normal((2, 3, 1)).astype(np.float32)
    (y,) = run_op("Tile", [x], multiples=[3, 2], dims=[2, 0])
    np.testing.assert_array_equal(y, np.tile(x, (2, 1, 3)))
    (y,) = run_op("Tile", [x, Const(np.array([1, 4], I32))])
    np.testing.assert_array_equal(y, np.tile(x, (1, 4, 1)))
    with pytest.raises(msv0.ModelError):
        run_op("Tile", [x], multiples=[2], dims=[3])
    with pytest.raises(msv0.ModelError):
        run_op("Tile", [x, np.array([1, 4], I32)])


def test_fill_and_constant_of_shape():
    (y,) = run_op("Fill", [np.array([2.5], np.float32)], dims=[2, 3])
    np.testing.assert_array_equal(y, np.full((2, 3), 2.5, np.float32))
    (y,) = run_op("ConstantOfShape", [Const(np.array([3, 1, 2], np.int64))], dataType=43, value=[7.0])
    np.testing.assert_array_equal(y, np.full((3, 1, 2), 7, np.float32))
    (y,) = run_op("ConstantOfShape", [Const(np.array([4], I32))], out_dtypes=[I32], dataType=34, value=[3.0])
    np.testing.assert_array_equal(y, np.full(4, 3, I32))
    with pytest.raises(msv0.ModelError):
        run_op("Fill", [np.array([1], np.float32)], dims=[2, -1])
    with pytest.raises(msv0.ModelError):
        run_op("ConstantOfShape", [Const(np.array([2], I32))], dataType=12)


def test_rank_zeros_like(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    (y,) = run_op("Rank", [x])
    np.testing.assert_array_equal(y, np.array([3], np.float32))
    (y,) = run_op("ZerosLike", [x])
    np.testing.assert_array_equal(y, np.zeros_like(x))


def onehot_ref(idx, depth, on, off, axis, wrap):
    idx = np.where((idx < 0) & wrap, idx + depth, idx)
    hot = np.expand_dims(idx, axis) == np.arange(depth).reshape([depth] + [1] * (idx.ndim - (axis % (idx.ndim + 1))))
    return np.where(hot, on, off).astype(np.float32)


@pytest.mark.parametrize("axis", [-1, 0, 1, -2])
def test_onehot(axis):
    idx = np.array([[0, 2, -1], [5, 1, 3]], I32)
    (y,) = run_op("OneHot", [idx, Const(np.array(4, I32)), Const(np.array([-1.0, 2.0], np.float32))], axis=axis)
    ax = idx.ndim if axis == -1 else axis + idx.ndim + 1 if axis < 0 else axis
    want = onehot_ref(idx, 4, 2.0, -1.0, ax, True)
    np.testing.assert_array_equal(y, want)
    (y,) = run_op("OneHot", [idx, Const(np.array(4, I32)), np.array([5.0], np.float32), np.array([0.5], np.float32)],
                  axis=axis)
    np.testing.assert_array_equal(y, onehot_ref(idx, 4, 5.0, 0.5, ax, False))


def test_onehot_bad_axis():
    with pytest.raises(msv0.ModelError):
        run_op("OneHot", [np.array([1], I32), Const(np.array(4, I32)), Const(np.array([0, 1], np.float32))], axis=3)


def test_where_scalar_broadcast(rng):
    c = rng.random((2, 3)) > 0.5
    x = rng.standard_normal((2, 3)).astype(np.float32)
    (y,) = run_op("Where", [c, x, np.array([9.0], np.float32)])
    np.testing.assert_array_equal(y, np.where(c, x, np.float32(9)))
    with pytest.raises(msv0.ModelError):
        run_op("Where", [c, x, np.zeros(2, np.float32)])


def test_where_one_input_const_and_runtime():
    c = np.array([[True, False], [False, True]])
    (y,) = run_op("Where", [Const(c)], out_dtypes=[I32])
    np.testing.assert_array_equal(y, np.argwhere(c))
    (y,) = run_op("Where", [c], out_dtypes=[I32])  # planned per run by the data-flow executor
    np.testing.assert_array_equal(y, np.argwhere(c))


def test_select(rng):
    c = rng.random((3, 1)) > 0.5
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y_ = rng.standard_normal((1, 4)).astype(np.float32)
    (y,) = run_op("Select", [c, x, y_])
    np.testing.assert_array_equal(y, np.where(c, x, y_))
    rows = np.array([True, False, True])
    x2 = rng.standard_normal((3, 2)).astype(np.float32)
    (y,) = run_op("Select", [rows, x, np.zeros((3, 4), np.float32)])
    np.testing.assert_array_equal(y, np.where(rows[:, None], x, 0))
    with pytest.raises(msv0.ModelError):
        run_op("Select", [c, x, x2])


@pytest.mark.parametrize("axis", [0, 2, -1, -3])
def test_stack_unstack(rng, axis):
    xs = [rng.standard_normal((2, 5)).astype(np.float32) for _ in range(3)]
    (y,) = run_op("Stack", xs, axis=axis)
    np.testing.assert_array_equal(y, np.stack(xs, axis))
    x = rng.standard_normal((3, 2, 3)).astype(np.float32)
    outs = run_op("Unstack", [x], outputs=3, axis=axis if axis != 2 else 0)
    a = axis if axis != 2 else 0
    for k, o in enumerate(outs):
        np.testing.assert_array_equal(o, np.take(x, k, a))


def test_stack_unstack_bad():
    with pytest.raises(msv0.ModelError):
        run_op("Stack", [np.zeros(2, np.float32), np.zeros(3, np.float32)])
    with pytest.raises(msv0.ModelError):
        run_op("Stack", [np.zeros(2, np.float32)], axis=3)
    with pytest.raises(msv0.ModelError):
        run_op("Unstack", [np.zeros((2, 3), np.float32)], outputs=2, axis=1)


def test_reverse(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    (y,) = run_op("Reverse", [x], axis=[0, -1])
    np.testing.assert_array_equal(y, x[::-1, :, ::-1])
    with pytest.raises(msv0.ModelError):
        run_op("Reverse", [x], axis=[1, -2])


@pytest.mark.parametrize("seq_axis,batch_axis", [(1, 0), (0, 1), (-1, 0)])
def test_reverse_sequence(rng, seq_axis, batch_axis):
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    lens = np.minimum(np.array([0, 2, 3, 4, 1][: x.shape[batch_axis]], np.int64), x.shape[seq_axis])
    (y,) = run_op("ReverseSequence", [x, lens], seqAxis=seq_axis, batchAxis=batch_axis)
    want = x.copy()
    sa = seq_axis % 3
    for b, n in enumerate(lens):
        for t in range(n):
            src = [slice(None)] * 3
            dst = [slice(None)] * 3
            src[batch_axis] = dst[batch_axis] = b
            src[sa], dst[sa] = n - 1 - t, t
            want[tuple(dst)] = x[tuple(src)]
    np.testing.assert_array_equal(y, want)


def test_reverse_sequence_bad_lengths():
    with pytest.raises(msv0.ModelError):
        run_op("ReverseSequence", [np.zeros((2, 3), np.float32), np.array([1, 4], I32)], seqAxis=1, batchAxis=0)
    with pytest.raises(msv0.ModelError):
        run_op("ReverseSequence", [np.zeros((2, 3), np.float32), np.array([1, 1], I32)], seqAxis=0, batchAxis=0)


def test_broadcast_to(rng):
    x = rng.standard_normal((3, 1)).astype(np.float32)
    (y,) = run_op("BroadcastTo", [x], dstShape=[2, 3, 5])
    np.testing.assert_array_equal(y, np.broadcast_to(x, (2, 3, 5)))
    with pytest.raises(msv0.ModelError):
        run_op("BroadcastTo", [x], dstShape=[2, 5])


def upsample_ref(x, oh, ow, linear):
    n, h, w, c = x.shape
    def m(i, o):
        src = np.arange(o, dtype=np.float32) * np.float32(i / o)
        lo = np.minimum(np.floor(src).astype(int), i - 1)
        return lo, np.minimum(lo + 1, i - 1), src - lo
    y0, y1, fy = m(h, oh)
    x0, x1, fx = m(w, ow)
    out = np.zeros((n, oh, ow, c), np.float32)
    for i in range(oh):
        for j in range(ow):
            if linear:
                top = x[:, y0[i], x0[j]] * (1 - fx[j]) + x[:, y0[i], x1[j]] * fx[j]
                bot = x[:, y1[i], x0[j]] * (1 - fx[j]) + x[:, y1[i], x1[j]] * fx[j]
                out[:, i, j] = top * (1 - fy[i]) + bot * fy[i]
            else:
                out[:, i, j] = x[:, y0[i], x0[j]]
    return out


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample(rng, mode):
    x = rng.standard_normal((2, 3, 5, 3)).astype(np.float32)
    (y,) = run_op("Upsample", [x, Const(np.array([1, 1, 2, 1.5], np.float32))], mode=mode)
    np.testing.assert_allclose(y, upsample_ref(x, 6, 7, mode == "linear"), rtol=1e-6, atol=1e-6)
    (y,) = run_op("Upsample", [x], mode=mode, scales=[3.0, 2.0])
    np.testing.assert_allclose(y, upsample_ref(x, 9, 10, mode == "linear"), rtol=1e-6, atol=1e-6)
    with pytest.raises(msv0.ModelError):
        run_op("Upsample", [x], mode=mode, scales=[0.1, 0.1])


def test_clip(rng):
    x = rng.standard_normal((4, 7)).astype(np.float32) * 3
    (y,) = run_op("Clip", [x], min=-1.0, max=2.0)
    np.testing.assert_array_equal(y, np.clip(x, -1, 2))
    (y,) = run_op("Clip", [x, np.array(0.5, np.float32), Const(np.array(1.0, np.float32))])
    np.testing.assert_array_equal(y, np.clip(x, 0.5, 1))


@pytest.mark.parametrize("k,rows,cols", [(0, 0, 0), (1, 0, 0), (-2, 0, 0), (0, 3, 5), (1, 0, 4)])
def test_matrix_diag(rng, k, rows, cols):
    d = rng.standard_normal((2, 3)).astype(np.float32)
    (y,) = run_op("MatrixDiag", [d], k=k, numRows=rows, numCols=cols, paddingValue=-7.0)
    r = rows if rows > 0 else (3 + max(-k, 0) if cols > 0 else 3 + abs(k))
    c = cols if cols > 0 else (3 + max(k, 0) if rows > 0 else 3 + abs(k))
    want = np.full((2, r, c), -7, np.float32)
    for b in range(2):
        for i in range(3):
            row = i + max(-k, 0)
            want[b, row, row + k] = d[b, i]
    np.testing.assert_array_equal(y, want)


def test_matrix_diag_bad():
    with pytest.raises(msv0.ModelError):
        run_op("MatrixDiag", [np.zeros(3, np.float32)], k=0, numRows=5, numCols=5)


def test_gather_nd(rng):
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    idx = np.array([[[1, 2], [3, 0]], [[0, 0], [2, 1]]], I32)
    (y,) = run_op("GatherNd", [x, idx])
    np.testing.assert_array_equal(y, x[idx[..., 0], idx[..., 1]])
    (y,) = run_op("GatherNd", [x, Const(np.array([[3], [1]], np.int64))])
    np.testing.assert_array_equal(y, x[[3, 1]])
    with pytest.raises(msv0.ModelError):
        run_op("GatherNd", [x, np.array([[4, 0]], I32)])
    with pytest.raises(msv0.ModelError):
        run_op("GatherNd", [x, np.array([[-1, 0]], I32)])


def test_scatter_nd_copies_last_wins(rng):
    upd = rng.standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[1], [3], [1]], I32)
    (y,) = run_op("ScatterND", [Const(np.array([5, 4], I32)), idx, upd])
    want = np.zeros((5, 4), np.float32)
    for k in range(3):
        want[idx[k, 0]] = upd[k]
    np.testing.assert_array_equal(y, want)
    with pytest.raises(msv0.ModelError):
        run_op("ScatterND", [Const(np.array([5, 4], I32)), np.array([[5]], I32), upd[:1]])
    with pytest.raises(msv0.ModelError):
        run_op("ScatterND", [Const(np.array([5, 4], I32)), idx, upd[:, :3]])


def test_sparse_to_dense():
    idx = np.array([[0, 1], [2, 3], [1, 0]], I32)
    vals = np.array([1.5, -2.0, 3.0], np.float32)
    (y,) = run_op("SparseToDense", [idx, Const(np.array([3, 4], I32)), vals, np.array([0.25], np.float32)])
    want = np.full((3, 4), 0.25, np.float32)
    want[idx[:, 0], idx[:, 1]] = vals
    np.testing.assert_array_equal(y, want)
    (y,) = run_op("SparseToDense", [np.array([4, 0], I32), Const(np.array([6], I32)), np.array([9.0], np.float32),
                                    np.array([1.0], np.float32)])
    np.testing.assert_array_equal(y, np.array([9, 1, 1, 1, 9, 1], np.float32))
    with pytest.raises(msv0.ModelError):
        run_op("SparseToDense", [np.array([[3, 0]], I32), Const(np.array([3, 4], I32)), np.array([1.0], np.float32),
                                 np.array([0.0], np.float32)])


def test_embedding_lookup(rng):
    p0 = rng.standard_normal((3, 4)).astype(np.float32)
    p1 = rng.standard_normal((2, 4)).astype(np.float32) * 5
    ids = np.array([[4, 0], [2, 3]], I32)
    table = np.concatenate([p0, p1])
    (y,) = run_op("EmbeddingLookup", [Const(p0), Const(p1), ids])
    np.testing.assert_array_equal(y, table[ids])
    (y,) = run_op("EmbeddingLookup", [Const(p0), Const(p1), ids], maxNorm=1.5)
    rows = table[ids]
    norm = np.linalg.norm(rows, axis=-1, keepdims=True)
    np.testing.assert_allclose(y, np.where(norm > 1.5, rows * 1.5 / norm, rows), rtol=1e-5)
    with pytest.raises(msv0.ModelError):
        run_op("EmbeddingLookup", [Const(p0), Const(p1), np.array([5], I32)])


def topk_ref(x, k, sorted_):
    n = x.shape[-1]
    idx = np.empty(x.shape[:-1] + (k,), np.int64)
    for pos in np.ndindex(x.shape[:-1]):
        row = x[pos]
        if sorted_:
            order = sorted(range(n), key=lambda i: (-row[i], i))
        else:
            order = sorted(range(n), key=lambda i: (row[i], -i))
        idx[pos] = order[:k]
    return np.take_along_axis(x, idx, -1), idx.astype(I32)


@pytest.mark.parametrize("sorted_", [True, False])
@pytest.mark.parametrize("n,k", [(1, 1), (7, 3), (17, 17), (9, 0)])
def test_topk(rng, sorted_, n, k):
    x = rng.integers(-3, 3, (2, 3, n)).astype(np.float32)  # many ties
    v, i = run_op("TopK", [x], outputs=2, out_dtypes=[np.float32, I32], k=k, sorted=sorted_)
    wv, wi = topk_ref(x, k, sorted_)
    np.testing.assert_array_equal(v, wv)
    np.testing.assert_array_equal(i, wi)
    assert i.dtype == np.int32


def test_topk_k_input_and_bad(rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    v, i = run_op("TopK", [x, Const(np.array([2], I32))], outputs=2, out_dtypes=[np.float32, I32])
    wv, wi = topk_ref(x, 2, True)
    np.testing.assert_array_equal(v, wv)
    np.testing.assert_array_equal(i, wi)
    with pytest.raises(msv0.ModelError):
        run_op("TopK", [x], outputs=2, out_dtypes=[np.float32, I32], k=7)


# Unique and one-input Where: data-dependent output shapes.
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_unique_matches_onnxruntime(rng, dtype):
    x = rng.integers(-3, 4, 17).astype(dtype)
    got = run_op("Unique", [x], outputs=2, out_dtypes=[dtype, I32])
    y, _, inverse, _ = ort_run("Unique", [x.astype(np.float32)], n_out=4, sorted=0)  # ORT has no int32 Unique
    np.testing.assert_array_equal(got[0], y.astype(dtype))
    np.testing.assert_array_equal(got[1], inverse.astype(I32))


def test_unique_nan_and_signed_zero():
    x = np.array([np.nan, 0.0, -0.0, np.nan, 1.0], np.float32)
    y, idx = run_op("Unique", [x], outputs=2, out_dtypes=[np.float32, I32])
    np.testing.assert_array_equal(idx, [0, 1, 1, 2, 3])
    assert y.shape == (4,) and np.isnan(y[0]) and np.isnan(y[2])


def test_unique_2d_last_dim():
    y, idx = run_op("Unique", [np.array([[2.0, 2.0, 2.0]], np.float32)], outputs=2, out_dtypes=[np.float32, I32])
    np.testing.assert_array_equal(y, [[2.0]])
    np.testing.assert_array_equal(idx, [[0, 0, 0]])
    with pytest.raises(msv0.ModelError):
        run_op("Unique", [np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)], outputs=2, out_dtypes=[np.float32, I32])


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 1, 3, 2)])
def test_where_one_input_matches_onnx_nonzero(rng, shape):
    c = rng.random(shape) > 0.5
    (got,) = run_op("Where", [c], out_dtypes=[I32])
    (want,) = ort_run("NonZero", [c])
    np.testing.assert_array_equal(got, want.T.astype(I32))
    (got,) = run_op("Where", [Const(c)], out_dtypes=[I32])
    np.testing.assert_array_equal(got, np.argwhere(c))


def test_where_one_input_all_false():
    (got,) = run_op("Where", [np.zeros((2, 3), bool)], out_dtypes=[I32])
    assert got.shape == (0, 2)


def test_where_three_inputs_still_selects(rng):
    c = rng.random((2, 3)) > 0.5
    x = rng.standard_normal((2, 3)).astype(np.float32)
    (y,) = run_op("Where", [c, x, np.array([9.0], np.float32)])
    np.testing.assert_array_equal(y, np.where(c, x, np.float32(9)))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_ones_like(dtype):
    (y,) = run_op("OnesLike", [np.zeros((2, 3), dtype)], out_dtypes=[dtype])
    np.testing.assert_array_equal(y, np.ones((2, 3), dtype))

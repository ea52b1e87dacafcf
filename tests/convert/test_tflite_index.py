"""TFLite indexing, scatter, segment and rearranging builtins (python/msv0/convert/tflite_index.py),
compared with the LiteRT interpreter on graph-input data and indices; integer results exactly."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert.interpreter")

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402
from test_tflite_convert import check, f32, run_litert  # noqa: E402
from tflitewriter import TFLiteWriter  # noqa: E402

R = np.random.default_rng(7)
REFLECT, SYMMETRIC = 0, 1  # tflite MirrorPadMode


def ints(*shape, lo=-9, hi=10, dtype=np.int32):
    return R.integers(lo, hi, shape).astype(dtype)


def exact(w: TFLiteWriter, feeds, *dtypes):
    """LiteRT's values exactly, and the output dtypes given."""
    m = check(w, feeds, rtol=0, atol=0)
    assert [o.dtype for o in m.outputs] == [np.dtype(d) for d in dtypes]
    return m


def data(w, name, shape, dtype):
    """A graph input and a feed for it."""
    return w.input(name, shape, dtype), (f32(*shape, lo=-5, hi=5) if dtype == np.float32 else ints(*shape, dtype=dtype))


@pytest.mark.parametrize("q,index_dtype,dtype", [(2, np.int32, np.float32), (3, np.int64, np.float32),
                                                 (1, np.int32, np.int32), (2, np.int64, np.int64)])
def test_gather_nd(q, index_dtype, dtype):
    shape = (3, 5, 2)
    w = TFLiteWriter()
    x, xv = data(w, "x", shape, dtype)
    i = w.input("i", [2, 3, q], index_dtype)
    w.output(w.op("GATHER_ND", [x, i], [2, 3, *shape[q:]], out_dtype=dtype))
    iv = np.stack([R.integers(0, d, (2, 3)) for d in shape[:q]], -1).astype(index_dtype)
    exact(w, {"x": xv, "i": iv}, dtype)


def _scatter(index_shape, tail, const_index=None, dtype=np.float32):
    w = TFLiteWriter()
    q = index_shape[-1]
    shape = [4, 3, 2][:q] + tail
    i = w.const(const_index) if const_index is not None else w.input("i", index_shape, np.int32)
    u = w.input("u", index_shape[:-1] + tail, dtype)
    w.output(w.op("SCATTER_ND", [i, u, w.const(np.array(shape, np.int32))], shape, out_dtype=dtype))
    return w


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_scatter_nd_adds_repeated_indices(dtype):
    index = np.array([[[1, 2], [3, 0]], [[1, 2], [0, 0]], [[1, 2], [3, 0]]], np.int32)  # [3, 2, 2], repeats
    feeds = {"i": index, "u": f32(3, 2, 5) if dtype == np.float32 else ints(3, 2, 5)}
    exact(_scatter([3, 2, 2], [5], dtype=dtype), feeds, dtype)
    exact(_scatter([3, 2, 2], [5], const_index=index, dtype=dtype), {"u": feeds["u"]}, dtype)


def test_scatter_nd_whole_elements():
    index = np.array([[0, 2, 1], [3, 1, 0], [0, 2, 1], [2, 0, 1]], np.int32)
    exact(_scatter([4, 3], []), {"i": index, "u": f32(4)}, np.float32)


def test_scatter_nd_drops_an_index_outside_the_shape():
    """LiteRT fails the run; the converted graph writes the rows that fit (none lands elsewhere,
    though [0, 5] of [4, 3] has the flat position of [1, 2])."""
    w = _scatter([4, 2], [2])
    index = np.array([[0, 5], [1, 2], [-1, 0], [4, 0]], np.int32)
    u = f32(4, 2)
    got = msv0.Session(msv0.load(convert(w.finish()))).run({"i": index, "u": u})
    want = np.zeros((4, 3, 2), np.float32)
    want[1, 2] = u[1]
    np.testing.assert_array_equal(next(iter(got.values())), want)


@pytest.mark.parametrize("axis,index_dtype,dtype", [(-1, np.int32, np.float32), (0, np.int64, np.float32),
                                                    (1, np.int32, np.int32), (-1, np.int64, np.int64),
                                                    (2, np.int32, np.bool_)])
def test_one_hot(axis, index_dtype, dtype):
    """Negative indices and ones past depth give off values; on/off are graph inputs where TFLite's
    dtype can feed them (bool ones are constants)."""
    depth = 5
    w = TFLiteWriter()
    i = w.input("i", [3, 2], index_dtype)
    if dtype == np.bool_:
        on, off, feeds = w.const(np.array(True)), w.const(np.array(False)), {}
    else:
        on, off = w.input("on", [], dtype), w.input("off", [], dtype)
        feeds = {"on": np.array(7, dtype), "off": np.array(-2, dtype)}
    shape = [3, 2]
    shape.insert(axis % 3, depth)
    w.output(w.op("ONE_HOT", [i, w.const(np.array(depth, np.int32)), on, off], shape, "OneHotOptions",
                  out_dtype=dtype, axis=axis))
    feeds["i"] = np.array([[0, 4], [-1, 5], [2, 2]], index_dtype)
    exact(w, feeds, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_top_k_orders_ties_by_index(dtype):
    w = TFLiteWriter()
    x = w.input("x", [3, 7], dtype)
    v, i = w.multi_op("TOPK_V2", [x, w.const(np.array(4, np.int32))], [[3, 4], [3, 4]], out_dtype=[dtype, np.int32])
    w.output(v)
    w.output(i)
    xv = np.array([[1, 3, 3, 1, 3, 0, 3], [2, 2, 2, 2, 2, 2, 2], [5, -4, 9, 0, -4, 9, 1]], dtype)
    exact(w, {"x": xv}, dtype, np.int32)


@pytest.mark.parametrize("axes,dtype", [([0, -2], np.float32), ([1], np.int32), ([-1, -2, 0], np.int64)])
def test_reverse_v2(axes, dtype):
    w = TFLiteWriter()
    x, xv = data(w, "x", (2, 3, 5), dtype)
    w.output(w.op("REVERSE_V2", [x, w.const(np.array(axes, np.int32))], [2, 3, 5], out_dtype=dtype))
    exact(w, {"x": xv}, dtype)


@pytest.mark.parametrize("seq_dim,batch_dim,length_dtype", [(1, 0, np.int32), (0, 2, np.int64), (2, 1, np.int32)])
def test_reverse_sequence(seq_dim, batch_dim, length_dtype):
    """A negative length leaves its row as it is in TFLite."""
    shape = (4, 3, 5)
    w = TFLiteWriter()
    x = w.input("x", shape)
    n, steps = shape[batch_dim], shape[seq_dim]
    lengths = w.input("l", [n], length_dtype)
    w.output(w.op("REVERSE_SEQUENCE", [x, lengths], shape, "ReverseSequenceOptions", seq_dim=seq_dim,
                  batch_dim=batch_dim))
    lv = np.array([steps, -2, 0, 1, 2][:n], length_dtype)
    exact(w, {"x": f32(*shape), "l": lv}, np.float32)


@pytest.mark.parametrize("mode,dtype", [(REFLECT, np.float32), (SYMMETRIC, np.float32), (SYMMETRIC, np.int32)])
def test_mirror_pad(mode, dtype):
    """The largest pads TF allows: dim - 1 for REFLECT, dim for SYMMETRIC."""
    shape = (2, 3, 4)
    big = 2 if mode == REFLECT else 3
    pads = np.array([[1, 0], [big, 1], [0, big]], np.int32)
    w = TFLiteWriter()
    x, xv = data(w, "x", shape, dtype)
    out = [d + a + b for d, (a, b) in zip(shape, pads)]
    w.output(w.op("MIRROR_PAD", [x, w.const(pads)], out, "MirrorPadOptions", out_dtype=dtype, mode=mode))
    exact(w, {"x": xv}, dtype)


@pytest.mark.parametrize("rank", [4, 3])
def test_space_to_batch_and_back(rank):
    block, pads, crops = [2, 3], [[1, 0], [1, 1]], [[0, 1], [1, 2]]
    in_shape, mid, out = [2, 5, 4, 3], [12, 3, 2, 3], [2, 5, 3, 3]
    if rank == 3:
        block, pads, crops = block[:1], pads[:1], crops[:1]
        in_shape, mid, out = [2, 5, 3], [4, 3, 3], [2, 5, 3]
    w = TFLiteWriter()
    x = w.input("x", in_shape)
    b = w.const(np.array(block, np.int32))
    s = w.op("SPACE_TO_BATCH_ND", [x, b, w.const(np.array(pads, np.int32))], mid)
    w.output(s)
    w.output(w.op("BATCH_TO_SPACE_ND", [s, b, w.const(np.array(crops, np.int32))], out))
    exact(w, {"x": f32(*in_shape)}, np.float32, np.float32)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis,dtype", [(-1, np.float32), (1, np.int32), (0, np.int64)])
def test_cumsum(exclusive, reverse, axis, dtype):
    shape = (5, 7, 3)
    w = TFLiteWriter()
    x, xv = data(w, "x", shape, dtype)
    w.output(w.op("CUMSUM", [x, w.const(np.array(axis, np.int32))], shape, "CumsumOptions", out_dtype=dtype,
                  exclusive=exclusive, reverse=reverse))
    if dtype == np.float32:
        check(w, {"x": xv})
    else:
        exact(w, {"x": xv}, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_matrix_diag(dtype):
    w = TFLiteWriter()
    x, xv = data(w, "x", (2, 3, 4), dtype)
    w.output(w.op("MATRIX_DIAG", [x], [2, 3, 4, 4], out_dtype=dtype))
    exact(w, {"x": xv}, dtype)


@pytest.mark.parametrize("rows,cols", [(3, 5), (4, 2)])
def test_matrix_set_diag_keeps_the_rest(rows, cols):
    w = TFLiteWriter()
    x = w.input("x", [2, rows, cols])
    d = w.input("d", [2, min(rows, cols)])
    w.output(w.op("MATRIX_SET_DIAG", [x, d], [2, rows, cols]))
    xv = f32(2, rows, cols)
    xv[0, 0, 1], xv[1, -1, 0] = np.inf, np.nan
    exact(w, {"x": xv, "d": f32(2, min(rows, cols))}, np.float32)


@pytest.mark.parametrize("const_table", [False, True])
def test_embedding_lookup(const_table):
    w = TFLiteWriter()
    ids = w.input("ids", [5], np.int32)
    tv = f32(6, 2, 3)
    table = w.const(tv) if const_table else w.input("t", [6, 2, 3])
    w.output(w.op("EMBEDDING_LOOKUP", [ids, table], [5, 2, 3]))
    feeds = {"ids": np.array([5, 0, 3, 0, 2], np.int32)} | ({} if const_table else {"t": tv})
    exact(w, feeds, np.float32)


@pytest.mark.parametrize("rank,dtype", [(2, np.float32), (1, np.int32), (3, np.int64)])
def test_sparse_to_dense_keeps_the_last_of_repeats(rank, dtype):
    shape = [4, 3, 2][:rank]
    index = np.array([[3, 1, 0], [0, 2, 1], [3, 1, 0], [1, 0, 1]], np.int32)[:, :rank]
    w = TFLiteWriter()
    i = w.input("i", [4, rank] if rank > 1 else [4], np.int32)
    v = w.input("v", [4], dtype)
    w.output(w.op("SPARSE_TO_DENSE", [i, w.const(np.array(shape, np.int32)), v, w.input("dv", [], dtype)], shape,
                  "SparseToDenseOptions", out_dtype=dtype, validate_indices=False))
    feeds = {"i": index if rank > 1 else index[:, 0], "v": np.array([1, 2, 3, 4], dtype), "dv": np.array(-7, dtype)}
    exact(w, feeds, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_segment_sum(dtype):
    w = TFLiteWriter()
    x, xv = data(w, "x", (6, 2, 3), dtype)
    ids = w.const(np.array([0, 0, 1, 2, 2, 2], np.int32))  # TFLite: sorted, from 0, no gaps
    w.output(w.op("SEGMENT_SUM", [x, ids], [3, 2, 3], out_dtype=dtype))
    exact(w, {"x": xv}, dtype)


@pytest.mark.parametrize("code", ["UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN",
                                  "UNSORTED_SEGMENT_PROD"])
@pytest.mark.parametrize("dtype,const_ids", [(np.float32, False), (np.int32, False), (np.float32, True)])
def test_unsorted_segment(code, dtype, const_ids):
    """2-D ids over [2, 4, 3] data, a negative id (skipped) and segments no id names (TFLite's
    start value: 0, lowest, highest, 1)."""
    idv = np.array([[4, 0, -1, 4], [1, 4, 0, 1]], np.int32)
    w = TFLiteWriter()
    x, xv = data(w, "x", (2, 4, 3), dtype)
    ids = w.const(idv) if const_ids else w.input("ids", [2, 4], np.int32)
    w.output(w.op(code, [x, ids, w.const(np.array([6], np.int32))], [6, 3], out_dtype=dtype))
    feeds = {"x": xv} | ({} if const_ids else {"ids": idv})
    if dtype == np.float32 and code in ("UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD"):
        check(w, feeds)
    else:
        exact(w, feeds, dtype)


def test_unsorted_segment_ids_past_the_end_are_dropped():
    """LiteRT fails the run on them; the converted graph leaves them out."""
    w = TFLiteWriter()
    x = w.input("x", [4, 2])
    ids = w.input("ids", [4], np.int32)
    w.output(w.op("UNSORTED_SEGMENT_MAX", [x, ids, w.const(np.array([3], np.int32))], [3, 2]))
    w.output(w.op("UNSORTED_SEGMENT_SUM", [x, ids, w.const(np.array([3], np.int32))], [3, 2]))
    xv = f32(4, 2)
    got = msv0.Session(msv0.load(convert(w.finish()))).run({"x": xv, "ids": np.array([2, 3, 9, 2], np.int32)})
    low = np.finfo(np.float32).min
    want_max = np.array([[low, low], [low, low], np.maximum(xv[0], xv[3])], np.float32)
    np.testing.assert_array_equal(got["unsorted_segment_max_3"], want_max)
    np.testing.assert_array_equal(got["unsorted_segment_sum_5"], np.array([[0, 0], [0, 0], xv[0] + xv[3]]))


@pytest.mark.parametrize("start,start_dtype", [([1, -3, 2], np.int32), ([9, 2, 0], np.int64), ([0, 1, 9], None)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_dynamic_update_slice_clamps_the_start(start, start_dtype, dtype):
    """start_dtype None: a constant start."""
    w = TFLiteWriter()
    x, xv = data(w, "x", (3, 5, 4), dtype)
    u, uv = data(w, "u", (2, 3, 2), dtype)
    feeds = {"x": xv, "u": uv}
    if start_dtype is None:
        s = w.const(np.array(start, np.int32))
    else:
        s = w.input("s", [3], start_dtype)
        feeds["s"] = np.array(start, start_dtype)
    w.output(w.op("DYNAMIC_UPDATE_SLICE", [x, u, s], [3, 5, 4], out_dtype=dtype))
    exact(w, feeds, dtype)


def test_where_and_unique_of_constants():
    """Their output sizes depend on the data, known here: the results are constants."""
    w = TFLiteWriter()
    x = w.input("x", [3])
    cond = np.array([[True, False, True], [False, False, True]])
    w.output(w.op("WHERE", [w.const(cond)], [3, 2], out_dtype=np.int64))
    y, idx = w.multi_op("UNIQUE", [w.const(np.array([4, 1, 4, 7, 1, 1], np.int32))], [[3], [6]], "UniqueOptions",
                        out_dtype=[np.int32, np.int64], idx_out_type=4)
    w.output(y)
    w.output(idx)
    w.output(w.op("ABS", [x], [3]))
    exact(w, {"x": f32(3)}, np.int64, np.int32, np.int64, np.float32)


@pytest.mark.parametrize("code", ["GATHER_ND", "EMBEDDING_LOOKUP", "SPARSE_TO_DENSE", "REVERSE_SEQUENCE"])
def test_indices_outside_fail_the_run(code):
    """As in LiteRT, an index (or sequence length) past the tensor fails the run: nothing is read
    out of bounds. (LiteRT checks only the first sequence length, msv0 all of them.)"""
    w = TFLiteWriter()
    i = w.input("i", [2], np.int32)
    feeds = {"i": np.array([5, 1], np.int32), "v": f32(3, 4)}
    if code == "GATHER_ND":
        w.output(w.op(code, [w.input("v", [3, 4]), i], []))
    elif code == "EMBEDDING_LOOKUP":
        w.output(w.op(code, [i, w.input("v", [3, 4])], [2, 4]))
    elif code == "REVERSE_SEQUENCE":
        w.output(w.op(code, [w.input("v", [2, 4]), i], [2, 4], "ReverseSequenceOptions", seq_dim=1, batch_dim=0))
        feeds["v"] = f32(2, 4)
    else:
        w.output(w.op(code, [i, w.const(np.array([3], np.int32)), w.input("v", [2]), w.const(np.array(0, np.float32))],
                      [3], "SparseToDenseOptions", validate_indices=False))
        feeds["v"] = f32(2)
    model = w.finish()
    with pytest.raises(RuntimeError):
        run_litert(model, feeds)
    with pytest.raises(msv0.Error, match="out of range"):
        msv0.Session(msv0.load(convert(model))).run(feeds)


I32 = np.int32
F32_0, F32_1 = np.array(0.0, np.float32), np.array(1.0, np.float32)
# id: (graph builder, why the operator is refused)
REFUSALS = {
    "WHERE runtime condition": (
        lambda w: w.op("WHERE", [w.input("c", [4], np.bool_)], [4, 1], out_dtype=np.int64),
        "the condition (the output has a row per true element) must be a constant"),
    "UNIQUE runtime input": (
        lambda w: w.multi_op("UNIQUE", [w.input("x", [4])], [[4], [4]], out_dtype=[np.float32, I32])[0],
        "the input (the output size is its number of distinct values) must be a constant"),
    "SEGMENT_SUM runtime ids": (
        lambda w: w.op("SEGMENT_SUM", [w.input("x", [4]), w.input("i", [4], I32)], [4]),
        "segment_ids (the output has max(segment_ids) + 1 rows) must be a constant"),
    "UNSORTED_SEGMENT_SUM runtime count": (
        lambda w: w.op("UNSORTED_SEGMENT_SUM", [w.input("x", [4]), w.const(np.zeros(4, I32)), w.input("n", [1], I32)],
                       [1]),
        "num_segments must be a constant"),
    "UNSORTED_SEGMENT_MAX int64": (
        lambda w: w.op("UNSORTED_SEGMENT_MAX", [w.input("x", [4], np.int64), w.const(np.zeros(4, I32)),
                                                w.const(np.array([2], I32))], [2], out_dtype=np.int64),
        "int64 data (v0 Reduce takes float32 and int32)"),
    "SCATTER_ND runtime shape": (
        lambda w: w.op("SCATTER_ND", [w.input("i", [2, 1], I32), w.input("u", [2]), w.input("s", [1], I32)], [4]),
        "shape must be a constant"),
    "SCATTER_ND int64 indices": (
        lambda w: w.op("SCATTER_ND", [w.input("i", [2, 1], np.int64), w.input("u", [2]),
                                      w.const(np.array([4], I32))], [4]),
        "int64 indices"),
    "TOPK_V2 runtime k": (
        lambda w: w.op("TOPK_V2", [w.input("x", [5]), w.input("k", [], I32)], [2]),
        "k must be a constant"),
    "ONE_HOT runtime depth": (
        lambda w: w.op("ONE_HOT", [w.input("i", [2], I32), w.input("d", [], I32), w.const(F32_1), w.const(F32_0)],
                       [2, 3], "OneHotOptions", axis=-1),
        "depth must be a constant"),
    "REVERSE_V2 runtime axis": (
        lambda w: w.op("REVERSE_V2", [w.input("x", [5]), w.input("a", [1], I32)], [5]),
        "axis must be a constant"),
    "CUMSUM runtime axis": (
        lambda w: w.op("CUMSUM", [w.input("x", [5]), w.input("a", [], I32)], [5]),
        "axis must be a constant"),
    "SPARSE_TO_DENSE runtime shape": (
        lambda w: w.op("SPARSE_TO_DENSE", [w.input("i", [2], I32), w.input("s", [1], I32), w.input("v", [2]),
                                           w.const(F32_0)], [3]),
        "output_shape must be a constant"),
    "MIRROR_PAD too wide": (
        lambda w: w.op("MIRROR_PAD", [w.input("x", [2, 3]), w.const(np.array([[0, 0], [3, 0]], I32))], [2, 6],
                       "MirrorPadOptions", mode=REFLECT),
        "paddings [[0, 0], [3, 0]] outside 0..dim - 1 for input [2, 3]"),
    "MIRROR_PAD int64": (
        lambda w: w.op("MIRROR_PAD", [w.input("x", [2, 3], np.int64), w.const(np.zeros((2, 2), I32))], [2, 3],
                       "MirrorPadOptions", out_dtype=np.int64, mode=SYMMETRIC),
        "rank 2 int64 input (v0 Pad takes float32 and int32 up to rank 4)"),
    "EMBEDDING_LOOKUP int32 table": (
        lambda w: w.op("EMBEDDING_LOOKUP", [w.input("i", [2], I32), w.input("t", [3, 4], I32)], [2, 4], out_dtype=I32),
        "int32 table (v0 EmbeddingLookup takes float32)"),
    "BATCH_TO_SPACE_ND 5-D": (
        lambda w: w.op("BATCH_TO_SPACE_ND", [w.input("x", [4, 1, 1, 1, 1]), w.const(np.array([2, 2], I32)),
                                             w.const(np.zeros((2, 2), I32))], [1, 2, 2, 1, 1]),
        "rank 5 input (TFLite takes 3-D and 4-D)"),
}


@pytest.mark.parametrize("build,reason", list(REFUSALS.values()), ids=list(REFUSALS))
def test_refusals_say_why(build, reason):
    w = TFLiteWriter()
    w.output(build(w))
    with pytest.raises(msv0.UnsupportedOpError) as err:
        convert(w.finish())
    [(_, _, why)] = err.value.nodes
    assert why == reason

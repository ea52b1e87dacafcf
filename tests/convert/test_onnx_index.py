"""ONNX indexing ops lowered onto v0 ops (msv0/convert/onnx_index.py), on runtime data and indices,
compared with onnxruntime: odd shapes, every axis, negative indices, 4-D inputs held NHWC."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402
from onnxcheck import IR_VERSION, run_msv0, run_ort, run_reference  # noqa: E402

R = np.random.default_rng(7)
N = h.make_node
ELEM = {np.dtype(np.float32): T.FLOAT, np.dtype(np.int32): T.INT32, np.dtype(np.int64): T.INT64,
        np.dtype(np.bool_): T.BOOL}


def f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


def model(node, feeds, inits=(), opset=18):
    """One node over graph inputs named and typed after feeds, and constant inputs inits; onnx infers
    the output's type."""
    g = h.make_graph([node], "g", [h.make_tensor_value_info(k, ELEM[v.dtype], v.shape) for k, v in feeds.items()],
                     [h.make_empty_tensor_value_info(node.output[0])],
                     [nh.from_array(np.asarray(v), k) for k, v in inits])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=IR_VERSION)
    return onnx.shape_inference.infer_shapes(m).SerializeToString()


def check(node, feeds, inits=(), opset=18, reference=run_ort):
    """msv0 against onnxruntime (or another reference): exact for integer and bool results."""
    m = model(node, feeds, inits, opset)
    want, got = reference(m, feeds), run_msv0(m, feeds)
    for k, w in want.items():
        assert got[k].dtype == w.dtype and got[k].shape == w.shape, (k, got[k].dtype, got[k].shape, w.shape)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(got[k], w, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(got[k], w)


def unsupported(node, feeds, inits=(), match=""):
    with pytest.raises(msv0.UnsupportedOpError, match=match):
        convert(model(node, feeds, inits))


def unique_indices(shape, axis):
    """Indices along axis, distinct within each line along it (ONNX scatters need that), half negative."""
    dim = shape[axis]
    lines = np.moveaxis(np.zeros(shape, np.int64), axis, -1)
    for pos in np.ndindex(lines.shape[:-1]):
        lines[pos] = R.permutation(dim)[:lines.shape[-1]]
    ind = np.moveaxis(lines, -1, axis)
    return np.where(R.random(ind.shape) < 0.5, ind - dim, ind)


SHAPE = (3, 4, 5)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_gather_elements(axis, dtype):
    shape = list(SHAPE)
    shape[axis] = 2 if axis % 3 else 6  # fewer or more indices than the axis holds
    dim = SHAPE[axis]
    check(N("GatherElements", ["x", "i"], ["y"], axis=axis),
          {"x": f32(*SHAPE), "i": R.integers(-dim, dim, shape).astype(dtype)})


def test_gather_elements_nhwc_and_constant_indices():
    x = f32(2, 3, 4, 5)
    check(N("GatherElements", ["x", "i"], ["y"], axis=1), {"x": x, "i": R.integers(-3, 3, (2, 2, 4, 3))})
    check(N("GatherElements", ["x", "i"], ["y"], axis=-1), {"x": x}, [("i", R.integers(-5, 5, (2, 3, 1, 5)))])
    check(N("GatherElements", ["x", "i"], ["y"], axis=0),
          {"x": np.arange(7, dtype=np.int32), "i": np.array([6, -7, 0])})


@pytest.mark.parametrize("bad", [4, -5])
def test_gather_elements_out_of_range_is_a_run_time_error(bad):
    m = model(N("GatherElements", ["x", "i"], ["y"], axis=1), {"x": f32(3, 4), "i": np.zeros((3, 2), np.int64)})
    i = np.zeros((3, 2), np.int64)
    i[1, 1] = bad
    with pytest.raises(msv0.ModelError, match="out of range"):
        run_msv0(m, {"x": f32(3, 4), "i": i})


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_scatter_elements(axis):
    shape = list(SHAPE)
    shape[axis] = 2
    x = f32(*SHAPE)
    x[0, 0, 0], x[-1, -1, -1] = np.inf, np.nan  # kept where nothing is scattered (no x·0)
    check(N("ScatterElements", ["x", "i", "u"], ["y"], axis=axis),
          {"x": x, "i": unique_indices(shape, axis), "u": f32(*shape)})


def test_scatter_elements_nhwc_ints_and_opset10_scatter():
    shape = (2, 3, 4, 5)
    check(N("ScatterElements", ["x", "i", "u"], ["y"], axis=2),
          {"x": f32(*shape), "i": unique_indices((2, 3, 3, 5), 2), "u": f32(2, 3, 3, 5)})
    check(N("ScatterElements", ["x", "i", "u"], ["y"], axis=-1),
          {"x": R.integers(-9, 9, (3, 7)), "i": unique_indices((3, 4), 1), "u": R.integers(100, 200, (3, 4))})
    check(N("Scatter", ["x", "i", "u"], ["y"], axis=1),
          {"x": f32(3, 5), "i": unique_indices((3, 2), 1), "u": f32(3, 2)}, opset=10)


@pytest.mark.parametrize("q", [1, 2, 3])
def test_scatter_nd(q):
    rows = R.permutation(int(np.prod(SHAPE[:q])))[:3]
    ind = np.stack(np.unravel_index(rows, SHAPE[:q]), -1).reshape(3, 1, q)
    ind = np.where(R.random(ind.shape) < 0.5, ind - np.array(SHAPE[:q]), ind)
    x = f32(*SHAPE)
    x[0, 0, 0] = np.inf
    check(N("ScatterND", ["x", "i", "u"], ["y"]), {"x": x, "i": ind, "u": f32(3, 1, *SHAPE[q:])})


def test_scatter_nd_one_index_nhwc_ints_and_constant_data():
    check(N("ScatterND", ["x", "i", "u"], ["y"]), {"x": f32(2, 3, 4, 5), "i": np.array([1, -1]), "u": f32(4, 5)})
    check(N("ScatterND", ["x", "i", "u"], ["y"]),
          {"i": np.array([[4], [0]]), "u": R.integers(-5, 5, (2, 3)).astype(np.int32)},
          [("x", R.integers(-5, 5, (5, 3)).astype(np.int32))])


def test_scatter_out_of_range_is_a_run_time_error():
    m = model(N("ScatterND", ["x", "i", "u"], ["y"]), {"x": f32(3, 4), "i": np.array([[1]]), "u": f32(1, 4)})
    with pytest.raises(msv0.ModelError, match="out of range"):
        run_msv0(m, {"x": f32(3, 4), "i": np.array([[3]]), "u": f32(1, 4)})


def test_scatter_add_sums_repeated_indices():
    """reduction add (torch's scatter_add_ / index_put_ with accumulate): every update lands, those
    of a repeated (or negative) index summed, on float and int data; slices for ScatterND."""
    i = np.array([[1, -3, 1, 0], [2, 2, 2, -1], [0, 3, 3, 3]])
    check(N("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="add"),
          {"x": f32(3, 4), "i": i, "u": f32(3, 4)})
    check(N("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction="add"),
          {"x": R.integers(-9, 9, (4, 4)), "i": np.array([[0, 1, 0, 3], [0, 0, -1, 3]]),
           "u": R.integers(-9, 9, (2, 4))})
    check(N("ScatterND", ["x", "i", "u"], ["y"], reduction="add"),
          {"x": f32(2, 3, 4, 5), "i": np.array([[[1, 2]], [[1, -1]], [[0, 0]], [[1, 2]]]), "u": f32(4, 1, 4, 5)})


def test_scatter_add_out_of_range_is_a_run_time_error():
    m = model(N("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="add"),
              {"x": f32(3, 4), "i": np.zeros((3, 2), np.int64), "u": f32(3, 2)})
    with pytest.raises(msv0.ModelError, match="out of range"):
        run_msv0(m, {"x": f32(3, 4), "i": np.array([[0, 1], [4, 0], [2, 3]]), "u": f32(3, 2)})


@pytest.mark.parametrize("reduction", ["mul", "max", "min"])
def test_scatter_reductions_fold_every_update_into_x(reduction):
    """max, min, mul (torch's scatter_reduce amax, a graph network's per-graph readout; minimol):
    repeated indices all land, a slot no update reaches keeps x; slices for ScatterND."""
    check(N("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction=reduction),
          {"x": f32(3, 4), "i": np.array([[1, 0, 1, 2], [1, 1, 1, 2], [0, -3, 1, 2], [1, 1, 1, 1]]),
           "u": f32(4, 4)})  # along the axis only: a mask [3, 4, 4]
    check(N("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=reduction),
          {"x": f32(2, 3, 4), "i": R.integers(-3, 3, (2, 5, 4)), "u": f32(2, 5, 4)})
    check(N("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=reduction),
          {"x": f32(3, 4), "i": np.array([[1, 0], [3, 3]]), "u": f32(2, 2)})  # a corner of x: every element
    check(N("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction),
          {"x": f32(2, 3, 5), "i": np.array([[1, 2], [0, 0], [1, 2], [1, -1]]), "u": f32(4, 5)})


def test_scatter_reduction_on_integers_is_refused():
    unsupported(N("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction="max"),
                {"x": R.integers(-9, 9, (3, 4)), "i": np.zeros((1, 4), np.int64), "u": R.integers(-9, 9, (1, 4))},
                match="reduction 'max' on int64")


def test_scatter_reduction_out_of_range_is_a_run_time_error():
    m = model(N("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction="max"),
              {"x": f32(3, 4), "i": np.zeros((2, 4), np.int64), "u": f32(2, 4)})
    with pytest.raises(msv0.ModelError, match="out of range"):
        run_msv0(m, {"x": f32(3, 4), "i": np.array([[0, 1, 2, 3], [0, 0, 0, 0]]), "u": f32(2, 4)})


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_cumsum(axis, exclusive, reverse):
    x = f32(*SHAPE)
    check(N("CumSum", ["x", "a"], ["y"], exclusive=exclusive, reverse=reverse), {"x": x}, [("a", np.int64(axis))])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_cumsum_integers_are_exact(dtype):
    x = R.integers(-(2**24), 2**24, (3, 37)).astype(dtype)  # sums past float32's exact range
    for exclusive, reverse in [(0, 0), (1, 1)]:
        check(N("CumSum", ["x", "a"], ["y"], exclusive=exclusive, reverse=reverse), {"x": x},
              [("a", np.array([1], np.int32))])


def test_cumsum_nhwc_infinities_and_length_one():
    x = f32(2, 3, 4, 5)
    x[0, 1, 2, 3] = np.inf  # a triangular MatMul would spread inf·0 = NaN over the row
    for axis in range(4):
        check(N("CumSum", ["x", "a"], ["y"], reverse=axis % 2), {"x": x}, [("a", np.int64(axis))])
    check(N("CumSum", ["x", "a"], ["y"], exclusive=1), {"x": f32(3, 1)}, [("a", np.int64(1))])


def test_cumsum_runtime_axis_is_refused():
    unsupported(N("CumSum", ["x", "a"], ["y"]), {"x": f32(3, 4), "a": np.int64(1)}, match="axis must be a constant")


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -2, 0, 1, 4])
def test_trilu(upper, k):
    x = f32(2, 3, 4, 5)
    x[1, 2, 3, 0] = np.inf
    inputs, inits = (["x", "k"], [("k", np.int64(k))]) if k is not None else (["x"], [])
    check(N("Trilu", inputs, ["y"], upper=upper), {"x": x}, inits)
    check(N("Trilu", inputs, ["y"], upper=upper), {"x": R.integers(-9, 9, (5, 3))}, inits)


@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_runtime_k(upper):
    """k a graph input: the mask is formed at run time (on a 4-D map stored NHWC and on ints)."""
    x = f32(2, 3, 4, 5)
    x[1, 2, 3, 0] = np.inf
    for k in (-2, 0, 3):
        check(N("Trilu", ["x", "k"], ["y"], upper=upper), {"x": x, "k": np.array(k, np.int64)})
    check(N("Trilu", ["x", "k"], ["y"], upper=upper), {"x": R.integers(-9, 9, (5, 3)), "k": np.array(1, np.int64)})


@pytest.mark.parametrize("axis", [-1, 0, 1, -2, -3])
def test_one_hot(axis):
    ind = np.array([[0, 4, -1, -5], [5, -6, 2, 3], [1, 1, 0, -2]], np.int64)  # 5 and -6 are out of range: all off
    check(N("OneHot", ["i", "d", "v"], ["y"], axis=axis), {"i": ind, "v": np.array([-0.5, 2.0], np.float32)},
          [("d", np.int64(5))])


def test_one_hot_index_and_value_types():
    ind = R.integers(-4, 4, (2, 3, 2, 3))
    check(N("OneHot", ["i", "d", "v"], ["y"], axis=2), {"i": ind.astype(np.int32)},
          [("d", np.int32(4)), ("v", np.array([0, 7], np.int64))], reference=run_reference)  # onnxruntime has no kernel
    check(N("OneHot", ["i", "d", "v"], ["y"]), {"i": np.array([0.7, 2.9, -1.5, 3.0, -0.5], np.float32)},
          [("d", np.float32(4)), ("v", np.array([1, -3], np.float32))])  # truncated, as ONNX casts them
    unsupported(N("OneHot", ["i", "d", "v"], ["y"]), {"i": np.array([1, 2]), "v": np.array([0, 1])},
                [("d", np.int64(3))], match="not constants")


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress(axis):
    x = f32(2, 3, 4, 5)
    dim = x.size if axis is None else x.shape[axis]
    cond = np.zeros(dim - 1, bool)  # shorter than the axis: the rest is dropped
    cond[[0, dim - 2]] = True
    attrs = {} if axis is None else {"axis": axis}
    check(N("Compress", ["x", "c"], ["y"], **attrs), {"x": x}, [("c", cond)])


def test_compress_runtime_condition_is_refused():
    unsupported(N("Compress", ["x", "c"], ["y"], axis=0), {"x": f32(3, 4), "c": np.array([True, False, True])},
                match="runtime condition")


@pytest.mark.parametrize("shape,k,dtype", [((3, 5), 1, None), ((4, 2), -1, T.INT32), ((3, 3), 0, T.FLOAT)])
def test_eye_like(shape, k, dtype):
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    check(N("EyeLike", ["x"], ["y"], **attrs), {"x": R.integers(0, 9, shape)})


@pytest.mark.parametrize("time_axis,batch_axis", [(0, 1), (1, 0)])
def test_reverse_sequence(time_axis, batch_axis):
    shape = [5, 3, 2, 3]
    shape[time_axis], shape[batch_axis] = 5, 3
    lens = np.array([5, 1, 3], np.int64)
    check(N("ReverseSequence", ["x", "n"], ["y"], time_axis=time_axis, batch_axis=batch_axis),
          {"x": f32(*shape), "n": lens})
    check(N("ReverseSequence", ["x", "n"], ["y"], time_axis=time_axis, batch_axis=batch_axis),
          {"x": R.integers(0, 9, shape[:2]).astype(np.int32), "n": lens})


def _boxes(batch, n, center):
    c, half = R.uniform(0, 10, (batch, n, 2)), R.uniform(1, 4, (batch, n, 2))
    b = np.concatenate([c, 2 * half] if center else [c - half, c + half], -1)
    return (b if center else b[..., [2, 1, 0, 3]]).astype(np.float32)  # corners in either order


@pytest.mark.parametrize("batch,classes,limit,iou,score", [
    (1, 1, 3, 0.3, None),  # one v0 node: its total is ONNX's per-class count
    (2, 3, 2, 0.3, 0.1),  # one node per batch and class
    (2, 3, 20, 0.3, 0.4),  # a limit past the box count never binds: one node
    (1, 2, None, 0.5, None),  # no limit: nothing is selected
    (1, 1, 4, 0.4, -0.5),  # a negative score threshold
    (2, 2, 3, 0.2, 2.0),  # some classes have no score past the threshold
])
@pytest.mark.parametrize("runtime", [False, True])
@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression(batch, classes, limit, iou, score, runtime, center):
    n = 9
    feeds = {"boxes": _boxes(batch, n, center),
             "scores": R.permutation(batch * classes * n).reshape(batch, classes, n).astype(np.float32) / n - 1}
    names, inits = ["boxes", "scores"], []
    for name, v, dtype in (("limit", limit, np.int64), ("iou", iou, np.float32), ("score", score, np.float32)):
        names.append(name if v is not None else "")
        if v is not None and runtime:
            feeds[name] = np.array([v], dtype)
        elif v is not None:
            inits.append((name, np.array([v], dtype)))
    while not names[-1]:
        names.pop()
    check(N("NonMaxSuppression", names, ["y"], center_point_box=center), feeds, inits)


# The node tests that feed an axis, depth, k or condition as a graph input, which these lowerings
# need constant (and OneHot's int32 values): the conformance run skips them, here they run so.
NODE_CASES = ["test_cumsum_2d_int32", "test_cumsum_1d_int32_exclusive",
              *(f"test_onehot_{s}" for s in ("without_axis", "with_axis", "negative_indices", "out_of_range_indices",
                                             "with_negative_axis")),
              *(f"test_compress_{s}" for s in ("0", "1", "default_axis", "negative_axis")),
              *(f"test_{s}" for s in ("triu_neg", "triu_out_neg_out", "triu_pos", "triu_out_pos", "triu_square_neg",
                                      "triu_one_row", "tril_neg", "tril_out_neg", "tril_pos", "tril_out_pos",
                                      "tril_square_neg"))]


@pytest.fixture(scope="module")
def node_cases():
    from onnx.backend.test.case.node import collect_testcases
    return {c.name: c for c in collect_testcases(None) if c.name in NODE_CASES}


@pytest.mark.parametrize("name", NODE_CASES)
def test_node_cases_with_constant_parameters(node_cases, name):
    """The test's inputs after the first become initializers, but for OneHot's float32 values."""
    case = node_cases[name]
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    ins, outs = case.data_sets[0]
    feeds = {}
    for k, (vi, a) in enumerate(zip(list(model.graph.input), ins)):
        if k and not (vi.name == "values" and a.dtype == np.float32):
            model.graph.initializer.append(nh.from_array(np.asarray(a), vi.name))
            model.graph.input.remove(vi)
        else:
            feeds[vi.name] = np.asarray(a)
    got = run_msv0(model.SerializeToString(), feeds)
    for vi, want in zip(model.graph.output, outs):
        assert got[vi.name].shape == want.shape
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got[vi.name], want, rtol=1e-6)
        else:
            np.testing.assert_array_equal(got[vi.name], want)

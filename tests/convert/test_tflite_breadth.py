"""TFLite constructs real models ship beyond the basic float ops: sparse weights, PACK/UNPACK,
more reductions, computed clip bounds, custom ops, resource variables. Each is compared with
the LiteRT interpreter on the same file (or, for a custom op LiteRT lacks, on the same graph
written with builtins)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert.interpreter")

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402
from test_tflite_convert import NONE, SAME, VALID, check, f32, run_litert  # noqa: E402
from tflitewriter import TFLiteWriter  # noqa: E402

R = np.random.default_rng(1)


def sparse_encode(dense, order, block_map, block, sparse_levels):
    """TFLite's sparse form of `dense`, written level by level the way the schema describes it.
    Returns (values, dims) for TFLiteWriter.sparse_const."""
    n = dense.ndim
    blocked = list(dense.shape)
    for d, size in zip(block_map, block):
        blocked[d] //= size
    sizes = blocked + list(block)  # the n + b dims

    def element(coord):  # coord: {blocked dim: index}
        idx = [coord[d] for d in range(n)]
        for j, d in enumerate(block_map):
            idx[d] = idx[d] * block[j] + coord[n + j]
        return dense[tuple(idx)]

    def any_nonzero(coord, level):
        if level == len(order):
            return element(coord) != 0
        return any(any_nonzero({**coord, order[level]: k}, level + 1) for k in range(sizes[order[level]]))

    dims = [None] * len(order)
    segments = {lvl: [0] for lvl in sparse_levels}
    indices = {lvl: [] for lvl in sparse_levels}
    values = []

    def walk(coord, level):
        if level == len(order):
            values.append(element(coord))
            return
        d = order[level]
        for k in range(sizes[d]):
            c = {**coord, d: k}
            if level in sparse_levels:
                if not any_nonzero(c, level + 1):
                    continue
                indices[level].append(k)
            walk(c, level + 1)
        if level in sparse_levels:
            segments[level].append(len(indices[level]))

    walk({}, 0)
    for lvl, d in enumerate(order):
        dims[lvl] = (segments[lvl], indices[lvl]) if lvl in sparse_levels else (sizes[d],)
    return np.array(values, dense.dtype), dims


def _sparse_weight(shape, block_map, block, keep=0.3):
    mask_shape = list(shape)
    for d, size in zip(block_map, block):
        mask_shape[d] //= size
    mask = R.uniform(size=mask_shape) < keep
    for d, size in zip(block_map, block):
        mask = np.repeat(mask, size, axis=d)
    return (f32(*shape) * mask).astype(np.float32)


@pytest.mark.parametrize("order,sparse_levels", [([0, 1], {1}), ([1, 0], {0, 1})])
def test_sparse_csr_fully_connected(order, sparse_levels):
    wt = _sparse_weight((12, 20), [], [])
    values, dims = sparse_encode(wt, order, [], [], sparse_levels)
    w = TFLiteWriter()
    x = w.input("x", [3, 20])
    dense = w.op("DENSIFY", [w.sparse_const(values, wt.shape, order, [], dims)], [12, 20])
    y = w.op("FULLY_CONNECTED", [x, dense, w.const(f32(12))], [3, 12], "FullyConnectedOptions",
             fused_activation_function=NONE)
    w.output(y)
    check(w, {"x": f32(3, 20)})


def test_block_sparse_conv_weight():
    # the layout of the report: [16, 1, 1, 24] with 1x4 blocks along the input channels
    wt = _sparse_weight((16, 1, 1, 24), [3], [4])
    order = [0, 1, 2, 3, 4]
    values, dims = sparse_encode(wt, order, [3], [4], {3})
    assert len(values) < wt.size
    w = TFLiteWriter()
    x = w.input("x", [1, 5, 7, 24])
    dense = w.op("DENSIFY", [w.sparse_const(values, wt.shape, order, [3], dims)], [16, 1, 1, 24])
    y = w.op("CONV_2D", [x, dense, w.const(f32(16))], [1, 5, 7, 16], "Conv2DOptions", padding=VALID, stride_h=1,
             stride_w=1, fused_activation_function=NONE, dilation_h_factor=1, dilation_w_factor=1)
    w.output(y)
    m = check(w, {"x": f32(1, 5, 7, 24)})
    assert [n.op for n in m.nodes] == ["Conv2D"]


def test_bad_sparse_segments_are_a_model_error():
    w = TFLiteWriter()
    x = w.input("x", [1, 4])
    dense = w.op("DENSIFY", [w.sparse_const(f32(3), [2, 4], [0, 1], [], [(2,), ([0, 2, 9], [0, 1, 3])])], [2, 4])
    w.output(w.op("FULLY_CONNECTED", [x, dense], [1, 2], "FullyConnectedOptions", fused_activation_function=NONE))
    with pytest.raises(msv0.ModelError, match="segments"):
        convert(w.finish())


def test_pack_unpack():
    w = TFLiteWriter()
    x = w.input("x", [3, 5, 7])
    parts = w.multi_op("UNPACK", [x], [[3, 7]] * 5, "UnpackOptions", num=5, axis=-2)
    y = w.op("PACK", [parts[4], parts[0], w.op("RELU", [parts[2]], [3, 7])], [3, 7, 3], "PackOptions",
             values_count=3, axis=-1)
    w.output(y)
    w.output(parts[1])
    check(w, {"x": f32(3, 5, 7)})


@pytest.mark.parametrize("code", ["ABS", "NEG", "SQUARE", "SQRT", "RSQRT", "EXP", "LOG", "SIN", "COS", "FLOOR",
                                  "CEIL"])
def test_unary(code):
    w = TFLiteWriter()
    x = w.input("x", [2, 3, 5, 7])
    w.output(w.op(code, [x], [2, 3, 5, 7]))
    check(w, {"x": f32(2, 3, 5, 7, lo=0.1, hi=4) * np.where(code in ("SQRT", "RSQRT", "LOG"), 1, R.choice([-1, 1]))
              .astype(np.float32)})


def test_array_builtins():
    w = TFLiteWriter()
    x = w.input("x", [2, 6, 5, 4])
    t = w.op("TRANSPOSE", [x, w.const(np.array([0, 3, 1, -2], np.int32))], [2, 4, 6, 5])
    s = w.op("SLICE", [t, w.const(np.array([1, 1, 0, 2], np.int32)), w.const(np.array([1, -1, 4, 3], np.int32))],
             [1, 3, 4, 3])
    g = w.op("GATHER", [s, w.const(np.array([[2, 0], [1, 1]], np.int32))], [1, 3, 2, 2, 3], "GatherOptions", axis=-2,
             batch_dims=0)
    a, b = w.multi_op("SPLIT", [w.const(np.array([1], np.int32)), t], [[2, 2, 6, 5]] * 2, "SplitOptions", num_splits=2)
    parts = w.multi_op("SPLIT_V", [b, w.const(np.array([1, -1, 2], np.int32)), w.const(np.array(-1, np.int32))],
                       [[2, 2, 6, 1], [2, 2, 6, 2], [2, 2, 6, 2]], "SplitVOptions", num_splits=3)
    tl = w.op("TILE", [parts[1], w.const(np.array([1, 2, 1, 3], np.int32))], [2, 4, 6, 6])
    e = w.op("EXPAND_DIMS", [a, w.const(np.array(-1, np.int32))], [2, 2, 6, 5, 1])
    d = w.op("SQUARED_DIFFERENCE", [tl, w.const(f32(6))], [2, 4, 6, 6])
    for out in (g, parts[0], parts[2], e, d):
        w.output(out)
    check(w, {"x": f32(2, 6, 5, 4)})


@pytest.mark.parametrize("out_type", [np.int32, np.int64])
def test_arg_extremes_clamps_and_select(out_type):
    w = TFLiteWriter()
    x = w.input("x", [2, 5, 7])
    x2 = w.op("MUL", [x, w.const(np.full(1, 3, np.float32))], [2, 5, 7], "MulOptions")
    ties = w.op("FLOOR", [x2], [2, 5, 7])  # equal values: the first index wins
    w.output(w.op("ARG_MAX", [ties, w.const(np.array([1], np.int32))], [2, 7], "ArgMaxOptions", out_dtype=out_type,
                  output_type=2 if out_type == np.int32 else 4))
    w.output(w.op("ARG_MIN", [ties, w.const(np.array([-1], np.int32))], [2, 5], "ArgMinOptions", out_dtype=out_type,
                  output_type=2 if out_type == np.int32 else 4))
    a, b = w.op("RELU_N1_TO_1", [x2], [2, 5, 7]), w.op("RELU_0_TO_1", [x2], [2, 5, 7])
    w.output(w.op("SELECT_V2", [w.op("LESS", [x, w.const(np.zeros(7, np.float32))], [2, 5, 7], out_dtype=np.bool_),
                                a, b], [2, 5, 7]))
    check(w, {"x": f32(2, 5, 7)})


@pytest.mark.parametrize("adj_x,adj_y,const_b", [(False, False, False), (True, False, True), (False, True, True)])
def test_batch_matmul(adj_x, adj_y, const_b):
    w = TFLiteWriter()
    ashape = [3, 7, 5] if adj_x else [3, 5, 7]
    bshape = [6, 7] if adj_y else [7, 6]
    x = w.input("a", ashape)
    y = w.const(f32(*bshape)) if const_b else w.input("b", [3, *bshape])
    w.output(w.op("BATCH_MATMUL", [x, y], [3, 5, 6], "BatchMatMulOptions", adj_x=adj_x, adj_y=adj_y))
    feeds = {"a": f32(*ashape)}
    if not const_b:
        feeds["b"] = f32(3, *bshape)
    check(w, feeds)


def test_depth_to_space_and_back():
    w = TFLiteWriter()
    x = w.input("x", [2, 3, 4, 12])
    d = w.op("DEPTH_TO_SPACE", [x], [2, 6, 8, 3], "DepthToSpaceOptions", block_size=2)
    w.output(w.op("SPACE_TO_DEPTH", [w.op("RELU", [d], [2, 6, 8, 3])], [2, 3, 4, 12], "SpaceToDepthOptions",
                  block_size=2))
    w.output(d)
    check(w, {"x": f32(2, 3, 4, 12)})


@pytest.mark.parametrize("code", ["REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "SUM"])
@pytest.mark.parametrize("axes,keep", [([1, -1], True), ([0], False)])
def test_reduce(code, axes, keep):
    w = TFLiteWriter()
    x = w.input("x", [2, 5, 3, 7])
    shape = [1 if (i in axes or i - 4 in axes) else d for i, d in enumerate([2, 5, 3, 7])]
    if not keep:
        shape = [d for i, d in enumerate([2, 5, 3, 7]) if not (i in axes or i - 4 in axes)]
    y = w.op(code, [x, w.const(np.array(axes, np.int32))], shape, "ReducerOptions", keep_dims=keep)
    w.output(y)
    check(w, {"x": f32(2, 5, 3, 7, lo=0.5, hi=1.5)})


def test_clip_with_computed_bounds():
    # tf.clip_by_value(x, lo, hi) with tensor bounds lowers to MINIMUM(MAXIMUM(x, lo), hi)
    w = TFLiteWriter()
    x, lo = w.input("x", [2, 4, 5, 3]), w.input("lo", [1, 1, 1, 3])
    hi = w.op("ADD", [lo, w.op("RELU", [w.input("span", [4, 1, 1])], [4, 1, 1])], [1, 4, 1, 3], "AddOptions",
              fused_activation_function=NONE)
    y = w.op("MINIMUM", [w.op("MAXIMUM", [x, lo], [2, 4, 5, 3]), hi], [2, 4, 5, 3])
    w.output(y)
    check(w, {"x": f32(2, 4, 5, 3), "lo": f32(1, 1, 1, 3, lo=-0.5, hi=0), "span": f32(4, 1, 1)})


def _msv0_vs_litert_twin(model: bytes, twin: bytes, feeds):
    """msv0 on `model` (with a custom op LiteRT lacks) against LiteRT on `twin` (builtins only)."""
    want = run_litert(twin, feeds)
    got = msv0.Session(msv0.load(convert(model))).run(feeds)
    for (kw, w_), (kg, g) in zip(sorted(want.items()), sorted(got.items())):
        assert g.shape == w_.shape, kg
        np.testing.assert_allclose(g, w_, rtol=1e-5, atol=1e-5 * np.abs(w_).max(), err_msg=kg)


@pytest.mark.parametrize("same,in_hw,stride", [(True, (7, 6), (2, 2)), (False, (5, 8), (2, 1)), (True, (6, 5), (3, 2))])
def test_mediapipe_transpose_conv_bias(same, in_hw, stride):
    k, cin, cout = (4, 3), 5, 3
    out_hw = []
    for n, kk, s in zip(in_hw, k, stride):  # MediaPipe's output size
        crop = max(0, kk - (n - 1) % s - 1) if same else 0
        out_hw.append(s * (n - 1) + kk - crop)
    wt, bias = f32(cout, *k, cin), f32(cout)
    out_shape = [1, *out_hw, cout]
    feeds = {"x": f32(1, *in_hw, cin)}
    m = TFLiteWriter()
    x = m.input("x", [1, *in_hw, cin])
    opts = np.array([1 if same else 2, stride[1], stride[0]], "<i4").tobytes()
    m.output(m.custom("Convolution2DTransposeBias", [x, m.const(wt), m.const(bias)], [out_shape], opts)[0])
    t = TFLiteWriter()
    x = t.input("x", [1, *in_hw, cin])
    t.output(t.op("TRANSPOSE_CONV", [t.const(np.array(out_shape, np.int32)), t.const(wt), x, t.const(bias)], out_shape,
                  "TransposeConvOptions", padding=SAME if same else VALID, stride_h=stride[0], stride_w=stride[1]))
    _msv0_vs_litert_twin(m.finish(), t.finish(), feeds)


@pytest.mark.parametrize("regular,per_det", [(False, 1), (False, 2), (True, 1), (False, 4)])
def test_detection_post_process(regular, per_det):
    from flatbuffers import flexbuffers
    boxes, classes = 40, 3
    centers = R.uniform(0.1, 0.9, (boxes, 2))
    anchors = np.concatenate([centers, R.uniform(0.1, 0.4, (boxes, 2))], 1).astype(np.float32)  # (y, x, h, w)
    opts = dict(max_detections=6, max_classes_per_detection=per_det, detections_per_class=4, use_regular_nms=regular,
                nms_score_threshold=0.3, nms_iou_threshold=0.4, num_classes=classes, y_scale=10.0, x_scale=10.0,
                h_scale=5.0, w_scale=5.0)
    w = TFLiteWriter()
    enc, scores = w.input("enc", [1, boxes, 4]), w.input("scores", [1, boxes, classes + 1])
    slots = 6 * per_det
    outs = w.custom("TFLite_Detection_PostProcess", [enc, scores, w.const(anchors)],
                    [[1, slots, 4], [1, slots], [1, slots], [1]], flexbuffers.Dumps(opts))
    for t in outs:
        w.output(t)
    if per_det > classes:
        with pytest.raises(msv0.UnsupportedOpError, match="max_classes_per_detection above num_classes"):
            convert(w.finish())
        return
    check(w, {"enc": f32(1, boxes, 4, lo=-2, hi=2), "scores": f32(1, boxes, classes + 1, lo=0, hi=1)})


def mediapipe_argmax_pool(x, k):
    """MediaPipe's MaxPoolingWithArgmax2D loops, VALID k x k windows at stride k."""
    n, h, w, c = x.shape
    out, idx = np.zeros((n, h // k, w // k, c), np.float32), np.zeros((n, h // k, w // k, c), np.float32)
    for b, oy, ox, ch in np.ndindex(out.shape):
        best, at = -np.inf, 0
        for fy in range(k):
            for fx in range(k):
                v = x[b, oy * k + fy, ox * k + fx, ch]
                if v > best:
                    best, at = v, fy * k + fx
        out[b, oy, ox, ch], idx[b, oy, ox, ch] = best, np.float32(at) + np.float32(0.1)
    return out, idx


def mediapipe_unpool(x, idx, k):
    n, h, w, c = x.shape
    out = np.zeros((n, h * k, w * k, c), np.float32)
    for b, y, x_, ch in np.ndindex(x.shape):
        j = int(idx[b, y, x_, ch])
        out[b, y * k + j // k, x_ * k + j % k, ch] = x[b, y, x_, ch]
    return out


@pytest.mark.parametrize("k,ties", [(2, False), (2, True), (3, False)])
def test_mediapipe_argmax_pool_and_unpool(k, ties):
    n, h, w, c = 2, 2 * k, 3 * k, 5
    x = f32(n, h, w, c)
    if ties:
        x = np.round(x * 2).astype(np.float32)  # few distinct values: first-maximum order matters
    opts = np.array([2, k, k, k, k, 0], "<i4").tobytes()  # VALID, strides, filter, no activation
    wr = TFLiteWriter()
    xi = wr.input("x", [n, h, w, c])
    pooled, idx = wr.custom("MaxPoolingWithArgmax2D", [xi], [[n, h // k, w // k, c]] * 2, opts)
    doubled = wr.op("ADD", [pooled, pooled], [n, h // k, w // k, c], "AddOptions")
    y = wr.custom("MaxUnpooling2D", [doubled, idx], [[n, h, w, c]], opts)[0]
    for t in (pooled, idx, y):
        wr.output(t)
    got = msv0.Session(msv0.load(convert(wr.finish()))).run({"x": x})
    want_pool, want_idx = mediapipe_argmax_pool(x, k)
    np.testing.assert_array_equal(got[wr.tensors[pooled][0]], want_pool)
    np.testing.assert_array_equal(got[wr.tensors[idx][0]], want_idx)
    np.testing.assert_array_equal(got[wr.tensors[y][0]], mediapipe_unpool(2 * want_pool, want_idx, k))


def test_overlapping_argmax_pooling_is_refused_with_its_reason():
    w = TFLiteWriter()
    x = w.input("x", [1, 5, 5, 2])
    opts = np.array([1, 2, 2, 3, 3, 0], "<i4").tobytes()
    pooled, idx = w.custom("MaxPoolingWithArgmax2D", [x], [[1, 3, 3, 2], [1, 3, 3, 2]], opts)
    w.output(w.custom("MaxUnpooling2D", [pooled, idx], [[1, 6, 6, 2]], opts)[0])
    with pytest.raises(msv0.UnsupportedOpError, match="at their own stride") as err:
        convert(w.finish())
    assert {op for _, op, _ in err.value.nodes} == {"MaxPoolingWithArgmax2D", "MaxUnpooling2D"}


def test_unconvertible_customs_say_why():
    w = TFLiteWriter()
    x = w.input("x", [1, 4, 4, 2])
    y = w.custom("TransformTensorBilinear", [x], [[1, 4, 4, 2]])[0]
    w.output(w.custom("FlexErf", [y], [[1, 4, 4, 2]])[0])
    with pytest.raises(msv0.UnsupportedOpError) as err:
        convert(w.finish())
    reasons = {op: why for _, op, why in err.value.nodes}
    assert "attention-mesh" in reasons["TransformTensorBilinear"] and "Flex delegate" in reasons["FlexErf"]


def _streaming_model(read_only_scale=True):
    """y = x + h; h <- 0.5·y + c, with h a resource variable the CALL_ONCE init sets to h0,
    and (read-only) a variable `scale` that multiplies x."""
    from tflitewriter import RESOURCE
    w = TFLiteWriter()
    init = w.subgraph()
    h0 = f32(1, 4)
    w.multi_op("ASSIGN_VARIABLE", [w.op("VAR_HANDLE", [], [], "VarHandleOptions", RESOURCE, shared_name="h"),
                                   w.const(h0)], [])
    if read_only_scale:
        w.multi_op("ASSIGN_VARIABLE", [w.op("VAR_HANDLE", [], [], "VarHandleOptions", RESOURCE, shared_name="scale"),
                                       w.const(f32(4, lo=1, hi=2))], [])
    w.use(0)
    x = w.input("x", [1, 4])
    w.multi_op("CALL_ONCE", [], [], "CallOnceOptions", init_subgraph_index=init)
    h = w.op("VAR_HANDLE", [], [], "VarHandleOptions", RESOURCE, shared_name="h")
    if read_only_scale:
        s = w.op("VAR_HANDLE", [], [], "VarHandleOptions", RESOURCE, shared_name="scale")
        x = w.op("MUL", [x, w.op("READ_VARIABLE", [s], [4])], [1, 4], "MulOptions")
    y = w.op("ADD", [x, w.op("READ_VARIABLE", [h], [1, 4])], [1, 4], "AddOptions")
    nxt = w.op("ADD", [w.op("MUL", [y, w.const(np.full(1, 0.5, np.float32))], [1, 4], "MulOptions"), w.const(f32(4))],
               [1, 4], "AddOptions")
    w.multi_op("ASSIGN_VARIABLE", [h, nxt], [])
    w.output(y)
    return w, h0


def test_resource_variables_become_state_inputs_and_outputs():
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    w, h0 = _streaming_model()
    data = w.finish()
    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    model = msv0.load(convert(data))
    assert [n.op for n in model.nodes if n.op not in ("Mul", "Add")] == []  # the read-only variable is a constant
    np.testing.assert_array_equal(model.input_defaults["h"], h0)  # "scale" is no input
    s = msv0.Session(model)
    state = {}  # the first call takes the default
    for step in range(3):
        x = f32(1, 4)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        want = it.get_tensor(it.get_output_details()[0]["index"])
        out = s.run({"x": x, **state})
        np.testing.assert_allclose(out[w.tensors[w.outputs[0]][0]], want, rtol=1e-5, atol=1e-6, err_msg=f"step {step}")
        state = {"h": out["h/next"]}



def _while_model():
    """(i, x) -> while i < 5: (i + 1, 0.5·x + c); outputs x and i."""
    w = TFLiteWriter()
    cond = w.subgraph()
    i, x = w.input("i", [1], np.int32), w.input("x", [2, 3])
    w.output(w.op("LESS", [i, w.const(np.array([5], np.int32))], [1], out_dtype=np.bool_))
    body = w.subgraph()
    i, x = w.input("i", [1], np.int32), w.input("x", [2, 3])
    w.output(w.op("ADD", [i, w.const(np.array([1], np.int32))], [1], "AddOptions", out_dtype=np.int32))
    half = w.op("MUL", [x, w.const(np.full(1, 0.5, np.float32))], [2, 3], "MulOptions")
    w.output(w.op("ADD", [half, w.const(f32(3))], [2, 3], "AddOptions"))
    w.use(0)
    i, x = w.input("start", [1], np.int32), w.input("x", [2, 3])
    n, y = w.multi_op("WHILE", [i, x], [[1], [2, 3]], "WhileOptions", [np.int32, np.float32],
                      cond_subgraph_index=cond, body_subgraph_index=body)
    w.output(y)
    w.output(n)
    return w


@pytest.mark.parametrize("start", [0, 3, 7])
def test_while(start):
    check(_while_model(), {"start": np.array([start], np.int32), "x": f32(2, 3)})


@pytest.mark.parametrize("flag", [True, False])
def test_if(flag):
    w = TFLiteWriter()
    then = w.subgraph()
    x, y = w.input("x", [2, 3]), w.input("y", [3])
    w.output(w.op("MUL", [x, y], [2, 3], "MulOptions"))
    other = w.subgraph()
    x, y = w.input("x", [2, 3]), w.input("y", [3])
    w.output(w.op("SUB", [w.op("RELU", [x], [2, 3]), y], [2, 3], "SubOptions"))
    w.use(0)
    c, x = w.input("c", [1], np.bool_), w.input("x", [2, 3])
    y = w.op("IF", [c, x, w.const(f32(3))], [2, 3], "IfOptions", then_subgraph_index=then, else_subgraph_index=other)
    w.output(w.op("ADD", [y, x], [2, 3], "AddOptions"))
    check(w, {"c": np.array([flag]), "x": f32(2, 3)})


def test_problems_in_subgraphs_and_unset_variables_are_reported_together():
    from tflitewriter import RESOURCE
    w = TFLiteWriter()
    body = w.subgraph()
    x = w.input("x", [1, 4])
    w.output(w.op("RFFT2D", [x, x], [1, 4]))
    w.use(0)
    x = w.input("x", [1, 4])
    y = w.op("WHILE", [x], [1, 4], "WhileOptions", cond_subgraph_index=body, body_subgraph_index=body)
    handle = w.op("VAR_HANDLE", [], [], "VarHandleOptions", RESOURCE, shared_name="never_set")
    v = w.op("READ_VARIABLE", [handle], [1, 4])
    w.output(w.op("ADD", [y, v], [1, 4], "AddOptions"))
    with pytest.raises(msv0.UnsupportedOpError) as err:
        convert(w.finish())
    reasons = {name: why for name, _, why in err.value.nodes}
    assert set(reasons) == {"subgraph1/RFFT2D_0", "READ_VARIABLE_2"}
    assert "never_set" in reasons["READ_VARIABLE_2"]

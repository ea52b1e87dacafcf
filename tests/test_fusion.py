"""Fused inverted-residual blocks (msv0.fusion) compute what the unfused per-node path does."""
import numpy as np
import pytest

import msv0
from msv0 import _core, fusion, straight_line, zoo
from msv0.builder import Builder
from msv0.fb.Format import Format
from msv0.fb.ActivationType import ActivationType



def conv(b, x, rng, cin, cout, act, bias=True, **geometry):
    w = b.const(f"w{x}", rng.standard_normal((cout, 1, 1, cin)).astype(np.float32) / np.sqrt(cin),
                format=Format.KHWC)
    ins = [x, w] + ([b.const(f"b{x}", rng.standard_normal(cout).astype(np.float32))] if bias else [])
    return b.node("Conv2D", ins, kernelH=1, kernelW=1, strideH=1, strideW=1, dilateH=1, dilateW=1, group=1,
                  activationType=act, **geometry)


def block(rng, shape, mid, stride, project=True, residual=False, as_conv=False, dilation=1, pads=(1, 1, 1, 1),
          pad_mode=0, dw_bias=True, k=3) -> bytes:
    """x -> 1x1 expand (ActivationType.RELU6) -> kxk depthwise (ActivationType.RELU6) [-> 1x1 project [-> Add x]]."""
    n, h, w, cin = shape
    b = Builder("block")
    x = b.input("x", shape)
    y = conv(b, x, rng, cin, mid, ActivationType.RELU6)
    dww = b.const("dw", rng.standard_normal((mid, k, k, 1)).astype(np.float32) / 3, format=Format.KHWC)
    ins = [y, dww] + ([b.const("dwb", rng.standard_normal(mid).astype(np.float32))] if dw_bias else [])
    up, down, left, right = pads
    geometry = dict(kernelH=k, kernelW=k, strideH=stride, strideW=stride, dilateH=dilation, dilateW=dilation,
                    padMode=pad_mode, padUp=up, padDown=down, padLeft=left, padRight=right, activationType=ActivationType.RELU6)
    if as_conv:  # a Conv2D with one channel per group is a depthwise conv too
        y = b.node("Conv2D", ins, group=mid, **geometry)
    else:
        y = b.node("DepthwiseConv2D", ins, channelMultiplier=1, **geometry)
    if project:
        y = conv(b, y, rng, mid, cin if residual else 9, 0)
        if residual:
            y = b.node("Add", [x, y])
    b.output(y)
    return b.finish()


def no_fusion(planned, uses, num_threads):
    return planned


def run_both(model_bytes, shape, threads, rng, monkeypatch, band):
    """Outputs of the fused Session and of one with fusion off (each node's own kernel object),
    and the fused steps."""
    fused = []

    def spy(*args):
        steps = fuse_blocks(*args)
        fused.extend(nodes for nodes, *_ in steps if len(nodes) > 1)
        return steps

    fuse_blocks = fusion.fuse_blocks
    monkeypatch.setattr(straight_line, "fuse_blocks", spy)
    monkeypatch.setattr(fusion, "MIN_ROWS_PER_THREAD", 1)
    monkeypatch.setattr(fusion, "MAX_BAND", band)
    model = msv0.load(model_bytes)
    x = rng.standard_normal(shape).astype(np.float32)
    native = msv0.Session(model, num_threads=threads)
    monkeypatch.setattr(straight_line, "fuse_blocks", no_fusion)
    unfused = msv0.Session(model, num_threads=threads)
    (a,) = native.run([x]).values()
    (b,) = unfused.run([x]).values()
    return a, b, fused


CASES = [
    # shape, mid, stride, options
    ((1, 13, 11, 5), 17, 1, {}),
    ((1, 13, 11, 5), 33, 2, {}),
    ((1, 14, 9, 8), 16, 2, {"pads": (0, 1, 0, 1)}),
    ((2, 9, 7, 3), 7, 1, {"residual": True}),
    ((2, 10, 10, 4), 24, 2, {"project": False}),
    ((1, 15, 6, 6), 9, 1, {"project": False, "as_conv": True}),
    ((1, 12, 12, 16), 96, 2, {"as_conv": True, "dw_bias": False}),
    ((1, 11, 13, 4), 15, 1, {"dilation": 2, "pads": (2, 2, 2, 2)}),
    ((1, 9, 9, 5), 8, 2, {"pad_mode": 1, "pads": (0, 0, 0, 0)}),  # SAME_UPPER
    ((1, 8, 8, 3), 6, 1, {"pads": (3, 3, 0, 2)}),  # rows whose window lies wholly in the padding
    ((1, 11, 9, 6), 12, 2, {"k": 5, "pads": (2, 2, 2, 2)}),
    # few channels: the depthwise stage vectorises whole rows (c divides the lane count)
    ((1, 12, 10, 3), 8, 1, {}),
    ((2, 9, 13, 5), 4, 1, {"project": False, "pads": (0, 1, 2, 1)}),
]


@pytest.mark.parametrize("band", [1, 2, 0])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape, mid, stride, options", CASES)
def test_fused_block_matches_per_node_path(isa, rng, monkeypatch, threads, band, shape, mid, stride, options):
    a, b, fused = run_both(block(rng, shape, mid, stride, **options), shape, threads, rng, monkeypatch, band)
    assert len(fused) == 1
    assert len(fused[0]) == (2 if options.get("project") is False else 3)
    assert a.shape == b.shape
    # The fused step runs the same SGEMM and depthwise kernels on the same sums; allow for
    # reassociation all the same.
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_intermediate_with_second_consumer_is_not_fused(rng, monkeypatch):
    """An expanded tensor that is also a graph output must be written: no fusion."""
    b = Builder("two_uses")
    x = b.input("x", (1, 8, 8, 4))
    e = conv(b, x, rng, 4, 12, ActivationType.RELU6)
    dw = b.const("dw", rng.standard_normal((12, 3, 3, 1)).astype(np.float32), format=Format.KHWC)
    y = b.node("DepthwiseConv2D", [e, dw], kernelH=3, kernelW=3, strideH=1, strideW=1, dilateH=1, dilateW=1,
               padMode=0, padUp=1, padDown=1, padLeft=1, padRight=1, channelMultiplier=1, activationType=ActivationType.RELU6)
    b.output(e, y)
    model = b.finish()
    monkeypatch.setattr(fusion, "MIN_ROWS_PER_THREAD", 1)
    steps = fusion.fuse_blocks
    seen = []
    monkeypatch.setattr(straight_line, "fuse_blocks", lambda *a: seen.append(steps(*a)) or seen[-1])
    s = msv0.Session(model)
    assert not any(len(nodes) > 1 for nodes, *_ in seen[0])
    xv = rng.standard_normal((1, 8, 8, 4)).astype(np.float32)
    out = s.run([xv])
    monkeypatch.setattr(straight_line, "fuse_blocks", no_fusion)
    ref = msv0.Session(model).run([xv])
    for k in ref:
        np.testing.assert_array_equal(out[k], ref[k])


@pytest.mark.parametrize("threads", [1, 2])
def test_mobilenet_tiny_fused_matches(isa, rng, monkeypatch, threads):
    from msv0 import zoo

    monkeypatch.setattr(fusion, "MIN_ROWS_PER_THREAD", 1)
    a, b, fused = run_both(zoo.mobilenet_tiny(), (1, 64, 64, 3), threads, rng, monkeypatch, 0)
    assert len(fused) >= 4
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


# Activation steps fused into the Conv2D that produces their input: each algorithm (and its
# thread splits: pixel tiles, output channels, per group), several kinds; bit-equal to the conv
# object followed by the activation object.
POST_CASES = [
    # x shape, weight shape, group, stride, pads (pt, pl), algorithm
    ((1, 13, 11, 20), (37, 1, 1, 20), 1, 1, 0, "gemm1x1"),
    ((1, 5, 7, 20), (70, 1, 1, 20), 1, 1, 0, "gemm1x1"),  # 35 pixels: 2 threads split channels
    ((2, 9, 7, 8), (19, 3, 3, 8), 1, 2, 1, "im2col"),
    ((1, 4, 5, 12), (99, 3, 3, 4), 3, 1, 1, "im2col"),  # grouped, channels split per group
    ((1, 18, 17, 16), (24, 3, 3, 16), 1, 1, 1, "winograd"),
    ((1, 7, 9, 16), (40, 3, 3, 16), 1, 1, 1, "winograd_f2"),  # 6 4x4 tiles, 20 2x2
    ((1, 17, 15, 3), (21, 3, 3, 3), 1, 2, 1, "direct"),
    ((2, 11, 13, 24), (24, 3, 3, 1), 24, 1, 1, "depthwise"),
    ((1, 11, 40, 8), (8, 1, 1, 1), 8, 1, 0, "depthwise"),  # few channels: whole rows as one run
]


@pytest.mark.parametrize("kind", ["hswish", "sigmoid", "relu6"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", POST_CASES, ids=[c[-1] for c in POST_CASES])
def test_conv_with_activation_equals_the_two_objects(isa, rng, case, threads, kind):
    x_shape, w_shape, group, stride, pad, algorithm = case
    kh = w_shape[1]
    oh, ow = [(d + 2 * pad - kh) // stride + 1 for d in x_shape[1:3]]
    y_shape = (x_shape[0], oh, ow, w_shape[0])
    w = rng.standard_normal(w_shape).astype(np.float32)
    bias = rng.standard_normal(w_shape[0]).astype(np.float32)
    conv = _core.conv2d_f32(w, bias, group, stride, stride, 1, 1, pad, pad, x_shape, y_shape)
    assert conv.name == algorithm
    act = _core.Activation(_core.ACTIVATION_KINDS[kind], list(y_shape))
    fused = _core.with_activation(conv, act)
    x = rng.standard_normal(x_shape).astype(np.float32) * 3
    pool = _core.ThreadPool(threads)
    pool.bind()
    try:
        y, want, got = (np.full(y_shape, np.nan, np.float32) for _ in range(3))
        conv([x], [y])
        act([y], [want])
        fused([x], [got])
    finally:
        _core.ThreadPool.unbind()
    np.testing.assert_array_equal(got, want)


def test_activation_fusion_in_a_session(rng):
    """Conv2D -> HSWISH -> Conv2D -> PReLU (constant slope) -> Conv2D -> PReLU (slope fed at run
    time): the first two pairs are one step each; the last PReLU stays apart."""
    b = Builder("post")
    x = b.input("x", (1, 9, 9, 4))
    fed = b.input("fed_slope", (8,))
    y = b.node("Activation", [conv(b, x, rng, 4, 8, 0)], type=ActivationType.HSWISH)
    const_slope = rng.standard_normal(8).astype(np.float32)
    y = b.node("PReLU", [conv(b, y, rng, 8, 8, 0), b.const("slope", const_slope)])
    y = b.node("PReLU", [conv(b, y, rng, 8, 8, 0), fed])
    b.output(y)
    model = msv0.load(b.finish())
    session = msv0.Session(model)
    xv = rng.standard_normal((1, 9, 9, 4)).astype(np.float32)
    fed_v = rng.standard_normal(8).astype(np.float32)
    out, times = session.profile([xv, fed_v])
    assert [t.op for t in times] == ["Conv2D+Activation", "Conv2D+PReLU", "Conv2D", "PReLU"]

    def conv_ref(h, node):
        w, bias = (model.tensors[k].data.astype(np.float64) for k in model.nodes[node].inputs[1:3])
        return h @ w.reshape(w.shape[0], -1).T + bias

    h = conv_ref(xv.reshape(-1, 4).astype(np.float64), 0)
    h = h * np.clip(h + 3, 0, 6) / 6
    h = conv_ref(h, 2)
    h = np.where(h >= 0, h, h * const_slope)
    h = conv_ref(h, 4)
    h = np.where(h >= 0, h, h * fed_v)
    (got,) = out.values()
    np.testing.assert_allclose(got, h.reshape(1, 9, 9, 8), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", POST_CASES, ids=[c[-1] for c in POST_CASES])
def test_conv_with_prelu_equals_the_two_objects(isa, rng, case, threads, shared):
    """PReLU's slope (an input of the Activation object) is copied into the fused object, tiled
    as the object tiles it for few channels."""
    x_shape, w_shape, group, stride, pad, algorithm = case
    oh, ow = [(d + 2 * pad - w_shape[1]) // stride + 1 for d in x_shape[1:3]]
    y_shape = (x_shape[0], oh, ow, w_shape[0])
    w = rng.standard_normal(w_shape).astype(np.float32)
    conv = _core.conv2d_f32(w, None, group, stride, stride, 1, 1, pad, pad, x_shape, y_shape)
    slope = rng.standard_normal(1 if shared else w_shape[0]).astype(np.float32)
    act = _core.Activation(_core.ACTIVATION_KINDS["prelu"], list(y_shape), slope_shape=list(slope.shape),
                           channel_shared=shared)
    fused = _core.with_activation(conv, act, slope)
    x = rng.standard_normal(x_shape).astype(np.float32)
    pool = _core.ThreadPool(threads)
    pool.bind()
    try:
        y, want, got = (np.full(y_shape, np.nan, np.float32) for _ in range(3))
        conv([x], [y])
        act([y, slope], [want])
        fused([x], [got])
    finally:
        _core.ThreadPool.unbind()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["gelu_erf", "hswish", "prelu"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows", [1, 7, 100])  # the threads split panels (1, 7) or rows (100)
def test_gemm_with_activation_equals_the_two_objects(isa, rng, kind, threads, rows):
    """A FullConnection's GEMM applies a post-op to each share of rows or panels it writes."""
    n, k = 45, 19
    gemm = _core.Gemm(rng.standard_normal((n, k)).astype(np.float32), True,
                      rng.standard_normal(n).astype(np.float32), [rows, k], [rows, n])
    slope = rng.standard_normal(n).astype(np.float32)
    prelu = kind == "prelu"
    act = _core.Activation(_core.ACTIVATION_KINDS[kind], [rows, n], slope_shape=[n] if prelu else [])
    fused = _core.with_activation(gemm, act, slope if prelu else np.empty(0, np.float32))
    x = rng.standard_normal((rows, k)).astype(np.float32)
    pool = _core.ThreadPool(threads)
    pool.bind()
    try:
        y, want, got = (np.full((rows, n), np.nan, np.float32) for _ in range(3))
        gemm([x], [y])
        act([y, slope] if prelu else [y], [want])
        fused([x], [got])
    finally:
        _core.ThreadPool.unbind()
    np.testing.assert_array_equal(got, want)


def test_with_activation_checks_its_operands(rng):
    w = rng.standard_normal((8, 1, 1, 4)).astype(np.float32)
    conv_obj = _core.conv2d_f32(w, None, 1, 1, 1, 1, 1, 0, 0, (1, 3, 3, 4), (1, 3, 3, 8))
    prelu = _core.Activation(_core.ACTIVATION_KINDS["prelu"], [1, 3, 3, 8], slope_shape=[8])
    with pytest.raises(ValueError, match="slope"):
        _core.with_activation(conv_obj, prelu)  # a PReLU needs its slope
    relu = _core.Activation(_core.ACTIVATION_KINDS["relu"], [1, 3, 3, 9])
    with pytest.raises(ValueError, match="shape"):
        _core.with_activation(conv_obj, relu)
    tanh = _core.Activation(_core.ACTIVATION_KINDS["tanh"], [3, 8])  # not a kernel that takes post-ops
    assert _core.with_activation(tanh, _core.Activation(_core.ACTIVATION_KINDS["relu"], [3, 8])) is None


def test_activations_of_interleaved_towers_move_up_to_their_producers(rng):
    """Steps in the order conv A, conv B, PReLU(A), PReLU(B), Add, HSWISH: each activation is fused
    into its producer although another step comes between them."""
    b = Builder("towers")
    x = b.input("x", (1, 7, 6, 4))
    a, c = conv(b, x, rng, 4, 8, 0), conv(b, x, rng, 4, 8, 0)
    slope = rng.standard_normal(8).astype(np.float32)
    pa, pc = (b.node("PReLU", [t, b.const(f"s{t}", slope)]) for t in (a, c))
    y = b.node("Activation", [b.node("Add", [pa, pc])], type=ActivationType.HSWISH)
    b.output(y)
    model = msv0.load(b.finish())
    xv = rng.standard_normal((1, 7, 6, 4)).astype(np.float32)
    out, times = msv0.Session(model).profile([xv])
    assert [t.op for t in times] == ["Conv2D+PReLU", "Conv2D+PReLU", "Add+Activation"]

    def tower(node):
        w, bias = (model.tensors[k].data.astype(np.float64) for k in model.nodes[node].inputs[1:3])
        h = xv.reshape(-1, 4).astype(np.float64) @ w.reshape(8, 4).T + bias
        return np.where(h >= 0, h, h * slope)

    h = tower(0) + tower(1)
    want = (h * np.clip(h + 3, 0, 6) / 6).reshape(1, 7, 6, 8)
    (got,) = out.values()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["prelu", "hswish"])
@pytest.mark.parametrize("threads", [1, 2])
def test_binary_with_activation_equals_the_two_objects(isa, rng, kind, threads):
    shape = [2, 37, 33, 24]  # 58608 elements: 4 chunks of 16K on 2 threads
    add = _core.Binary(0, 0, 0, 24, shape, shape, shape, -np.inf, np.inf)
    slope = rng.standard_normal(24).astype(np.float32)
    act = _core.Activation(_core.ACTIVATION_KINDS[kind], shape, slope_shape=[24] if kind == "prelu" else [])
    fused = _core.with_activation(add, act, slope)
    a, c = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    pool = _core.ThreadPool(threads)
    pool.bind()
    try:
        y, want, got = (np.full(shape, np.nan, np.float32) for _ in range(3))
        add([a, c], [y])
        act([y, slope] if kind == "prelu" else [y], [want])
        fused([a, c], [got])
    finally:
        _core.ThreadPool.unbind()
    np.testing.assert_array_equal(got, want)


# Binary steps with a constant operand after a producer: (op, constant kind, constant's position).
# Maximum with one value is openWakeWord's; Sub with the constant first cannot run as y op c.
CONSTANT_POSTS = [(4, 2, 1), (5, 2, 0), (1, 1, 0), (2, 3, 1)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", POST_CASES, ids=[c[-1] for c in POST_CASES])
def test_conv_with_post_chain_equals_the_objects(isa, rng, case, threads):
    """LeakyReLU, then each Binary of CONSTANT_POSTS, then HSWISH, fused stage by stage into the
    conv: bit-equal to the objects run one after another, NaN and ±0 included."""
    x_shape, w_shape, group, stride, pad, algorithm = case
    oh, ow = [(d + 2 * pad - w_shape[1]) // stride + 1 for d in x_shape[1:3]]
    y_shape = (x_shape[0], oh, ow, w_shape[0])
    w = rng.standard_normal(w_shape).astype(np.float32)
    conv = _core.conv2d_f32(w, None, group, stride, stride, 1, 1, pad, pad, x_shape, y_shape)
    assert conv.name == algorithm
    stages = [(_core.Activation(_core.ACTIVATION_KINDS["leaky_relu"], list(y_shape), alpha=0.2), None, None)]
    for op, kind, pos in CONSTANT_POSTS:
        c_shape = {2: (1,), 1: (y_shape[-1],), 3: y_shape[:-1] + (1,)}[kind]
        c = rng.standard_normal(c_shape).astype(np.float32)
        c.flat[0] = np.nan if op == 4 else -0.0
        shapes = (c_shape, y_shape) if pos == 0 else (y_shape, c_shape)
        kinds = (kind, 0) if pos == 0 else (0, kind)
        stages.append((_core.Binary(op, *kinds, y_shape[-1], *shapes, y_shape), c, pos))
    stages.append((_core.Activation(_core.ACTIVATION_KINDS["hswish"], list(y_shape)), None, None))
    fused = conv
    for obj, c, pos in stages:
        fused = _core.with_activation(fused, obj) if c is None else _core.with_binary(fused, obj, c, pos)
    x = rng.standard_normal(x_shape).astype(np.float32) * 3
    x[0, 0, 0, 0] = np.nan
    pool = _core.ThreadPool(threads)
    pool.bind()
    try:
        want = np.full(y_shape, np.nan, np.float32)
        conv([x], [want])
        for obj, c, pos in stages:
            ins = [want] if c is None else ([c, want] if pos == 0 else [want, c])
            nxt = np.full(y_shape, np.nan, np.float32)
            obj(ins, [nxt])
            want = nxt
        got = np.full(y_shape, np.nan, np.float32)
        fused([x], [got])
    finally:
        _core.ThreadPool.unbind()
    np.testing.assert_array_equal(got, want)


def test_with_binary_takes_only_what_it_can_run(rng):
    shape = [1, 5, 5, 8]
    w = rng.standard_normal((8, 1, 1, 4)).astype(np.float32)
    conv = _core.conv2d_f32(w, None, 1, 1, 1, 1, 1, 0, 0, (1, 5, 5, 4), shape)
    one = np.float32([0.5])
    maximum = _core.Binary(4, 0, 2, 8, shape, [1], shape)
    # the producer's output broadcast over a constant of the output's shape, or of another rank
    row = _core.Binary(4, 0, 1, 8, shape, [1, 8], shape)
    assert _core.with_binary(_core.Gemm(w.reshape(8, 4), True, None, [1, 4], [1, 8]), row,
                             np.zeros(shape, np.float32), 0) is None
    flat = _core.Binary(4, 0, 2, 8, [25, 8], [1], shape)
    assert _core.with_binary(_core.Gemm(w.reshape(8, 4), True, None, [25, 4], [25, 8]), flat, one, 1) is None
    relu = _core.Activation(_core.ACTIVATION_KINDS["relu"], shape)
    # a Binary that runs a post-op of its own brings it along: conv, + constant, ReLU
    add = _core.Binary(0, 0, 0, 8, shape, shape, shape)
    constant = rng.standard_normal(shape).astype(np.float32)
    x = rng.standard_normal((1, 5, 5, 4)).astype(np.float32)
    y, got = np.empty(shape, np.float32), np.empty(shape, np.float32)
    conv([x], [y])
    _core.with_binary(conv, _core.with_activation(add, relu), constant, 1)([x], [got])
    np.testing.assert_array_equal(got, np.maximum(y + constant, 0))
    with pytest.raises(ValueError, match="constant: 2 values"):
        _core.with_binary(conv, maximum, np.zeros(2, np.float32), 1)
    with pytest.raises(ValueError, match="constant_pos"):
        _core.with_binary(conv, maximum, one, 2)
    with pytest.raises(ValueError, match="Binary object"):
        _core.with_binary(conv, relu, one, 1)
    other = [1, 5, 5, 9]
    with pytest.raises(ValueError, match="not the Binary's operand"):
        _core.with_binary(conv, _core.Binary(4, 0, 2, 9, other, [1], other), one, 1)
    tanh = _core.Activation(_core.ACTIVATION_KINDS["tanh"], shape)  # not a kernel that takes post-ops
    assert _core.with_binary(tanh, maximum, one, 1) is None


def test_constant_binaries_fuse_in_a_session(rng):
    """Conv2D -> LeakyReLU -> Maximum(y, -0.4) -> Minimum(2, y) -> Conv2D -> Add(y, fed): the
    first four are one step; the Add's other operand is fed at run time, so it stays apart."""
    b = Builder("chain")
    x = b.input("x", (1, 6, 7, 4))
    fed = b.input("fed", (8,))
    y = b.node("Activation", [conv(b, x, rng, 4, 8, 0)], type=ActivationType.LEAKY_RELU, alpha=0.2)
    y = b.node("Maximum", [y, b.const("lo", np.float32([-0.4]))])
    y = b.node("Minimum", [b.const("hi", np.float32([2.0])), y])
    y = b.node("Add", [conv(b, y, rng, 8, 8, 0), fed])
    b.output(y)
    model = msv0.load(b.finish())
    xv = rng.standard_normal((1, 6, 7, 4)).astype(np.float32) * 2
    fed_v = rng.standard_normal(8).astype(np.float32)
    out, times = msv0.Session(model).profile([xv, fed_v])
    assert [t.op for t in times] == ["Conv2D+Activation+Maximum+Minimum", "Conv2D", "Add"]

    def conv_ref(h, node):
        w, bias = (model.tensors[k].data.astype(np.float64) for k in model.nodes[node].inputs[1:3])
        return h @ w.reshape(w.shape[0], -1).T + bias

    h = conv_ref(xv.reshape(-1, 4).astype(np.float64), 0)
    h = np.minimum(np.maximum(np.where(h >= 0, h, 0.2 * h), -0.4), 2.0)
    h = conv_ref(h, 4) + fed_v
    (got,) = out.values()
    np.testing.assert_allclose(got, h.reshape(1, 6, 7, 8), rtol=1e-4, atol=1e-4)


# The GEMM-based Conv2D objects (the ones with_residual takes).
RESIDUAL_CASES = [c for c in POST_CASES if c[-1] in ("gemm1x1", "im2col", "winograd", "winograd_f2")]


@pytest.mark.parametrize("op,first", [(0, True), (0, False), (1, True), (2, False)],
                         ids=["add", "add_b", "sub", "mul_b"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", RESIDUAL_CASES, ids=[c[-1] for c in RESIDUAL_CASES])
def test_conv_with_residual_equals_the_two_objects(isa, rng, case, threads, op, first):
    """Add, Sub or Mul of the conv's output (operand a, or b where the op commutes) and another
    full operand, with a ReLU6 clamp, then HSWISH: bit-equal to the three objects."""
    x_shape, w_shape, group, stride, pad, algorithm = case
    oh, ow = [(d + 2 * pad - w_shape[1]) // stride + 1 for d in x_shape[1:3]]
    y_shape = (x_shape[0], oh, ow, w_shape[0])
    w = rng.standard_normal(w_shape).astype(np.float32)
    bias = rng.standard_normal(w_shape[0]).astype(np.float32)
    conv = _core.conv2d_f32(w, bias, group, stride, stride, 1, 1, pad, pad, x_shape, y_shape)
    assert conv.name == algorithm
    binary = _core.Binary(op, 0, 0, y_shape[-1], y_shape, y_shape, y_shape, 0.0, 6.0)
    act = _core.Activation(_core.ACTIVATION_KINDS["hswish"], list(y_shape))
    fused = _core.with_activation(_core.with_residual(conv, binary, first), act)
    x = rng.standard_normal(x_shape).astype(np.float32)
    r = rng.standard_normal(y_shape).astype(np.float32) * 3
    pool = _core.ThreadPool(threads)
    pool.bind()
    try:
        y, z, want, got = (np.full(y_shape, np.nan, np.float32) for _ in range(4))
        conv([x], [y])
        binary([y, r] if first else [r, y], [z])
        act([z], [want])
        fused([x, r], [got])
    finally:
        _core.ThreadPool.unbind()
    np.testing.assert_array_equal(got, want)


def test_with_residual_takes_only_what_it_can_run(rng):
    shape = (1, 5, 5, 8)
    w = rng.standard_normal((8, 1, 1, 4)).astype(np.float32)
    conv = _core.conv2d_f32(w, None, 1, 1, 1, 1, 1, 0, 0, (1, 5, 5, 4), shape)
    add = _core.Binary(0, 0, 0, 8, shape, shape, shape)
    assert _core.with_residual(_core.with_residual(conv, add, True), add, True) is None
    relu = _core.Activation(_core.ACTIVATION_KINDS["relu"], list(shape))
    assert _core.with_residual(_core.with_activation(conv, relu), add, True) is None  # it would run first
    assert _core.with_residual(conv, _core.Binary(1, 0, 0, 8, shape, shape, shape), False) is None  # r - y
    assert _core.with_residual(conv, _core.Binary(0, 0, 1, 8, shape, (8,), shape), True) is None  # per channel
    assert _core.with_residual(conv, relu, True) is None
    dw = _core.conv2d_f32(rng.standard_normal((8, 3, 3, 1)).astype(np.float32), None, 8, 1, 1, 1, 1, 1, 1,
                          shape, shape)
    assert dw.name == "depthwise" and _core.with_residual(dw, add, True) is None
    other = (1, 5, 5, 9)
    with pytest.raises(ValueError, match="producer's output shape"):
        _core.with_residual(conv, _core.Binary(0, 0, 0, 9, other, other, other), True)


def residual_net(rng) -> bytes:
    """x -> conv A; x -> conv B; Add(A, B) with ReLU -> PReLU: A's step merges into the Add, which
    comes after B, and the PReLU into that."""
    b = Builder("residual")
    x = b.input("x", (1, 9, 7, 4))
    a, c = conv(b, x, rng, 4, 8, 0), conv(b, x, rng, 4, 8, 0)
    y = b.node("Add", [a, c], activationType=ActivationType.RELU)
    y = b.node("PReLU", [y, b.const("slope", rng.standard_normal(8).astype(np.float32))])
    b.output(y)
    return b.finish()


@pytest.mark.parametrize("net", ["residual", "resnet18"])
def test_residual_fusion_in_a_session(rng, monkeypatch, net):
    model = residual_net(rng) if net == "residual" else zoo.resnet18(resolution=64)
    x = rng.standard_normal(msv0.load(model).inputs[0].shape).astype(np.float32)
    out, times = msv0.Session(model).profile([x])
    ops = [t.op for t in times]
    if net == "residual":
        assert ops == ["Conv2D", "Conv2D+Add+PReLU"]
    else:
        assert ops.count("Conv2D+Add") == 8  # every residual Add of ResNet-18's 8 blocks
    monkeypatch.setattr(straight_line, "fuse_residuals", lambda planned, uses: planned)
    want = msv0.Session(model).run([x])
    for name in want:
        np.testing.assert_array_equal(out[name], want[name])

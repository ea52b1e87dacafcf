"""precision="bf16" and "fp16": the reduced-precision GEMM kernel objects against NumPy on the same
operands rounded to bf16 (x86) or fp16 (aarch64, under qemu in CI), whole zoo nets against fp32,
and the fp32 fallback where the CPU or tier lacks them."""
import pickle

import numpy as np
import pytest

import msv0
from msv0 import _core, zoo

# AVX512-BF16 and AMX are CPU features of the bf16 GEMM (csrc/kernels/gemm_bf16.cc), not tiers.
needs_bf16 = pytest.mark.skipif(not _core.bf16_available(), reason="no AVX512-BF16 here")


def bf16(x):
    """x rounded to the nearest bf16 (ties to even), as float32: vcvtne2ps2bf16 on finite values."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def check_close(got, a, b, bias, lo=-np.inf, hi=np.inf):
    """got against bf16(a) · bf16(b) + bias in float64. Products of two bf16 values are exact in
    float32, so the kernel's only error is the rounding of its float32 running sums: at most
    (k + 2) · 2^-24 · Σ|a·b| (+ |bias|) per output. Unrounded operands would be off by ~2^-9."""
    a64, b64 = bf16(a).astype(np.float64), bf16(b).astype(np.float64)
    want = a64 @ b64 + (0 if bias is None else bias)
    bound = np.abs(a64) @ np.abs(b64) + (0 if bias is None else np.abs(bias))
    tol = (a.shape[-1] + 2) * 2.0 ** -24 * bound + 1e-30
    err = np.abs(got.astype(np.float64) - np.clip(want, lo, hi))
    assert (err <= tol).all(), f"{(err > tol).sum()} of {err.size} outside tolerance; max err {err.max()}"


@pytest.fixture(params=["avx512", "avx512vnni"])
def bf16_tier(request):
    """Each bf16 GEMM: vdpbf16ps (avx512 tier) and AMX tiles (avx512vnni, where the CPU has AMX)."""
    if request.param not in msv0.available_isas():
        pytest.skip(f"no {request.param} tier here")
    with msv0.isa_cap(request.param):
        if not _core.bf16_available():
            pytest.skip("no AVX512-BF16 here")
        if request.param == "avx512vnni" and _core.bf16_tile() != (32, 32):
            pytest.skip("no AMX here: the avx512 kernel serves this tier")
        yield request.param


@pytest.fixture(params=[1, 2], ids=["1t", "2t"])
def threads(request):
    pool = _core.ThreadPool(request.param)
    pool.bind()
    yield request.param
    _core.ThreadPool.unbind()


# Around the 12 x 32 tile, the 120-row chunk, the 512-deep k block and odd k (a half pair).
GEMM_SIZES = [(1, 1, 1), (1, 1000, 1280), (11, 15, 3), (12, 32, 2), (13, 33, 9), (25, 47, 511), (121, 17, 513),
              (130, 64, 1030), (196, 96, 384)]


def check_gemm(rng, precision, m, n, k, transposed, check):
    """A Gemm object at `precision` (bias where k is odd, clamp [-1.5, 2]): check(y, a, B, bias)."""
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if transposed else (k, n), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32) if k % 2 else None
    gemm = _core.Gemm(b, transposed, bias, (m, k), (m, n), -1.5, 2.0, precision=precision)
    y = np.full((m, n), np.nan, np.float32)
    gemm([a], [y])
    check(y, a, b.T if transposed else b, bias)


def check_matmul_constant_b(rng, precision, check):
    """A batched MatMul object with a constant b at `precision`: check(y[i], a[i], b[i]); without
    a constant b it refuses the precision."""
    a = rng.standard_normal((3, 29, 70), dtype=np.float32)
    b = rng.standard_normal((3, 70, 37), dtype=np.float32)
    mm = _core.MatMul(3, 29, 37, 70, False, False, b, None, a.shape, b.shape, (3, 29, 37), precision=precision)
    y = np.full((3, 29, 37), np.nan, np.float32)
    mm([a], [y])
    for i in range(3):
        check(y[i], a[i], b[i])
    with pytest.raises(ValueError, match="constant b"):
        _core.MatMul(3, 29, 37, 70, False, False, None, None, a.shape, b.shape, (3, 29, 37), precision=precision)


@needs_bf16
@pytest.mark.parametrize("m,n,k", GEMM_SIZES, ids=str)
@pytest.mark.parametrize("transposed", [False, True])
def test_gemm_bf16(bf16_tier, rng, threads, m, n, k, transposed):
    check_gemm(rng, "bf16", m, n, k, transposed, lambda y, a, b, bias: check_close(y, a, b, bias, -1.5, 2.0))


@needs_bf16
def test_matmul_bf16_constant_b(bf16_tier, rng, threads):
    check_matmul_constant_b(rng, "bf16", lambda y, a, b: check_close(y, a, b, None))


def im2col(x, kh, kw, stride, pads, oh, ow):
    """Rows of (kh, kw, c) windows of NHWC x, one per output pixel, zeros in the padding."""
    n, h, w, c = x.shape
    pt, pl = pads
    xp = np.zeros((n, h + pt + kh + stride * oh, w + pl + kw + stride * ow, c), np.float32)
    xp[:, pt:pt + h, pl:pl + w] = x
    cols = [xp[:, ky:ky + stride * (oh - 1) + 1:stride, kx:kx + stride * (ow - 1) + 1:stride]
            for ky in range(kh) for kx in range(kw)]
    return np.stack(cols, axis=3).reshape(n * oh * ow, kh * kw * c)


# (x shape, oc, kernel, stride, pads, group, algorithm): a 1x1 over odd channels, im2col with
# padding, stride 2 and groups, a 7x7 map (49 pixels: the threads split channels), a 3x3
# that fp32 runs on Winograd: im2col on AMX, Winograd F(2,3) (test_conv2d_bf16_winograd_f2) on vdpbf16ps.
IN_PLACE = {"avx512": "winograd_f2", "avx512vnni": "im2col_in_place"}
CONVS = [((1, 9, 11, 37), 45, 1, 1, (0, 0), 1, "gemm1x1"),
         ((2, 10, 9, 24), 33, 3, 2, (1, 1), 1, "im2col"),
         ((1, 8, 7, 20), 34, 3, 1, (1, 0), 2, "im2col"),
         ((1, 7, 7, 96), 160, 3, 1, (1, 1), 1, IN_PLACE),
         ((1, 17, 19, 40), 36, 3, 1, (1, 1), 1, {"avx512": "winograd_f2", "avx512vnni": "im2col"})]
# On AMX, windows that split into 32-value steps are read in place from a padded bf16 copy of x
# ("im2col_in_place"): runs of output rows as one range of pixels (stride 1; 16 pixels exactly in
# the 4x3 map, 1 + 16 in the 2x2 kernel's), or in lines of whole tiles (stride 2: 14 pixels a
# line of 16, whose last windows reach past the copy's end; 19 of 32 and 7 of 16 are gathered).
ON_AMX = {"avx512": "im2col", "avx512vnni": "im2col_in_place"}
IN_PLACE_CONVS = [((2, 12, 18, 64), 70, 3, 1, (1, 1), 1, IN_PLACE),
                  ((1, 5, 6, 64), 17, 3, 1, (0, 0), 1, ON_AMX),
                  ((1, 4, 4, 32), 16, 3, 1, (0, 0), 1, "im2col"),
                  ((1, 9, 20, 16), 24, 2, 1, (0, 0), 1, ON_AMX),
                  ((2, 28, 27, 32), 33, 3, 2, (1, 1), 1, ON_AMX),
                  ((1, 20, 37, 32), 33, 3, 2, (1, 1), 1, "im2col"),
                  ((1, 14, 14, 64), 40, 3, 2, (1, 1), 1, "im2col")]
# RGB stems under bf16: K = 75 on the bf16 GEMM, K = 27 on the fp32 direct conv (test_conv).
BF16_STEMS = [((1, 23, 21, 3), 40, 5, 2, (2, 2), 1, "im2col"), ((1, 23, 21, 3), 40, 3, 2, (1, 1), 1, "direct")]


def check_conv(rng, precision, x_shape, oc, kernel, stride, pads, group, algorithm, check_group):
    """A conv2d_f32 object of this geometry at `precision` picks `algorithm`; unless that is
    Winograd or direct (tested in test_conv and below), check_group(y of group g as rows, its
    im2col rows, its weight as B, its bias) holds for every group."""
    n, h, w, c = x_shape
    cg, og = c // group, oc // group
    oh, ow = (h + 2 * pads[0] - kernel) // stride + 1, (w + 2 * pads[1] - kernel) // stride + 1
    x = rng.standard_normal(x_shape, dtype=np.float32)
    wt = rng.standard_normal((oc, kernel, kernel, cg), dtype=np.float32)
    bias = rng.standard_normal(oc, dtype=np.float32)
    geometry = (group, stride, stride, 1, 1, *pads, x_shape, (n, oh, ow, oc))
    conv = _core.conv2d_f32(wt, bias, *geometry, 0.0, 6.0, precision=precision)
    assert conv.name == algorithm
    assert _core.conv2d_algorithm(wt.shape, *geometry, precision=precision) == algorithm.removesuffix("_in_place")
    if algorithm in ("winograd", "winograd_f2", "direct"):
        return
    y = np.full((n, oh, ow, oc), np.nan, np.float32)
    conv([x], [y])
    for g in range(group):
        a = im2col(x[..., g * cg:(g + 1) * cg], kernel, kernel, stride, pads, oh, ow)
        b = wt[g * og:(g + 1) * og].reshape(og, -1).T
        check_group(y[..., g * og:(g + 1) * og].reshape(-1, og), a, b, bias[g * og:(g + 1) * og])


@needs_bf16
@pytest.mark.parametrize("x_shape,oc,kernel,stride,pads,group,algorithm", CONVS + IN_PLACE_CONVS + BF16_STEMS, ids=str)
def test_conv2d_bf16(bf16_tier, rng, threads, x_shape, oc, kernel, stride, pads, group, algorithm):
    want = algorithm if isinstance(algorithm, str) else algorithm[bf16_tier]
    check_conv(rng, "bf16", x_shape, oc, kernel, stride, pads, group, want,
               lambda got, a, b, bias: check_close(got, a, b, bias, 0.0, 6.0))


# F(2x2, 3x3): d's 4x4 tiles to V = B^T d B, g to U = G g G^T, Y = A^T (U · V) A.
WINO_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)
WINO_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
WINO_AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]])


@needs_bf16
@pytest.mark.parametrize("x_shape,stride", [((1, 12, 18, 64), 1), ((1, 20, 27, 32), 2)], ids=str)
def test_conv2d_bf16_in_place_post_ops(bf16_tier, rng, threads, x_shape, stride):
    """A residual Add and an activation after the in-place conv (on AMX) run on each piece of rows
    it writes: bit-equal to the three objects."""
    n, h, w, c = x_shape
    oh, ow = (h - 1) // stride + 1, (w - 1) // stride + 1
    y_shape = (n, oh, ow, 48)
    wt = rng.standard_normal((48, 3, 3, c), dtype=np.float32)
    bias = rng.standard_normal(48, dtype=np.float32)
    conv = _core.conv2d_f32(wt, bias, 1, stride, stride, 1, 1, 1, 1, x_shape, y_shape, precision="bf16")
    assert (conv.name == "im2col_in_place") == (bf16_tier == "avx512vnni")
    binary = _core.Binary(0, 0, 0, 48, y_shape, y_shape, y_shape, 0.0, 6.0)
    act = _core.Activation(_core.ACTIVATION_KINDS["hswish"], list(y_shape))
    fused = _core.with_activation(_core.with_residual(conv, binary, True), act)
    x = rng.standard_normal(x_shape).astype(np.float32)
    r = rng.standard_normal(y_shape).astype(np.float32)
    y, z, want, got = (np.full(y_shape, np.nan, np.float32) for _ in range(4))
    conv([x], [y])
    binary([y, r], [z])
    act([z], [want])
    fused([x, r], [got])
    np.testing.assert_array_equal(got, want)


@needs_bf16
@pytest.mark.parametrize("dilation,stride", [((2, 2), 1), ((1, 3), 1), ((2, 1), 2)], ids=str)
def test_conv2d_bf16_dilated(bf16_tier, rng, threads, dilation, stride):
    """Dilated windows (a step per tap where taps along a row are apart) against the fp32 conv of
    the bf16-rounded operands, whose products are the same exact values."""
    x_shape, oc, (dh, dw) = (1, 13, 31, 64), 24, dilation
    oh, ow = (13 + 2 - 2 * dh - 1) // stride + 1, (31 + 2 - 2 * dw - 1) // stride + 1
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((oc, 3, 3, 64)).astype(np.float32)
    bias = rng.standard_normal(oc).astype(np.float32)
    geometry = (1, stride, stride, dh, dw, 1, 1, x_shape, (1, oh, ow, oc), -np.inf, np.inf)
    conv = _core.conv2d_f32(w, bias, *geometry, precision="bf16")
    assert (conv.name == "im2col_in_place") == (bf16_tier == "avx512vnni")
    ref = _core.conv2d_f32(bf16(w), bias, *geometry)
    got, want = np.full((1, oh, ow, oc), np.nan, np.float32), np.full((1, oh, ow, oc), np.nan, np.float32)
    conv([x], [got])
    ref([bf16(x)], [want])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def winograd_f2_bf16(x, w, bias, pt, pl, oh, ow, lo, hi):
    """The bf16 F(2,3) conv's result in float64 with its bound on the float32 sums' rounding:
    V in float32 as the kernel forms it (columns, then rows; each entry one add of two values:
    exact replication), U in float64 then float32, both rounded to bf16; the products and sums
    exact. The kernel's sums of at most k products (float32, exact bf16 products) and its output
    transform (9 terms) and bias add float32 roundings only: (k + 12) · 2^-24 · Σ|terms|."""
    n, h, wd, c = x.shape
    th, tw = -(-oh // 2), -(-ow // 2)
    xp = np.zeros((n, 2 * th + 2 + pt + h, 2 * tw + 2 + pl + wd, c), np.float32)
    xp[:, pt:pt + h, pl:pl + wd] = x
    d = np.stack([np.stack([xp[:, i:i + 2 * th:2, j:j + 2 * tw:2] for j in range(4)], 3) for i in range(4)], 3)
    cols = np.einsum("ai,ntsijc->ntsajc", WINO_BT, d)  # one add per entry: float32 as the kernel's
    v = bf16(np.einsum("bj,ntsajc->ntsabc", WINO_BT, cols).astype(np.float32)).astype(np.float64)
    g = w.astype(np.float64).transpose(1, 2, 3, 0)  # [ky, kx, c, oc]
    u = np.einsum("ay,yxco->axco", WINO_G, g)
    u = bf16(np.einsum("bx,axco->abco", WINO_G, u).astype(np.float32)).astype(np.float64)
    m = np.einsum("ntsabc,abco->ntsabo", v, u)
    mabs = np.einsum("ntsabc,abco->ntsabo", np.abs(v), np.abs(u))
    y = np.einsum("ia,jb,ntsabo->ntsijo", WINO_AT, WINO_AT, m) + bias
    bound = np.einsum("ia,jb,ntsabo->ntsijo", np.abs(WINO_AT), np.abs(WINO_AT), mabs) + np.abs(bias)
    tol = (c + 12) * 2.0 ** -24 * bound
    untile = lambda t: t.transpose(0, 1, 3, 2, 4, 5).reshape(n, 2 * th, 2 * tw, -1)[:, :oh, :ow]
    return np.clip(untile(y), lo, hi), untile(tol)


# A map of odd size (clipped tiles) with channels off the 16-lane vectors, a batch of two 7x7
# maps (16 tiles), and 14x14 with weights large enough for the threads to split channels.
WINO_F2 = [((1, 17, 19, 40), 36, (1, 1)), ((2, 7, 7, 33), 17, (1, 1)), ((1, 14, 14, 176), 168, (1, 1)),
           ((1, 9, 11, 16), 48, (0, 2))]


@needs_bf16
@pytest.mark.parametrize("x_shape,oc,pads", WINO_F2, ids=str)
def test_conv2d_bf16_winograd_f2(bf16_tier, rng, threads, x_shape, oc, pads):
    if bf16_tier != "avx512":
        pytest.skip("with AMX, bf16 3x3 convs take im2col")
    n, h, wd, c = x_shape
    oh, ow = h + 2 * pads[0] - 2, wd + 2 * pads[1] - 2
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = rng.standard_normal((oc, 3, 3, c), dtype=np.float32)
    bias = rng.standard_normal(oc, dtype=np.float32)
    conv = _core.conv2d_f32(w, bias, 1, 1, 1, 1, 1, *pads, x_shape, (n, oh, ow, oc), -4.0, 6.0, precision="bf16")
    assert conv.name == "winograd_f2"
    y = np.full((n, oh, ow, oc), np.nan, np.float32)
    conv([x], [y])
    want, tol = winograd_f2_bf16(x, w, bias, *pads, oh, ow, -4.0, 6.0)
    err = np.abs(y - want)
    assert (err <= tol).all(), f"{(err > tol).sum()} of {err.size} outside tolerance; max err {err.max()}"


def rel_err(got, want):
    """max |got - want| / max |want|: the largest error relative to the output's scale."""
    return float(np.abs(got - want).max() / np.abs(want).max())


# MobileNetV2 (fused blocks, 1x1 convs, the classifier) and ResNet-18 (im2col, Winograd kept fp32).
def check_zoo_net(net, resolution, num_threads, precision, bound):
    """The zoo net at `precision` runs it, within `bound` (rel_err) of fp32 but not equal, and
    pickles with it."""
    model = zoo.NETS[net](resolution=resolution).to_ms()
    fp32 = msv0.Session(model, num_threads=num_threads)
    session = msv0.Session(model, num_threads=num_threads, precision=precision)
    assert session.precision == precision
    x = np.random.default_rng(1).standard_normal(fp32.inputs[0].shape).astype(np.float32)
    want, got = fp32.run([x]), session.run([x])
    for name in want:
        err = rel_err(got[name], want[name])
        assert 0 < err <= bound, f"{net} {name}: relative error {err}"
    assert pickle.loads(pickle.dumps(session)).precision == precision


@needs_bf16
@pytest.mark.parametrize("net,num_threads", [("mobilenet_v2", 1), ("mobilenet_v2", 2), ("resnet18", 2)])
def test_zoo_net_bf16_against_fp32(net, num_threads):
    check_zoo_net(net, 96 if net == "mobilenet_v2" else 112, num_threads, "bf16", 1e-2)


# A tier without each reduced precision's instructions: what this CPU runs below AVX-512.
FALLBACKS = [("bf16", "avx2" if "avx2" in msv0.available_isas() else "scalar", "AVX512-BF16"),
             ("fp16", "scalar", "FP16 arithmetic")]


@pytest.mark.parametrize("precision,tier,needs", FALLBACKS, ids=[f[0] for f in FALLBACKS])
def test_falls_back_to_fp32_with_a_warning(precision, tier, needs):
    model = zoo.mobilenet_tiny()
    x = np.random.default_rng(1).standard_normal(msv0.load(model).inputs[0].shape).astype(np.float32)
    with msv0.isa_cap(tier):
        assert not {"bf16": _core.bf16_available, "fp16": _core.fp16_available}[precision]()
        with pytest.warns(RuntimeWarning, match=f"precision='{precision}' needs {needs}"):
            session = msv0.Session(model, precision=precision)
        assert session.precision == "fp32"
        want = msv0.Session(model).run([x])
        got = session.run([x])
        with pytest.raises(ValueError, match=f"{precision}: needs {needs}"):
            _core.Gemm(np.ones((4, 4), np.float32), False, None, (1, 4), (1, 4), precision=precision)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("precision", ["FP16", "BF16", "", None, 16])
def test_unknown_precision_is_an_input_error(precision):
    with pytest.raises(msv0.InputError, match="precision must be one of"):
        msv0.Session(zoo.mobilenet_tiny(), precision=precision)


def test_kernel_objects_name_the_precisions():
    with pytest.raises(ValueError, match="precision must be fp32, bf16 or fp16, got 'fp64'"):
        _core.Gemm(np.ones((4, 4), np.float32), False, None, (1, 4), (1, 4), precision="fp64")


# ---- fp16 (aarch64 with ARMv8.2-A FP16 arithmetic) ------------------------------------------
@pytest.fixture(params=["neon", "neondot"])
def fp16_tier(request):
    """The fp16 GEMM of each aarch64 tier (each compiles its own), where the CPU has FP16."""
    if request.param not in msv0.available_isas():
        pytest.skip(f"no {request.param} tier here")
    with msv0.isa_cap(request.param):
        if not _core.fp16_available():
            pytest.skip("no FP16 arithmetic here")
        yield request.param


FP16_BLOCK = 256  # gemm_f16.cc's kKc: fp16 sums run over at most this many products


def fp16_gemm(a, b, bias, lo=-np.inf, hi=np.inf):
    """What the fp16 GEMM computes, bit for bit: per k block, fp16 sums of the fp16-rounded
    operands' products, each step one fused multiply-add rounded once to fp16 (float64 holds the
    product and the sum exactly); the blocks summed in float32, then bias and clamp in float32."""
    a16, b16 = (np.asarray(v, np.float32).astype(np.float16).astype(np.float64) for v in (a, b))
    m, k = a16.shape
    c = np.zeros((m, b16.shape[1]), np.float32)
    for k0 in range(0, k, FP16_BLOCK):
        acc = np.zeros(c.shape, np.float16)
        for kk in range(k0, min(k, k0 + FP16_BLOCK)):
            acc = (acc.astype(np.float64) + np.outer(a16[:, kk], b16[kk])).astype(np.float16)
        c = acc.astype(np.float32) if k0 == 0 else acc.astype(np.float32) + c
    if bias is not None:
        c = c + bias.astype(np.float32)
    return np.clip(c, np.float32(lo), np.float32(hi))


# Around the 8-row tile, the 16-column panel and the 256-deep block.
FP16_SIZES = [(1, 1, 1), (1, 100, 300), (7, 15, 3), (8, 16, 2), (9, 33, 257), (25, 47, 511), (130, 20, 40)]


@pytest.mark.parametrize("m,n,k", FP16_SIZES, ids=str)
@pytest.mark.parametrize("transposed", [False, True])
def test_gemm_fp16(fp16_tier, rng, threads, m, n, k, transposed):
    check_gemm(rng, "fp16", m, n, k, transposed,
               lambda y, a, b, bias: np.testing.assert_array_equal(y, fp16_gemm(a, b, bias, -1.5, 2.0)))


def test_matmul_fp16_constant_b(fp16_tier, rng, threads):
    check_matmul_constant_b(rng, "fp16", lambda y, a, b: np.testing.assert_array_equal(y, fp16_gemm(a, b, None)))


# As CONVS, with fp16's choices for the 3x3s: im2col for the 7x7 map, Winograd F(4,3) in fp32 for
# the one that fp32 runs on it.
FP16_CONVS = CONVS[:-2] + [((1, 7, 7, 96), 160, 3, 1, (1, 1), 1, "im2col"),
                           ((1, 17, 19, 40), 36, 3, 1, (1, 1), 1, "winograd")]


@pytest.mark.parametrize("x_shape,oc,kernel,stride,pads,group,algorithm", FP16_CONVS, ids=str)
def test_conv2d_fp16(fp16_tier, rng, threads, x_shape, oc, kernel, stride, pads, group, algorithm):
    check_conv(rng, "fp16", x_shape, oc, kernel, stride, pads, group, algorithm,
               lambda got, a, b, bias: np.testing.assert_array_equal(got, fp16_gemm(a, b, bias, 0.0, 6.0)))


@pytest.mark.parametrize("net,num_threads", [("mobilenet_v2", 1), ("resnet18", 2)])
def test_zoo_net_fp16_against_fp32(fp16_tier, net, num_threads):
    check_zoo_net(net, 64, num_threads, "fp16", 2e-2)

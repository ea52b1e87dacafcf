"""ONNX AffineGrid and GridSample (2-D), the sampling half of a spatial transformer, as v0 ops.
AffineGrid: each pixel's homogeneous coordinates (a constant) times θᵀ, one batched MatMul.
GridSample (nearest, linear, cubic; zeros, border, reflection padding): the
grid's coordinates unnormalised and padded as ONNX's reference and ONNX Runtime do, each output
pixel's taps (1, 4 or 16) found as rows of the NHWC input flattened to [N·H·W, C], one Gather of
all of them, and their weighted sum. v0 has no sampling op; every step here is an element-wise
op on [pixels, taps] or a reduction."""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Unsupported, Val
from msv0.convert.onnx_ctx import Ctx, broadcast, handles, reshaped, table_size
from msv0.convert.onnx_unary import binary, round_half_even, unary, where
from msv0.convert.resize_lowering import cubic_weight
from msv0.fb.ReduceMode import ReduceMode
from msv0.fb.TypeId import TypeId

F32 = np.dtype(np.float32)
MODES = {"bilinear": "linear", "linear": "linear", "nearest": "nearest", "bicubic": "cubic", "cubic": "cubic"}


def _weight_polynomials(mode: str) -> tuple[list[int], np.ndarray]:
    """(tap offsets from floor(x), M): the taps' weights are [1, f, f², f³][:len(M)] @ M at fraction f."""
    if mode == "nearest":
        return [0], np.ones((1, 1))
    if mode == "linear":
        return [0, 1], np.array([[1.0, 0.0], [-1.0, 1.0]])
    # cubic: M fitted to Keys' kernel at four fractions, the taps at their distances from each
    offsets, points = [-1, 0, 1, 2], np.array([0.0, 0.25, 0.5, 0.75])
    vander = np.vander(points, 4, increasing=True)
    return offsets, np.linalg.solve(vander, cubic_weight(np.abs(points[:, None] - offsets)))


def _outside(c: Ctx, v: Val, lo: float, hi: float) -> Val:
    return c.op("LogicalOr", [binary(c, "Less", v, lo), binary(c, "Greater", v, hi)], v.shape, np.dtype(np.bool_))


def _clamp(c: Ctx, v: Val, hi: float) -> Val:
    return binary(c, "Minimum", binary(c, "Maximum", v, 0.0), hi)


def _reflect(c: Ctx, v: Val, lo: float, hi: float) -> Val:
    """v folded back into [lo, hi] by reflections at both ends: hi − |((v − lo) mod 2r) − r|."""
    r = hi - lo
    if r == 0:
        return where(c, _outside(c, v, lo, hi), lo, v)
    m = binary(c, "FloorMod", binary(c, "Sub", v, lo), 2 * r)
    folded = binary(c, "Sub", hi, unary(c, "Abs", binary(c, "Sub", m, r)))
    return where(c, _outside(c, v, lo, hi), folded, v)


def _axis_taps(c: Ctx, g: Val, size: int, mode: str, padding: str, align: bool):
    """One axis of `size` pixels, its normalised coordinates g [P, 1]: (tap positions [P, T] in
    range, their weights [P, T], or None where every tap weighs 1)."""
    size_1 = float(size - 1)
    if align:  # ONNX's float order: (g + 1) / 2 · (size − 1), or ((g + 1) · size − 1) / 2
        x = binary(c, "Mul", binary(c, "Mul", binary(c, "Add", g, 1.0), 0.5), size_1)
        lo, hi = 0.0, size_1
    else:
        x = binary(c, "Mul", binary(c, "Sub", binary(c, "Mul", binary(c, "Add", g, 1.0), float(size)), 1.0), 0.5)
        lo, hi = -0.5, size - 0.5
    if mode == "nearest":
        x = round_half_even(c, x)
    # A coordinate outside [lo, hi] moves to the nearest pixel, but for cubic, where ONNX Runtime
    # clamps only the taps (onnx's reference clamps both; the runtime is what users compare with).
    if padding == "border" and mode != "cubic":
        x = where(c, _outside(c, x, lo, hi), _clamp(c, x, size_1), x)
    elif padding == "reflection":
        x = _reflect(c, x, lo, hi)
    offsets, m = _weight_polynomials(mode)
    x0 = unary(c, "Floor", x)
    taps = binary(c, "Add", x0, Val.of(np.array([offsets], np.float32)))
    weights = None  # nearest: every tap weighs 1
    if len(offsets) > 1:  # Σ_j f^j · M[j, :]
        f = binary(c, "Sub", x, x0)
        weights, power = Val.of(m[0].astype(np.float32)[None, :]), f
        for j, row in enumerate(m[1:], 1):
            power = power if j == 1 else binary(c, "Mul", power, f)
            weights = binary(c, "Add", weights, binary(c, "Mul", power, Val.of(row.astype(np.float32)[None, :])))
    if padding == "zeros":  # taps outside the image weigh nothing
        weights = where(c, _outside(c, taps, 0.0, size_1), 0.0, c.scalar(1.0, F32) if weights is None else weights)
    elif padding == "reflection":
        taps = _reflect(c, taps, lo, hi)
    return _clamp(c, taps, size_1), weights


@handles("GridSample")
def grid_sample(c: Ctx):
    x, grid = c.inp(0), c.e.plain(c.inp(1), c.name)
    if len(x.shape) != 4 or len(grid.shape) != 4 or grid.shape[-1] != 2 or grid.shape[0] != x.shape[0]:
        raise Unsupported(f"GridSample of {list(x.shape)} by a grid {list(grid.shape)} (2-D sampling only)")
    if x.dtype != F32 or grid.dtype != F32:
        raise Unsupported(f"GridSample on {x.dtype} by a {grid.dtype} grid")
    if 0 in x.shape or 0 in grid.shape:
        raise Unsupported(f"GridSample of an empty tensor ({list(x.shape)} by {list(grid.shape)})")
    mode = MODES.get(c.attr("mode", "linear" if c.graph.opset >= 20 else "bilinear"))
    padding = c.attr("padding_mode", "zeros")
    if mode is None or padding not in ("zeros", "border", "reflection"):
        raise Unsupported(f"GridSample mode {c.attr('mode')!r}, padding_mode {padding!r}")
    align = bool(c.attr("align_corners", 0))
    shape, dtype = c.out()
    n, ch, h, w = x.shape
    _, ho, wo, _ = grid.shape
    pixels = table_size(n * ho * wo, "GridSample output pixels")
    if n * h * w >= 1 << 24:
        raise Unsupported(f"GridSample input of {n * h * w} pixels (row indices are computed in float32)")
    g = reshaped(c, grid, (pixels, 2))
    cols = [c.op("Slice", [g], (pixels, 1), F32, axes=[0, 1], begin=[0, k], size=[pixels, 1]) for k in (0, 1)]
    ix, wx = _axis_taps(c, cols[0], w, mode, padding, align)
    iy, wy = _axis_taps(c, cols[1], h, mode, padding, align)
    t = ix.shape[1]
    # row of tap (ty, tx) of output pixel p: (batch(p) · H + iy) · W + ix, as [P, T, T]
    batch = Val.of((np.arange(pixels, dtype=np.float32) // (ho * wo) * h).reshape(pixels, 1, 1))
    iy3, ix3 = reshaped(c, iy, (pixels, t, 1)), reshaped(c, ix, (pixels, 1, t))
    rows = binary(c, "Add", binary(c, "Mul", binary(c, "Add", iy3, batch), float(w)), ix3)
    rows = c.op("Cast", [reshaped(c, rows, (pixels, t * t))], (pixels, t * t), np.int32,
                srcT=TypeId.kNumberTypeFloat32, dstT=TypeId.kNumberTypeInt32)
    parts = [reshaped(c, v, shape3) for v, shape3 in ((wy, (pixels, t, 1)), (wx, (pixels, 1, t))) if v is not None]
    weights = parts[0] if len(parts) == 1 else binary(c, "Mul", *parts) if parts else None
    # the input's NHWC rows, [N·H·W, C]
    stored = c.e.to_nhwc(x, c.name)
    table = Val.of(x.const.transpose(0, 2, 3, 1).reshape(-1, ch)) if stored.index is None else \
        reshaped(c, Val((n, h, w, ch), x.dtype, index=stored.index), (n * h * w, ch))
    picked = c.op("Gather", [table, rows], (pixels, t * t, ch), F32, axis=0)
    if weights is not None:
        picked = binary(c, "Mul", picked, reshaped(c, weights, (pixels, t * t, 1)))
    if t > 1:
        picked = c.op("Reduce", [picked], (pixels, ch), F32, axes=[1], keepDims=False, mode=ReduceMode.ReduceSum)
    y = reshaped(c, picked, (n, ho, wo, ch))
    if (n, ch, ho, wo) != tuple(shape):
        raise Unsupported(f"GridSample output {[n, ch, ho, wo]} where shape inference has {list(shape)}")
    c.set(0, Val(tuple(shape), dtype, index=y.index, nhwc=True))


def _base_coords(size: int, align: bool) -> np.ndarray:
    """The normalised coordinates of `size` pixels: their centres in [-1, 1], or (align_corners)
    from -1 to 1 through the first and last pixel; one pixel at -1 then, as in PyTorch and onnx's
    reference (ONNX Runtime puts it at +1)."""
    if align:
        return np.linspace(-1.0, 1.0, size) if size > 1 else np.array([-1.0])
    return (2 * np.arange(size) + 1) / size - 1


@handles("AffineGrid")
def affine_grid(c: Ctx):
    theta = c.e.plain(c.inp(0), c.name)
    size = c.const(1, "size")
    if size is None or size.size != 4 or len(theta.shape) != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise Unsupported(f"AffineGrid of θ {list(theta.shape)} to size {None if size is None else size.tolist()} "
                          "(2-D only)")
    n, _, h, w = (int(d) for d in size)
    if n != theta.shape[0] or h < 1 or w < 1:
        raise Unsupported(f"AffineGrid size {size.tolist()} for {theta.shape[0]} θ")
    align = bool(c.attr("align_corners", 0))
    pixels = table_size(h * w, "AffineGrid pixels")
    ys, xs = np.meshgrid(_base_coords(h, align), _base_coords(w, align), indexing="ij")
    base = np.stack([xs.reshape(-1), ys.reshape(-1), np.ones(pixels)], 1).astype(np.float32)  # [H·W, 3]
    if theta.const is not None:
        c.set(0, Val.of((base @ theta.const.transpose(0, 2, 1)).reshape(n, h, w, 2).astype(np.float32)))
        return
    base = broadcast(c, Val.of(base[None]), (n, pixels, 3))
    y = c.op("MatMul", [base, theta], (n, pixels, 2), F32, transposeB=True)
    c.set(0, reshaped(c, y, (n, h, w, 2)))

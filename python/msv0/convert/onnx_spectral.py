"""ONNX DFT and STFT as products with constant DFT matrices. ONNX holds a complex value as a
trailing dim of 2 (real, imaginary) and v0 has neither a complex type nor an FFT, so DFT becomes
a FullConnection over the transformed axis (moved last, beside the complex dim), and STFT a
strided 1-D Conv2D whose kernels are the window times each frequency's cosine and sine: the
frames are never gathered. A direct sum takes N / log2(N) times an FFT's products, which for the
frame lengths of audio front ends (N <= 2048) is a GEMM's work, not a model's."""
from __future__ import annotations

import numpy as np

from msv0.convert.dft_lowering import dft_matrix, irfft_matrix
from msv0.convert.emit import Unsupported, Val
from msv0.convert.onnx_ctx import Ctx, axis_index, dense, handles, khwc_weight, reshaped, transposed


def _const_int(c: Ctx, k: int, what: str) -> int | None:
    v = c.const(k, what)
    return None if v is None else int(np.asarray(v).reshape(-1)[0])


@handles("DFT")
def dft(c: Ctx):
    x = c.e.plain(c.inp(0), c.name)
    rank, parts = len(x.shape), x.shape[-1]
    if x.dtype != np.float32 or parts not in (1, 2) or rank < 2:
        raise Unsupported(f"DFT of a {x.dtype} tensor shaped {list(x.shape)} (float32 [..., 1 or 2] only)")
    # opset 17 has axis as an attribute (default 1), opset 20 as the third input (default -2)
    axis = _const_int(c, 2, "axis")
    axis = axis_index(c.attr("axis", 1) if axis is None and c.graph.opset < 20 else -2 if axis is None else axis,
                      rank)
    if not 0 <= axis < rank - 1:
        raise Unsupported(f"DFT axis {axis} of rank {rank} (the last dim holds the complex parts)")
    inverse, onesided = bool(c.attr("inverse", 0)), bool(c.attr("onesided", 0))
    if onesided and not inverse and parts == 2:
        raise Unsupported("one-sided DFT of a complex input (the spec asks for a real one)")
    shape, dtype = c.out()
    n_in = x.shape[axis]
    length = _const_int(c, 1, "dft_length")
    if length is None:
        length = 2 * (n_in - 1) if inverse and onesided else n_in
    if length < 1:
        raise Unsupported(f"DFT length {length}")
    irfft = inverse and onesided
    out_bins, out_parts = (length, 1) if irfft else (length // 2 + 1 if onesided else length, 2)
    w = irfft_matrix(n_in, parts, length) if irfft else dft_matrix(n_in, parts, length, out_bins, inverse)
    # the axis moved last (beside the complex dim) and the rest flattened into rows
    perm = [d for d in range(rank - 1) if d != axis] + [axis, rank - 1]
    x = transposed(c, x, perm)
    lead = x.shape[:-2]
    rows = int(np.prod(lead, dtype=np.int64))
    flat = reshaped(c, x, (rows, n_in * parts))
    y = dense(c, flat, w.reshape(out_bins * out_parts, n_in * parts), None, (rows, out_bins * out_parts), dtype)
    y = transposed(c, reshaped(c, y, (*lead, out_bins, out_parts)), [perm.index(d) for d in range(rank)])
    if tuple(y.shape) != tuple(shape):
        raise Unsupported(f"DFT output {list(y.shape)} where shape inference has {list(shape)}")
    c.set(0, y)


@handles("STFT")
def stft(c: Ctx):
    x = c.e.plain(c.inp(0), c.name)
    shape, dtype = c.out()
    if len(x.shape) == 2:  # [batch, length], as ONNX Runtime takes it: a real signal
        x = reshaped(c, x, (*x.shape, 1))
    if dtype != np.float32 or len(x.shape) != 3 or x.shape[-1] not in (1, 2):
        raise Unsupported(f"STFT of a {x.dtype} signal shaped {list(x.shape)} (float32 [batch, length, 1 or 2] only)")
    batch, n, parts = x.shape
    step = _const_int(c, 1, "frame_step")
    window = c.const(2, "the window")
    length = _const_int(c, 3, "frame_length")
    if length is None:
        length = n if window is None else int(window.size)
    if window is None:
        window = np.ones(length)
    if window.ndim != 1 or window.size != length:
        raise Unsupported(f"STFT window of shape {list(window.shape)} for frame_length {length}")
    onesided = bool(c.attr("onesided", 1))
    if onesided and parts == 2:
        raise Unsupported("one-sided STFT of a complex signal")
    if step is None or step < 1 or not 1 <= length <= n:
        raise Unsupported(f"STFT frame_step {step}, frame_length {length} on {n} samples")
    frames, bins = 1 + (n - length) // step, length // 2 + 1 if onesided else length
    w = dft_matrix(length, parts, length, bins, False) * window.astype(np.float64)[:, None]
    # The signal as an NHWC image [batch, 1, n, parts]; the conv's 2·bins output channels of
    # each frame are (bin, real/imaginary) in order: [batch, 1, frames, 2·bins] is the result.
    image = reshaped(c, x, (batch, 1, n, parts))
    image = Val((batch, parts, 1, n), image.dtype, index=c.e.index(image), nhwc=True)
    kernels = khwc_weight(c, w.reshape(2 * bins, 1, length, parts), "stft_kernels")
    y = c.op("Conv2D", [image, kernels], (batch, 2 * bins, 1, frames), dtype, True, kernelH=1, kernelW=length,
             strideH=1, strideW=step, dilateH=1, dilateW=1, padUp=0, padDown=0, padLeft=0, padRight=0,
             group=1, channelIn=parts, channelOut=2 * bins)
    y = Val((batch, 1, frames, 2 * bins), dtype, index=y.index)
    if (batch, frames, bins, 2) != tuple(shape):
        raise Unsupported(f"STFT output {[batch, frames, bins, 2]} where shape inference has {list(shape)}")
    c.set(0, reshaped(c, y, shape))

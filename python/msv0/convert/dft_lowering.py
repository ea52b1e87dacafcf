"""Constant DFT matrices, for the converters' FFT ops (ONNX DFT and STFT, TFLite RFFT2D): v0 has
no FFT, and a direct sum by a float64-built matrix is one GEMM-based step, more accurate than a
float32 FFT."""
from __future__ import annotations

import math

import numpy as np

from msv0.convert.emit import Unsupported

# The most values a constant DFT matrix may hold (64 MiB as float32): far beyond the frames of an
# audio front end, and what keeps a file's absurd lengths from exhausting memory while it converts.
MAX_VALUES = 1 << 24


def _zeros(*shape: int) -> np.ndarray:
    """A float64 matrix of zeros, or Unsupported when it would hold over MAX_VALUES: checked here,
    where every DFT matrix is built, before any of it is."""
    n = math.prod(int(d) for d in shape)
    if n > MAX_VALUES:
        raise Unsupported(f"DFT matrix: a table of {n} values (over {MAX_VALUES})")
    return np.zeros(shape)


def dft_matrix(n_in: int, parts: int, length: int, bins: int, inverse: bool) -> np.ndarray:
    """W [bins, 2, n_in, parts] (float64): Y[k, :] = Σ_n W[k, :, n, :] · x[n, :] is the DFT of
    length `length` (e^{∓2πi·kn/length}, inverse scaled by 1/length) of the n_in samples x (real
    where parts = 1, else real and imaginary), truncated or zero-padded to `length`."""
    w = _zeros(bins, 2, n_in, parts)
    n = np.arange(min(n_in, length))
    theta = 2 * np.pi * (np.outer(np.arange(bins), n) % length) / length  # k·n reduced first: exact angles
    cos, sin = np.cos(theta), np.sin(theta) * (1.0 if inverse else -1.0)  # e^{iθ} or e^{-iθ}
    w[:, 0, :len(n), 0], w[:, 1, :len(n), 0] = cos, sin
    if parts == 2:  # (a + ib)(cos + i·sin) = a·cos − b·sin + i(a·sin + b·cos)
        w[:, 0, :len(n), 1], w[:, 1, :len(n), 1] = -sin, cos
    return w / length if inverse else w


def irfft_matrix(n_in: int, parts: int, length: int) -> np.ndarray:
    """W [length, n_in, parts] (float64): NumPy's irfft of `length` from the one-sided spectrum
    x[k, :]: the bins above length // 2 ignored, the others' conjugates standing in for the
    negative frequencies, the imaginary parts of the DC and (even length) Nyquist bins unused."""
    w = _zeros(length, n_in, parts)
    k = np.arange(min(n_in, length // 2 + 1))
    theta = 2 * np.pi * (np.outer(np.arange(length), k) % length) / length
    twice = np.where((k == 0) | (2 * k == length), 1.0, 2.0) / length
    w[:, :len(k), 0] = np.cos(theta) * twice
    if parts == 2:
        w[:, :len(k), 1] = -np.sin(theta) * twice
    return w

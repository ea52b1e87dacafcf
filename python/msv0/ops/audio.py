"""Audio ops: AudioSpectrogram, Mfcc, Rfft, FftReal, FftImag.

r1.1 has no CPU kernel for any of them (format-v0.md §6); these follow the TensorFlow ops
their schema tables come from, computed in double and written as float32:

* AudioSpectrogram (`windowSize`, `stride`, `magSquare`): input [samples, channels]; output
  [channels, windows, fft/2 + 1] with fft = the next power of two >= windowSize and windows =
  1 + (samples - windowSize) // stride (0 when samples < windowSize). Each window is multiplied
  by the periodic Hann window 0.5 - 0.5 cos(2 pi i / windowSize), zero-padded to fft, and the
  output is |X|^2 (magSquare) or |X|.
* Mfcc (`freqUpperLimit`, `freqLowerLimit`, `filterBankChannelNum`, `dctCoeffNum`): inputs
  (squared-magnitude spectrogram [channels, frames, bins], sample_rate int32). TF's triangular
  mel filterbank (mel = 1127 ln(1 + f/700)) over sqrt(spectrogram), log(max(x, 1e-12)), then
  DCT-II with sqrt(2/N) scaling; output [channels, frames, dctCoeffNum].
* Rfft (`fftLength`): the real FFT of the last axis, cut or zero-padded to fftLength; MindSpore
  stores the complex result as float pairs, shape [..., fftLength/2 + 1, 2] (r1.1 InferShape).
* FftReal / FftImag: the real / imaginary part of such pairs (the last dim, 2, is dropped).
"""
from __future__ import annotations

import math

import numpy as np

from msv0.registry import Plan, as_float32, check_size, const_input, expect_inputs, fail, op

F32 = np.dtype(np.float32)


@op("AudioSpectrogram")
def audio_spectrogram(node, ins):
    expect_inputs(node, ins, 1)
    as_float32(node, ins[0], "input")
    a = node.attrs
    if len(ins[0].shape) != 2:
        raise fail(node, f"input must be [samples, channels], got {ins[0].shape}")
    if a.windowSize < 2 or a.stride < 1:
        raise fail(node, f"windowSize must be >= 2 and stride >= 1, got {a.windowSize}, {a.stride}")
    samples, channels = ins[0].shape
    win = a.windowSize
    fft = 1 << (win - 1).bit_length()
    windows = 0 if samples < win else 1 + (samples - win) // a.stride
    # NumPy's working arrays in float64: the window, the frames, and per frame the padded FFT
    # input and its complex spectrum.
    check_size(f"{node.label}: spectrogram working arrays for windowSize {win}",
               (win + windows * channels * (win + 2 * fft),), np.float64)
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(win) / win)
    bins = fft // 2 + 1

    def run(inputs, outputs):
        x = inputs[0].astype(np.float64)
        if windows == 0:
            return
        starts = np.arange(windows) * a.stride
        frames = x[starts[:, None] + np.arange(win)]  # [windows, win, channels]
        spec = np.fft.rfft(frames * hann[None, :, None], n=fft, axis=1)  # [windows, bins, channels]
        mag = np.abs(spec) ** 2 if a.magSquare else np.abs(spec)
        np.copyto(outputs[0], mag.transpose(2, 0, 1))

    return Plan([((channels, windows, bins), F32)], run)


def _mel(f):
    return 1127.0 * np.log1p(np.asarray(f, np.float64) / 700.0)


def mel_weights(node, bins: int, rate: float, channels: int, lower: float, upper: float) -> np.ndarray:
    """The [channels, bins] matrix applied to sqrt(spectrogram), as TF's MfccMelFilterbank."""
    if channels < 1 or rate <= 0 or bins < 2 or lower < 0 or upper <= lower:
        raise fail(node, f"bad filterbank: {channels} channels, sample rate {rate}, {bins} bins, "
                         f"limits [{lower}, {upper}]")
    mel_lo, mel_hi = _mel(lower), _mel(upper)
    centers = mel_lo + (mel_hi - mel_lo) / (channels + 1) * np.arange(1, channels + 2)
    hz_per_bin = 0.5 * rate / (bins - 1)
    start, end = int(1.5 + lower / hz_per_bin), int(upper / hz_per_bin)
    if end >= bins:  # TF refuses ("input too short"); reading on would pass the last bin
        raise fail(node, f"upper limit {upper} Hz needs bin {end}, the spectrogram has {bins}")
    m = np.zeros((channels, bins))
    # Vectorised over bins (a fuzzed file's 2^25 bins ran past 10 s in a Python loop): TF's walk
    # keeps a channel index that only grows, which is the count of centres below each bin's mel.
    i = np.arange(start, end + 1)
    melf = _mel(i * hz_per_bin)
    band = np.searchsorted(centers[:channels], melf, side="left") - 1
    inside = band >= 0
    w = np.empty_like(melf)
    b = band[inside]
    w[inside] = (centers[b + 1] - melf[inside]) / (centers[b + 1] - centers[b])
    w[~inside] = (centers[0] - melf[~inside]) / (centers[0] - mel_lo)
    m[b, i[inside]] += w[inside]
    upper_band = band + 1 < channels
    m[band[upper_band] + 1, i[upper_band]] += 1.0 - w[upper_band]
    return m


def dct_matrix(coeffs: int, n: int) -> np.ndarray:
    i, j = np.arange(coeffs)[:, None], np.arange(n)[None, :]
    return math.sqrt(2.0 / n) * np.cos(i * (math.pi / n) * (j + 0.5))


@op("Mfcc")
def mfcc(node, ins):
    expect_inputs(node, ins, 2)
    as_float32(node, ins[0], "spectrogram")
    if len(ins[0].shape) != 3:
        raise fail(node, f"spectrogram must be [channels, frames, bins], got {ins[0].shape}")
    rate_v = np.asarray(const_input(node, ins[1], "sample_rate")).reshape(-1)
    if rate_v.size != 1 or rate_v.dtype.kind not in "iu":
        raise fail(node, "sample_rate must be one integer")
    a = node.attrs
    chans, frames, bins = ins[0].shape
    # The filterbank and DCT matrices are sized by attributes; bound them before building them.
    check_size(f"{node.label}: filterbank", (a.filterBankChannelNum, bins), np.float64)
    check_size(f"{node.label}: DCT matrix", (a.dctCoeffNum, a.filterBankChannelNum), np.float64)
    fb = mel_weights(node, bins, float(rate_v[0]), a.filterBankChannelNum, a.freqLowerLimit, a.freqUpperLimit)
    if a.dctCoeffNum < 1:
        raise fail(node, f"dctCoeffNum must be >= 1, got {a.dctCoeffNum}")
    dct = dct_matrix(a.dctCoeffNum, a.filterBankChannelNum)

    # np.einsum without optimize runs NumPy's own loops: `@` would hand the products to BLAS,
    # whose threads would run inside Session.run beside the Session's pool (2.5x slower alone).
    def run(inputs, outputs):
        mel = np.einsum("cfb,mb->cfm", np.sqrt(inputs[0].astype(np.float64)), fb)
        np.copyto(outputs[0], np.einsum("cfm,km->cfk", np.log(np.maximum(mel, 1e-12)), dct))

    return Plan([((chans, frames, a.dctCoeffNum), F32)], run)


@op("Rfft")
def rfft(node, ins):
    expect_inputs(node, ins, 1)
    as_float32(node, ins[0], "input")
    n = node.attrs.fftLength
    if n < 1 or not ins[0].shape:
        raise fail(node, f"fftLength must be >= 1 and the input at least 1-D (got {n}, {ins[0].shape})")
    shape = ins[0].shape[:-1] + (n // 2 + 1, 2)
    # NumPy's working arrays, in float64: the input padded to n and the complex spectrum per row,
    # and for an n with a large prime factor Bluestein's scratch, about 2n complex values.
    rows = math.prod(ins[0].shape[:-1])
    check_size(f"{node.label}: FFT working arrays for fftLength {n}", (2 * rows * n + 4 * n,), np.float64)

    def run(inputs, outputs):
        spec = np.fft.rfft(inputs[0].astype(np.float64), n=n, axis=-1)
        np.copyto(outputs[0], np.stack([spec.real, spec.imag], -1))

    return Plan([(shape, F32)], run)


def _part(name, index):
    @op(name)
    def build(node, ins):
        expect_inputs(node, ins, 1)
        as_float32(node, ins[0], "input")
        if not ins[0].shape or ins[0].shape[-1] != 2:
            raise fail(node, f"input must end in a (real, imag) dim of 2, got {ins[0].shape}")

        def run(inputs, outputs):
            np.copyto(outputs[0], inputs[0][..., index])

        return Plan([(ins[0].shape[:-1], F32)], run)

    return build


_part("FftReal", 0)
_part("FftImag", 1)

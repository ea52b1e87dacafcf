"""AudioSpectrogram, Mfcc, Rfft, FftReal, FftImag (TF semantics; r1.1 had no kernel)."""
import math

import numpy as np
import pytest

import msv0
from oprun import Const, run_op

F32 = np.float32


def dft(x, n):
    """Naive real DFT of x (zero-padded or cut to n): bins 0..n/2."""
    x = np.pad(x[:n], (0, max(0, n - len(x))))
    k = np.arange(n // 2 + 1)[:, None]
    return (x[None, :] * np.exp(-2j * np.pi * k * np.arange(n)[None, :] / n)).sum(1)


@pytest.mark.parametrize("samples,channels,win,stride,sq", [(100, 1, 16, 8, True), (97, 2, 15, 5, False),
                                                            (10, 1, 16, 4, True), (33, 3, 32, 1, False)])
def test_audio_spectrogram(rng, samples, channels, win, stride, sq):
    x = rng.standard_normal((samples, channels)).astype(F32)
    (y,) = run_op("AudioSpectrogram", [x], windowSize=win, stride=stride, magSquare=sq)
    fft = 1
    while fft < win:
        fft *= 2
    nwin = 0 if samples < win else 1 + (samples - win) // stride
    assert y.shape == (channels, nwin, fft // 2 + 1)
    hann = [0.5 - 0.5 * math.cos(2 * math.pi * i / win) for i in range(win)]
    for c in range(channels):
        for t in range(nwin):
            frame = x[t * stride:t * stride + win, c].astype(np.float64) * hann
            mag = np.abs(dft(frame, fft))
            np.testing.assert_allclose(y[c, t], mag ** 2 if sq else mag, rtol=1e-5, atol=1e-5)


def mfcc_ref(spec, rate, lo, hi, nch, ncoef):
    """TF MfccMelFilterbank + MfccDct written from their description, bin by bin."""
    bins = spec.shape[-1]
    mel = lambda f: 1127.0 * math.log1p(f / 700.0)
    centers = [mel(lo) + (mel(hi) - mel(lo)) / (nch + 1) * (i + 1) for i in range(nch + 1)]
    hz = 0.5 * rate / (bins - 1)
    start, end = int(1.5 + lo / hz), int(hi / hz)
    out = np.zeros(spec.shape[:-1] + (ncoef,))
    for idx in np.ndindex(spec.shape[:-1]):
        fbank = [0.0] * nch
        for i in range(start, end + 1):
            m = mel(i * hz)
            band = sum(1 for c in centers[:nch] if c < m) - 1
            lower_c = centers[band] if band >= 0 else mel(lo)
            w = (centers[band + 1] - m) / (centers[band + 1] - lower_c)
            v = math.sqrt(spec[idx][i])
            if band >= 0:
                fbank[band] += v * w
            if band + 1 < nch:
                fbank[band + 1] += v * (1 - w)
        logs = [math.log(max(f, 1e-12)) for f in fbank]
        for k in range(ncoef):
            out[idx][k] = math.sqrt(2 / nch) * sum(logs[j] * math.cos(math.pi / nch * k * (j + 0.5)) for j in range(nch))
    return out


@pytest.mark.parametrize("nch,ncoef,lo,hi", [(40, 13, 20.0, 4000.0), (10, 5, 300.0, 3000.0)])
def test_mfcc(rng, nch, ncoef, lo, hi):
    spec = (rng.random((2, 3, 257)) * 4).astype(F32)
    (y,) = run_op("Mfcc", [spec, Const(np.array(16000, np.int32))], filterBankChannelNum=nch, dctCoeffNum=ncoef,
                  freqLowerLimit=lo, freqUpperLimit=hi)
    np.testing.assert_allclose(y, mfcc_ref(spec.astype(np.float64), 16000, lo, hi, nch, ncoef), rtol=1e-4, atol=1e-4)


def test_mfcc_bad():
    spec = np.ones((1, 1, 9), F32)
    with pytest.raises(msv0.ModelError):  # upper limit past the last bin
        run_op("Mfcc", [spec, Const(np.array(16000, np.int32))], filterBankChannelNum=4, dctCoeffNum=2,
               freqLowerLimit=20.0, freqUpperLimit=9000.0)
    with pytest.raises(msv0.ModelError):
        run_op("Mfcc", [spec, Const(np.array(16000, np.int32))], filterBankChannelNum=0, dctCoeffNum=2,
               freqLowerLimit=20.0, freqUpperLimit=4000.0)


@pytest.mark.parametrize("n,length", [(8, 8), (9, 8), (7, 12), (16, 1)])
def test_rfft_real_imag(rng, n, length):
    x = rng.standard_normal((2, n)).astype(F32)
    (y,) = run_op("Rfft", [x], fftLength=length)
    want = np.stack([dft(r.astype(np.float64), length) for r in x])
    assert y.shape == (2, length // 2 + 1, 2)
    np.testing.assert_allclose(y[..., 0], want.real, atol=1e-5)
    np.testing.assert_allclose(y[..., 1], want.imag, atol=1e-5)
    (re,) = run_op("FftReal", [y])
    (im,) = run_op("FftImag", [y])
    np.testing.assert_array_equal(re, y[..., 0])
    np.testing.assert_array_equal(im, y[..., 1])


def test_fft_part_bad_shape():
    with pytest.raises(msv0.ModelError):
        run_op("FftReal", [np.zeros((2, 3), F32)])

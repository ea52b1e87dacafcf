"""ONNX DFT and STFT (onnx_spectral): constant DFT matrices against ONNX Runtime's FFTs, on odd
lengths, truncated and zero-padded transforms, every axis, inverse and one-sided forms, and an
audio front end (STFT -> power -> mel -> log) as exported models hold it."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper  # noqa: E402

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402
from msv0.convert.dft_lowering import dft_matrix, irfft_matrix  # noqa: E402
from onnxcheck import IR_VERSION, check, run_msv0, run_ort  # noqa: E402

R = np.random.default_rng(11)


def graph_model(nodes, x_shape, consts, opset):
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, x_shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=IR_VERSION)


@pytest.mark.parametrize("n_in,parts,length,inverse", [(7, 1, 7, False), (12, 2, 12, False), (9, 2, 5, False),
                                                       (6, 1, 11, False), (10, 2, 10, True), (5, 2, 8, True)])
def test_dft_matrix_is_numpys_fft(n_in, parts, length, inverse):
    x = R.standard_normal((n_in, parts))
    signal = x[:, 0] + (1j * x[:, 1] if parts == 2 else 0)
    want = (np.fft.ifft if inverse else np.fft.fft)(signal, n=length)
    got = np.einsum("kcnp,np->kc", dft_matrix(n_in, parts, length, length, inverse), x)
    np.testing.assert_allclose(got[:, 0] + 1j * got[:, 1], want, atol=1e-12)


@pytest.mark.parametrize("n_in,length", [(6, 10), (6, 11), (4, 10), (9, 6)])
def test_irfft_matrix_is_numpys_irfft(n_in, length):
    x = R.standard_normal((n_in, 2))
    want = np.fft.irfft(x[:, 0] + 1j * x[:, 1], n=length)
    np.testing.assert_allclose(irfft_matrix(n_in, 2, length).reshape(length, -1) @ x.reshape(-1), want, atol=1e-12)


DFT_CASES = [
    # x shape, axis, dft_length, inverse, onesided, opset
    ((2, 13, 1), 1, None, 0, 0, 20),
    ((3, 10, 7, 2), 1, None, 0, 0, 20),
    ((3, 10, 7, 2), 2, 12, 0, 0, 20),  # zero-padded
    ((3, 10, 7, 1), -3, 6, 0, 1, 20),  # truncated, one-sided
    ((2, 5, 9, 2), 2, None, 1, 0, 20),
    ((2, 5, 6, 2), 1, 8, 1, 1, 20),    # irfft
    ((2, 5, 6, 2), 2, None, 1, 1, 20),
    ((4, 17, 1), 1, None, 0, 1, 17),   # axis as an attribute
    ((2, 6, 3, 1), 2, None, 0, 0, 17),
]


@pytest.mark.parametrize("shape,axis,length,inverse,onesided,opset", DFT_CASES)
def test_dft_matches_onnxruntime(shape, axis, length, inverse, onesided, opset):
    consts = {} if length is None else {"len": np.array(length, np.int64)}
    inputs = ["x", "len" if length is not None else ""]
    attrs = dict(inverse=inverse, onesided=onesided)
    if opset >= 20:
        consts["axis"] = np.array(axis, np.int64)
        inputs.append("axis")
    else:
        attrs["axis"] = axis
    m = graph_model([h.make_node("DFT", inputs, ["y"], **attrs)], shape, consts, opset)
    check(m, {"x": R.standard_normal(shape).astype(np.float32)}, rtol=1e-4, atol=2e-5)


STFT_CASES = [
    # signal shape, frame_step, frame_length, window, onesided
    ((1, 128, 1), 8, 16, None, 1),
    ((2, 401, 1), 160, None, "hann", 1),   # a speech front end's 10 ms hop at 16 kHz, odd tail
    ((2, 97, 1), 5, 12, "hamming", 0),
    ((1, 64, 2), 7, 10, None, 0),          # complex signal, both sides
]


def stft_reference(x, step, length, window, onesided):
    """NumPy's float64 FFT of each windowed frame: ONNX Runtime's float32 FFT of a 400-sample
    frame is off by 1e-3 where msv0's products are off by 4e-6."""
    signal = x[..., 0].astype(np.float64) + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
    frames = 1 + (signal.shape[1] - length) // step
    cut = np.stack([signal[:, f * step:f * step + length] * window for f in range(frames)], 1)
    spec = np.fft.rfft(cut.real) if onesided else np.fft.fft(cut)
    return np.stack([spec.real, spec.imag], -1)


def run_both(m, feeds):
    data = m.SerializeToString()
    got, ort = run_msv0(data, feeds)["y"], run_ort(data, feeds)["y"]
    assert got.shape == ort.shape
    return got, ort


@pytest.mark.parametrize("shape,step,length,window,onesided", STFT_CASES)
def test_stft_matches_numpy_fft(shape, step, length, window, onesided):
    consts = {"step": np.array(step, np.int64)}
    inputs = ["x", "step", "", ""]
    n = length or 400
    w = np.ones(n) if window is None else np.hanning(n) if window == "hann" else np.hamming(n)
    if window is not None:
        consts["win"] = w.astype(np.float32)
        inputs[2] = "win"
    if length is not None:
        consts["len"] = np.array(length, np.int64)
        inputs[3] = "len"
    m = graph_model([h.make_node("STFT", inputs, ["y"], onesided=onesided)], shape, consts, 17)
    x = R.standard_normal(shape).astype(np.float32)
    got, ort = run_both(m, {"x": x})
    want = stft_reference(x, step, n, w.astype(np.float32).astype(np.float64), onesided)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(n))
    np.testing.assert_allclose(got, ort, rtol=1e-3, atol=2e-3)


def test_log_mel_front_end():
    """Whisper-style features: STFT (Hann, 400 / 160) -> |X|^2 -> mel matrix -> log, one graph; the
    STFT is one Conv2D step at run time."""
    n_fft, bins, mels = 400, 201, 20
    mel = np.abs(R.standard_normal((bins, mels))).astype(np.float32) / 10
    window = np.hanning(n_fft).astype(np.float32)
    nodes = [h.make_node("STFT", ["x", "step", "win", ""], ["spec"], onesided=1),
             h.make_node("Mul", ["spec", "spec"], ["sq"]),
             h.make_node("ReduceSum", ["sq", "last"], ["power"], keepdims=0),
             h.make_node("MatMul", ["power", "mel"], ["m"]),
             h.make_node("Add", ["m", "eps"], ["me"]),
             h.make_node("Log", ["me"], ["y"])]
    consts = {"step": np.array(160, np.int64), "win": window, "last": np.array([-1], np.int64), "mel": mel,
              "eps": np.array(1e-6, np.float32)}
    m = graph_model(nodes, (1, 16000, 1), consts, 17)
    x = (R.standard_normal((1, 16000, 1)) * 0.1).astype(np.float32)
    got, _ = run_both(m, {"x": x})
    power = (stft_reference(x, 160, n_fft, window.astype(np.float64), True) ** 2).sum(-1)
    np.testing.assert_allclose(got, np.log(power @ mel + 1e-6), rtol=1e-4, atol=1e-4)
    session = msv0.Session(msv0.load(convert(m.SerializeToString())))
    _, times = session.profile({"x": x})
    assert [t.op for t in times][0] == "Conv2D"


@pytest.mark.parametrize("shape", [(2, 64), (2, 64, 1)])
def test_stft_defaults_as_onnx_runtime_takes_them(shape):
    """A rank-2 signal is [batch, length, 1] and a missing onesided is 1, as ONNX Runtime takes them
    (onnx-asr's preprocessors); onnx's inference leaves the first without a shape and takes the
    second as 0, so the converter gives STFT its shape itself."""
    m = graph_model([h.make_node("STFT", ["x", "step", "win"], ["y"])], shape,
                    {"step": np.array(4, np.int64), "win": np.hanning(8).astype(np.float32)}, 17)
    x = R.standard_normal(shape).astype(np.float32)
    want = run_ort(m.SerializeToString(), {"x": x})["y"]
    got = run_msv0(m.SerializeToString(), {"x": x})["y"]
    assert got.shape == want.shape == (2, 15, 5, 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_what_cannot_be_expressed_is_reported():
    def fails(node, shape, consts, opset, why):
        with pytest.raises(msv0.UnsupportedOpError, match=why):
            convert(graph_model([node], shape, consts, opset).SerializeToString())

    fails(h.make_node("STFT", ["x", "step", "", "len"], ["y"], onesided=1), (1, 64, 2),
          {"step": np.array(4, np.int64), "len": np.array(8, np.int64)}, 17, "one-sided STFT of a complex")
    fails(h.make_node("DFT", ["x", "", "axis"], ["y"]), (2, 8, 1), {"axis": np.array(2, np.int64)}, 20,
          "the last dim holds the complex parts")
    fails(h.make_node("DFT", ["x"], ["y"], onesided=1), (2, 8, 2), {}, 20, "one-sided DFT of a complex")
    fails(h.make_node("DFT", ["x", "len"], ["y"]), (2, 8, 1), {"len": np.array(1 << 30, np.int64)}, 20,
          "DFT matrix: a table of")

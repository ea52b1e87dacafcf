"""Lstm against a float64 NumPy LSTM (iofc gate order, ONNX layout). The runtime uses the fp32
Padé tanh and thresholded sigmoid, which differ from libm by < 1e-4 (hence the tolerance)."""
import msv0
import numpy as np
import pytest
from oprun import Const, run_op


def lstm_ref(x, W, R, B, h0, c0):
    sig = lambda v: 1 / (1 + np.exp(-v))
    dirs, H = W.shape[0], W.shape[1] // 4
    seq = x.shape[0]
    y = np.zeros((seq, dirs, x.shape[1], H))
    hn, cn = np.zeros_like(h0, np.float64), np.zeros_like(c0, np.float64)
    for d in range(dirs):
        h, c = h0[d].astype(np.float64), c0[d].astype(np.float64)
        for t in (range(seq - 1, -1, -1) if d else range(seq)):
            g = x[t] @ W[d].T + h @ R[d].T + B[d, :4 * H] + B[d, 4 * H:]
            i, o, f, cc = sig(g[:, :H]), sig(g[:, H:2 * H]), sig(g[:, 2 * H:3 * H]), np.tanh(g[:, 3 * H:])
            c = f * c + i * cc
            h = o * np.tanh(c)
            y[t, d] = h
        hn[d], cn[d] = h, c
    return y, hn, cn


@pytest.mark.parametrize("bidi", [False, True])
@pytest.mark.parametrize("seq,batch,inp,hid", [(1, 1, 1, 1), (5, 3, 7, 4), (4, 2, 3, 9), (6, 2, 20, 37)])
def test_lstm(isa, rng, bidi, seq, batch, inp, hid):
    """Constant weights are packed once, fed weights on every run (a Python step); the initial
    states constant or fed: the same kernel, bit-identical results; on one thread too (on two, a
    bidirectional layer runs a direction on each)."""
    dirs = 2 if bidi else 1
    f = lambda *s: (rng.standard_normal(s) * 0.7).astype(np.float32)
    x, W, R, B = f(seq, batch, inp), f(dirs, 4 * hid, inp), f(dirs, 4 * hid, hid), f(dirs, 8 * hid)
    h0, c0 = f(dirs, batch, hid), f(dirs, batch, hid)
    lstm = lambda ins, native: run_op("Lstm", ins, outputs=3, bidirection=bidi, num_threads=2, native=native)
    const_states = lstm([x, Const(W), Const(R), Const(B), Const(h0), Const(c0)], True)
    fed_states = lstm([x, Const(W), Const(R), Const(B), h0, c0], True)
    fed_weights = lstm([x, W, R, B, h0, c0], False)
    one_thread = run_op("Lstm", [x, Const(W), Const(R), Const(B), Const(h0), Const(c0)], outputs=3, bidirection=bidi,
                        num_threads=1, native=True)
    want = lstm_ref(x, W, R, B, h0, c0)
    for const, fed, fed_w, one, ref in zip(const_states, fed_states, fed_weights, one_thread, want):
        np.testing.assert_array_equal(fed, const)
        np.testing.assert_array_equal(fed_w, const)
        np.testing.assert_allclose(one, ref, atol=2e-4)
        np.testing.assert_allclose(fed, ref, atol=2e-4)


def test_lstm_bad_shapes():
    z = lambda *s: np.zeros(s, np.float32)
    with pytest.raises(msv0.ModelError):
        run_op("Lstm", [z(2, 1, 3), z(1, 8, 3), z(1, 8, 2), z(1, 16), z(1, 1, 2), z(1, 1, 2)], outputs=3, bidirection=True)
    with pytest.raises(msv0.ModelError):
        run_op("Lstm", [z(2, 1, 3), z(1, 8, 3), z(1, 8, 3), z(1, 16), z(1, 1, 2), z(1, 1, 2)], outputs=3)
    with pytest.raises(msv0.ModelError):
        run_op("Lstm", [z(2, 1, 3), z(1, 8, 3)], outputs=3)

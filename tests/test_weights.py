"""Weight-quant dequantisation (format-v0.md §3) through a whole FullConnection: bit-packed
weights, per-channel params with varCorr/meanCorr, k-means clusters."""
import numpy as np
import pytest

from oprun import Const, run_op
from msv0.fb.TypeId import TypeId



def pack_lsb_first(q: np.ndarray, bits: int) -> np.ndarray:
    """Reference packer: each value + 2^(bits-1) as `bits` bits, LSB first, into bytes."""
    stream = []
    for v in q.reshape(-1):
        u = int(v) + (1 << (bits - 1))
        stream += [(u >> b) & 1 for b in range(bits)]
    stream += [0] * (-len(stream) % 8)
    return np.array([sum(stream[i + b] << b for b in range(8)) for i in range(0, len(stream), 8)], np.uint8)


def fc(x, weight_const):
    (y,) = run_op("FullConnection", [x, weight_const])
    return y


@pytest.mark.parametrize("bits", [2, 3, 4, 7])
def test_bit_packed_int8_weight(rng, bits):
    q = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), (5, 11))
    packed = pack_lsb_first(q, bits)
    assert packed.size < q.size  # really shorter than its dims
    scale, zp = 0.25, 1
    w = Const(packed.view(np.int8), quant=[dict(scale=scale, zeroPoint=zp, numBits=bits, inited=True)], type_id=TypeId.kNumberTypeInt8,
              dims=(5, 11))
    x = rng.standard_normal((3, 11)).astype(np.float32)
    want = x @ ((q - zp) * scale).astype(np.float32).T
    np.testing.assert_allclose(fc(x, w), want, rtol=1e-5, atol=1e-5)


def test_per_channel_with_corrections(rng):
    q = rng.integers(-128, 128, (4, 6)).astype(np.int8)
    params = [dict(scale=0.1 * (c + 1), zeroPoint=c - 2, inited=True, varCorr=v, meanCorr=0.5 * c)
              for c, v in enumerate([1.0, 2.0, 11.0, -1.0])]  # varCorr outside [0, 10] counts as 1
    x = rng.standard_normal((2, 6)).astype(np.float32)
    var = np.array([1.0, 2.0, 1.0, 1.0], np.float32)[:, None]
    w = ((q.astype(np.int64) - np.arange(-2, 2)[:, None]) * np.array([0.1, 0.2, 0.3, 0.4], np.float32)[:, None]) * var
    w = w + (0.5 * np.arange(4))[:, None]
    np.testing.assert_allclose(fc(x, Const(q, quant=params)), x @ w.astype(np.float32).T, rtol=1e-5, atol=1e-5)


def test_clusters_index_by_q_plus_128(rng):
    q = rng.integers(-128, -120, (3, 4)).astype(np.int8)
    clusters = rng.standard_normal(8).astype(np.float32)
    w = Const(q, quant=[dict(scale=1.0, zeroPoint=0, inited=True)], clusters=clusters)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(fc(x, w), x @ clusters[q.astype(int) + 128].T, rtol=1e-5, atol=1e-6)

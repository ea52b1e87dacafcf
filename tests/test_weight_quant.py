"""Weight-only compression (msv0.weight_quant, r1.1's WeightQuant files): bit packing against a
big-integer reference, the linear and k-means quantizers, whole zoo models in 8, 4 and 2 bits
and k-means, hostile packed data, and the CLI."""
import numpy as np
import pytest

import msv0
from msv0 import cli, weights, zoo
from msv0.bitpack import pack_bits, packed_words, unpack_bits
from msv0.fb.QuantType import QuantType
from msv0.fb.TypeId import TypeId
from msv0.quantize import quantize, snr_db
from msv0.weight_quant import kmeans, linear, quantize_weights
from oprun import Const, run_op


def reference_pack(q: np.ndarray, bits: int, word_bits: int) -> np.ndarray:
    """The stream as one big integer: value i at bit i·bits, LSB first, zero-padded to a word."""
    stream = 0
    for i, v in enumerate(q.reshape(-1)):
        stream |= (int(v) + (1 << (bits - 1))) << (i * bits)
    nbytes = packed_words(q.size, bits, word_bits) * word_bits // 8
    return np.frombuffer(stream.to_bytes(nbytes, "little"), np.uint8)


@pytest.mark.parametrize("bits", range(2, 17))
@pytest.mark.parametrize("count", [1, 7, 37])
def test_pack_round_trip(rng, bits, count):
    word_bits = 8 if bits <= 8 else 16
    q = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), count)
    q[0] = -(1 << (bits - 1))  # both ends of the range
    q[-1] = (1 << (bits - 1)) - 1
    packed = pack_bits(q, bits, word_bits)
    np.testing.assert_array_equal(packed, reference_pack(q, bits, word_bits))
    np.testing.assert_array_equal(unpack_bits(packed, bits, count), q)


def dequant_reference(q, params):
    """format-v0.md §3 per channel: ((q - zp)·scale)·varCorr + meanCorr, in float32."""
    rows = q.reshape(len(params), -1)
    out = [((r - p.zeroPoint).astype(np.float32) * np.float32(p.scale)) * np.float32(p.varCorr) + np.float32(p.meanCorr)
           for r, p in zip(rows, params)]
    return np.stack(out).reshape(q.shape)


@pytest.mark.parametrize("bits", [2, 4, 8, 12])
def test_linear_per_channel(rng, bits):
    w = rng.standard_normal((5, 3, 3, 7)).astype(np.float32) * np.array([1, 0.1, 10, 0, 3], np.float32)[:, None, None, None]
    w[4] = np.abs(w[4])  # a channel that is never negative: zero stays exact
    q, params = linear(w, bits)
    assert len(params) == 5 and q.min() >= -(1 << (bits - 1)) and q.max() < (1 << (bits - 1))
    for c, p in enumerate(params):
        assert p.numBits == bits and p.inited and -(1 << (bits - 1)) <= p.zeroPoint < (1 << (bits - 1))
        err = np.abs((q[c] - p.zeroPoint) * p.scale - w[c])
        assert err.max() <= p.scale / 2 * (1 + 1e-6)
    assert params[3].scale == 1 and np.all(q[3] == params[3].zeroPoint)  # the all-zero channel
    # r1.1's correction: each channel's dequantised mean and spread are those of the float weights
    deq = dequant_reference(q, params)
    nonzero = [0, 1, 2, 4]
    np.testing.assert_allclose(deq[nonzero].reshape(4, -1).mean(1), w[nonzero].reshape(4, -1).mean(1), atol=1e-5)
    np.testing.assert_allclose(deq[nonzero].reshape(4, -1).std(1), w[nonzero].reshape(4, -1).std(1), rtol=1e-4)


def test_kmeans_table_as_r11_indexes_it(rng):
    centres = np.array([-2.0, -0.5, 0.25, 3.0], np.float32)
    w = rng.choice(centres, (6, 5))
    q, table = kmeans(w, 2)  # exactly 4 distinct values: 4 clusters find them
    assert table.size == 128 + 2 and q.min() >= -2 and q.max() <= 1
    np.testing.assert_array_equal(table[q + 128], w)
    w = rng.standard_normal(1001).astype(np.float32)
    q, table = kmeans(w, 4)
    # every value goes to its nearest centre
    used = table[128 - 8:]
    np.testing.assert_allclose(np.abs(table[q + 128] - w), np.abs(w[:, None] - used[None]).min(1), atol=1e-6)


@pytest.mark.parametrize("bits,type_id", [(3, TypeId.kNumberTypeInt8), (11, TypeId.kNumberTypeInt16)])
def test_packed_per_channel_weight_runs_in_fc(rng, bits, type_id):
    w = rng.standard_normal((5, 13)).astype(np.float32)
    q, params = linear(w, bits)
    packed = pack_bits(q, bits, 8 if bits < 8 else 16)
    quant = [dict(scale=p.scale, zeroPoint=p.zeroPoint, numBits=bits, inited=True, varCorr=p.varCorr,
                  meanCorr=p.meanCorr) for p in params]
    x = rng.standard_normal((3, 13)).astype(np.float32)
    (y,) = run_op("FullConnection", [x, Const(packed.view(np.int8), quant=quant, type_id=type_id, dims=(5, 13))])
    np.testing.assert_allclose(y, x @ dequant_reference(q, params).T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("size,bits,match", [(9, 4, "data has 9 bytes"),  # found by the loader
                                              (11, 4, "4-bit packed data is 11 bytes, its dims \\[4, 5\\] need 10"),
                                              (20, 12, "int8 with numBits 12")])
def test_hostile_packed_data(size, bits, match):
    quant = [dict(scale=0.5, zeroPoint=0, numBits=bits, inited=True)]
    w = Const(np.zeros(size, np.int8), quant=quant, type_id=TypeId.kNumberTypeInt8, dims=(4, 5))
    with pytest.raises(msv0.ModelError, match=f"tensor 1 'c1'.*{match}"):
        run_op("FullConnection", [np.zeros((1, 5), np.float32), w])


@pytest.fixture(scope="module")
def tiny():
    net = zoo.mobilenet_tiny_net(resolution=32)
    x = np.random.default_rng(1).standard_normal((3,) + net.input_shape).astype(np.float32)
    fp32 = net.to_ms()
    ref = np.concatenate([msv0.Session(fp32).run([v])["logits"] for v in x])
    return fp32, x, ref


@pytest.mark.parametrize("bits,use_kmeans,min_snr", [(8, False, 35), (4, False, 12), (2, False, 0), (4, True, 12),
                                                     (12, False, 60)])
def test_zoo_model(tiny, bits, use_kmeans, min_snr):
    fp32, x, ref = tiny
    data = quantize(fp32, weights_only=True, bits=bits, kmeans=use_kmeans)
    m, f = msv0.load(data), msv0.load(fp32)
    weights = [m.tensors[n.inputs[1]] for n in m.nodes if n.op in ("Conv2D", "DepthwiseConv2D", "FullConnection")]
    quantized = [t for t in weights if t.quant]
    assert quantized, "no weight was quantized"
    for t in quantized:
        assert t.type_id == (TypeId.kNumberTypeInt8 if bits <= 8 else TypeId.kNumberTypeInt16)
        assert all(p.numBits == bits for p in t.quant)
        count, word_bits = int(np.prod(t.shape)), 8 if bits <= 8 else 16
        words = packed_words(count, bits, word_bits) if bits not in (8, 16) else count
        assert t.raw.size == words * word_bits // 8
        assert (len(t.clusters) == 128 + (1 << (bits - 1))) == use_kmeans
    for n in m.nodes:
        reads_quantized = any(m.tensors[k].quant for k in n.inputs)
        assert n.quant_type == (QuantType.WeightQuant if reads_quantized else QuantType.QUANT_NONE)
    # activations stay float: inputs, outputs and every computed tensor keep their dtypes
    assert [t.dtype for t in m.tensors if not t.is_const] == [t.dtype for t in f.tensors if not t.is_const]
    s = msv0.Session(data)
    got = np.concatenate([s.run([v])["logits"] for v in x])
    assert snr_db(ref, got) > min_snr


def test_weights_dequantised_once_per_session(tiny, monkeypatch):
    fp32, x, _ = tiny
    data = quantize(fp32, weights_only=True, bits=4)
    calls = []
    dequantise = weights.dequantise

    def counted(node, t, *args):
        calls.append(t.index)
        return dequantise(node, t, *args)

    monkeypatch.setattr(weights, "dequantise", counted)
    s = msv0.Session(data)
    planned = sorted(calls)
    assert planned and len(set(planned)) == len(planned)  # each quantized weight once
    batch = x.reshape((len(x),) + x.shape[2:])  # a new input shape: a re-plan
    got = s.run([batch])["logits"]
    assert sorted(calls) == planned
    # the re-plan computes what plans of the one-image shape do, image by image
    np.testing.assert_allclose(got, np.concatenate([s.run([v])["logits"] for v in x]), rtol=1e-5, atol=1e-6)
    assert sorted(calls) == planned
    msv0.Session(data)  # another Session dequantises for itself
    assert sorted(calls) == sorted(planned * 2)


@pytest.mark.slow
def test_resnet50_4_bit_is_7_times_smaller():
    fp32 = zoo.resnet50(resolution=32)
    data = quantize(fp32, weights_only=True, bits=4)
    assert len(data) * 7 <= len(fp32)
    x = np.random.default_rng(0).standard_normal((1, 32, 32, 3)).astype(np.float32)
    assert snr_db(msv0.Session(fp32).run([x])["logits"], msv0.Session(data).run([x])["logits"]) > 10


def test_bits_and_kmeans_checked():
    fp32 = zoo.mobilenet_tiny_net(resolution=32).to_ms()
    for kwargs, match in [(dict(bits=1), "2 to 16 bits"), (dict(bits=9, kmeans=True), "k-means weights take 2 to 8"),
                          (dict(bits=17), "2 to 16 bits")]:
        with pytest.raises(msv0.InputError, match=match):
            quantize(fp32, weights_only=True, **kwargs)
    with pytest.raises(msv0.InputError, match="need weights_only"):
        quantize(fp32, {"input": np.zeros((1, 1, 32, 32, 3), np.float32)}, bits=4)


def test_shared_weight_read_as_float_stays_float(rng):
    # One constant is a FullConnection's weight and an Add's operand: it stays float32.
    from msv0.builder import Builder

    b = Builder("shared")
    x = b.input("x", (1, 64), np.float32)
    w = b.const("w", rng.standard_normal((64, 64)).astype(np.float32))
    y = b.tensor("y", np.float32)
    z = b.tensor("z", np.float32)
    b.node("FullConnection", [x, w], outputs=[y], name="fc")
    b.node("Add", [y, w], outputs=[z], name="add")
    b.output(z)
    m = msv0.load(quantize_weights(b.finish(), 4))
    assert m.tensors[w].dtype == np.float32 and not m.tensors[w].quant


def test_cli_weights_only(tiny, tmp_path, capsys):
    fp32 = tiny[0]
    (tmp_path / "f.ms").write_bytes(fp32)
    assert cli.main(["quantize", str(tmp_path / "f.ms"), "--weights-only", "--bits", "4", "-o",
                     str(tmp_path / "w4.ms")]) == 0
    out = capsys.readouterr().out
    ratio = (tmp_path / "f.ms").stat().st_size / (tmp_path / "w4.ms").stat().st_size
    assert f"{ratio:.2f}x smaller" in out and "4-bit weights against fp32 on 4 random" in out and "logits" in out
    assert cli.main(["quantize", str(tmp_path / "f.ms"), "--weights-only", "--bits", "12", "--kmeans", "-o",
                     str(tmp_path / "k.ms")]) == 2
    assert "k-means weights take 2 to 8" in capsys.readouterr().err
    assert cli.main(["quantize", str(tmp_path / "f.ms"), "-o", str(tmp_path / "q.ms")]) == 2
    assert "needs --calib or --random" in capsys.readouterr().err

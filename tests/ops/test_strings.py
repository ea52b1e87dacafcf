"""String ops: the packed string buffer, StringHash64, LshProjection, HashtableLookup, SkipGram,
CustomNormalize, CustomPredict, CustomExtractFeatures (r1.1 string kernels)."""
import struct

import numpy as np
import pytest

import msv0
from msv0.ops.strings import string_hash64
from oprun import Const, run_op
from msv0.fb.TypeId import TypeId

I32, F32, U8 = np.int32, np.float32, np.uint8


def pack(strings):
    """Reference packing, written from the layout: count, offsets[count+1], bytes."""
    head = 4 * (len(strings) + 2)
    offs = [head]
    for s in strings:
        offs.append(offs[-1] + len(s))
    return np.frombuffer(struct.pack(f"<{len(offs) + 1}i", len(strings), *offs) + b"".join(strings), U8)


def unpack(buf):
    raw = bytes(buf)
    n = struct.unpack_from("<i", raw)[0]
    offs = struct.unpack_from(f"<{n + 1}i", raw, 4)
    return [raw[offs[i]:offs[i + 1]] for i in range(n)]


# FarmHash Fingerprint64 values from the pyfarmhash package (r1.1's StringHash64 is that hash)
HASHES = [(b"", 0x9ae16a3b2f90404f), (b"a", 0xb3454265b6df75e3), (b"hello", 0xb48be5a931380ce8),
          (b"hello world", 0x588fb7478bd6b01b), (b"the quick brown fox jumps over the lazy dog", 0xac6a07c674dc13d3),
          (b"x" * 64, 0x5ffb3c754f6913b8), (bytes(range(65)), 0xc6a3282c3e793dbe),
          (bytes(range(200)), 0x74c7fcc26d66fb3)]


@pytest.mark.parametrize("s,h", HASHES)
def test_string_hash64(s, h):
    assert string_hash64(s) == h


def test_bad_string_buffer_is_model_error():
    bad = np.frombuffer(struct.pack("<4i", 1, 12, 400, 0), U8)  # offset past the end
    with pytest.raises(msv0.ModelError):
        run_op("CustomNormalize", [bad], out_dtypes=[U8])
    with pytest.raises(msv0.ModelError):
        run_op("CustomNormalize", [np.zeros(2, U8)], out_dtypes=[U8])


def lsh_ref(seeds, feats, weights, dense):
    n, m = seeds.shape
    bits = np.zeros((n, m), int)
    for i in range(n):
        for j in range(m):
            score = 0.0
            for k, f in enumerate(feats.reshape(-1)):
                h = string_hash64(struct.pack("<fi", seeds[i, j], f))
                h = h - (1 << 64) if h >= 1 << 63 else h
                score += (1.0 if weights is None else float(weights[k])) * float(h)
            bits[i, j] = score > 0
    if dense:
        return bits.reshape(-1)
    return np.array([int("".join(map(str, row)), 2) + i * (1 << m) for i, row in enumerate(bits)])


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_lsh_projection(rng, dense, weighted):
    seeds = rng.standard_normal((3, 4)).astype(F32)
    feats = rng.integers(-1000, 1000, (2, 3)).astype(I32)
    w = rng.standard_normal(6).astype(F32) if weighted else None
    ins = [Const(seeds), feats] + ([Const(w)] if weighted else [])
    (y,) = run_op("LshProjection", ins, out_dtypes=[I32], type=2 if dense else 1)
    np.testing.assert_array_equal(y, lsh_ref(seeds, feats, w, dense))


def test_lsh_projection_bounds_its_hashes():
    """n x m hash functions over k features is n·m·k hashes: the fuzzer's 3x4 seeds over 393 216
    features ran for minutes."""
    with pytest.raises(msv0.ResourceError, match="hashes"):
        run_op("LshProjection", [np.zeros((64, 32), F32), np.zeros(8193, I32)], out_dtypes=[I32], type=2)


def test_lsh_projection_bad_type():
    with pytest.raises(msv0.ModelError):
        run_op("LshProjection", [np.zeros((2, 2), F32), np.zeros(3, I32)], out_dtypes=[I32], type=0)


def test_hashtable_lookup():
    values = [b"zero", b"", b"two", b"three!"]
    keys = np.array([-5, 0, 7, 9], I32)
    look = np.array([7, 8, -5, 9, 100], I32)
    out, hits = run_op("HashtableLookup", [look, Const(keys), Const(pack(values), type_id=TypeId.kObjectTypeString)], outputs=2,
                       out_dtypes=[U8, U8])
    assert unpack(out) == [b"two", b"", b"zero", b"three!", b""]
    np.testing.assert_array_equal(hits, [1, 0, 1, 1, 0])


def test_hashtable_lookup_too_few_keys():
    with pytest.raises(msv0.ModelError):
        run_op("HashtableLookup", [np.array([1], I32), Const(np.array([1], I32)),
                                   Const(pack([b"a", b"b"]), type_id=TypeId.kObjectTypeString)], outputs=2, out_dtypes=[U8, U8])


def skip_gram_ref(sentence, n, k, include_all):
    """Independent enumeration: index tuples with gaps <= k, shorter ones first within a prefix
    (depth-first, emitting on the way back up like r1.1)."""
    words = sentence.split()
    out = []

    def grow(prefix):
        if len(prefix) < n:
            start = prefix[-1] + 1 if prefix else 0
            stop = min(len(words), prefix[-1] + k + 2) if prefix else len(words)
            for nxt in range(start, stop):
                grow(prefix + [nxt])
        if prefix and (len(prefix) == n or include_all):
            out.append(b" ".join(words[i] for i in prefix))

    grow([])
    return out


@pytest.mark.parametrize("n,k,include_all", [(1, 0, False), (2, 0, False), (2, 1, True), (3, 2, False),
                                             (3, 1, True)])
def test_skip_gram(n, k, include_all):
    sentence = b"  the quick  brown fox jumps "
    (y,) = run_op("SkipGram", [pack([sentence])], out_dtypes=[U8], ngramSize=n, maxSkipSize=k,
                  includeAllGrams=include_all)
    want = skip_gram_ref(sentence, n, k, include_all)
    assert sorted(unpack(y)) == sorted(want)
    assert len(unpack(y)) == len(want)


def test_skip_gram_order_bigrams():
    (y,) = run_op("SkipGram", [pack([b"a b c"])], out_dtypes=[U8], ngramSize=2, maxSkipSize=0)
    assert unpack(y) == [b"a b", b"b c"]


def test_skip_gram_bad():
    with pytest.raises(msv0.ModelError):
        run_op("SkipGram", [pack([b"a b"])], out_dtypes=[U8], ngramSize=0)
    with pytest.raises(msv0.ModelError):
        run_op("SkipGram", [pack([b""])], out_dtypes=[U8], ngramSize=1)


@pytest.mark.parametrize("text,want", [
    (b"  Hello World.  ", b"<S> hello world <E>"),
    (b"I'm sure it isn't (done)!!!", b"<S> i am sure it is not done ! <E>"),
    (b"what?? really?!", b"<S> what ?  really ? ! <E>"),  # r1.1 leaves the double space
    (b"they'll go, we've won", b"<S> they will go, we have won <E>"),
    (b"   ", b"<S>  <E>"),
    (b"--hey;", b"<S> hey <E>"),
])
def test_custom_normalize(text, want):
    (y,) = run_op("CustomNormalize", [pack([text, b"X"])], out_dtypes=[U8])
    assert unpack(y) == [want, b"<S> x <E>"]


def test_custom_normalize_no_strings():
    (y,) = run_op("CustomNormalize", [pack([])], out_dtypes=[U8])
    assert unpack(y) == [b"\0"]


def test_custom_predict():
    keys = np.array([1, 4, 6], I32)
    labels = np.array([[10, 11], [11, 12], [13, 10]], I32)
    weights = np.array([[0.5, 0.2], [0.4, 0.9], [0.1, 0.3]], F32)
    x = np.array([4, 1, 5, 6], I32)
    lab, w = run_op("CustomPredict", [x, Const(keys), Const(labels), Const(weights)], outputs=2,
                    out_dtypes=[I32, F32], outputNum=5, weightThreshold=0.05)
    # 10: (0.5 + 0.3)/4, 11: (0.2 + 0.4)/4, 12: 0.9/4, 13: 0.1/4 (< 0.05: cut)
    np.testing.assert_array_equal(lab, [12, 10, 11, -1, -1])
    np.testing.assert_allclose(w, [0.225, 0.2, 0.15, 0, 0], rtol=1e-6)


def test_custom_extract_features():
    strs = [b"<S> hello world <E>", b"<S>", b"<S> <E>", b"a"]
    lab, w = run_op("CustomExtractFeatures", [pack(strs)], outputs=2, out_dtypes=[I32, F32])
    np.testing.assert_array_equal(lab, [string_hash64(strs[0]) % 1000000, 0, 0, 0xb3454265b6df75e3 % 1000000])
    np.testing.assert_array_equal(w, [4, 0, 0, 1])
    lab, w = run_op("CustomExtractFeatures", [pack([])], outputs=2, out_dtypes=[I32, F32])
    np.testing.assert_array_equal(lab, [0])

"""String ops (r1.1 `runtime/kernel/arm/string`): LshProjection, HashtableLookup, SkipGram,
CustomNormalize, CustomPredict, CustomExtractFeatures.

A string tensor (dataType 12) is its raw buffer, one uint8 per byte, shape [len(data)]; the
buffer is r1.1's (and TFLite's) packing: int32 count n, int32 offsets[n + 1] from the buffer
start, then the bytes; string i is buffer[offsets[i]:offsets[i+1]]. Ops whose output size
depends on the text are data_dependent (planned per run with the values known).
"""
from __future__ import annotations

import re

import numpy as np

from msv0.fb.LshProjectionType import LshProjectionType
from msv0.errors import ResourceError
from msv0.registry import Plan, check_size, expect_inputs, fail, op

I32, F32, U8 = np.dtype(np.int32), np.dtype(np.float32), np.dtype(np.uint8)
M64 = (1 << 64) - 1
K0, K1, K2 = 0xC3A5C85C97CB3127, 0xB492B66FBE98F273, 0x9AE16A3B2F90404F
# LshProjection hashes every (seed, feature) pair; real projection layers hash tens of thousands.
MAX_LSH_HASHES = 1 << 24


def parse_strings(node, buf: np.ndarray, what: str) -> list[bytes]:
    """The strings packed in `buf`; offsets that point outside it (r1.1 reads out of bounds)
    are a model error."""
    raw = np.ascontiguousarray(buf).view(np.uint8).reshape(-1).tobytes()
    if len(raw) < 4:
        raise fail(node, f"{what} is not a packed string buffer ({len(raw)} bytes)")
    n = int(np.frombuffer(raw, np.int32, 1)[0])
    if n < 0 or 4 * (n + 2) > len(raw):
        raise fail(node, f"{what} holds {len(raw)} bytes, too few for a header of {n} strings")
    off = np.frombuffer(raw, np.int32, n + 1, 4)
    if n and (np.diff(off) < 0).any() or (off < 0).any() or (off > len(raw)).any():
        raise fail(node, f"{what} has string offsets outside its {len(raw)} bytes")
    return [raw[off[i]:off[i + 1]] for i in range(n)]


def pack_strings(strings: list[bytes]) -> np.ndarray:
    """r1.1's WriteStringsToTensor layout."""
    n = len(strings)
    head = 4 * (n + 2)
    offsets = np.cumsum([head] + [len(s) for s in strings]).astype(np.int32)
    data = np.array([n], np.int32).tobytes() + offsets.tobytes() + b"".join(strings)
    return np.frombuffer(data, np.uint8).copy()


def _string_input(node, v, what):
    if v.dtype != U8:
        raise fail(node, f"{what} must be a string tensor, got {v.dtype}")
    if v.const is None:
        raise fail(node, f"{what} ({v.tensor.label}) has no value at plan time")
    return parse_strings(node, v.const, what)


def _copy_all(values):
    def run(inputs, outputs):
        for out, v in zip(outputs, values):
            np.copyto(out, v)

    return run


def _string_plan(strings: list[bytes]) -> Plan:
    packed = pack_strings(strings)
    return Plan([(packed.shape, U8)], _copy_all([packed]))


# --- StringHash64 (r1.1 src/common/string_util.cc: CityHash64) ----------------------------

def _u64(b: bytes, i: int) -> int:
    return int.from_bytes(b[i:i + 8], "little")


def _u32(b: bytes, i: int) -> int:
    return int.from_bytes(b[i:i + 4], "little")


def _rot(v: int, s: int) -> int:
    return v if s == 0 else ((v >> s) | (v << (64 - s))) & M64


def _mix(v: int) -> int:
    return v ^ (v >> 47)


def _len16(u: int, v: int, mul: int) -> int:
    a = _mix(((u ^ v) * mul) & M64)
    b = _mix(((v ^ a) * mul) & M64)
    return (b * mul) & M64


def _seeds32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    a = (a + _u64(s, i)) & M64
    b = _rot((b + a + _u64(s, i + 24)) & M64, 21)
    c = a
    a = (a + _u64(s, i + 8) + _u64(s, i + 16)) & M64
    b = (b + _rot(a, 44)) & M64
    return (a + _u64(s, i + 24)) & M64, (b + c) & M64


def _hash64_of_words(words: np.ndarray) -> np.ndarray:
    """string_hash64 of 8-byte strings given as little-endian uint64 words, over arrays (its
    8..16-byte branch with n = 8; uint64 arithmetic wraps like the & M64 above)."""
    mul, k2 = np.uint64(K2 + 16), np.uint64(K2)
    rot = lambda v, r: (v >> np.uint64(r)) | (v << np.uint64(64 - r))  # noqa: E731
    mix = lambda v: v ^ (v >> np.uint64(47))  # noqa: E731
    a = words + k2
    c = rot(words, 37) * mul + a
    d = (rot(a, 25) + words) * mul
    a = mix((c ^ d) * mul)
    return mix((d ^ a) * mul) * mul


def string_hash64(s: bytes) -> int:
    n = len(s)
    if n <= 16:
        if n >= 8:
            mul = K2 + n * 2
            a = (_u64(s, 0) + K2) & M64
            b = _u64(s, n - 8)
            c = (_rot(b, 37) * mul + a) & M64
            d = ((_rot(a, 25) + b) * mul) & M64
            return _len16(c, d, mul)
        if n >= 4:
            mul = K2 + n * 2
            return _len16((n + (_u32(s, 0) << 3)) & M64, _u32(s, n - 4), mul)
        if n > 0:
            y = s[0] + (s[n >> 1] << 8)
            z = n + (s[n - 1] << 2)
            return (_mix(((y * K2) ^ (z * K0)) & M64) * K2) & M64
        return K2
    mul = K2 + n * 2
    if n <= 32:
        a = (_u64(s, 0) * K1) & M64
        b = _u64(s, 8)
        c = (_u64(s, n - 8) * mul) & M64
        d = (_u64(s, n - 16) * K2) & M64
        return _len16((_rot((a + b) & M64, 43) + _rot(c, 30) + d) & M64, (a + _rot((b + K2) & M64, 18) + c) & M64, mul)
    if n <= 64:
        a = (_u64(s, 0) * K2) & M64
        b = _u64(s, 8)
        c = (_u64(s, n - 8) * mul) & M64
        d = (_u64(s, n - 16) * K2) & M64
        y = (_rot((a + b) & M64, 43) + _rot(c, 30) + d) & M64
        z = _len16(y, (a + _rot((b + K2) & M64, 18) + c) & M64, mul)
        e = (_u64(s, 16) * mul) & M64
        f = _u64(s, 24)
        g = ((y + _u64(s, n - 32)) * mul) & M64
        h = ((z + _u64(s, n - 24)) * mul) & M64
        return _len16((_rot((e + f) & M64, 43) + _rot(g, 30) + h) & M64, (e + _rot((f + a) & M64, 18) + g) & M64, mul)
    x = 81
    y = (81 * K1 + 113) & M64
    t = (y * K2 + 113) & M64
    z = (_mix(t) * K2) & M64
    v, w = (0, 0), (0, 0)
    x = (x * K2 + _u64(s, 0)) & M64
    end = ((n - 1) // 64) * 64
    last = end + ((n - 1) & 63) - 63
    i = 0
    while True:
        x = (_rot((x + y + v[0] + _u64(s, i + 8)) & M64, 37) * K1) & M64
        y = (_rot((y + v[1] + _u64(s, i + 48)) & M64, 42) * K1) & M64
        x ^= w[1]
        y = (y + v[0] + _u64(s, i + 40)) & M64
        z = (_rot((z + w[0]) & M64, 33) * K1) & M64
        v = _seeds32(s, i, (v[1] * K1) & M64, (x + w[0]) & M64)
        w = _seeds32(s, i + 32, (z + w[1]) & M64, (y + _u64(s, i + 16)) & M64)
        z, x = x, z
        i += 64
        if i == end:
            break
    mul = K1 + ((z & 0xFF) << 1)
    i = last
    w = ((w[0] + ((n - 1) & 63)) & M64, w[1])
    v = ((v[0] + w[0]) & M64, v[1])
    w = ((w[0] + v[0]) & M64, w[1])
    x = (_rot((x + y + v[0] + _u64(s, i + 8)) & M64, 37) * mul) & M64
    y = (_rot((y + v[1] + _u64(s, i + 48)) & M64, 42) * mul) & M64
    x ^= (w[1] * 9) & M64
    y = (y + v[0] * 9 + _u64(s, i + 40)) & M64
    z = (_rot((z + w[0]) & M64, 33) * mul) & M64
    v = _seeds32(s, i, (v[1] * mul) & M64, (x + w[0]) & M64)
    w = _seeds32(s, i + 32, (z + w[1]) & M64, (y + _u64(s, i + 16)) & M64)
    z, x = x, z
    return _len16((_len16(v[0], w[0], mul) + _mix(y) * K0 + z) & M64, (_len16(v[1], w[1], mul) + x) & M64, mul)


# --- ops -----------------------------------------------------------------------------------



@op("LshProjection")
def lsh_projection(node, ins):
    """(hash seeds float [n, m], features (4-byte elements, read as int32), optional weights
    float [features]) -> int32. Bit (i, j) = 1 when sum_k w_k * double(int64(hash64(seed_ij
    bytes + feature_k bytes))) > 0 (w = 1 without weights). SPARSE: out[i] = the m bits of row
    i as a number + i * 2^m, shape [n]; DENSE: the bits, shape [n * m]."""
    expect_inputs(node, ins, 2, 3)
    kind = node.attrs.type
    seeds, feats = ins[0], ins[1]
    if seeds.dtype != F32 or len(seeds.shape) != 2:
        raise fail(node, f"hash seeds must be float32 [n, m], got {seeds.dtype} {seeds.shape}")
    n, m = seeds.shape
    if m > 32 or (kind == LshProjectionType.SPARSE and m > 30):
        raise fail(node, f"{m} hash functions per row overflow the int32 output")
    if feats.dtype.itemsize != 4 or len(feats.shape) < 1:
        raise fail(node, f"features must hold 4-byte values, got {feats.dtype} {feats.shape}")
    if len(ins) == 3 and (ins[2].dtype != F32 or ins[2].size != feats.size):
        raise fail(node, f"weights must be float32 with one value per feature ({feats.size})")
    if kind not in (LshProjectionType.SPARSE, LshProjectionType.DENSE):
        raise fail(node, f"type {kind} is neither SPARSE nor DENSE")
    shape = (n,) if kind == LshProjectionType.SPARSE else (n * m,)
    k = feats.size
    if n * m * k > MAX_LSH_HASHES:
        raise ResourceError(f"{node.label}: {n}x{m} hash functions over {k} features is over the "
                            f"{MAX_LSH_HASHES} hashes LshProjection computes")
    check_size(f"{node.label}: hash working arrays", (4 * m * k,), np.uint64)

    def run(inputs, outputs):
        # Each hashed string is 8 bytes, the seed's float bits then the feature's: one word.
        feat_hi = np.ascontiguousarray(inputs[1]).view(np.uint32).reshape(-1).astype(np.uint64) << np.uint64(32)
        seed_lo = np.ascontiguousarray(inputs[0]).view(np.uint32).astype(np.uint64)
        w = inputs[2].reshape(-1).astype(np.float64) if len(inputs) == 3 else None
        bits = np.zeros((n, m), np.int64)
        for i in range(n if k else 0):
            h = _hash64_of_words(seed_lo[i][:, None] | feat_hi[None, :]).view(np.int64).astype(np.float64)
            # r1.1 sums the features' terms in order, in double: accumulate, not a pairwise sum.
            bits[i] = np.add.accumulate(h if w is None else w * h, axis=1)[:, -1] > 0
        if kind == LshProjectionType.DENSE:
            np.copyto(outputs[0], bits.reshape(-1).astype(np.int32))
        else:
            sign = (bits << np.arange(m - 1, -1, -1)).sum(1) + np.arange(n) * (1 << m)
            np.copyto(outputs[0], sign.astype(np.int32))

    return Plan([(shape, I32)], run)


def _int_keys(node, v, what):
    if v.dtype != I32:
        raise fail(node, f"{what} must be int32, got {v.dtype}")


@op("HashtableLookup", data_dependent=True)
def hashtable_lookup(node, ins):
    """(lookups int32, keys int32 ascending, values string) -> (the value of each lookup's key,
    or an empty string when absent, packed; hits uint8 [lookups.shape[0]]: 1 found, 0 not).
    r1.1 binary-searches the first len(values) keys."""
    expect_inputs(node, ins, 3)
    _int_keys(node, ins[0], "lookups")
    _int_keys(node, ins[1], "keys")
    values = _string_input(node, ins[2], "values")
    if ins[1].size < len(values):
        raise fail(node, f"{len(values)} values but only {ins[1].size} keys")
    if len(ins[0].shape) != 1:
        # r1.1 sizes hits by dim 0 but writes one per lookup element: 1-D only
        raise fail(node, f"lookups must be 1-D, got {ins[0].shape}")
    look = ins[0].const.reshape(-1)
    keys = ins[1].const.reshape(-1)[:len(values)]
    pos = np.searchsorted(keys, look)
    hit = np.array([p < keys.size and keys[p] == v for p, v in zip(pos, look)], bool).reshape(-1)
    out = pack_strings([values[p] if h else b"" for p, h in zip(pos, hit)])
    hits = hit.astype(np.uint8)
    return Plan([(out.shape, U8), (hits.shape, U8)], _copy_all([out, hits]))


@op("SkipGram", data_dependent=True)
def skip_gram(node, ins):
    """Skip-grams of the first string's space-separated words: every word sequence of length
    `ngramSize` (also 1..ngramSize-1 with `includeAllGrams`) whose consecutive words are at
    most `maxSkipSize` words apart, joined by single spaces, in r1.1's depth-first order."""
    expect_inputs(node, ins, 1)
    a = node.attrs
    if a.ngramSize < 1:
        raise fail(node, f"ngramSize must be at least 1, got {a.ngramSize}")
    strings = _string_input(node, ins[0], "input")
    if not strings:
        raise fail(node, "the input holds no string")
    sentence = strings[0]
    if not sentence:
        raise fail(node, "the sentence is empty (r1.1 reads the byte before it)")
    words = [w for w in sentence.split(b" ") if w]
    grams: list[bytes] = []
    size, ngram = len(words), a.ngramSize
    stack = [0] * ngram
    index = 1
    while index >= 0:  # r1.1's iterative enumeration, kept for its output order
        if (index < ngram and stack[index] + 1 < size
                and (index == 0 or stack[index] - stack[index - 1] <= a.maxSkipSize)):
            stack[index] += 1
            index += 1
            if index < ngram:
                stack[index] = stack[index - 1]
        else:
            if index > 0 and ((a.includeAllGrams and index <= ngram) or index == ngram):
                grams.append(b" ".join(words[stack[k]] for k in range(index)))
            index -= 1
    return _string_plan(grams)


_TRANSFORMS = [  # r1.1 applies them in std::map (sorted key) order
    (rb"([\S]+)'ll", rb"\1 will"), (rb"([\S]+)'nt", rb"\1 not"), (rb"([\S]+)'re", rb"\1 are"),
    (rb"([\S]+)'ve", rb"\1 have"), (rb"([\S]+)n't", rb"\1 not"), (rb"i'm", b"i am")]
_SPACE = b" \t\n\v\f\r"


def _trim(s: bytes) -> bytes:
    return s.strip(_SPACE)


def normalize(s: bytes) -> bytes:
    s = _trim(s.lower())
    s = re.sub(rb'[.*()"]', b"", s)
    s = re.sub(rb"\s('t|'nt|n't|'d|'ll|'s|'m|'ve|'re)([\s,;:/])", rb"\1\2", s)
    s = re.sub(rb"\s('t|'nt|n't|'d|'ll|'s|'m|'ve|'re)$", rb"\1", s)
    for pattern, repl in _TRANSFORMS:
        s = re.sub(pattern, repl, s)
    s = re.sub(rb"([?])+", rb"\1", s)
    s = re.sub(rb"([!])+", rb"\1", s)
    s = re.sub(rb"([^?!]+)([?!])", rb"\1 \2 ", s)
    s = re.sub(rb"([?!])([?!])", rb"\1 \2", s)
    s = re.sub(rb"[\s,:;\-&'\"]+$", b"", s)
    s = re.sub(rb"^[\s,:;\-&'\"]+", b"", s)
    s = _trim(s)[:300]
    return b"<S> " + s + b" <E>"


@op("CustomNormalize", data_dependent=True)
def custom_normalize(node, ins):
    """Each string: ASCII lower-case, trim, drop . * ( ) ", re-attach split contractions, expand
    n't/'ll/'re/'ve/i'm, collapse ?/! runs and space them out, strip edge punctuation, trim,
    cut to 300 bytes, wrap as "<S> ... <E>". No strings in gives one 1-byte NUL string."""
    expect_inputs(node, ins, 1)
    strings = _string_input(node, ins[0], "input")
    out = [normalize(s) for s in strings] if strings else [b"\0"]
    return _string_plan(out)


@op("CustomPredict")
def custom_predict(node, ins):
    """(input int32, keys int32 ascending, labels int32 [keys, items], weights float [keys,
    items]) -> (labels int32 [outputNum], weights float [outputNum]). Each input value found
    in keys adds weights[row]/len(input) (float) to its row's labels; labels sorted by
    descending weight (ties: first seen first); slots past the list or below
    `weightThreshold` get label -1, weight 0."""
    expect_inputs(node, ins, 4)
    for v, what in zip(ins[:3], ("input", "keys", "labels")):
        _int_keys(node, v, what)
    if ins[3].dtype != F32:
        raise fail(node, f"weights must be float32, got {ins[3].dtype}")
    if len(ins[2].shape) != 2 or ins[2].shape[0] < ins[1].size or ins[3].size < ins[2].size:
        raise fail(node, f"labels {ins[2].shape} / weights {ins[3].shape} do not cover {ins[1].size} keys")
    count, thr = node.attrs.outputNum, np.float32(node.attrs.weightThreshold)
    if count < 0:
        raise fail(node, f"outputNum {count} is negative")
    items = ins[2].shape[1]

    def run(inputs, outputs):
        x, keys = inputs[0].reshape(-1), inputs[1].reshape(-1)
        labels, weights = inputs[2].reshape(-1), inputs[3].reshape(-1)
        acc: dict[int, np.float32] = {}
        n = np.float32(x.size)
        for v in x:
            p = int(np.searchsorted(keys, v))
            if p == keys.size or keys[p] != v:
                continue
            for j in range(p * items, p * items + items):
                lab = int(labels[j])
                acc[lab] = np.float32(acc.get(lab, np.float32(0)) + weights[j] / n)
        ranked = sorted(acc.items(), key=lambda kv: -kv[1])
        outputs[0].fill(-1)
        outputs[1].fill(0)
        for i, (lab, w) in enumerate(ranked[:count]):
            if w >= thr:
                outputs[0][i], outputs[1][i] = lab, w

    return Plan([((count,), I32), ((count,), F32)], run)


_BLACKLIST = (b"<S>", b"<E>", b"<S> <E>")


@op("CustomExtractFeatures", data_dependent=True)
def custom_extract_features(node, ins):
    """Each string -> (label int32 = hash64(s) mod 1000000, weight float = spaces + 1); the
    markers "<S>", "<E>", "<S> <E>" give (0, 0). Shape [count] ([1] of zeros for no strings)."""
    expect_inputs(node, ins, 1)
    strings = _string_input(node, ins[0], "input")
    labels = np.zeros(max(len(strings), 1), I32)
    weights = np.zeros(max(len(strings), 1), F32)
    for i, s in enumerate(strings):
        if s not in _BLACKLIST:
            labels[i] = string_hash64(s) % 1000000
            weights[i] = s.count(b" ") + 1
    return Plan([(labels.shape, I32), (weights.shape, F32)], _copy_all([labels, weights]))

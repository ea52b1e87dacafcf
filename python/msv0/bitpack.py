"""r1.1's bit-packed weight data (format-v0.md §3): values of `bits` bits, each offset by
2^(bits-1) to be non-negative, written LSB first into a little-endian stream of uint8 words
(bits < 8, an int8 tensor) or uint16 words (9..15 bits, an int16 tensor).

A little-endian word read LSB first is its bytes in order, each LSB first, so both word sizes
are one byte stream in NumPy's bitorder="little"."""
from __future__ import annotations

import numpy as np


def is_packed(bits: int, word_bits: int) -> bool:
    """Whether an int8 (word_bits 8) or int16 (16) weight of numBits `bits` is packed."""
    return 1 <= bits < 8 if word_bits == 8 else 8 < bits < 16


def packed_words(count: int, bits: int, word_bits: int) -> int:
    """The words r1.1's converter writes for `count` values: the stream, zero-padded to a word."""
    return -(-count * bits // word_bits)


def pack_bits(q: np.ndarray, bits: int, word_bits: int) -> np.ndarray:
    """The signed values q (each in [-2^(bits-1), 2^(bits-1))) packed, as bytes."""
    u = (np.asarray(q, np.int64).reshape(-1) + (1 << (bits - 1))).astype("<u2")
    stream = np.unpackbits(u.view(np.uint8).reshape(-1, 2), axis=1, bitorder="little")[:, :bits].reshape(-1)
    pad = packed_words(u.size, bits, word_bits) * word_bits - stream.size
    return np.packbits(np.concatenate([stream, np.zeros(pad, np.uint8)]), bitorder="little")


def unpack_bits(raw: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first `count` signed values of a packed stream (raw: its bytes). The stream must hold
    them: the caller checks its length."""
    stream = np.unpackbits(np.asarray(raw, np.uint8), bitorder="little")[: count * bits].reshape(count, bits)
    wide = np.zeros((count, 16), np.uint8)
    wide[:, :bits] = stream
    return np.packbits(wide, axis=1, bitorder="little").view("<u2").reshape(-1).astype(np.int64) - (1 << (bits - 1))

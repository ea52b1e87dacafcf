"""MindSpore TypeId numbers (format-v0.md §2) and their NumPy dtypes."""
from __future__ import annotations

import numpy as np

STRING = 12
TENSOR_LIST = 17
BOOL, INT, INT8, INT16, INT32, INT64 = 30, 31, 32, 33, 34, 35
UINT, UINT8, UINT16, UINT32, UINT64 = 36, 37, 38, 39, 40
FLOAT, FLOAT16, FLOAT32, FLOAT64 = 41, 42, 43, 44

TO_NUMPY: dict[int, np.dtype] = {
    STRING: np.dtype(np.uint8),  # one byte per char
    TENSOR_LIST: np.dtype(np.int32),  # encoded list header
    BOOL: np.dtype(np.bool_),
    INT: np.dtype(np.int32),
    INT8: np.dtype(np.int8),
    INT16: np.dtype(np.int16),
    INT32: np.dtype(np.int32),
    INT64: np.dtype(np.int64),
    UINT: np.dtype(np.uint32),
    UINT8: np.dtype(np.uint8),
    UINT16: np.dtype(np.uint16),
    UINT32: np.dtype(np.uint32),
    UINT64: np.dtype(np.uint64),
    FLOAT: np.dtype(np.float32),
    FLOAT16: np.dtype(np.float16),
    FLOAT32: np.dtype(np.float32),
    FLOAT64: np.dtype(np.float64),
}

# The TypeId a NumPy dtype is written as (the builder, Cast outputs).
FROM_NUMPY: dict[np.dtype, int] = {
    np.dtype(np.bool_): BOOL,
    np.dtype(np.int8): INT8,
    np.dtype(np.int16): INT16,
    np.dtype(np.int32): INT32,
    np.dtype(np.int64): INT64,
    np.dtype(np.uint8): UINT8,
    np.dtype(np.uint16): UINT16,
    np.dtype(np.uint32): UINT32,
    np.dtype(np.uint64): UINT64,
    np.dtype(np.float16): FLOAT16,
    np.dtype(np.float32): FLOAT32,
    np.dtype(np.float64): FLOAT64,
}


def to_numpy(type_id: int, what: str) -> np.dtype:
    from msv0.errors import ModelError

    try:
        return TO_NUMPY[type_id]
    except KeyError:
        raise ModelError(f"{what}: unsupported dataType {type_id}") from None


def type_id(dtype) -> int:
    return FROM_NUMPY[np.dtype(dtype)]

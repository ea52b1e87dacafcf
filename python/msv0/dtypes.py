"""MindSpore TypeIds (the schema's TypeId enum, format-v0.md §2) and their NumPy dtypes.

TO_NUMPY is the one table of element types; item sizes are its dtypes' itemsize (the C++
verifier's item_size() is checked against it by tests/test_schema_names.py)."""
from __future__ import annotations

import numpy as np

from msv0.fb.TypeId import TypeId

TO_NUMPY: dict[int, np.dtype] = {
    TypeId.kObjectTypeString: np.dtype(np.uint8),  # one byte per char
    TypeId.kObjectTypeTensorType: np.dtype(np.int32),  # encoded list header
    TypeId.kNumberTypeBool: np.dtype(np.bool_),
    TypeId.kNumberTypeInt: np.dtype(np.int32),
    TypeId.kNumberTypeInt8: np.dtype(np.int8),
    TypeId.kNumberTypeInt16: np.dtype(np.int16),
    TypeId.kNumberTypeInt32: np.dtype(np.int32),
    TypeId.kNumberTypeInt64: np.dtype(np.int64),
    TypeId.kNumberTypeUInt: np.dtype(np.uint32),
    TypeId.kNumberTypeUInt8: np.dtype(np.uint8),
    TypeId.kNumberTypeUInt16: np.dtype(np.uint16),
    TypeId.kNumberTypeUInt32: np.dtype(np.uint32),
    TypeId.kNumberTypeUInt64: np.dtype(np.uint64),
    TypeId.kNumberTypeFloat: np.dtype(np.float32),
    TypeId.kNumberTypeFloat16: np.dtype(np.float16),
    TypeId.kNumberTypeFloat32: np.dtype(np.float32),
    TypeId.kNumberTypeFloat64: np.dtype(np.float64),
}

# Element types whose data is not an array of their dtype (strings, TensorList headers).
OBJECT_TYPES = (TypeId.kObjectTypeString, TypeId.kObjectTypeTensorType)

# The TypeId a NumPy dtype is written as (the builder, Cast outputs): the sized name, never
# the unsized Int/UInt/Float aliases.
FROM_NUMPY: dict[np.dtype, int] = {
    dt: tid for tid, dt in TO_NUMPY.items()
    if tid not in OBJECT_TYPES and tid not in (TypeId.kNumberTypeInt, TypeId.kNumberTypeUInt, TypeId.kNumberTypeFloat)
}


def to_numpy(type_id: int, what: str) -> np.dtype:
    from msv0.errors import ModelError

    try:
        return TO_NUMPY[type_id]
    except KeyError:
        raise ModelError(f"{what}: unsupported dataType {type_id}") from None


def type_id(dtype) -> int:
    return FROM_NUMPY[np.dtype(dtype)]

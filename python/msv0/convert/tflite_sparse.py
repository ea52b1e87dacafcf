"""Sparse TFLite constants (a tensor's `sparsity` table) made dense at conversion.

TFLite stores such a tensor as its non-zero values in traversal order over n + b dims: the n
dense dims, each divided by its block size where block_map names it, then the b block dims.
dim_metadata[i] describes the i-th dim of that order (dim traversal_order[i]): DENSE with
dense_size, or SPARSE_CSR, where array_segments[p] .. array_segments[p + 1] index the present
entries (their coordinates in array_indices) under position p of the levels above.
"""
from __future__ import annotations

import numpy as np

TFL_DENSE, TFL_SPARSE_CSR = 0, 1  # TFLite's DimensionType
# SparseIndexVector union members -> the tflite class that holds their `values`
INDEX_VECTORS = {1: "Int32Vector", 2: "Uint16Vector", 3: "Uint8Vector"}


def _index_vector(kind: int, table) -> np.ndarray:
    import importlib
    if kind not in INDEX_VECTORS or table is None:
        raise ValueError(f"sparse index vector of kind {kind}")
    name = INDEX_VECTORS[kind]
    vec = getattr(importlib.import_module(f"tflite.{name}"), name)()
    vec.Init(table.Bytes, table.Pos)
    return vec.ValuesAsNumpy().astype(np.int64) if vec.ValuesLength() else np.zeros(0, np.int64)


def densify(values: np.ndarray, shape: tuple[int, ...], sparsity) -> np.ndarray:
    """The dense array of `shape` that a tensor's SparsityParameters and stored values describe."""
    n = len(shape)
    order = [int(v) for v in sparsity.TraversalOrderAsNumpy()] if sparsity.TraversalOrderLength() else list(range(n))
    block_map = [int(v) for v in sparsity.BlockMapAsNumpy()] if sparsity.BlockMapLength() else []
    levels = n + len(block_map)
    if sorted(order) != list(range(levels)) or sparsity.DimMetadataLength() != levels:
        raise ValueError(f"sparsity of a rank-{n} tensor: traversal order {order} over "
                         f"{sparsity.DimMetadataLength()} dim metadata")
    pos = np.zeros(1, np.int64)  # position of each partial entry within its level
    coords = np.zeros((1, levels), np.int64)  # its coordinates in the blocked dims, by dim
    for i in range(levels):
        dm = sparsity.DimMetadata(i)
        if dm.Format() == TFL_DENSE:
            size = int(dm.DenseSize())
            pos = (pos[:, None] * size + np.arange(size)).reshape(-1)
            coords = np.repeat(coords, size, axis=0)
            coords[:, order[i]] = np.tile(np.arange(size), len(coords) // size if size else 0)
        elif dm.Format() == TFL_SPARSE_CSR:
            seg = _index_vector(dm.ArraySegmentsType(), dm.ArraySegments())
            idx = _index_vector(dm.ArrayIndicesType(), dm.ArrayIndices())
            if len(pos) and (pos.max() + 1 >= len(seg) or seg[-1] > len(idx) or np.any(np.diff(seg) < 0)):
                raise ValueError(f"sparse dim {i}: {len(seg)} segments for {len(pos)} rows, {len(idx)} indices")
            counts = seg[pos + 1] - seg[pos]
            pos = np.repeat(seg[pos] - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
            coords = np.repeat(coords, counts, axis=0)
            coords[:, order[i]] = idx[pos]
        else:
            raise ValueError(f"dim metadata format {dm.Format()}")
    if len(values) != len(pos):
        raise ValueError(f"{len(values)} stored values for {len(pos)} sparse entries")
    dense_coords = coords[:, :n].copy()
    for j, d in enumerate(block_map):
        block = int(sparsity.DimMetadata(order.index(n + j)).DenseSize())
        dense_coords[:, d] = dense_coords[:, d] * block + coords[:, n + j]
    if np.any(dense_coords >= np.array(shape, np.int64)):
        raise ValueError(f"sparse coordinates outside the shape {list(shape)}")
    out = np.zeros(shape, values.dtype)
    out[tuple(dense_coords.T)] = values[pos]
    return out

"""TensorList ops (format-v0.md §8): a TensorList value is a Python list of arrays, built and
read by TensorListFromTensor/Reserve/GetItem/SetItem/Stack in the data-flow executor."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from msv0.dtypes import to_numpy
from msv0.model import Node
from msv0.registry import control, fail, first_int


@dataclass
class TensorList:
    items: list[np.ndarray | None]
    element_shape: tuple[int, ...] | None
    dtype: np.dtype

    def stacked(self, node: Node) -> np.ndarray:
        if any(x is None for x in self.items) and self.element_shape is None:
            raise fail(node, "stacking a TensorList with unset items and no element shape")
        shape = self.element_shape
        items = [np.zeros(shape, self.dtype) if x is None else x for x in self.items]
        if not items:
            return np.zeros((0,) + tuple(shape or ()), self.dtype)
        if any(x.shape != items[0].shape for x in items):
            raise fail(node, "TensorList items have different shapes")
        return np.stack(items)


def _element_shape(v: Any) -> tuple[int, ...] | None:
    a = np.asarray(v).reshape(-1)
    if a.size == 0 or (a < 0).any():
        return None
    return tuple(int(x) for x in a)


@control("TensorListFromTensor", inputs=1)
def _list_from_tensor(interp, node, ins):
    x = np.asarray(ins[0])
    if x.ndim < 1:
        raise fail(node, "input must have at least one dimension")
    shape = _element_shape(ins[1]) if len(ins) > 1 else tuple(x.shape[1:])
    return {0: TensorList([x[i].copy() for i in range(x.shape[0])], shape or tuple(x.shape[1:]), x.dtype)}


def _as_list(node: Node, v: Any) -> TensorList:
    if not isinstance(v, TensorList):
        raise fail(node, "input 0 is not a TensorList")
    return v


@control("TensorListReserve")
def _list_reserve(interp, node, ins):
    if len(ins) != 2:
        raise fail(node, "expects (element_shape, num_elements)")
    count = first_int(node, ins[1], "num_elements")
    if count < 0:
        raise fail(node, f"num_elements {count} is negative")
    return {0: TensorList([None] * count, _element_shape(ins[0]), to_numpy(node.attrs.elementDtype, node.label))}


def _itemfirst_int(node: Node, lst: TensorList, v: Any) -> int:
    i = first_int(node, v, "index")
    if not 0 <= i < len(lst.items):
        raise fail(node, f"index {i} out of range for a list of {len(lst.items)}")
    return i


@control("TensorListGetItem", inputs=2)
def _list_get(interp, node, ins):
    lst = _as_list(node, ins[0])
    i = _itemfirst_int(node, lst, ins[1])
    item = lst.items[i]
    if item is None:
        if lst.element_shape is None:
            raise fail(node, f"item {i} is unset and the element shape is unknown")
        item = np.zeros(lst.element_shape, lst.dtype)
    return {0: item}


@control("TensorListSetItem", inputs=3)
def _list_set(interp, node, ins):
    lst = _as_list(node, ins[0])
    i = _itemfirst_int(node, lst, ins[1])
    items = list(lst.items)
    items[i] = np.array(ins[2], lst.dtype)
    return {0: TensorList(items, lst.element_shape, lst.dtype)}


@control("TensorListStack", inputs=1)
def _list_stack(interp, node, ins):
    lst = _as_list(node, ins[0])
    out = lst.stacked(node)
    n = node.attrs.numElements
    if n not in (-1, 0) and n != len(lst.items):
        raise fail(node, f"numElements {n} but the list holds {len(lst.items)}")
    return {0: out}

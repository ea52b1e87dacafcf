"""Run one op through the whole path: builder -> bytes -> load -> Session -> run."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

import msv0
from msv0.builder import Builder


@dataclass
class Const:
    """An op input written into the model as a constant tensor."""

    value: np.ndarray
    format: int = 1  # NHWC; 7 = KHWC for conv weights
    quant: list | None = None
    type_id: int | None = None


def run_op(op: str, inputs: Sequence[np.ndarray | Const], outputs: int = 1, num_threads: int = 1,
           out_dtypes: Sequence | None = None, **attrs) -> list[np.ndarray]:
    """Build a one-node model of `op`, run it on the non-Const inputs, return its outputs."""
    b = Builder(op)
    idx, feeds = [], []
    for k, x in enumerate(inputs):
        if isinstance(x, Const):
            idx.append(b.const(f"c{k}", x.value, format=x.format, quant=x.quant, type_id=x.type_id))
        else:
            x = np.asarray(x)
            idx.append(b.input(f"in{k}", x.shape, x.dtype))
            feeds.append(x)
    outs = [b.tensor(f"out{k}", (out_dtypes or [np.float32] * outputs)[k]) for k in range(outputs)]
    b.node(op, idx, outputs=outs, name=f"{op.lower()}_node", **attrs)
    b.output(*outs)
    session = msv0.Session(b.finish(), num_threads=num_threads)
    result = session.run(feeds)
    return [result[f"out{k}"] for k in range(outputs)]

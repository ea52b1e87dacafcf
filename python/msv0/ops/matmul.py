"""FullConnection and MatMul (format-v0.md §5), through the packed SGEMM."""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.registry import PRECISION, Plan, activation_range, as_float32, const_input, expect_inputs, fail, op
from msv0.weights import float_weight


def fc_shape(node, x, n: int, k: int) -> tuple[int, ...]:
    """A FullConnection's output shape for weight [n, k] (shared by the float and int8 op)."""
    a = node.attrs
    if a.useAxis:
        axis = a.axis + len(x.shape) if a.axis < 0 else a.axis
        if not 1 <= axis <= len(x.shape):
            raise fail(node, f"axis {a.axis} out of range for input shape {x.shape}")
        if int(np.prod(x.shape[axis:])) != k:
            raise fail(node, f"input {x.shape} from axis {axis} does not match weight K={k}")
        return tuple(x.shape[:axis]) + (n,)
    if k == 0 or x.size % k:
        raise fail(node, f"input {x.shape} is not a multiple of weight K={k}")
    return (x.size // k, n)


@op("FullConnection")
def full_connection(node, ins):
    a = node.attrs
    expect_inputs(node, ins, 2, 3)
    x, w = ins[0], ins[1]
    as_float32(node, x, "input")
    weight = float_weight(node, w, "inited")
    if weight.ndim != 2:
        raise fail(node, f"weight must be 2-D [N, K], got {weight.shape}")
    n, k = weight.shape
    out_shape = fc_shape(node, x, n, k)
    bias = None
    if len(ins) == 3:
        bias = np.ascontiguousarray(const_input(node, ins[2], "bias"), np.float32).reshape(-1)
        if bias.size != n:
            raise fail(node, f"bias has {bias.size} values, weight has N={n}")
    lo, hi = activation_range(a.activationType)
    kernel = _core.Gemm(weight, True, bias, x.shape, out_shape, lo, hi, precision=PRECISION.get())
    return Plan([(out_shape, np.dtype(np.float32))], kernel=kernel)


def _bias(node, v, n: int) -> np.ndarray:
    bias = np.ascontiguousarray(const_input(node, v, "bias"), np.float32).reshape(-1)
    if bias.size != n:
        raise fail(node, f"bias has {bias.size} values, the output has N={n}")
    return bias


@op("MatMul")
def matmul(node, ins):
    a = node.attrs
    expect_inputs(node, ins, 2, 3)
    x, w = ins[0], ins[1]
    as_float32(node, x, "A")
    a_shape, b_shape = list(x.shape), list(w.shape)
    if len(a_shape) == 4 and a_shape[2] == 1 and a_shape[3] == 1:
        a_shape = a_shape[:2]
    drop_m, drop_n = len(a_shape) == 1, len(b_shape) == 1
    if drop_m:
        a_shape = [1] + a_shape
    if drop_n:
        b_shape = b_shape + [1]
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise fail(node, f"A {x.shape} and B {w.shape} must have rank >= 1")
    # r1.1 has no batch broadcasting: it indexes B once per A batch, so batch dims must match.
    batch = a_shape[:-2]
    if b_shape[:-2] != batch:
        raise fail(node, f"batch dims of A {x.shape} and B {w.shape} differ")
    m, ka = (a_shape[-1], a_shape[-2]) if a.transposeA else (a_shape[-2], a_shape[-1])
    kb, n = (b_shape[-1], b_shape[-2]) if a.transposeB else (b_shape[-2], b_shape[-1])
    if ka != kb:
        raise fail(node, f"inner dims differ: A {x.shape} and B {w.shape} (transposeA={a.transposeA}, "
                         f"transposeB={a.transposeB})")
    out_shape = tuple(batch) + ((m,) if not drop_m else ()) + ((n,) if not drop_n else ())
    bias = _bias(node, ins[2], n) if len(ins) == 3 else None
    nb = int(np.prod(batch, dtype=np.int64))

    if w.const is None:
        as_float32(node, w, "B")
        b = None
    else:
        b = np.ascontiguousarray(float_weight(node, w, "inited", "B"))
    kernel = _core.MatMul(nb, m, n, ka, bool(a.transposeA), bool(a.transposeB), b, bias, x.shape, w.shape,
                          out_shape, precision=PRECISION.get() if b is not None else "fp32")
    return Plan([(out_shape, np.dtype(np.float32))], kernel=kernel)

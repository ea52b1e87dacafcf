"""FullConnection and MatMul int8 (format-v0.md §3.1), through the packed int8 GEMM
(_core.GemmS8): weights packed once, r1.1's requantization constants from msv0.quant."""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0 import quant
from msv0.ops.conv_s8 import int8_weight, int32_bias
from msv0.ops.matmul import fc_shape
from msv0.registry import Plan, Value, expect_inputs, fail, op

I8 = np.dtype(np.int8)


@op("FullConnection", int8=True)
def full_connection_s8(node, ins):
    expect_inputs(node, ins, 2, 3)
    x = ins[0]
    p_in = quant.input_param(node, x)
    p_out = quant.output_param(node)
    weight = int8_weight(node, ins[1])
    if weight.ndim != 2:
        raise fail(node, f"weight must be 2-D [N, K], got {weight.shape}")
    n, k = weight.shape
    out_shape = fc_shape(node, x, n, k)
    s_w, zp_w = quant.weight_params(node, ins[1], n)
    mult, left, right = quant.conv_requant(node, p_in.scale, s_w, p_out.scale)
    lo, hi = quant.activation_range(node, node.attrs.activationType, p_out.scale, p_out.zeroPoint)
    bias = int32_bias(node, ins[2], n) if len(ins) == 3 else None
    kernel = _core.GemmS8(weight, True, p_in.zeroPoint, zp_w, bias, mult, left, right, p_out.zeroPoint, lo, hi,
                          x_shape=x.shape, y_shape=out_shape)
    return Plan([(out_shape, I8)], kernel=kernel)


def _first_param(node, v: Value, what: str):
    """int8 MatMul reads each tensor's first QuantParam only."""
    if v.dtype != I8:
        raise fail(node, f"{what} must be int8, got {v.dtype}")
    return quant.one_param(node, v.quant[:1], f"{what} {v.tensor.label}")


@op("MatMul", int8=True)
def matmul_s8(node, ins):
    a = node.attrs
    expect_inputs(node, ins, 2, 3)
    x, w = ins[0], ins[1]
    p_in, p_w = _first_param(node, x, "A"), _first_param(node, w, "B")
    p_out = quant.one_param(node, (node.output_quant[0] if node.output_quant else ())[:1], "output 0")
    # r1.1's int8 kernel sizes itself from A's own shape (batch = all dims but the last two), so
    # the float op's reshapes of 1-D operands and of a [b, k, 1, 1] A would make it read out of
    # bounds: rejected.
    if len(x.shape) < 2 or len(w.shape) < 2:
        raise fail(node, f"int8 MatMul needs A and B of rank >= 2, got {x.shape} and {w.shape}")
    if len(x.shape) == 4 and x.shape[2] == x.shape[3] == 1:
        raise fail(node, f"int8 MatMul cannot run A of shape {x.shape} (r1.1 squeezes it only for shapes)")
    batch = tuple(x.shape[:-2])
    if tuple(w.shape[:-2]) != batch:
        raise fail(node, f"batch dims of A {x.shape} and B {w.shape} differ")
    m, ka = (x.shape[-1], x.shape[-2]) if a.transposeA else (x.shape[-2], x.shape[-1])
    kb, n = (w.shape[-1], w.shape[-2]) if a.transposeB else (w.shape[-2], w.shape[-1])
    if ka != kb:
        raise fail(node, f"inner dims differ: A {x.shape} and B {w.shape} (transposeA={a.transposeA}, "
                         f"transposeB={a.transposeB})")
    out_shape = batch + (m, n)
    # One multiplier, the whole expression in float: (double)((s_in_f · s_w_f) / s_out_f).
    M = float((quant.f32(p_in.scale) * quant.f32(p_w.scale)) / quant.f32(p_out.scale))
    requant = [np.full(n, r, np.int32) for r in quant.round_parameter(node, M)]
    bias = int32_bias(node, ins[2], n) if len(ins) == 3 else None
    w_zp = np.full(n, p_w.zeroPoint, np.int32)

    def gemm(b: np.ndarray, x_shape, y_shape=None):
        return _core.GemmS8(b, bool(a.transposeB), p_in.zeroPoint, w_zp, bias, *requant, p_out.zeroPoint,
                            x_shape=x_shape, y_shape=y_shape)

    nb = int(np.prod(batch, dtype=np.int64))
    a3, b3 = (nb,) + tuple(x.shape[-2:]), (nb,) + tuple(w.shape[-2:])
    if w.const is not None and nb == 1 and not a.transposeA:
        return Plan([(out_shape, I8)], kernel=gemm(int8_weight(node, w).reshape(b3[1:]), x.shape, out_shape))
    gemms = [gemm(b, (m, ka)) for b in int8_weight(node, w).reshape(b3)] if w.const is not None else None

    def run(inputs, outputs):  # no buffers shared between calls: runs may be concurrent
        av, out = inputs[0].reshape(a3), outputs[0].reshape(nb, m, n)
        # A run-time B is packed on every run, as r1.1 does.
        bv = gemms if gemms is not None else [gemm(np.ascontiguousarray(b), (m, ka)) for b in inputs[1].reshape(b3)]
        for i, g in enumerate(bv):
            g([np.ascontiguousarray(av[i].T if a.transposeA else av[i])], [out[i]])

    return Plan([(out_shape, I8)], run)

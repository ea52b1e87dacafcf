"""GELU, which v0 has no op for: the element-wise v0 ops the ONNX converter lowers it to
(convert/onnx_ops.gelu), and the plan-time pass that runs those ops as one native step.

The converter writes Gelu as TANH_FORM or ERF_FORM: six or twenty-two float32 passes over the
tensor, most of a transformer's time beside its GEMMs. fuse_gelu finds them among the planned
steps and puts one Activation step of kind gelu_tanh or gelu_erf in their place; that kernel
(csrc/kernels/activation_f32.cc) performs the same float operations in the same order, so the
result is the steps' own, bit for bit, and fuse_activations then runs it inside the
FullConnection that produces x, on each block of output while it is in cache.
"""
from __future__ import annotations

import math

import numpy as np

from msv0 import _core, forms
from msv0.fb.ActivationType import ActivationType
from msv0.registry import Plan

# tanh form: 0.5·x·(1 + tanh(u)) = x·sigmoid(2u), 2u = x·(C2 + C1·x²)
TANH_C2 = 2 * math.sqrt(2 / math.pi)
TANH_C1 = TANH_C2 * 0.044715
# erf form: x·Phi(x) = relu(x) − |x|·0.5·erfc(|x|/√2), erfc by Abramowitz-Stegun 7.1.26:
# erfc(m) ≈ t·(a1 + t·(a2 + t·(a3 + t·(a4 + t·a5))))·e^(−m²), t = 1/(1 + p·m), |error| < 1.5e-7
INV_SQRT2 = 1 / math.sqrt(2)
ERFC_P = 0.3275911
ERFC_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)

# The converter's node sequences: (op, operands...), an operand "x" (the input), k (the output of
# entry k) or a float (a scalar constant of that float32 value). "Relu"/"Sigmoid" are Activations.
TANH_FORM = [("Mul", "x", "x"), ("Mul", 0, TANH_C1), ("Add", 1, TANH_C2), ("Mul", 2, "x"), ("Sigmoid", 3),
             ("Mul", "x", 4)]
ERF_FORM = [("Abs", "x"), ("Mul", 0, INV_SQRT2),
            ("Mul", 1, ERFC_P), ("Add", 2, 1.0), ("Reciprocal", 3), ("Mul", ERFC_A[0], 4),
            ("Add", 5, ERFC_A[1]), ("Mul", 6, 4), ("Add", 7, ERFC_A[2]), ("Mul", 8, 4), ("Add", 9, ERFC_A[3]),
            ("Mul", 10, 4), ("Add", 11, ERFC_A[4]), ("Mul", 12, 4),
            ("Mul", 1, 1), ("Mul", 14, -1.0), ("Exp", 15), ("Mul", 13, 16), ("Mul", 17, 0.5),
            ("Relu", "x"), ("Mul", 0, 18), ("Sub", 19, 20)]
FORMS = {"gelu_tanh": (TANH_FORM, TANH_C1, TANH_C2), "gelu_erf": (ERF_FORM, 0.0, 1.0)}
_ACTIVATIONS = {"Relu": ActivationType.RELU, "Sigmoid": ActivationType.SIGMOID}


def profile_op(ops: str) -> str:
    """A step's op types joined by '+' (straight_line.step_op) with each form's run named Gelu."""
    for form, _, _ in FORMS.values():
        ops = ops.replace("+".join("Activation" if op in _ACTIVATIONS else op for op, *_ in form), "Gelu")
    return ops


def _is_op(node, op: str) -> bool:
    a = node.attrs
    if op in _ACTIVATIONS:
        return node.op == "Activation" and a.get("type") == _ACTIVATIONS[op]
    if op in ("Mul", "Add", "Sub"):
        return node.op == op and a.get("activationType", ActivationType.NO_ACTIVATION) == ActivationType.NO_ACTIVATION
    if op == "Exp":  # e^x: base e (−1), no scale, no shift
        return node.op == "Exp" and (a.get("base"), a.get("scale"), a.get("shift")) == (-1, 1, 0)
    return node.op == op


def _match(model, values, start: int, form) -> tuple[int, int, list[int]] | None:
    """(x, output, nodes) where model.nodes[start:] begin with `form` on a float32 x, else None."""
    found = forms.match(model, values, start, form, lambda node, k, op: _is_op(node, op))
    if found is None or any(values[o].shape != values[found[0]].shape for o in found[1]):
        return None
    return found[0], found[1][-1], found[2]


def fuse_gelu(model, planned: list, uses: dict[int, int], values: dict) -> list:
    """planned: the (nodes, Plan, inputs, outputs) steps; uses: reads of each tensor, graph
    outputs counted (updated here). Returns the steps with the steps of each lowered GELU, whose
    intermediates nothing else reads, replaced by one Activation step in the place of its last."""
    step_of = {n: j for j, (nodes, _, _, _) in enumerate(planned) for n in nodes}
    replaced: dict[int, tuple] = {}  # the GELU's last step -> the fused step
    dropped: set[int] = set()
    start = 0
    while start < len(model.nodes):
        for kind, (form, c1, c2) in FORMS.items():
            found = _match(model, values, start, form)
            if found is None:
                continue
            x, out, nodes = found
            steps = sorted({step_of.get(n, -1) for n in nodes})
            covered = sorted(n for j in steps if j >= 0 for n in planned[j][0])
            # Nothing but these steps reads an intermediate (uses counts the steps' inputs and the
            # graph outputs; a step's inner tensors, as in a Mul+Sigmoid step, count in neither).
            inner = {t for n in nodes[:-1] for t in model.nodes[n].outputs}
            reads = sum(t in inner for j in steps if j >= 0 for t in planned[j][2])
            if covered != nodes or sum(uses.get(t, 0) for t in inner) != reads:
                continue
            uses[x] -= sum(t == x for j in steps for t in planned[j][2]) - 1  # the fused step reads x once
            shape = values[x].shape
            kernel = _core.Activation(_core.ACTIVATION_KINDS[kind], shape, alpha=c1, beta=c2)
            replaced[steps[-1]] = (tuple(nodes), Plan([(shape, np.dtype(np.float32))], kernel=kernel), [x], [out])
            dropped.update(steps[:-1])
            start += len(form) - 1
            break
        start += 1
    return [replaced.get(j, step) for j, step in enumerate(planned) if j not in dropped]

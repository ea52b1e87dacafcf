"""Unary math ops, Exp and Power (format-v0.md §5; nnacl/fp32/arithmetic_self_fp32.c,
exp_fp32.c, power_fp32.c). NumPy written into the preallocated output, except float32 Exp, Abs,
Neg, Square, Sqrt, Rsqrt, Reciprocal, Log, Floor, Ceil, Round and Power with an exponent fixed at
plan time: kinds of the native Activation kernel object (its vector exp and log within ~1 ulp of
libm's)."""
from __future__ import annotations

import math

import numpy as np

from msv0.ops.activation import KINDS, native_unary
from msv0.registry import Plan, as_float32, expect_inputs, fail, op

F32 = np.dtype(np.float32)
INT32 = np.dtype(np.int32)


def _square(x, out):
    np.multiply(x, x, out=out)


# name -> (NumPy kernel f(x, out) or None, dtypes it accepts). Native (NATIVE_KINDS) on float32:
# the kind of the Activation kernel object (csrc/kernels/activation_f32.cc); NumPy otherwise.
UNARY = {
    "Abs": (np.abs, (F32, INT32)),
    "Neg": (np.negative, (F32, INT32)),
    "Square": (_square, (F32, INT32)),
    "Cos": (np.cos, (F32,)),
    "Sin": (np.sin, (F32,)),
    "Log": (None, (F32,)),
    "Sqrt": (None, (F32,)),
    "Rsqrt": (None, (F32,)),
    "Floor": (None, (F32,)),
    "Ceil": (None, (F32,)),
    "Round": (None, (F32,)),
    "Reciprocal": (None, (F32,)),
}
NATIVE_KINDS = {"Abs", "Neg", "Square", "Log", "Sqrt", "Rsqrt", "Floor", "Ceil", "Round", "Reciprocal"}


def _unary(name: str, kernel, dtypes):
    @op(name)
    def build(node, ins):
        expect_inputs(node, ins, 1)
        x = ins[0]
        if x.dtype not in dtypes:
            raise fail(node, f"{name} does not support dtype {x.dtype}")
        if x.dtype == F32 and name in NATIVE_KINDS:
            return native_unary(node, ins, KINDS[name.lower()])

        def run(inputs, outputs):
            with np.errstate(all="ignore"):  # cos(inf): NaN as in C
                kernel(inputs[0], out=outputs[0])

        return Plan([(x.shape, x.dtype)], run)

    return build


for _name, (_kernel, _dtypes) in UNARY.items():
    _unary(_name, _kernel, _dtypes)


@op("Exp")
def exp(node, ins):
    """y = base^(scale·x + shift), computed as r1.1 does: expf(x·scale·ln base)·base^shift, except
    that with scale == 1 the kernel runs expf(x) and drops ln(base) (the r1.1 bug, §5)."""
    a = node.attrs
    base, scale, shift = np.float32(a.base), np.float32(a.scale), np.float32(a.shift)
    if base != -1 and not base > 0:
        raise fail(node, f"base must be positive or -1 (e), got {a.base}")
    log_base = np.float32(1) if base == -1 else np.float32(math.log(base))
    in_scale = np.float32(1) if scale == 1 else np.float32(scale * log_base)
    if shift == 0:
        out_scale = np.float32(1)
    elif log_base == 1:
        out_scale = np.float32(math.exp(shift))
    else:
        out_scale = np.float32(math.pow(base, shift))
    # x·1 and y·1 are exact, so the kernel's exp(x·in_scale)·out_scale is r1.1's form for every scale.
    return native_unary(node, ins, KINDS["exp"], alpha=in_scale, beta=out_scale)


def _power_int(base, exponent: int, out):
    """Repeated squaring in float32, 1/result for a negative exponent (OptimizedPowerImpl)."""
    e = abs(exponent)
    out.fill(1)
    it = base.copy()
    while e:
        if e & 1:
            out *= it
        it *= it
        e >>= 1
    if exponent < 0:
        np.divide(np.float32(1), out, out=out)


@op("Power")
def power(node, ins):
    """(scale·x + shift)^p. r1.1 looks only at the FIRST exponent to choose the method: if it is
    integral, every element uses repeated squaring with its exponent truncated to int; otherwise
    every element uses double pow (nnacl/fp32/power_fp32.c Power). An exponent fixed at plan time
    (the attribute, or a one-element constant) runs native; an integral one beyond int32, where
    r1.1's (int) cast is undefined, through double pow."""
    expect_inputs(node, ins, 1, 2)
    x = ins[0]
    as_float32(node, x, "input")
    a = node.attrs
    scale, shift = np.float32(a.scale), np.float32(a.shift)
    if len(ins) == 2:
        as_float32(node, ins[1], "exponent")
        if ins[1].size != 1 and ins[1].shape != x.shape:
            raise fail(node, f"exponent shape {ins[1].shape} must be one element or the input shape {x.shape}")
    if len(ins) == 1 or (ins[1].const is not None and ins[1].size == 1):
        p = np.float32(a.power if len(ins) == 1 else ins[1].const.reshape(-1)[0])
        integral = np.isfinite(p) and np.floor(p) == p and abs(p) < 2.0 ** 31
        kind = KINDS["power_int" if integral else "power"]
        return native_unary(node, ins[:1], kind, alpha=scale, beta=shift, exponent=p)

    def run(inputs, outputs):
        out = outputs[0]
        exps = inputs[1].reshape(-1)
        with np.errstate(all="ignore"):
            base = inputs[0] * scale + shift
            first = exps[0]
            integral = np.isfinite(first) and np.floor(first) == first
            if exps.size == 1 and integral:
                _power_int(base, int(first), out)
            elif exps.size == 1:
                np.copyto(out, np.power(base.astype(np.float64), np.float64(first)), casting="unsafe")
            elif integral:
                # Per element, each with its own truncated exponent: group equal exponents.
                e = exps.astype(np.int64).reshape(out.shape)
                for k in np.unique(e):
                    sel = e == k
                    part = np.empty(int(sel.sum()), np.float32)
                    _power_int(base[sel], int(k), part)
                    out[sel] = part
            else:
                np.copyto(out, np.power(base.astype(np.float64), exps.reshape(out.shape).astype(np.float64)),
                          casting="unsafe")

    return Plan([(x.shape, F32)], run)


def _trig(name, ufunc):
    @op(name)
    def build(node, ins):
        """No r1.1 kernel: the float32 libm function element-wise (NaN outside the domain)."""
        expect_inputs(node, ins, 1)
        as_float32(node, ins[0], "input")

        def run(inputs, outputs):
            with np.errstate(all="ignore"):
                ufunc(inputs[0], out=outputs[0])

        return Plan([(ins[0].shape, F32)], run)

    return build


_trig("Tan", np.tan)
_trig("Atan", np.arctan)
_trig("Asin", np.arcsin)

"""GELU as the ONNX converter lowers it (msv0.gelu's TANH_FORM and ERF_FORM) runs as one
Activation step, fused into the FullConnection that produces x: bit-equal to the lowered steps on
every tier, within 2e-7·max(1, |x|) of GELU in float64, and left alone where an intermediate is
read elsewhere. (tests/convert/test_onnx_convert.py checks that the converter writes the forms.)"""
import math

import numpy as np
import pytest

import msv0
from msv0 import gelu, straight_line
from msv0.builder import Builder
from msv0.fb.ActivationType import ActivationType

ACTIVATION = {"Relu": ActivationType.RELU, "Sigmoid": ActivationType.SIGMOID}
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3e-39, -30.0, 30.0, 5.5, -5.5, 1e30, -1e30]


def lowered(kind: str, rows: int, cols: int, fc: bool, rng, tap: int | None = None) -> bytes:
    """x [rows, cols] (or a FullConnection's output on it) through the form's v0 nodes; tap: also
    output the intermediate of that entry."""
    b = Builder(kind)
    x = b.input("x", (rows, cols))
    if fc:
        w = (rng.standard_normal((cols, cols)) * 0.4).astype(np.float32)
        x = b.node("FullConnection", [x, b.const("w", w), b.const("b", rng.standard_normal(cols).astype(np.float32))],
                   hasBias=True)
    outs = form_nodes(b, kind, x)
    b.output(outs[-1], *([outs[tap]] if tap is not None else []))
    return b.finish()


def form_nodes(b: Builder, kind: str, x: int) -> list[int]:
    """The form's v0 nodes on x, appended to b; each entry's output."""
    outs = []
    for k, (op, *args) in enumerate(gelu.FORMS[kind][0]):
        ins = [x if a == "x" else outs[a] if isinstance(a, int) else b.const(f"c{k}_{a}", np.float32([a])) for a in args]
        if op in ACTIVATION:
            outs.append(b.node("Activation", ins, type=ACTIVATION[op]))
        elif op == "Exp":
            outs.append(b.node("Exp", ins, base=-1.0, scale=1.0, shift=0.0))
        else:
            outs.append(b.node(op, ins))
    return outs


def run(model: bytes, x: np.ndarray, threads: int, fuse: bool, monkeypatch) -> tuple[list[np.ndarray], int]:
    if not fuse:
        monkeypatch.setattr(straight_line, "fuse_gelu", lambda model, planned, uses, values: planned)
    session = msv0.Session(model, num_threads=threads)
    monkeypatch.undo()
    return list(session.run([x]).values()), len(session.plan_info.steps)


@pytest.mark.parametrize("kind", ["gelu_tanh", "gelu_erf"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows,fc", [(37, True), (1, True), (130, False)])
def test_gelu_step_equals_its_lowered_steps(isa, rng, monkeypatch, kind, threads, rows, fc):
    cols = 29  # a vector and a tail on every tier
    model = lowered(kind, rows, cols, fc, rng)
    x = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
    if not fc:
        x.reshape(-1)[:len(SPECIAL)] = SPECIAL
    (got,), steps = run(model, x, threads, True, monkeypatch)
    (want,), unfused = run(model, x, threads, False, monkeypatch)
    assert steps == 1 and unfused > 1
    np.testing.assert_array_equal(got, want)
    if not fc:
        x64 = x.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):  # at ±inf
            if kind == "gelu_erf":
                ref = x64 * 0.5 * (1 + np.vectorize(math.erf)(x64 / math.sqrt(2)))
            else:
                ref = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
        finite = np.isfinite(x64) & (np.abs(x64) < 1e6)
        assert np.all(np.abs(got[finite] - ref[finite]) <= 2e-7 * np.maximum(1, np.abs(x64[finite])))
        assert np.isnan(got.reshape(-1)[4])


@pytest.mark.parametrize("kind,tap", [("gelu_tanh", 3), ("gelu_erf", 13)])
def test_gelu_with_an_intermediate_read_elsewhere_stays_apart(rng, monkeypatch, kind, tap):
    model = lowered(kind, 5, 16, True, rng, tap=tap)
    x = rng.standard_normal((5, 16)).astype(np.float32)
    got, steps = run(model, x, 1, True, monkeypatch)
    want, unfused = run(model, x, 1, False, monkeypatch)
    assert steps == unfused > 2
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_gelu_outside_the_main_graph_is_not_matched(rng):
    """The fuzzer's case for the plan-time passes: nodes in no plan (here a GELU form that
    subGraph[0] does not list) are not matched against values that know planned tensors only."""
    b = Builder("gelu_tanh")
    x = b.input("x", (3, 8))
    y = b.node("Abs", [x])
    form_nodes(b, "gelu_tanh", x)
    b.output(y)
    b.main_nodes = [0]
    x_in = rng.standard_normal((3, 8)).astype(np.float32)
    (got,) = msv0.Session(b.finish()).run([x_in]).values()
    np.testing.assert_array_equal(got, np.abs(x_in))

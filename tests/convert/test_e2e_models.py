"""End-to-end: torchvision-style ONNX networks (tests/convert/onnxnets.py, random weights) converted
to v0, run with msv0.Session, compared with onnxruntime.

Criterion: max|msv0 − ort| ≤ 1e-4 · max|ort| over the whole output. Reduced resolutions run by
default; the 224 px variants are marked slow. A table (model, ops, max rel diff, pass) is printed
at the end of the run (tests/convert/conftest.py).
"""
from __future__ import annotations

import numpy as np
import pytest

# onnx and onnxruntime are test extras (the source format and the reference), not dependencies.
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import msv0  # noqa: E402
import onnxnets  # noqa: E402
from msv0.convert import convert  # noqa: E402

RTOL = 1e-4
ROWS: list[tuple[str, int, float, bool]] = []

SMALL = [
    ("mobilenet_v2@96", onnxnets.mobilenet_v2, dict(res=96)),
    ("mobilenet_v3_small@96", onnxnets.mobilenet_v3_small, dict(res=96)),
    ("resnet18@64", onnxnets.resnet18, dict(res=64)),
    ("squeezenet1_1@64", onnxnets.squeezenet1_1, dict(res=64)),
    ("shufflenet_v2@64", onnxnets.shufflenet_v2, dict(res=64)),
    ("efficientnet_b0@96", onnxnets.efficientnet_b0, dict(res=96)),
    ("transformer_encoder", onnxnets.transformer_encoder, dict()),
]
FULL = [(name.split("@")[0] + "@224", fn, dict(res=224)) for name, fn, kw in SMALL if "res" in kw] + [
    ("transformer_encoder_big", onnxnets.transformer_encoder, dict(seq=128, d=256, heads=8, ff=1024, layers=4))]


def _compare(name, build, kw):
    m = build(**kw)
    onnx.checker.check_model(m)
    data = m.SerializeToString()
    x = np.random.default_rng(0).standard_normal([d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim])
    x = x.astype(np.float32)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    model = msv0.load(convert(data))
    feed = x.transpose(0, 2, 3, 1) if x.ndim == 4 else x
    got = next(iter(msv0.Session(model).run({"input": feed}).values()))
    got = got.transpose(0, 3, 1, 2) if got.ndim == 4 else got
    assert got.shape == want.shape
    rel = float(np.max(np.abs(got.astype(np.float64) - want)) / np.max(np.abs(want)))
    ok = rel <= RTOL
    ROWS.append((name, len(model.nodes), rel, ok))
    assert ok, f"{name}: max|diff| / max|ref| = {rel:.3g} > {RTOL}"


@pytest.mark.parametrize("name,build,kw", SMALL, ids=[s[0] for s in SMALL])
def test_model_matches_onnxruntime(name, build, kw):
    _compare(name, build, kw)


@pytest.mark.slow
@pytest.mark.parametrize("name,build,kw", FULL, ids=[s[0] for s in FULL])
def test_full_size_model_matches_onnxruntime(name, build, kw):
    _compare(name, build, kw)


def convert_report() -> str:
    if not ROWS:
        return ""
    lines = ["", f"{'model':28s} {'v0 ops':>6s}  {'max rel diff':>12s}  pass"]
    lines += [f"{n:28s} {k:6d}  {r:12.3g}  {'yes' if ok else 'NO'}" for n, k, r, ok in ROWS]
    return "\n".join(lines)

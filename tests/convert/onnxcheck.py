"""Shared by the converter tests: build ONNX graphs, convert, run with msv0 and onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest

import msv0
from msv0.convert import convert

# The IR version of the test graphs: the newest that onnxruntime 1.23, the last release for
# Python 3.10, reads (onnx's default is newer).
IR_VERSION = 10


def run_msv0(model_bytes, feeds: dict[str, np.ndarray], keep_nchw=False, **kw) -> dict[str, np.ndarray]:
    """Convert and run; 4-D feeds go in NHWC and 4-D results come back NCHW, as ONNX has them."""
    data = convert(model_bytes, keep_nchw_input=keep_nchw, **kw)
    model = msv0.load(data)
    sess = msv0.Session(model)
    ins = {k: (v.transpose(0, 2, 3, 1) if v.ndim == 4 and not keep_nchw else v) for k, v in feeds.items()}
    out = sess.run(ins)
    return {k: (v.transpose(0, 3, 1, 2) if v.ndim == 4 else v) for k, v in out.items()}


def run_ort(model_bytes, feeds):
    ort = pytest.importorskip("onnxruntime")
    s = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def run_reference(model_bytes, feeds):
    """ONNX's own NumPy evaluator: exact integer arithmetic on every CPU, where ONNX Runtime's u8s8
    kernels on AVX2 without VNNI saturate int16 pair sums (vpmaddubsw)."""
    from onnx.reference import ReferenceEvaluator
    s = ReferenceEvaluator(model_bytes)
    return dict(zip(s.output_names, s.run(None, feeds)))


def check(model, feeds, rtol=1e-4, atol=1e-5, **kw):
    data = model.SerializeToString()
    want = run_ort(data, feeds)
    got = run_msv0(data, feeds, **kw)
    assert set(got) == set(want)
    for k in want:
        assert got[k].shape == want[k].shape, k
        np.testing.assert_allclose(got[k].astype(np.float64), want[k].astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=k)

"""Ops msv0 rejects on purpose name their reason in UnsupportedOpError."""
import msv0
import numpy as np
import pytest
from msv0.registry import OPS, REJECTED
from oprun import run_op


@pytest.mark.parametrize("op,kind", [("ApplyMomentum", "training only"), ("PoolingGrad", "training only"),
                                     ("SmoothL1Loss", "training only"), ("FakeQuantWithMinMaxVars", "converter-internal"),
                                     ("OnnxInt8Quantize", "converter-internal"), ("AddFold", "converter-internal"),
                                     ("MakeTuple", "graph plumbing"), ("NetOutput", "graph plumbing"),
                                     ("Custom", "graph plumbing")])
def test_rejected_op_names_its_reason(op, kind):
    with pytest.raises(msv0.UnsupportedOpError, match=kind) as e:
        run_op(op, [np.zeros((2,), np.float32)])
    assert e.value.nodes[0][1] == op


def test_rejected_ops_are_not_registered():
    assert REJECTED and not set(REJECTED) & set(OPS)
    for reason in REJECTED.values():
        assert reason.split(":")[0] in ("training only", "converter-internal quantization op", "graph plumbing",
                                        "under-specified")


@pytest.mark.parametrize("name", ["Min", "Broadcast", "Scatter", "Constant", "ToFormat", "EmbeddingLookupSparse",
                                  "Proposal"])
def test_rejected(name):
    with pytest.raises(msv0.UnsupportedOpError):
        run_op(name, [np.zeros(2, np.float32)])

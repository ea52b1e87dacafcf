"""Malformed ONNX models: every failure is an msv0.Error, naming the node where there is one."""
import subprocess
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the converter's ONNX frontend needs the convert extra")
from onnx import TensorProto, helper  # noqa: E402

import msv0  # noqa: E402
from msv0 import zoo  # noqa: E402
from msv0.convert import convert  # noqa: E402
from child_python import PYTHON  # noqa: E402


def _outcome(data: bytes) -> str:
    try:
        convert(data)
        return "ok"
    except msv0.Error as e:
        return type(e).__name__


@pytest.fixture(scope="module")
def tiny_onnx() -> bytes:
    return zoo.to_onnx("mobilenet_tiny", resolution=32).SerializeToString()


def test_truncated_models(tiny_onnx):
    for n in np.linspace(1, len(tiny_onnx) - 1, 40).astype(int):
        assert _outcome(tiny_onnx[:n]) in ("ok", "ModelError", "UnsupportedOpError")


def test_bit_flips(tiny_onnx):
    rng = np.random.default_rng(0)
    for _ in range(60):
        data = bytearray(tiny_onnx)
        bit = int(rng.integers(0, len(data) * 8))
        data[bit // 8] ^= 1 << (bit % 8)
        assert _outcome(bytes(data)) in ("ok", "ModelError", "UnsupportedOpError")


def _conv_model(**attrs) -> bytes:
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], np.ones(108, np.float32))
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="the_conv", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


@pytest.mark.parametrize("attrs", [{"group": 1 << 40}, {"strides": [1 << 33, 1]}, {"pads": [-3, 0, 0, 0]},
                                   {"kernel_shape": ["a", "b"]}, {"dilations": [0, 0]}])
def test_bad_attributes_name_the_node(attrs):
    with pytest.raises(msv0.Error, match="the_conv"):
        convert(_conv_model(**attrs))


CONVERT_FINDINGS = sorted((Path(__file__).parents[1] / "fuzz" / "findings").glob("*.onnx"))


@pytest.mark.parametrize("path", CONVERT_FINDINGS, ids=lambda p: p.stem)
def test_fuzz_findings_convert_or_raise(path):
    """Files the converter fuzzer crashed the process with or hung on (tests/fuzz/README.md),
    converted in a child process so that a crash fails the test instead of killing the runner.
    The hang: onnx's shape inference spent 40 s on an 835-byte file; it now gives up after
    INFER_SECONDS (5 s)."""
    code = ("import sys, msv0\nfrom msv0.convert import convert\n"
            "try:\n    convert(open(sys.argv[1], 'rb').read())\nexcept msv0.Error:\n    pass\n")
    proc = subprocess.run([*PYTHON, "-c", code, str(path)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr[-2000:]

"""Whole networks against ONNX Runtime on the equivalent ONNX graph.

Each network (every layer type and stride of ResNet-18 / MobileNetV2, at reduced resolution in
the fast set) is written twice, by msv0.builder (zoo) and by the independent tests/raw_writer,
loaded from a path and from bytes, and run with 1 and 2 threads. Tolerance: float32 sums of up
to 4608 products (3x3x512) in a different order than ORT's, through ~50 layers, so an absolute
error relative to the output's largest magnitude: max|diff| <= 1e-4 * max|ref|.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import msv0
import raw_writer
from msv0 import zoo

# onnxruntime is a test extra (the reference outputs), not a dependency of msv0: without it
# these tests cannot compute what to compare against, so they skip rather than fail.
ort = pytest.importorskip("onnxruntime")

FAST = {
    "mobilenet_tiny": dict(resolution=64),
    "resnet18_112": dict(resolution=112),
    "mobilenet_v2_96": dict(resolution=96),
}
SLOW = {
    "resnet18_224": dict(resolution=224),
    "mobilenet_v2_224": dict(resolution=224),
    "resnet50_224": dict(resolution=224),
}


@functools.lru_cache(maxsize=None)
def case(key: str):
    """(net, NHWC input, ORT reference output) for a case key."""
    kwargs = {**FAST, **SLOW}[key]
    net = zoo.NETS[key.rsplit("_", 1)[0] if key[-1].isdigit() else key](**kwargs)
    x = np.random.default_rng(1).standard_normal(net.input_shape).astype(np.float32)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(net.to_onnx().SerializeToString(), opts, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {net.input_name: np.ascontiguousarray(x.transpose(0, 3, 1, 2))})[0]
    return net, x, ref


@functools.lru_cache(maxsize=None)
def model_bytes(key: str, writer: str) -> bytes:
    net = case(key)[0]
    return net.to_ms() if writer == "zoo" else raw_writer.write(raw_writer.from_net(net))


def check(key: str, writer: str, source: str, threads: int, tmp_path) -> None:
    net, x, ref = case(key)
    data = model_bytes(key, writer)
    if source == "path":
        path = tmp_path / f"{key}.ms"
        path.write_bytes(data)
        model = msv0.load(path)
    else:
        model = msv0.load(data)
    assert model.inputs[0].shape == net.input_shape
    session = msv0.Session(model, num_threads=threads)
    out = session.run({net.input_name: x})
    assert list(out) == [net.output_name]
    y = out[net.output_name]
    assert y.shape == ref.shape and y.dtype == np.float32
    err = float(np.abs(y - ref).max())
    assert err <= 1e-4 * float(np.abs(ref).max()), f"max|diff| {err} vs max|ref| {np.abs(ref).max()}"


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("source", ["path", "bytes"])
@pytest.mark.parametrize("writer", ["zoo", "raw"])
@pytest.mark.parametrize("key", list(FAST))
def test_network_matches_onnxruntime(key, writer, source, threads, tmp_path):
    check(key, writer, source, threads, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("writer", ["zoo", "raw"])
@pytest.mark.parametrize("key", list(SLOW))
def test_full_resolution_network_matches_onnxruntime(key, writer, threads, tmp_path):
    check(key, writer, "bytes", threads, tmp_path)


@pytest.mark.parametrize("key", list(FAST))
def test_both_writers_store_the_same_network(key):
    """The two writers differ in bytes but must describe the same graph and weights."""
    a, b = (msv0.load(model_bytes(key, w)) for w in ("zoo", "raw"))
    assert [n.op for n in a.nodes] == [n.op for n in b.nodes]
    for na, nb in zip(a.nodes, b.nodes):  # tensor order differs; compare node by node
        assert len(na.inputs) == len(nb.inputs)
        for ta, tb in zip((a.tensors[k] for k in na.inputs), (b.tensors[k] for k in nb.inputs)):
            assert ta.is_const == tb.is_const
            if ta.is_const:
                np.testing.assert_array_equal(ta.data, tb.data)


def test_repeated_runs_are_identical():
    net, x, _ = case("mobilenet_tiny")
    session = msv0.Session(model_bytes("mobilenet_tiny", "zoo"), num_threads=2)
    first = session.run([x])[net.output_name]
    for _ in range(3):
        np.testing.assert_array_equal(session.run([x])[net.output_name], first)

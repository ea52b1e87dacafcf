"""Whole-model latency, msv0 vs ONNX Runtime and LiteRT, on the zoo networks (random weights,
batch 1), saved for bench/track.py.

    python -m pytest bench/bench_models.py --benchmark-enable [-k resnet50]

ONNX Runtime runs the equivalent ONNX graph with intra_op_num_threads = N, inter_op 1,
sequential execution; LiteRT (XNNPACK) the .tflite twin of bench/zoo_models.py. Each
model+threads pair is its own benchmark group; at the end the median ratio of msv0 to each peer
is printed. The engines run one after another, a second's pause before each; for a table
measured in alternating blocks, with OpenVINO too, run bench/zoo_models.py.
"""
from __future__ import annotations

import functools
import time

import numpy as np
import pytest

import msv0
from msv0 import zoo
from zoo_models import litert_run, tflite_twin

ort = pytest.importorskip("onnxruntime")

MODELS = ["mobilenet_v2", "resnet18", "resnet50"]
THREADS = [1, 2]
MEDIANS: dict[tuple[str, int], dict[str, float]] = {}


@functools.lru_cache(maxsize=None)
def network(name: str):
    net = zoo.NETS[name]()
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    return net.to_ms(), net.to_onnx().SerializeToString(), tflite_twin(net), x


def runner(engine: str, name: str, threads: int):
    ms, onnx_bytes, tflite, x = network(name)
    if engine == "msv0":
        session = msv0.Session(ms, num_threads=threads)
        feeds = {"input": x}
        return lambda: session.run(feeds)
    if engine == "litert":
        pytest.importorskip("ai_edge_litert.interpreter")
        return litert_run(tflite, threads, x)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])
    feeds = {"input": np.ascontiguousarray(x.transpose(0, 3, 1, 2))}
    return lambda: sess.run(None, feeds)


@pytest.mark.parametrize("engine", ["msv0", "onnxruntime", "litert"])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("name", MODELS)
def test_model_latency(benchmark, name, threads, engine):
    run = runner(engine, name, threads)
    time.sleep(1.0)  # the last engine's spinning workers would take this one's cores
    benchmark.group = f"{name} {threads}t"
    benchmark.extra_info.update(model=name, threads=threads, engine=engine, isa=msv0.isa())
    benchmark.pedantic(run, warmup_rounds=3, rounds=20 if name == "resnet50" else 50, iterations=1)
    if benchmark.stats is not None:  # None under --benchmark-disable
        MEDIANS.setdefault((name, threads), {})[engine] = benchmark.stats.stats.median


def pytest_terminal_summary(terminalreporter):
    """Print msv0's median ratio to each peer (called by bench/conftest.py's hook)."""
    rows = [(k, v) for k, v in sorted(MEDIANS.items()) if "msv0" in v and len(v) > 1]
    if not rows:
        return
    terminalreporter.section("msv0 / peer (median latency)")
    for (name, threads), v in rows:
        peers = "  ".join(f"{e} {t * 1e3:8.2f} ms ({v['msv0'] / t:.3f})" for e, t in v.items() if e != "msv0")
        terminalreporter.write_line(f"{name:14s} {threads}t  msv0 {v['msv0'] * 1e3:8.2f} ms  {peers}")

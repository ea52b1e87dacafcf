"""Hostile models and feeds: each must load+run or raise the right msv0.Error, never crash.

Every probe runs in a child process (this file run as a script), so a segfault or abort fails
the test instead of killing the runner. The child loads each file, builds a Session, runs it on
well-formed random feeds (or on the feeds given), and prints one line per case: the outcome
(`ok` or the exception class) and the first line of the message. The child's address space is
capped, so a bogus huge allocation surfaces as an error rather than exhausting the machine.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

MSV0_ERRORS = {"ModelError", "UnsupportedOpError", "InputError"}
CHILD_MEMORY = 4 << 30


# ---- the child ------------------------------------------------------------------------------
def _child(spec_path: str) -> None:
    import resource

    if not os.environ.get("MSV0_SANITIZED"):  # ASan reserves terabytes of shadow address space
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
    import msv0

    for case in json.loads(Path(spec_path).read_text()):
        print(f"start {case['name']}", flush=True)
        started = time.monotonic()
        try:
            model = msv0.load(Path(case["model"]).read_bytes() if case.get("as_bytes") else case["model"])
            limits = {"memory_limit": case["memory_limit"]} if "memory_limit" in case else {}
            session = msv0.Session(model, num_threads=case.get("threads", 1), **limits)
            if case.get("feeds"):
                with np.load(case["feeds"]) as f:
                    arrays = {k: f[k] for k in f.files}
                feeds = [arrays[f"arr_{i}"] for i in range(len(arrays))] if case.get("positional") else arrays
            else:
                if any(np.prod(t.shape, dtype=np.int64) > 1 << 24 for t in model.inputs):
                    print(f"result {case['name']} ok (inputs too large to feed)", flush=True)
                    continue
                rng = np.random.default_rng(0)
                feeds = {t.name: (rng.standard_normal(t.shape) * 3).astype(t.dtype) for t in model.inputs}
            session.run(feeds)
            outcome = "ok"
        except msv0.Error as e:
            outcome = f"{type(e).__name__} {str(e).splitlines()[0] if str(e) else ''}"
        except Exception as e:  # noqa: BLE001  (reported to the parent as a wrong exception type)
            outcome = f"OTHER:{type(e).__name__} {e}"
        print(f"seconds {case['name']} {time.monotonic() - started:.3f}", flush=True)
        print(f"result {case['name']} {outcome}", flush=True)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "child":
    _child(sys.argv[2])
    sys.exit(0)


# ---- the parent -----------------------------------------------------------------------------
import raw_writer as rw  # noqa: E402  (the child does not need it)
from child_python import PYTHON, TIME_SCALE  # noqa: E402


def probe(tmp_path: Path, cases: list[dict], max_seconds: float | None = None) -> dict[str, str]:
    """Run the cases in one child process; returns {case name: outcome}. A crash fails the test,
    and so does a case that takes longer than max_seconds."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(cases))
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.run([*PYTHON, __file__, "child", str(spec)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=Path(__file__).parent)
    results, started = {}, None
    for line in proc.stdout.splitlines():
        kind, _, rest = line.partition(" ")
        name, _, outcome = rest.partition(" ")
        if kind == "start":
            started = name
        elif kind == "result":
            results[name] = outcome
        elif kind == "seconds" and max_seconds is not None:
            assert float(outcome) <= max_seconds * TIME_SCALE, f"case {name} took {outcome} s"
    if proc.returncode != 0:
        pytest.fail(f"child exited with {proc.returncode} during case {started!r}\n{proc.stderr[-3000:]}")
    missing = [c["name"] for c in cases if c["name"] not in results]
    assert not missing, f"no result for {missing}"
    return results


def model_cases(tmp_path: Path, models: dict[str, bytes], **extra) -> list[dict]:
    cases = []
    for name, data in models.items():
        path = tmp_path / f"{name}.ms"
        path.write_bytes(data)
        cases.append({"name": name, "model": str(path), **extra})
    return cases


def assert_msv0_outcomes(results: dict[str, str], allowed=("ok", *MSV0_ERRORS)) -> None:
    bad = {k: v for k, v in results.items() if v.split(" ", 1)[0] not in allowed}
    assert not bad, f"wrong outcomes (allowed {allowed}): {bad}"


def small_model() -> rw.RawModel:
    """input [1, 8] -> FullConnection(4) -> Add(const) -> output: runs with today's ops."""
    rng = np.random.default_rng(0)
    m = rw.RawModel(name="small")
    x = m.input("x", [1, 8])
    y = m.node("FullConnection", [x, m.const("w", rng.standard_normal((4, 8))), m.const("b", np.ones(4))],
               name="fc", hasBias=True, activationType=1)
    z = m.node("Add", [y, m.const("c", np.arange(4))], name="add")
    m.outputs.append(z)
    return m


SMALL = rw.write(small_model())


def tiny_mobilenet() -> bytes:
    from msv0 import zoo

    return zoo.mobilenet_tiny(resolution=32)


# ---- the file as a whole ---------------------------------------------------------------------
def test_the_base_models_run(tmp_path):
    results = probe(tmp_path, model_cases(tmp_path, {"small": SMALL, "tiny": tiny_mobilenet()}))
    assert results["small"] == "ok"
    assert_msv0_outcomes(results)


def test_empty_and_garbage_files(tmp_path):
    rng = np.random.default_rng(0)
    garbage = rng.integers(0, 256, 1024, dtype=np.uint8).tobytes()
    models = {
        "empty": b"",
        "garbage": garbage,
        "garbage_with_identifier": garbage[:4] + b"MSL1" + garbage[8:],
        "zeros": bytes(64),
        "huge_root_offset": b"\xff\xff\xff\x7fMSL1" + bytes(56),
    }
    results = probe(tmp_path, model_cases(tmp_path, models) + model_cases(tmp_path, models, as_bytes=True))
    assert_msv0_outcomes(results, ("ModelError",))


@pytest.mark.parametrize("base", ["small", "tiny"])
def test_truncated_files(tmp_path, base):
    data = SMALL if base == "small" else tiny_mobilenet()
    lengths = sorted({1, 3, 4, 7, 8, 12, 16, 31, 64, len(data) // 4, len(data) // 2, len(data) - 64,
                      len(data) - 8, len(data) - 1})
    results = probe(tmp_path, model_cases(tmp_path, {f"{base}_{n}": data[:n] for n in lengths}))
    # Cutting only the alignment padding at the end can leave a valid buffer; anything shorter
    # than the tables cannot be.
    assert_msv0_outcomes({k: v for k, v in results.items() if int(k.rsplit("_", 1)[1]) < 64}, ("ModelError",))
    assert_msv0_outcomes(results)


@pytest.mark.parametrize("batch", range(4))
def test_random_bit_flips_small(tmp_path, batch):
    flips = {}
    for seed in range(batch * 50, batch * 50 + 50):
        rng = np.random.default_rng(seed)
        data = bytearray(SMALL)
        for _ in range(1 + seed % 3):  # one, two or three flipped bits
            bit = int(rng.integers(0, len(data) * 8))
            data[bit // 8] ^= 1 << (bit % 8)
        flips[f"flip{seed}"] = bytes(data)
    assert_msv0_outcomes(probe(tmp_path, model_cases(tmp_path, flips)))


def test_random_bit_flips_mobilenet(tmp_path):
    base = tiny_mobilenet()
    # Most bytes are weights. A FlatBuffer is built back to front, so the root table and the
    # last-written vectors sit at the start and the first-written tables at the end: aim a
    # third of the flips at each end (2 KiB) and the rest anywhere.
    flips = {}
    for seed in range(45):
        rng = np.random.default_rng(1000 + seed)
        data = bytearray(base)
        span = len(data) if seed % 3 == 2 else min(len(data), 2048)
        start = len(data) - span if seed % 3 == 1 else 0
        bit = start * 8 + int(rng.integers(0, span * 8))
        data[bit // 8] ^= 1 << (bit % 8)
        flips[f"mflip{seed}"] = bytes(data)
    assert_msv0_outcomes(probe(tmp_path, model_cases(tmp_path, flips)))


# ---- structural errors the loader or the planner must name -----------------------------------
def broken(mutate) -> bytes:
    m = small_model()
    mutate(m)
    return rw.write(m)


def _subgraph(m: rw.RawModel) -> rw.RawSubGraph:
    return rw.RawSubGraph("main", list(m.inputs), list(m.outputs), list(range(len(m.nodes))),
                          list(range(len(m.tensors))))


BAD_INDEX = 1000


def _node_input(m):
    m.nodes[0].inputs[1] = BAD_INDEX


def _node_output(m):
    m.nodes[1].outputs[0] = BAD_INDEX


def _graph_input(m):
    m.inputs[0] = BAD_INDEX


def _graph_output(m):
    m.outputs[0] = BAD_INDEX


def _subgraph_node(m):
    m.subgraphs = [_subgraph(m)]
    m.subgraphs[0].nodes.append(BAD_INDEX)


def _subgraph_tensor(m):
    m.subgraphs = [_subgraph(m)]
    m.subgraphs[0].tensors.append(BAD_INDEX)


def _subgraph_input(m):
    m.subgraphs = [_subgraph(m)]
    m.subgraphs[0].inputs = [BAD_INDEX]


def _no_subgraphs(m):
    m.subgraphs = []


def _short_const(m):
    t = m.tensors[m.nodes[0].inputs[1]]
    t.data = t.data[:-4]


def _long_const(m):
    t = m.tensors[m.nodes[0].inputs[1]]
    t.data = t.data + bytes(4)


def _negative_const_dims(m):
    m.tensors[m.nodes[0].inputs[1]].dims = [-4, -8]


def _negative_input_dims(m):
    m.tensors[m.inputs[0]].dims = [1, -8]


def _huge_input_dims(m):
    m.tensors[m.inputs[0]].dims = [1 << 30, 1 << 30]


def _wrapping_input_dims(m):
    """Dims whose int64 product wraps: checked after the multiply, it passed as 0 elements."""
    m.tensors[m.inputs[0]].dims = [1 << 18, 1 << 18, (1 << 31) - 1, 0]


def _unknown_type_id(m):
    m.tensors[m.inputs[0]].type_id = 99


def _union_type(value):
    def mutate(m):
        m.nodes[0].primitive_type = value
    return mutate


def _dangling_input(m):
    """A node input that is neither constant, a graph input, nor produced earlier."""
    dangling = m.tensor(rw.RawTensor("dangling", [1, 4]))
    m.nodes[1].inputs[1] = dangling


def _use_before_definition(m):
    m.nodes.reverse()


def _twice_written(m):
    m.nodes[1].outputs[0] = m.nodes[0].outputs[0]


def _folded_into_constant(m):
    """A node on constants writing a constant tensor: its folded value would replace the data."""
    c = m.nodes[1].inputs[1]
    m.nodes.insert(0, rw.RawNode("fold", "Add", [c, c], [c]))


def _output_never_produced(m):
    m.outputs[0] = m.tensor(rw.RawTensor("nowhere", [1, 4]))


def _wrong_input_count(m):
    m.nodes[1].inputs.append(m.nodes[1].inputs[0])


def _fc_k_mismatch(m):
    t = m.tensors[m.nodes[0].inputs[1]]
    t.dims, t.data = [4, 7], t.data[: 4 * 7 * 4]


def _while(cond, body):
    def mutate(m):
        out = m.tensor(rw.RawTensor("loop_out", [1, 4]))
        m.nodes.append(rw.RawNode("loop", "While", [m.outputs[0]], [out],
                                  {"condSubgraphIndex": cond, "bodySubgraphIndex": body}))
        m.outputs[0] = out
        m.subgraphs = [_subgraph(m)]
    return mutate


MODEL_ERRORS = {
    "node_input_out_of_range": _node_input,
    "node_output_out_of_range": _node_output,
    "graph_input_out_of_range": _graph_input,
    "graph_output_out_of_range": _graph_output,
    "subgraph_node_out_of_range": _subgraph_node,
    "subgraph_tensor_out_of_range": _subgraph_tensor,
    "subgraph_input_out_of_range": _subgraph_input,
    "empty_subgraph_list": _no_subgraphs,
    "const_data_short": _short_const,
    "const_data_long": _long_const,
    "negative_const_dims": _negative_const_dims,
    "negative_input_dims": _negative_input_dims,
    "huge_input_dims": _huge_input_dims,
    "wrapping_input_dims": _wrapping_input_dims,
    "unknown_type_id": _unknown_type_id,
    "union_type_204": _union_type(204),
    "union_type_255": _union_type(255),
    "union_type_none": _union_type(0),
    "dangling_node_input": _dangling_input,
    "use_before_definition": _use_before_definition,
    "output_written_twice": _twice_written,
    "folded_into_constant": _folded_into_constant,
    "graph_output_never_produced": _output_never_produced,
    "wrong_input_count": _wrong_input_count,
    "fc_weight_mismatch": _fc_k_mismatch,
    "while_missing_body": _while(0, 5),
    "while_missing_cond": _while(7, 0),
    "while_negative_index": _while(-1, 0),
}


def test_structural_errors_are_model_errors(tmp_path):
    models = {name: broken(mutate) for name, mutate in MODEL_ERRORS.items()}
    results = probe(tmp_path, model_cases(tmp_path, models))
    bad = {k: v for k, v in results.items() if not v.startswith("ModelError")}
    assert not bad, f"expected ModelError: {bad}"


def test_unsupported_ops_are_reported_together(tmp_path):
    def mutate(m):
        out = m.tensor(rw.RawTensor("adam", [1, 4]))
        m.nodes.append(rw.RawNode("opt", "Adam", [m.outputs[0]], [out]))
        out2 = m.tensor(rw.RawTensor("sgd", [1, 4]))
        m.nodes.append(rw.RawNode("opt2", "Sgd", [out], [out2]))
        m.outputs[0] = out2

    results = probe(tmp_path, model_cases(tmp_path, {"training_ops": broken(mutate)}))
    assert results["training_ops"].startswith("UnsupportedOpError 2 node(s)")


# ---- feeds -----------------------------------------------------------------------------------
FEEDS = {
    "wrong_dtype": ({"x": np.zeros((1, 8), np.float64)}, False),
    "int_dtype": ({"x": np.zeros((1, 8), np.int32)}, False),
    "wrong_rank": ({"x": np.zeros((8,), np.float32)}, False),
    "wrong_size": ({"x": np.zeros((1, 9), np.float32)}, False),
    "missing": ({}, False),
    "extra": ({"x": np.zeros((1, 8), np.float32), "y": np.zeros(1, np.float32)}, False),
    "wrong_name": ({"X": np.zeros((1, 8), np.float32)}, False),
    "positional_too_many": ({"arr_0": np.zeros((1, 8), np.float32), "arr_1": np.zeros(1, np.float32)}, True),
    "positional_wrong_shape": ({"arr_0": np.zeros((2, 3, 4), np.float32)}, True),
}


def test_bad_feeds_are_input_errors(tmp_path):
    model = tmp_path / "small.ms"
    model.write_bytes(SMALL)
    cases = []
    for name, (arrays, positional) in FEEDS.items():
        path = tmp_path / f"{name}.npz"
        np.savez(path, **arrays)
        cases.append({"name": name, "model": str(model), "feeds": str(path), "positional": positional})
    results = probe(tmp_path, cases)
    bad = {k: v for k, v in results.items() if not v.startswith("InputError")}
    assert not bad, f"expected InputError: {bad}"


# ---- what the fuzzers found (tests/fuzz/findings: crashes, hangs, memory blow-ups) -----------
FINDINGS = sorted((Path(__file__).parent / "fuzz" / "findings").glob("*.ms"))


def test_fuzz_findings(tmp_path):
    """Each file once crashed, hung or exhausted memory (tests/fuzz/README.md): now each runs or
    raises an msv0.Error within seconds, under the fuzzer's memory_limit."""
    assert FINDINGS
    cases = [{"name": p.stem, "model": str(p), "memory_limit": 256 << 20} for p in FINDINGS]
    assert_msv0_outcomes(probe(tmp_path, cases, max_seconds=5.0), allowed=("ok", *MSV0_ERRORS, "ResourceError"))


def test_transposed_conv_checks_its_tap_tables_against_the_limit(tmp_path):
    """CI's fuzzer: a 768-byte DeDepthwiseConv2D with strideH 452984834 built 1.7 G-entry tap
    tables (13 GB RSS) before its output was checked against the memory_limit."""
    case = {"name": "d", "model": str(Path(__file__).parent / "fuzz" / "findings" / "oom-9a1346d224e7.ms"),
            "memory_limit": 256 << 20}
    outcome = probe(tmp_path, [case], max_seconds=5.0)["d"]
    assert outcome.startswith("ResourceError") and "tap table" in outcome and "memory_limit" in outcome, outcome


def test_constant_of_shape_checks_the_limit_before_filling(tmp_path):
    """The fuzzer's 528-byte ConstantOfShape to (3, 738197505, 2) float32 (16.5 GiB) was filled
    before the Session's memory_limit was checked: RSS past 4 GB where nothing caps it."""
    case = {"name": "c", "model": str(Path(__file__).parent / "fuzz" / "findings" / "oom-66d3c5c86e76.ms"),
            "memory_limit": 256 << 20}
    outcome = probe(tmp_path, [case], max_seconds=5.0)["c"]
    assert outcome.startswith("ResourceError") and "memory_limit" in outcome, outcome

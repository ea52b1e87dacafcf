"""The public contract of design.md: load, TensorInfo, nodes/tensors views, Session, feeds,
errors, supported_ops, the CLI, and the README's supported-ops table."""
from __future__ import annotations

import re
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

import msv0
import raw_writer as rw
import smaps
from child_python import PYTHON
from msv0 import cli
from msv0.builder import Builder

ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(0)
W = RNG.standard_normal((4, 8)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)
C = np.arange(4, dtype=np.float32)


def fc_model(**fc_attrs) -> bytes:
    """x [1, 8] -> FullConnection(W, B) -> y; y + C -> z. Outputs z then y."""
    b = Builder("api")
    x = b.input("x", (1, 8))
    y = b.node("FullConnection", [x, b.const("w", W), b.const("b", B, quant=[{"scale": 0.5, "zeroPoint": 3}])],
               outputs=[b.tensor("y")], name="fc", **fc_attrs)
    z = b.node("Add", [y, b.const("c", C)], outputs=[b.tensor("z")], name="add")
    b.output(z, y)
    return b.finish()


MODEL = fc_model(hasBias=True)


def reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = x.reshape(-1, 8).astype(np.float64) @ W.T + B
    return (y + C).astype(np.float32), y.astype(np.float32)


# ---- load -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["str", "path", "bytes", "bytearray", "memoryview"])
def test_load_sources(kind, tmp_path):
    path = tmp_path / "m.ms"
    path.write_bytes(MODEL)
    source = {"str": str(path), "path": path, "bytes": MODEL, "bytearray": bytearray(MODEL),
              "memoryview": memoryview(MODEL)}[kind]
    m = msv0.load(source)
    assert [t.name for t in m.inputs] == ["x"]
    assert [t.name for t in m.outputs] == ["z", "y"]
    assert len(m.nodes) == 2


def test_tensor_info_fields():
    m = msv0.load(MODEL)
    (info,) = m.inputs
    assert isinstance(info, msv0.TensorInfo)
    assert info.name == "x" and info.shape == (1, 8) and info.dtype == np.float32 and info.format == 1
    assert info._fields == ("name", "shape", "dtype", "format")
    assert m.outputs[0].dtype == np.dtype(np.float32)


def test_node_attrs_hold_every_schema_field_with_defaults():
    m = msv0.load(fc_model())  # no attribute written at all
    fc, add = m.nodes
    assert fc.op == "FullConnection" and fc.name == "fc"
    assert dict(fc.attrs) == {"hasBias": False, "axis": 0, "useAxis": False, "activationType": 0}
    assert fc.attrs.useAxis is False and fc.attrs["axis"] == 0
    assert dict(add.attrs) == {"activationType": 0}
    with pytest.raises((AttributeError, TypeError)):
        fc.attrs.axis = 3
    with pytest.raises(TypeError):
        fc.attrs["axis"] = 3


def test_node_attrs_read_stored_values():
    b = Builder()
    x = b.input("x", (1, 4, 4, 2))
    b.output(b.node("Pooling", [x], poolingMode=1, windowH=2, windowW=3, strideH=2, strideW=1, padMode=1,
                    roundMode=1, global_=True, activationType=3))
    (node,) = msv0.load(b.finish()).nodes
    a = node.attrs
    assert (a.poolingMode, a.windowH, a.windowW, a.strideH, a.strideW, a.padMode, a.roundMode, a.activationType) == \
        (1, 2, 3, 2, 1, 1, 1, 3)
    assert a.global_ is True and a.padUp == 0 and a.avgMode == 0


def test_node_inputs_outputs_are_tensor_indices():
    m = msv0.load(MODEL)
    fc, add = m.nodes
    assert [m.tensors[i].name for i in fc.inputs] == ["x", "w", "b"]
    assert fc.outputs == (add.inputs[0],)


def test_tensor_quant_params():
    b = Builder()
    x = b.input("x", (1, 8))
    w = b.const("w", np.ones((2, 8), np.int8), quant=[{"scale": 0.25, "zeroPoint": -1, "inited": True},
                                                         {"scale": 0.5, "zeroPoint": 2, "varCorr": 0.9}])
    b.output(b.node("FullConnection", [x, w]))
    m = msv0.load(b.finish())
    q = m.tensors[w].quant
    assert len(q) == 2
    assert (q[0].scale, q[0].zeroPoint, q[0].inited) == (0.25, -1, True)
    assert (q[1].scale, q[1].zeroPoint, q[1].varCorr, q[1].inited) == (0.5, 2, pytest.approx(0.9), False)
    assert (q[0].numBits, q[0].narrowRange, q[0].meanCorr, q[0].dstDtype) == (8, True, 0.0, 32)
    assert next(t for t in msv0.load(MODEL).tensors if t.name == "b").quant[0].scale == 0.5
    assert m.tensors[x].quant == () and not m.tensors[x].quant
    # a sequence of records, made when read, and columns
    assert q == tuple(q) == (q[-2], q[-1]) and q[1:] == (q[1],) and q[::-1] == (q[1], q[0])
    assert type(q[0].zeroPoint) is int and type(q[0].inited) is bool and type(q[0].scale) is float
    with pytest.raises(IndexError):
        q[2]
    np.testing.assert_array_equal(q.column("zeroPoint"), [-1, 2])
    assert not q.column("scale").flags.writeable


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "path"])
def test_const_data_is_read_only(kind, tmp_path):
    path = tmp_path / "m.ms"
    path.write_bytes(MODEL)
    m = msv0.load({"bytes": MODEL, "bytearray": bytearray(MODEL), "path": path}[kind])
    w = m.tensors[1]
    assert w.is_const and w.name == "w"
    np.testing.assert_array_equal(w.data, W)
    assert not w.data.flags.writeable
    with pytest.raises(ValueError):
        w.data[0, 0] = 1.0
    assert not m.tensors[0].is_const and m.tensors[0].data is None  # a graph input has no data


def test_const_data_aliases_the_bytes():
    m = msv0.load(MODEL)
    assert np.shares_memory(m.tensors[1].data, np.frombuffer(MODEL, np.uint8))


def _mapped_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of path."""
    return sum(m.rss_kib for m in smaps.mappings() if m.path == str(path))


@pytest.mark.skipif(not smaps.SMAPS.exists(), reason="needs /proc/self/smaps")
def test_session_lets_packed_weights_file_pages_go(tmp_path):
    """A weight packed into a kernel leaves memory (the file stays mapped, its pages refill on a
    read): a 4 MiB FullConnection model is not resident twice; its data and runs are unchanged."""
    w = RNG.standard_normal((1024, 1024)).astype(np.float32)
    b = Builder("big")
    x = b.input("x", (1, 1024))
    b.output(b.node("FullConnection", [x, b.const("w", w)], outputs=[b.tensor("y")]))
    path = tmp_path / "big.ms"
    path.write_bytes(b.finish())
    m = msv0.load(path)
    assert _mapped_kib(path) < 64  # reading the tables mapped the weights around them; load lets them go
    assert np.array_equal(m.tensors[1].data, w) and _mapped_kib(path) >= 4096  # read in full
    s = msv0.Session(m)
    assert _mapped_kib(path) < 64
    xv = RNG.standard_normal((1, 1024)).astype(np.float32)
    np.testing.assert_allclose(s.run([xv])["y"], xv @ w.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(m.tensors[1].data, w)  # refilled from the file
    with pytest.raises(ValueError, match="not a view of this model"):
        m._core_model.release(np.zeros(8, np.uint8))


# ---- session --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["model", "path", "str", "bytes"])
def test_session_sources(kind, tmp_path):
    path = tmp_path / "m.ms"
    path.write_bytes(MODEL)
    source = {"model": msv0.load(MODEL), "path": path, "str": str(path), "bytes": MODEL}[kind]
    s = msv0.Session(source, num_threads=2)
    x = RNG.standard_normal((1, 8)).astype(np.float32)
    out = s.run({"x": x})
    assert list(out) == ["z", "y"]  # model output order
    z, y = reference(x)
    np.testing.assert_allclose(out["z"], z, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["y"], y, rtol=1e-5, atol=1e-5)
    assert s.inputs == msv0.load(MODEL).inputs and [o.name for o in s.outputs] == ["z", "y"]


def test_positional_feeds():
    s = msv0.Session(MODEL)
    x = RNG.standard_normal((1, 8)).astype(np.float32)
    np.testing.assert_array_equal(s.run([x])["z"], s.run({"x": x})["z"])
    np.testing.assert_array_equal(s.run((x,))["y"], s.run({"x": x})["y"])


def test_outputs_are_fresh_arrays():
    s = msv0.Session(MODEL)
    x = np.ones((1, 8), np.float32)
    first = s.run([x])
    keep = first["z"].copy()
    assert first["z"].flags.writeable
    first["z"][...] = 12345.0  # the caller owns it: writing must not disturb the session
    second = s.run([x])
    np.testing.assert_array_equal(second["z"], keep)
    assert not np.shares_memory(first["z"], second["z"])
    assert not np.shares_memory(second["z"], second["y"])
    third = s.run([2 * x])
    np.testing.assert_array_equal(second["z"], keep)  # an earlier result is not overwritten later
    assert not np.array_equal(third["z"], keep)


def test_feeds_are_not_modified():
    s = msv0.Session(MODEL)
    x = RNG.standard_normal((1, 8)).astype(np.float32)
    before = x.copy()
    s.run([x])
    np.testing.assert_array_equal(x, before)


def test_replanning_on_a_new_input_shape():
    s = msv0.Session(MODEL)
    for rows in (1, 3, 5, 1, 3):
        x = RNG.standard_normal((rows, 8)).astype(np.float32)
        out = s.run([x])
        z, y = reference(x)
        assert out["z"].shape == (rows, 4)
        np.testing.assert_allclose(out["z"], z, rtol=1e-5, atol=1e-5)


def test_non_contiguous_feed():
    s = msv0.Session(MODEL)
    x = RNG.standard_normal((8, 1)).astype(np.float32).T  # (1, 8), not C-contiguous
    np.testing.assert_allclose(s.run([x])["z"], reference(np.ascontiguousarray(x))[0], rtol=1e-5, atol=1e-5)


def test_feeds_like_the_last_run_skip_its_checks_only_when_they_match_exactly():
    """After a run, named feeds that are C-ordered arrays of the same dtype objects and shapes run
    the last plan without the feed checks (a streaming step's microseconds); anything else takes
    the checked path, which re-plans, copies strided feeds or raises as before."""
    s = msv0.Session(MODEL)
    x = RNG.standard_normal((1, 8)).astype(np.float32)
    want = reference(x)[0]
    for _ in range(2):
        np.testing.assert_allclose(s.run({"x": x})["z"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s.run({"x": np.asfortranarray(np.tile(x, (3, 1)))})["z"],
                               np.tile(want, (3, 1)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s.run({"x": x})["z"], want, rtol=1e-5, atol=1e-5)
    for bad in (x.astype(">f4"), x.astype(np.float64), x.reshape(8), [[0.0] * 8]):
        with pytest.raises(msv0.InputError):
            s.run({"x": bad})
    np.testing.assert_allclose(s.run({"x": [list(x[0])]})["z"], want, rtol=1e-5, atol=1e-5)  # float32 scalars
    with pytest.raises(msv0.InputError):
        s.run({"X": x})
    z, y = s.run({"x": x}).values()
    np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-5)
    assert not np.shares_memory(z, s.run({"x": x})["z"])


def test_input_errors():
    s = msv0.Session(MODEL)
    good = np.zeros((1, 8), np.float32)
    for feeds in ({"x": good.astype(np.float64)}, {"x": np.zeros((8,), np.float32)}, {},
                  {"x": good, "extra": good}, {"X": good}, [good, good], [], {"x": np.zeros((1, 7), np.float32)}):
        with pytest.raises(msv0.InputError):
            s.run(feeds)
    assert s.run([good])["z"].shape == (1, 4)  # still usable afterwards


def state_model(default) -> bytes:
    """y = x + h, with h an input whose tensor carries `default` (raw bytes or an array)."""
    b = Builder("state")
    x = b.input("x", (1, 4))
    h = b.input("h", (1, 4), default=None if isinstance(default, bytes) else default)
    if isinstance(default, bytes):
        b.graph.allTensors[h].data = np.frombuffer(default, np.uint8)
    b.output(b.node("Add", [x, h], outputs=[b.tensor("y")], name="add"))
    return b.finish()


def test_an_input_with_a_default_may_be_left_out_of_named_feeds():
    m = msv0.load(state_model(C.reshape(1, 4)))
    assert list(m.input_defaults) == ["h"] and not m.input_defaults["h"].flags.writeable
    assert not m.tensors[m.graph_inputs[1]].is_const  # a default, not a constant the plan folds
    s = msv0.Session(m)
    x = RNG.standard_normal((1, 4)).astype(np.float32)
    np.testing.assert_array_equal(s.run({"x": x})["y"], x + C)
    np.testing.assert_array_equal(s.run({"x": x, "h": 2 * x})["y"], 3 * x)
    for feeds in ([x], {"h": x}, {"x": x, "h": x, "g": x}):  # positional feeds name every input
        with pytest.raises(msv0.InputError):
            s.run(feeds)


@pytest.mark.parametrize("data", [b"\0" * 12, b"\0" * 20])
def test_an_input_default_of_the_wrong_size_is_a_model_error(data):
    with pytest.raises(msv0.ModelError, match="tensor 1 'h'"):
        msv0.load(state_model(data))


def test_unsupported_op_error_lists_every_node():
    m = rw.RawModel()
    x = m.input("x", [1, 4])
    y = m.node("Adam", [x], name="first")
    y = m.node("Abs", [y], name="fine")
    y = m.node("Sgd", [y], name="second")
    m.outputs.append(y)
    with pytest.raises(msv0.UnsupportedOpError) as e:
        msv0.Session(rw.write(m))
    assert [(name, op) for name, op, _ in e.value.nodes] == [("first", "Adam"), ("second", "Sgd")]
    assert "first" in str(e.value) and "second" in str(e.value)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", None])
def test_num_threads_validation(bad):
    with pytest.raises(msv0.InputError, match="num_threads"):
        msv0.Session(MODEL, num_threads=bad)


def test_zero_size_feed_is_an_input_error():
    """An empty batch used to reach the conv kernels' work split and kill the process (SIGFPE)."""
    from msv0 import zoo
    session = msv0.Session(zoo.mobilenet_tiny())
    with pytest.raises(msv0.InputError, match="zero-size"):
        session.run([np.zeros((0, 64, 64, 3), np.float32)])


def test_error_hierarchy():
    for cls in (msv0.ModelError, msv0.UnsupportedOpError, msv0.InputError):
        assert issubclass(cls, msv0.Error)
    with pytest.raises(msv0.ModelError):
        msv0.load(b"not a model")


def test_supported_ops():
    from msv0.fb.PrimitiveType import PrimitiveType

    ops = msv0.supported_ops()
    assert ops == sorted(ops) and len(set(ops)) == len(ops)
    assert {"FullConnection", "Add"} <= set(ops)
    assert all(isinstance(o, str) and hasattr(PrimitiveType, o) and o != "NONE" for o in ops)


# ---- README and CLI -------------------------------------------------------------------------
def test_readme_ops_table_is_current():
    """Regenerate with: python -m msv0 ops --update-readme README.md"""
    readme = (ROOT / "README.md").read_text()
    block = readme.split(cli.README_BEGIN, 1)[1].split(cli.README_END, 1)[0]
    assert block.strip() == cli.ops_markdown().strip()


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = next(line.strip() for line in ci.splitlines() if line.strip().startswith("python -m pytest"))
    assert command in readme


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "m.ms"
    path.write_bytes(MODEL)
    return path


def test_cli_info(model_path, capsys):
    assert cli.main(["info", str(model_path)]) == 0
    out = capsys.readouterr().out
    for word in ("FullConnection", "Add", "parameters: 40", "quantization", "[1, 8]"):
        assert word in out


def test_cli_run(model_path, tmp_path, capsys):
    x = RNG.standard_normal((1, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out_path = tmp_path / "out.npz"
    assert cli.main(["run", str(model_path), "--input", f"x={tmp_path / 'x.npy'}", "-o", str(out_path),
                     "--threads", "2"]) == 0
    with np.load(out_path) as f:
        np.testing.assert_allclose(f["z"], reference(x)[0], rtol=1e-5, atol=1e-5)
    np.savez(tmp_path / "feeds.npz", x=x)
    assert cli.main(["run", str(model_path), "--inputs", str(tmp_path / "feeds.npz")]) == 0
    assert cli.main(["run", str(model_path), "--random"]) == 0
    assert "z" in capsys.readouterr().out


def test_cli_bench(model_path, capsys):
    assert cli.main(["bench", str(model_path), "--threads", "1", "--warmup", "1", "--runs", "3"]) == 0
    out = capsys.readouterr().out
    assert "p50" in out
    assert re.search(r"cold start: load [0-9.]+ ms, Session [0-9.]+ ms, first run [0-9.]+ ms; peak RSS [0-9]+ MiB", out)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_cli_precision(model_path, capsys, precision):
    """--precision runs where the CPU has it, else fp32 with the Session's warning."""
    here = {"bf16": msv0._core.bf16_available(), "fp16": msv0._core.fp16_available()}[precision]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cli.main(["bench", str(model_path), "-t", "1", "--warmup", "1", "--runs", "2",
                         "--precision", precision]) == 0
        assert cli.main(["run", str(model_path), "--random", "--precision", precision]) == 0
    out = capsys.readouterr().out
    assert f"precision {precision if here else 'fp32'}" in out
    assert f"(1 thread(s), {precision if here else 'fp32'})" in out
    assert len([w for w in caught if f"precision={precision!r} needs" in str(w.message)]) == (0 if here else 2)


def test_cli_bench_against_onnxruntime(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    from msv0 import zoo

    net = zoo.mobilenet_tiny_net(resolution=32)
    (tmp_path / "t.ms").write_bytes(net.to_ms())
    (tmp_path / "t.onnx").write_bytes(net.to_onnx().SerializeToString())
    assert cli.main(["bench", str(tmp_path / "t.ms"), "--threads", "1", "--warmup", "1", "--runs", "2",
                     "--compare-onnx", str(tmp_path / "t.onnx")]) == 0
    assert "msv0 / onnxruntime" in capsys.readouterr().out


def test_cli_bench_batch_against_onnxruntime(tmp_path, capsys):
    """--batch 3: three samples per run for msv0 (the batch-1 file planned once more) and for an
    ONNX model with a dynamic batch; a peer whose batch is fixed is refused by name."""
    pytest.importorskip("onnxruntime")
    from msv0 import zoo

    net = zoo.mobilenet_tiny_net(resolution=32)
    (tmp_path / "t.ms").write_bytes(net.to_ms())
    (tmp_path / "t.onnx").write_bytes(net.to_onnx(dynamic_batch=True).SerializeToString())
    (tmp_path / "fixed.onnx").write_bytes(net.to_onnx().SerializeToString())
    base = ["bench", str(tmp_path / "t.ms"), "--threads", "1", "--warmup", "1", "--runs", "2", "--batch", "3"]
    assert cli.main(base + ["--compare-onnx", str(tmp_path / "t.onnx")]) == 0
    out = capsys.readouterr().out
    assert "samples/s" in out and "msv0 / onnxruntime" in out
    assert cli.main(base + ["--compare-onnx", str(tmp_path / "fixed.onnx")]) == 2
    assert "is declared [1, 3, 32, 32]; the feed is [3, 32, 32, 3]" in capsys.readouterr().err
    assert cli.main(base[:-1] + ["0"]) == 2


@pytest.mark.parametrize("argv", [["info", "{bad}"], ["run", "{bad}", "--random"], ["run", "{model}"],
                                  ["run", "{model}", "--input", "x"], ["info", "{missing}"],
                                  ["quantize", "{bad}", "-o", "{bad}", "--random", "1"],
                                  ["quantize", "{model}", "-o", "{bad}", "--calib", "{missing}"]])
def test_cli_errors_are_one_line_exit_2(argv, model_path, tmp_path, capsys):
    bad = tmp_path / "bad.ms"
    bad.write_bytes(b"\0" * 32)
    args = [a.format(bad=bad, model=model_path, missing=tmp_path / "nope.ms") for a in argv]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("msv0: error:") and err.count("\n") == 1 and "Traceback" not in err


def test_cli_unsupported_model_exits_2(tmp_path, capsys):
    m = rw.RawModel()
    m.outputs.append(m.node("Adam", [m.input("x", [1])]))
    (tmp_path / "a.ms").write_bytes(rw.write(m))
    assert cli.main(["run", str(tmp_path / "a.ms"), "--random"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_python_dash_m_msv0(model_path):
    proc = subprocess.run([*PYTHON, "-m", "msv0", "info", str(model_path)], capture_output=True, text=True)
    assert proc.returncode == 0 and "FullConnection" in proc.stdout
    proc = subprocess.run([*PYTHON, "-m", "msv0", "info", str(model_path) + ".missing"], capture_output=True,
                          text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_cli_ops_markdown(capsys):
    assert cli.main(["ops", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert all(f"`{o}`" in out for o in msv0.supported_ops())


def test_cli_demo(tmp_path, capsys):
    assert cli.main(["demo", "--threads", "2", "--out", str(tmp_path), "--runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "output logits [1, 10]" in out and "top-5" in out
    assert (tmp_path / "mobilenet_tiny.ms").exists()


def test_memory_limit_names_what_exceeds_it():
    from msv0 import zoo
    model = msv0.load(zoo.mobilenet_tiny())
    with pytest.raises(msv0.ResourceError, match="memory_limit"):
        msv0.Session(model, memory_limit=64 << 10)  # the 64x64 stem output alone is larger
    session = msv0.Session(model)
    with pytest.raises(msv0.ResourceError, match="memory_limit"):  # a re-plan is bounded too
        msv0.Session(model, memory_limit=1 << 20).run([np.zeros((64, 64, 64, 3), np.float32)])
    assert session.run([np.zeros((1, 64, 64, 3), np.float32)])


def test_memory_limit_bounds_a_conv_gathered_tile():
    # A 1x1 output whose window holds 5x5x2000 values: each kernel thread would gather up to 240
    # such windows (48 MB) though every tensor is small.
    from msv0.builder import Builder
    b = Builder("wide_window")
    x = b.input("x", (1, 5, 5, 2000))
    w = b.const("w", np.zeros((1, 5, 5, 2000), np.float32))
    b.output(b.node("Conv2D", [x, w], kernelH=5, kernelW=5, strideH=1, strideW=1, dilateH=1, dilateW=1,
                           group=1, channelIn=2000, channelOut=1))
    model = b.finish()
    with pytest.raises(msv0.ResourceError, match="gathered tile of 5x5x2000"):
        msv0.Session(model, memory_limit=16 << 20)
    out = msv0.Session(model, memory_limit=64 << 20).run([np.ones((1, 5, 5, 2000), np.float32)])
    assert list(out.values())[0].shape == (1, 1, 1, 1)


def test_plans_kept_for_the_most_recent_signatures():
    from msv0 import session as session_module, zoo
    s = msv0.Session(zoo.mobilenet_tiny())
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal((1, 32 + 2 * k, 40, 3)).astype(np.float32) for k in range(12)]
    first = [list(s.run([x]).values())[0] for x in feeds]
    context = s._idle[0]
    assert len(context.plans) == len(s._prepared) == session_module.MAX_SIGNATURES
    assert list(context.plans)[-1] == (feeds[-1].shape,)
    for x, want in zip(feeds, first):  # the evicted ones plan anew, to the same result
        np.testing.assert_array_equal(list(s.run([x]).values())[0], want)
    arena = max(p.arena_bytes for p in context.plans.values())
    s = msv0.Session(zoo.mobilenet_tiny(), memory_limit=3 * arena)
    for x in feeds:
        s.run([x])
    assert sum(p.arena_bytes for p in s._idle[0].plans.values()) <= 3 * arena


def test_memory_limit_bounds_the_values_folded_together():
    # Eight Adds on constants fold at plan time to 40 KB each: each alone is within a 200 KB
    # limit, all of them are not.
    from msv0.builder import Builder
    b = Builder("folded_chain")
    x = b.input("x", (10000,))
    v = b.const("c", np.ones(10000, np.float32))
    for _ in range(8):
        v = b.node("Add", [v, v])
    b.output(b.node("Add", [v, x]))
    model = b.finish()
    with pytest.raises(msv0.ResourceError, match="folded at plan time"):
        msv0.Session(model, memory_limit=200 << 10)
    out = msv0.Session(model, memory_limit=1 << 20).run([np.zeros(10000, np.float32)])
    np.testing.assert_array_equal(list(out.values())[0], np.full(10000, 256, np.float32))


@pytest.mark.parametrize("bad", [0, -5, 2.5, None])
def test_memory_limit_validation(bad):
    with pytest.raises(msv0.InputError, match="memory_limit"):
        msv0.Session(MODEL, memory_limit=bad)

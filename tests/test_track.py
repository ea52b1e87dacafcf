"""bench/track.py on synthetic pytest-benchmark histories: judged by the ratio to the peer of
the same run, so a slower machine is no regression and a slowed msv0 kernel is."""
from __future__ import annotations

import importlib.util
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("track", ROOT / "bench" / "track.py")
track = sys.modules["track"] = importlib.util.module_from_spec(_spec)  # dataclasses look their module up
_spec.loader.exec_module(track)


def save(storage: Path, k: int, medians: dict[tuple[str, str], float], machine: str = "box") -> None:
    """One run as pytest-benchmark autosaves it: {(group, engine): median seconds}."""
    benchmarks = [{"group": g, "name": f"test_model_latency[{g}-{e}]", "extra_info": {"engine": e, "model": g},
                   "stats": {"median": t}} for (g, e), t in medians.items()]
    data = {"machine_info": {"node": machine, "cpu": {"brand_raw": "cpu"}},
            "commit_info": {"id": f"{k:040x}", "dirty": False},
            "datetime": f"2026-01-{k + 1:02d}T00:00:00", "benchmarks": benchmarks}
    folder = storage / f"Linux-{machine}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{k:04d}_{k:040x}.json").write_text(json.dumps(data))


def history(storage: Path, runs: int = 5) -> None:
    """msv0 at 0.8x ONNX Runtime, on machines whose absolute speed differs by up to 2x."""
    for k in range(runs):
        scale = 1.0 + (k % 3) * 0.5
        save(storage, k, {("resnet50 1t", "msv0"): 0.080 * scale * (1 + 0.01 * k),
                          ("resnet50 1t", "onnxruntime"): 0.100 * scale}, machine=f"m{k % 3}")


def test_slowed_kernel_is_a_regression(tmp_path, capsys):
    history(tmp_path)
    save(tmp_path, 9, {("resnet50 1t", "msv0"): 0.080 * 1.5, ("resnet50 1t", "onnxruntime"): 0.100})
    assert track.main(["--storage", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "1 regression(s)" in out


def test_slower_machine_is_not_a_regression(tmp_path, capsys):
    history(tmp_path)
    save(tmp_path, 9, {("resnet50 1t", "msv0"): 0.080 * 3.05, ("resnet50 1t", "onnxruntime"): 0.100 * 3})
    assert track.main(["--storage", str(tmp_path)]) == 0
    assert "REGRESSION" not in capsys.readouterr().out


def test_threshold_and_window(tmp_path):
    history(tmp_path)
    save(tmp_path, 9, {("resnet50 1t", "msv0"): 0.080 * 1.08, ("resnet50 1t", "onnxruntime"): 0.100})
    assert track.main(["--storage", str(tmp_path)]) == 0
    assert track.main(["--storage", str(tmp_path), "--threshold", "0.03"]) == 1
    runs = track.load_runs(tmp_path)
    (v,) = track.judge(runs, window=2)
    assert v.baseline == pytest.approx(0.8 * (1 + 0.035))  # median of the last two: 1.03 and 1.04


def test_new_group_has_no_history_and_broken_files_are_skipped(tmp_path, capsys):
    history(tmp_path, runs=2)
    (tmp_path / "junk.json").write_text("{not json")
    save(tmp_path, 9, {("resnet50 1t", "msv0"): 0.08, ("resnet50 1t", "onnxruntime"): 0.1,
                       ("mobilenet_v2 2t", "msv0"): 0.02, ("mobilenet_v2 2t", "onnxruntime"): 0.01})
    assert track.main(["--storage", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "no history" in captured.out and "skipping" in captured.err
    assert track.main(["--storage", str(tmp_path / "empty")]) == 2


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_plot(tmp_path, suffix):
    pytest.importorskip("matplotlib")
    history(tmp_path)
    out = tmp_path / f"ratio.{suffix}"
    assert track.main(["--storage", str(tmp_path), "--plot", str(out)]) == 0
    if suffix == "png":
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        ET.parse(out)

"""README's Python snippets run as written, on a model it names (model.ms, model.onnx) made here."""
import re
from pathlib import Path

import numpy as np
import pytest

from msv0 import zoo

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_has_python_snippets():
    assert len(SNIPPETS) >= 2


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_readme_snippet_runs(index, tmp_path, monkeypatch):
    code = SNIPPETS[index]
    if "BatchPredictor" in code:
        pytest.skip("tests/test_distributed.py runs the batch-inference recipes and checks their results")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.ms").write_bytes(zoo.mobilenet_tiny())
    if "model.onnx" in code:
        pytest.importorskip("onnx", reason="the converter snippet needs the convert extra")
        import onnx
        onnx.save(zoo.to_onnx("mobilenet_tiny"), tmp_path / "model.onnx")
    exec(compile(code, f"README.md python snippet {index}", "exec"), {"np": np})

"""msv0.progress: bars on a terminal's stderr only; the CLI's commands leave pipes clean."""
from __future__ import annotations

import io
import sys

from msv0 import cli, zoo
from msv0.progress import bar, progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_drawn_on_a_terminal_only(monkeypatch):
    for stream, drawn in ((Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        assert list(progress(range(3), 3, "converting")) == [0, 1, 2]
        with bar(4, "calibrating") as b:
            b.update(4)
        text = stream.getvalue()
        assert ("converting" in text and "/3 " in text and "calibrating" in text and "/4 " in text) == drawn
        assert (text == "") == (not drawn)


def test_cli_bench_and_quantize_write_no_bar_to_a_pipe(tmp_path, capsys):
    model = tmp_path / "m.ms"
    model.write_bytes(zoo.mobilenet_tiny())
    assert cli.main(["bench", str(model), "-t", "1", "--warmup", "1", "--runs", "2"]) == 0
    assert cli.main(["quantize", str(model), "--random", "2", "--check", "1", "-o", str(tmp_path / "q.ms")]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "calibrating" not in err

"""Prints the converter test modules' tables (conformance per op, end-to-end models) after the run."""
from __future__ import annotations

import sys


def pytest_terminal_summary(terminalreporter):
    for mod in list(sys.modules.values()):
        report = getattr(mod, "convert_report", None)
        if callable(report) and "tests/convert" in (getattr(mod, "__file__", "") or "").replace("\\", "/"):
            text = report()
            if text:
                terminalreporter.write_line(text)

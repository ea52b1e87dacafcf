"""Benchmark-wide hooks: every enabled run is saved for bench/track.py, and the msv0 / peer
ratio summary of bench_models.py is printed."""
import sys

import pytest
from pytest_benchmark.utils import get_tag


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # pytest-benchmark's autosave: .benchmarks/<machine>/NNNN_<commit>_<date>.json, with machine
    # and commit info, unless the run names its own --benchmark-save or is disabled.
    if config.getoption("benchmark_enable", False) and not config.getoption("benchmark_save", None):
        config.option.benchmark_autosave = get_tag()  # what --benchmark-autosave stores


def pytest_terminal_summary(terminalreporter):
    models = sys.modules.get("bench_models")  # only when bench_models.py was collected
    if models is not None:
        models.pytest_terminal_summary(terminalreporter)

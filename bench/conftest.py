"""Benchmark-wide hooks: the msv0 / onnxruntime ratio summary of bench_models.py."""
import sys


def pytest_terminal_summary(terminalreporter):
    models = sys.modules.get("bench_models")  # only when bench_models.py was collected
    if models is not None:
        models.pytest_terminal_summary(terminalreporter)

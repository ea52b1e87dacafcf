"""Coverage instrumentation of msv0's Python code only. atheris.instrument_all() would also
instrument NumPy, onnx and protobuf, whose branches are not ours to find bugs in: it halves the
executions per second and steers the fuzzer by coverage inside libraries.

Branches only, not comparisons: atheris 3.0's comparison hook keeps a reference to every result
that is not a bool, so each NumPy comparison leaked its whole boolean array (60 MB a run of a
30000-box NMS) until RSS passed the fuzzer's 4 GiB limit, blamed on whatever input ran then."""
import importlib
import pkgutil
import sys
import types

from atheris.instrument_bytecode import patch_code

import msv0


def _instrument(owner, module: str, seen: set) -> None:
    for value in list(vars(owner).values()):
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if getattr(value, "__module__", None) != module or id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, types.FunctionType):
            value.__code__ = patch_code(value.__code__, trace_dataflow=False)  # nested functions too
        elif isinstance(value, type):
            _instrument(value, module, seen)


def instrument_msv0() -> None:
    """Imports every msv0 module (some are imported lazily) and instruments its functions."""
    for info in pkgutil.walk_packages(msv0.__path__, "msv0."):
        if info.name.endswith("__main__"):  # importing it runs the CLI
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional dependency is missing: the fuzzer cannot reach that module
            pass
    seen: set = set()
    for name, module in list(sys.modules.items()):
        if name == "msv0" or name.startswith("msv0."):
            _instrument(module, name, seen)

"""Coverage instrumentation of msv0's Python code only. atheris.instrument_all() would also
instrument NumPy, onnx and protobuf, whose branches are not ours to find bugs in: it halves the
executions per second and steers the fuzzer by coverage inside libraries."""
import importlib
import pkgutil
import sys
import types

import atheris

import msv0


def _instrument(owner, module: str, seen: set) -> int:
    count = 0
    for value in list(vars(owner).values()):
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if getattr(value, "__module__", None) != module or id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, types.FunctionType):
            atheris.instrument_func(value)  # patches the code object in place, nested functions too
            count += 1
        elif isinstance(value, type):
            count += _instrument(value, module, seen)
    return count


def instrument_msv0() -> int:
    """Imports every msv0 module (some are imported lazily) and instruments its functions;
    returns how many."""
    for info in pkgutil.walk_packages(msv0.__path__, "msv0."):
        if not info.name.endswith("__main__"):  # importing it runs the CLI
            importlib.import_module(info.name)
    seen: set = set()
    return sum(_instrument(module, name, seen) for name, module in list(sys.modules.items())
               if name == "msv0" or name.startswith("msv0."))

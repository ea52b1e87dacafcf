import functools
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

import msv0


# Every tier up to the active one: all this CPU runs, or fewer when MSV0_ISA caps it.
TIERS = msv0.available_isas()[: msv0.available_isas().index(msv0.isa()) + 1]


@pytest.fixture(params=TIERS)
def isa(request):
    """Runs the test once per ISA tier this CPU can execute (up to MSV0_ISA), scalar included."""
    with msv0.isa_cap(request.param):
        yield request.param


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# MSV0_SEED_DIR=DIR python -m pytest ... saves every model the tests load (DIR/ms) and every ONNX
# model they convert (DIR/onnx): the fuzzers' seed corpora (tests/fuzz/README.md).
if os.environ.get("MSV0_SEED_DIR"):
    _SEEDS = Path(os.environ["MSV0_SEED_DIR"])

    def _saver(kind, fn):
        @functools.wraps(fn)  # pickle finds the wrapper under fn's name (Model.__reduce__ names load)
        def wrapper(src, *args, **kwargs):
            data = src
            if hasattr(src, "SerializeToString"):
                data = src.SerializeToString()
            elif isinstance(src, (str, os.PathLike)):
                data = Path(src).read_bytes()
            if isinstance(data, (bytes, bytearray, memoryview)) and len(data) <= 1 << 20:
                (_SEEDS / kind).mkdir(parents=True, exist_ok=True)
                data = bytes(data)
                (_SEEDS / kind / hashlib.sha1(data).hexdigest()).write_bytes(data)
            return fn(src, *args, **kwargs)
        return wrapper

    import msv0.model
    import msv0.session
    msv0.model.load = msv0.session.load = msv0.load = _saver("ms", msv0.model.load)
    try:
        import msv0.convert.onnx_frontend as _onnx_frontend
        _onnx_frontend.load_graph = _saver("onnx", _onnx_frontend.load_graph)
    except ImportError:
        pass


def pytest_collection_modifyitems(config, items):
    """MSV0_TEST_SHARD=I/N keeps every N-th collected test from the I-th (0-based), so that
    scripts/build_aarch64.sh can run N emulated pytest processes on disjoint parts of one suite."""
    shard = os.environ.get("MSV0_TEST_SHARD")
    if not shard:
        return
    index, count = (int(n) for n in shard.split("/"))
    config.hook.pytest_deselected(items=[t for k, t in enumerate(items) if k % count != index])
    items[:] = items[index::count]

import numpy as np
import pytest

import msv0


@pytest.fixture(params=msv0.available_isas())
def isa(request):
    """Runs the test once per ISA tier this CPU can execute, scalar included."""
    with msv0.isa_cap(request.param):
        yield request.param


@pytest.fixture
def rng():
    return np.random.default_rng(0)

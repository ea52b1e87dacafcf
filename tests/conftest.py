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

"""ISA tier selection: detection at import, the MSV0_ISA cap, set_isa / isa_cap."""
import os
import subprocess

import pytest

import msv0
from msv0.isa import known_isas
from child_python import PYTHON


def isa_in_child(env_isa):
    env = {k: v for k, v in os.environ.items() if k != "MSV0_ISA"}
    if env_isa is not None:
        env["MSV0_ISA"] = env_isa
    out = subprocess.run(PYTHON + ["-c", "import msv0; print(msv0.isa())"], env=env,
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_active_tier_is_available():
    tiers = msv0.available_isas()
    assert tiers[0] == "scalar"
    assert len(set(tiers)) == len(tiers)
    assert msv0.isa() in tiers


def test_default_is_best_tier():
    assert isa_in_child(None) == msv0.available_isas()[-1]


@pytest.mark.parametrize("tier", msv0.available_isas())
def test_env_caps_tier(tier):
    assert isa_in_child(tier) == tier


def test_env_unknown_name_keeps_best_tier():
    # A typo must not silently disable every kernel.
    assert isa_in_child("no-such-isa") == msv0.available_isas()[-1]


def test_set_isa_and_cap_restore():
    before = msv0.isa()
    for tier in msv0.available_isas():
        with msv0.isa_cap(tier):
            assert msv0.isa() == tier
        assert msv0.isa() == before


def test_available_tiers_are_known_in_order():
    known = known_isas()
    assert set(msv0.available_isas()) <= set(known)
    assert sorted(msv0.available_isas(), key=known.index) == list(msv0.available_isas())


# Names of no tier, and tiers this CPU (or architecture) lacks: all rejected, cap unchanged.
UNAVAILABLE = ["", "sse", "AVX2", "neon ", "avx512vnni2"] + [
    n for n in known_isas() if n not in msv0.available_isas()]


@pytest.mark.parametrize("name", UNAVAILABLE)
def test_set_isa_rejects_unavailable(name):
    before = msv0.isa()
    with pytest.raises(ValueError, match="ISA"):
        msv0.set_isa(name)
    assert msv0.isa() == before

"""ISA tier selection: detection at import, the MSV0_ISA cap, set_isa / isa_cap."""
import io
import os
import platform
import shutil
import subprocess
import sys

import numpy as np
import pytest

import msv0
from msv0 import zoo
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


QEMU_X86 = shutil.which("qemu-x86_64-static") or shutil.which("qemu-x86_64")
RUN_ON_EMULATED_CPU = """
import msv0, numpy as np
from msv0 import zoo
s = msv0.Session(zoo.mobilenet_tiny())
x = np.random.default_rng(0).standard_normal(s.model.inputs[0].shape).astype(np.float32)
(y,) = s.run([x]).values()
print(" ".join(msv0.available_isas()))
np.save(__import__("sys").stdout.buffer, y)
"""


@pytest.mark.skipif(platform.machine() != "x86_64" or QEMU_X86 is None or "MSV0_TEST_PYTHON" in os.environ,
                    reason="needs an x86_64 host with qemu-user (Debian qemu-user-static)")
@pytest.mark.skipif("MSV0_SANITIZED" in os.environ, reason="qemu-user cannot map ASan's shadow memory")
@pytest.mark.parametrize("cpu,tiers", [("Nehalem", "scalar"), ("Haswell", "scalar avx2")])
def test_imports_and_runs_on_a_lesser_cpu(cpu, tiers):
    """A build made on any machine imports and runs on a CPU with fewer features: the load-time
    code of every tier's kernels (which fills the slot tables) runs on every CPU, so it must hold
    no instruction beyond the baseline. qemu emulates a CPU without AVX (Nehalem) and one with AVX2
    but no AVX-512 (Haswell); it raises SIGILL on any instruction the model lacks."""
    out = subprocess.run([QEMU_X86, "-cpu", cpu, sys.executable, "-c", RUN_ON_EMULATED_CPU],
                         capture_output=True, timeout=600)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    first, _, rest = out.stdout.partition(b"\n")
    assert first.decode() == tiers
    s = msv0.Session(zoo.mobilenet_tiny())
    x = np.random.default_rng(0).standard_normal(s.model.inputs[0].shape).astype(np.float32)
    (want,) = s.run([x]).values()
    np.testing.assert_allclose(np.load(io.BytesIO(rest)), want, rtol=1e-4, atol=1e-5)

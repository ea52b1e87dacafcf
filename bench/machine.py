"""What a benchmark should print beside its 2-thread figures: the cross-core round trip of CPUs 0
and 1 (bench/core_round_trip.c), which on this project's 2-vCPU VMs flips between ~50 and ~360 ns
as the host places the vCPUs, and with it every 2-thread latency."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile


def run_c(name: str, flags: list[str], args: list[str] | None = None) -> subprocess.CompletedProcess:
    """bench/<name>.c built with cc -O2 and `flags`, run with `args`; stdout and stderr as text.
    Raises FileNotFoundError without a C compiler, CalledProcessError when the build fails."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise FileNotFoundError("no C compiler")
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, name)
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.c")
        subprocess.run([cc, "-O2", *flags, src, "-o", exe], check=True)
        return subprocess.run([exe, *(args or [])], capture_output=True, text=True)


def round_trip_ns() -> str:
    """The median round trip between CPUs 0 and 1 in ns, as text, or why it was not measured."""
    if (os.cpu_count() or 1) < 2:
        return "n/a (one CPU)"
    try:
        run = run_c("core_round_trip", ["-pthread"])
    except (FileNotFoundError, subprocess.CalledProcessError) as e:
        return f"n/a ({e})"
    return f"{run.stdout.strip()} ns" if run.returncode == 0 else f"n/a ({run.stderr.strip()})"


def round_trip_line() -> str:
    return f"cross-core round trip (CPUs 0 and 1, bench/core_round_trip.c): {round_trip_ns()}"

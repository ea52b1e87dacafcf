"""ThreadPool's lock-free hand-off (excused and benched workers, csrc/runtime/parallel.h) under
ThreadSanitizer: tests/cpp/thread_pool_stress.cc built with the system C++ compiler."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


@pytest.fixture(scope="module")
def stress(tmp_path_factory):
    if os.environ.get("MSV0_SANITIZED") or os.environ.get("MSV0_TEST_PYTHON"):
        # ASan preloaded into every child (scripts/sanitize.sh), or an emulated interpreter
        # (scripts/build_aarch64.sh): the native run builds and runs this binary.
        pytest.skip("the native, unsanitized run covers it")
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = str(tmp_path_factory.mktemp("tsan") / "thread_pool_stress")
    build = subprocess.run([cxx, "-std=c++17", "-O1", "-g", "-fsanitize=thread", "-pthread",
                            "-I", os.path.join(ROOT, "csrc"), os.path.join(ROOT, "tests", "cpp", "thread_pool_stress.cc"),
                            os.path.join(ROOT, "csrc", "runtime", "parallel.cc"), "-o", exe], capture_output=True, text=True)
    if build.returncode != 0 and "tsan" in build.stderr.lower():
        pytest.skip(f"no ThreadSanitizer runtime: {build.stderr.strip().splitlines()[-1]}")
    assert build.returncode == 0, build.stderr
    return exe


def test_thread_pool_under_tsan(stress):
    run = subprocess.run([stress], capture_output=True, text=True, timeout=600)
    if run.returncode != 0 and "unexpected memory mapping" in run.stderr:
        # TSan's shadow layout against a kernel's high mmap randomisation: run without ASLR.
        run = subprocess.run(["setarch", os.uname().machine, "-R", stress], capture_output=True, text=True, timeout=600)
    if "ThreadSanitizer" in run.stderr and "WARNING" not in run.stderr and run.returncode != 0:
        pytest.skip(f"ThreadSanitizer cannot run here: {run.stderr.strip().splitlines()[0]}")
    assert run.returncode == 0 and "WARNING: ThreadSanitizer" not in run.stderr, run.stdout + run.stderr
    assert "wrong outputs: 0" in run.stdout

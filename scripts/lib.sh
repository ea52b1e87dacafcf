# Sourced by build_aarch64.sh and build_wheels.sh: their logging, stamped caches, and Debian arm64
# packages unpacked into a sysroot with a private apt state directory, so the host's dpkg
# architectures and package lists are never touched (that part needs root for apt-get).

log() { printf '\n== [%ss] %s\n' "$SECONDS" "$*"; }

# stamp_ok FILE KEY: FILE holds exactly KEY, i.e. the cached step it stamps is up to date.
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

# stamped_venv DIR PYTHON REQS: a venv of PYTHON in DIR with the pip requirements REQS (one
# space-separated string), rebuilt from scratch unless its stamp says it has exactly REQS.
stamped_venv() {
  local dir=$1 python=$2 reqs=$3
  stamp_ok "$dir/.stamp" "$reqs" && return 0
  log "venv $dir: $reqs"
  rm -rf "$dir"
  "$python" -m venv "$dir"
  # shellcheck disable=SC2086
  "$dir/bin/pip" install -q --disable-pip-version-check $reqs
  printf '%s' "$reqs" >"$dir/.stamp"
}

# arm64_apt DIR [SUITE]: a fresh arm64 apt state in DIR (use it as APT_CONFIG=DIR/apt.conf), its
# lists updated from the host's sources, or with SUITE from deb.debian.org's SUITE main.
arm64_apt() {
  local apt=$1 suite=${2:-}
  rm -rf "$apt"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
  touch "$apt/status"
  cat >"$apt/apt.conf" <<EOF
APT::Architecture "arm64";
APT::Architectures { "arm64"; };
APT::Sandbox::User "root";
Dir::State::Lists "$apt/lists";
Dir::State::status "$apt/status";
Dir::Cache "$apt/cache";
EOF
  if [ -n "$suite" ]; then
    mkdir -p "$apt/etc"
    cat >>"$apt/apt.conf" <<EOF
Dir::Etc::SourceList "$apt/etc/sources.list";
Dir::Etc::SourceParts "$apt/etc/none";
EOF
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
      >"$apt/etc/sources.list"
  fi
  APT_CONFIG=$apt/apt.conf apt-get update -q >/dev/null
}

# arm64_unpack DIR SYSROOT PACKAGE...: the packages downloaded with DIR's apt state and unpacked
# into SYSROOT (no maintainer scripts run); DIR is removed.
arm64_unpack() {
  local apt=$1 sysroot=$2
  shift 2
  (cd "$apt/debs" && APT_CONFIG=$apt/apt.conf apt-get download -q "$@" >/dev/null)
  mkdir -p "$sysroot"
  for deb in "$apt"/debs/*.deb; do dpkg -x "$deb" "$sysroot"; done
  # Absolute links (libz.so -> /lib/...) would resolve to the host's files: point them inside.
  local link
  find "$sysroot" -type l -lname '/*' | while read -r link; do
    ln -sfn "$sysroot$(readlink "$link")" "$link"
  done
  rm -rf "$apt"
}

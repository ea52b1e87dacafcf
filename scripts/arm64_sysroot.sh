# Sourced by build_aarch64.sh and build_wheels.sh: Debian arm64 packages unpacked into a sysroot,
# fetched with a private apt state directory, so the host's dpkg architectures and package lists
# are never touched. Needs root for apt-get.

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
  rm -rf "$apt"
}

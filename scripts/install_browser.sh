#!/usr/bin/env bash
# Debian's chromium and its WebDriver, for tests/test_graph_picture.py's headless-browser test
# (Selenium comes with the `test` extra). Does nothing where apt-get is absent; the test skips then.
set -euo pipefail
command -v chromium >/dev/null && command -v chromedriver >/dev/null && exit 0
command -v apt-get >/dev/null || { echo "install_browser: no apt-get; the browser test will skip" >&2; exit 0; }
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver

#!/usr/bin/env bash
# The console browser test (issue 20): Debian's chromium driven over WebDriver
# (chromium-driver) by selenium, from a venv whose packages are all pinned
# (gateway/tests/console/requirements.txt), against the embedded system. Installs chromium,
# chromium-driver and python3-venv when missing (as root). Needs a built binary: LATCHKEY_BIN,
# default target/debug/latchkey. LATCHKEY_SCREENSHOTS=<dir> keeps the pages' screenshots.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "console-test: ${need[*]} missing and this is not root" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
venv=${XDG_CACHE_HOME:-$HOME/.cache}/latchkey-console-venv
requirements=gateway/tests/console/requirements.txt
if ! cmp -s "$requirements" "$venv/requirements.txt" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv" 2>/dev/null || {
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null && python3 -m venv "$venv"
  }
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
  cp "$requirements" "$venv/requirements.txt"
fi
export LATCHKEY_BIN=${LATCHKEY_BIN:-$PWD/target/debug/latchkey}
[ -x "$LATCHKEY_BIN" ] || cargo build --bin latchkey
"$venv/bin/python" gateway/tests/console/console_test.py

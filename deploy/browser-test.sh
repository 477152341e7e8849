#!/usr/bin/env bash
# The browser test (issue 18 §0): the unmodified Stack Auth JavaScript SDK bundled into a page,
# driven in headless Chromium against the embedded system, through real CORS preflights.
# Installs Debian's chromium and chromium-driver when missing (as root), installs the pinned
# npm packages of gateway/tests/browser (package-lock.json), then runs the test with node's
# test runner. Needs a built binary: LATCHKEY_BIN, default target/debug/latchkey.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "browser-test: chromium is missing and this is not root" >&2; exit 1; }
  echo "browser-test: installing chromium and chromium-driver" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq chromium chromium-driver >/dev/null
fi
export LATCHKEY_BIN=${LATCHKEY_BIN:-$PWD/target/debug/latchkey}
[ -x "$LATCHKEY_BIN" ] || cargo build --bin latchkey
cd gateway/tests/browser
npm ci --no-audit --no-fund --loglevel=error
node --test

#!/usr/bin/env bash
# The hardening tier (README "Hardening"): supply chain, fuzz targets, then every #[ignore]d
# integration test alone and one at a time: contract fuzzing with schemathesis per access type,
# the bad-input table, dependency faults under load, cross-project isolation, token forgeries,
# secrets at rest and in logs, account enumeration. Bounded for CI; `--full` runs larger counts
# (LATCHKEY_HARDENING_SCALE=5, 5 minutes per fuzz target).
set -euo pipefail
cd "$(dirname "$0")/.."

scale=${LATCHKEY_HARDENING_SCALE:-1}
fuzz_seconds=${LATCHKEY_FUZZ_SECONDS:-20}
if [ "${1:-}" = "--full" ]; then
  scale=5
  fuzz_seconds=300
fi

started=$(date +%s)
step() { echo "== hardening: $* ($(( $(date +%s) - started )) s in)"; }

bash deploy/local-services.sh

step "supply chain"
bash deploy/supply-chain.sh

step "fuzz targets"
bash deploy/fuzz.sh --seconds "$fuzz_seconds"

step "schemathesis"
venv=${XDG_CACHE_HOME:-$HOME/.cache}/latchkey-schemathesis-venv
if ! "$venv/bin/st" --version 2>/dev/null | grep -q '4.32.5'; then
  command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3 >/dev/null; }
  python3 -m venv "$venv" 2>/dev/null || {
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null && python3 -m venv "$venv"
  }
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'schemathesis==4.32.5'
fi
export LATCHKEY_SCHEMATHESIS="$venv/bin/st"

step "integration tests of the tier (alone, one at a time)"
report=$(mktemp)
# The figures are printed whether the tests pass or not.
trap 'echo "== hardening figures:"; cat "$report"; rm -f "$report"' EXIT
LATCHKEY_HARDENING_REPORT=$report LATCHKEY_HARDENING_SCALE=$scale \
  cargo test -p latchkey-gateway --test api -- --ignored --test-threads=1

step "done"

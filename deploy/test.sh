#!/usr/bin/env bash
# The test command (README): makes sure PostgreSQL, Redis and RabbitMQ are up (installing and
# starting them from Debian's packages on a fresh machine), validates the Kubernetes manifests and
# the compose file offline, then checks formatting and lints and runs every test (the Rust
# suites, then the Stack Auth SDK in headless Chromium), then the hardening tier
# (deploy/hardening.sh). Tests create
# their own databases and vhosts and drop them.
set -euo pipefail
cd "$(dirname "$0")/.."

# A test run builds each crate once, so incremental caches only cost disk (gigabytes across the
# main and fuzz target directories) and time. Set CARGO_INCREMENTAL=1 to keep them.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}

bash deploy/local-services.sh

bash deploy/validate-manifests.sh

echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== proto stays free of storage crates"
if cargo tree -p latchkey-proto -e normal --prefix none 2>/dev/null | grep -q '^sqlx'; then
  echo "latchkey-proto depends on sqlx" >&2
  exit 1
fi
echo "== cargo test"
cargo test --workspace
echo "== browser test"
bash deploy/browser-test.sh
echo "== console browser test"
bash deploy/console-test.sh
# Faults stop the shared servers and timings want a quiet machine, so the hardening tier runs
# afterwards, its tests alone and one at a time.
echo "== hardening tier"
bash deploy/hardening.sh

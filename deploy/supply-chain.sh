#!/usr/bin/env bash
# Supply-chain check, offline (hardening tier): cargo-deny against the RustSec advisory snapshot
# kept beside the repository (../shared/advisory-db, or LATCHKEY_ADVISORY_DB), with the licence
# allowlist and source rules of deploy/deny.toml.
#
# Before the real check it plants one advisory against a crate we use in a copy of the snapshot
# and requires cargo-deny to report it, so a database that silently fails to load cannot pass.
set -euo pipefail
cd "$(dirname "$0")/.."

snapshot=${LATCHKEY_ADVISORY_DB:-../shared/advisory-db}
[ -d "$snapshot/crates" ] || { echo "supply-chain: no advisory snapshot at $snapshot" >&2; exit 1; }

tools=${XDG_CACHE_HOME:-$HOME/.cache}/latchkey-ci-tools
deny=$tools/bin/cargo-deny
if ! "$deny" --version 2>/dev/null | grep -q '^cargo-deny 0.20.2$'; then
  echo "== installing cargo-deny 0.20.2 (once per machine)"
  # A debug build: half the install time, and the check still takes seconds.
  cargo install --locked --quiet --debug cargo-deny --version 0.20.2 --root "$tools"
fi

# cargo-deny reads `cargo metadata --offline`, which wants the sources of every crate in the
# lockfile, for every platform; a fresh machine has only those its own builds downloaded.
cargo fetch --locked --quiet

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# cargo-deny looks for a git checkout named after the database URL under db-path and reads its
# HEAD date; the snapshot is plain files, so each run wraps a copy in a one-commit repository.
make_db() {
  local root=$1 db="$1/advisory-db-3157b0e258782691"
  mkdir -p "$db"
  cp -r "$snapshot/." "$db/"
  (
    cd "$db"
    git init -q
    git add -A
    GIT_AUTHOR_DATE=2026-08-21T00:00:00Z GIT_COMMITTER_DATE=2026-08-21T00:00:00Z \
      git -c user.name=snapshot -c user.email=snapshot@invalid commit -qm "advisory snapshot"
  )
}

config_for() {
  sed "s|^db-urls = .*|&\ndb-path = \"$1\"|" deploy/deny.toml >"$1.toml"
  echo "$1.toml"
}

echo "== cargo deny: a planted advisory must be reported"
make_db "$work/canary"
mkdir -p "$work/canary/advisory-db-3157b0e258782691/crates/subtle"
cat >"$work/canary/advisory-db-3157b0e258782691/crates/subtle/RUSTSEC-2099-0001.md" <<'EOF'
```toml
[advisory]
id = "RUSTSEC-2099-0001"
package = "subtle"
date = "2026-08-21"
url = "https://example.invalid/canary"
categories = []

[versions]
patched = [">= 99.0.0"]
```

# Planted advisory

Proves the check reads the database.
EOF
(cd "$work/canary/advisory-db-3157b0e258782691" && git add -A &&
  git -c user.name=snapshot -c user.email=snapshot@invalid commit -qm canary)
if "$deny" --offline --color never --config "$(config_for "$work/canary")" check advisories \
  >"$work/canary.log" 2>&1; then
  cat "$work/canary.log" >&2
  echo "supply-chain: the planted advisory was not reported" >&2
  exit 1
fi
grep -q RUSTSEC-2099-0001 "$work/canary.log" || {
  cat "$work/canary.log" >&2
  echo "supply-chain: cargo-deny failed for another reason than the planted advisory" >&2
  exit 1
}

echo "== cargo deny: advisories (snapshot of $(cd "$snapshot" && ls crates | wc -l) crates), licences, bans, sources"
make_db "$work/db"
"$deny" --offline --color never --config "$(config_for "$work/db")" check --show-stats \
  advisories licenses bans sources

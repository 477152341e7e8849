#!/usr/bin/env bash
# Runs every cargo-fuzz target in gateway/fuzz for a while (part of the hardening tier):
# 20 seconds each by default, `--seconds N` (or LATCHKEY_FUZZ_SECONDS) for longer runs.
# Installs cargo-fuzz once per machine. A target that finds a crash or a broken property fails
# the run, and libFuzzer leaves the input under gateway/fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${LATCHKEY_FUZZ_SECONDS:-20}
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    *) echo "usage: $0 [--seconds N]" >&2; exit 2 ;;
  esac
done

tools=${XDG_CACHE_HOME:-$HOME/.cache}/latchkey-ci-tools
fuzz=$tools/bin/cargo-fuzz
if ! "$fuzz" --version 2>/dev/null | grep -q '^cargo-fuzz 0.13.2$'; then
  echo "== installing cargo-fuzz 0.13.2 (once per machine)"
  cargo install --locked --quiet --debug cargo-fuzz --version 0.13.2 --root "$tools"
fi
# cargo-fuzz passes nightly-only compiler flags (sanitizer coverage); the machine has only the
# stable toolchain, which accepts them under this switch.
export RUSTC_BOOTSTRAP=1

# Unoptimised and without AddressSanitizer: the targets are safe Rust whose properties are
# checked by assertions, and an optimised ASan build of the gateway's dependency tree takes
# 25 minutes on two cores against about 5 this way. Coverage guidance is the same.
build=(--dev --sanitizer none)
targets=$("$fuzz" list --fuzz-dir gateway/fuzz)
echo "== cargo fuzz build ($(echo "$targets" | wc -w) targets)"
"$fuzz" build --fuzz-dir gateway/fuzz "${build[@]}"
for target in $targets; do
  echo "== cargo fuzz run $target (${seconds} s)"
  mkdir -p "gateway/fuzz/corpus/$target"
  "$fuzz" run --fuzz-dir gateway/fuzz "${build[@]}" "$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 2>&1 |
    grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss|==[0-9]+==|SUMMARY|thread .* panicked|Done )' || true
  # The pipe above hides libFuzzer's exit status; a finding leaves an artifact behind.
  if compgen -G "gateway/fuzz/artifacts/$target/*" >/dev/null; then
    echo "fuzz: $target found a failing input:" >&2
    ls "gateway/fuzz/artifacts/$target" >&2
    exit 1
  fi
done

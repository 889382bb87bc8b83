#!/bin/sh
# Run every fuzz target for a bounded time: ci/fuzz.sh SECONDS [TARGET...]
#
# Each target starts from its committed corpus (fuzz/corpus/TARGET, read
# only) and writes new inputs to a scratch folder, so a CI run never changes
# the repository. Any crash fails the script; the reproducer is left in
# fuzz/artifacts/TARGET/ and can be replayed with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run -O TARGET fuzz/artifacts/TARGET/crash-...
#
# cargo-fuzz wants nightly flags; RUSTC_BOOTSTRAP=1 lets stable accept
# them. FUZZ_SANITIZER=none turns AddressSanitizer off where it can't run.
set -eu

if [ $# -lt 1 ]; then
  echo "usage: ci/fuzz.sh SECONDS [TARGET...]" >&2
  exit 2
fi
seconds=$1
shift
case "$seconds" in
  ''|*[!0-9]*) echo "ci/fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/../fuzz"
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "ci/fuzz.sh: cargo-fuzz is missing; installing it" >&2
  cargo install cargo-fuzz --version 0.13.2 --locked
fi

targets=${*:-$(cargo fuzz list)}
sanitizer=${FUZZ_SANITIZER:-address}
export RUSTC_BOOTSTRAP=1

cargo fuzz build -O --sanitizer "$sanitizer"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/rwmcp-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT INT TERM

failed=""
for t in $targets; do
  mkdir -p "$scratch/$t" "corpus/$t"
  echo "== fuzz $t for ${seconds}s"
  if cargo fuzz run -O --sanitizer "$sanitizer" "$t" "$scratch/$t" "corpus/$t" -- \
      -max_total_time="$seconds" -rss_limit_mb=4096 -print_final_stats=1 \
      2>"$scratch/$t.log"; then
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)|^Done ' "$scratch/$t.log" || true
  else
    failed="$failed $t"
    tail -n 60 "$scratch/$t.log" >&2
    echo "== $t FAILED; reproducer in fuzz/artifacts/$t/" >&2
  fi
done

if [ -n "$failed" ]; then
  echo "ci/fuzz.sh: crashes in:$failed" >&2
  exit 1
fi
echo "ci/fuzz.sh: all targets ran ${seconds}s each without a crash"

#!/usr/bin/env bash
# Peak memory and threads of `mcp-serve` under load (BENCHMARKS.md, "Load"):
# 2,000 pipelined calls, and a client that stops reading while it sends 600
# calls with half-megabyte answers. Release build; nothing is asserted.
#
#   bash ci/load-bench.sh                       # this tree
#   bash ci/load-bench.sh --baseline-ref main   # also build REF and measure it the same way
#   bash ci/load-bench.sh --workers 4           # all driver options: python3 ci/bench/load_bench.py --help
#
# Needs /usr/bin/python3. Writes target/bench/load-report.md and prints it.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)

baseline_ref=""
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --baseline-ref)
            baseline_ref="${2:?--baseline-ref needs a git ref}"
            shift 2
            ;;
        *)
            args+=("$1")
            shift
            ;;
    esac
done

echo "== building (release)" >&2
cargo build --release -p reachweaver-mcp --quiet
servers=(--server "this=$repo/target/release/reachweaver-mcp")

if [ -n "$baseline_ref" ]; then
    # Built from the committed tree of REF in a target folder of its own
    # (the one ci/bench.sh uses, so either script reuses the other's build).
    echo "== building $baseline_ref (release) for comparison" >&2
    base_src="$repo/target/bench-baseline/src"
    rm -rf "$base_src"
    mkdir -p "$base_src"
    git archive "$baseline_ref" | tar -x -C "$base_src"
    CARGO_TARGET_DIR="$repo/target/bench-baseline/target" \
        cargo build --release --quiet --manifest-path "$base_src/Cargo.toml" -p reachweaver-mcp
    servers=(--server "$baseline_ref=$repo/target/bench-baseline/target/release/reachweaver-mcp" "${servers[@]}")
fi

mkdir -p target/bench
echo "== measuring" >&2
/usr/bin/python3 ci/bench/load_bench.py --backend tests/fixtures/load-backend \
    "${servers[@]}" ${args[@]+"${args[@]}"} | tee target/bench/load-report.md
echo "== report: target/bench/load-report.md" >&2

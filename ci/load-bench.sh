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

# --baseline-ref is ours; everything else goes to the driver.
# shellcheck source=ci/lib.sh
source ci/lib.sh
take_baseline_ref "$@"

echo "== building (release)" >&2
cargo build --release -p reachweaver-mcp --quiet
servers=(--server "this=$repo/target/release/reachweaver-mcp")

if [ -n "$baseline_ref" ]; then
    base_bin=$(build_baseline "$baseline_ref")
    servers=(--server "$baseline_ref=$base_bin" "${servers[@]}")
fi

mkdir -p target/bench
echo "== measuring" >&2
/usr/bin/python3 ci/bench/load_bench.py --backend tests/fixtures/load-backend \
    "${servers[@]}" ${args[@]+"${args[@]}"} | tee target/bench/load-report.md
echo "== report: target/bench/load-report.md" >&2

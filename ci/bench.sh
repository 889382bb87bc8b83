#!/usr/bin/env bash
# Side-by-side timings of sandboxed tool calls (BENCHMARKS.md says how to
# read them). Release build; every comparison interleaves its methods in one
# run, so a busy machine slows all of them alike.
#
#   bash ci/bench.sh                          # the full set, about 5 minutes
#   bash ci/bench.sh --calls 200              # quicker, noisier
#   bash ci/bench.sh --only-audit             # the audit line per call (and the namespace microbenchmark)
#   bash ci/bench.sh --only-calls --with-pins # also a server with --pin, call for call, and the check alone
#   bash ci/bench.sh --only-startup --startups 60   # spawn to the first answer only
#   bash ci/bench.sh --baseline-ref main      # also build REF and time its server call for call
#   bash ci/bench.sh --compare-server NAME=PATH   # the same with a server binary built elsewhere
#
# Needs: cc, /usr/bin/python3, bwrap (Debian: bubblewrap), unshare (util-linux).
# Writes target/bench/report.md and prints the same tables.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)
work="$repo/target/bench"

# --baseline-ref is ours; everything else goes to the driver.
# shellcheck source=ci/lib.sh
source ci/lib.sh
take_baseline_ref "$@"

missing=()
command -v cc >/dev/null || missing+=("cc (build-essential)")
[ -x /usr/bin/python3 ] || missing+=("/usr/bin/python3 (python3)")
command -v bwrap >/dev/null || missing+=("bwrap (bubblewrap)")
command -v unshare >/dev/null || missing+=("unshare (util-linux)")
if [ ${#missing[@]} -gt 0 ]; then
    echo "ci/bench.sh: missing: ${missing[*]}" >&2
    exit 2
fi

echo "== building (release)" >&2
cargo build --release --workspace --quiet
cargo bench --bench mcp_bench --no-run --quiet

if [ -n "$baseline_ref" ]; then
    base_bin=$(build_baseline "$baseline_ref")
    args+=(--compare-server "$baseline_ref=$base_bin")
fi

rm -rf "$work"
mkdir -p "$work/bin" "$work/root"
cc -O2 -o "$work/bin/noop" ci/bench/noop_backend.c
cc -O2 -o "$work/bin/ns_cost" ci/bench/ns_cost.c
cp ci/bench/py_backend.py "$work/bin/py_backend.py"
chmod 0755 "$work/bin/py_backend.py"

# A private copy of the example workspace with a fresh database, for the
# reference backend's tool list.
cp -r examples/workspace "$work/ws"
rm -f "$work"/ws/data/*.db*
target/release/reachweaver-reference --home="$work/ws" init --format=json >/dev/null

echo "== measuring" >&2
cargo bench --bench mcp_bench --quiet -- --bench \
    --noop "$work/bin/noop" \
    --py "$work/bin/py_backend.py" \
    --reference "$repo/target/release/reachweaver-reference" \
    --workspace "$work/ws" \
    --work "$work" \
    --out "$work/report.md" \
    ${args[@]+"${args[@]}"}
{
    printf '\n### What the namespaces cost, without the rest of the sandbox (ci/bench/ns_cost.c, 500 rounds)\n\n'
    "$work/bin/ns_cost" 500 "$work/bin/noop" "$repo/target/release/reachweaver-mcp"
} | tee -a "$work/report.md"
echo "== report: $work/report.md" >&2

#!/usr/bin/env bash
# Side-by-side timings of sandboxed tool calls (BENCHMARKS.md says how to
# read them). Release build; every comparison interleaves its methods in one
# run, so a busy machine slows all of them alike.
#
#   bash ci/bench.sh                       # the full set, ~5-10 minutes
#   bash ci/bench.sh --calls 200           # quicker, noisier
#   bash ci/bench.sh --compare-server PATH # also time another server build, call for call
#
# Needs: cc, /usr/bin/python3, bwrap (Debian: bubblewrap), unshare (util-linux).
# Writes target/bench/report.md and prints the same tables.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)
work="$repo/target/bench"

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
cargo bench --bench mcp_bench --no-run --quiet 2>/dev/null

rm -rf "$work"
mkdir -p "$work/bin" "$work/root"
cc -O2 -o "$work/bin/noop" ci/bench/noop_backend.c
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
    "$@"
echo "== report: $work/report.md" >&2

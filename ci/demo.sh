#!/usr/bin/env bash
# The README's first command: `bash ci/demo.sh`.
#
# Builds the server and the reference backend (debug), creates the example
# workspace's database if it is missing, and runs one real MCP session through
# `reachweaver-mcp mcp-serve` against examples/workspace: each request and the
# server's pretty-printed reply, then the server's stderr log. Needs only cargo
# and python3.

set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

command -v cargo >/dev/null || { echo "demo: cargo is needed (https://rustup.rs)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "demo: python3 is needed" >&2; exit 1; }

# cargo's own progress stays on screen: a first build takes a few minutes.
echo "# building (debug): cargo build --workspace --bins"
cargo build --workspace --bins

SERVER="$ROOT/target/debug/reachweaver-mcp"
BACKEND="$ROOT/target/debug/reachweaver-reference"
WS="$ROOT/examples/workspace"

if [ ! -f "$WS/data/reachweaver.db" ]; then
    echo "# creating the example database: reachweaver-reference --home=examples/workspace init"
    "$BACKEND" --home="$WS" init --format=json >/dev/null
fi

echo "# server: reachweaver-mcp --backend=target/debug/reachweaver-reference --home=examples/workspace mcp-serve"
python3 "$ROOT/ci/demo_session.py" "$ROOT/tests/clients/plan.json" -- \
    "$SERVER" "--backend=$BACKEND" "--home=$WS" mcp-serve

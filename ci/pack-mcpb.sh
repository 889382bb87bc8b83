#!/usr/bin/env bash
# Build the server and pack it as an MCP Bundle (.mcpb) that a desktop client
# installs with one click: packaging/mcpb/manifest.json plus the binary.
#
# usage: bash ci/pack-mcpb.sh [--debug] [--out FILE]
#   --debug   pack the debug build instead of building the release one (the test command uses this)
#   --out     where to write the bundle (default target/mcpb/reachweaver-mcp.mcpb)
#
# The bundle holds a native binary, so it runs only on the kind of machine it
# was built on; the staged manifest's compatibility.platforms is narrowed to
# that one. The version comes from Cargo.toml. The manifest is validated
# (`mcpb validate`) before `mcpb pack` (npm @anthropic-ai/mcpb, pinned in
# tests/clients/package.json) zips it.

set -euo pipefail
# shellcheck source=ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT" || exit 1

PROFILE=release
OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --debug) PROFILE=debug ;;
        --out) OUT="$2"; shift ;;
        --out=*) OUT="${1#--out=}" ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "pack-mcpb: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

if [ "$PROFILE" = release ]; then
    cargo build --release --locked --bin reachweaver-mcp
else
    cargo build --locked --bin reachweaver-mcp
fi
BIN="$ROOT/target/$PROFILE/reachweaver-mcp"
[ -x "$BIN" ] || { echo "pack-mcpb: no binary at $BIN" >&2; exit 1; }

[ -x "$NODEBIN/mcpb" ] || install_node
have_python() { command -v python3 >/dev/null 2>&1; }
have_python || { echo "pack-mcpb: python3 is needed to stage the manifest" >&2; exit 1; }

VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
case "$(uname -s)" in
    Linux) PLATFORM=linux ;;
    Darwin) PLATFORM=darwin ;;
    *) echo "pack-mcpb: the server runs on Linux and macOS only, not $(uname -s)" >&2; exit 1 ;;
esac

STAGE="$ROOT/target/mcpb/stage"
rm -rf "$STAGE"
mkdir -p "$STAGE/server"
install -m 0755 "$BIN" "$STAGE/server/reachweaver-mcp"
python3 - "$ROOT/packaging/mcpb/manifest.json" "$STAGE/manifest.json" "$VERSION" "$PLATFORM" <<'PY'
import json, sys
src, dst, version, platform = sys.argv[1:5]
m = json.load(open(src, encoding="utf-8"))
m["version"] = version
m.setdefault("compatibility", {})["platforms"] = [platform]
with open(dst, "w", encoding="utf-8") as f:
    json.dump(m, f, indent=2)
    f.write("\n")
PY
for f in README.md LICENSE LICENSE-MIT LICENSE-APACHE; do
    [ -f "$ROOT/$f" ] && cp "$ROOT/$f" "$STAGE/"
done

[ -n "$OUT" ] || OUT="$ROOT/target/mcpb/reachweaver-mcp.mcpb"
mkdir -p "$(dirname "$OUT")"
rm -f "$OUT"
"$NODEBIN/mcpb" validate "$STAGE/manifest.json"
"$NODEBIN/mcpb" pack "$STAGE" "$OUT"
echo "bundle: $OUT"

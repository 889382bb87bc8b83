# shellcheck shell=bash disable=SC2034  # variables are used by the scripts that source this file
# Shared by the ci/ scripts (sourced, not run): where the pinned client tools
# live and how they get there. Everything is installed under target/, so a
# `cargo clean` removes it and nothing touches the system or the user's home.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLIENTS="$ROOT/target/clients"
VENV="$CLIENTS/venv"
PY="$VENV/bin/python"
NODEDIR="$CLIENTS/node"
NODEBIN="$NODEDIR/node_modules/.bin"

# The Python MCP SDK (it brings the mcp-types wire models the validator uses), and ruff for the scripts.
install_venv() {
    local shown=""
    [ -x "$PY" ] && shown=$("$PY" -m pip show mcp 2>/dev/null)
    if printf '%s\n' "$shown" | grep -qx 'Version: 2.3.0' && [ -x "$VENV/bin/ruff" ]; then
        echo "venv with mcp 2.3.0 already in $VENV"
        return 0
    fi
    rm -rf "$VENV"
    mkdir -p "$CLIENTS"
    python3 -m venv "$VENV" && "$PY" -m pip install -q --disable-pip-version-check "mcp==2.3.0" "ruff==0.17.6"
}

# The npm clients, pinned by tests/clients/package-lock.json: the MCP Inspector,
# the TypeScript SDK, the bundle packer, and a Node 22 (the Inspector needs >= 22.19).
install_node() {
    local stamp="$NODEDIR/.lock-sha256"
    local want
    want=$(sha256sum "$ROOT/tests/clients/package-lock.json" | cut -d' ' -f1)
    if [ -d "$NODEDIR/node_modules" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        echo "npm clients already installed from this lockfile in $NODEDIR"
        return 0
    fi
    mkdir -p "$NODEDIR"
    cp "$ROOT/tests/clients/package.json" "$ROOT/tests/clients/package-lock.json" "$NODEDIR/"
    (cd "$NODEDIR" && npm ci --no-audit --no-fund --cache "$CLIENTS/npm-cache") || return 1
    echo "$want" >"$stamp"
}

# The benchmark scripts' `--baseline-ref REF`: sets baseline_ref, and args
# to every other argument in order (they go to the script's driver).
take_baseline_ref() {
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
}

# Builds the server (release) from the committed tree of REF in a target
# folder of its own, kept between runs and shared by the benchmark scripts
# so a second run is quick; prints the binary's path.
build_baseline() {
    local ref="$1" base="$ROOT/target/bench-baseline"
    echo "== building $ref (release) for comparison" >&2
    rm -rf "$base/src"
    mkdir -p "$base/src"
    git -C "$ROOT" archive "$ref" | tar -x -C "$base/src" || return 1
    # tar gives the files the commit's time, which may be older than the
    # last baseline built here: cargo would then keep that build.
    find "$base/src" -type f -exec touch {} + || return 1
    CARGO_TARGET_DIR="$base/target" \
        cargo build --release --quiet --manifest-path "$base/src/Cargo.toml" -p reachweaver-mcp >&2 || return 1
    echo "$base/target/release/reachweaver-mcp"
}

#!/usr/bin/env bash
# The project's test command: `bash ci/test.sh` (CI runs it through .ci/run).
#
# It installs what the checks need (pinned), runs every check, and never
# skips one: a check that cannot run counts as failed. Steps:
#   1. formatting and lints
#   2. build, then the Rust test suite with every server reply logged; the
#      AppArmor profile `sandbox apparmor-profile` prints, compiled by
#      apparmor_parser (ci/apparmor-check.sh says what that proves)
#   3. that log validated against the protocol models of each revision
#   4. real MCP clients (Python SDK, MCP Inspector CLI, TypeScript SDK) in
#      every era they speak, against the reference backend, sandbox required
#   5. the MCP Bundle manifest validated, packed, unpacked and launched
#   6. every fuzz target for a bounded time, from its committed corpus
#   7. the kernel matrix (ci/kernels.sh, root only): Debian's 6.1 and 6.12
#      kernels booted under qemu, every shape in each, each of its checks
#      counted here; then docs/KERNELS.md compared with the table this run
#      measured (ci/kernels/table.py)
# The last line is "N passed, M failed"; the exit code is non-zero if any
# check failed. Cargo and the client installs are cached under target/.

set -uo pipefail

# shellcheck source=ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT" || exit 1

# The client checks run with a throwaway HOME; rustup and cargo must still find their own.
export RUSTUP_HOME="${RUSTUP_HOME:-${HOME:-/root}/.rustup}"
export CARGO_HOME="${CARGO_HOME:-${HOME:-/root}/.cargo}"

WORK="$ROOT/target/ci"
LOGS="$WORK/logs"
WIRE_LOG="$WORK/wire.jsonl"
PLAN="$ROOT/tests/clients/plan.json"
MIN_WIRE_MESSAGES=200

mkdir -p "$WORK" "$LOGS" "$CLIENTS"
rm -f "$LOGS"/*.log

PASSED=0
FAILED=0
FAILED_NAMES=()
SUMMARY=()
declare -A MATRIX
START_ALL=$(date +%s)

say() { printf '\n==> %s\n' "$*"; }

record() { # record NAME OK(0|1) DETAIL
    if [ "$2" = 0 ]; then
        PASSED=$((PASSED + 1))
        SUMMARY+=("pass  $1${3:+  ($3)}")
    else
        FAILED=$((FAILED + 1))
        FAILED_NAMES+=("$1")
        SUMMARY+=("FAIL  $1${3:+  ($3)}")
    fi
}

# check NAME CMD... : run one check, keep its output in a log, count it.
check() {
    local name="$1"
    shift
    local log
    log="$LOGS/$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_').log"
    local t0=$SECONDS
    "$@" >"$log" 2>&1
    local rc=$?
    local dt=$((SECONDS - t0))
    LAST_LOG="$log"
    if [ $rc = 0 ]; then
        echo "pass  $name (${dt}s)"
        record "$name" 0 "${dt}s"
    else
        echo "FAIL  $name (exit $rc, ${dt}s); last lines of $log:"
        tail -n 60 "$log" | sed 's/^/      /'
        record "$name" 1 "exit $rc"
    fi
    return $rc
}

have() { command -v "$1" >/dev/null 2>&1; }

# Checks that start the binaries fail, rather than run stale ones, when this run's build failed.
BUILD_OK=0
built() {
    if [ "$BUILD_OK" != 1 ]; then
        echo "not run: this run's cargo build failed, so the binaries under target/ are not this tree's"
        return 1
    fi
    "$@"
}

apt_install() {
    if [ "$(id -u)" != 0 ]; then
        echo "need the Debian packages $* and cannot install them without root" >&2
        return 1
    fi
    if [ -z "${APT_UPDATED:-}" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq || return 1
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# ---------------------------------------------------------------------------
say "tools"
# The toolchain comes with the machine; everything else is installed here.
for tool in cargo rustc python3; do
    if ! have "$tool"; then
        echo "missing $tool"
        record "tools: $tool present" 1
    fi
done
have cargo-clippy || cargo clippy --version >/dev/null 2>&1 || record "tools: clippy present" 1 "rustup component add clippy"
cargo fmt --version >/dev/null 2>&1 || record "tools: rustfmt present" 1 "rustup component add rustfmt"
# The sandbox tests drop to an unprivileged user with setpriv (util-linux).
have setpriv || apt_install util-linux || record "tools: setpriv (util-linux) installed" 1
# ci/piped-session.sh checks the server's answers with jq, as docs/CI.md does.
have jq || apt_install jq || record "tools: jq installed" 1
# ci/apparmor-check.sh compiles the printed AppArmor profile with apparmor_parser.
have apparmor_parser || [ -x /usr/sbin/apparmor_parser ] || apt_install apparmor || record "tools: apparmor_parser (apparmor) installed" 1
if ! have node || ! have npm; then
    apt_install nodejs npm || record "tools: node and npm installed" 1
fi
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    apt_install python3-venv || record "tools: python3-venv installed" 1
fi
echo "cargo $(cargo --version | cut -d' ' -f2), python $(python3 -c 'import sys; print(sys.version.split()[0])'), node $(node --version 2>/dev/null), npm $(npm --version 2>/dev/null), setpriv $(have setpriv && echo yes || echo NO), uid $(id -u)"

# ---------------------------------------------------------------------------
say "1. formatting and lints"
check "cargo fmt --check" cargo fmt --all -- --check
check "cargo clippy -D warnings" cargo clippy --workspace --all-targets -- -D warnings
# macOS is built from here but runs only on a Mac (ci/macos-check.sh): the
# macOS code must at least compile and lint for both Apple targets. The
# reference backend is left out: its bundled SQLite needs a C cross-compiler.
apple_check() {
    local target="$1"
    rustup target list --installed 2>/dev/null | grep -qx "$target" || rustup target add "$target" || return 1
    cargo clippy -p reachweaver-mcp --all-targets --target "$target" -- -D warnings
}
for target in x86_64-apple-darwin aarch64-apple-darwin; do
    check "macOS code compiles and lints ($target)" apple_check "$target"
done
# The server's source layout: no import circle between its modules, no file
# over 1,000 lines before its unit tests. Standard library only, so the
# system python3 runs them before the client venv exists.
check "no import circle between the server's modules (ci/check_import_cycles.py)" \
    python3 ci/check_import_cycles.py src
check "file size check self-test (1,001 lines fail, 1,000 pass)" python3 ci/check_file_sizes.py --self-test
check "no source file over 1,000 lines before its unit tests (ci/check_file_sizes.py)" \
    python3 ci/check_file_sizes.py src
# A new member of the layer list must fail the build at every place
# sandbox/LAYERS.md names, so no place handles it by accident.
check "a new Layer member breaks the build at every place LAYERS.md lists (ci/check_layer_exhaustive.sh)" \
    bash ci/check_layer_exhaustive.sh

# ---------------------------------------------------------------------------
say "2. build and Rust tests"
check "cargo build" cargo build --workspace --all-targets && BUILD_OK=1

if [ "$(id -u)" != 0 ]; then
    # The sandbox tests prove what root and an unprivileged user can and cannot do; both need root to start.
    echo "not root: the sandbox tests (tests/suite/sandbox_*.rs) need root, so this run cannot pass"
    record "running as root for the sandbox tests" 1 "uid $(id -u)"
fi

rm -f "$WIRE_LOG"
: >"$WIRE_LOG"
TEST_LOG="$LOGS/cargo-test.log"
T0=$SECONDS
RWMCP_WIRE_LOG="$WIRE_LOG" cargo test --workspace --no-fail-fast >"$TEST_LOG" 2>&1
TEST_RC=$?
TEST_SECS=$((SECONDS - T0))
read -r CT_PASS CT_FAIL CT_IGN CT_SUITES < <(awk '
    /^test result:/ {
        for (i = 1; i <= NF; i++) {
            if ($(i+1) ~ /^passed/) p += $i
            if ($(i+1) ~ /^failed/) f += $i
            if ($(i+1) ~ /^ignored/) g += $i
        }
        s++
    }
    END { print p+0, f+0, g+0, s+0 }' "$TEST_LOG")
awk '/^ *(Running|Doc-tests) / { suite = $2 } /^test result:/ { sub(/^test result: /, ""); print "  " suite ": " $0 }' "$TEST_LOG"
PASSED=$((PASSED + CT_PASS))
FAILED=$((FAILED + CT_FAIL))
SUMMARY+=("$([ "$CT_FAIL" = 0 ] && echo pass || echo FAIL)  cargo test: $CT_PASS passed, $CT_FAIL failed, $CT_IGN ignored in $CT_SUITES suites (${TEST_SECS}s)")
if [ "$CT_PASS" = 0 ]; then
    record "cargo test ran tests" 1 "no test passed or none ran"
fi
if [ "$CT_IGN" != 0 ]; then
    echo "cargo test reports $CT_IGN ignored tests: nothing may be skipped"
    record "no ignored Rust tests" 1 "$CT_IGN ignored"
fi
while read -r failed_test; do
    FAILED_NAMES+=("cargo test: $failed_test")
done < <(sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$TEST_LOG")
if [ "$CT_FAIL" != 0 ] || [ $TEST_RC != 0 ]; then
    grep -E '^test .* FAILED$|panicked at|^error(\[|:)' "$TEST_LOG" | head -80 | sed 's/^/      /'
    echo "      (full output: $TEST_LOG)"
fi
if [ $TEST_RC != 0 ] && [ "$CT_FAIL" = 0 ]; then
    # A build error or a crashed test binary prints no failed count of its own.
    record "cargo test ran to completion" 1 "exit $TEST_RC"
    tail -n 40 "$TEST_LOG" | sed 's/^/      /'
fi
# The sandbox tests are modules of the one integration binary
# (tests/suite/sandbox_*.rs): each must have reported a result for every
# test it defines, so a module dropped from the suite, filtered out or cut
# short fails here rather than passing unnoticed.
for f in tests/suite/sandbox_*.rs; do
    [ -e "$f" ] || { record "sandbox tests present (tests/suite/sandbox_*.rs)" 1 "none found"; break; }
    suite=$(basename "$f" .rs)
    defined=$(grep -c '#\[test\]' "$f")
    reported=$(grep -cE "^test suite::$suite::[A-Za-z0-9_]+ \.\.\. (ok|FAILED)$" "$TEST_LOG")
    if [ "$defined" = 0 ] || [ "$reported" != "$defined" ]; then
        record "sandbox suite $suite ran" 1 "$reported of $defined tests reported in the cargo test output"
    fi
done

# `cargo install --path .` must install the server and nothing else (the
# reference backend is a workspace member, not part of the package).
install_server_only() {
    local dest="$WORK/install"
    rm -rf "$dest"
    cargo install --quiet --path . --debug --locked --target-dir "$ROOT/target" --root "$dest" || return 1
    local got
    got="$(ls "$dest/bin")"
    echo "installed: $got"
    [ "$got" = "reachweaver-mcp" ] && "$dest/bin/reachweaver-mcp" --version
}
check "cargo install --path . installs reachweaver-mcp only" install_server_only
check "AppArmor profile compiles with apparmor_parser (ci/apparmor-check.sh)" \
    built bash ci/apparmor-check.sh "$ROOT/target/debug/reachweaver-mcp"

# ---------------------------------------------------------------------------
say "3. wire validation"
check "install Python mcp==2.3.0 (with mcp-types) and ruff" install_venv
lint_python() {
    "$VENV/bin/ruff" check --config ci/ruff.toml ci tests/clients &&
        "$VENV/bin/ruff" format --check --config ci/ruff.toml ci tests/clients
}
check "ruff check + format --check (Python scripts)" lint_python
check "wire validator self-test (rejects broken messages)" "$PY" ci/validate_wire.py --self-test
check "wire log valid per revision (mcp-types + golden shapes)" "$PY" ci/validate_wire.py --min "$MIN_WIRE_MESSAGES" "$WIRE_LOG"
grep -E 'messages valid|valid, ' "$LAST_LOG"

# ---------------------------------------------------------------------------
say "4. real MCP clients"
check "install npm clients (inspector 2.12.0, sdk 1.32.2, node 22.23.5, mcpb 2.1.2)" install_node
# Node 22 from the npm package comes first on PATH: the Inspector's package declares
# Node >= 22.19 (its CLI also runs on Node 20, with an EBADENGINE warning; README).
cp tests/clients/sdk_client.mjs "$NODEDIR/"

SERVER="$ROOT/target/debug/reachweaver-mcp"
BACKEND="$ROOT/target/debug/reachweaver-reference"
WS="$WORK/workspace"
make_workspace() {
    rm -rf "$WS"
    cp -R examples/workspace "$WS" || return 1
    rm -f "$WS"/data/*.db "$WS"/data/*.db-*
    "$BACKEND" --home="$WS" init --format=json
}
check "fresh example workspace (reference init)" built make_workspace
check "reference catalog valid against docs/catalog.schema.json, broken ones rejected (jsonschema)" \
    built "$PY" ci/check_catalog.py docs/catalog.schema.json "$BACKEND" "$WS"
SERVE=("$SERVER" "--backend=$BACKEND" "--home=$WS" mcp-serve)
echo "server: ${SERVE[*]}"

CLIENT_HOME="$(mktemp -d "${TMPDIR:-/tmp}/rwmcp-client-home.XXXXXX")"
client_check() { # client_check CLIENT COLUMN NAME CMD...
    local client="$1" column="$2" name="$3"
    shift 3
    if check "$name" built env HOME="$CLIENT_HOME" PATH="$NODEBIN:$PATH" "$@"; then
        MATRIX["$client|$column"]=pass
    else
        MATRIX["$client|$column"]=FAIL
    fi
}
for era in modern auto legacy 2025-06-18 2025-03-26 2024-11-05; do
    client_check python "$era" "python mcp 2.3.0: $era" "$PY" tests/clients/py_client.py "$era" "$PLAN" -- "${SERVE[@]}"
done
for era in legacy modern auto; do
    client_check inspector "$era" "inspector 2.12.0 --cli: $era (tools/list --strict + calls)" \
        "$PY" tests/clients/inspector.py "$era" "$PLAN" "$NODEBIN/mcp-inspector" -- "${SERVE[@]}"
done
client_check tssdk legacy "typescript sdk 1.32.2: legacy" "$NODEBIN/node" "$NODEDIR/sdk_client.mjs" "$PLAN" -- "${SERVE[@]}"
check "piped session (printf | mcp-serve): every answer, layers attested (ci/piped-session.sh, as docs/CI.md)" \
    built bash ci/piped-session.sh "$SERVER" "$BACKEND" "$WS" campaign_check '{"campaign":"campaigns/spring-launch.yaml"}'

# ---------------------------------------------------------------------------
say "5. MCP Bundle"
MANIFEST="$ROOT/packaging/mcpb/manifest.json"
MCPB_SCHEMA="$NODEDIR/node_modules/@anthropic-ai/mcpb/schemas/mcpb-manifest-v0.3.schema.json"
check "mcpb validate packaging/mcpb/manifest.json" env HOME="$CLIENT_HOME" PATH="$NODEBIN:$PATH" "$NODEBIN/mcpb" validate "$MANIFEST"
check "manifest valid against the bundle JSON schema (jsonschema)" "$PY" ci/check_mcpb.py schema "$MANIFEST" "$MCPB_SCHEMA"
BUNDLE="$WORK/reachweaver-mcp-debug.mcpb"
rm -f "$BUNDLE"
check "pack the bundle (ci/pack-mcpb.sh --debug)" built bash ci/pack-mcpb.sh --debug --out "$BUNDLE"
check "bundle installs and its args template serves (python mcp, legacy + modern)" \
    built env HOME="$CLIENT_HOME" PATH="$NODEBIN:$PATH" "$PY" ci/check_mcpb.py launch "$BUNDLE" "$NODEBIN/mcpb" "$BACKEND" "$WS" "$PLAN"

rm -rf "$CLIENT_HOME"

# ---------------------------------------------------------------------------
say "6. fuzzing (bounded: ${FUZZ_SECONDS:-30} s per target, from the committed corpus)"
check "cargo-fuzz 0.13.2 installed" bash -c 'cargo fuzz --version 2>/dev/null | grep -q "0.13.2" || cargo install --quiet cargo-fuzz --version 0.13.2 --locked'
check "fuzz targets run clean (frame, jsonrpc, validate, confine)" sh ci/fuzz.sh "${FUZZ_SECONDS:-30}"

# ---------------------------------------------------------------------------
say "7. kernel matrix (ci/kernels.sh: Debian's 6.1 and 6.12 booted under qemu, and this kernel natively)"
# Every check the matrix makes counts here, one by one; the matrix itself
# fails loudly (never skips) when not root. Its results are read from this
# run only.
KERNELS_RESULTS="$ROOT/target/kernels/results.json"
KERNELS_LOG="$LOGS/kernels.log"
rm -f "$KERNELS_RESULTS" 2>/dev/null
KERNELS_MARK="$WORK/kernels.started"
touch "$KERNELS_MARK"
T0=$SECONDS
# The guests run this run's debug build: the binaries every other check ran.
built env KERNELS_BIN="$ROOT/target/debug" bash ci/kernels.sh >"$KERNELS_LOG" 2>&1
KERNELS_RC=$?
KERNELS_SECS=$((SECONDS - T0))
grep -E '^(kernel |accelerator:|guest of |host )' "$KERNELS_LOG" | sed 's/^/  /'
if [ "$KERNELS_RESULTS" -nt "$KERNELS_MARK" ]; then
    while IFS=$'\t' read -r ok name detail; do
        if [ "$ok" = 1 ]; then echo "pass  kernel matrix: $name"; else echo "FAIL  kernel matrix: $name ($detail)"; fi
        record "kernel matrix: $name" "$([ "$ok" = 1 ] && echo 0 || echo 1)" "$detail"
    done < <(python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["checks"]:
    print("1" if r["ok"] else "0", r["name"], " ".join(r["detail"].split())[:300], sep="\t")' "$KERNELS_RESULTS")
    check "docs/KERNELS.md is the table this run measured (ci/kernels/table.py check)" \
        python3 ci/kernels/table.py check "$KERNELS_RESULTS" docs/KERNELS.md
else
    record "kernel matrix ran to its results (ci/kernels.sh)" 1 "exit $KERNELS_RC, no $KERNELS_RESULTS of this run"
    tail -n 30 "$KERNELS_LOG" | sed 's/^/      /'
fi
SUMMARY+=("$([ "$KERNELS_RC" = 0 ] && echo pass || echo FAIL)  kernel matrix: $(tail -n 1 "$KERNELS_LOG") (exit $KERNELS_RC, ${KERNELS_SECS}s; $KERNELS_LOG)")
# A non-zero exit with no failed check of its own (a crash after the
# results were written) fails too.
if [ "$KERNELS_RC" != 0 ] && [ "$KERNELS_RESULTS" -nt "$KERNELS_MARK" ] &&
    [ "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["failed"])' "$KERNELS_RESULTS")" = 0 ]; then
    record "kernel matrix exits 0 when no check failed (ci/kernels.sh)" 1 "exit $KERNELS_RC"
fi

# ---------------------------------------------------------------------------
say "client x era matrix (against the reference backend, --sandbox require)"
cell() { printf '%-12s' "${MATRIX["$1|$2"]:--}"; }
printf '%-24s%-12s%-12s%-12s%-12s%-12s%-12s\n' "client" "2026-07-28" "auto" "2025-11-25" "2025-06-18" "2025-03-26" "2024-11-05"
printf '%-24s' "python mcp 2.3.0"; for c in modern auto legacy 2025-06-18 2025-03-26 2024-11-05; do cell python $c; done; echo
printf '%-24s' "inspector 2.12.0 --cli"; for c in modern auto legacy 2025-06-18 2025-03-26 2024-11-05; do cell inspector $c; done; echo
printf '%-24s' "typescript sdk 1.32.2"; for c in modern auto legacy 2025-06-18 2025-03-26 2024-11-05; do cell tssdk $c; done; echo
echo "(- : the client cannot speak that revision; the Rust suite and the wire validator cover it)"

say "summary"
printf '  %s\n' "${SUMMARY[@]}"
echo "  total time $(( $(date +%s) - START_ALL ))s; logs in $LOGS"
if [ "$FAILED" != 0 ]; then
    echo "failed checks:"
    printf '  %s\n' "${FAILED_NAMES[@]}"
fi
echo
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]

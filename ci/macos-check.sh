#!/usr/bin/env bash
# The macOS proof: `bash ci/macos-check.sh` on a Mac (or a macOS CI machine).
#
# Builds the server and the reference backend, runs the unit tests, starts
# each kind of backend a Mac has under `reachweaver-mcp sandbox run` (the
# read-only tool policy): a python.org framework Python, a Homebrew Python
# through a venv and without one (`#!$(brew --prefix)/bin/python3`), a
# uv-managed Python directly and through a uv-made venv (the shape of a
# `uv tool install`), a `#!/usr/bin/env python3` script found on PATH, and
# the compiled reference backend. A `#!/usr/bin/env` script whose program is
# not on PATH must be refused at start.
# Each Python imports sqlite3, ssl, hashlib, lzma, asyncio and
# multiprocessing, takes a multiprocessing lock (a POSIX semaphore), runs an
# asyncio loop and opens an SQLite database read-only under the home. Then
# `sandbox status` (a trial run under the real generated profile), `sandbox
# probe` (every escape attempt must be refused, every allowed one must work,
# every control must work outside but those that need a GUI login or a
# launchd user domain, which say "not applicable here"), a pyenv shim and the
# pip --user layout of a framework Python, and a real MCP session against
# the reference backend.
#
# A kind of Python that is not installed is listed as "not installed" and
# counts neither as passed nor as failed; with MACOS_CHECK_REQUIRE_ALL=1
# (what CI sets) it counts as failed. The last line is "N passed, M failed";
# the exit code is non-zero if any check failed.

set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1

if [ "$(uname -s)" != "Darwin" ]; then
    echo "macos-check: this is the macOS proof; run it on a Mac (uname says $(uname -s))" >&2
    exit 2
fi

REQUIRE_ALL="${MACOS_CHECK_REQUIRE_ALL:-0}"
LOGS="$ROOT/target/macos-check"
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log

PASSED=0
FAILED=0
MISSING=0
SUMMARY=()

record() { # record NAME STATUS(0 ok, 1 failed, 2 not installed) DETAIL
    case "$2" in
        0)
            PASSED=$((PASSED + 1))
            SUMMARY+=("pass   $1${3:+  ($3)}")
            ;;
        2)
            if [ "$REQUIRE_ALL" = 1 ]; then
                FAILED=$((FAILED + 1))
                SUMMARY+=("FAIL   $1  (not installed, and MACOS_CHECK_REQUIRE_ALL=1)")
            else
                MISSING=$((MISSING + 1))
                SUMMARY+=("absent $1  (not installed here: not checked)")
            fi
            ;;
        *)
            FAILED=$((FAILED + 1))
            SUMMARY+=("FAIL   $1${3:+  ($3)}  log: ${LOGS#"$ROOT"/}/$(logname "$1")")
            ;;
    esac
}

logname() { printf '%s.log' "$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_')"; }

# check NAME CMD... : run one check with its output in a log.
check() {
    local name="$1"
    shift
    local log rc
    log="$LOGS/$(logname "$name")"
    printf '==> %s\n' "$name"
    "$@" >"$log" 2>&1
    rc=$?
    if [ "$rc" = 0 ]; then
        record "$name" 0
    else
        tail -n 20 "$log" | sed 's/^/    /'
        record "$name" 1 "exit $rc"
    fi
}

SERVER="$ROOT/target/debug/reachweaver-mcp"
BACKEND="$ROOT/target/debug/reachweaver-reference"
WS="$ROOT/examples/workspace"

check "build (server and reference backend)" cargo build --workspace --bins
check "unit tests (cargo test --lib)" cargo test --lib
# status runs /usr/bin/true under the real generated profile: on macOS 26
# a profile dyld cannot live with stops it before main (SIGABRT).
status_applies() {
    local out
    out="$("$SERVER" sandbox status)" || return 1
    printf '%s\n' "$out"
    printf '%s\n' "$out" | grep -q "available  sandbox-exec" &&
        printf '%s\n' "$out" | grep -q "^trial run: passed"
}
check "sandbox status: a trial run under the generated profile passed" status_applies

# A folder under the home (not the home itself) with a root and a database.
CHECK_HOME="$(mktemp -d "$HOME/.reachweaver-macos-check.XXXXXX")"
trap 'rm -rf "$CHECK_HOME"' EXIT
mkdir -p "$CHECK_HOME/root" "$CHECK_HOME/db"
DB="$CHECK_HOME/db/check.db"
python3 - "$DB" <<'EOF' || record "create the check database" 1
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("create table t (x integer)")
con.execute("insert into t values (42)")
con.commit()
EOF

# The script each Python runs inside the sandbox.
PY_BODY='import sqlite3, ssl, hashlib, lzma, asyncio, multiprocessing, sys
hashlib.sha256(b"x").hexdigest()
lzma.compress(b"x")
ssl.create_default_context()
lock = multiprocessing.Lock()
with lock:
    pass
asyncio.run(asyncio.sleep(0))
con = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
assert con.execute("select x from t").fetchone() == (42,)
print("ok", sys.version.split()[0], sys.executable)
'

# run_python NAME INTERPRETER: a script whose #! names the interpreter (as
# an installed backend's does), run under the read-only policy.
run_python() {
    local name="$1" interp="$2"
    if [ ! -x "$interp" ]; then
        record "$name" 2
        return
    fi
    local script
    script="$CHECK_HOME/$(printf '%s' "$name" | tr -c 'A-Za-z0-9' '-')"
    printf '#!%s\n%s' "$interp" "$PY_BODY" >"$script"
    chmod 755 "$script"
    check "$name" python_under_sandbox "$script"
}

python_under_sandbox() {
    local out
    out="$("$SERVER" --db "$DB" sandbox run --root "$CHECK_HOME/root" -- "$1" "$DB")"
    local rc=$?
    printf '%s\n' "$out"
    [ "$rc" = 0 ] && [ "${out%% *}" = ok ]
}

# run_env_python NAME BINDIR: a `#!/usr/bin/env python3` script, with BINDIR
# first on PATH; the run must use BINDIR's python3 (not Apple's
# /usr/bin/python3, which `env` could reach inside the sandbox).
run_env_python() {
    local name="$1" bindir="$2"
    if [ ! -x "$bindir/python3" ]; then
        record "$name" 2
        return
    fi
    local script="$CHECK_HOME/env-python3"
    printf '#!/usr/bin/env python3\n%s' "$PY_BODY" >"$script"
    chmod 755 "$script"
    check "$name" env_python_under_sandbox "$script" "$bindir"
}

env_python_under_sandbox() {
    local out rc
    out="$(PATH="$2:$PATH" "$SERVER" --db "$DB" sandbox run --root "$CHECK_HOME/root" -- "$1" "$DB")"
    rc=$?
    printf '%s\n' "$out"
    [ "$rc" = 0 ] && [ "${out%% *}" = ok ] || return 1
    case "$out" in
        *" $2/"*) ;;
        *)
            echo "the run's sys.executable is not under $2"
            return 1
            ;;
    esac
}

# A `#!/usr/bin/env NAME` whose NAME is not on PATH: refused at start, with
# a message naming the line, instead of letting env search inside the sandbox.
env_missing_is_refused() {
    local script="$CHECK_HOME/env-missing"
    printf '#!/usr/bin/env reachweaver-no-such-interpreter\nprint("ran")\n' >"$script"
    chmod 755 "$script"
    local out rc
    out="$("$SERVER" sandbox run --root "$CHECK_HOME/root" -- "$script" 2>&1)"
    rc=$?
    printf '%s\n' "$out"
    [ "$rc" != 0 ] || return 1
    printf '%s' "$out" | grep -q "reachweaver-no-such-interpreter" || return 1
    ! printf '%s' "$out" | grep -q '^ran$'
}

# 1. python.org's framework build.
FRAMEWORK_PY=/nonexistent/framework-python
for v in 3.14 3.13 3.12 3.11 3.10; do
    p="/Library/Frameworks/Python.framework/Versions/$v/bin/python3"
    if [ -x "$p" ]; then
        FRAMEWORK_PY="$p"
        break
    fi
done
run_python "python.org framework Python" "$FRAMEWORK_PY"

# 2. Homebrew's Python, through a venv in the home.
BREW_PY=""
if command -v brew >/dev/null; then
    for v in 3.13 3.12 3.11; do
        p="$(brew --prefix)/opt/python@$v/bin/python$v"
        if [ -x "$p" ]; then
            BREW_PY="$p"
            break
        fi
    done
fi
if [ -n "$BREW_PY" ] && "$BREW_PY" -m venv "$CHECK_HOME/venv" >"$LOGS/venv.log" 2>&1; then
    run_python "Homebrew Python in a venv" "$CHECK_HOME/venv/bin/python3"
    # 2b. The same venv through `#!/usr/bin/env python3`, found on PATH at start.
    run_env_python "#!/usr/bin/env python3 (a venv first on PATH)" "$CHECK_HOME/venv/bin"
else
    record "Homebrew Python in a venv" 2
    record "#!/usr/bin/env python3 (a venv first on PATH)" 2
fi

# 2c. Homebrew's Python with no venv, through the prefix's bin link (the
# chain never crosses opt/python@3.X, which its libraries are loaded through).
BREW_BIN_PY=/nonexistent/homebrew-bin-python3
if command -v brew >/dev/null && [ -x "$(brew --prefix)/bin/python3" ]; then
    BREW_BIN_PY="$(brew --prefix)/bin/python3"
fi
run_python "Homebrew Python without a venv (\$(brew --prefix)/bin/python3)" "$BREW_BIN_PY"

# 3. A uv-managed Python (uv python install 3.12).
UV_PY=""
if command -v uv >/dev/null; then
    UV_PY="$(uv python find --managed-python 3.12 2>/dev/null || uv python find 3.12 2>/dev/null || true)"
fi
run_python "uv-managed Python" "${UV_PY:-/nonexistent/uv-python}"

# 3b. A venv uv makes from its managed Python: the shape `uv tool install`
# gives a tool (its bin/python links to the managed Python).
if [ -n "$UV_PY" ] && uv venv --quiet --python "$UV_PY" "$CHECK_HOME/uv-tool-venv" >"$LOGS/uv-venv.log" 2>&1; then
    run_python "uv venv from a uv-managed Python (uv tool shape)" "$CHECK_HOME/uv-tool-venv/bin/python3"
else
    record "uv venv from a uv-managed Python (uv tool shape)" 2
fi

# 3c. Fail closed on an env line whose program is not on PATH.
check "#!/usr/bin/env with a program not on PATH is refused at start" env_missing_is_refused

# 3d. A version manager's shim (pyenv's and asdf's are bash scripts that run
# the manager) is refused at start, naming the manager and the fix, instead
# of failing inside the sandbox without saying why. The shim is made here,
# in pyenv's layout; pyenv itself is not needed.
shim_is_refused() {
    local shim="$CHECK_HOME/.pyenv/shims/python3"
    mkdir -p "$(dirname "$shim")"
    printf '#!/usr/bin/env bash\nexec pyenv exec "$(basename "$0")" "$@"\n' >"$shim"
    chmod 755 "$shim"
    local script="$CHECK_HOME/shim-backend"
    printf '#!%s\nprint("ran")\n' "$shim" >"$script"
    chmod 755 "$script"
    local out rc
    out="$("$SERVER" sandbox run --root "$CHECK_HOME/root" -- "$script" 2>&1)"
    rc=$?
    printf '%s\n' "$out"
    [ "$rc" != 0 ] || return 1
    printf '%s' "$out" | grep -q "pyenv shim" || return 1
    printf '%s' "$out" | grep -q "pyenv which python3" || return 1
    ! printf '%s' "$out" | grep -q '^ran$'
}
check "a pyenv shim as the interpreter is refused at start, naming the fix" shim_is_refused

# 3e. pip install --user on the framework Python: the backend in
# ~/Library/Python/3.X/bin imports from ~/Library/Python/3.X/lib/python/
# site-packages. Laid out under a stand-in HOME, so the real one is untouched.
pip_user_layout() {
    local ver fake script out rc
    ver="$("$FRAMEWORK_PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" || return 1
    fake="$CHECK_HOME/userhome"
    mkdir -p "$fake/Library/Python/$ver/lib/python/site-packages" "$fake/Library/Python/$ver/bin"
    printf 'VALUE = "user-site"\n' >"$fake/Library/Python/$ver/lib/python/site-packages/rwcheck_user.py"
    script="$fake/Library/Python/$ver/bin/rw-user"
    printf '#!%s\nimport rwcheck_user\nprint("ok", rwcheck_user.VALUE)\n' "$FRAMEWORK_PY" >"$script"
    chmod 755 "$script"
    out="$(HOME="$fake" "$SERVER" sandbox run --root "$CHECK_HOME/root" -- "$script")"
    rc=$?
    printf '%s\n' "$out"
    [ "$rc" = 0 ] && [ "$out" = "ok user-site" ]
}
if [ -x "$FRAMEWORK_PY" ]; then
    check "pip --user layout of a framework Python (~/Library/Python/3.X)" pip_user_layout
else
    record "pip --user layout of a framework Python (~/Library/Python/3.X)" 2
fi

# 4. The compiled reference backend, on the example workspace.
if [ ! -f "$WS/data/reachweaver.db" ]; then
    "$BACKEND" --home="$WS" init --format=json >"$LOGS/init.log" 2>&1 || record "create the example database" 1
fi
compiled_under_sandbox() {
    local out
    out="$("$SERVER" --home "$WS" sandbox run --root "$WS" -- "$BACKEND" --home="$WS" doctor --format=json)"
    local rc=$?
    printf '%s\n' "$out"
    # The backend answers with one JSON document (exit 0, or 1 for findings).
    [ "$rc" -le 1 ] && printf '%s' "$out" | python3 -c "import json, sys; json.load(sys.stdin)"
}
check "compiled backend (reference) under sandbox run" compiled_under_sandbox

# 5. Nothing gets out, and what must work works; and each refusal means
# something: every escape attempt worked outside the sandbox first.
PROBE_JSON="$LOGS/probe.json"
probe_holds() {
    "$SERVER" sandbox probe --json >"$PROBE_JSON"
    local rc=$?
    cat "$PROBE_JSON"
    return "$rc"
}
check "sandbox probe (no escape, no wrongly refused attempt)" probe_holds
probe_controls() {
    python3 - "$PROBE_JSON" <<'EOF_PY'
import json, sys
report = json.load(open(sys.argv[1]))
failed = [a for a in report["attempts"] if a["control"] == "failed"]
for a in failed:
    print("control failed outside the sandbox:", a["name"], "-", a["what"])
# Controls that need a GUI login or a launchd user domain say so; they do
# not fail the check, every other control must work.
skipped = [a for a in report["attempts"] if a["result"] == "not applicable here"]
for a in skipped:
    print("not applicable here:", a["name"], "-", a["detail"])
print(len(report["attempts"]), "attempts,", len(failed), "without a working control,",
      len(skipped), "not applicable here")
sys.exit(1 if failed or not report["attempts"] else 0)
EOF_PY
}
check "sandbox probe: every escape attempt worked outside first (positive controls)" probe_controls

# 6. A real MCP session, sandbox required.
mcp_session() {
    local out
    out="$(python3 "$ROOT/ci/demo_session.py" "$ROOT/tests/clients/plan.json" -- \
        "$SERVER" "--backend=$BACKEND" "--home=$WS" mcp-serve --sandbox require)"
    local rc=$?
    printf '%s\n' "$out"
    [ "$rc" = 0 ] || return 1
    if printf '%s' "$out" | grep -q 'sandbox_failed\|backend_failed'; then
        echo "a tool call failed in the sandbox"
        return 1
    fi
}
check "MCP session against the reference backend" mcp_session

printf '\n'
for line in "${SUMMARY[@]}"; do
    printf '%s\n' "$line"
done
if [ "$MISSING" -gt 0 ]; then
    printf '%s kind(s) of Python not installed here were not checked\n' "$MISSING"
fi
printf '%s passed, %s failed\n' "$PASSED" "$FAILED"
[ "$FAILED" = 0 ]

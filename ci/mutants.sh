#!/usr/bin/env bash
# Mutation testing of the security-critical pure modules; slow, so not a
# step of ci/test.sh. Run it by hand or in a nightly job: `bash ci/mutants.sh`.
#
# cargo-mutants makes one small change at a time in each file below (a
# comparison turned around, an operator swapped, a function's body replaced
# by a constant) and runs the library's unit tests against each. A change
# the tests still pass is "missed": behaviour no test pins. The script
# prints, per file, the mutants found, those that did not build (unviable),
# those caught (a test failed or timed out) and those missed, with the score
# caught / viable; then every missed mutant by name. A miss names the file,
# line and change: write the test that fails under it, or, when the change
# cannot alter behaviour, exclude it by name in .cargo/mutants.toml with why.
# docs/MUTANTS.md says more and keeps the last run's table.
#
# Exit: 0 when every file's score and the total are at least MIN_SCORE
# percent; 1 when one is not; 2 when cargo-mutants is missing, cannot run
# (a failing unmutated baseline included) or tested no mutant. A file none
# of whose mutants was tested (MUTANTS_RE matched none there) shows "none
# tested", and the exit status speaks for the other files only.
#
# Usage: bash ci/mutants.sh [FILE...]     (default: every file in FILES)
# Needs: cargo-mutants 27.x: cargo install cargo-mutants --locked --version '^27'
# Environment:
#   MIN_SCORE         percent of viable mutants that must be caught (95)
#   MUTANTS_JOBS      mutants built and tested at once (1)
#   MUTANTS_TIMEOUT   seconds one test run may take before it counts as a
#                     timeout, which is caught (300)
#   MUTANTS_OUT       where cargo-mutants writes mutants.out (target/mutants)
#   MUTANTS_BASELINE  `run` (default) tests the unmutated tree first; `skip`
#                     trusts it
#   MUTANTS_RE        only the mutants whose names match this regex (to
#                     re-run a miss: its name as printed, or its function)
#   MUTANTS_SHARD     only one shard of the mutants, every n-th one, as
#                     K/N (0/2: the first, third, fifth...): a sample, for a
#                     file too big for the time at hand
#   MUTANTS_TESTS     only the unit tests whose names contain this (a test
#                     filter, such as `sandbox::linux::` for the seccomp and
#                     Landlock files): much faster, and fewer tests can only
#                     catch fewer mutants, so its score is a lower bound
#   CARGO_TARGET_DIR  an absolute path: with one job, every build uses it, so the
#                     dependencies are built once across runs
#
# Mutants that no test can tell apart from the original (equivalent ones)
# are excluded by name, each with its reason, in .cargo/mutants.toml, never
# a whole file.

set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2

FILES=(
    src/sandbox/guard.rs
    src/confine.rs
    src/protect.rs
    src/validate.rs
    src/redact/mod.rs
    src/redact/anchors.rs
    src/redact/spans.rs
    src/redact/names.rs
    src/redact/shapes.rs
    src/argv.rs
    src/sandbox/linux/seccomp.rs
    src/sandbox/linux/landlock.rs
)
if [ $# -gt 0 ]; then
    FILES=("$@")
fi

MIN_SCORE="${MIN_SCORE:-95}"
JOBS="${MUTANTS_JOBS:-1}"
TIMEOUT="${MUTANTS_TIMEOUT:-300}"
OUT="${MUTANTS_OUT:-$ROOT/target/mutants}"
BASELINE="${MUTANTS_BASELINE:-run}"
select_args=()
if [ -n "${MUTANTS_RE:-}" ]; then
    select_args=(--re "$MUTANTS_RE")
fi
if [ -n "${MUTANTS_SHARD:-}" ]; then
    select_args+=(--shard "$MUTANTS_SHARD" --sharding round-robin)
fi
test_filter=()
if [ -n "${MUTANTS_TESTS:-}" ]; then
    test_filter=("$MUTANTS_TESTS")
fi

if ! version=$(cargo mutants --version 2>/dev/null); then
    echo "cargo-mutants is not installed: cargo install cargo-mutants --locked --version '^27'" >&2
    exit 2
fi
case "$version" in
    "cargo-mutants 27."*) ;;
    *) echo "warning: $version; this script is written for cargo-mutants 27.x" >&2 ;;
esac

file_args=()
for f in "${FILES[@]}"; do
    [ -f "$f" ] || { echo "no such file: $f" >&2; exit 2; }
    file_args+=(--file "$f")
done

mkdir -p "$OUT"
echo "$version, ${#FILES[@]} file(s), $JOBS job(s), tests: ${MUTANTS_TESTS:-all unit tests}, output in $OUT/mutants.out" >&2

# Only the library's unit tests (--lib, for the build as well as the run),
# without debug info and with dependencies optimized: every mutant is a
# rebuild and a run, and the redaction tests compile many regexes. The
# temp-folder removal tests (sandbox::tmpdir) use none of these modules and
# are a third of the run time, so they are skipped.
CARGO_PROFILE_DEV_DEBUG=0 cargo mutants \
    "${file_args[@]}" \
    "${select_args[@]}" \
    --test-tool cargo \
    --jobs "$JOBS" \
    --timeout "$TIMEOUT" \
    --baseline "$BASELINE" \
    --no-shuffle \
    --output "$OUT" \
    --cargo-arg=--lib \
    '--cargo-arg=--config=profile.dev.package."*".opt-level=2' \
    -- -- --skip sandbox::tmpdir "${test_filter[@]}"
status=$?
# 0: all caught; 2: some missed; 3: some timed out; anything else: it did not run.
case $status in
    0 | 2 | 3) ;;
    *)
        echo "cargo-mutants failed (exit $status); see $OUT/mutants.out/debug.log" >&2
        exit 2
        ;;
esac

if [ ! -f "$OUT/mutants.out/outcomes.json" ]; then
    echo "no mutants were tested (none matched?); see $OUT/mutants.out/debug.log" >&2
    exit 2
fi

MUTANTS_TESTS="${MUTANTS_TESTS:-}" MUTANTS_SHARD="${MUTANTS_SHARD:-}" python3 - "$OUT/mutants.out/outcomes.json" "$MIN_SCORE" "${FILES[@]}" <<'PY'
import json
import os
import sys

path, min_score, files = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
with open(path) as f:
    outcomes = json.load(f)["outcomes"]

rows = {f: {"mutants": 0, "unviable": 0, "caught": 0, "timeout": 0, "missed": []} for f in files}
for o in outcomes:
    scenario = o["scenario"]
    if not isinstance(scenario, dict) or "Mutant" not in scenario:
        continue
    m = scenario["Mutant"]
    row = rows.setdefault(m["file"], {"mutants": 0, "unviable": 0, "caught": 0, "timeout": 0, "missed": []})
    row["mutants"] += 1
    kind = o["summary"]
    if kind == "Unviable":
        row["unviable"] += 1
    elif kind == "CaughtMutant":
        row["caught"] += 1
    elif kind == "Timeout":
        row["timeout"] += 1
    elif kind == "MissedMutant":
        row["missed"].append(m["name"])
    else:
        sys.exit(f"unexpected outcome {kind} for {m['name']}")


def score(caught, viable):
    return 100.0 * caught / viable if viable else 100.0


print()
print("| file | mutants | unviable | caught | timeout | missed | score |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
total = {"mutants": 0, "unviable": 0, "caught": 0, "timeout": 0, "missed": 0}
low = []
untested = []
for f, r in rows.items():
    if r["mutants"] == 0:
        untested.append(f)
        print(f"| {f} | none tested | | | | | |")
        continue
    viable = r["mutants"] - r["unviable"]
    caught = r["caught"] + r["timeout"]
    s = score(caught, viable)
    if s < min_score:
        low.append(f)
    print(f"| {f} | {r['mutants']} | {r['unviable']} | {r['caught']} | {r['timeout']} | {len(r['missed'])} | {s:.1f}% |")
    for k in ("mutants", "unviable", "caught", "timeout"):
        total[k] += r[k]
    total["missed"] += len(r["missed"])
viable = total["mutants"] - total["unviable"]
s = score(total["caught"] + total["timeout"], viable)
if s < min_score:
    low.append("total")
print(f"| total | {total['mutants']} | {total['unviable']} | {total['caught']} | {total['timeout']} | {total['missed']} | {s:.1f}% |")

if len(untested) == len(rows):
    print("no mutant of these files was tested", file=sys.stderr)
    sys.exit(2)
if untested:
    print(f"\nNo mutant tested in: {', '.join(untested)}; the status covers the other files only.")
if os.environ.get("MUTANTS_SHARD"):
    print(f"\nOnly shard {os.environ['MUTANTS_SHARD']} of the mutants ran: a sample of each file.")
if os.environ.get("MUTANTS_TESTS"):
    print(f"\nOnly the unit tests matching {os.environ['MUTANTS_TESTS']!r} ran: each score is a lower bound.")

missed = [name for r in rows.values() for name in r["missed"]]
if missed:
    print("\nMissed (each is a change no unit test notices):")
    for name in missed:
        print(f"  {name}")
if low:
    print(f"\nBelow {min_score:g}% caught: {', '.join(low)}")
    sys.exit(1)
PY

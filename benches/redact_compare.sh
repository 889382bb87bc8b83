#!/usr/bin/env bash
# Redaction, two builds side by side: benches/redact_bench.rs built at BASE
# (a commit, default main) and at the work tree, then run in turns, case by
# case, so both see the same load. Prints each case's median of the
# per-run medians (ms) and after / before.
#
#   bash benches/redact_compare.sh [BASE] [RUNS]
#
# CASES (one label a line) limits the cases; BEFORE and AFTER name bench
# binaries already built.
#
# Builds both (several minutes each in release) unless BEFORE and AFTER name
# bench binaries already built; the comparison takes a few minutes per run.
set -euo pipefail

base=${1:-main}
runs=${2:-3}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

if [ -z "${BEFORE:-}" ]; then
    # The bench file is this tree's: it uses only `Redactor::new` and
    # `redact`, which BASE has too.
    git -C "$root" worktree add --quiet --detach "$work/base" "$base"
    cp "$root/benches/redact_bench.rs" "$work/base/benches/"
    if ! grep -q 'name = "redact_bench"' "$work/base/Cargo.toml"; then
        printf '\n[[bench]]\nname = "redact_bench"\nharness = false\n' >>"$work/base/Cargo.toml"
    fi
fi

executable() {
    (cd "$1" && cargo bench --bench redact_bench --no-run --message-format=json 2>/dev/null) |
        grep -o '"executable":"[^"]*redact_bench[^"]*"' | tail -1 | cut -d'"' -f4
}
before=${BEFORE:-$(CARGO_TARGET_DIR="$work/target" executable "$work/base")}
after=${AFTER:-$(executable "$root")}
[ -x "$before" ] && [ -x "$after" ] || { echo "build failed" >&2; exit 1; }

cases=${CASES:-$("$after" --rounds 1 | awk -F' \\| ' '/^\| [a-z]/ && !/^\| case/ {sub(/^\| /, "", $1); print $1}')}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "| case | before ms | after ms | after / before |"
echo "| --- | ---: | ---: | ---: |"
while IFS= read -r case; do
    b=() a=()
    for _ in $(seq "$runs"); do
        b+=("$("$before" --only "$case" | awk -F' \\| ' '/^\| [a-z]/ && !/^\| case/ {print $5; exit}')")
        a+=("$("$after" --only "$case" | awk -F' \\| ' '/^\| [a-z]/ && !/^\| case/ {print $5; exit}')")
    done
    mb=$(printf '%s\n' "${b[@]}" | median)
    ma=$(printf '%s\n' "${a[@]}" | median)
    awk -v c="$case" -v b="$mb" -v a="$ma" 'BEGIN {printf "| %s | %.3f | %.3f | %.2f |\n", c, b, a, a / b}'
done <<<"$cases"

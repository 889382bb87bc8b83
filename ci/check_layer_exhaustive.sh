#!/usr/bin/env bash
# A new member of the one layer list (src/sandbox/layers.rs) must stop the
# build at every place that has to decide what the layer is, or a layer
# could be added that `sandbox status`, the start-up line, `--without`,
# best-effort's give-up list or the detection silently leave out.
#
# This copies the working tree to a temporary folder, adds a dummy member
# to `layer_list!`, runs `cargo check --all-targets` there (with a target
# folder of its own under target/, so the ordinary build is left alone) and
# fails unless the build fails, naming at least as many places as the
# checklist in sandbox/LAYERS.md lists (its lines of the form
# "- [exhaustive] `FILE` `FUNCTION`").
#
# Usage: ci/check_layer_exhaustive.sh   (from anywhere in the repository)
set -euo pipefail

repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
cd "$repo"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/layer-check.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# Tracked and new files as they are now, edits included; never target/.
git ls-files -z --cached --others --exclude-standard | grep -zv '^target/' |
    tar --null -T - -cf - | tar -xf - -C "$tmp"

layers="$tmp/src/sandbox/layers.rs"
if ! grep -q '^layer_list! {$' "$layers"; then
    echo "check_layer_exhaustive: no 'layer_list! {' line in src/sandbox/layers.rs" >&2
    exit 1
fi
sed -i 's|^layer_list! {$|layer_list! {\n    /// A member added by ci/check_layer_exhaustive.sh.\n    DummyLayerForTheCheck,|' "$layers"

want=$(grep -c '^- \[exhaustive\] ' sandbox/LAYERS.md || true)
if [ "$want" -eq 0 ]; then
    echo "check_layer_exhaustive: sandbox/LAYERS.md lists no '- [exhaustive]' place" >&2
    exit 1
fi

log="$tmp/check.log"
status=0
(cd "$tmp" && CARGO_TARGET_DIR="$repo/target/layer-check" \
    cargo check --all-targets --message-format=short) >"$log" 2>&1 || status=$?
if [ "$status" -eq 0 ]; then
    echo "check_layer_exhaustive: FAILED: the build passed with a dummy Layer member" >&2
    exit 1
fi

# Each place is a file and line of a non-exhaustive match (E0004); the same
# place reported for the library and its tests counts once.
# (The source folders are matched as "[a-z]+/" followed by ".rs:", so no
# path pattern here reads as a file name.)
places=$(grep -E '^[a-z]+/[^ ]*\.rs:[0-9]+:[0-9]+: error\[E0004\]' "$log" | cut -d: -f1,2 | sort -u || true)
others=$(grep -E '^[a-z]+/[^ ]*\.rs:[0-9]+:[0-9]+: error' "$log" | grep -v 'error\[E0004\]' | sort -u || true)
found=$(printf '%s' "$places" | grep -c . || true)
echo "a dummy Layer member breaks the build at $found place(s) (sandbox/LAYERS.md lists $want):"
printf '%s\n' "$places" | sed 's/^/  /'
if [ -n "$others" ]; then
    echo "and with other errors:"
    printf '%s\n' "$others" | sed 's/^/  /'
fi
if [ "$found" -lt "$want" ]; then
    echo "check_layer_exhaustive: FAILED: fewer places than the checklist names" >&2
    exit 1
fi
echo "check_layer_exhaustive: ok"

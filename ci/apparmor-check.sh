#!/usr/bin/env bash
# Compile the AppArmor profile that `sandbox apparmor-profile` prints, with
# the apparmor_parser installed here, without loading it into a kernel (the
# machines that run this have no AppArmor; nothing here proves that a
# kernel with AppArmor accepts the profile or that it lifts the restriction).
#
# usage: ci/apparmor-check.sh SERVER
#
# What it proves depends on the parser's version:
#   4.x or later: every profile below compiles exactly as printed.
#   3.0.x (Debian bookworm; its backports have no newer apparmor): that
#     parser knows neither `abi <abi/4.0>` nor the `userns` rule, so for each
#     profile it checks that
#       1. as printed, it fails with one error only: abi/4.0 cannot be opened;
#       2. with `abi <abi/3.0>,` in its place, it fails with one error only:
#          a syntax error on the line of `userns,`;
#       3. with that line also removed, the rest (the quoted attachment,
#          flags=(unconfined), both includes, the comments) compiles.
#     The `userns` rule itself is then checked by no parser.
#   Any other version fails the check.
# Whatever the version, it also checks that the attachment compiles to the
# binary's literal path (no pattern) for this binary and for paths holding a
# space, `"`, `\`, `#`, `,`, `@`, `$`, `!`, `(`, `)`, `'` and non-ASCII
# letters, and that paths holding a pattern character are refused.

set -uo pipefail

if [ $# -ne 1 ]; then
    sed -n '2,24p' "$0" >&2
    exit 2
fi
server=$1

fail() {
    echo "apparmor check: FAIL: $*" >&2
    exit 1
}
# It lives in /usr/sbin, which an unprivileged PATH may lack.
parser=$(PATH="$PATH:/usr/sbin:/sbin" command -v apparmor_parser) ||
    fail "apparmor_parser is not installed (Debian package apparmor)"
[ -x "$server" ] || fail "$server is not an executable"

version=$("$parser" --version | sed -n 's/^AppArmor parser version \([0-9][0-9.]*\).*/\1/p')
echo "$parser $version"
case "$version" in
3.0.*) full=0 ;;
[4-9].* | [1-9][0-9].*) full=1 ;;
*) fail "apparmor_parser version '$version' is neither 3.0.x nor 4 or later" ;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/apparmor-check.XXXXXX")
trap 'rm -rf "$work"' EXIT

# compile FILE: compile without loading or caching; the parser's stderr in $work/err.
compile() {
    "$parser" --skip-kernel-load --skip-cache -o /dev/null "$@" 2>"$work/err"
}

# The parser's error lines, less the notice that this kernel has no AppArmor.
errors() {
    grep -v '^Cache read/write disabled: interface file missing' "$work/err"
}

# only_error FILE PATTERN: compiling FILE fails, and its one error line matches PATTERN.
only_error() {
    if compile "$1"; then
        fail "$1 compiled, but this parser should refuse it"
    fi
    local lines
    lines=$(errors)
    [ "$(printf '%s\n' "$lines" | grep -c .)" = 1 ] || fail "$1: expected one error, got: $lines"
    printf '%s\n' "$lines" | grep -qE "$2" || fail "$1: expected an error matching /$2/, got: $lines"
    echo "  refused as expected: $lines"
}

# literal FILE PATH: the attachment compiles to PATH itself: the compiled
# expression, with its escapes removed, is PATH (a pattern would have
# turned into a character class).
literal() {
    compile -D rule-exprs "$1" || fail "$1 does not compile: $(errors)"
    local got=0 line
    while IFS= read -r line; do
        case "$line" in
        *'[^/\x00]'*) fail "$1: a pattern in the compiled rules: $line" ;;
        esac
        if [ "$(printf '%s' "${line#*   ->   }" | sed -E 's/\\(.)/\1/g')" = "$2" ]; then
            got=1
        fi
    done < <(grep '^aare: ' "$work/err")
    [ "$got" = 1 ] || fail "$1: no compiled rule is the literal path $2; rules: $(grep '^aare: ' "$work/err")"
    echo "  attachment compiles to the literal path"
}

# check_profile FILE PATH: FILE, printed for PATH, compiles (as far as this parser can tell).
check_profile() {
    local file=$1 path=$2 quoted
    quoted=$(printf '%s' "$path" | sed -e 's/[\\"]/\\&/g')
    grep -qxF "profile reachweaver-mcp \"$quoted\" flags=(unconfined) {" "$file" ||
        fail "$file does not attach to \"$quoted\": $(grep '^profile' "$file")"
    grep -qx '  userns,' "$file" || fail "$file has no userns rule"
    grep -qx 'abi <abi/4.0>,' "$file" || fail "$file does not declare abi 4.0"
    if [ "$full" = 1 ]; then
        compile "$file" || fail "$file does not compile: $(errors)"
        echo "  compiles as printed"
        literal "$file" "$path"
        return
    fi
    only_error "$file" "Could not open 'abi/4\.0'"
    local abi3="$file.abi3" rest="$file.rest" n
    sed 's|^abi <abi/4\.0>,$|abi <abi/3.0>,|' "$file" >"$abi3"
    n=$(grep -nx '  userns,' "$abi3" | cut -d: -f1)
    only_error "$abi3" "at line $n: syntax error"
    grep -vx '  userns,' "$abi3" >"$rest"
    [ "$(wc -l <"$rest")" = "$(($(wc -l <"$file") - 1))" ] || fail "removing the userns line removed more"
    compile "$rest" || fail "$rest does not compile: $(errors)"
    echo "  compiles with abi 3.0 and without the userns line"
    literal "$rest" "$path"
}

echo "this binary:"
"$server" sandbox apparmor-profile >"$work/self" || fail "sandbox apparmor-profile exited $?"
check_profile "$work/self" "$(readlink -f "$server")"

n=0
for dir in 'with space' 'quote"d' 'back\slash' '#,@$!()'"'" 'é-ünï-中' 'a"b\c d#e'; do
    n=$((n + 1))
    mkdir -p "$work/p$n/$dir"
    exe="$work/p$n/$dir/reachweaver-mcp"
    : >"$exe"
    echo "--exe $exe:"
    "$server" sandbox apparmor-profile --exe "$exe" >"$work/awkward$n" || fail "--exe $exe exited $?"
    check_profile "$work/awkward$n" "$(readlink -f "$exe")"
done

for ch in '*' '?' '[' ']' '{' '}' '^'; do
    n=$((n + 1))
    mkdir -p "$work/p$n/a${ch}b"
    exe="$work/p$n/a${ch}b/reachweaver-mcp"
    : >"$exe"
    if "$server" sandbox apparmor-profile --exe "$exe" >"$work/out" 2>"$work/refused"; then
        fail "a profile was printed for $exe"
    fi
    grep -qF "contains '$ch'" "$work/refused" || fail "$exe: the refusal does not name '$ch': $(cat "$work/refused")"
    [ ! -s "$work/out" ] || fail "$exe: refused, yet something was printed"
done
echo "paths with * ? [ ] { } ^ refused, each named"
echo "apparmor check: ok ($version)"

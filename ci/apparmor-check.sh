#!/usr/bin/env bash
# Compile the AppArmor profile that `sandbox apparmor-profile` prints, with
# the apparmor_parser installed here, without loading it into a kernel (the
# machines that run this have no AppArmor; nothing here proves that a
# kernel with AppArmor accepts the profile or that it lifts the restriction).
#
# usage: ci/apparmor-check.sh SERVER
#
# `sandbox apparmor-profile` picks the policy ABI from the installed
# parser's version, so every profile it prints must compile exactly as
# printed, with any parser:
#   4.x or later: `abi <abi/4.0>,` and the `userns` rule; `--abi 3.0` (no
#     userns rule) compiles too.
#   3.0.x (Debian bookworm; its backports have no newer apparmor):
#     `abi <abi/3.0>,` and no `userns` rule; `--abi 4.0` is refused by this
#     parser with one error only, abi/4.0 cannot be opened. The `userns`
#     rule itself is then checked by no parser.
#   Any other version fails the check.
# Whatever the version, it also checks that the attachment compiles to the
# binary's literal path (no pattern) for this binary and for paths holding a
# space, `"`, `\`, `#`, `,`, `@`, `$`, `!`, `(`, `)`, `'` and non-ASCII
# letters, and that paths holding a pattern character are refused.

set -uo pipefail

if [ $# -ne 1 ]; then
    sed -n '2,23p' "$0" >&2
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

# check_profile FILE PATH: FILE, printed for PATH with the ABI this parser
# takes, compiles as printed and attaches to PATH literally.
check_profile() {
    local file=$1 path=$2 quoted
    quoted=$(printf '%s' "$path" | sed -e 's/[\\"]/\\&/g')
    grep -qxF "profile reachweaver-mcp \"$quoted\" flags=(unconfined) {" "$file" ||
        fail "$file does not attach to \"$quoted\": $(grep '^profile' "$file")"
    if [ "$full" = 1 ]; then
        grep -qx '  userns,' "$file" || fail "$file has no userns rule"
        grep -qx 'abi <abi/4.0>,' "$file" || fail "$file does not declare abi 4.0"
    else
        grep -qx '  userns,' "$file" && fail "$file has a userns rule this parser refuses"
        grep -qx 'abi <abi/3.0>,' "$file" || fail "$file does not declare abi 3.0"
    fi
    compile "$file" || fail "$file does not compile: $(errors)"
    echo "  compiles as printed"
    literal "$file" "$path"
}

echo "this binary:"
"$server" sandbox apparmor-profile >"$work/self" 2>"$work/why" || fail "sandbox apparmor-profile exited $?"
echo "  $(cat "$work/why")"
check_profile "$work/self" "$(readlink -f "$server")"
if [ "$full" = 1 ]; then
    "$server" sandbox apparmor-profile --abi 3.0 >"$work/abi3" || fail "--abi 3.0 exited $?"
    grep -qx '  userns,' "$work/abi3" && fail "--abi 3.0 printed a userns rule"
    compile "$work/abi3" || fail "--abi 3.0 does not compile: $(errors)"
    echo "  --abi 3.0 compiles too"
else
    "$server" sandbox apparmor-profile --abi 4.0 >"$work/abi4" || fail "--abi 4.0 exited $?"
    only_error "$work/abi4" "Could not open 'abi/4\.0'"
fi

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

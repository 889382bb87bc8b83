#!/usr/bin/env bash
# A whole MCP session through a pipe, the way CI jobs drive the server:
#
#   printf '<initialize>\n<initialized>\n<tools/call>\n<tools/list>\n' | reachweaver-mcp ... mcp-serve
#
# usage: ci/piped-session.sh SERVER BACKEND HOME TOOL ARGS_JSON [SERVER_OPTION...]
#
# stdin reaches end of file right after the last line, so this also checks
# that the server finishes the call it is running before it exits. It fails
# (exit 1) unless:
#   - the server exits 0 and every stdout line is a JSON-RPC 2.0 response;
#   - initialize, the call and tools/list are each answered exactly once;
#   - the call is not an error, and its result's
#     _meta["io.reachweaver/sandbox"].layers names every layer the server
#     would use on this machine (the available layers of `sandbox status
#     --json`), or, when REQUIRE_LAYERS is set, every layer named there
#     (space-separated);
#   - tools/list offers TOOL.
# Needs jq. SERVER_OPTIONs (e.g. --root DIR) go after `mcp-serve`.

set -euo pipefail

if [ $# -lt 5 ]; then
    sed -n '2,19p' "$0" >&2
    exit 2
fi
server=$1 backend=$2 home=$3 tool=$4 args=$5
shift 5

fail() {
    echo "piped session: FAIL: $*" >&2
    exit 1
}
command -v jq >/dev/null || fail "jq is not installed"
jq -e 'type == "object"' >/dev/null 2>&1 <<<"$args" || fail "ARGS_JSON is not a JSON object: $args"

work=$(mktemp -d "${TMPDIR:-/tmp}/piped-session.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ -n "${REQUIRE_LAYERS:-}" ]; then
    # shellcheck disable=SC2086 # the list is split on spaces on purpose
    required=$(printf '%s\n' $REQUIRE_LAYERS | jq -R . | jq -sc .)
else
    "$server" --backend="$backend" --home="$home" sandbox status --json >"$work/status.json" ||
        fail "sandbox status --json failed"
    required=$(jq -c '[.layers[] | select(.available) | .name]' "$work/status.json") ||
        fail "sandbox status --json printed no layer list"
fi
[ "$(jq length <<<"$required")" -gt 0 ] || fail "no layer to require (sandbox status lists none available)"

call=$(jq -nc --arg tool "$tool" --argjson args "$args" \
    '{jsonrpc: "2.0", id: 2, method: "tools/call", params: {name: $tool, arguments: $args}}')
rc=0
printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"piped-session","version":"1"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    "$call" \
    '{"jsonrpc":"2.0","id":3,"method":"tools/list"}' |
    timeout "${PIPED_SESSION_TIMEOUT:-300}" "$server" --backend="$backend" --home="$home" mcp-serve "$@" \
        >"$work/out.jsonl" 2>"$work/err.log" || rc=$?
sed 's/^/  server: /' "$work/err.log" >&2
[ "$rc" = 0 ] || fail "the server exited with $rc"

jq -s -e 'length > 0 and all(.[]; type == "object" and .jsonrpc == "2.0" and has("id") and (has("result") or has("error")))' \
    "$work/out.jsonl" >/dev/null 2>&1 || fail "stdout holds something that is not a JSON-RPC response: $(head -c 500 "$work/out.jsonl")"
for id in 1 2 3; do
    n=$(jq --argjson id "$id" 'select(.id == $id)' "$work/out.jsonl" | jq -s length)
    [ "$n" = 1 ] || fail "request $id was answered $n times (expected once)"
done
answer() { jq -c --argjson id "$1" 'select(.id == $id)' "$work/out.jsonl"; }

init=$(answer 1)
jq -e '.result.protocolVersion == "2025-11-25"' >/dev/null <<<"$init" || fail "initialize: $init"

result=$(answer 2)
jq -e '.result.isError == false' >/dev/null <<<"$result" ||
    fail "the call of $tool did not succeed: $(head -c 1000 <<<"$result")"
layers=$(jq -c '.result._meta["io.reachweaver/sandbox"].layers' <<<"$result")
jq -e 'type == "array" and length > 0 and all(.[]; type == "string")' >/dev/null <<<"$layers" ||
    fail "the call's result carries no layer list in _meta[\"io.reachweaver/sandbox\"].layers: $(head -c 1000 <<<"$result")"
missing=$(jq -nc --argjson have "$layers" --argjson want "$required" '$want - $have')
[ "$missing" = "[]" ] || fail "the call ran without the layers $missing (it had $layers)"

tools=$(answer 3)
jq -e --arg tool "$tool" '.result.tools | map(.name) | index($tool) != null' >/dev/null <<<"$tools" ||
    fail "tools/list does not offer $tool"

echo "piped session: ok: 3 answers, exit 0; $tool ran with layers $(jq -r 'join(" ")' <<<"$layers")"

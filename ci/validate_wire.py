#!/usr/bin/env python3
"""Check every message the server wrote during the test suite against the
protocol revision it was sent under.

The Rust harness (tests/support/mcp.rs) appends each stdout message it receives
to the file named by RWMCP_WIRE_LOG as one line:
    {"revision": R, "method": M, "message": {...}}
R is "2026-07-28", a legacy date, "initialize" or "none" (before any
handshake); M is the request's method, or "" when the reply cannot be tied to
one (an error with "id": null).

2026-07-28 and 2025-11-25 are checked with the pydantic models of the
`mcp-types` package (the PyPI `mcp` SDK's own wire types). Those models ignore
unknown members, so each message must also survive a round trip through its
model unchanged: a member the model does not know is reported, not dropped.
The three older revisions have no published models; they are checked against
the hand-written shapes in ci/golden/<revision>.json. On top of the schema,
the project's own wire rules (docs/PROTOCOL.md sections D, E and F) are checked in
every revision.

usage: validate_wire.py [--min N] LOG
       validate_wire.py --self-test
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable

MODERN = "2026-07-28"
LEGACY = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
GOLDEN_REVISIONS = ["2025-06-18", "2025-03-26", "2024-11-05"]
STRUCTURED_FROM = {"2025-06-18", "2025-11-25", MODERN}
ANNOTATIONS_FROM = {"2025-03-26", "2025-06-18", "2025-11-25", MODERN}
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# Results that exist only in 2026-07-28 and must never leak into a handshake-era reply.
MODERN_ONLY_RESULT_KEYS = {"resultType", "ttlMs", "cacheScope"}
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


class Invalid(Exception):
    """One message broke a rule; the text says where and which."""


# ---------------------------------------------------------------------------
# Generic helpers


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_request_id(v: Any) -> bool:
    return isinstance(v, str) or is_int(v)


def same_json(a: Any, b: Any, where: str, problems: list[str]) -> None:
    """Compare the message as received with its model's dump; every difference is a problem."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k not in b:
                problems.append(f"{where}.{k}: member not defined by the model")
            else:
                same_json(a[k], b[k], f"{where}.{k}", problems)
        for k in b:
            if k not in a:
                problems.append(f"{where}.{k}: member added by the model (default filled in)")
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            problems.append(f"{where}: array length {len(a)} became {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same_json(x, y, f"{where}[{i}]", problems)
        return
    if type(a) is not type(b) or a != b:
        problems.append(f"{where}: value {a!r} became {b!r}")


# ---------------------------------------------------------------------------
# mcp-types models (2026-07-28 and 2025-11-25)


def load_models() -> dict[str, Any]:
    try:
        import mcp_types._v2025_11_25 as m2025
        import mcp_types._v2026_07_28 as m2026
    except ImportError as e:  # the test command installs mcp==2.3.0; without it nothing is checked
        raise SystemExit(f"validate_wire: cannot import the mcp-types models ({e}); install mcp==2.3.0") from e
    return {
        MODERN: {
            "result_response": m2026.JSONRPCResultResponse,
            "error_response": m2026.JSONRPCErrorResponse,
            "results": {
                "server/discover": m2026.DiscoverResult,
                "tools/list": m2026.ListToolsResult,
                "tools/call": m2026.CallToolResult,
            },
        },
        "2025-11-25": {
            "result_response": m2025.JSONRPCResultResponse,
            "error_response": m2025.JSONRPCErrorResponse,
            "results": {
                "initialize": m2025.InitializeResult,
                "ping": m2025.EmptyResult,
                "tools/list": m2025.ListToolsResult,
                "tools/call": m2025.CallToolResult,
            },
        },
    }


def check_model(model: Any, data: Any, where: str) -> None:
    from pydantic import ValidationError

    try:
        obj = model.model_validate(data, strict=True)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = ".".join(str(p) for p in err["loc"])
            lines.append(f"{where}.{loc}: {err['msg']}")
        raise Invalid(f"{model.__name__}: " + "; ".join(lines[:6])) from None
    dumped = obj.model_dump(mode="json", by_alias=True, exclude_unset=True)
    problems: list[str] = []
    same_json(data, dumped, where, problems)
    if problems:
        raise Invalid(f"{model.__name__} (round trip): " + "; ".join(problems[:6]))


# ---------------------------------------------------------------------------
# Golden shapes (2024-11-05, 2025-03-26, 2025-06-18)


class Golden:
    """A revision's shapes: named object kinds with required and optional members."""

    def __init__(self, doc: dict[str, Any]):
        self.revision = doc["revision"]
        self.shapes: dict[str, dict[str, Any]] = doc["shapes"]
        self.results: dict[str, str] = doc["results"]

    def check(self, type_expr: str, value: Any, where: str) -> None:
        errors: list[str] = []
        for alt in type_expr.split("|"):
            try:
                self._check_one(alt.strip(), value, where)
                return
            except Invalid as e:
                errors.append(str(e))
        raise Invalid(errors[0] if len(errors) == 1 else f"{where}: none of {type_expr} fits ({'; '.join(errors)})")

    def _check_one(self, t: str, v: Any, where: str) -> None:
        simple: dict[str, Callable[[Any], bool]] = {
            "string": lambda x: isinstance(x, str),
            "integer": is_int,
            "number": lambda x: is_int(x) or isinstance(x, float),
            "boolean": lambda x: isinstance(x, bool),
            "object": lambda x: isinstance(x, dict),
            "array": lambda x: isinstance(x, list),
            "null": lambda x: x is None,
            "any": lambda x: True,
        }
        if t in simple:
            if not simple[t](v):
                raise Invalid(f"{where}: expected {t}, got {json.dumps(v)[:80]}")
            return
        if t.startswith("enum:"):
            if not isinstance(v, str) or v not in t[len("enum:") :].split(","):
                raise Invalid(f"{where}: {v!r} is not one of {t[len('enum:') :]}")
            return
        if t.startswith("const:"):
            if v != t[len("const:") :] or not isinstance(v, str):
                raise Invalid(f"{where}: expected {t[len('const:') :]!r}, got {v!r}")
            return
        if t.startswith("[") and t.endswith("]"):
            if not isinstance(v, list):
                raise Invalid(f"{where}: expected an array of {t[1:-1]}")
            for i, item in enumerate(v):
                self.check(t[1:-1], item, f"{where}[{i}]")
            return
        if t.startswith("{") and t.endswith("}"):
            if not isinstance(v, dict):
                raise Invalid(f"{where}: expected an object of {t[1:-1]}")
            for k, item in v.items():
                self.check(t[1:-1], item, f"{where}.{k}")
            return
        shape = self.shapes.get(t)
        if shape is None:
            raise Invalid(f"golden {self.revision}: unknown type {t!r} (fix ci/golden/{self.revision}.json)")
        if not isinstance(v, dict):
            raise Invalid(f"{where}: expected a {t} object, got {json.dumps(v)[:80]}")
        required = shape.get("required", {})
        optional = shape.get("optional", {})
        for k, kt in required.items():
            if k not in v:
                raise Invalid(f"{where}: {t} lacks required member {k!r}")
            self.check(kt, v[k], f"{where}.{k}")
        for k, item in v.items():
            if k in required:
                continue
            if k in optional:
                self.check(optional[k], item, f"{where}.{k}")
            elif not shape.get("open", False):
                raise Invalid(f"{where}: member {k!r} is not defined for {t} in {self.revision}")


def load_golden() -> dict[str, Golden]:
    out = {}
    for rev in GOLDEN_REVISIONS:
        path = GOLDEN_DIR / f"{rev}.json"
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("revision") != rev:
            raise SystemExit(f"validate_wire: {path} names revision {doc.get('revision')!r}")
        out[rev] = Golden(doc)
    return out


# ---------------------------------------------------------------------------
# Project rules that hold in every revision


def check_envelope_frame(msg: Any) -> None:
    """JSON-RPC 2.0 response framing (docs/PROTOCOL.md A2, A18, J1)."""
    if not isinstance(msg, dict):
        raise Invalid("message is not a JSON object")
    if msg.get("jsonrpc") != "2.0":
        raise Invalid(f"jsonrpc is {msg.get('jsonrpc')!r}, not '2.0'")
    if "method" in msg:
        raise Invalid("the server sent a request or notification; it never sends any")
    has_result, has_error = "result" in msg, "error" in msg
    if has_result == has_error:
        raise Invalid("a response has exactly one of result and error")
    if "id" not in msg:
        raise Invalid("a response always carries an id member")
    extra = set(msg) - {"jsonrpc", "id", "result", "error"}
    if extra:
        raise Invalid(f"unknown top-level members {sorted(extra)}")
    rid = msg["id"]
    if rid is None:
        if has_result:
            raise Invalid("a result with id null")
    elif not is_request_id(rid):
        raise Invalid(f"id {rid!r} is neither a string nor an integer")
    if has_error:
        err = msg["error"]
        if not isinstance(err, dict):
            raise Invalid("error is not an object")
        code = err.get("code")
        if not is_int(code):
            raise Invalid(f"error.code {code!r} is not an integer")
        if not isinstance(err.get("message"), str) or not err["message"]:
            raise Invalid("error.message is not a non-empty string")
        if set(err) - {"code", "message", "data"}:
            raise Invalid(f"unknown error members {sorted(set(err) - {'code', 'message', 'data'})}")
        # G2/G3: the SDK-internal range and retired or HTTP-only codes are never ours to send.
        if -32019 <= code <= -32000 or code in (-32020, -32002, -32042):
            raise Invalid(f"error code {code} is reserved and never sent by this server")
    elif not isinstance(msg["result"], dict):
        raise Invalid("result is not an object")


def check_error_for_revision(msg: dict[str, Any], rev: str) -> None:
    code = msg["error"]["code"]
    if rev != MODERN and code in (-32021, -32022):
        raise Invalid(f"error code {code} exists only in {MODERN}, sent under {rev}")
    if code == -32022:
        data = msg["error"].get("data")
        if not isinstance(data, dict) or not isinstance(data.get("supported"), list) or MODERN not in data["supported"]:
            raise Invalid("-32022 without data.supported listing 2026-07-28")
        if not isinstance(data.get("requested"), str):
            raise Invalid("-32022 without data.requested")


def check_tool(tool: dict[str, Any], rev: str, where: str) -> None:
    name = tool.get("name")
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise Invalid(f"{where}.name {name!r} is not 1-64 characters of [A-Za-z0-9_.-]")
    if not isinstance(tool.get("description"), str) or not tool["description"].strip():
        raise Invalid(f"{where} ({name}): description missing or empty")
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise Invalid(f"{where} ({name}): inputSchema root is not type object")
    if "$schema" in schema:
        raise Invalid(f"{where} ({name}): inputSchema carries $schema")
    if "execution" in tool:
        raise Invalid(f"{where} ({name}): execution.taskSupport is never advertised")
    if rev in ANNOTATIONS_FROM:
        ann = tool.get("annotations")
        if not isinstance(ann, dict):
            raise Invalid(f"{where} ({name}): annotations missing")
        for hint in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"):
            if not isinstance(ann.get(hint), bool):
                raise Invalid(f"{where} ({name}): annotations.{hint} is not set explicitly")
    elif "annotations" in tool:
        raise Invalid(f"{where} ({name}): annotations do not exist in {rev}")


def check_tool_result(result: dict[str, Any], rev: str) -> None:
    """The one envelope (docs/BACKEND.md, What the client receives), as text and (2025-06-18 on) structuredContent."""
    content = result.get("content")
    if not isinstance(content, list) or len(content) != 1:
        raise Invalid("content is not exactly one item")
    item = content[0]
    if not isinstance(item, dict) or item.get("type") != "text" or not isinstance(item.get("text"), str):
        raise Invalid("content[0] is not a text item")
    try:
        env = json.loads(item["text"])
    except ValueError:
        raise Invalid("content[0].text is not JSON") from None
    if not isinstance(env, dict) or set(env) != {"exit_code", "output"}:
        raise Invalid(f"content[0].text is not the envelope {{exit_code, output}}: {item['text'][:120]}")
    code = env["exit_code"]
    if code not in (0, 1, 2) or not is_int(code):
        raise Invalid(f"envelope exit_code {code!r} is not 0, 1 or 2")
    is_error = result.get("isError", False)
    if not isinstance(is_error, bool):
        raise Invalid("isError is not a boolean")
    if is_error != (code == 2):
        raise Invalid(f"isError {is_error} does not match exit_code {code}")
    if code == 2:
        out = env["output"]
        err = out.get("error") if isinstance(out, dict) else None
        if (
            not isinstance(out, dict)
            or set(out) != {"error"}
            or not isinstance(err, dict)
            or not isinstance(err.get("code"), str)
            or not re.match(r"^[a-z][a-z0-9_]*$", err["code"])
            or not isinstance(err.get("message"), str)
        ):
            raise Invalid(f"exit_code 2 without an error document: {item['text'][:160]}")
    if rev in STRUCTURED_FROM:
        if "structuredContent" not in result:
            raise Invalid(f"structuredContent missing in {rev}")
        if result["structuredContent"] != env:
            raise Invalid("structuredContent differs from the text item")
    elif "structuredContent" in result:
        raise Invalid(f"structuredContent does not exist in {rev}")


def check_project_result(result: dict[str, Any], method: str, rev: str) -> None:
    if rev == MODERN:
        if result.get("resultType") != "complete":
            raise Invalid(f"resultType is {result.get('resultType')!r}, not 'complete'")
        info = (result.get("_meta") or {}).get(SERVER_INFO_KEY)
        if (
            not isinstance(info, dict)
            or not isinstance(info.get("name"), str)
            or not isinstance(info.get("version"), str)
        ):
            raise Invalid(f"_meta[{SERVER_INFO_KEY!r}] missing or without name and version")
        if method == "tools/call" and ({"ttlMs", "cacheScope"} & set(result)):
            raise Invalid("tools/call results are not cacheable: no ttlMs or cacheScope")
        if method == "server/discover":
            if MODERN not in result.get("supportedVersions", []):
                raise Invalid("supportedVersions lacks 2026-07-28")
            if "serverInfo" in result:
                raise Invalid("serverInfo belongs in _meta, not the result body")
    else:
        leaked = MODERN_ONLY_RESULT_KEYS & set(result)
        if leaked:
            raise Invalid(f"{sorted(leaked)} exist only in {MODERN}")
        if method == "initialize":
            if result.get("protocolVersion") != rev:
                raise Invalid(f"protocolVersion {result.get('protocolVersion')!r} logged as {rev}")
            caps = result.get("capabilities")
            if not isinstance(caps, dict) or set(caps) != {"tools"}:
                raise Invalid(f"capabilities must offer tools only: {caps}")
        if method == "ping" and result != {}:
            raise Invalid("a ping result is exactly {}")
    if method == "tools/list":
        tools = result.get("tools")
        if not isinstance(tools, list):
            raise Invalid("tools is not an array")
        if "nextCursor" in result:
            raise Invalid("the tool list is a single page: no nextCursor")
        names = [t.get("name") for t in tools if isinstance(t, dict)]
        if len(set(names)) != len(names):
            raise Invalid("duplicate tool names")
        for i, t in enumerate(tools):
            if not isinstance(t, dict):
                raise Invalid(f"tools[{i}] is not an object")
            check_tool(t, rev, f"tools[{i}]")
    if method == "tools/call":
        check_tool_result(result, rev)


# ---------------------------------------------------------------------------
# One message


class Validator:
    def __init__(self) -> None:
        self.models = load_models()
        self.golden = load_golden()

    def validate(self, rev: str, method: str, msg: Any) -> str:
        """Check one message; returns the revision it was checked as, raises Invalid."""
        check_envelope_frame(msg)
        if rev == "initialize":
            # Logged before the answer named a version: the answer itself says which.
            got = msg.get("result", {}).get("protocolVersion") if "result" in msg else None
            rev = got if got in LEGACY else "none"
        if rev == "none":
            # Before a handshake the reply must be acceptable to a client of any legacy revision.
            if "result" in msg and method not in ("ping",):
                raise Invalid(f"a result for {method or 'an unknown request'!r} before any handshake")
            for r in LEGACY:
                try:
                    self._validate_rev(r, method, msg)
                except Invalid as e:
                    raise Invalid(f"[as {r}] {e}") from None
            return "none"
        if rev != MODERN and rev not in LEGACY:
            raise Invalid(f"unknown revision {rev!r} in the log")
        self._validate_rev(rev, method, msg)
        return rev

    def _validate_rev(self, rev: str, method: str, msg: dict[str, Any]) -> None:
        if "error" in msg:
            check_error_for_revision(msg, rev)
            if rev in self.models:
                check_model(self.models[rev]["error_response"], msg, "message")
            else:
                self.golden[rev].check("JSONRPCError", msg, "message")
            return
        result = msg["result"]
        if rev in self.models:
            models = self.models[rev]
            check_model(models["result_response"], msg, "message")
            model = models["results"].get(method)
            if model is None:
                raise Invalid(f"no result is defined for method {method!r} in {rev}")
            check_model(model, result, "result")
        else:
            g = self.golden[rev]
            g.check("JSONRPCResponse", msg, "message")
            shape = g.results.get(method)
            if shape is None:
                raise Invalid(f"no result is defined for method {method!r} in {rev}")
            g.check(shape, result, "result")
        check_project_result(result, method, rev)


# ---------------------------------------------------------------------------
# The log


def validate_log(path: Path, minimum: int) -> int:
    v = Validator()
    counts: Counter[str] = Counter()
    failures: list[str] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        print(f"validate_wire: cannot read {path}: {e}")
        return 1
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            rev, method, msg = entry["revision"], entry["method"], entry["message"]
        except (ValueError, KeyError, TypeError) as e:
            failures.append(f"line {n}: not a log entry ({e}): {line[:200]}")
            continue
        try:
            checked_as = v.validate(rev, method, msg)
            counts[checked_as] += 1
        except Invalid as e:
            failures.append(f"line {n} [{rev} {method or '-'}]: {e}\n    {json.dumps(msg)[:400]}")
    total = sum(counts.values())
    for rev in [MODERN, *LEGACY, "none"]:
        print(f"  {rev:<11} {counts.get(rev, 0):>6} messages valid")
    print(f"  {'total':<11} {total:>6} valid, {len(failures)} invalid")
    for f in failures[:50]:
        print(f"INVALID {f}")
    if len(failures) > 50:
        print(f"... and {len(failures) - 50} more")
    missing = [r for r in [MODERN, *LEGACY] if counts.get(r, 0) == 0]
    ok = True
    if failures:
        ok = False
    if total + len(failures) < minimum:
        print(
            f"validate_wire: only {total + len(failures)} messages logged, fewer than {minimum}: "
            "the log is not the whole suite's"
        )
        ok = False
    if missing:
        print(f"validate_wire: no messages at all for {missing}: those revisions went unchecked")
        ok = False
    return 0 if ok else 1


# ---------------------------------------------------------------------------
# Self-test: the validator must reject broken messages and accept good ones


def _good_tool(rev: str) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "name": "claims_check",
        "description": "Check a draft for unsupported claims.",
        "inputSchema": {
            "type": "object",
            "properties": {"draft": {"type": "string"}},
            "required": ["draft"],
            "additionalProperties": False,
        },
    }
    if rev in ANNOTATIONS_FROM:
        tool["annotations"] = {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        }
    if rev in STRUCTURED_FROM:
        tool["title"] = "Claims check"
    return tool


def _call_result(rev: str, exit_code: int = 1) -> dict[str, Any]:
    env: dict[str, Any] = {"exit_code": exit_code, "output": {"findings": [{"claim": "guaranteed"}]}}
    if exit_code == 2:
        env["output"] = {"error": {"code": "not_found", "message": "No draft with that id."}}
    r: dict[str, Any] = {"content": [{"type": "text", "text": json.dumps(env)}], "isError": exit_code == 2}
    if rev in STRUCTURED_FROM:
        r["structuredContent"] = env
    if rev == MODERN:
        r["resultType"] = "complete"
        r["_meta"] = {SERVER_INFO_KEY: {"name": "reachweaver-mcp", "version": "0.1.0"}}
    return r


def _resp(result: Any, rid: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _modern(extra: dict[str, Any]) -> dict[str, Any]:
    r = {"resultType": "complete", "_meta": {SERVER_INFO_KEY: {"name": "reachweaver-mcp", "version": "0.1.0"}}}
    r.update(extra)
    return r


def self_test_cases() -> tuple[list[tuple[str, str, Any]], list[tuple[str, str, str, Any]]]:
    good: list[tuple[str, str, Any]] = []
    for rev in LEGACY:
        caps = {"tools": {"listChanged": False}}
        info = {"name": "reachweaver-mcp", "version": "0.1.0"}
        good.append((rev, "initialize", _resp({"protocolVersion": rev, "capabilities": caps, "serverInfo": info})))
        good.append((rev, "tools/list", _resp({"tools": [_good_tool(rev)]})))
        good.append((rev, "tools/call", _resp(_call_result(rev))))
        good.append((rev, "tools/call", _resp(_call_result(rev, 2))))
        good.append((rev, "ping", _resp({})))
    good.append(
        (MODERN, "tools/list", _resp(_modern({"tools": [_good_tool(MODERN)], "ttlMs": 60000, "cacheScope": "public"})))
    )
    good.append((MODERN, "tools/call", _resp(_call_result(MODERN))))
    good.append(
        (
            MODERN,
            "server/discover",
            _resp(
                _modern(
                    {
                        "supportedVersions": [MODERN, *LEGACY],
                        "capabilities": {"tools": {}},
                        "ttlMs": 3600000,
                        "cacheScope": "public",
                    }
                ),
                "d1",
            ),
        )
    )
    good.append(
        (
            MODERN,
            "tools/list",
            {
                "jsonrpc": "2.0",
                "id": 3,
                "error": {
                    "code": -32022,
                    "message": "Unsupported protocol version",
                    "data": {"supported": [MODERN], "requested": "1900-01-01"},
                },
            },
        )
    )
    good.append(("none", "", {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}))
    good.append(
        ("none", "tools/list", {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Initialize first."}})
    )

    t2024 = _good_tool("2024-11-05")
    bad_title = dict(t2024, title="Claims check")
    legacy_list_modern_keys = {"tools": [_good_tool("2025-11-25")], "ttlMs": 1, "cacheScope": "public"}
    bad: list[tuple[str, str, str, Any]] = [
        (
            "2026 tools/list without ttlMs",
            MODERN,
            "tools/list",
            _resp(_modern({"tools": [_good_tool(MODERN)], "cacheScope": "public"})),
        ),
        (
            "2026 tools/call without resultType",
            MODERN,
            "tools/call",
            _resp({k: v for k, v in _call_result(MODERN).items() if k != "resultType"}),
        ),
        (
            "2026 discover with serverInfo in the body",
            MODERN,
            "server/discover",
            _resp(
                _modern(
                    {
                        "supportedVersions": [MODERN],
                        "capabilities": {"tools": {}},
                        "ttlMs": 1,
                        "cacheScope": "public",
                        "serverInfo": {"name": "x", "version": "1"},
                    }
                )
            ),
        ),
        (
            "2026 tool with an unknown member",
            MODERN,
            "tools/list",
            _resp(
                _modern(
                    {
                        "tools": [dict(_good_tool(MODERN), inputschema={"type": "object"})],
                        "ttlMs": 1,
                        "cacheScope": "public",
                    }
                )
            ),
        ),
        (
            "2025-11-25 array structuredContent",
            "2025-11-25",
            "tools/call",
            _resp(dict(_call_result("2025-11-25"), structuredContent=[1, 2, 3])),
        ),
        ("2025-11-25 tools/list with modern cache members", "2025-11-25", "tools/list", _resp(legacy_list_modern_keys)),
        (
            "2025-11-25 initialize without serverInfo",
            "2025-11-25",
            "initialize",
            _resp({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}}),
        ),
        (
            "2025-06-18 initialize without serverInfo",
            "2025-06-18",
            "initialize",
            _resp({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}}),
        ),
        ("2024-11-05 tool with a title", "2024-11-05", "tools/list", _resp({"tools": [bad_title]})),
        (
            "2024-11-05 tool with annotations",
            "2024-11-05",
            "tools/list",
            _resp({"tools": [dict(t2024, annotations={"readOnlyHint": True})]}),
        ),
        (
            "2025-03-26 structuredContent",
            "2025-03-26",
            "tools/call",
            _resp(dict(_call_result("2025-03-26"), structuredContent={"exit_code": 1, "output": {}})),
        ),
        (
            "2025-06-18 tools/call without structuredContent",
            "2025-06-18",
            "tools/call",
            _resp({k: v for k, v in _call_result("2025-06-18").items() if k != "structuredContent"}),
        ),
        (
            "2025-06-18 isError that contradicts exit_code",
            "2025-06-18",
            "tools/call",
            _resp(dict(_call_result("2025-06-18"), isError=True)),
        ),
        (
            "2025-03-26 text item that is not the envelope",
            "2025-03-26",
            "tools/call",
            _resp({"content": [{"type": "text", "text": '{"findings": []}'}], "isError": False}),
        ),
        (
            "error code given as a string",
            "2025-11-25",
            "tools/list",
            {"jsonrpc": "2.0", "id": 1, "error": {"code": "-32601", "message": "Method not found"}},
        ),
        (
            "2024-11-05 error without a message",
            "2024-11-05",
            "tools/list",
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601}},
        ),
        ("fractional id", "2025-06-18", "ping", {"jsonrpc": "2.0", "id": 1.5, "result": {}}),
        (
            "result and error together",
            "2025-11-25",
            "ping",
            {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": -32603, "message": "x"}},
        ),
        (
            "-32022 sent to a legacy request",
            "2025-06-18",
            "tools/list",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "error": {"code": -32022, "message": "Unsupported", "data": {"supported": [MODERN], "requested": "x"}},
            },
        ),
        ("ping result with members", "2025-03-26", "ping", _resp({"ok": True})),
        ("a tools/list result before any handshake", "none", "tools/list", _resp({"tools": []})),
        ("jsonrpc 1.0", "2025-11-25", "ping", {"jsonrpc": "1.0", "id": 1, "result": {}}),
        (
            "tool name with a space",
            "2025-11-25",
            "tools/list",
            _resp({"tools": [dict(_good_tool("2025-11-25"), name="claims check")]}),
        ),
        (
            "reserved error code -32001",
            "2025-11-25",
            "tools/call",
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "Request timeout"}},
        ),
    ]
    return good, bad


def self_test() -> int:
    v = Validator()
    good, bad = self_test_cases()
    failed = 0
    for rev, method, msg in good:
        try:
            v.validate(rev, method, msg)
        except Invalid as e:
            failed += 1
            print(f"SELF-TEST FAIL: a valid {rev} {method} message was rejected: {e}")
    for label, rev, method, msg in bad:
        try:
            v.validate(rev, method, msg)
        except Invalid as e:
            print(f"  rejected as expected: {label}: {str(e)[:140]}")
            continue
        failed += 1
        print(f"SELF-TEST FAIL: accepted a broken message: {label}")
    # A log that is too small must fail too, whatever it holds.
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        rev, method, msg = good[0]
        f.write(json.dumps({"revision": rev, "method": method, "message": msg}) + "\n")
        small = Path(f.name)
    try:
        if validate_log(small, 200) == 0:
            failed += 1
            print("SELF-TEST FAIL: a one-message log was accepted")
    finally:
        small.unlink()
    print(f"self-test: {len(good)} valid messages accepted, {len(bad)} broken ones checked, {failed} failures")
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", nargs="?", type=Path)
    ap.add_argument("--min", type=int, default=200, help="fewest messages a real log must hold")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if a.log is None:
        ap.error("LOG is required")
    return validate_log(a.log, a.min)


if __name__ == "__main__":
    sys.exit(main())

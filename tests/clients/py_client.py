#!/usr/bin/env python3
"""Drive the server with the Python MCP SDK (PyPI `mcp==2.3.0`) in one era
and check what a real client gets back.

usage: py_client.py ERA PLAN -- SERVER_COMMAND [ARG...]
ERA: modern | auto | legacy | 2025-06-18 | 2025-03-26 | 2024-11-05

modern pins 2026-07-28 (no discover, no handshake); auto probes
server/discover first; legacy runs the 2025-11-25 handshake; a date offers
that older revision through the SDK's low-level session, which is the only
way this SDK can speak it. Every era lists the tools and makes every call in
PLAN (tests/clients/plan.json); the SDK's own result validation runs too, so
a malformed reply fails here even before the checks below.
Exit 0 when every check held, 1 otherwise.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

MODES = {"modern": "2026-07-28", "auto": "auto", "legacy": "legacy"}
EXPECTED_VERSION = {"modern": "2026-07-28", "auto": "2026-07-28", "legacy": "2025-11-25"}
STRUCTURED = {"2025-06-18", "2025-11-25", "2026-07-28"}


class Check:
    def __init__(self, era: str) -> None:
        self.era = era
        self.failures: list[str] = []
        self.passes = 0

    def expect(self, cond: bool, what: str) -> None:
        if cond:
            self.passes += 1
        else:
            self.failures.append(what)
            print(f"  FAIL {what}", flush=True)


def check_tools(c: Check, listing: Any, plan: dict[str, Any], version: str) -> None:
    tools = {t.name: t for t in listing.tools}
    print(f"  tools/list: {len(tools)} tools", flush=True)
    for name in plan["expect_tools"]:
        c.expect(name in tools, f"tool {name} is listed")
    for name in plan["forbid_tools"]:
        c.expect(name not in tools, f"tool {name} is withheld")
    for t in listing.tools:
        c.expect(t.input_schema.get("type") == "object", f"{t.name}: inputSchema is an object schema")
        c.expect(bool(t.description), f"{t.name}: has a description")
        if version == "2024-11-05":
            c.expect(t.annotations is None and t.title is None, f"{t.name}: no annotations or title in 2024-11-05")
        else:
            ann = t.annotations
            c.expect(ann is not None and ann.read_only_hint is True, f"{t.name}: readOnlyHint true")


def check_call(c: Check, call: dict[str, Any], result: Any, version: str) -> None:
    label = f"{call['label']} ({call['tool']})"
    c.expect(isinstance(result, types.CallToolResult), f"{label}: a CallToolResult")
    if not isinstance(result, types.CallToolResult):
        return
    c.expect(bool(result.is_error) == call["is_error"], f"{label}: isError {call['is_error']} (got {result.is_error})")
    c.expect(len(result.content) == 1 and result.content[0].type == "text", f"{label}: one text item")
    try:
        env = json.loads(result.content[0].text)
    except (ValueError, AttributeError, IndexError):
        c.expect(False, f"{label}: the text item is JSON")
        return
    c.expect(isinstance(env, dict) and set(env) == {"exit_code", "output"}, f"{label}: envelope {{exit_code, output}}")
    want = call["exit_code"] if isinstance(call["exit_code"], list) else [call["exit_code"]]
    c.expect(env.get("exit_code") in want, f"{label}: exit_code in {want} (got {env.get('exit_code')})")
    if "error_code" in call:
        got = (env.get("output") or {}).get("error", {}).get("code")
        c.expect(got == call["error_code"], f"{label}: error code {call['error_code']} (got {got})")
    elif not call["is_error"]:
        c.expect(isinstance(env.get("output"), dict), f"{label}: output is the command's JSON document")
    if version in STRUCTURED:
        c.expect(result.structured_content == env, f"{label}: structuredContent equals the text envelope")
    else:
        c.expect(result.structured_content is None, f"{label}: no structuredContent before 2025-06-18")
    print(f"  tools/call {call['tool']}: isError={result.is_error} exit_code={env.get('exit_code')}", flush=True)


async def run_calls(c: Check, session: Any, plan: dict[str, Any], version: str) -> None:
    check_tools(c, await session.list_tools(), plan, version)
    for call in plan["calls"]:
        check_call(c, call, await session.call_tool(call["tool"], call["arguments"]), version)


async def high_level(c: Check, era: str, server: StdioServerParameters, plan: dict[str, Any]) -> None:
    async with Client(server, mode=MODES[era]) as client:
        version = client.protocol_version
        print(f"  negotiated {version}", flush=True)
        c.expect(version == EXPECTED_VERSION[era], f"negotiated {EXPECTED_VERSION[era]} (got {version})")
        await run_calls(c, client, plan, version or "")


async def offered(c: Check, version: str, server: StdioServerParameters, plan: dict[str, Any]) -> None:
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.send_request(
                types.InitializeRequest(
                    params=types.InitializeRequestParams(
                        protocol_version=version,
                        capabilities=types.ClientCapabilities(),
                        client_info=types.Implementation(name="reachweaver-mcp-ci", version="1"),
                    )
                ),
                types.InitializeResult,
            )
            session.adopt(init)
            await session.send_notification(types.InitializedNotification())
            print(f"  negotiated {session.protocol_version}", flush=True)
            c.expect(init.protocol_version == version, f"negotiated {version} (got {init.protocol_version})")
            c.expect(init.server_info is not None and bool(init.server_info.name), "serverInfo names the server")
            await run_calls(c, session, plan, version)


def main() -> int:
    if "--" not in sys.argv or len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    era, plan_path = sys.argv[1], Path(sys.argv[2])
    cmd = sys.argv[sys.argv.index("--") + 1 :]
    plan = json.loads(plan_path.read_text(encoding="utf-8"))
    server = StdioServerParameters(command=cmd[0], args=cmd[1:])
    c = Check(era)
    print(f"python mcp 2.3.0, era {era}", flush=True)
    try:
        if era in MODES:
            asyncio.run(asyncio.wait_for(high_level(c, era, server, plan), 120))
        else:
            asyncio.run(asyncio.wait_for(offered(c, era, server, plan), 120))
    except BaseException as e:  # noqa: BLE001 - any SDK failure is a failed check, with its reason shown
        if isinstance(e, KeyboardInterrupt):
            raise
        c.expect(False, f"the session completed ({type(e).__name__}: {e})")
    print(f"  {c.passes} checks held, {len(c.failures)} failed", flush=True)
    return 0 if not c.failures and c.passes > 0 else 1


if __name__ == "__main__":
    sys.exit(main())

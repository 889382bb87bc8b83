#!/usr/bin/env python3
"""Drive the server with the MCP Inspector's command-line mode
(npm @modelcontextprotocol/inspector 2.12.0, which bundles the TypeScript SDK
v2 client) in one protocol era, and check what it prints.

usage: inspector.py ERA PLAN INSPECTOR -- SERVER_COMMAND [ARG...]
ERA: legacy | modern | auto (the Inspector's --protocol-era)

Each Inspector run is one client session on a fresh server process:
`tools/list --strict` (the Inspector's tool-schema portability check, which
exits 6 on an error-severity problem) and one `tools/call` per call in PLAN.
The Inspector exits 5 for a result with isError true and still prints it.
Exit 0 when every check held, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def run(inspector: str, era: str, method_args: list[str], server: list[str]) -> tuple[int, str, str]:
    cmd = [inspector, "--cli", "--protocol-era", era, "--format", "json", *method_args, "--", *server]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180, env=os.environ)
    return p.returncode, p.stdout, p.stderr


def last_json(text: str) -> Any:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    try:
        return json.loads(text)
    except ValueError:
        return None


def main() -> int:
    if "--" not in sys.argv or len(sys.argv) < 6:
        print(__doc__, file=sys.stderr)
        return 2
    era, plan_path, inspector = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    server = sys.argv[sys.argv.index("--") + 1 :]
    plan = json.loads(plan_path.read_text(encoding="utf-8"))
    passes, failures = 0, []

    def expect(cond: bool, what: str) -> None:
        nonlocal passes
        if cond:
            passes += 1
        else:
            failures.append(what)
            print(f"  FAIL {what}", flush=True)

    print(f"inspector 2.12.0 --cli, era {era}", flush=True)
    try:
        rc, out, err = run(inspector, era, ["--method", "tools/list", "--strict"], server)
        doc = last_json(out)
        expect(rc == 0, f"tools/list --strict exits 0 (got {rc}; stderr: {err.strip()[-400:]})")
        tools = doc.get("result", {}).get("tools", []) if isinstance(doc, dict) else []
        names = {t.get("name") for t in tools}
        print(f"  tools/list --strict: exit {rc}, {len(names)} tools", flush=True)
        for n in plan["expect_tools"]:
            expect(n in names, f"tool {n} is listed")
        for n in plan["forbid_tools"]:
            expect(n not in names, f"tool {n} is withheld")

        for call in plan["calls"]:
            label = f"{call['label']} ({call['tool']})"
            rc, out, err = run(
                inspector,
                era,
                [
                    "--method",
                    "tools/call",
                    "--tool-name",
                    call["tool"],
                    "--tool-args-json",
                    json.dumps(call["arguments"]),
                ],
                server,
            )
            want_rc = 5 if call["is_error"] else 0
            expect(rc == want_rc, f"{label}: Inspector exit {want_rc} (got {rc}; stderr: {err.strip()[-300:]})")
            doc = last_json(out)
            result = doc.get("result") if isinstance(doc, dict) else None
            if not isinstance(result, dict):
                expect(False, f"{label}: a result on stdout (got {out.strip()[:200]!r})")
                continue
            expect(bool(result.get("isError")) == call["is_error"], f"{label}: isError {call['is_error']}")
            content = result.get("content") or [{}]
            try:
                env = json.loads(content[0].get("text", ""))
            except ValueError:
                expect(False, f"{label}: the text item is JSON")
                continue
            want = call["exit_code"] if isinstance(call["exit_code"], list) else [call["exit_code"]]
            expect(env.get("exit_code") in want, f"{label}: exit_code in {want} (got {env.get('exit_code')})")
            if "error_code" in call:
                got = (env.get("output") or {}).get("error", {}).get("code")
                expect(got == call["error_code"], f"{label}: error code {call['error_code']} (got {got})")
            expect(result.get("structuredContent") == env, f"{label}: structuredContent equals the text envelope")
            print(
                f"  tools/call {call['tool']}: exit {rc}, "
                f"isError={result.get('isError')} exit_code={env.get('exit_code')}",
                flush=True,
            )
    except subprocess.TimeoutExpired as e:
        expect(False, f"the Inspector finished within 180 s ({e.cmd[:6]})")
    print(f"  {passes} checks held, {len(failures)} failed", flush=True)
    return 0 if not failures and passes > 0 else 1


if __name__ == "__main__":
    sys.exit(main())

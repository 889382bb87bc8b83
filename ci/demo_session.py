#!/usr/bin/env python3
"""One real MCP session with the server, shown message by message.

usage: demo_session.py PLAN -- SERVER_COMMAND [ARG...]

Standard library only, so the demo runs on a fresh clone with nothing but
cargo and python3. It writes JSON-RPC lines to the server's stdin exactly as
a client would: the 2025-11-25 handshake, tools/list and three tools/call
requests (the calls of tests/clients/plan.json), then the 2026-07-28 way: a
server/discover and a tools/call that carry the per-request _meta envelope.
Each request is printed, then the server's reply, pretty-printed; at the end,
the server's stderr log.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from queue import Empty, Queue
from typing import Any

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "reachweaver-demo", "version": "1"},
}


def show(arrow: str, msg: Any) -> None:
    print(f"{arrow} {json.dumps(msg, indent=2)}" if arrow == "<-" else f"{arrow} {json.dumps(msg)}")


def shorten_tool_list(reply: dict[str, Any]) -> dict[str, Any]:
    """Two tools in full and the names of the rest: the whole list is long."""
    tools = reply.get("result", {}).get("tools")
    if not isinstance(tools, list) or len(tools) <= 2:
        return reply
    out = json.loads(json.dumps(reply))
    out["result"]["tools"] = tools[:2] + [f"... {len(tools) - 2} more: " + ", ".join(t["name"] for t in tools[2:])]
    return out


def main() -> int:
    if "--" not in sys.argv:
        print(__doc__, file=sys.stderr)
        return 2
    plan = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    cmd = sys.argv[sys.argv.index("--") + 1 :]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin and proc.stdout and proc.stderr
    replies: Queue[str] = Queue()
    stderr_lines: list[str] = []
    threading.Thread(target=lambda: [replies.put(line) for line in proc.stdout], daemon=True).start()
    err_reader = threading.Thread(target=lambda: stderr_lines.extend(proc.stderr), daemon=True)
    err_reader.start()

    def send(msg: dict[str, Any], note: str = "") -> None:
        if note:
            print(f"\n# {note}")
        show("->", msg)
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()

    def reply(timeout: float = 60) -> dict[str, Any] | None:
        try:
            line = replies.get(timeout=timeout)
        except Empty:
            print(f"<- (no reply within {timeout:.0f} s)")
            return None
        msg = json.loads(line)
        show("<-", shorten_tool_list(msg))
        return msg

    ok = True
    send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "reachweaver-demo", "version": "1"},
            },
        },
        "the 2025-11-25 handshake",
    )
    ok &= reply() is not None
    send({"jsonrpc": "2.0", "method": "notifications/initialized"}, "a notification: no reply")
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, "what the client may call")
    ok &= reply() is not None
    next_id = 3
    for call in plan["calls"][:3]:
        send(
            {
                "jsonrpc": "2.0",
                "id": next_id,
                "method": "tools/call",
                "params": {"name": call["tool"], "arguments": call["arguments"]},
            },
            f"tools/call {call['tool']}: {call['label'].replace('_', ' ')}",
        )
        ok &= reply() is not None
        next_id += 1
    send(
        {"jsonrpc": "2.0", "id": "d1", "method": "server/discover", "params": {"_meta": ENVELOPE}},
        "2026-07-28: no handshake; every request carries the _meta envelope",
    )
    ok &= reply() is not None
    outside = plan["calls"][-1]
    send(
        {
            "jsonrpc": "2.0",
            "id": "m1",
            "method": "tools/call",
            "params": {"name": outside["tool"], "arguments": outside["arguments"], "_meta": ENVELOPE},
        },
        f"2026-07-28 tools/call {outside['tool']} on a path outside the root",
    )
    ok &= reply() is not None

    proc.stdin.close()
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
        ok = False
    err_reader.join(timeout=5)
    print(f"\n# the server's stderr log (exit code {code} after stdin closed)")
    for line in stderr_lines:
        print(f"   {line.rstrip()}")
    return 0 if ok and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

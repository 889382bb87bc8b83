#!/usr/bin/env python3
"""Checks of the MCP Bundle beyond `mcpb validate`.

usage: check_mcpb.py schema MANIFEST SCHEMA_JSON
       check_mcpb.py launch BUNDLE MCPB_CLI BACKEND HOME PLAN

schema: validates the manifest against the bundle JSON schema that the
  pinned @anthropic-ai/mcpb package ships (a second validator next to the
  CLI's own), then the rules the schema cannot express: the version is the
  crate's, every `${user_config.KEY}` in mcp_config is declared, every
  declared key is used, and a referenced key the user may leave empty has a
  default.
launch: does what a desktop client does on install and start: unpacks the
  bundle with `mcpb unpack`, fills the args template with this machine's
  values, starts the entry point through the Python MCP SDK (legacy and
  modern eras, the calls of PLAN), and checks that allow_drafts=true adds the
  draft tool and allow_drafts=false withholds it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REF = re.compile(r"\$\{([^}]+)\}")
HOST_VARS = {"__dirname", "HOME", "DESKTOP", "DOCUMENTS", "DOWNLOADS", "pathSeparator", "/"}


def fail(msg: str) -> None:
    print(f"FAIL {msg}")
    raise SystemExit(1)


def crate_version() -> str:
    m = re.search(r'^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(encoding="utf-8"), re.M)
    if not m:
        fail("no version in Cargo.toml")
    return m.group(1)


def check_schema(manifest_path: Path, schema_path: Path) -> None:
    import jsonschema

    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(manifest), key=lambda e: list(e.path))
    for e in errors:
        print(f"  {'/'.join(str(p) for p in e.path) or '(root)'}: {e.message}")
    if errors:
        fail(f"{manifest_path} breaks {schema_path.name}")
    print(f"valid against {schema_path.name}")

    if manifest["version"] != crate_version():
        fail(f"manifest version {manifest['version']} is not the crate's {crate_version()}")
    if manifest["server"]["type"] != "binary":
        fail("server.type is not binary")
    config = manifest.get("user_config", {})
    used: set[str] = set()
    mcp = manifest["server"]["mcp_config"]
    for text in [mcp["command"], *mcp.get("args", []), *mcp.get("env", {}).values()]:
        for ref in REF.findall(text):
            if ref.startswith("user_config."):
                key = ref[len("user_config.") :]
                if key not in config:
                    fail(f"mcp_config uses ${{{ref}}} but user_config has no {key}")
                used.add(key)
            elif ref not in HOST_VARS:
                fail(f"mcp_config uses ${{{ref}}}, which no client substitutes")
    for key, field in config.items():
        if key not in used:
            fail(f"user_config.{key} is asked for but never passed to the server")
        if not field.get("required") and "default" not in field:
            fail(f"user_config.{key} may be left empty and has no default: the args would hold an empty value")
    for key in ("backend", "home", "database", "root", "allow_drafts"):
        if key not in config:
            fail(f"user_config lacks {key}")
    if config["root"]["type"] != "directory" or config["allow_drafts"]["type"] != "boolean":
        fail("root must be a directory and allow_drafts a boolean")
    print(f"user_config {sorted(config)} all declared, used and resolvable; version {manifest['version']}")


def substitute(text: str, values: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            fail(f"nothing to substitute for ${{{m.group(1)}}}")
        return values[m.group(1)]

    return REF.sub(one, text)


def launch(bundle: Path, mcpb: str, backend: str, home: str, plan_path: Path) -> None:
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="rwmcp-bundle-") as tmp:
        installed = Path(tmp) / "installed"
        subprocess.run([mcpb, "unpack", str(bundle), str(installed)], check=True, stdin=subprocess.DEVNULL)
        manifest = json.loads((installed / "manifest.json").read_text(encoding="utf-8"))
        entry = installed / manifest["server"]["entry_point"]
        if not entry.is_file() or not os.access(entry, os.X_OK):
            fail(f"entry point {entry} is missing or not executable after unpacking")
        mcp = manifest["server"]["mcp_config"]

        def command(allow_drafts: bool) -> list[str]:
            values = {
                "__dirname": str(installed),
                "HOME": os.environ.get("HOME", "/"),
                "user_config.backend": backend,
                "user_config.home": home,
                "user_config.database": str(Path(home) / "data" / "reachweaver.db"),
                "user_config.root": home,
                # Desktop clients hand a checkbox over as its JSON text.
                "user_config.allow_drafts": json.dumps(allow_drafts),
            }
            return [substitute(mcp["command"], values), *(substitute(a, values) for a in mcp.get("args", []))]

        ok = True
        for era in ("legacy", "modern"):
            cmd = [py, str(ROOT / "tests/clients/py_client.py"), era, str(plan_path), "--", *command(False)]
            print(f"$ {' '.join(cmd)}", flush=True)
            ok &= subprocess.run(cmd, stdin=subprocess.DEVNULL).returncode == 0
        for allow in (True, False):
            names = list_tools(command(allow))
            has = "draft" in names
            print(f"allow_drafts={json.dumps(allow)}: {len(names)} tools, draft {'offered' if has else 'withheld'}")
            if has != allow:
                print(f"FAIL allow_drafts={json.dumps(allow)} should {'offer' if allow else 'withhold'} the draft tool")
                ok = False
        if not ok:
            raise SystemExit(1)


def list_tools(cmd: list[str]) -> list[str]:
    import asyncio

    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    async def go() -> list[str]:
        async with Client(StdioServerParameters(command=cmd[0], args=cmd[1:]), mode="legacy") as c:
            return [t.name for t in (await c.list_tools()).tools]

    return asyncio.run(asyncio.wait_for(go(), 60))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "schema":
        check_schema(Path(sys.argv[2]), Path(sys.argv[3]))
    elif len(sys.argv) == 7 and sys.argv[1] == "launch":
        launch(Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], Path(sys.argv[6]))
    else:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()

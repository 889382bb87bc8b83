#!/usr/bin/env python3
"""Checks docs/catalog.schema.json against real catalogs, both ways.

usage: check_catalog.py SCHEMA BACKEND HOME

1. The schema is itself a valid draft 2020-12 schema.
2. The catalog the backend prints (`BACKEND --home=HOME describe --format=json`)
   validates against it, and so does the example catalog in docs/BACKEND.md.
   A new field, tag or type in the reference backend that the schema does not
   know makes this fail: the schema and the catalog must move together.
3. Broken copies of that catalog are rejected, each for the reason it was
   broken (a wrong type, an unknown tag, type or command field, a bad name, a
   `choice` without choices, ...), so a schema loosened by mistake fails too.
4. What the server tolerates stays valid: an unknown top-level field, and
   `null` for an optional field.

Needs the `jsonschema` package (ci/test.sh's venv has it).
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "BACKEND.md"


def fail(msg: str) -> None:
    print(f"FAIL {msg}")
    raise SystemExit(1)


def describe(backend: str, home: str) -> dict:
    run = subprocess.run(
        [backend, f"--home={home}", "describe", "--format=json"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
    )
    if run.returncode != 0:
        fail(f"describe exited {run.returncode}: {run.stderr.decode(errors='replace')[:500]}")
    return json.loads(run.stdout)


def doc_example() -> dict:
    """The catalog under "### An example" in docs/BACKEND.md."""
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"^### An example\n+```json\n(.*?)\n```", text, re.M | re.S)
    if not m:
        fail(f"no example catalog found in {DOC}")
    return json.loads(m.group(1))


def first(cat: dict, pred: Callable[[dict], bool]) -> dict:
    for cmd in cat["commands"]:
        if pred(cmd):
            return cmd
    fail("the catalog has no command this check needs")
    raise AssertionError


def with_flag(cat: dict) -> dict:
    return first(cat, lambda c: bool(c.get("flags")))


def with_positional(cat: dict) -> dict:
    return first(cat, lambda c: bool(c.get("positionals")))


def flag_of_type(cat: dict, ty: str) -> dict:
    for cmd in cat["commands"]:
        for f in cmd.get("flags") or []:
            if f["type"] == ty:
                return f
    fail(f"the catalog has no {ty} flag")
    raise AssertionError


def set_(path: list, value: object) -> Callable[[dict], None]:
    def apply(cat: dict) -> None:
        target = cat
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return apply


# Each: what is broken, how, and a word the validator's message must contain
# (so a mutant rejected for some other, accidental reason does not count).
BROKEN: list[tuple[str, Callable[[dict], None], str]] = [
    ("catalog version of the wrong type", set_(["catalog"], "1"), "1"),
    ("a newer catalog version", set_(["catalog"], 2), "1"),
    ("program without a version", lambda c: c["program"].pop("version"), "version"),
    ("format_flag of the wrong type", set_(["format_flag"], 7), "string"),
    ("format_flag not --kebab-case", set_(["format_flag"], "format"), "does not match"),
    ("commands not an array", set_(["commands"], {}), "array"),
    ("relative paths.db", set_(["paths", "db"], "data/rw.db"), "valid"),
    ("a command name of the wrong type", lambda c: c["commands"][0].update(name=3), "string"),
    ("a command name with `_`", lambda c: c["commands"][0].update(name="camp_check"), "does not match"),
    ("a command without a summary", lambda c: c["commands"][0].pop("summary"), "summary"),
    ("an unknown tag", lambda c: c["commands"][0].update(tags=["read_only", "experimental"]), "experimental"),
    ("an unknown command field", lambda c: c["commands"][0].update(since="2.0"), "since"),
    ("tags not an array", lambda c: c["commands"][0].update(tags="read_only"), "read_only"),
    ("an unknown argument type", lambda c: with_flag(c)["flags"][0].update(type="colour"), "colour"),
    ("an argument type of the wrong type", lambda c: with_flag(c)["flags"][0].update(type=1), "1"),
    ("an unknown argument field", lambda c: with_flag(c)["flags"][0].update(hidden=True), "hidden"),
    ("a flag name without dashes", lambda c: with_flag(c)["flags"][0].update(name="days"), "does not match"),
    ("a flag name with `_`", lambda c: with_flag(c)["flags"][0].update(name="--max_len"), "does not match"),
    (
        "a positional in --kebab-case",
        lambda c: with_positional(c)["positionals"][0].update(name="--campaign"),
        "does not match",
    ),
    ("a boolean positional", lambda c: with_positional(c)["positionals"][0].update(type="boolean"), "boolean"),
    ("required not a boolean", lambda c: with_flag(c)["flags"][0].update(required="yes"), "yes"),
    ("a choice without choices", lambda c: flag_of_type(c, "choice").pop("choices"), "choices"),
    ("empty choices", lambda c: flag_of_type(c, "choice").update(choices=[]), "[]"),
    ("a choice listed twice", lambda c: flag_of_type(c, "choice").update(choices=["a", "a"]), "non-unique"),
    ("choices on a string", lambda c: flag_of_type(c, "string").update(choices=["a"]), "'null'"),
    ("a fractional integer bound", lambda c: flag_of_type(c, "integer").update(minimum=1.5), "1.5"),
    ("a bound on a string", lambda c: flag_of_type(c, "string").update(maximum=3), "'null'"),
    ("a repeatable boolean", lambda c: flag_of_type(c, "boolean").update(repeatable=True), "True"),
]


def main() -> None:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    import jsonschema

    schema_path, backend, home = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    print(f"{schema_path.name} is a valid draft 2020-12 schema")

    def errors(doc: dict) -> list[str]:
        return [f"/{'/'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]

    catalog = describe(backend, home)
    for label, doc in [("the reference backend's catalog", catalog), ("the example in docs/BACKEND.md", doc_example())]:
        found = errors(doc)
        for e in found:
            print(f"  {e}")
        if found:
            fail(f"{label} breaks {schema_path.name}")
        print(f"valid: {label} ({len(doc['commands'])} commands)")

    for what, breaker, word in BROKEN:
        broken = copy.deepcopy(catalog)
        breaker(broken)
        found = errors(broken)
        if not found:
            fail(f"a catalog with {what} is accepted")
        if not any(word in e for e in found):
            fail(f"a catalog with {what} is rejected, but not for it: {found}")
        print(f"rejected: {what}: {found[0]}")

    tolerated = copy.deepcopy(catalog)
    tolerated["signature"] = {"by": "a newer backend"}
    tolerated["paths"]["profile"] = None
    tolerated["end_of_options"] = None
    tolerated["commands"][0]["tags"] = None
    with_flag(tolerated)["flags"][0]["help"] = None
    found = errors(tolerated)
    if found:
        fail(f"a catalog with an unknown top-level field and null optional fields is rejected: {found}")
    print("valid: unknown top-level field, null optional fields")
    print(f"ok: 2 catalogs valid, {len(BROKEN)} broken catalogs rejected, 1 tolerated catalog valid")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""The smallest Python backend that follows the catalog contract:
`describe --format=json` prints a catalog with one read-only command, every
other command prints `{}`. What a run costs beyond the interpreter's own
start is the cost of starting it."""

import json
import sys

CATALOG = {
    "catalog": 1,
    "program": {"name": "pynoop", "version": "1.0.0"},
    "format_flag": "--format",
    "end_of_options": True,
    "commands": [
        {
            "name": "noop",
            "summary": "Print an empty object.",
            "tags": ["read_only"],
            "formats": ["json"],
            "positionals": [],
            "flags": [{"name": "--format", "type": "choice", "choices": ["json"], "output_format": True}],
        }
    ],
}

if "describe" in sys.argv[1:]:
    json.dump(CATALOG, sys.stdout)
    sys.stdout.write("\n")
else:
    sys.stdout.write("{}\n")

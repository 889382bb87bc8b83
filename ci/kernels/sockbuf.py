#!/usr/bin/env python3
"""What a cgroup's memory bound counts of kernel buffers: pipes and sockets.

usage: sockbuf.py CGROUP   (run inside CGROUP, by ci/kernels/guest.sh)

A run's processes are bounded one by one by RLIMIT_AS, which counts none of
the kernel's buffers behind their descriptors. This fills pipes, then unix
stream socket pairs (the buffers a run can make: its network namespace has
no interface up), each without reading, and prints as JSON how many bytes
were queued and how much the cgroup's `memory.current` and the `sock`,
`kernel` and `slab` lines of its `memory.stat` grew meanwhile. Standard
library only.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PIPES = 200
PAIRS = 200
CHUNK = b"x" * 65536


def stat(cg: Path) -> dict[str, int]:
    out = {"current": int((cg / "memory.current").read_text())}
    for ln in (cg / "memory.stat").read_text().splitlines():
        key, _, val = ln.partition(" ")
        if key in ("sock", "kernel", "slab"):
            out[key] = int(val)
    return out


def fill(write: Callable[[bytes], int], chunk: bytes = CHUNK, most: int = 16 << 20) -> int:
    """Write until the kernel refuses more (or `most` bytes); the bytes it took."""
    n = 0
    while n < most:
        try:
            took = write(chunk)
        except OSError:
            return n
        if not took:
            return n
        n += took
    return n


def measure(cg: Path, make: Callable[[], tuple[list[Any], int]]) -> dict[str, int]:
    before = stat(cg)
    held, queued = make()
    after = stat(cg)
    result = {"queued": queued}
    for key in after:
        result[f"{key}_grew"] = after[key] - before.get(key, 0)
    for f in held:
        f.close()
    return result


def pipes() -> tuple[list[Any], int]:
    held, queued = [], 0
    for _ in range(PIPES):
        r, w = os.pipe()
        fcntl.fcntl(w, fcntl.F_SETFL, os.O_NONBLOCK)
        queued += fill(lambda b, w=w: os.write(w, b))
        held += [os.fdopen(r, "rb", buffering=0), os.fdopen(w, "wb", buffering=0)]
    return held, queued


def unix_pairs() -> tuple[list[Any], int]:
    held, queued = [], 0
    for _ in range(PAIRS):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        a.setblocking(False)
        queued += fill(a.send)
        held += [a, b]
    return held, queued


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    cg = Path(sys.argv[1])
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    report = {
        "pipes": measure(cg, pipes),
        "unix_stream": measure(cg, unix_pairs),
    }
    print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Peak memory and threads of `mcp-serve` under load (BENCHMARKS.md, "Load").

Two scenarios, each against every server given:

- pipelined: CALLS calls written at once (a small answer each) while the
  answers are read as they come;
- stalled: STALL_CALLS calls with half-megabyte answers written while
  nothing is read, until the server stops making progress, then read.

For each: answers received out of the calls sent, the peak of VmRSS and of
Threads of the server process (sampled every 5 ms), and the time taken.
Nothing is asserted; the report is a Markdown table on stdout.

    python3 ci/bench/load_bench.py --backend tests/fixtures/load-backend \
        --server after=target/release/reachweaver-mcp [--server before=PATH ...]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call(i, tool, args):
    return (
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": tool, "arguments": args, "_meta": ENVELOPE},
            }
        )
        + "\n"
    )


def status(pid):
    """VmRSS (KiB) and Threads of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return None
    if "VmRSS" not in fields:
        # Exited, not yet reaped: nothing left to measure.
        return None
    return int(fields["VmRSS"].split()[0]), int(fields["Threads"])


class Sampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.rss = 0
        self.threads = 0
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            s = status(self.pid)
            if s is None:
                return
            self.rss = max(self.rss, s[0])
            self.threads = max(self.threads, s[1])
            time.sleep(0.005)


class Server:
    def __init__(self, exe, backend, home, workers):
        self.log = tempfile.NamedTemporaryFile(prefix="load-bench-", suffix=".log")
        self.proc = subprocess.Popen(
            [
                exe,
                f"--backend={backend}",
                f"--home={home}",
                "mcp-serve",
                f"--max-concurrent-calls={workers}",
                "--max-calls-per-minute=1000000",
                "--max-output-bytes=4194304",
            ],
            cwd=home,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
        )

    def calls_logged(self):
        with open(self.log.name, errors="replace") as f:
            return f.read().count("call tool=")

    def warm_up(self):
        """One call answered: the sandbox's helper is up; RSS at rest."""
        self.proc.stdin.write(call("warm", "nap", {"seconds": 0}).encode())
        self.proc.stdin.flush()
        self.proc.stdout.readline()
        return status(self.proc.pid)[0]

    def send_all(self, lines):
        def write():
            try:
                for line in lines:
                    self.proc.stdin.write(line.encode())
                self.proc.stdin.close()
            except BrokenPipeError:
                pass

        t = threading.Thread(target=write, daemon=True)
        t.start()
        return t

    def read_answers(self, want, deadline):
        """Ids answered (a list, repeats kept) until `want` or the deadline."""
        ids = []
        timer = threading.Timer(max(0.0, deadline - time.time()), self.proc.kill)
        timer.start()
        try:
            while len(ids) < want:
                line = self.proc.stdout.readline()
                if not line:
                    break
                ids.append(json.loads(line).get("id"))
        finally:
            timer.cancel()
        return ids

    def finish(self):
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode


def pipelined(exe, backend, home, workers, calls):
    s = Server(exe, backend, home, workers)
    rest = s.warm_up()
    sampler = Sampler(s.proc.pid)
    sampler.start()
    t0 = time.time()
    writer = s.send_all(call(i, "blob", {"kib": 1}) for i in range(calls))
    ids = s.read_answers(calls, t0 + 600)
    took = time.time() - t0
    writer.join(timeout=10)
    code = s.finish()
    sampler.done.set()
    return row("pipelined", calls, ids, rest, sampler, took, code)


def stalled(exe, backend, home, workers, calls, stall_limit):
    s = Server(exe, backend, home, workers)
    rest = s.warm_up()
    sampler = Sampler(s.proc.pid)
    sampler.start()
    t0 = time.time()
    writer = s.send_all(call(i, "blob", {"kib": 256}) for i in range(calls))
    # Nothing is read until the server stops making progress (its call
    # log line count holds still for 2 s) or the limit passes.
    last, since = -1, time.time()
    while time.time() - t0 < stall_limit:
        n = s.calls_logged()
        if n != last:
            last, since = n, time.time()
        elif time.time() - since >= 2:
            break
        time.sleep(0.1)
    stalled_rss, stalled_threads = sampler.rss, sampler.threads
    ids = s.read_answers(calls, time.time() + 600)
    took = time.time() - t0
    writer.join(timeout=10)
    code = s.finish()
    sampler.done.set()
    r = row("stopped reading", calls, ids, rest, sampler, took, code)
    r["calls run before reading"] = last - 1
    r["peak RSS while not read (MiB)"] = round(stalled_rss / 1024, 1)
    r["peak threads while not read"] = stalled_threads
    return r


def row(name, calls, ids, rest, sampler, took, code):
    answered = len(set(ids))
    return {
        "scenario": name,
        "calls": calls,
        "answered": answered,
        "answered twice": len(ids) - answered,
        "RSS at rest (MiB)": round(rest / 1024, 1),
        "peak RSS (MiB)": round(sampler.rss / 1024, 1),
        "peak threads": sampler.threads,
        "seconds": round(took, 1),
        "exit": code,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", action="append", required=True, metavar="NAME=PATH")
    ap.add_argument("--backend", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--stall-calls", type=int, default=600)
    ap.add_argument("--stall-limit", type=float, default=120)
    a = ap.parse_args()
    backend = os.path.abspath(a.backend)
    results = []
    with tempfile.TemporaryDirectory(prefix="load-bench-") as home:
        for spec in a.server:
            name, _, exe = spec.partition("=")
            exe = os.path.abspath(exe)
            for r in (
                pipelined(exe, backend, home, a.workers, a.calls),
                stalled(exe, backend, home, a.workers, a.stall_calls, a.stall_limit),
            ):
                r = {"server": name, **r}
                results.append(r)
                print(json.dumps(r), file=sys.stderr)
    keys = []
    for r in results:
        keys += [k for k in r if k not in keys]
    print(f"--max-concurrent-calls {a.workers}\n")
    print("| " + " | ".join(keys) + " |")
    print("|" + " --- |" * len(keys))
    for r in results:
        print("| " + " | ".join(str(r.get(k, "")) for k in keys) + " |")


if __name__ == "__main__":
    main()

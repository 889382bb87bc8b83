#!/usr/bin/env python3
"""Judge what ci/kernels/guest.sh collected in each guest.

usage: report.py WORK START_EPOCH

WORK is target/kernels: each WORK/out/<series>/ holds one guest's
collection (kernel.json written by ci/kernels.sh before the boot). Writes
WORK/results.json (kernel x shape x promise: held or not, and by which
layers, from `sandbox status --json`; the session's attested layers; the
probe's verdicts) and prints a table. The expectations are stated in
SHAPES, KNOWN and the checks below: an expected refusal that does not
happen fails as much as an unexpected one. The last line is
"N passed, M failed"; the exit code is 1 if any check failed.

Standard library only.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

# One letter per layer, as the call log line writes them (sandbox/LAYERS.md).
LETTERS = {
    "userns": "U",
    "netns": "N",
    "ipcns": "I",
    "utsns": "H",
    "pidns": "P",
    "pid_max": "p",
    "mountns": "M",
    "cgroup": "G",
    "rlimits": "R",
    "landlock": "L",
    "landlock_tcp": "T",
    "landlock_scope": "S",
    "caps": "K",
    "seccomp": "C",
}

# What each shape must do on every kernel booted (Debian's 6.1 and 6.12,
# both before 6.14: no PID namespace has a pid_max of its own there, so a
# root server's runs are bounded only by a per-run cgroup).
#   starts: mcp-serve --sandbox require starts (False: it must refuse, and
#           the refusal must contain `refusal`);
#   cgroup: the cgroup layer is available (True) or not (False);
#   known:  the expectation records a known defect, not the design.
SHAPES: dict[str, dict[str, Any]] = {
    "root-shared-bare": {
        "what": "root, in a cgroup shared with another process; the hierarchy's root hands down no controller"
        " (the server hands memory and pids down itself)",
        "starts": True,
        "cgroup": True,
    },
    "root-own": {"what": "root, alone in a cgroup of its own", "starts": True, "cgroup": True},
    "root-shared": {
        "what": "root, in a cgroup shared with another process; memory and pids handed down from the root",
        "starts": True,
        "cgroup": True,
    },
    "user-delegated": {
        "what": "uid 65534, alone in a cgroup delegated to it",
        "starts": True,
        "cgroup": True,
    },
    "user-plain": {
        "what": "uid 65534, in a shared cgroup not delegated to it",
        "starts": True,
        "cgroup": False,
    },
    "root-nouserns": {
        "what": "root, alone in a cgroup of its own, user.max_user_namespaces=0 and kernel.unprivileged_userns_clone=0"
        " (the re-executed helper enters each run's cgroup)",
        "starts": True,
        "cgroup": True,
    },
    "user-nouserns": {
        "what": "uid 65534, in a shared cgroup, user.max_user_namespaces=0 and kernel.unprivileged_userns_clone=0",
        "starts": True,
        "cgroup": False,
    },
}

# Known defects: the check expects the failure, and says so.
KNOWN = {}

PROBE_SHAPES = ("root-own", "user-delegated")
MEMORY_SHAPES = ("root-own", "user-delegated")


class Checks:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, name: str, ok: bool, detail: str = "") -> bool:
        self.rows.append({"name": name, "ok": bool(ok), "detail": detail})
        mark = "pass" if ok else "FAIL"
        print(f"  {mark}  {name}" + (f"  ({detail})" if detail else ""))
        return ok


def read(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def rc_of(d: Path, step: str) -> int | None:
    t = read(d / f"{step}.rc").strip()
    return int(t) if t.lstrip("-").isdigit() else None


def load_json(p: Path) -> Any:
    return load_json_text(read(p))


def load_json_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def cgroup_state(text: str) -> dict[str, str]:
    """guest.sh's cgroup_state lines as a dict (values stripped)."""
    out: dict[str, str] = {}
    for ln in text.splitlines():
        k, sep, v = ln.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def times_of(d: Path) -> dict[str, float]:
    out = {}
    for ln in read(d / "times.tsv").splitlines():
        name, _, secs = ln.partition("\t")
        try:
            out[name] = float(secs)
        except ValueError:
            pass
    return out


def judge_session(c: Checks, tag: str, d: Path, exp: dict[str, Any], status: Any) -> dict[str, Any]:
    rc = rc_of(d, "session")
    err = read(d / "session.err")
    answers: dict[Any, list[Any]] = {}
    bad_lines = 0
    for ln in read(d / "session.out").splitlines():
        try:
            msg = json.loads(ln)
        except ValueError:
            bad_lines += 1
            continue
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or "id" not in msg:
            bad_lines += 1
            continue
        answers.setdefault(msg["id"], []).append(msg)
    res: dict[str, Any] = {"exit": rc, "started": rc == 0}
    if not exp["starts"]:
        msg = last_line(err)
        res["refusal"] = msg
        known = f"; known defect: {exp['known']}" if exp.get("known") else ""
        c.add(
            f"{tag}: mcp-serve refuses to start (expected{known})",
            rc == 2 and not answers and exp["refusal"] in msg,
            f"exit {rc}: {msg[:300]}",
        )
        return res
    ok = c.add(
        f"{tag}: session: server exits 0, every line a response, each request answered once",
        rc == 0 and bad_lines == 0 and all(len(answers.get(i, [])) == 1 for i in (1, 2, 3, 4)),
        f"exit {rc}, answers {sorted((str(k), len(v)) for k, v in answers.items())}, bad lines {bad_lines}"
        + ("" if rc == 0 else f": {last_line(err)[:300]}"),
    )
    want = [la["name"] for la in (status or {}).get("layers", []) if la.get("available")]
    for rid, tool in ((2, "campaign_check"), (3, "draft")):
        r = (answers.get(rid) or [{}])[0].get("result", {})
        layers = (r.get("_meta") or {}).get("io.reachweaver/sandbox", {}).get("layers") or []
        res[tool] = {"is_error": r.get("isError"), "layers": layers}
        missing = [la for la in want if la not in layers]
        text = json.dumps(r.get("content", ""))[:300]
        c.add(
            f"{tag}: session: {tool} succeeded with every available layer",
            ok and r.get("isError") is False and not missing and bool(layers),
            f"layers {''.join(LETTERS.get(la, '?') for la in layers)}"
            + (f", missing {missing}" if missing else "")
            + ("" if r.get("isError") is False else f", result {text}"),
        )
    tools = [t.get("name") for t in ((answers.get(4) or [{}])[0].get("result", {}).get("tools") or [])]
    c.add(f"{tag}: session: tools/list offers campaign_check and draft", "draft" in tools and "campaign_check" in tools)
    res["log"] = [ln for ln in err.splitlines() if ln.startswith("call ")]
    return res


def judge_truncate(
    c: Checks, tag: str, d: Path, exp: dict[str, Any], layers: dict[str, bool], abi: Any
) -> dict[str, Any]:
    """A read-only run's truncate(2), by path, of a file under the root that its user owns.

    From Landlock ABI 3 the mount layer's read-only bind answers EROFS first, and without it Landlock
    answers EACCES. Below ABI 3 (no truncate right) seccomp refuses the call with the same EACCES, before
    any path is looked at.
    """
    rc = rc_of(d, "truncate")
    out = load_json(d / "truncate.out")
    answer = out.get("result") if isinstance(out, dict) and out.get("ok") is False else None
    intact = read(d / "truncate-victim.after") == "untouched\n"
    res: dict[str, Any] = {"exit": rc, "answer": answer, "file_intact": intact}
    detail = f"exit {rc}, {read(d / 'truncate.out').strip()[:160] or last_line(read(d / 'truncate.err'))[:200]}"
    if not exp["starts"]:
        refused = rc not in (0, None) and intact
        c.add(f"{tag}: sandbox run refuses as mcp-serve does, the file untouched", refused, detail)
        return res
    want = "EROFS" if layers.get("mountns") and isinstance(abi, int) and abi >= 3 else "EACCES"
    res["expected"] = want
    c.add(
        f"{tag}: a read-only run's truncate(2) by path is refused ({want}), the file untouched",
        rc == 0 and answer == want and intact,
        detail + ("" if intact else "; the file was changed"),
    )
    return res


def judge_memory(c: Checks, tag: str, d: Path) -> dict[str, Any]:
    """A call whose two processes together pass the run's memory bound: the cgroup stops it."""
    rc = rc_of(d, "memory")
    answer: dict[str, Any] = {}
    for ln in read(d / "memory.out").splitlines():
        msg = load_json_text(ln)
        if isinstance(msg, dict) and msg.get("id") == 2:
            answer = msg.get("result") or {}
    err = ((answer.get("structuredContent") or {}).get("output") or {}).get("error") or {}
    left = cgroup_state(read(d / "memory-cgroup.txt"))
    runs = [e for e in left.get("entries", "").split() if e.startswith("run-")]
    res = {"exit": rc, "code": err.get("code"), "message": err.get("message", "")[:300]}
    c.add(
        f"{tag}: a call past its memory bound is stopped by the cgroup and answered resource_exhausted",
        rc == 0 and answer.get("isError") is True and err.get("code") == "resource_exhausted",
        f"exit {rc}: {err.get('code')}: {err.get('message', '')[:200] or last_line(read(d / 'memory.err'))[:200]}",
    )
    c.add(f"{tag}: the memory-bound run's cgroup is gone after its call", not runs, f"left: {runs}")
    return res


def judge_buffers(c: Checks, series: str, d: Path) -> dict[str, Any]:
    """How much of what pipes and unix sockets held the cgroup was charged (ci/kernels/sockbuf.py).

    A measurement: the check is that it ran; the numbers go to the results and below the table.
    """
    rc = rc_of(d, "measure")
    got = load_json(d / "measure.out")
    ok = rc == 0 and isinstance(got, dict) and all(isinstance(got.get(k), dict) for k in ("pipes", "unix_stream"))
    c.add(
        f"{series}: the charge of pipe and socket buffers to a run-like cgroup was measured",
        ok,
        f"exit {rc}: {json.dumps(got)[:300] if ok else last_line(read(d / 'measure.err'))[:300]}",
    )
    return got if ok else {}


def judge_probe(c: Checks, tag: str, d: Path) -> dict[str, Any]:
    rc = rc_of(d, "probe")
    rep = load_json(d / "probe.out")
    if not isinstance(rep, dict) or not isinstance(rep.get("attempts"), list):
        c.add(f"{tag}: sandbox probe ran", False, f"exit {rc}: {last_line(read(d / 'probe.err'))[:300]}")
        return {"exit": rc}
    by: dict[str, list[str]] = {}
    for a in rep["attempts"]:
        by.setdefault(a.get("verdict", "?"), []).append(a.get("name", "?"))
    counts = {k: len(v) for k, v in sorted(by.items())}
    bad = {k: v for k, v in by.items() if k in ("ESCAPED", "BROKEN", "FAILED")}
    c.add(
        f"{tag}: sandbox probe: nothing escaped, nothing broken, every run started",
        rc == 0 and not bad and rep.get("escaped") == 0 and rep.get("broken") == 0,
        f"exit {rc}, {counts}" + (f"; {bad}" if bad else ""),
    )
    unproven = by.get("unproven", [])
    c.add(
        f"{tag}: sandbox probe: at most 2 attempts prove nothing",
        len(unproven) <= 2,
        f"{len(unproven)}: {', '.join(unproven)}",
    )
    c.add(
        f"{tag}: sandbox probe: the cgroup holds the fork bomb where it is in force",
        "fork-bomb" not in by.get("not promised", []) or "cgroup" not in str(rep.get("layers", "")),
        f"layers {rep.get('layers')}",
    )
    return {
        "exit": rc,
        "layers": rep.get("layers"),
        "uid": rep.get("uid"),
        "counts": counts,
        "unproven": {
            a["name"]: f"inside {a.get('inside')}; control {a.get('control')}"
            for a in rep["attempts"]
            if a.get("verdict") == "unproven"
        },
        "not_promised": by.get("not promised", []),
        "not_applicable": {
            a["name"]: a.get("not_applicable", "") for a in rep["attempts"] if a.get("verdict") == "not applicable"
        },
        "escaped": by.get("ESCAPED", []),
        "broken": by.get("BROKEN", []),
        "failed": by.get("FAILED", []),
    }


def judge_container(c: Checks, series: str, d: Path) -> dict[str, Any]:
    """Root in a private cgroup namespace rooted at a cgroup holding another
    process: refused with a recipe, and the recipe, run as printed, gives
    the next start its cgroups."""
    tag = f"{series} root-container"
    res: dict[str, Any] = {}
    for step in ("status-before", "status-after"):
        st = load_json(d / f"{step}.out")
        layers = {la["name"]: la for la in (st or {}).get("layers", [])}
        cg = layers.get("cgroup", {})
        res[step] = {"cgroup": cg.get("available"), "detail": cg.get("detail", "")}
    before, after = res["status-before"], res["status-after"]
    c.add(
        f"{tag}: refused with the container recipe",
        before["cgroup"] is False and "before starting the server: mkdir -p /sys/fs/cgroup/init" in before["detail"],
        before["detail"][:300],
    )
    res["recipe"] = read(d / "recipe.txt").strip()
    c.add(
        f"{tag}: after the recipe it printed, the cgroup layer is available",
        after["cgroup"] is True and rc_of(d, "status-after") == 0,
        f"recipe {res['recipe'][:200]}; {after['detail'][:200]}; {last_line(read(d / 'status-after.err'))[:200]}",
    )
    return res


def judge_kernel(c: Checks, out: Path) -> dict[str, Any]:
    meta = load_json(out / "kernel.json") or {}
    series = meta.get("series", out.name)
    k: dict[str, Any] = dict(meta)
    console = read(out / "console.log")
    m = re.search(r"\[\s*([0-9.]+)\] virtme-ng-init: starting script", console)
    k["boot_seconds_to_script"] = float(m.group(1)) if m else None
    # ci/kernels.sh boots a guest once more when it died before its script.
    retried = read(out / "boot-retried.txt").strip()
    if retried:
        k["boot_retried"] = retried
        print(f"  note  {series}: booted twice, the first boot died before its script: {retried}")
    machine = {}
    for ln in read(out / "machine.txt").splitlines():
        key, _, val = ln.partition("=")
        if key != "cmdline":
            machine[key] = val
    k["machine"] = machine
    done = read(out / "done").strip()
    c.add(f"{series}: guest ran its script to the end", done == "0", f"exit {done or 'none (guest died or timed out)'}")
    k["shapes"] = {}
    for name, exp in SHAPES.items():
        d = out / name
        tag = f"{series} {name}"
        sh: dict[str, Any] = {"what": exp["what"], "expected_start": exp["starts"]}
        if exp.get("known"):
            sh["known_defect"] = exp["known"]
        k["shapes"][name] = sh
        if not d.is_dir():
            c.add(f"{tag}: shape ran", False, "no output")
            continue
        sh["times"] = times_of(d)
        # The servers' folders at the hierarchy's root after each step (a
        # server that made one removes it when it ends).
        sh["server_cgroup_folders_after"] = {
            step: read(d / f"{step}.cgroups").split() for step in sh["times"] if (d / f"{step}.cgroups").is_file()
        }
        st = load_json(d / "status-json.out")
        if not c.add(
            f"{tag}: sandbox status --json",
            rc_of(d, "status-json") == 0 and isinstance(st, dict),
            last_line(read(d / "status-json.err")),
        ):
            st = None
        if st:
            k.setdefault("landlock_abi", st.get("landlock_abi"))
            sh["trial"] = st.get("trial")
            sh["layers"] = {la["name"]: la["available"] for la in st.get("layers", [])}
            sh["layers_missing"] = {la["name"]: la["detail"] for la in st.get("layers", []) if not la["available"]}
            sh["require_missing"] = st.get("require_missing")
            sh["promises"] = promises_of(st)
            c.add(
                f"{tag}: trial run with every available layer passed",
                str(st.get("trial", "")).startswith("passed"),
                str(st.get("trial")),
            )
            would = not st.get("require_missing")
            c.add(
                f"{tag}: status says mcp-serve would {'start' if exp['starts'] else 'refuse'}",
                would == exp["starts"],
                "; ".join(st.get("require_missing") or []) or "nothing missing",
            )
            cg = sh["layers"].get("cgroup")
            c.add(
                f"{tag}: cgroup layer {'available' if exp['cgroup'] else 'not available'}",
                cg == exp["cgroup"],
                sh["layers_missing"].get("cgroup", "available"),
            )
        sh["session"] = judge_session(c, tag, d, exp, st)
        sh["truncate"] = judge_truncate(c, tag, d, exp, sh.get("layers") or {}, k.get("landlock_abi"))
        if exp["starts"] and exp["cgroup"] and sh.get("server_cgroup_folders_after", {}).get("session") is not None:
            # A root server not alone in its cgroup makes one of its own at
            # the hierarchy's root: the session's server must take it away.
            folders = sh["server_cgroup_folders_after"]
            new_ones = [f for f in folders["session"] if f not in folders.get("status-json", [])]
            c.add(
                f"{tag}: the session's server left no cgroup of its own at the hierarchy's root",
                not new_ones,
                f"left: {new_ones}",
            )
        if exp["cgroup"]:
            left = cgroup_state(read(d / "session-cgroup.txt"))
            runs = [e for e in left.get("entries", "").split() if e.startswith("run-")]
            c.add(f"{tag}: each run's cgroup is gone after its call", not runs, f"left: {runs}")
        if name == "user-delegated":
            first, third = rc_of(d, "reuse-first"), rc_of(d, "reuse-third")
            after = {k: cgroup_state(read(d / f"reuse-after-{k}.txt")) for k in ("first", "kill", "third")}
            sh["reuse"] = {
                "first_exit": first,
                "third_exit": third,
                "third_message": last_line(read(d / "reuse-third.err")),
                "killed": read(d / "reuse-killed.txt").strip(),
                "cgroup_after": after,
            }
            as_found = {"entries": "", "subtree_control": "", "procs": ""}
            c.add(f"{tag}: a first server start in a fresh delegated cgroup", first == 0, f"exit {first}")
            c.add(
                f"{tag}: after a clean exit the delegated cgroup is as found",
                after["first"] == as_found,
                str(after["first"]),
            )
            k_entries = after["kill"].get("entries", "").split()
            c.add(
                f"{tag}: after a SIGKILL the keeper hands the controllers back and removes the runs",
                "server pid: none" not in sh["reuse"]["killed"]
                and "kill failed" not in sh["reuse"]["killed"]
                and after["kill"].get("subtree_control") == ""
                and not [e for e in k_entries if e.startswith("run-")],
                f"{sh['reuse']['killed']}; {after['kill']}",
            )
            c.add(
                f"{tag}: a third start in the same delegated cgroup works",
                third == 0,
                f"exit {third}: {sh['reuse']['third_message'][:200]}",
            )
            c.add(
                f"{tag}: after the third start the delegated cgroup is as found",
                after["third"] == as_found,
                str(after["third"]),
            )
        if name in MEMORY_SHAPES:
            sh["memory"] = judge_memory(c, tag, d)
        if name in PROBE_SHAPES:
            sh["probe"] = judge_probe(c, tag, d)
    k["buffers"] = judge_buffers(c, series, out / "buffers")
    k["container"] = judge_container(c, series, out / "root-container")
    ap = out / "apparmor"
    parse_rc = rc_of(ap, "parse")
    k["apparmor"] = {
        "parser": read(ap / "parser-version").strip(),
        "exit": parse_rc,
        "message": last_line(read(ap / "parse.err")),
    }
    load_rc = rc_of(ap, "load")
    loaded = [ln for ln in read(ap / "profiles").splitlines() if ln.startswith("reachweaver-mcp ")]
    k["apparmor"].update(
        {
            "chosen": last_line(read(ap / "profile.err")),
            "load_exit": load_rc,
            "load_message": last_line(read(ap / "load.err")),
            "loaded": loaded,
        }
    )
    c.add(
        f"{series}: the printed AppArmor profile compiles with this userspace's parser",
        parse_rc == 0,
        f"exit {parse_rc}: {k['apparmor']['chosen'][:120]} {k['apparmor']['message'][:200]}",
    )
    c.add(
        f"{series}: the profile loads into the kernel and is listed among its profiles",
        load_rc == 0 and len(loaded) == 1,
        f"exit {load_rc}: {k['apparmor']['load_message'][:200]}; listed {loaded}",
    )
    k["cgroups_left"] = read(out / "cgroups-left.txt").split()
    return k


def promises_of(st: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "id": p["id"],
            "tier": p["tier"],
            "held": bool(p["held_by"]),
            "held_by": p["held_by"],
            **({} if p["held_by"] else {"needs": p["needs"]}),
        }
        for p in st.get("promises", [])
    ]


def judge_host(c: Checks, d: Path) -> dict[str, Any]:
    """The host kernel natively: `sandbox status --json` as root and as uid
    65534. Only that both ran and their trial runs passed is judged: what
    the host offers changes with the machine CI runs on."""
    host: dict[str, Any] = {"kernel": read(d / "kernel").strip(), "shapes": {}}
    for name in ("root", "user"):
        st = load_json(d / f"{name}.json")
        ok = isinstance(st, dict) and rc_of(d, name) == 0
        c.add(
            f"host {host['kernel']} {name}: sandbox status --json, trial run passed",
            ok and str(st.get("trial", "")).startswith("passed"),
            f"exit {rc_of(d, name)}: " + (str(st.get("trial")) if ok else last_line(read(d / f"{name}.err"))),
        )
        if ok:
            host.setdefault("landlock_abi", st.get("landlock_abi"))
            host["shapes"][name] = {"promises": promises_of(st), "require_missing": st.get("require_missing")}
    return host


def table(kernels: list[dict[str, Any]]) -> None:
    for k in kernels:
        print(
            f"\n{k.get('package')} {k.get('version')} (Landlock ABI {k.get('landlock_abi')}, {k.get('accel')}, "
            f"script started {k.get('boot_seconds_to_script')} s after boot)"
        )
        print(f"  {'shape':<17}{'start':<8}{'call layers':<15}{'not held':<60}{'probe':<52}time s")
        for name, sh in k["shapes"].items():
            ses = sh.get("session", {})
            started = "yes" if ses.get("started") else "REFUSED"
            layers = "".join(LETTERS.get(la, "?") for la in (ses.get("campaign_check") or {}).get("layers", [])) or "-"
            not_held = ",".join(p["id"] for p in sh.get("promises", []) if not p["held"]) or "-"
            pr = sh.get("probe")
            probe = ", ".join(f"{n} {v}" for v, n in (pr or {}).get("counts", {}).items()) if pr else "-"
            secs = sum((sh.get("times") or {}).values())
            print(f"  {name:<17}{started:<8}{layers:<15}{not_held:<60}{probe:<52}{secs:.0f}")
        names = list(k["shapes"])
        ids = [p["id"] for p in next((s["promises"] for s in k["shapes"].values() if s.get("promises")), [])]
        print(f"  promises held by ({', '.join(names)}):")
        for pid in ids:
            cells = []
            for n in names:
                p = next((p for p in k["shapes"][n].get("promises", []) if p["id"] == pid), None)
                cells.append("?" if p is None else ("+".join(p["held_by"]) if p["held"] else "NOT HELD"))
            print(f"    {pid:<18}" + " | ".join(cells))
        for n, sh in k["shapes"].items():
            steps = ", ".join(f"{st} {t:.0f}" for st, t in (sh.get("times") or {}).items())
            print(f"  {n} times (s): {steps}")
        for n, sh in k["shapes"].items():
            if not sh.get("session", {}).get("started"):
                print(f"  {n} refused: {sh.get('session', {}).get('refusal', '')[:400]}")
            for pname, pr in [("probe", sh.get("probe"))]:
                if pr and pr.get("unproven"):
                    print(f"  {n} {pname} unproven: " + "; ".join(f"{a} ({w})" for a, w in pr["unproven"].items()))
                if pr and pr.get("not_promised"):
                    print(f"  {n} {pname} not promised: {', '.join(pr['not_promised'])}")
            if pr and pr.get("not_applicable"):
                why = "; ".join(f"{a} ({w})" for a, w in pr["not_applicable"].items())
                print(f"  {n} probe not applicable: {why}")
            if sh.get("reuse"):
                reuse = sh["reuse"]
                print(f"  {n} starts in one delegated cgroup: {reuse['killed']}; third: exit {reuse['third_exit']}")
        left = [f for f in k.get("cgroups_left", []) if f.startswith("reachweaver-mcp.")]
        if left:
            print(f"  left at the hierarchy's root after every server ended: {', '.join(left)}")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    work = Path(sys.argv[1])
    start = float(sys.argv[2])
    c = Checks()
    kernels = []
    outs = sorted((p for p in (work / "out").iterdir() if (p / "kernel.json").is_file()), key=lambda p: p.name)
    if not outs:
        c.add("a guest was booted", False, f"nothing in {work / 'out'}")
    for out in outs:
        print(f"\n== {out.name}")
        kernels.append(judge_kernel(c, out))
    host = judge_host(c, work / "out" / "host")
    table(kernels)
    total = time.time() - start
    passed = sum(r["ok"] for r in c.rows)
    failed = len(c.rows) - passed
    results = {
        "accel": kernels[0].get("accel") if kernels else None,
        "wall_seconds": round(total),
        "kernels": kernels,
        "host": host,
        "checks": c.rows,
        "passed": passed,
        "failed": failed,
    }
    (work / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nresults: {work / 'results.json'}; total wall time {total:.0f} s")
    if failed:
        print("failed checks:")
        for r in c.rows:
            if not r["ok"]:
                print(f"  {r['name']}  ({r['detail']})")
    print(f"\n{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Report import circles between the server's modules.

Every Rust file under `src/` is one module. A module depends on another when
its non-test code names it: a `use` declaration or a path through
`crate::`, `super::` or `self::` (or a child module's name). A module
naming its own ancestor or descendant is not counted: a folder's `mod.rs`
is where its children's shared types live, and a facade calls into its
children. Between any other two modules a dependency goes one way only;
a circle (`a` needs `b` needs `a`) is printed with the lines that make it,
and the exit code is 1.

Usage: python3 ci/check_import_cycles.py [SRC_DIR]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

EXTERN_ROOTS = {"std", "core", "alloc"}


def module_of(path: Path, src: Path) -> tuple[str, ...]:
    rel = path.relative_to(src).with_suffix("")
    parts = rel.parts
    if parts in (("lib",), ("main",)):
        return ()
    if parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(parts)


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = []
    for line in text.split("\n"):
        # Doc and line comments; a `//` inside a string is rare enough in
        # paths-bearing lines not to matter here.
        i = line.find("//")
        out.append(line if i < 0 else line[:i])
    return "\n".join(out)


def non_test_code(text: str) -> tuple[str, set[str]]:
    """The file without its `#[cfg(test)]` items; and the names of child
    modules declared as test-only (`#[cfg(test)] mod tests;`)."""
    lines = text.split("\n")
    out: list[str] = []
    test_mods: set[str] = set()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == "#[cfg(test)]":
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("#["):
                j += 1
            if j >= len(lines):
                break
            item = lines[j]
            m = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", item)
            if m:
                test_mods.add(m.group(1))
                i = j + 1
                continue
            if item.rstrip().endswith("{"):
                depth = 0
                k = j
                while k < len(lines):
                    depth += lines[k].count("{") - lines[k].count("}")
                    if depth <= 0:
                        break
                    k += 1
                i = k + 1
                continue
            # A one-item attribute target (a `use`, a field, a line).
            k = j
            while k < len(lines) and not lines[k].rstrip().endswith((";", "}", ",")):
                k += 1
            i = k + 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out), test_mods


def expand_use(tree: str) -> list[str]:
    """`a::{b, c::{d, self}}` -> ['a::b', 'a::c::d', 'a::c']."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)

    def parse(s: str, prefix: str) -> list[str]:
        items, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                items.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        if cur:
            items.append(cur)
        out = []
        for it in items:
            b = it.find("{")
            if b >= 0:
                head = it[:b].rstrip(":")
                inner = it[b + 1 : it.rfind("}")]
                out += parse(inner, f"{prefix}::{head}" if prefix else head)
            elif it == "self":
                out.append(prefix)
            elif it:
                out.append(f"{prefix}::{it}" if prefix else it)
        return out

    return parse(tree, "")


def resolve(path: str, here: tuple[str, ...], modules: set) -> tuple | None:
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    # `super` of a file module is its parent; `self` is the module itself.
    base: list[str]
    if segs[0] == "crate":
        base, segs = [], segs[1:]
    elif segs[0] in ("super", "self"):
        base = list(here)
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                if not base:
                    return None
                base.pop()
            segs = segs[1:]
    elif segs[0] in EXTERN_ROOTS:
        return None
    elif tuple(here) + (segs[0],) in modules:
        base = list(here)
    elif (segs[0],) in modules:
        base = []
    else:
        return None
    full = base + [s for s in segs if s != "*"]
    for n in range(len(full), -1, -1):
        if tuple(full[:n]) in modules:
            return tuple(full[:n])
    return None


def related(a: tuple, b: tuple) -> bool:
    return a[: len(b)] == b or b[: len(a)] == a


def main() -> int:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "src")
    files = sorted(p for p in src.rglob("*.rs") if "golden" not in p.parts)
    modules: dict[tuple, Path] = {}
    for f in files:
        if f.name == "main.rs" and f.parent == src:
            continue
        modules[module_of(f, src)] = f
    skip: set[tuple] = set()
    code: dict[tuple, str] = {}
    for m, f in modules.items():
        text, test_mods = non_test_code(strip_comments(f.read_text()))
        code[m] = text
        for t in test_mods:
            skip.add(m + (t,))
    names = set(modules)
    edges: dict[tuple, dict[tuple, str]] = {m: {} for m in modules if m not in skip}
    path_re = re.compile(r"\b(?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+")
    use_re = re.compile(r"\buse\s+([^;]+);", re.S)
    for m in edges:
        text = code[m]
        refs: list[tuple[str, str]] = []
        for u in use_re.finditer(text):
            for p in expand_use(u.group(1)):
                refs.append((p, "use " + re.sub(r"\s+", " ", u.group(1))[:80]))
        for p in path_re.finditer(text):
            refs.append((p.group(0), p.group(0)))
        for p, why in refs:
            t = resolve(p, m, names)
            if t is None or t in skip or t == m or related(m, t):
                continue
            edges[m].setdefault(t, why)

    # Strongly connected components (Tarjan); a module graph is shallow.
    index: dict[tuple, int] = {}
    low: dict[tuple, int] = {}
    stack: list[tuple] = []
    on: set[tuple] = set()
    sccs: list[list[tuple]] = []
    counter = [0]

    def visit(v: tuple) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)

    def name(m: tuple) -> str:
        return "::".join(m) or "crate"

    if not sccs:
        print(f"no import circles among {len(edges)} modules")
        return 0
    for comp in sorted(sccs):
        print("import circle: " + " <-> ".join(name(m) for m in comp))
        members = set(comp)
        for a in comp:
            for b, why in sorted(edges[a].items()):
                if b in members:
                    print(f"  {name(a)} -> {name(b)}: {why}")
    return 1


if __name__ == "__main__":
    sys.exit(main())

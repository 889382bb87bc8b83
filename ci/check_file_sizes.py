#!/usr/bin/env python3
"""Fail when a source file of the server has more than 1,000 lines before its
unit tests.

Every `*.rs` file under `src/` is measured: its lines before the first line
that reads `#[cfg(test)]` (blank and comment lines count too), or all its
lines when it has none. More than LIMIT is a failure, printed with the count;
exactly LIMIT passes.

A file that holds only tests is not measured: a module its parent declares
test-only (`#[cfg(test)]`, then any other attributes, then `mod NAME;`), and
every file below that module's folder. The declaring file is what counts, not
the name `tests.rs`: a `tests.rs` compiled into the server is measured like
any other file. Module files are found where Rust looks by default
(`NAME.rs` or `NAME/mod.rs` beside `lib.rs`, `main.rs` or a `mod.rs`, or in
the folder named after any other file); a test module placed elsewhere with
`#[path]` is measured as code, so a mistake here can only fail the check,
never hide a file.

Usage: python3 ci/check_file_sizes.py [SRC_DIR]
       python3 ci/check_file_sizes.py --self-test
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

LIMIT = 1000
TEST_ATTR = "#[cfg(test)]"
MOD_DECL = re.compile(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")


def lines_before_tests(text: str) -> int:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == TEST_ATTR:
            return i
    return len(lines)


def test_only_modules(text: str) -> list[str]:
    """Names of child modules the file declares under `#[cfg(test)]`."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.strip() != TEST_ATTR:
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip().startswith("#["):
            j += 1
        if j < len(lines):
            m = MOD_DECL.match(lines[j])
            if m:
                out.append(m.group(1))
    return out


def child_dir(f: Path) -> Path:
    """The folder where the modules `f` declares live."""
    if f.name in ("lib.rs", "main.rs", "mod.rs"):
        return f.parent
    return f.parent / f.stem


def test_only_files(files: list[Path]) -> set[Path]:
    out: set[Path] = set()
    for f in files:
        for name in test_only_modules(f.read_text(encoding="utf-8")):
            folder = child_dir(f) / name
            for candidate in (child_dir(f) / f"{name}.rs", folder / "mod.rs"):
                if candidate.is_file():
                    out.add(candidate)
            if folder.is_dir():
                out.update(folder.rglob("*.rs"))
    return out


def offenders(src: Path) -> list[tuple[Path, int]]:
    files = sorted(src.rglob("*.rs"))
    tests = test_only_files(files)
    out = []
    for f in files:
        if f in tests:
            continue
        n = lines_before_tests(f.read_text(encoding="utf-8"))
        if n > LIMIT:
            out.append((f, n))
    return out


def check(src: Path) -> int:
    found = offenders(src)
    for f, n in found:
        print(f"{f}: {n} lines before its unit tests (limit {LIMIT})")
    if found:
        print(f"{len(found)} file(s) over {LIMIT} lines; split them by job")
        return 1
    print(f"every file under {src} has at most {LIMIT} lines before its unit tests")
    return 0


def self_test() -> int:
    """Pins the boundary and the test-only rule on a made-up tree."""
    code = "fn f() {}\n"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        (src / "a" / "tests").mkdir(parents=True)
        files = {
            "lib.rs": "mod a;\nmod at_limit;\nmod over;\nmod named_tests;\n#[cfg(test)]\nmod tests;\n",
            "at_limit.rs": code * LIMIT,
            "over.rs": code * (LIMIT + 1),
            # Tests after exactly LIMIT lines of code: only the code counts.
            "a.rs": code * (LIMIT - 1) + "mod b;\n#[cfg(test)]\n#[allow(dead_code)]\nmod tests;\n",
            "a/b.rs": code * (LIMIT + 1) + TEST_ATTR + "\nmod tests {}\n",
            # Declared test-only (through another attribute), with a folder.
            "a/tests.rs": code * (LIMIT * 2) + "mod deep;\n",
            "a/tests/deep.rs": code * (LIMIT * 2),
            "tests.rs": code * (LIMIT * 2),
            # Named tests.rs, but compiled into the server: measured.
            "named_tests.rs": "mod tests;\n",
            "named_tests/tests.rs": code * (LIMIT + 1),
        }
        for name, text in files.items():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_text(text, encoding="utf-8")
        got = {str(f.relative_to(src)): n for f, n in offenders(src)}
        want = {"over.rs": LIMIT + 1, "a/b.rs": LIMIT + 1, "named_tests/tests.rs": LIMIT + 1}
        failures = []
        if got != want:
            failures.append(f"offenders {got}, expected {want}")
        if check(src) != 1:
            failures.append("a tree with offenders passed")
        for name in want:
            (src / name).write_text(code * LIMIT, encoding="utf-8")
        if check(src) != 0:
            failures.append("a tree with every file at the limit failed")
    for f in failures:
        print(f"self-test FAILED: {f}")
    if not failures:
        print("self-test passed: 1,001 lines fail, 1,000 pass, test-only modules are skipped")
    return 1 if failures else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    return check(Path(sys.argv[1] if len(sys.argv) > 1 else "src"))


if __name__ == "__main__":
    sys.exit(main())

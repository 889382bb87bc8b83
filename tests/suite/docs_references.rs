//! The repository's own references hold: every Markdown file and every
//! `src/`, `tests/` or `ci/` path that code, tests, scripts or docs name
//! exists, and every wire-rule id a test is
//! named after (`a5_oversize_line`) or a comment cites (`docs/PROTOCOL.md
//! A2`) is defined in docs/PROTOCOL.md. A reader who follows a reference
//! finds what it points at.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use regex::Regex;

use crate::support::repo_root as root;

/// Text files the project writes itself (not build output, corpora or lock files).
fn project_files() -> Vec<PathBuf> {
    const DIRS: &[&str] = &[
        "src",
        "tests",
        "ci",
        "docs",
        "sandbox",
        "reference/src",
        "reference/tests",
        "fuzz/fuzz_targets",
        "benches",
        "packaging",
        "examples",
    ];
    const EXTS: &[&str] = &["rs", "md", "py", "sh", "mjs", "json", "sb", "toml"];
    let mut out: Vec<PathBuf> = ["README.md", "CHANGELOG.md", "BENCHMARKS.md", "Cargo.toml"]
        .iter()
        .map(|f| root().join(f))
        .filter(|p| p.exists())
        .collect();
    let mut stack: Vec<PathBuf> = DIRS.iter().map(|d| root().join(d)).collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTS.contains(&e))
                && !path.ends_with("package-lock.json")
            {
                out.push(path);
            }
        }
    }
    out.sort();
    assert!(
        out.len() > 50,
        "found only {} project files under {}",
        out.len(),
        root().display()
    );
    out
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn every_markdown_file_named_in_the_repository_exists() {
    // `docs/BACKEND.md`, `sandbox/LAYERS.md`, `README.md`, or a bare upper-case
    // name such as `LAYERS.md` (then looked for where the project keeps docs).
    let mention = Regex::new(r"(?:[A-Za-z0-9_.-]+/)*[A-Z][A-Z0-9_-]*\.md\b").unwrap();
    let mut missing = BTreeSet::new();
    let mut seen = 0;
    for file in project_files() {
        let text = read(&file);
        for m in mention.find_iter(&text) {
            seen += 1;
            let name = m.as_str();
            let here = file.parent().unwrap_or(Path::new("/"));
            let found = if name.contains('/') {
                root().join(name).exists() || here.join(name).exists()
            } else {
                ["", "docs", "sandbox"]
                    .iter()
                    .any(|d| root().join(d).join(name).exists())
                    || here.join(name).exists()
            };
            if !found {
                missing.insert(format!("{} names {name}", rel(&file)));
            }
        }
    }
    assert!(
        seen > 20,
        "only {seen} Markdown references found: the scan is broken"
    );
    assert!(
        missing.is_empty(),
        "references to files that are not in the repository:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// The rule ids docs/PROTOCOL.md defines, from its `**A5. Title.**` items.
fn defined_rule_ids() -> BTreeSet<String> {
    let text = read(&root().join("docs/PROTOCOL.md"));
    let def = Regex::new(r"(?m)^- \*\*([A-J][0-9]{1,2})\. ").unwrap();
    let ids: BTreeSet<String> = def.captures_iter(&text).map(|c| c[1].to_string()).collect();
    assert!(
        ids.len() > 80,
        "docs/PROTOCOL.md defines only {} rules",
        ids.len()
    );
    ids
}

#[test]
fn every_rule_id_a_test_or_comment_uses_is_defined_in_docs_protocol() {
    let defined = defined_rule_ids();
    // Test names start with one or more ids: `a5_oversize_line`, `e2_e3_e5_e7_names_...`.
    let test_name = Regex::new(r"\bfn ((?:[a-j][0-9]{1,2}_)+)").unwrap();
    // Citations after a mention of the file: `docs/PROTOCOL.md A3-A9, C1-C3`,
    // `docs/PROTOCOL.md sections D, E and F` (a section counts as its first rule).
    let citation = Regex::new(r"\bdocs/PROTOCOL\.md[^\n]*").unwrap();
    let id = Regex::new(r"\b([A-J][0-9]{1,2})\b").unwrap();
    let section = Regex::new(r"\bsections? ([A-J](?:(?:, | and )[A-J])*)\b").unwrap();
    let mut used: BTreeSet<(String, String)> = BTreeSet::new();
    for file in project_files() {
        if file.starts_with(root().join("docs")) {
            continue;
        }
        let text = read(&file);
        for c in test_name.captures_iter(&text) {
            for part in c[1].split('_').filter(|p| !p.is_empty()) {
                used.insert((part.to_uppercase(), rel(&file)));
            }
        }
        for line in citation.find_iter(&text) {
            for c in id.captures_iter(line.as_str()) {
                used.insert((c[1].to_string(), rel(&file)));
            }
            for c in section.captures_iter(line.as_str()) {
                for letter in c[1].split([',', ' ']).filter(|s| s.len() == 1) {
                    used.insert((format!("{letter}1"), rel(&file)));
                }
            }
        }
    }
    assert!(
        used.len() > 60,
        "only {} rule ids found in test names and citations: the scan is broken",
        used.len()
    );
    let undefined: Vec<String> = used
        .iter()
        .filter(|(id, _)| !defined.contains(id))
        .map(|(id, file)| format!("{id} (used in {file})"))
        .collect();
    assert!(
        undefined.is_empty(),
        "rule ids used but not defined in docs/PROTOCOL.md:\n{}",
        undefined.join("\n")
    );
}

/// Whether `pattern` (a path that may hold `*` in its last part) names at
/// least one file beneath `base`.
fn path_exists(base: &Path, pattern: &str) -> bool {
    let pattern = pattern.trim_end_matches('/');
    let Some((dir, last)) = pattern.rsplit_once('/') else {
        return base.join(pattern).exists();
    };
    if !last.contains('*') {
        return base.join(pattern).exists();
    }
    let (prefix, suffix) = last.split_once('*').unwrap_or((last, ""));
    let Ok(entries) = fs::read_dir(base.join(dir)) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        name.len() >= prefix.len() + suffix.len()
            && name.starts_with(prefix)
            && name.ends_with(suffix.trim_end_matches('*'))
    })
}

#[test]
fn every_source_test_and_ci_path_named_in_the_repository_exists() {
    // `src/redact/mod.rs`, `tests/fixtures/shelfcheck`, `ci/test.sh`,
    // `tests/suite/sandbox_*.rs`; not the tail of a longer path
    // (`reference/src/main.rs` is read from the reference's own root).
    let mention =
        Regex::new(r"(?:^|[^A-Za-z0-9_./{}$-])((?:src|tests|ci)/[A-Za-z0-9_.*/-]*[A-Za-z0-9_*/])")
            .unwrap();
    let mut missing = BTreeSet::new();
    let mut seen = 0;
    for file in project_files() {
        let text = read(&file);
        // A path is read from the root of the package that holds the file
        // (the repository, or `reference/`), or from the file's own folder.
        let here = file.parent().unwrap_or(Path::new("/")).to_path_buf();
        let package = here
            .ancestors()
            .find(|d| d.join("Cargo.toml").exists())
            .unwrap_or(&root())
            .to_path_buf();
        for c in mention.captures_iter(&text) {
            let name = c[1].trim_end_matches('.');
            seen += 1;
            if ![root(), package.clone(), here.clone()]
                .iter()
                .any(|base| path_exists(base, name))
            {
                missing.insert(format!("{} names {name}", rel(&file)));
            }
        }
    }
    assert!(
        seen > 50,
        "only {seen} source, test and ci paths found: the scan is broken"
    );
    assert!(
        missing.is_empty(),
        "paths to files that are not in the repository:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

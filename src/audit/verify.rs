//! `audit verify FILE...`: walk each file's chain, in the order given
//! (a rotated file before the one that follows it), and name the first
//! line that does not hold.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

use super::chain::{hmac_ok, sha256_hex, Key, GENESIS_PREV};

/// What verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every line holds.
    Intact,
    /// A line a writer never finished (a crash mid-write): the last line of
    /// a file, or one that the next line says it follows; every other line holds.
    Torn { file: PathBuf, line: usize },
    /// A line was edited, removed, inserted or reordered (or the key does not match).
    Broken {
        file: PathBuf,
        line: usize,
        why: String,
    },
}

impl Verdict {
    /// `audit verify`'s exit code: 0 intact, 1 broken, 3 torn.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Verdict::Intact => 0,
            Verdict::Broken { .. } => 1,
            Verdict::Torn { .. } => 3,
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Intact => f.write_str("intact"),
            Verdict::Torn { file, line } => write!(
                f,
                "{}: line {line} is torn (its writer stopped mid-line, as in a crash); \
                 every line before it verifies",
                file.display()
            ),
            Verdict::Broken { file, line, why } => {
                write!(f, "{}: line {line} is broken: {why}", file.display())
            }
        }
    }
}

#[derive(Default)]
struct Session {
    started_here: bool,
    stopped: bool,
    lines: u64,
}

/// What verification counted besides its verdict.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Counts {
    pub lines: usize,
    /// Sessions whose start is in the files but not their closing record:
    /// still running, or cut off.
    pub open_sessions: usize,
}

/// Verify `files` in order; `key` checks every line's HMAC too.
pub(crate) fn verify(files: &[(PathBuf, Vec<u8>)], key: Option<&Key>) -> (Verdict, Counts) {
    let (verdict, lines, sessions) = walk(files, key);
    let open_sessions = sessions
        .values()
        .filter(|s| s.started_here && !s.stopped)
        .count();
    (
        verdict,
        Counts {
            lines,
            open_sessions,
        },
    )
}

fn walk(
    files: &[(PathBuf, Vec<u8>)],
    key: Option<&Key>,
) -> (Verdict, usize, HashMap<String, Session>) {
    let mut total = 0;
    let mut last_of_previous: Option<String> = None;
    let mut sessions: HashMap<String, Session> = HashMap::new();
    // A torn line another writer later wrote after: reported, not fatal.
    let mut torn: Option<(PathBuf, usize)> = None;
    for (path, bytes) in files {
        let broken = |line: usize, why: String| Verdict::Broken {
            file: path.clone(),
            line,
            why,
        };
        let ends_lf = bytes.last() == Some(&b'\n');
        let body = if ends_lf {
            &bytes[..bytes.len() - 1]
        } else {
            &bytes[..]
        };
        if body.is_empty() {
            continue;
        }
        let lines: Vec<&[u8]> = body.split(|b| *b == b'\n').collect();
        let mut prev_hash: Option<String> = None;
        let mut prev_torn = false;
        for (i, raw) in lines.iter().enumerate() {
            let n = i + 1;
            let last = i + 1 == lines.len();
            let parsed = std::str::from_utf8(raw)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(t).ok().map(|v| (t, v)))
                .filter(|(_, v)| v.is_object());
            let Some((text, record)) = parsed else {
                if last && !ends_lf {
                    return (
                        Verdict::Torn {
                            file: path.clone(),
                            line: n,
                        },
                        total,
                        sessions,
                    );
                }
                // A torn line later written after: the next line must say so.
                let next_says = lines.get(i + 1).is_some_and(|next| {
                    serde_json::from_slice::<Value>(next).is_ok_and(|v| {
                        v["after_torn"] == true && v["prev"] == sha256_hex(raw).as_str()
                    })
                });
                if !next_says {
                    return (broken(n, "not a record".into()), total, sessions);
                }
                prev_hash = Some(sha256_hex(raw));
                prev_torn = true;
                torn.get_or_insert((path.clone(), n));
                continue;
            };
            let prev = record["prev"].as_str().unwrap_or_default();
            let kind = record["type"].as_str().unwrap_or_default();
            match &prev_hash {
                None => {
                    if kind != "genesis" {
                        return (
                            broken(n, "the first line of a file is not a genesis record".into()),
                            total,
                            sessions,
                        );
                    }
                    if let Some(before) = &last_of_previous {
                        if prev != before && prev != GENESIS_PREV {
                            return (
                                broken(n, "the genesis record does not follow the last line of the file given before".into()),
                                total,
                                sessions,
                            );
                        }
                    }
                }
                Some(h) => {
                    if kind == "genesis" {
                        return (
                            broken(n, "a genesis record inside a file".into()),
                            total,
                            sessions,
                        );
                    }
                    if prev != h {
                        return (
                            broken(
                                n,
                                format!(
                                    "it does not chain to line {} (a line at or before it was \
                                     edited, removed, inserted or reordered)",
                                    n - 1
                                ),
                            ),
                            total,
                            sessions,
                        );
                    }
                    if prev_torn && record["after_torn"] != true {
                        return (
                            broken(n, "it follows a torn line without saying so".into()),
                            total,
                            sessions,
                        );
                    }
                }
            }
            if let Some(key) = key {
                if !hmac_ok(text, key) {
                    return (
                        broken(
                            n,
                            "its HMAC does not verify under this key (edited, or another key)"
                                .into(),
                        ),
                        total,
                        sessions,
                    );
                }
            }
            if let Some(id) = record.pointer("/session/id").and_then(Value::as_str) {
                let s = sessions.entry(id.to_string()).or_default();
                match kind {
                    "start" => s.started_here = true,
                    "stop" => {
                        s.stopped = true;
                        let counted = record["session_lines"].as_u64().unwrap_or(u64::MAX);
                        if s.started_here && counted != s.lines {
                            return (
                                broken(
                                    n,
                                    format!(
                                        "the session's closing record counts {counted} lines, \
                                         {} are in the files given",
                                        s.lines
                                    ),
                                ),
                                total,
                                sessions,
                            );
                        }
                    }
                    _ => {}
                }
                s.lines += 1;
            }
            prev_hash = Some(sha256_hex(raw));
            prev_torn = false;
            total += 1;
        }
        if !ends_lf {
            // A whole record without its line feed: written, but torn at its end.
            return (
                Verdict::Torn {
                    file: path.clone(),
                    line: lines.len(),
                },
                total,
                sessions,
            );
        }
        last_of_previous = prev_hash;
    }
    match torn {
        Some((file, line)) => (Verdict::Torn { file, line }, total, sessions),
        None => (Verdict::Intact, total, sessions),
    }
}

/// `reachweaver-mcp audit verify FILE... [--audit-key FILE]`.
pub(crate) fn cli(files: Vec<PathBuf>, audit_key: Option<PathBuf>) -> anyhow::Result<u8> {
    use anyhow::Context;
    let key = match &audit_key {
        Some(p) => {
            Some(Key::load(p, None).with_context(|| format!("--audit-key {}", p.display()))?)
        }
        None => None,
    };
    let mut read = Vec::new();
    for f in files {
        let bytes = std::fs::read(&f).with_context(|| format!("cannot read {}", f.display()))?;
        read.push((f, bytes));
    }
    let (verdict, counts) = verify(&read, key.as_ref());
    let lines = counts.lines;
    match &verdict {
        Verdict::Intact => println!(
            "intact: {lines} lines in {} file(s){}",
            read.len(),
            if key.is_some() {
                ", every HMAC verified"
            } else {
                " (chain only: no --audit-key)"
            }
        ),
        other => println!("{other}"),
    }
    match counts.open_sessions {
        0 => {}
        1 => println!("note: 1 session without a closing record (still running, or cut off)"),
        n => println!("note: {n} sessions without a closing record (still running, or cut off)"),
    }
    Ok(verdict.exit_code())
}

#[cfg(test)]
mod tests {
    use super::super::chain::seal;
    use super::*;
    use serde_json::json;

    fn rec(kind: &str, seq: u64) -> serde_json::Map<String, Value> {
        json!({"type": kind, "seq": seq, "session": {"id": "s"}})
            .as_object()
            .unwrap()
            .clone()
    }

    /// A session of `n` lines (genesis, start, calls, stop).
    fn session(key: Option<&Key>) -> Vec<String> {
        let kinds = ["genesis", "start", "call", "call", "stop"];
        let mut out: Vec<String> = Vec::new();
        for (i, k) in kinds.iter().enumerate() {
            let prev = out
                .last()
                .map(|l| sha256_hex(l.as_bytes()))
                .unwrap_or(GENESIS_PREV.into());
            let mut body = rec(k, i as u64 + 1);
            if *k == "stop" {
                body.insert("session_lines".into(), json!(4));
            }
            out.push(seal(body, &prev, key));
        }
        out
    }

    fn check(lines: &[String], tail: &str, key: Option<&Key>) -> Verdict {
        let text = lines.join("\n") + tail;
        verify(&[(PathBuf::from("f"), text.into_bytes())], key).0
    }

    fn line_of(v: &Verdict) -> usize {
        match v {
            Verdict::Broken { line, .. } | Verdict::Torn { line, .. } => *line,
            Verdict::Intact => 0,
        }
    }

    #[test]
    fn an_intact_chain_verifies() {
        assert_eq!(check(&session(None), "\n", None), Verdict::Intact);
    }

    #[test]
    fn an_edit_breaks_the_next_line_and_under_a_key_the_line_itself() {
        let mut lines = session(None);
        lines[2] = lines[2].replace("\"call\"", "\"calm\"");
        let v = check(&lines, "\n", None);
        assert_eq!((v.exit_code(), line_of(&v)), (1, 4));
        let k = Key::from_bytes(vec![5; 32]).unwrap();
        let mut lines = session(Some(&k));
        lines[2] = lines[2].replace("\"call\"", "\"calm\"");
        let v = check(&lines, "\n", Some(&k));
        assert_eq!((v.exit_code(), line_of(&v)), (1, 3));
    }

    #[test]
    fn removal_and_reordering_name_the_line() {
        let mut lines = session(None);
        lines.remove(2);
        assert_eq!(line_of(&check(&lines, "\n", None)), 3);
        let mut lines = session(None);
        lines.swap(2, 3);
        assert_eq!(line_of(&check(&lines, "\n", None)), 3);
        // The last line removed: the chain holds, the count does not.
        let mut lines = session(None);
        lines.remove(3);
        let v = check(&lines, "\n", None);
        assert_eq!((v.exit_code(), line_of(&v)), (1, 4));
    }

    #[test]
    fn a_torn_last_line_is_torn_not_broken() {
        let mut lines = session(None);
        let cut = lines[4].len() / 2;
        lines[4].truncate(cut);
        let v = check(&lines, "", None);
        assert_eq!((v.exit_code(), line_of(&v)), (3, 5));
        // A whole line without its line feed is torn too.
        let v = check(&session(None), "", None);
        assert_eq!((v.exit_code(), line_of(&v)), (3, 5));
    }

    #[test]
    fn a_torn_line_a_later_writer_chained_past_is_torn_and_the_rest_is_checked() {
        let torn = "{\"type\":\"gen".to_string();
        let mut next = rec("start", 1);
        next.insert("after_torn".into(), json!(true));
        let next = seal(next, &sha256_hex(torn.as_bytes()), None);
        let v = check(&[torn.clone(), next.clone()], "\n", None);
        assert_eq!((v.exit_code(), line_of(&v)), (3, 1));
        // Without the mark, the torn line is just a line that is not a record.
        let unmarked = seal(rec("start", 1), &sha256_hex(torn.as_bytes()), None);
        let v = check(&[torn, unmarked], "\n", None);
        assert_eq!((v.exit_code(), line_of(&v)), (1, 1));
    }

    #[test]
    fn a_wrong_key_fails_at_the_first_line() {
        let k = Key::from_bytes(vec![5; 32]).unwrap();
        let other = Key::from_bytes(vec![6; 32]).unwrap();
        let lines = session(Some(&k));
        assert_eq!(check(&lines, "\n", Some(&k)), Verdict::Intact);
        assert_eq!(line_of(&check(&lines, "\n", Some(&other))), 1);
        // Unsigned lines fail under a key.
        assert_eq!(line_of(&check(&session(None), "\n", Some(&k))), 1);
    }
}

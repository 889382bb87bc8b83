//! Redaction on its own: `Redactor::redact` on log summaries from 64 KiB to
//! 16 MiB (is the cost linear in the size?) and on hostile text (one long
//! line of separators, key words or hint prefixes with no newline: is
//! there a quadratic path?). Needs no backend and no sandbox.
//!
//! ```text
//! cargo bench --bench redact_bench -- [--rounds N] [--only "CASE LABEL"]
//! ```
//!
//! Prints one table row per case: median and p90 of `rounds` timings (the
//! copy of the document handed over is made outside the timing) and the
//! median per MiB. Two builds compare best when their binaries run in
//! turns on the same machine (see BENCHMARKS.md, "Redaction").

use std::time::{Duration, Instant};

use reachweaver_mcp::redact::Redactor;
use serde_json::{json, Value};

const MIB: usize = 1 << 20;

/// A check's findings, about 1.8 KB, nothing secret in it.
fn typical_result() -> Value {
    let findings: Vec<Value> = (0..8)
        .map(|i| {
            json!({
                "code": format!("missing_field_{i}"),
                "message": format!("Post {i} of the spring launch has no link; add one (https://example.com/spring?utm_source=linkedin&utm_campaign=launch-{i})."),
                "line": 10 + i,
                "severity": if i % 3 == 0 { "error" } else { "warning" },
            })
        })
        .collect();
    json!({
        "campaign": "campaigns/spring-launch.yaml",
        "id": "cmp_2026_0001",
        "checked_at": "2026-03-04T07:31:12Z",
        "channels": ["linkedin", "x", "mastodon"],
        "token_count": 1834,
        "findings": findings,
        "summary": {"errors": 3, "warnings": 5, "posts": 12, "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    })
}

/// The same log summary as `mcp_bench`: one string per line (about 130
/// bytes), a token and a `password=` pair in one line of every thousand.
fn log_result(bytes: usize) -> Value {
    let mut lines = Vec::new();
    let mut size = 0;
    let mut i = 0usize;
    while size < bytes {
        let line = if i % 1000 == 999 {
            format!("2026-03-04T07:31:{:02}Z ERROR auth: retry with password=hunter2-{i} and ghp_a1B2c3D4e5F6g7H8i9J0a1B2c3D4e5F6g7H8", i % 60)
        } else {
            format!(
                "2026-03-04T07:31:{:02}Z INFO scheduler: posted draft d_{i} to linkedin (https://www.linkedin.com/feed/update/urn:li:activity:{}) in {} ms",
                i % 60,
                7_100_000 + i,
                200 + i % 300
            )
        };
        size += line.len() + 3;
        lines.push(Value::String(line));
        i += 1;
    }
    json!({"log": "logs/reachweaver.log", "lines": lines, "count": i})
}

/// The log summary as one string (a command that prints its log as text).
fn log_text(bytes: usize) -> Value {
    let Value::Object(mut m) = log_result(bytes) else {
        unreachable!("log_result builds an object")
    };
    let lines = m.remove("lines").unwrap_or_default();
    let text: Vec<&str> = lines
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    json!({"stdout": text.join("\n")})
}

/// One string of `bytes` bytes repeating `unit`, with no newline.
fn one_line(unit: &str, bytes: usize) -> Value {
    json!({"stdout": unit.repeat(bytes / unit.len())})
}

struct Case {
    label: String,
    doc: Value,
    rounds: usize,
}

fn cases(rounds: Option<usize>) -> Vec<Case> {
    let n = |default: usize| rounds.unwrap_or(default);
    let mut out = vec![Case {
        label: "typical result".into(),
        doc: typical_result(),
        rounds: n(20_000),
    }];
    for (label, bytes, r) in [
        ("log lines, 64 KiB", 64 << 10, 400),
        ("log lines, 1 MiB", MIB, 30),
        ("log lines, 4 MiB", 4 * MIB, 10),
        ("log lines, 16 MiB", 16 * MIB, 5),
    ] {
        out.push(Case {
            label: label.into(),
            doc: log_result(bytes),
            rounds: n(r),
        });
    }
    for (label, bytes, r) in [
        ("log text, 1 MiB", MIB, 30),
        ("log text, 4 MiB", 4 * MIB, 10),
        ("log text, 16 MiB", 16 * MIB, 5),
    ] {
        out.push(Case {
            label: label.into(),
            doc: log_text(bytes),
            rounds: n(r),
        });
    }
    // Hostile single lines: each repeats what makes some rule start a match
    // (a separator, a key word, a hint prefix) with no newline to end it.
    for (label, unit) in [
        ("one line of `=`", "="),
        ("one line of `:`", ":"),
        ("one line of `a=`", "a="),
        ("one line of `password=`", "password="),
        ("one line of `key: `", "key: "),
        ("one line of `--token `", "--token "),
        ("one line of `<password>`", "<password>"),
        ("one line of `://a:b`", "://a:b"),
        ("one line of `Bearer `", "Bearer "),
        ("one line of `-----BEGIN `", "-----BEGIN "),
        ("one line of `ghp_`", "ghp_"),
        ("one line of `eyJa.`", "eyJa."),
        ("one line of `\"name\": \"x\", `", "\"name\": \"x\", "),
        ("one line of `value=`", "value="),
    ] {
        for (size, bytes, r) in [("1 MiB", MIB, 10), ("4 MiB", 4 * MIB, 4)] {
            out.push(Case {
                label: format!("{label}, {size}"),
                doc: one_line(unit, bytes),
                rounds: n(r),
            });
        }
    }
    out
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let mut rounds = None;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => rounds = args.next().and_then(|v| v.parse().ok()),
            "--only" => only = args.next(),
            // `cargo bench` passes `--bench`.
            _ => {}
        }
    }
    let started = Instant::now();
    let redactor = Redactor::new(vec![(
        "REACHWEAVER_SMTP_PASS".to_string(),
        "a-secret-from-the-environment".to_string(),
    )]);
    println!(
        "building the redactor: {:.2} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    println!("| case | bytes | rounds | replaced | median ms | p90 ms | ms per MiB |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for case in cases(rounds) {
        if only.as_deref().is_some_and(|o| case.label != o) {
            continue;
        }
        let bytes = case.doc.to_string().len();
        let mut samples = Vec::with_capacity(case.rounds);
        let mut replaced = 0;
        for _ in 0..case.rounds.max(1) {
            let copy = case.doc.clone();
            let t = Instant::now();
            let (out, count) = redactor.redact(copy);
            samples.push(t.elapsed());
            replaced = count;
            drop(out);
        }
        samples.sort();
        let median = percentile(&samples, 0.5).as_secs_f64() * 1e3;
        println!(
            "| {} | {bytes} | {} | {replaced} | {median:.3} | {:.3} | {:.3} |",
            case.label,
            samples.len(),
            percentile(&samples, 0.9).as_secs_f64() * 1e3,
            median / (bytes as f64 / MIB as f64)
        );
    }
}

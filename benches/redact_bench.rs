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

mod common;

use common::{log_result, typical_result};
use reachweaver_mcp::redact::Redactor;
use serde_json::{json, Value};

const MIB: usize = 1 << 20;

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

//! Results both benchmarks redact, so their numbers describe the same
//! input.

use serde_json::{json, Value};

/// A check's findings, about 1.8 KB, nothing secret in it.
pub fn typical_result() -> Value {
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

/// A log summary of about `bytes` bytes: one string per line (about 130
/// bytes), a token shape and a `password=` pair in one line of every
/// thousand.
pub fn log_result(bytes: usize) -> Value {
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

//! The fields of a record: the time, the outcome of a call read off its
//! envelope. Every value that came from a client or a run passes through
//! the redactor before it gets here (see `mod.rs`).

use serde_json::{json, Map, Value};

use super::Ended;
use crate::envelope::{Envelope, META_DENIED, META_REDACTED, META_SANDBOX};

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for milliseconds since the Unix epoch.
pub(crate) fn utc_ms(ms: u128) -> String {
    let secs = (ms / 1000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days to a civil date (proleptic Gregorian), era by era of 400 years.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

pub(crate) fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// Error codes for which the server refused the call before anything ran
/// because of what was asked (`refused`); the others are `tool_error`.
const REFUSALS: [&str; 8] = [
    "invalid_argument",
    "unknown_argument",
    "missing_argument",
    "path_outside_root",
    "path_not_found",
    "path_protected",
    "audit_failed",
    "backend_changed",
];

/// The outcome members of a call record: `outcome`, with `error_code` or
/// `reason`, `exit_code`, `output_bytes`, `redacted`, `sandbox` and `denied`.
pub(crate) fn outcome(outcome: Ended<'_>) -> Map<String, Value> {
    let mut m = Map::new();
    match outcome {
        Ended::Fault => {
            m.insert("outcome".into(), json!("tool_error"));
            m.insert("error_code".into(), json!("internal_error"));
        }
        Ended::Cancelled => {
            m.insert("outcome".into(), json!("cancelled"));
        }
        Ended::UnknownTool => {
            m.insert("outcome".into(), json!("refused"));
            m.insert("reason".into(), json!("unknown_tool"));
        }
        Ended::Done(envelope) => envelope_outcome(envelope, &mut m),
    }
    m
}

fn envelope_outcome(envelope: &Envelope, m: &mut Map<String, Value>) {
    let code = envelope
        .output
        .pointer("/error/code")
        .and_then(Value::as_str)
        .map(|c| {
            crate::catalog::one_line(c)
                .chars()
                .take(64)
                .collect::<String>()
        });
    match (envelope.is_error(), code) {
        (false, _) => {
            m.insert("outcome".into(), json!("ok"));
        }
        (true, Some(c)) if c == "rate_limited" => {
            m.insert("outcome".into(), json!("rate_limited"));
        }
        (true, Some(c)) if REFUSALS.contains(&c.as_str()) => {
            m.insert("outcome".into(), json!("refused"));
            m.insert("reason".into(), json!(c));
        }
        (true, c) => {
            m.insert("outcome".into(), json!("tool_error"));
            m.insert("error_code".into(), json!(c));
        }
    }
    m.insert("exit_code".into(), json!(envelope.exit_code));
    m.insert("output_bytes".into(), json!(envelope.to_text().len()));
    m.insert(
        "redacted".into(),
        json!(envelope
            .meta
            .get(META_REDACTED)
            .and_then(Value::as_u64)
            .unwrap_or(0)),
    );
    if let Some(a) = envelope.meta.get(META_SANDBOX) {
        m.insert("sandbox".into(), a.clone());
    }
    if let Some(d) = envelope.meta.get(META_DENIED) {
        m.insert("denied".into(), d.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ErrorCode, ToolError};

    #[test]
    fn utc_times_at_known_instants() {
        assert_eq!(utc_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(utc_ms(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
        assert_eq!(utc_ms(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
    }

    #[test]
    fn outcomes_by_code() {
        let of = |code: ErrorCode| {
            let e = Envelope::from_error(&ToolError::new(code, "x"));
            Value::Object(outcome(Ended::Done(&e)))
        };
        assert_eq!(of(ErrorCode::RateLimited)["outcome"], "rate_limited");
        assert_eq!(of(ErrorCode::PathProtected)["outcome"], "refused");
        assert_eq!(of(ErrorCode::PathProtected)["reason"], "path_protected");
        assert_eq!(of(ErrorCode::AuditFailed)["reason"], "audit_failed");
        assert_eq!(of(ErrorCode::BackendChanged)["outcome"], "refused");
        assert_eq!(of(ErrorCode::BackendChanged)["reason"], "backend_changed");
        assert_eq!(of(ErrorCode::Timeout)["outcome"], "tool_error");
        assert_eq!(of(ErrorCode::Timeout)["error_code"], "timeout");
        let ok = Envelope::from_run(1, json!({"findings": []}));
        let ok = Value::Object(outcome(Ended::Done(&ok)));
        assert_eq!(ok["outcome"], "ok");
        assert_eq!(ok["exit_code"], 1);
        assert_eq!(ok["output_bytes"], 40);
        assert_eq!(
            Value::Object(outcome(Ended::Cancelled))["outcome"],
            "cancelled"
        );
        assert_eq!(
            Value::Object(outcome(Ended::Fault))["error_code"],
            "internal_error"
        );
    }
}

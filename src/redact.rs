//! Secret scrubbing for everything a tool result carries (DESIGN.md §5).
//!
//! This is a safety net, not the guarantee (the sandbox and the withheld
//! commands are): a backend that prints a credential by mistake should not
//! hand it to a model. Two sources: well-known token shapes, and the values
//! of the server's own secret-named environment variables.

use std::borrow::Cow;

use regex::Regex;
use serde_json::{Map, Value};

pub const REDACTED: &str = "[REDACTED]";

/// Shorter values are too likely to occur by chance to be replaced.
const MIN_SECRET_LEN: usize = 8;

/// A `_`-separated word of a variable name that marks it as secret.
const SECRET_WORDS: [&str; 8] = [
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "APIKEY",
    "CREDENTIAL",
    "CREDENTIALS",
    "COOKIE",
];

/// Substrings of a variable name that mark it as secret.
const SECRET_PARTS: [&str; 4] = ["API_KEY", "PRIVATE_KEY", "ACCESS_KEY", "AUTH_TOKEN"];

/// Token shapes. Each pattern's `secret` group (or the whole match) is
/// replaced; text around it, such as `Bearer `, stays readable.
const PATTERNS: [&str; 12] = [
    // PEM private-key blocks, also when cut off before the END line.
    r"(?s)(?P<secret>-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z))",
    // AWS access key ids.
    r"\b(?P<secret>(?:AKIA|ASIA)[0-9A-Z]{16})\b",
    // GitHub tokens.
    r"\b(?P<secret>(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,})",
    r"\b(?P<secret>github_pat_[A-Za-z0-9_]{20,})",
    // GitLab personal access tokens.
    r"\b(?P<secret>glpat-[A-Za-z0-9_\-]{20,})",
    // Slack tokens.
    r"\b(?P<secret>xox[abprs]-[A-Za-z0-9\-]{10,})",
    // Stripe keys.
    r"\b(?P<secret>(?:sk_live|rk_live|sk_test)_[A-Za-z0-9]{16,})",
    // Anthropic, then OpenAI (`sk-proj-...`, `sk-...`) keys.
    r"\b(?P<secret>sk-ant-[A-Za-z0-9_\-]{20,})",
    r"\b(?P<secret>sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,})",
    // JWTs: header and payload are base64url JSON objects.
    r"\b(?P<secret>eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*)",
    // Bearer tokens in headers and logs.
    r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=\-]{8,})",
    // Passwords in URLs: scheme://user:password@host.
    r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:(?P<secret>[^/\s@]+)@",
];

/// Built once at start from the server's environment; shared by all calls.
#[derive(Debug, Clone)]
pub struct Redactor {
    patterns: Vec<Regex>,
    /// Longest first, so a value containing another is replaced whole.
    values: Vec<String>,
}

impl Redactor {
    pub fn from_env() -> Self {
        Self::new(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        )
    }

    pub fn new(vars: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut values: Vec<String> = vars
            .into_iter()
            .filter(|(name, value)| is_secret_name(name) && value.len() >= MIN_SECRET_LEN)
            .map(|(_, value)| value)
            .collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        // The patterns are fixed text; a unit test checks that each compiles.
        let patterns = PATTERNS.iter().filter_map(|p| Regex::new(p).ok()).collect();
        Self { patterns, values }
    }

    pub fn redact_str<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = Cow::Owned(out.replace(v.as_str(), REDACTED));
            }
        }
        for re in &self.patterns {
            if re.is_match(&out) {
                let replaced = re
                    .replace_all(&out, |caps: &regex::Captures<'_>| {
                        let whole = caps.get(0).map_or("", |m| m.as_str());
                        match (caps.get(0), caps.name("secret")) {
                            (Some(m), Some(s)) => {
                                let (a, b) = (s.start() - m.start(), s.end() - m.start());
                                format!("{}{REDACTED}{}", &whole[..a], &whole[b..])
                            }
                            _ => REDACTED.to_string(),
                        }
                    })
                    .into_owned();
                out = Cow::Owned(replaced);
            }
        }
        out
    }

    /// Every string and every object key, at any depth.
    pub fn redact_value(&self, value: Value) -> Value {
        match value {
            Value::String(s) => match self.redact_str(&s) {
                Cow::Borrowed(_) => Value::String(s),
                Cow::Owned(o) => Value::String(o),
            },
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|v| self.redact_value(v)).collect())
            }
            Value::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (k, v) in map {
                    out.insert(self.redact_str(&k).into_owned(), self.redact_value(v));
                }
                Value::Object(out)
            }
            other => other,
        }
    }
}

/// DESIGN.md §5: a secret word as a whole `_`-separated word, or a secret part anywhere.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.split('_').any(|w| SECRET_WORDS.contains(&w))
        || SECRET_PARTS.iter().any(|p| upper.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plain() -> Redactor {
        Redactor::new(Vec::new())
    }

    fn scrub(text: &str) -> String {
        plain().redact_str(text).into_owned()
    }

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(plain().patterns.len(), PATTERNS.len());
    }

    #[test]
    fn aws_access_keys() {
        assert_eq!(
            scrub("key AKIAIOSFODNN7EXAMPLE here"),
            "key [REDACTED] here"
        );
        assert_eq!(scrub("ASIAY34FZKBOKMUTVV7A"), "[REDACTED]");
    }

    #[test]
    fn github_tokens() {
        for prefix in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"] {
            let t = format!("{prefix}{}", "a1B2c3D4e5".repeat(4));
            assert_eq!(scrub(&format!("token={t}.")), "token=[REDACTED].", "{t}");
        }
        assert_eq!(
            scrub("github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
            "[REDACTED]"
        );
    }

    #[test]
    fn gitlab_slack_stripe() {
        assert_eq!(scrub("glpat-abcdefghij0123456789"), "[REDACTED]");
        assert_eq!(scrub("xoxb-123456789012-abcdefABCDEF"), "[REDACTED]");
        assert_eq!(scrub("xoxp-1234567890-x"), "[REDACTED]");
        assert_eq!(scrub("sk_live_4eC39HqLyjWDarjtT1zdp7dc"), "[REDACTED]");
        assert_eq!(scrub("rk_live_4eC39HqLyjWDarjtT1zdp7dc"), "[REDACTED]");
        assert_eq!(scrub("sk_test_4eC39HqLyjWDarjtT1zdp7dc"), "[REDACTED]");
    }

    #[test]
    fn openai_and_anthropic_keys() {
        assert_eq!(scrub("sk-abcdefghijklmnopqrstuvwxyz012345"), "[REDACTED]");
        assert_eq!(scrub("sk-proj-abc_DEF-ghi0123456789xyzXYZ"), "[REDACTED]");
        assert_eq!(
            scrub("use sk-ant-api03-abcdefghijklmnopqrstuv now"),
            "use [REDACTED] now"
        );
    }

    #[test]
    fn jwts() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(scrub(&format!("jwt: {jwt}")), "jwt: [REDACTED]");
    }

    #[test]
    fn pem_private_keys_whole_and_cut_off() {
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----";
        assert_eq!(scrub(&format!("a\n{pem}\nb")), "a\n[REDACTED]\nb");
        assert_eq!(scrub("x -----BEGIN PRIVATE KEY-----\nMIIE"), "x [REDACTED]");
        assert_eq!(
            scrub("-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----"),
            "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----"
        );
    }

    #[test]
    fn bearer_tokens_keep_the_word() {
        assert_eq!(
            scrub("Authorization: Bearer abc.def-123_456"),
            "Authorization: Bearer [REDACTED]"
        );
        assert_eq!(scrub("bearer   0123456789"), "bearer   [REDACTED]");
    }

    #[test]
    fn url_passwords_keep_user_and_host() {
        assert_eq!(
            scrub("postgres://admin:hunter2@db.local/app"),
            "postgres://admin:[REDACTED]@db.local/app"
        );
        assert_eq!(scrub("https://:pw@x.y"), "https://:[REDACTED]@x.y");
    }

    #[test]
    fn ordinary_text_is_untouched() {
        for text in [
            "Check a campaign file for missing fields.",
            "https://example.com/path?q=1",
            "mailto:someone@example.com",
            "https://user@example.com",
            "the task-list has 3 items",
            "AKIA is a prefix",
            "bearer of bad news",
            "ghp_short",
            "desk-0123456789012345678901234",
            "eyJhbGciOiJIUzI1NiJ9 alone",
        ] {
            assert_eq!(scrub(text), text);
        }
    }

    #[test]
    fn secret_names() {
        for name in [
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "MY_SECRET",
            "SMTP_PASSWD",
            "SERVICE_APIKEY",
            "AWS_CREDENTIALS",
            "SESSION_COOKIE",
            "OPENAI_API_KEY",
            "SSH_PRIVATE_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "X_AUTH_TOKEN",
            "token",
            "GOOGLE_CREDENTIAL",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "GIT_AUTHOR_NAME",
            "DESKTOP_SESSION",
            "PATH",
            "HOME",
            "TOKENIZER",
            "SECRETS_DIR",
            "PASSWORDLESS",
            "LC_ALL",
            "KEYBOARD",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn env_values_are_redacted_longest_first() {
        let r = Redactor::new(vec![
            ("API_TOKEN".to_string(), "abcdefgh".to_string()),
            ("DB_PASSWORD".to_string(), "abcdefgh-and-more".to_string()),
            ("SHORT_TOKEN".to_string(), "1234567".to_string()),
            (
                "GIT_AUTHOR_NAME".to_string(),
                "Alexandra Example".to_string(),
            ),
        ]);
        assert_eq!(
            r.redact_str("pw abcdefgh-and-more / abcdefgh"),
            "pw [REDACTED] / [REDACTED]"
        );
        assert_eq!(r.redact_str("short 1234567"), "short 1234567");
        assert_eq!(r.redact_str("by Alexandra Example"), "by Alexandra Example");
    }

    #[test]
    fn values_and_keys_at_any_depth() {
        let r = Redactor::new(vec![("MY_SECRET".to_string(), "s3cr3t-value".to_string())]);
        let v = json!({
            "a": ["x s3cr3t-value", {"s3cr3t-value": 1, "n": 5, "b": true, "z": null}],
            "AKIAIOSFODNN7EXAMPLE": "ok"
        });
        assert_eq!(
            r.redact_value(v),
            json!({"a": ["x [REDACTED]", {"[REDACTED]": 1, "n": 5, "b": true, "z": null}], "[REDACTED]": "ok"})
        );
    }
}

//! Secret scrubbing for everything a tool result carries.
//!
//! This is a safety net, not the guarantee (the sandbox, the protected
//! files and the withheld commands are): a backend that prints a credential
//! by mistake should not hand it to a model. Four sources, applied to every
//! document at any depth:
//!
//! - keys: the value under a secret-looking key (`password`, `api_key`,
//!   `client_secret`, ...; see [`names`]) is replaced whole, in arrays and
//!   nested objects too;
//! - `key: value`, `key = value`, `KEY=value` and `"key": "value"` inside
//!   text lose their value when the key looks secret;
//! - token shapes ([`shapes`]): PEM private keys, JWTs, URL passwords and
//!   the credentials of well-known services;
//! - the values of the server's own secret-named environment variables,
//!   also where a number's or a boolean's text holds one (see
//!   [`MIN_SERVER_SECRET_LEN`] and [`MIN_PASSED_SECRET_LEN`] for which).
//!
//! Every replacement is counted, so a result can say that something was
//! hidden, never what.

mod names;
mod shapes;

use std::borrow::Cow;

use regex::{Regex, RegexSet};
use serde_json::{Map, Value};

pub use names::{is_secret_key, is_secret_name};

pub const REDACTED: &str = "[REDACTED]";

/// A secret-named variable of the server's own environment is looked for
/// only from this length on: such a variable never reaches a run unless the
/// owner passes it, and shorter values (`on`, `main`, `default`) are too
/// likely to be ordinary words of a result to be replaced everywhere.
pub const MIN_SERVER_SECRET_LEN: usize = 8;

/// A secret-named variable the owner passes to runs with `--pass-env` is
/// looked for from this length on: the backend holds it, so it is the one
/// most likely to come back. Below this, a value (`1`, `on`, `yes`) would
/// replace the same characters all over every result and hide nothing, so
/// start-up names such variables instead ([`Redactor::too_short`]).
pub const MIN_PASSED_SECRET_LEN: usize = 4;

/// Nothing a shape or a `key: value` rule finds fits in fewer bytes (most
/// object keys are shorter, so they skip all the work).
const MIN_SHAPE_LEN: usize = 8;

/// Built once at start from the server's environment; shared by all calls.
#[derive(Debug, Clone)]
pub struct Redactor {
    /// Every shape's hint, then the `key: value` hint: one pass says which to apply.
    prefilter: RegexSet,
    /// The same hints as one regex: most text matches none, and one
    /// `is_match` (with its literal prefilter) says so faster than the set.
    any_hint: Regex,
    shapes: Vec<(Regex, bool)>,
    key_value: Regex,
    aws_secret: Regex,
    /// Longest first, so a value containing another is replaced whole.
    values: Vec<String>,
    /// Text shorter than this can hold nothing looked for.
    min_len: usize,
    /// Passed secret-named variables whose value is too short to look for.
    too_short: Vec<String>,
}

impl Redactor {
    /// From the server's environment; `passed` are the `--pass-env` names.
    pub fn from_env(passed: &[String]) -> Self {
        Self::with_passed(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
            passed,
        )
    }

    /// From `vars` as the server's environment, nothing passed to runs.
    pub fn new(vars: impl IntoIterator<Item = (String, String)>) -> Self {
        Self::with_passed(vars, &[])
    }

    /// The values of the secret-named variables among `vars`: from
    /// [`MIN_PASSED_SECRET_LEN`] characters on when the name is in `passed`
    /// (the run gets it), else from [`MIN_SERVER_SECRET_LEN`] on.
    pub fn with_passed(
        vars: impl IntoIterator<Item = (String, String)>,
        passed: &[String],
    ) -> Self {
        let mut values: Vec<String> = Vec::new();
        let mut too_short: Vec<String> = Vec::new();
        for (name, value) in vars {
            if !is_secret_name(&name) {
                continue;
            }
            let is_passed = passed.contains(&name);
            let floor = if is_passed {
                MIN_PASSED_SECRET_LEN
            } else {
                MIN_SERVER_SECRET_LEN
            };
            // Counted in characters, as an owner counts them.
            if value.chars().count() >= floor {
                values.push(value);
            } else if is_passed && !value.is_empty() && !too_short.contains(&name) {
                too_short.push(name);
            }
        }
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        too_short.sort();
        let min_len = values
            .iter()
            .map(String::len)
            .min()
            .map_or(MIN_SHAPE_LEN, |v| v.min(MIN_SHAPE_LEN));
        // The patterns are fixed text; unit tests check that each compiles,
        // so `expect` here can only fire on a change that never passed them.
        let compile = |p: &str| Regex::new(p).expect("a fixed pattern compiles");
        let prefilter = RegexSet::new(
            shapes::SHAPES
                .iter()
                .map(|s| s.hint)
                .chain([shapes::KEY_VALUE_HINT]),
        )
        .expect("the fixed patterns compile");
        let any_hint = compile(&prefilter.patterns().join("|"));
        Self {
            prefilter,
            any_hint,
            shapes: shapes::SHAPES
                .iter()
                .map(|s| (compile(s.pattern), s.random))
                .collect(),
            key_value: compile(shapes::KEY_VALUE),
            aws_secret: compile(shapes::AWS_SECRET),
            values,
            min_len,
            too_short,
        }
    }

    /// `--pass-env` names that are secret-named and reach runs, but whose
    /// values are shorter than [`MIN_PASSED_SECRET_LEN`] characters and so
    /// are not looked for in results (start-up warns about each).
    pub fn too_short(&self) -> &[String] {
        &self.too_short
    }

    /// `text` with every secret replaced.
    pub fn redact_str<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.redact_text(text, &mut 0)
    }

    /// `text` with every secret replaced; `count` grows by the replacements made.
    pub fn redact_text<'a>(&self, text: &'a str, count: &mut usize) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        if text.len() < self.min_len {
            return out;
        }
        for v in &self.values {
            if out.contains(v.as_str()) {
                *count += out.matches(v.as_str()).count();
                out = Cow::Owned(out.replace(v.as_str(), REDACTED));
            }
        }
        if out.len() < MIN_SHAPE_LEN || !self.any_hint.is_match(&out) {
            return out;
        }
        let hits = self.prefilter.matches(&out);
        if hits.matched(shapes::PEM) {
            out = self.replace_shape(out, shapes::PEM, count);
        }
        if hits.matched(shapes::SHAPES.len()) {
            if let Some(o) = self.redact_key_values(&out, count) {
                out = Cow::Owned(o);
            }
        }
        for i in (0..self.shapes.len()).filter(|&i| i != shapes::PEM && hits.matched(i)) {
            if i == shapes::AWS_ID {
                out = self.replace_aws_secrets(out, count);
            }
            out = self.replace_shape(out, i, count);
        }
        out
    }

    fn replace_shape<'a>(&self, text: Cow<'a, str>, i: usize, count: &mut usize) -> Cow<'a, str> {
        let (re, random) = &self.shapes[i];
        let mut n = 0;
        let replaced = re.replace_all(&text, |caps: &regex::Captures<'_>| {
            let whole = caps.get(0).map_or("", |m| m.as_str());
            let Some(m) = caps.get(0) else {
                return String::new();
            };
            let (a, b) = caps.name("secret").map_or((0, whole.len()), |s| {
                (s.start() - m.start(), s.end() - m.start())
            });
            if *random && !shapes::looks_random(&whole[a..b]) {
                return whole.to_string();
            }
            n += 1;
            format!("{}{REDACTED}{}", &whole[..a], &whole[b..])
        });
        if n == 0 {
            return text;
        }
        *count += n;
        Cow::Owned(replaced.into_owned())
    }

    /// 40-character secret keys in text that also holds an access key id.
    fn replace_aws_secrets<'a>(&self, text: Cow<'a, str>, count: &mut usize) -> Cow<'a, str> {
        let mut n = 0;
        let replaced = self
            .aws_secret
            .replace_all(&text, |caps: &regex::Captures<'_>| {
                let whole = caps.get(0).map_or("", |m| m.as_str());
                match (caps.get(0), caps.name("secret")) {
                    (Some(m), Some(s)) if shapes::looks_like_aws_secret(s.as_str()) => {
                        n += 1;
                        let (a, b) = (s.start() - m.start(), s.end() - m.start());
                        format!("{}{REDACTED}{}", &whole[..a], &whole[b..])
                    }
                    _ => whole.to_string(),
                }
            });
        if n == 0 {
            return text;
        }
        *count += n;
        Cow::Owned(replaced.into_owned())
    }

    /// `key: value` and the like with a secret-looking key; `None` if nothing changed.
    fn redact_key_values(&self, text: &str, count: &mut usize) -> Option<String> {
        let mut out = String::new();
        // Bytes of `text` already copied to `out` or consumed as a value.
        let mut done = 0;
        for caps in self.key_value.captures_iter(text) {
            let (Some(m), Some(key), Some(sep)) = (caps.get(0), caps.name("key"), caps.name("sep"))
            else {
                continue;
            };
            if m.start() < done {
                continue;
            }
            let quoted_key = key.as_str().starts_with(['"', '\'']);
            if !is_secret_key(key.as_str().trim_matches(['"', '\''])) {
                continue;
            }
            // `key: value` takes the rest of the line only where a line starts
            // with it (YAML, headers); inside a sentence or a log line, one word.
            let one_word = sep.as_str() == "=" || !starts_line(text, key.start());
            let (a, b) = value_span(text, m.end(), one_word, quoted_key);
            let value = &text[a..b];
            if value.is_empty() || value.starts_with(REDACTED) {
                continue;
            }
            if matches!(value, "|" | "|-" | "|+" | ">" | ">-" | ">+") {
                // A YAML block: the lines indented deeper than the key are the value.
                let indent = line_indent(text, key.start());
                let (end, lines) = block_end(text, b, indent);
                if lines == 0 {
                    continue;
                }
                out.push_str(&text[done..b]);
                out.push('\n');
                out.push_str(&" ".repeat(indent + 2));
                out.push_str(REDACTED);
                *count += 1;
                done = end;
                continue;
            }
            out.push_str(&text[done..a]);
            out.push_str(REDACTED);
            *count += 1;
            done = b;
        }
        if done == 0 {
            return None;
        }
        out.push_str(&text[done..]);
        Some(out)
    }

    /// Every string and every object key at any depth, the value of every
    /// secret-looking key, and numbers whose text holds a secret value.
    pub fn redact_value(&self, value: Value) -> Value {
        self.redact(value).0
    }

    /// [`Redactor::redact_value`] with the number of replacements made.
    pub fn redact(&self, value: Value) -> (Value, usize) {
        let mut count = 0;
        let v = self.walk(value, false, &mut count);
        (v, count)
    }

    fn walk(&self, value: Value, secret: bool, count: &mut usize) -> Value {
        match value {
            Value::String(s) if secret => {
                if s.is_empty() || s == REDACTED {
                    Value::String(s)
                } else {
                    *count += 1;
                    Value::String(REDACTED.into())
                }
            }
            Value::String(s) => match self.redact_text(&s, count) {
                Cow::Borrowed(_) => Value::String(s),
                Cow::Owned(o) => Value::String(o),
            },
            Value::Number(n) => {
                let text = n.to_string();
                if secret || self.values.iter().any(|v| text.contains(v.as_str())) {
                    *count += 1;
                    Value::String(REDACTED.into())
                } else {
                    Value::Number(n)
                }
            }
            // `true` and `false` hide nothing under a secret key; they go
            // only when a passed secret is that very word (a value of the
            // server's own environment is never that short).
            Value::Bool(b) => {
                if self
                    .values
                    .iter()
                    .any(|v| v == if b { "true" } else { "false" })
                {
                    *count += 1;
                    Value::String(REDACTED.into())
                } else {
                    Value::Bool(b)
                }
            }
            Value::Null => Value::Null,
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .map(|v| self.walk(v, secret, count))
                    .collect(),
            ),
            Value::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (k, v) in map {
                    let inner = secret || is_secret_key(&k);
                    let v = self.walk(v, inner, count);
                    out.insert(self.redact_text(&k, count).into_owned(), v);
                }
                Value::Object(out)
            }
        }
    }
}

/// Is only indentation (or a YAML list dash) before byte `at` on its line?
fn starts_line(text: &str, at: usize) -> bool {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..at]
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || b == b'-')
}

/// Where the value after a key and its separator (ending at `start`) lies.
/// Quoted: inside the quotes. After a quoted key (JSON text): up to `,`,
/// `}` or `]`. `one_word`: up to white space, `&` or a quote. Otherwise
/// the rest of the line.
fn value_span(text: &str, start: usize, one_word: bool, quoted_key: bool) -> (usize, usize) {
    let rest = &text[start..];
    let line_end = rest.find(['\n', '\r']).unwrap_or(rest.len());
    let line = &rest[..line_end];
    if let Some(q) = line.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let body = &line[1..];
        let mut escaped = false;
        let close = body.char_indices().find(|&(_, c)| {
            let hit = c == q && !(escaped && q == '"');
            escaped = c == '\\' && !escaped;
            hit
        });
        let len = close.map_or(body.len(), |(i, _)| i);
        return (start + 1, start + 1 + len);
    }
    let end = if quoted_key {
        line.find([',', '}', ']']).unwrap_or(line.len())
    } else if one_word {
        line.find(|c: char| c.is_whitespace() || matches!(c, '&' | '"' | '\''))
            .unwrap_or(line.len())
    } else {
        line.len()
    };
    let value = line[..end].trim_end();
    (start, start + value.len())
}

/// Spaces before the line holding byte `at`.
fn line_indent(text: &str, at: usize) -> usize {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..]
        .bytes()
        .take_while(|b| *b == b' ')
        .count()
}

/// The end of the lines after `from` (the end of a `key: |` line) that are
/// blank or indented deeper than `indent`, and how many held text.
fn block_end(text: &str, from: usize, indent: usize) -> (usize, usize) {
    let mut end = from;
    let mut lines = 0;
    let mut at = from;
    while at < text.len() && text[at..].starts_with('\n') {
        let line_start = at + 1;
        let line_end = text[line_start..]
            .find('\n')
            .map_or(text.len(), |i| line_start + i);
        let line = &text[line_start..line_end];
        let blank = line.trim().is_empty();
        let deeper = line.bytes().take_while(|b| *b == b' ').count() > indent;
        if !blank && !deeper {
            break;
        }
        if !blank {
            lines += 1;
            end = line_end;
        }
        at = line_end;
    }
    (end, lines)
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

    /// The text after redaction, and how many replacements were counted.
    fn counted(text: &str) -> (String, usize) {
        let mut n = 0;
        let out = plain().redact_text(text, &mut n).into_owned();
        (out, n)
    }

    #[test]
    fn every_pattern_compiles() {
        for s in shapes::SHAPES {
            Regex::new(s.pattern).unwrap();
            Regex::new(s.hint).unwrap();
        }
        for p in [
            shapes::KEY_VALUE_HINT,
            shapes::KEY_VALUE,
            shapes::AWS_SECRET,
        ] {
            Regex::new(p).unwrap();
        }
        assert_eq!(plain().prefilter.len(), shapes::SHAPES.len() + 1);
    }

    /// One text per shape, in the order of `shapes::SHAPES`.
    const SAMPLES: &[&str] = &[
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----",
        "AKIAIOSFODNN7EXAMPLE",
        "ghs_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "glpat-abcdefghij0123456789",
        "xoxb-123456789012-abcdefABCDEF",
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI",
        "GOCSPX-1a2B3c4D5e6F7g8H9i0JkLmNoPq",
        "ya29.a0AfH6SMBx7Yq2example0123456789",
        "sk-proj-abc_DEF-ghi0123456789xyzXYZ",
        "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
        "pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMAACKlsz",
        "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH",
        "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",
        "SKa1b2c3d4e5f60718293a4b5c6d7e8f90",
        "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
        "https://discord.com/api/webhooks/123456789012345678/abcdefghijklmnopqrstuvwxyz0123456789ABCD",
        "bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
        "rwx_live_7Qm2VtB9kLp4Xn8Rz3Hd6Wc1Ys5Jf0Ga",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "Authorization: Bearer abc.def-123_456",
        "postgres://admin:hunter2@db.local/app",
    ];

    #[test]
    fn every_shape_is_found_through_its_hint() {
        assert_eq!(SAMPLES.len(), shapes::SHAPES.len());
        for (i, (shape, sample)) in shapes::SHAPES.iter().zip(SAMPLES).enumerate() {
            assert!(
                Regex::new(shape.pattern).unwrap().is_match(sample),
                "{i}: {sample}"
            );
            // A hint that misses where its shape matches would hide a secret.
            for (other, text) in shapes::SHAPES.iter().zip(SAMPLES) {
                if Regex::new(other.pattern).unwrap().is_match(text) {
                    assert!(Regex::new(other.hint).unwrap().is_match(text), "{text}");
                }
            }
            let (out, n) = counted(sample);
            assert!(n >= 1 && out.contains(REDACTED), "{i}: {sample} -> {out}");
        }
    }

    #[test]
    fn aws_access_keys_and_the_secret_beside_them() {
        assert_eq!(
            scrub("key AKIAIOSFODNN7EXAMPLE here"),
            "key [REDACTED] here"
        );
        assert_eq!(scrub("ASIAY34FZKBOKMUTVV7A"), "[REDACTED]");
        assert_eq!(
            scrub("AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            "[REDACTED] [REDACTED]"
        );
        // Without an id beside it, a 40-character run is left alone, and a
        // SHA-1 never looks like a secret key.
        let sha1 = "da39a3ee5e6b4b0d3255bfef95601890afd80709";
        assert_eq!(scrub(&format!("commit {sha1}")), format!("commit {sha1}"));
        assert_eq!(
            scrub(&format!("AKIAIOSFODNN7EXAMPLE {sha1}")),
            format!("[REDACTED] {sha1}")
        );
    }

    #[test]
    fn github_tokens() {
        for prefix in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"] {
            let t = format!("{prefix}{}", "a1B2c3D4e5".repeat(4));
            assert_eq!(scrub(&format!("tok {t}.")), "tok [REDACTED].", "{t}");
        }
        assert_eq!(
            scrub("github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
            "[REDACTED]"
        );
    }

    #[test]
    fn service_tokens() {
        for t in [
            "glpat-abcdefghij0123456789",
            "gldt-abcdefghij0123456789xy",
            "xoxb-123456789012-abcdefABCDEF",
            "xoxp-1234567890-x",
            "xoxe-1-abcdefghij",
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "rk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI",
            "GOCSPX-1a2B3c4D5e6F7g8H9i0JkLmNoPq",
            "ya29.a0AfH6SMBx7Yq2example0123456789",
            "sk-abcdefghijklmnopqrstuvwxyz012345",
            "sk-proj-abc_DEF-ghi0123456789xyzXYZ",
            "sk-ant-api03-abcdefghijklmnopqrstuv0123",
            "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
            "pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMAACKlsz",
            "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH",
            "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",
            "SKa1b2c3d4e5f60718293a4b5c6d7e8f90",
            "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
            "rwx_live_7Qm2VtB9kLp4Xn8Rz3Hd6Wc1Ys5Jf0Ga",
            "acme_live_abcdefghij0123456789XY",
        ] {
            assert_eq!(scrub(&format!("use {t} now")), "use [REDACTED] now", "{t}");
        }
    }

    #[test]
    fn webhook_urls_and_bot_tokens_keep_their_host() {
        assert_eq!(
            scrub("https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"),
            "https://hooks.slack.com/services/[REDACTED]"
        );
        assert_eq!(
            scrub("https://discord.com/api/webhooks/123456789012345678/abcdefghijklmnopqrstuvwxyz0123456789ABCD"),
            "https://discord.com/api/webhooks/[REDACTED]"
        );
        assert_eq!(
            scrub(
                "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0/getMe"
            ),
            "https://api.telegram.org/bot[REDACTED]/getMe"
        );
    }

    #[test]
    fn jwts() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(scrub(&format!("jwt {jwt}")), "jwt [REDACTED]");
    }

    #[test]
    fn pem_private_keys_whole_and_cut_off() {
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----";
        assert_eq!(scrub(&format!("a\n{pem}\nb")), "a\n[REDACTED]\nb");
        assert_eq!(scrub("x -----BEGIN PRIVATE KEY-----\nMIIE"), "x [REDACTED]");
        let pgp =
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----";
        assert_eq!(scrub(pgp), "[REDACTED]");
        // Under a secret key the whole block goes, not only its first line.
        assert_eq!(
            scrub("private_key: -----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\nnext: 1"),
            "private_key: [REDACTED]\nnext: 1"
        );
        assert_eq!(
            scrub("-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----"),
            "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----"
        );
    }

    #[test]
    fn bearer_tokens_keep_the_word() {
        assert_eq!(
            scrub("sent Bearer abc.def-123_456 upstream"),
            "sent Bearer [REDACTED] upstream"
        );
        assert_eq!(scrub("bearer   0123456789"), "bearer   [REDACTED]");
        assert_eq!(
            scrub("Bearer authentication is used"),
            "Bearer authentication is used"
        );
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
    fn key_value_lines_inside_text_lose_their_value() {
        for (text, want) in [
            ("smtp_password: hunter2hunter2", "smtp_password: [REDACTED]"),
            ("  token: abc def # note", "  token: [REDACTED]"),
            ("API_TOKEN=abc123\nOTHER=1", "API_TOKEN=[REDACTED]\nOTHER=1"),
            ("password = 'p@ss word'", "password = '[REDACTED]'"),
            (
                r#"{"client_secret": "s3cr3t", "user": "dana"}"#,
                r#"{"client_secret": "[REDACTED]", "user": "dana"}"#,
            ),
            (
                r#"{"api_key": 12345678, "n": 1}"#,
                r#"{"api_key": [REDACTED], "n": 1}"#,
            ),
            (
                r#"{"password": "a\"b", "x": 1}"#,
                r#"{"password": "[REDACTED]", "x": 1}"#,
            ),
            (
                "GET /cb?code=1&access_token=abc123&x=1",
                "GET /cb?code=1&access_token=[REDACTED]&x=1",
            ),
            (
                "run --password=hunter2 --verbose",
                "run --password=[REDACTED] --verbose",
            ),
            (
                "Authorization: Basic dXNlcjpwYXNz",
                "Authorization: [REDACTED]",
            ),
            ("apiKey: \"k-123\"", "apiKey: \"[REDACTED]\""),
            ("pass=abc\r\nnext=1", "pass=[REDACTED]\r\nnext=1"),
        ] {
            assert_eq!(scrub(text), want, "{text}");
        }
        let (out, n) = counted("a: 1\ntoken: t1\nsecret = t2\n");
        assert_eq!(out, "a: 1\ntoken: [REDACTED]\nsecret = [REDACTED]\n");
        assert_eq!(n, 2);
    }

    #[test]
    fn a_yaml_block_under_a_secret_key_goes_whole() {
        let text = "cert: ok\nsigning_key: |\n  line one\n  line two\n\nafter: 1\n";
        assert_eq!(
            scrub(text),
            "cert: ok\nsigning_key: |\n  [REDACTED]\n\nafter: 1\n"
        );
    }

    #[test]
    fn ordinary_text_is_untouched() {
        for text in [
            "Check a campaign file for missing fields.",
            "https://example.com/path?q=1&page=2",
            "https://example.com:8443/a/b",
            "mailto:someone@example.com",
            "https://user@example.com",
            "the task-list has 3 items",
            "AKIA is a prefix",
            "bearer of bad news",
            "ghp_short",
            "desk-0123456789012345678901234",
            "eyJhbGciOiJIUzI1NiJ9 alone",
            "id: cmp_2026_0001",
            "550e8400-e29b-41d4-a716-446655440000",
            "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "da39a3ee5e6b4b0d3255bfef95601890afd80709",
            "version 1.8.2, v2.3.4-rc.1+build.5",
            "token_count: 1234",
            "max_tokens = 4096",
            "session_id: 42",
            "public_id: pub_0123456789abcdef0123",
            "keychain: reachweaver/linkedin",
            "path: /home/dana/notes.txt",
            "the risk-assessment-for-the-quarter-of-2026",
            "sk-learning-notes",
            "12:34:56 started",
            "the key: a value",
            "token: [REDACTED]",
            "",
        ] {
            assert_eq!(counted(text), (text.to_string(), 0), "{text}");
        }
    }

    #[test]
    fn env_values_are_redacted_longest_first() {
        let r = Redactor::new(vec![
            ("API_TOKEN".to_string(), "abcdefgh".to_string()),
            ("DB_PASSWORD".to_string(), "abcdefgh-and-more".to_string()),
            ("SHORT_TOKEN".to_string(), "1234567".to_string()),
            (
                "REACHWEAVER_SMTP_PASS".to_string(),
                "pass-of-smtp".to_string(),
            ),
            (
                "GIT_AUTHOR_NAME".to_string(),
                "Alexandra Example".to_string(),
            ),
        ]);
        assert_eq!(
            r.redact_str("pw abcdefgh-and-more / abcdefgh / pass-of-smtp"),
            "pw [REDACTED] / [REDACTED] / [REDACTED]"
        );
        assert_eq!(r.redact_str("short 1234567"), "short 1234567");
        assert_eq!(r.redact_str("by Alexandra Example"), "by Alexandra Example");
    }

    #[test]
    fn passed_secret_values_are_redacted_from_four_characters() {
        let passed: Vec<String> = [
            "REACHWEAVER_SMTP_PASS",
            "REACHWEAVER_PIN_TOKEN",
            "REACHWEAVER_SIGNING_KEY",
            "LANG",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let r = Redactor::with_passed(
            [
                ("REACHWEAVER_SMTP_PASS", "hunt"),
                ("REACHWEAVER_PIN_TOKEN", "4821"),
                ("REACHWEAVER_SIGNING_KEY", "abc"),
                ("DB_PASSWORD", "abcdefg"),
                ("SESSION", "main"),
                ("LANG", "C.UTF-8"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
            &passed,
        );
        assert_eq!(r.redact_str("user hunt"), "user [REDACTED]");
        assert_eq!(r.redact_str("pin 4821"), "pin [REDACTED]");
        // Values of the server's own environment keep the longer floor, and
        // a passed variable that is not secret-named is never looked for.
        for kept in ["pw abcdefg", "branch main", "abc", "C.UTF-8"] {
            assert_eq!(r.redact_str(kept), kept);
        }
        assert_eq!(r.too_short(), ["REACHWEAVER_SIGNING_KEY".to_string()]);
        let (out, n) = r.redact(json!({"pin": 4821, "other": 4822, "list": [4821, "hunt"]}));
        assert_eq!(
            out,
            json!({"pin": REDACTED, "other": 4822, "list": [REDACTED, REDACTED]})
        );
        assert_eq!(n, 3);
        // Without `--pass-env`, the same four characters are left alone.
        let r = Redactor::new([("REACHWEAVER_PIN_TOKEN".to_string(), "4821".to_string())]);
        assert_eq!(r.redact(json!({"pin": 4821})), (json!({"pin": 4821}), 0));
        assert!(r.too_short().is_empty());
    }

    #[test]
    fn a_boolean_goes_only_when_a_passed_secret_is_that_word() {
        let passed = vec!["REACHWEAVER_FEATURE_SECRET".to_string()];
        let vars = || [("REACHWEAVER_FEATURE_SECRET".to_string(), "true".to_string())];
        let r = Redactor::with_passed(vars(), &passed);
        let (out, n) = r.redact(json!({"ok": true, "done": false, "note": "true"}));
        assert_eq!(
            out,
            json!({"ok": REDACTED, "done": false, "note": REDACTED})
        );
        assert_eq!(n, 2);
        let v = json!({"ok": true, "note": "true"});
        assert_eq!(Redactor::new(vars()).redact(v.clone()), (v, 0));
    }

    #[test]
    fn secret_keys_at_any_depth_and_in_arrays() {
        let v = json!({
            "api_key": "k1",
            "client_secret": "k2",
            "nested": {"deeper": [{"password": "k3"}, {"auth_token": "k4", "token_count": 7}]},
            "credentials": {"user": "dana", "list": ["k5", 6]},
            "password": "",
            "token": null,
            "auth": true,
            "public_id": "p-1",
            "max_tokens": 4096,
            "session_id": "s-1",
        });
        let (out, n) = plain().redact(v);
        assert_eq!(
            out,
            json!({
                "api_key": REDACTED,
                "client_secret": REDACTED,
                "nested": {"deeper": [{"password": REDACTED}, {"auth_token": REDACTED, "token_count": 7}]},
                "credentials": {"user": REDACTED, "list": [REDACTED, REDACTED]},
                "password": "",
                "token": null,
                "auth": true,
                "public_id": "p-1",
                "max_tokens": 4096,
                "session_id": "s-1",
            })
        );
        assert_eq!(n, 7);
    }

    #[test]
    fn numbers_holding_a_secret_value_are_redacted() {
        let r = Redactor::new(vec![(
            "REACHWEAVER_PIN_TOKEN".to_string(),
            "48213377".to_string(),
        )]);
        let v: Value = serde_json::from_str(
            r#"{"a": 48213377, "b": 4821337, "c": 1.48213377, "d": [48213377]}"#,
        )
        .unwrap();
        let (out, n) = r.redact(v);
        assert_eq!(
            out,
            serde_json::from_str::<Value>(
                r#"{"a": "[REDACTED]", "b": 4821337, "c": "[REDACTED]", "d": ["[REDACTED]"]}"#
            )
            .unwrap()
        );
        assert_eq!(n, 3);
    }

    #[test]
    fn values_and_keys_at_any_depth() {
        let r = Redactor::new(vec![("MY_SECRET".to_string(), "s3cr3t-value".to_string())]);
        let v = json!({
            "a": ["x s3cr3t-value", {"s3cr3t-value": 1, "n": 5, "b": true, "z": null}],
            "AKIAIOSFODNN7EXAMPLE": "ok"
        });
        let (out, n) = r.redact(v);
        assert_eq!(
            out,
            json!({"a": ["x [REDACTED]", {"[REDACTED]": 1, "n": 5, "b": true, "z": null}], "[REDACTED]": "ok"})
        );
        assert_eq!(n, 3);
    }

    #[test]
    fn nothing_to_hide_counts_zero_and_keeps_the_document() {
        let v = json!({"campaign": "spring-launch", "token_count": 12, "items": [1, "two", {"three": 3.0}]});
        assert_eq!(plain().redact(v.clone()), (v, 0));
    }

    #[test]
    fn non_ascii_text_is_handled() {
        assert_eq!(
            scrub("größe: 5 — token: geheimnis ✓\nnote: ünïcode ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2"),
            "größe: 5 — token: [REDACTED] ✓\nnote: ünïcode [REDACTED]"
        );
    }

    #[test]
    fn arbitrary_text_never_panics_and_a_zero_count_means_unchanged() {
        const PARTS: &[&str] = &[
            "token",
            "password",
            "api_key",
            ":",
            "=",
            " ",
            "\n",
            "\r\n",
            "  ",
            "\"",
            "'",
            "\\",
            "|",
            "-",
            ",",
            "}",
            "ü",
            "—",
            "✓",
            "ghp_",
            "a1B2c3D4e5",
            "AKIA",
            "IOSFODNN7EXAMPLE",
            "://",
            "@",
            "-----BEGIN RSA PRIVATE KEY-----",
            "eyJ",
            ".",
            "Bearer ",
            "x",
            "0123456789",
            "_live_",
            "sk-",
            "&",
        ];
        let r = plain();
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..3000 {
            let mut text = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 24) as usize;
            for k in 0..len {
                let pick = (seed.rotate_left(k as u32 * 5) % PARTS.len() as u64) as usize;
                text.push_str(PARTS[pick]);
            }
            let mut n = 0;
            let out = r.redact_text(&text, &mut n);
            if n == 0 {
                assert_eq!(out, text);
            } else {
                assert!(out.contains(REDACTED), "{text:?} -> {out:?}");
            }
        }
    }

    #[test]
    fn text_of_exactly_the_shortest_length_is_looked_at() {
        assert_eq!(MIN_SHAPE_LEN, 8);
        assert_eq!("pass=abc".len(), MIN_SHAPE_LEN);
        assert_eq!(counted("pass=abc"), (format!("pass={REDACTED}"), 1));
        assert_eq!(counted("pass=abcd"), (format!("pass={REDACTED}"), 1));
        // A server secret of exactly eight characters, alone.
        let r = Redactor::new([("API_TOKEN".to_string(), "k3y-4567".to_string())]);
        assert_eq!(r.redact_str("k3y-4567"), REDACTED);
        // A passed secret of exactly four characters, alone.
        let r = Redactor::with_passed(
            [("PIN_TOKEN".to_string(), "4821".to_string())],
            &["PIN_TOKEN".to_string()],
        );
        assert_eq!(r.min_len, MIN_PASSED_SECRET_LEN);
        assert_eq!(r.redact_str("4821"), REDACTED);
        assert_eq!(r.redact_str("482"), "482");
    }
}

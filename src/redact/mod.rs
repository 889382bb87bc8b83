//! Secret scrubbing for everything a tool result carries.
//!
//! This is a safety net, not the guarantee (the sandbox, the protected
//! files and the withheld commands are): a backend that prints a credential
//! by mistake should not hand it to a model. Sources, applied to every
//! document at any depth:
//!
//! - keys: the value under a secret-looking key (`password`, `api_key`,
//!   `AccountKey`, `client_secret`, ...; see [`names`]) is replaced whole,
//!   in arrays and nested objects too, and so is a `value` whose sibling
//!   `name`, `key` or `header` is secret-named;
//! - `key: value`, `key = value`, `KEY=value`, `"key": "value"`,
//!   `:key => value`, `--key value`, `<key>value</key>` and `.netrc` lines
//!   inside text lose their value when the key looks secret;
//! - token shapes ([`shapes`]): PEM private keys, JWTs, passwords in URLs
//!   and Oracle connect strings, the MySQL clients' `-pPASSWORD`, and the
//!   credentials of well-known services;
//! - neighbours: a PEM block split over the strings of one array, an AWS
//!   secret key or a Twilio auth token beside its key id or account SID,
//!   a column of a table whose heading is secret-named;
//! - the values of the server's own secret-named environment variables,
//!   also where a number's or a boolean's text holds one, or a number
//!   equals one written another way (see [`MIN_SERVER_SECRET_LEN`] and
//!   [`MIN_PASSED_SECRET_LEN`] for which).
//!
//! Every rule looks at the original text and says which bytes it would
//! hide; overlapping finds are joined and replaced once, so no rule sees
//! another's `[REDACTED]` in the middle of what it is matching.
//!
//! Every replacement is counted, so a result can say that something was
//! hidden, never what.

mod anchors;
mod lazy;
mod names;
mod shapes;
mod spans;

use std::borrow::Cow;

use memchr::memmem;
use regex::Regex;
use serde_json::{Map, Value};

pub use names::{is_secret_key, is_secret_name};

use anchors::{Anchors, Hit};
use lazy::LazyRegex;
use shapes::ShapeCheck;
use spans::{block_end, header_value_span, line_indent, starts_line, value_span};

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

/// Texts shorter than this skip the shape and `key: value` rules, even `pass=ab` (most
/// object keys are shorter, so they skip all the work).
const MIN_SHAPE_LEN: usize = 8;

/// How many bytes of an array's strings are joined and scanned at a time.
const JOINED_BATCH: usize = 1 << 16;

/// How far before a `value` field a naming field is looked for.
const NAMING_WINDOW: usize = 256;

/// Values that cannot be secrets, left alone under a secret-named key:
/// answers, states, and the names of authentication methods.
const NOT_SECRET_VALUES: &[&str] = &[
    "yes",
    "no",
    "none",
    "true",
    "false",
    "null",
    "enabled",
    "disabled",
    "required",
    "optional",
    "on",
    "off",
    "basic",
    "bearer",
    "oauth",
    "oauth2",
    "digest",
    "token",
    "password",
    "apikey",
    "api_key",
    "ntlm",
    "kerberos",
    "negotiate",
    "anonymous",
    "[redacted]",
];

/// Zero-width characters that split a token without showing; removed before matching.
const ZERO_WIDTH: &[char] = &['\u{200b}', '\u{200c}', '\u{200d}', '\u{2060}', '\u{feff}'];

/// Header names whose value is the whole rest of the header, wherever it stands.
const HEADER_KEYS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
];

/// Authentication schemes that come before the credential they name.
const AUTH_SCHEMES: &[&str] = &[
    "bearer",
    "basic",
    "token",
    "digest",
    "bot",
    "negotiate",
    "sso-key",
];

/// Is `v` a word that no secret is (`none`, `oauth2`, `disabled`)?
fn is_not_secret_value(v: &str) -> bool {
    let v = v.trim();
    NOT_SECRET_VALUES.iter().any(|w| v.eq_ignore_ascii_case(w))
}

/// A value that looks generated: no white space, eight bytes or more, and
/// a digit or an inner capital.
fn looks_generated(v: &str) -> bool {
    v.len() >= MIN_SHAPE_LEN && !v.contains(char::is_whitespace) && shapes::looks_random(v)
}

/// A part of the text to hide.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
    /// A YAML block value: replaced by one indented `[REDACTED]` line.
    block_indent: Option<usize>,
}

impl Span {
    fn new(start: usize, end: usize) -> Self {
        Self {
            start,
            end,
            block_indent: None,
        }
    }
}

/// Built once at start from the server's environment; shared by all calls.
#[derive(Debug, Clone)]
pub struct Redactor {
    /// One pass says which rules to apply, and on which lines.
    anchors: Anchors,
    shapes: Vec<(LazyRegex, ShapeCheck)>,
    key_value: LazyRegex,
    naming_field: LazyRegex,
    aws_secret: LazyRegex,
    twilio_secret: LazyRegex,
    aws_id: LazyRegex,
    /// Longest first, so a value containing another is replaced whole.
    values: Vec<String>,
    /// A searcher for each of `values`, built once.
    finders: Vec<memmem::Finder<'static>>,
    /// The values that read as numbers, as numbers: a backend may print
    /// `4821` as `4.821e3`.
    numeric_values: Vec<f64>,
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
        let numeric_values = values
            .iter()
            .filter_map(|v| v.trim().parse::<f64>().ok().filter(|n| n.is_finite()))
            .collect();
        let min_len = values
            .iter()
            .map(String::len)
            .min()
            .map_or(MIN_SHAPE_LEN, |v| v.min(MIN_SHAPE_LEN));
        let compile = LazyRegex::new;
        let finders = values
            .iter()
            .map(|v| memmem::Finder::new(v.as_bytes()).into_owned())
            .collect();
        Self {
            anchors: Anchors::new(),
            shapes: shapes::SHAPES
                .iter()
                .map(|s| (compile(s.pattern), s.check))
                .collect(),
            key_value: compile(shapes::KEY_VALUE),
            naming_field: compile(shapes::NAMING_FIELD),
            aws_secret: compile(shapes::AWS_SECRET),
            twilio_secret: compile(shapes::TWILIO_SECRET),
            aws_id: compile(shapes::SHAPES[shapes::AWS_ID].pattern),
            values,
            finders,
            numeric_values,
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

    /// `text` redacted, then cut to at most `max_chars` characters with `…`
    /// after a cut. Cutting first could leave part of a secret that no
    /// rule recognises any more.
    pub fn redact_and_cut(&self, text: &str, max_chars: usize) -> String {
        let redacted = self.redact_str(text);
        let mut out: String = redacted.chars().take(max_chars).collect();
        if redacted.chars().nth(max_chars).is_some() {
            out.push('…');
        }
        out
    }

    /// `text` with every secret replaced; `count` grows by the replacements made.
    pub fn redact_text<'a>(&self, text: &'a str, count: &mut usize) -> Cow<'a, str> {
        if text.len() < self.min_len {
            return Cow::Borrowed(text);
        }
        // ASCII text (most of it) holds none; `is_ascii` is one fast pass.
        if !text.is_ascii() && text.contains(ZERO_WIDTH) {
            let joined: String = text.chars().filter(|c| !ZERO_WIDTH.contains(c)).collect();
            let mut n = 0;
            let out = self.redact_spans(&joined, &mut n).into_owned();
            if n == 0 {
                return Cow::Borrowed(text);
            }
            *count += n;
            return Cow::Owned(out);
        }
        self.redact_spans(text, count)
    }

    /// Every rule's finds in `text`, joined where they overlap, replaced once each.
    fn redact_spans<'a>(&self, text: &'a str, count: &mut usize) -> Cow<'a, str> {
        let mut spans: Vec<Span> = Vec::new();
        for f in &self.finders {
            let len = f.needle().len();
            for i in f.find_iter(text.as_bytes()) {
                spans.push(Span::new(i, i + len));
            }
        }
        if text.len() >= MIN_SHAPE_LEN {
            let hits = self.anchors.scan(text);
            let armed = |rule: usize| hits.iter().any(|h| h.rule == rule);
            for group in hits.chunk_by(|a, b| a.rule == b.rule) {
                let rule = group[0].rule;
                // A private key runs over many lines; every other rule
                // matches within one, so it reads only the lines its
                // anchor is on.
                let lines = if rule == shapes::PRIVATE_KEY {
                    vec![(0, text.len())]
                } else {
                    anchors::lines_of(text, group.iter().map(|h: &Hit| h.at))
                };
                if rule == anchors::KEY_VALUE {
                    self.key_value_spans(text, &lines, &mut spans);
                } else {
                    self.shape_spans(text, rule, &lines, &mut spans);
                }
            }
            if armed(shapes::AWS_ID) {
                self.neighbour_spans(
                    text,
                    &self.aws_secret,
                    shapes::looks_like_aws_secret,
                    &mut spans,
                );
            }
            if armed(shapes::TWILIO_SID) {
                self.neighbour_spans(text, &self.twilio_secret, |_| true, &mut spans);
            }
        }
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        spans.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
        let mut out = String::with_capacity(text.len());
        let mut done = 0;
        let mut k = 0;
        while k < spans.len() {
            let mut span = spans[k];
            k += 1;
            while k < spans.len() && spans[k].start < span.end {
                span.end = span.end.max(spans[k].end);
                k += 1;
            }
            if span.start < done {
                continue;
            }
            out.push_str(&text[done..span.start]);
            if let Some(indent) = span.block_indent {
                out.push('\n');
                out.push_str(&" ".repeat(indent + 2));
            }
            out.push_str(REDACTED);
            *count += 1;
            done = span.end;
        }
        out.push_str(&text[done..]);
        Cow::Owned(out)
    }

    /// Shape `i`'s finds within `lines` (byte ranges of `text`).
    fn shape_spans(&self, text: &str, i: usize, lines: &[(usize, usize)], spans: &mut Vec<Span>) {
        let (re, check) = &self.shapes[i];
        match check {
            ShapeCheck::Arm => return,
            ShapeCheck::Netrc if !text.contains("machine ") => return,
            _ => {}
        }
        for &(lo, hi) in lines {
            self.shape_spans_in(&text[lo..hi], lo, re, *check, spans);
        }
    }

    /// [`Redactor::shape_spans`] on one line, which starts at byte `offset`.
    fn shape_spans_in(
        &self,
        text: &str,
        offset: usize,
        re: &Regex,
        check: ShapeCheck,
        spans: &mut Vec<Span>,
    ) {
        for caps in re.captures_iter(text) {
            let Some(m) = caps.get(0) else {
                continue;
            };
            let s = caps.name("secret").unwrap_or(m);
            let secret = s.as_str();
            let keep = match check {
                ShapeCheck::None | ShapeCheck::Netrc | ShapeCheck::Arm => true,
                ShapeCheck::Random => shapes::looks_random(secret),
                ShapeCheck::DiscordToken => shapes::is_discord_token(secret),
                ShapeCheck::SecretFlag => {
                    caps.name("flag").is_some_and(|f| is_secret_key(f.as_str()))
                        && !is_not_secret_value(secret.trim_matches(['"', '\'']))
                }
                ShapeCheck::SecretElement if secret.len() > 4096 => false,
                ShapeCheck::SecretElement => {
                    let (open, close) = (caps.name("flag"), caps.name("close"));
                    open.zip(close)
                        .is_some_and(|(o, c)| o.as_str() == c.as_str() && is_secret_key(o.as_str()))
                        && !is_not_secret_value(secret)
                        && !secret.trim().is_empty()
                }
                ShapeCheck::Base64PrivateKey => shapes::is_base64_private_key(secret),
            };
            if keep && !secret.is_empty() && secret != REDACTED {
                spans.push(Span::new(offset + s.start(), offset + s.end()));
            }
        }
    }

    /// A secret recognised only beside its id (an AWS secret key beside an
    /// access key id, a Twilio auth token beside an account SID).
    fn neighbour_spans(
        &self,
        text: &str,
        re: &Regex,
        looks_right: fn(&str) -> bool,
        spans: &mut Vec<Span>,
    ) {
        for caps in re.captures_iter(text) {
            if let Some(s) = caps.name("secret").filter(|s| looks_right(s.as_str())) {
                spans.push(Span::new(s.start(), s.end()));
            }
        }
    }

    /// `key: value` and the like with a secret-looking key.
    /// No pair spans lines, so only `lines` (byte ranges of `text`, in
    /// order) are read; the value and its neighbours are read in `text`.
    fn key_value_spans(&self, text: &str, lines: &[(usize, usize)], spans: &mut Vec<Span>) {
        // Keys are read left to right; a value consumed by one is not read as keys.
        let mut done = 0;
        let pairs = lines.iter().flat_map(|&(lo, hi)| {
            self.key_value
                .captures_iter(&text[lo..hi])
                .map(move |caps| (lo, caps))
        });
        for (lo, caps) in pairs {
            let (Some(m), Some(key), Some(sep)) = (caps.get(0), caps.name("key"), caps.name("sep"))
            else {
                continue;
            };
            let (m_end, key_start) = (lo + m.end(), lo + key.start());
            if lo + m.start() < done {
                continue;
            }
            let key_text = key.as_str();
            let quoted_key = key_text.starts_with(['"', '\'', '\\']);
            let name = key_text.trim_matches(['"', '\'', '\\', ':']);
            let header = HEADER_KEYS.iter().any(|h| name.eq_ignore_ascii_case(h));
            let weak = names::is_weak_secret_key(name);
            let secret = is_secret_key(name)
                || (name.eq_ignore_ascii_case("value") && self.named_by_neighbour(text, key_start));
            if !secret {
                continue;
            }
            let (a, mut b) = if header && !quoted_key {
                header_value_span(text, key_start, m_end)
            } else {
                // `key: value` takes the rest of the line only where a line
                // starts with it (YAML, headers); inside a sentence or a log
                // line, one word.
                let one_word = sep.as_str() != ":" || !starts_line(text, key_start);
                value_span(text, m_end, one_word, quoted_key)
            };
            let mut value = &text[a..b];
            // `auth=Bearer abc`: the credential is the word after the scheme.
            if AUTH_SCHEMES.iter().any(|s| value.eq_ignore_ascii_case(s)) {
                let rest = &text[b..];
                let gap = rest.len() - rest.trim_start_matches([' ', '\t']).len();
                let word = rest[gap..]
                    .find(|c: char| c.is_whitespace() || matches!(c, '&' | '"' | '\'' | ','))
                    .unwrap_or(rest.len() - gap);
                if gap > 0 && word > 0 {
                    b += gap + word;
                    value = &text[a..b];
                }
            }
            if value.is_empty() || value.starts_with(REDACTED) || is_not_secret_value(value) {
                continue;
            }
            if weak && !looks_generated(value) {
                continue;
            }
            if matches!(value, "|" | "|-" | "|+" | ">" | ">-" | ">+") {
                // A YAML block: the lines indented deeper than the key are the value.
                let indent = line_indent(text, key_start);
                let (end, lines) = block_end(text, b, indent);
                if lines == 0 {
                    continue;
                }
                spans.push(Span {
                    start: b,
                    end,
                    block_indent: Some(indent),
                });
                done = end;
                continue;
            }
            spans.push(Span::new(a, b));
            done = b;
        }
    }

    /// Does a `name`, `key` or `header` field shortly before byte `at` (a
    /// `value` key) name a secret?
    fn named_by_neighbour(&self, text: &str, at: usize) -> bool {
        let mut from = at.saturating_sub(NAMING_WINDOW);
        while !text.is_char_boundary(from) {
            from += 1;
        }
        self.naming_field
            .captures_iter(&text[from..at])
            .last()
            .and_then(|c| c.name("name"))
            .is_some_and(|n| is_secret_name(n.as_str().trim()))
    }

    /// Every string and every object key at any depth, the value of every
    /// secret-looking key, and numbers whose text holds a secret value.
    pub fn redact_value(&self, value: Value) -> Value {
        self.redact(value).0
    }

    /// [`Redactor::redact_value`] with the number of replacements made.
    pub fn redact(&self, value: Value) -> (Value, usize) {
        let mut count = 0;
        let v = self.walk(value, Secret::No, &mut count);
        (v, count)
    }

    /// Text rules only, on every string (not on keys, and no key makes its
    /// value secret): for documents whose keys are a format's own, such as
    /// the command catalog, where an argument may well be called `token`.
    pub fn redact_strings(&self, value: Value) -> (Value, usize) {
        fn go(r: &Redactor, v: Value, count: &mut usize) -> Value {
            match v {
                Value::String(s) => match r.redact_text(&s, count) {
                    Cow::Borrowed(_) => Value::String(s),
                    Cow::Owned(o) => Value::String(o),
                },
                Value::Array(items) => {
                    Value::Array(items.into_iter().map(|x| go(r, x, count)).collect())
                }
                Value::Object(map) => {
                    Value::Object(map.into_iter().map(|(k, x)| (k, go(r, x, count))).collect())
                }
                other => other,
            }
        }
        let mut count = 0;
        let v = go(self, value, &mut count);
        (v, count)
    }

    fn is_secret_number(&self, n: &serde_json::Number) -> bool {
        let text = n.to_string();
        self.values.iter().any(|v| text.contains(v.as_str()))
            || n.as_f64().is_some_and(|x| self.numeric_values.contains(&x))
    }

    fn hide(&self, s: String, count: &mut usize) -> Value {
        if s.is_empty() || s == REDACTED || is_not_secret_value(&s) {
            Value::String(s)
        } else {
            *count += 1;
            Value::String(REDACTED.into())
        }
    }

    fn walk(&self, value: Value, secret: Secret, count: &mut usize) -> Value {
        match value {
            Value::String(s) => match secret {
                Secret::Yes => self.hide(s, count),
                Secret::IfGenerated if looks_generated(&s) => self.hide(s, count),
                _ => match self.redact_text(&s, count) {
                    Cow::Borrowed(_) => Value::String(s),
                    Cow::Owned(o) => Value::String(o),
                },
            },
            Value::Number(n) => {
                if secret == Secret::Yes || self.is_secret_number(&n) {
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
            Value::Array(items) => {
                if secret != Secret::Yes {
                    if let Some(columns) = Self::secret_columns(&items) {
                        return Value::Array(
                            items
                                .into_iter()
                                .enumerate()
                                .map(|(i, row)| match row {
                                    Value::Array(cells) if i > 0 => {
                                        self.walk_row(cells, &columns, count)
                                    }
                                    other => self.walk(other, secret, count),
                                })
                                .collect(),
                        );
                    }
                }
                // Most arrays hold no key line and no id: walk them as they are.
                if secret != Secret::Yes && !self.needs_marks(&items) {
                    // Strings that plain text redaction would return unchanged
                    // (a log's lines, mostly) are found in one pass.
                    let clean = if matches!(secret, Secret::No | Secret::TerraformPassword) {
                        self.clean_strings(&items)
                    } else {
                        Vec::new()
                    };
                    return Value::Array(
                        items
                            .into_iter()
                            .enumerate()
                            .map(|(i, v)| {
                                if clean.get(i) == Some(&true) {
                                    v
                                } else {
                                    self.walk(v, secret, count)
                                }
                            })
                            .collect(),
                    );
                }
                let marks = if secret == Secret::Yes {
                    vec![Secret::Yes; items.len()]
                } else {
                    self.array_marks(&items, secret)
                };
                Value::Array(
                    items
                        .into_iter()
                        .zip(marks)
                        .map(|(v, m)| self.walk(v, m, count))
                        .collect(),
                )
            }
            Value::Object(map) => {
                let named = secret != Secret::Yes && names_a_secret(&map);
                let tf_password =
                    map.get("type").and_then(Value::as_str) == Some("random_password");
                let id_beside = secret != Secret::Yes && self.holds_an_id(map.values());
                let mut out = Map::with_capacity(map.len());
                for (k, v) in map {
                    let inner = if secret == Secret::Yes
                        || (secret == Secret::TerraformPassword && is_tf_secret(&k))
                    {
                        Secret::Yes
                    } else if is_secret_key(&k) {
                        if names::is_weak_secret_key(&k) {
                            Secret::IfGenerated
                        } else {
                            Secret::Yes
                        }
                    } else if (named && k.eq_ignore_ascii_case("value"))
                        || (id_beside && v.as_str().is_some_and(|s| self.is_secret_beside_an_id(s)))
                    {
                        Secret::Yes
                    } else if tf_password || secret == Secret::TerraformPassword {
                        Secret::TerraformPassword
                    } else {
                        Secret::No
                    };
                    let v = self.walk(v, inner, count);
                    let k = match self.redact_text(&k, count) {
                        Cow::Borrowed(_) => k,
                        Cow::Owned(o) => o,
                    };
                    out.insert(k, v);
                }
                Value::Object(out)
            }
        }
    }

    /// For each element of `items`: is it a string that
    /// [`Redactor::redact_text`] would return unchanged? The strings are
    /// joined by line breaks (no rule's anchor or value holds one) and
    /// scanned once; a string is clean when no anchor hit and no secret
    /// value lies in it. Per string, the scan's fixed costs would outweigh
    /// a log line's own.
    fn clean_strings(&self, items: &[Value]) -> Vec<bool> {
        let mut clean = vec![false; items.len()];
        if items.iter().filter(|v| v.is_string()).count() < 2
            || self.values.iter().any(|v| v.contains('\n'))
        {
            return clean;
        }
        // Joined a batch at a time, so the copy stays small and in cache.
        let mut joined = String::new();
        // (start in `joined`, element index), by start.
        let mut starts: Vec<(usize, usize)> = Vec::new();
        for (i, v) in items.iter().enumerate() {
            let Some(s) = v.as_str() else {
                continue;
            };
            if s.len() < self.min_len {
                clean[i] = true;
                continue;
            }
            // Zero-width characters are removed before matching: such a
            // string takes the whole path.
            if !s.is_ascii() && s.contains(ZERO_WIDTH) {
                continue;
            }
            starts.push((joined.len(), i));
            joined.push_str(s);
            joined.push('\n');
            clean[i] = true;
            if joined.len() >= JOINED_BATCH {
                self.mark_dirty(&joined, &starts, &mut clean);
                joined.clear();
                starts.clear();
            }
        }
        self.mark_dirty(&joined, &starts, &mut clean);
        clean
    }

    /// Marks not clean each string of `joined` (element `i` from byte
    /// `start`, for each `(start, i)` of `starts`) where a secret value or
    /// an anchor lies.
    fn mark_dirty(&self, joined: &str, starts: &[(usize, usize)], clean: &mut [bool]) {
        let mut dirty = |at: usize| {
            let k = starts.partition_point(|&(start, _)| start <= at);
            if let Some(&(_, i)) = k.checked_sub(1).and_then(|k| starts.get(k)) {
                clean[i] = false;
            }
        };
        for f in &self.finders {
            f.find_iter(joined.as_bytes()).for_each(&mut dirty);
        }
        for hit in self.anchors.scan(joined) {
            dirty(hit.at);
        }
    }

    /// A row of a table: the cells under a secret heading are hidden.
    fn walk_row(&self, cells: Vec<Value>, columns: &[usize], count: &mut usize) -> Value {
        let marks = self.array_marks(&cells, Secret::No);
        Value::Array(
            cells
                .into_iter()
                .zip(marks)
                .enumerate()
                .map(|(c, (cell, m))| {
                    let m = if columns.contains(&c) { Secret::Yes } else { m };
                    self.walk(cell, m, count)
                })
                .collect(),
        )
    }

    /// Could a neighbour rule mark an element of `items` (a PEM key's
    /// BEGIN line, or an id that arms a secret beside it)?
    fn needs_marks(&self, items: &[Value]) -> bool {
        items.iter().any(|v| {
            v.as_str()
                .is_some_and(|s| s.trim_start().starts_with("-----BEGIN "))
        }) || self.holds_an_id(items.iter())
    }

    /// For each element of an array: a PEM private key split over its
    /// strings, a secret key beside its id, a column under a secret heading.
    fn array_marks(&self, items: &[Value], secret: Secret) -> Vec<Secret> {
        let inherit = if secret == Secret::TerraformPassword {
            Secret::TerraformPassword
        } else {
            Secret::No
        };
        let mut marks = vec![inherit; items.len()];
        // A PEM block as one string per line: BEGIN .. END, or to the end.
        let mut in_pem = false;
        for (i, item) in items.iter().enumerate() {
            let Some(s) = item.as_str() else {
                in_pem = false;
                continue;
            };
            // A block split into lines has its BEGIN line as an element of its own.
            let s = s.trim_start();
            if s.starts_with("-----BEGIN ") && s.contains("PRIVATE KEY") && !s.contains("-----END ")
            {
                in_pem = true;
                marks[i] = Secret::Yes;
            } else if in_pem {
                marks[i] = Secret::Yes;
                if s.contains("-----END ") {
                    in_pem = false;
                }
            }
        }
        if self.holds_an_id(items.iter()) {
            for (i, item) in items.iter().enumerate() {
                if item
                    .as_str()
                    .is_some_and(|s| self.is_secret_beside_an_id(s))
                {
                    marks[i] = Secret::Yes;
                }
            }
        }
        marks
    }

    /// The columns of a table (an array of rows, the first of headings)
    /// whose heading is secret-named; `None` when it is no such table.
    fn secret_columns(items: &[Value]) -> Option<Vec<usize>> {
        let Some(Value::Array(head)) = items.first() else {
            return None;
        };
        let columns: Vec<usize> = head
            .iter()
            .enumerate()
            .filter(|(_, h)| h.as_str().is_some_and(is_secret_name))
            .map(|(c, _)| c)
            .collect();
        (!columns.is_empty() && items.len() > 1 && items[1..].iter().all(Value::is_array))
            .then_some(columns)
    }

    /// Is one of `values` an AWS access key id or a Twilio account SID?
    fn holds_an_id<'v>(&self, mut values: impl Iterator<Item = &'v Value>) -> bool {
        values.any(|v| {
            v.as_str().is_some_and(|s| {
                let s = s.trim();
                // An access key id is 20 characters, an account SID 34.
                (s.len() == 20 && s.starts_with('A') && self.aws_id.is_match(s))
                    || (s.len() == 34
                        && s.starts_with("AC")
                        && self.shapes[shapes::TWILIO_SID].0.is_match(s))
            })
        })
    }

    /// A string that is, whole, an AWS secret key or a Twilio auth token.
    fn is_secret_beside_an_id(&self, s: &str) -> bool {
        let s = s.trim();
        (s.len() == 40 && self.aws_secret.is_match(s) && shapes::looks_like_aws_secret(s))
            || (s.len() == 32
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    }
}

/// What the walk knows about a value from where it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Secret {
    No,
    /// Under a secret-named key, or otherwise known secret: hidden whole.
    Yes,
    /// Under a key whose values are often ordinary text: hidden when generated.
    IfGenerated,
    /// Inside a Terraform `random_password` resource: its results are secret.
    TerraformPassword,
}

/// The fields of a Terraform `random_password` resource that hold the password.
fn is_tf_secret(key: &str) -> bool {
    matches!(key, "result" | "bcrypt_hash")
}

/// Does a `name`, `key` or `header` field of `map` name a secret (so its
/// `value` field holds one)?
fn names_a_secret(map: &Map<String, Value>) -> bool {
    map.iter().any(|(k, v)| {
        ["name", "key", "header"]
            .iter()
            .any(|n| k.eq_ignore_ascii_case(n))
            && v.as_str().is_some_and(is_secret_name)
    }) && map.keys().any(|k| k.eq_ignore_ascii_case("value"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Built once: a debug build compiles the patterns slowly.
    fn plain() -> &'static Redactor {
        static PLAIN: std::sync::OnceLock<Redactor> = std::sync::OnceLock::new();
        PLAIN.get_or_init(|| Redactor::new(Vec::new()))
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
        }
        for p in [
            shapes::KEY_VALUE,
            shapes::AWS_SECRET,
            shapes::TWILIO_SECRET,
            shapes::NAMING_FIELD,
        ] {
            Regex::new(p).unwrap();
        }
    }

    /// The one-regex hint the `key: value` rule was armed by before the
    /// anchors: every text it matches must still arm the rule.
    const OLD_KEY_VALUE_HINT: &str = r#"(?i:token|secret|pass|pwd|apikey|key|credential|auth|cookie|session|dsn|pat|bearer|signing|private|value)[A-Za-z0-9_.\-]*\\?["']?[ \t]*[:=]"#;

    #[test]
    fn key_value_anchors_arm_wherever_the_old_hint_matched() {
        let old = Regex::new(OLD_KEY_VALUE_HINT).unwrap();
        let anchors = Anchors::new();
        for text in [
            "password=x",
            "PassWord = x",
            "DB_PWD: x",
            "my_api_KEY_v2\"  : x",
            "{\\\"Token\\\": 1}",
            "'signing-key':x",
            "Credentials.json=1",
            "AUTHORIZATION:\tBearer x",
            "sessionid=1; other",
            "a value: b",
            "x-dsn=1",
            "the PAT=1",
        ] {
            assert!(old.is_match(text), "{text}");
            let hits = anchors.scan(text);
            assert!(hits.iter().any(|h| h.rule == anchors::KEY_VALUE), "{text}");
        }
    }

    /// One text per shape, in the order of `shapes::SHAPES`.
    const SAMPLES: &[&str] = &[
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----",
        "AKIAIOSFODNN7EXAMPLE",
        "AC0123456789abcdef0123456789abcdef",
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
        "jdbc:oracle:thin:scott/tiger@//db.example.com:1521/ORCLPDB1",
        "key-0123456789abcdef0123456789abcdef",
        "dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "shpat_0123456789abcdef0123456789abcdef",
        "HRKU-AAbcdefghij0123456789_ABCDEFGHIJ-klmnopqrstuv",
        "dapi0123456789abcdef0123456789abcdef",
        "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig=AbCdEf0123456789%2BxYz%3D",
        "https://b.s3.amazonaws.com/k?X-Amz-Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVB",
        "deploy --api-token t0k3n-value",
        "mysql -u root -pS3cretPass mydb",
        "curl -u dana:hunter2 https://x.y",
        "machine api.example.com login dana password hunter2",
        "<password>hunter2</password>",
        "xapp-1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef",
        "AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE",
        "glsa_a1B2c3D4e5F6g7H8i9J0a1B2c3D4e5F6_0a1b2c3d",
        "dckr_pat_a1B2c3D4e5F6g7H8i9J0a1B2c3D",
        "hvs.CAESIJ1rZ2dqNDR2b0xIbWlqd0tXcFR6aG5QWGpLTDFt",
        "dp.pt.a1B2c3D4e5F6g7H8i9J0a1B2c3D4e5F6g7H8i9J0a1B",
        "PMAK-0123456789abcdef01234567-0123456789abcdef0123456789abcdef01",
        "NRAK-A1B2C3D4E5F6G7H8I9J0K1L2M3N",
        "pscale_pw_a1B2c3D4e5F6g7H8i9J0a1B2c3D4e5F6g7H8i9J0a1B",
        "sntryu_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "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",
    ];

    #[test]
    fn every_shape_is_found_through_its_anchor() {
        assert_eq!(SAMPLES.len(), shapes::SHAPES.len());
        let anchors = Anchors::new();
        for (i, (shape, sample)) in shapes::SHAPES.iter().zip(SAMPLES).enumerate() {
            assert!(
                Regex::new(shape.pattern).unwrap().is_match(sample),
                "{i}: {sample}"
            );
            // An anchor that misses where its shape matches would hide a secret.
            for (j, (other, text)) in shapes::SHAPES.iter().zip(SAMPLES).enumerate() {
                if Regex::new(other.pattern).unwrap().is_match(text) {
                    assert!(
                        anchors.scan(text).iter().any(|h| h.rule == j),
                        "{j}: {text}"
                    );
                }
            }
            let (out, n) = counted(sample);
            if shape.check == ShapeCheck::Arm {
                // An account SID alone is an id, not a secret.
                assert_eq!((out.as_str(), n), (*sample, 0), "{i}");
            } else {
                assert!(n >= 1 && out.contains(REDACTED), "{i}: {sample} -> {out}");
            }
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

    /// What a `.git/config` read another way (`git remote -v`, `git config
    /// -l`) would show: a remote whose URL carries a token.
    #[test]
    fn a_git_remote_url_loses_its_token() {
        for (text, want) in [
            (
                "origin\thttps://dana:ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2@github.com/dana/app.git (fetch)",
                "origin\thttps://dana:[REDACTED]@github.com/dana/app.git (fetch)",
            ),
            (
                "remote.origin.url=https://oauth2:glpat-abcdefghij0123456789@gitlab.com/g/app.git",
                "remote.origin.url=https://oauth2:[REDACTED]@gitlab.com/g/app.git",
            ),
            (
                "\turl = https://ci:plainpw42@git.example.com/app.git",
                "\turl = https://ci:[REDACTED]@git.example.com/app.git",
            ),
            // A token as the user name alone, by its shape.
            (
                "url = https://ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2@github.com/dana/app.git",
                "url = https://[REDACTED]@github.com/dana/app.git",
            ),
        ] {
            assert_eq!(counted(text), (want.to_string(), 1), "{text}");
        }
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
            "ShapeCheck a campaign file for missing fields.",
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

    // Class tests: each rule with what it must hide and what it must keep.

    #[test]
    fn class1_rules_see_the_original_text_and_headers_keep_their_whole_value() {
        let tok = "abcDEF0123456789ghiJKL";
        for (text, want) in [
            (
                format!("sent Authorization: Bearer {tok} upstream"),
                "sent Authorization: [REDACTED]".to_string(),
            ),
            (
                format!("curl -H 'Authorization: Bearer {tok}' https://x.y"),
                "curl -H 'Authorization: [REDACTED]' https://x.y".to_string(),
            ),
            (
                format!("curl -H \"Authorization: Bearer {tok}\" -H 'Accept: a/b'"),
                "curl -H \"Authorization: [REDACTED]\" -H 'Accept: a/b'".to_string(),
            ),
            (
                format!("Authorization: Bearer {tok}"),
                "Authorization: [REDACTED]".to_string(),
            ),
            (
                format!("auth=Bearer {tok} next"),
                "auth=[REDACTED] next".to_string(),
            ),
            (
                // A key rule's value overlapping a shape is one replacement.
                format!("token: ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2 and {tok}"),
                "token: [REDACTED]".to_string(),
            ),
        ] {
            let (out, n) = counted(&text);
            assert_eq!(out, want, "{text}");
            assert_eq!(n, 1, "{text}");
            assert!(!out.contains(tok));
        }
        // Negatives: the words alone, and a header with nothing secret.
        for text in [
            "Authorization is required for this call",
            "sent Accept: application/json upstream",
            "the bearer of the letter",
            "Authorization: none",
        ] {
            assert_eq!(counted(text), (text.to_string(), 0), "{text}");
        }
    }

    #[test]
    fn class3_secrets_split_over_strings_of_one_array_or_object() {
        let v = json!({"key_lines": [
            "-----BEGIN RSA PRIVATE KEY-----",
            "MIIEowIBAAKCAQEAq7",
            "ZZZZ",
            "-----END RSA PRIVATE KEY-----",
            "after the key"
        ]});
        let (out, n) = plain().redact(v);
        assert_eq!(
            out,
            json!({"key_lines": [REDACTED, REDACTED, REDACTED, REDACTED, "after the key"]})
        );
        assert_eq!(n, 4);
        // CSV rows as cells: the secret key beside its id, and by its heading.
        let v = json!([
            ["User name", "Access key ID", "Secret access key"],
            [
                "dana",
                "AKIAIOSFODNN7EXAMPLE",
                "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
            ]
        ]);
        let (out, _) = plain().redact(v);
        assert_eq!(
            out,
            json!([
                ["User name", "Access key ID", "Secret access key"],
                ["dana", REDACTED, REDACTED]
            ])
        );
        let v =
            json!({"a": "AKIAIOSFODNN7EXAMPLE", "b": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"});
        assert_eq!(plain().redact(v).0, json!({"a": REDACTED, "b": REDACTED}));
        // Negatives: a public key split over lines, a SHA-1 beside nothing,
        // a table whose headings name nothing secret.
        let v = json!({
            "pub": ["-----BEGIN PUBLIC KEY-----", "MIIBIjAN", "-----END PUBLIC KEY-----"],
            "shas": ["da39a3ee5e6b4b0d3255bfef95601890afd80709", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
            "table": [["name", "sort key"], ["dana", "k-1"]]
        });
        assert_eq!(plain().redact(v.clone()), (v, 0));
    }

    #[test]
    fn class4_a_value_named_by_its_sibling() {
        let v = json!({"env": [
            {"name": "DB_PASSWORD", "value": "hunter2hunter2"},
            {"name": "LOG_LEVEL", "value": "debug"},
        ], "headers": [
            {"name": "Authorization", "value": "Bearer abc"},
            {"name": "Accept", "value": "text/html"},
        ]});
        let (out, n) = plain().redact(v);
        assert_eq!(
            out,
            json!({"env": [
                {"name": "DB_PASSWORD", "value": REDACTED},
                {"name": "LOG_LEVEL", "value": "debug"},
            ], "headers": [
                {"name": "Authorization", "value": REDACTED},
                {"name": "Accept", "value": "text/html"},
            ]})
        );
        assert_eq!(n, 2);
        for (text, want) in [
            (
                "env:\n- name: DB_PASSWORD\n  value: hunter2hunter2\n- name: LOG_LEVEL\n  value: debug\n",
                "env:\n- name: DB_PASSWORD\n  value: [REDACTED]\n- name: LOG_LEVEL\n  value: debug\n",
            ),
            (
                r#"[{"name": "API_TOKEN", "value": "t0k"}, {"name": "HOST", "value": "db"}]"#,
                r#"[{"name": "API_TOKEN", "value": "[REDACTED]"}, {"name": "HOST", "value": "db"}]"#,
            ),
            (
                r#"<add key="ClearTextPassword" value="hunter2" /><add key="Source" value="https://x.y" />"#,
                r#"<add key="ClearTextPassword" value="[REDACTED]" /><add key="Source" value="https://x.y" />"#,
            ),
        ] {
            assert_eq!(scrub(text), want, "{text}");
        }
    }

    #[test]
    fn class5_key_forms_beyond_key_colon_value() {
        for (text, want) in [
            (
                "machine api.example.com login dana password hunter2",
                "machine api.example.com login dana password [REDACTED]",
            ),
            (
                "machine h\n  login dana\n  password hunter2\n",
                "machine h\n  login dana\n  password [REDACTED]\n",
            ),
            (
                "tool --password hunter2 --verbose",
                "tool --password [REDACTED] --verbose",
            ),
            ("tool --api-key 'k 1' -v", "tool --api-key [REDACTED] -v"),
            (
                "curl -u dana:hunter2 https://x.y",
                "curl -u dana:[REDACTED] https://x.y",
            ),
            (
                "{ :password => \"hunter2\", :user => \"dana\" }",
                "{ :password => \"[REDACTED]\", :user => \"dana\" }",
            ),
            (
                "<server><id>c</id><password>hunter2</password></server>",
                "<server><id>c</id><password>[REDACTED]</password></server>",
            ),
            (
                r#"{"API Key": "k-123456", "Display Name": "x"}"#,
                r#"{"API Key": "[REDACTED]", "Display Name": "x"}"#,
            ),
            (
                r#"{"body": "{\"password\": \"hunter2\", \"user\": \"dana\"}"}"#,
                r#"{"body": "{\"password\": \"[REDACTED]\", \"user\": \"dana\"}"}"#,
            ),
        ] {
            assert_eq!(scrub(text), want, "{text}");
        }
        // Negatives: prose, flags with ordinary names or no value, `-p`
        // (too often a port or a path to guess at), other elements.
        for text in [
            "the password field is required",
            "tool --verbose --output out.json",
            "tool --password --verbose",
            "tool -p 8080",
            "<name>dana</name><password></password>",
            "curl -X GET https://x.y",
            "password reset failed",
        ] {
            assert_eq!(counted(text), (text.to_string(), 0), "{text}");
        }
    }

    #[test]
    fn class8_service_shapes() {
        let kube = format!(
            "users:\n- user:\n    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=\n    client-key-data: {}\n",
            "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVB"
        );
        let out = scrub(&kube);
        assert!(out.contains("client-key-data: [REDACTED]"), "{out}");
        assert!(
            out.contains("client-certificate-data: LS0tLS1CRUdJTiBDRVJU"),
            "{out}"
        );
        for (text, want) in [
            ("Cookie: sid=abc123; csrftoken=Zx9; theme=dark", "Cookie: [REDACTED]"),
            ("Set-Cookie: sid=abc123; Path=/; HttpOnly", "Set-Cookie: [REDACTED]"),
            (
                "postgres://admin:p@ss@word@db.local:5432/app",
                "postgres://admin:[REDACTED]@db.local:5432/app",
            ),
            (
                "sid AC0123456789abcdef0123456789abcdef token 0123456789abcdef0123456789abcdef",
                "sid AC0123456789abcdef0123456789abcdef token [REDACTED]",
            ),
            ("mg key-0123456789abcdef0123456789abcdef", "mg [REDACTED]"),
            ("do dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "do [REDACTED]"),
            ("s shpss_0123456789abcdef0123456789ABCDEF", "s [REDACTED]"),
            ("h HRKU-AAbcdefghij0123456789_ABCDEFGHIJ-klmnopqrstuv", "h [REDACTED]"),
            ("db dapi0123456789abcdef0123456789abcdef-2", "db [REDACTED]"),
            (
                "https://a.blob.core.windows.net/c?sv=2022-11-02&sig=AbCdEf0123456789%2BxYz%3D&se=x",
                "https://a.blob.core.windows.net/c?sv=2022-11-02&sig=[REDACTED]&se=x",
            ),
            (
                "https://b.s3.amazonaws.com/k?X-Amz-Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "https://b.s3.amazonaws.com/k?X-Amz-Signature=[REDACTED]",
            ),
            ("DB_PWD=hunter2\nHOST=db", "DB_PWD=[REDACTED]\nHOST=db"),
            ("t ghp_a1B2c3D4e5\u{200b}a1B2c3D4e5a1B2c3D4e5a1B2 x", "t [REDACTED] x"),
        ] {
            assert_eq!(scrub(text), want, "{text}");
        }
        let tf = json!({"resources": [{"type": "random_password", "name": "db",
            "instances": [{"attributes": {"result": "Zq9!x", "bcrypt_hash": "$2a$10$abc", "length": 16}}]},
            {"type": "random_pet", "instances": [{"attributes": {"result": "happy-cat"}}]}]});
        let (out, n) = plain().redact(tf);
        assert_eq!(
            out["resources"][0]["instances"][0]["attributes"],
            json!({"result": REDACTED, "bcrypt_hash": REDACTED, "length": 16})
        );
        assert_eq!(
            out["resources"][1]["instances"][0]["attributes"]["result"],
            "happy-cat"
        );
        assert_eq!(n, 2);
        // Negatives: 32 hex digits with no account SID near, a SAS URL
        // without `sig`, a certificate in base64, a `key-` word.
        for text in [
            "md5 0123456789abcdef0123456789abcdef",
            "https://a.blob.core.windows.net/c?sv=2022-11-02&se=x",
            "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=",
            "the key-value store",
            "postgres://db.local:5432/app",
            "user@example.com:/srv/repo",
        ] {
            assert_eq!(counted(text), (text.to_string(), 0), "{text}");
        }
    }

    #[test]
    fn service_prefixes_beyond_the_first_list() {
        // Positives in a sentence; the text around each stays.
        let first = SAMPLES.iter().position(|s| s.starts_with("xapp-")).unwrap();
        for (i, sample) in SAMPLES.iter().enumerate().skip(first) {
            let text = format!("got {sample} back");
            assert_eq!(scrub(&text), "got [REDACTED] back", "{i}");
        }
        // Negatives: the prefixes with too little after them, or words.
        for text in [
            "xapp-config loaded",
            "AGE-SECRET-KEY-1QPZRY9X8",
            "glc_short glsa_x",
            "dckr_pat_short",
            "hvs.settings_for_the_cluster_nodes",
            "dp.pt.short",
            "PMAK-0123",
            "NRAK-ABC",
            "pscale_pw_short",
            "sntryu_short",
            "gsk_a1B2",
        ] {
            assert_eq!(counted(text), (text.to_string(), 0), "{text}");
        }
    }

    #[test]
    fn an_array_of_strings_is_redacted_as_each_string_alone() {
        // The array path scans its strings joined; the result must be the
        // same as each string's own, secrets at the edges included.
        // (Not the private key's BEGIN line, nor an id alone: those make
        // the array take the neighbour path, tested elsewhere.)
        let mut texts: Vec<String> = SAMPLES[3..].iter().map(|s| s.to_string()).collect();
        texts.extend(
            [
                "plain log line with https://example.com/a?b=c in it",
                "password=",
                "hunter2 password=x",
                "--token",
                " abc",
                "short",
                "t ghp_a1B2c3D4e5\u{200b}a1B2c3D4e5a1B2c3D4e5a1B2 x",
                "key AKIAIOSFODNN7EXAMPLE here",
                "x -----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY----- y",
                "a-secret-from-the-environment in the middle",
            ]
            .map(String::from),
        );
        let r = Redactor::new([(
            "REACHWEAVER_SMTP_PASS".to_string(),
            "a-secret-from-the-environment".to_string(),
        )]);
        let mut want_count = 0;
        let want: Vec<String> = texts
            .iter()
            .map(|t| r.redact_text(t, &mut want_count).into_owned())
            .collect();
        let items: Vec<Value> = texts.iter().map(|t| json!(t)).collect();
        assert!(!r.needs_marks(&items));
        let (out, n) = r.redact(Value::Array(items));
        assert_eq!(out, json!(want));
        assert_eq!(n, want_count);
        assert!(n >= SAMPLES.len() - 3);
    }

    #[test]
    fn connection_strings_and_registry_auth() {
        for (text, want) in [
            (
                "jdbc:mysql://db:3306/app?user=dana&password=hunter2&ssl=true",
                "jdbc:mysql://db:3306/app?user=dana&password=[REDACTED]&ssl=true",
            ),
            (
                "jdbc:sqlserver://db;user=dana;password=hunter2;encrypt=true",
                "jdbc:sqlserver://db;user=dana;password=[REDACTED];encrypt=true",
            ),
            (
                "Server=db;Database=app;User Id=dana;Password=hunter2;",
                "Server=db;Database=app;User Id=dana;Password=[REDACTED];",
            ),
            (
                "amqps://dana:hunter2@mq.local:5671/vhost",
                "amqps://dana:[REDACTED]@mq.local:5671/vhost",
            ),
        ] {
            assert_eq!(scrub(text), want, "{text}");
        }
        let v = json!({"auths": {"https://index.docker.io/v1/": {"auth": "ZGFuYTpodW50ZXIy"}}});
        assert_eq!(
            plain().redact(v).0,
            json!({"auths": {"https://index.docker.io/v1/": {"auth": REDACTED}}})
        );
        // `Pwd=` alone is not a secret name (the shell's `PWD` is a folder).
        let text = "Server=db;Uid=dana;Pwd=hunter2;";
        assert_eq!(counted(text), (text.to_string(), 0));
    }

    #[test]
    fn a_twilio_api_key_pair_loses_its_secret() {
        let sid = "SK0123456789abcdef0123456789abcdef";
        let secret = "AbCdEf0123456789AbCdEf0123456789";
        assert_eq!(secret.len(), 32);
        let v = json!({"basic": format!("{sid}:{secret}")});
        assert_eq!(plain().redact(v), (json!({"basic": REDACTED}), 1));
        for (text, want) in [
            (format!("{sid}:{secret}"), REDACTED.to_string()),
            (
                format!("basic auth {sid}:{secret} ok"),
                format!("basic auth {REDACTED} ok"),
            ),
            (
                format!("\"basic\": \"{sid}:{secret}\""),
                format!("\"basic\": \"{REDACTED}\""),
            ),
            // A longer secret goes whole, never a tail of it.
            (format!("{sid}:{secret}Xy9"), REDACTED.to_string()),
        ] {
            assert_eq!(counted(&text), (want, 1), "{text}");
        }
        // 31 characters is no API key secret: the SID goes, as ever, alone.
        let short = &secret[..31];
        assert_eq!(
            scrub(&format!("{sid}:{short}")),
            format!("{REDACTED}:{short}")
        );
        // Sent as HTTP basic credentials, encoded: the header rule.
        assert_eq!(
            scrub("Authorization: Basic U0swMTIzNDU2Nzg5YWJjZGVmOkFiQ2RFZg=="),
            "Authorization: [REDACTED]"
        );
    }

    #[test]
    fn an_oracle_thin_connect_string_loses_its_password_only() {
        for (text, want) in [
            (
                "jdbc:oracle:thin:scott/tiger@//db.example.com:1521/ORCLPDB1",
                "jdbc:oracle:thin:scott/[REDACTED]@//db.example.com:1521/ORCLPDB1",
            ),
            (
                "url=jdbc:oracle:thin:scott/tiger@db.example.com:1521:ORCL",
                "url=jdbc:oracle:thin:scott/[REDACTED]@db.example.com:1521:ORCL",
            ),
            (
                r#"{"url": "jdbc:oracle:thin:app_user/Pw-2024!@db:1521/SVC"}"#,
                r#"{"url": "jdbc:oracle:thin:app_user/[REDACTED]@db:1521/SVC"}"#,
            ),
            (
                "jdbc:oracle:oci:scott/tiger@ORCL",
                "jdbc:oracle:oci:scott/[REDACTED]@ORCL",
            ),
            // A password holding `@`: up to the last one before the host.
            (
                "jdbc:oracle:thin:scott/p@ss@db:1521:ORCL",
                "jdbc:oracle:thin:scott/[REDACTED]@db:1521:ORCL",
            ),
            (
                r#"jdbc:oracle:thin:scott/"pa ss"@db:1521:ORCL"#,
                "jdbc:oracle:thin:scott/[REDACTED]@db:1521:ORCL",
            ),
            // One character is a password too.
            (
                "jdbc:oracle:thin:scott/x@db:1521:ORCL",
                "jdbc:oracle:thin:scott/[REDACTED]@db:1521:ORCL",
            ),
        ] {
            assert_eq!(counted(text), (want.to_string(), 1), "{text}");
        }
        // No password: none given, an empty one, a wallet alias, no host.
        for text in [
            "jdbc:oracle:thin:@db.example.com:1521:ORCL",
            "jdbc:oracle:thin:@//db.example.com:1521/SVC",
            "jdbc:oracle:thin:scott/@db:1521:ORCL",
            "jdbc:oracle:thin:/@wallet_alias",
            "jdbc:oracle:thin:scott/tiger",
        ] {
            assert_eq!(counted(text), (text.to_string(), 0), "{text}");
        }
    }

    #[test]
    fn a_mysql_password_attached_to_p_is_hidden() {
        for (text, want) in [
            (
                "mysql -u root -pS3cretPass mydb",
                "mysql -u root -p[REDACTED] mydb",
            ),
            (
                "$ mysqldump -uroot -pS3cret --all-databases > all.sql",
                "$ mysqldump -uroot -p[REDACTED] --all-databases > all.sql",
            ),
            (
                "/usr/bin/mysqladmin -h db -uroot -p123456 status",
                "/usr/bin/mysqladmin -h db -uroot -p[REDACTED] status",
            ),
            (
                "docker exec db mariadb -uroot -p'pa ss' -e 'show databases'",
                "docker exec db mariadb -uroot -p[REDACTED] -e 'show databases'",
            ),
            (
                "mariadb-dump\t-pS3cret app",
                "mariadb-dump\t-p[REDACTED] app",
            ),
            // The shortest password, one character.
            ("mysql -u root -px", "mysql -u root -p[REDACTED]"),
            (
                "mysql -u root --password=S3cretPass mydb",
                "mysql -u root --password=[REDACTED] mydb",
            ),
        ] {
            assert_eq!(counted(text), (want.to_string(), 1), "{text}");
        }
        // `-p` alone asks for the password (the next word is a database);
        // `-P` is the port; other commands' `-p`; another command after a
        // separator; a word that merely starts like a client's name.
        for text in [
            "mysql -u root -p mydb",
            "mysql -h db -P3306 -u root mydb",
            "ssh -p2222 host",
            "mkdir -p /tmp/build",
            "mysql -u root mydb; ssh -p2222 host",
            "mysql -u root mydb | grep -pattern",
            "mysql -u root mydb && mkdir -p out",
            "mysqld -pS3cret",
            "mysqlfoo -pS3cret",
            "the mysql-p3 notes",
            "MySQL -pS3cret",
        ] {
            assert_eq!(counted(text), (text.to_string(), 0), "{text}");
        }
    }

    #[test]
    fn a_dotted_service_name_is_no_discord_token() {
        // A gRPC trace span: service, version and method, each part as long
        // as a token's and mixing cases and digits as a token's do.
        for text in [
            "span OrderFulfillmentServiceV2.grpcV1.CreateShipmentLabelRequestHandler done",
            "NotificationServiceClient.v1beta.SendTransactionalEmailHandler",
        ] {
            assert_eq!(counted(text), (text.to_string(), 0), "{text}");
        }
        // The first part of a real one is a user id, 17 to 20 digits, in base64.
        let (stamp, sig) = ("Cl2FMQ", "ZnCjm1XVW7vRze4b7Cq4se7kKWs");
        for id in [
            "MTk4NjIyNDgzNDcxOTI1MjQ4",
            "ODAzNTExMTAyMjQ2Nzg5MTI",
            "MTIzNDU2Nzg5MDEyMzQ1Njc4OTA",
        ] {
            let t = format!("{id}.{stamp}.{sig}");
            assert_eq!(
                counted(&format!("tok {t} x")),
                (format!("tok {REDACTED} x"), 1)
            );
        }
    }

    #[test]
    fn class7_passed_values_in_other_number_notations() {
        let passed = vec!["REACHWEAVER_PIN_TOKEN".to_string()];
        let r = Redactor::with_passed(
            [("REACHWEAVER_PIN_TOKEN".to_string(), "48213377".to_string())],
            &passed,
        );
        let v: Value =
            serde_json::from_str(r#"{"a": 4.8213377e7, "b": 48213377.0, "c": 4.8213378e7}"#)
                .unwrap();
        let (out, n) = r.redact(v);
        assert_eq!(out["a"], REDACTED);
        assert_eq!(out["b"], REDACTED);
        assert_ne!(out["c"], REDACTED);
        assert_eq!(n, 2);
        // The new secret names are looked for in results too.
        let r = Redactor::new(
            [
                ("REACHWEAVER_SMTP_AUTH", "smtp-auth-value"),
                ("REACHWEAVER_DB_PWD", "db-pwd-value"),
                ("REACHWEAVER_API_KEYS", "k1-value,k2-value"),
                ("REACHWEAVER_SORT_KEYS", "name,date,size"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        assert_eq!(
            r.redact_str("smtp-auth-value db-pwd-value k1-value,k2-value name,date,size"),
            "[REDACTED] [REDACTED] [REDACTED] name,date,size"
        );
    }

    #[test]
    fn false_positives_stay() {
        let v = json!({
            "session": "Morning keynote: the year ahead",
            "calendar": {"session": {"title": "Lunch", "room": "B2"}},
            "auth": "oauth2",
            "auth_method": "basic",
            "env_has_secret": "no",
            "password_required": true,
            "token": null,
            "secret": false,
            "api_key": "none",
            "span": "MTk4NjIyNDgzNDcxOTI1MjQ4.handler.process_incoming_request_batch",
            "id": "550e8400-e29b-41d4-a716-446655440000",
            "image": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
            "token_count": 1234,
            "date": "2026-12-01T23:45:00Z",
            "version": "1.8.2",
        });
        assert_eq!(plain().redact(v.clone()), (v, 0));
        for text in [
            "auth: none",
            "session: Morning keynote",
            "required: yes\nauth: basic\ntoken: disabled",
            "trace span MTk4NjIyNDgzNDcxOTI1MjQ4.handler.process_incoming_request_batch done",
        ] {
            assert_eq!(counted(text), (text.to_string(), 0), "{text}");
        }
        // A session that is a generated value still goes.
        let v = json!({"session": "s%3Aab12CD34ef56GH78"});
        assert_eq!(plain().redact(v).0, json!({"session": REDACTED}));
        assert_eq!(
            scrub("session: s%3Aab12CD34ef56GH78"),
            "session: [REDACTED]"
        );
    }

    #[test]
    fn catalog_text_passes_text_rules_only() {
        let v = json!({"commands": [{"name": "notify",
            "summary": "Posts to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "arguments": [{"name": "token", "type": "string", "default": "postgres://u:hunter2@db/x"}]}]});
        let (out, n) = plain().redact_strings(v);
        assert_eq!(n, 2);
        assert_eq!(
            out["commands"][0]["summary"],
            "Posts to https://hooks.slack.com/services/[REDACTED]"
        );
        assert_eq!(
            out["commands"][0]["arguments"][0]["default"],
            "postgres://u:[REDACTED]@db/x"
        );
        // An argument called `token` keeps its name and type.
        assert_eq!(out["commands"][0]["arguments"][0]["name"], "token");
        assert_eq!(out["commands"][0]["arguments"][0]["type"], "string");
    }

    #[test]
    fn redact_and_cut_cuts_after_redaction() {
        let r = plain();
        let text = format!("{} ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2", "x".repeat(20));
        assert_eq!(
            r.redact_and_cut(&text, 25),
            format!("{} [RED…", "x".repeat(20))
        );
        assert_eq!(r.redact_and_cut("abc", 3), "abc");
        assert_eq!(r.redact_and_cut("abcd", 3), "abc…");
    }

    #[test]
    fn class6_names_ending_in_key_and_auth_words_in_text_and_documents() {
        for (text, want) in [
            (
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=azKEY0123456789abc==;EndpointSuffix=core.windows.net",
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=[REDACTED];EndpointSuffix=core.windows.net",
            ),
            ("APP_KEY=base64:Zm9vYmFyYmF6\nAPP_NAME=shop", "APP_KEY=[REDACTED]\nAPP_NAME=shop"),
            ("SECRET_KEY_BASE: 9f8e7d6c5b4a", "SECRET_KEY_BASE: [REDACTED]"),
            ("REACHWEAVER_SMTP_AUTH=plain:dana:pw1", "REACHWEAVER_SMTP_AUTH=[REDACTED]"),
        ] {
            assert_eq!(scrub(text), want, "{text}");
        }
        let v = json!({"AccountKey": "azKEY0123", "APP_KEY": "k", "sort_key": "name", "public_key": "ssh-ed25519 AAAA"});
        assert_eq!(
            plain().redact(v).0,
            json!({"AccountKey": REDACTED, "APP_KEY": REDACTED, "sort_key": "name", "public_key": "ssh-ed25519 AAAA"})
        );
        // Negatives in text: ordinary keys ending in key.
        for text in [
            "sort_key=name",
            "public_key: ssh-ed25519 AAAA",
            "primaryKey = id",
        ] {
            assert_eq!(counted(text), (text.to_string(), 0), "{text}");
        }
    }

    #[test]
    fn a_weak_key_hides_only_a_generated_value_of_eight_bytes_or_more() {
        assert_eq!(MIN_SHAPE_LEN, 8);
        for (value, hidden) in [
            ("aB3dE6gH", true),
            // Seven bytes: too short to look generated.
            ("aB3dE6g", false),
            ("aB3dE6gH9", true),
            // White space: words, not a generated value.
            ("aB3d E6gH", false),
            // Eight bytes and more, but no digit and no inner capital.
            ("abcdefghij", false),
            ("Morning keynote", false),
        ] {
            let want = if hidden {
                json!(REDACTED)
            } else {
                json!(value)
            };
            assert_eq!(
                plain().redact_value(json!({"session": value})),
                json!({"session": want}),
                "{value}"
            );
        }
    }

    #[test]
    fn the_rules_read_no_text_shorter_than_eight_bytes() {
        // A four-character passed secret lets shorter texts in, for that
        // value only: the rules still start at eight bytes.
        let r = Redactor::with_passed(
            [("PIN_TOKEN".to_string(), "4821".to_string())],
            &["PIN_TOKEN".to_string()],
        );
        assert_eq!(r.min_len, 4);
        assert_eq!("pass=ab".len(), MIN_SHAPE_LEN - 1);
        let mut n = 0;
        assert_eq!(r.redact_text("pass=ab", &mut n), "pass=ab");
        assert_eq!(n, 0);
        assert_eq!(
            r.redact_text("pass=abc", &mut n),
            format!("pass={REDACTED}")
        );
        assert_eq!(n, 1);
        assert_eq!(r.redact_text("pin 4821", &mut n), format!("pin {REDACTED}"));
        assert_eq!(n, 2);
        // The plain redactor returns a seven-byte text before any rule.
        assert_eq!(counted("pass=ab"), ("pass=ab".to_string(), 0));
    }

    #[test]
    fn an_xml_secret_element_is_hidden_up_to_4096_bytes() {
        for (len, hidden) in [(4095, true), (4096, true), (4097, false)] {
            let secret = "s".repeat(len);
            let text = format!("<password>{secret}</password>");
            let want = if hidden {
                format!("<password>{REDACTED}</password>")
            } else {
                text.clone()
            };
            assert_eq!(scrub(&text), want, "{len} bytes");
        }
    }

    #[test]
    fn an_auth_scheme_takes_the_next_word_only_after_a_gap() {
        for (text, want) in [
            ("auth=Bearer abc123", "auth=[REDACTED]"),
            // No gap after the scheme, or a gap and then no word: the
            // scheme alone is the value, and a scheme is no secret.
            ("auth=Bearer;abc123", "auth=Bearer;abc123"),
            ("auth=Bearer ,abc123", "auth=Bearer ,abc123"),
            // `bot` is a scheme that some secrets also are: alone, it goes,
            // and the blank after it stays.
            ("auth=Bot;abc123", "auth=[REDACTED];abc123"),
            ("auth=Bot ,abc123", "auth=[REDACTED] ,abc123"),
            ("auth=Bot abc123", "auth=[REDACTED]"),
            ("auth=Bearer\tabc123 next", "auth=[REDACTED] next"),
        ] {
            assert_eq!(scrub(text), want, "{text}");
        }
    }

    #[test]
    fn a_value_named_by_a_field_just_inside_the_window() {
        // The naming window starts 256 bytes before the `value` key. Here
        // it starts inside a three-byte character, KELVIN SIGN, which the
        // case-insensitive `key` matches as `K`: moving the start forward
        // to the next character leaves `ey=password`, which names nothing.
        let value_at = 3 + "ey=password".len() + 2 + 240 + 1;
        assert_eq!(value_at - NAMING_WINDOW, 1);
        let text = format!("\u{212A}ey=password, {} value=hunter22", "x".repeat(240));
        assert_eq!(text.find("value"), Some(value_at));
        assert_eq!(scrub(&text), text);
        // One byte nearer and the whole field is read: the value is hidden.
        let text = format!("\u{212A}ey=password, {} value=hunter22", "x".repeat(239));
        assert_eq!(
            scrub(&text),
            format!("\u{212A}ey=password, {} value={REDACTED}", "x".repeat(239))
        );
        // The same with an ASCII key, wholly inside the window.
        let text = format!("key=password, {} value=hunter22", "x".repeat(240));
        assert_eq!(
            scrub(&text),
            format!("key=password, {} value={REDACTED}", "x".repeat(240))
        );
    }

    #[test]
    fn redact_value_returns_the_redacted_document() {
        assert_eq!(
            plain().redact_value(json!({"password": "hunter22", "user": "dana"})),
            json!({"password": REDACTED, "user": "dana"})
        );
    }

    #[test]
    fn a_table_hides_the_cells_under_a_secret_heading_but_not_the_heading() {
        let table = json!([
            ["name", "password"],
            ["db", "hunter22"],
            ["cache", "s3cret99"]
        ]);
        assert_eq!(
            plain().redact(table),
            (
                json!([["name", "password"], ["db", REDACTED], ["cache", REDACTED]]),
                2
            )
        );
        // Under a secret key everything goes, headings included.
        assert_eq!(
            plain().redact_value(json!({"password": [["name"], ["x"]]})),
            json!({"password": [[REDACTED], [REDACTED]]})
        );
        // A table inside a table without secret headings is still a table.
        assert_eq!(
            plain().redact_value(json!([["h"], [["password"], ["hunter22"]]])),
            json!([["h"], [["password"], [REDACTED]]])
        );
        // Not every row an array: no table, nothing hidden.
        let mixed = json!([["password"], "note", ["hunter22"]]);
        assert_eq!(plain().redact(mixed.clone()), (mixed, 0));
        // Headings alone: nothing under them.
        let head = json!([["password"]]);
        assert_eq!(plain().redact(head.clone()), (head, 0));
    }

    #[test]
    fn a_pem_block_split_over_strings_goes_only_when_it_is_a_private_key() {
        let cert = json!([
            "-----BEGIN CERTIFICATE-----",
            "MIIBszCCAVmgAwIBAgIU",
            "-----END CERTIFICATE-----",
            "after"
        ]);
        assert_eq!(plain().redact(cert.clone()), (cert, 0));
        assert_eq!(
            plain().redact_value(json!([
                "-----BEGIN PRIVATE KEY-----",
                "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
                "-----END PRIVATE KEY-----",
                "after"
            ])),
            json!([REDACTED, REDACTED, REDACTED, "after"])
        );
        // A whole key in one string opens no block: the next string stays.
        let (v, _) = plain().redact(json!(["-----BEGIN PRIVATE KEY----- MIIEvQIBADANBgkqhkiG9w0BAQEFAASC -----END PRIVATE KEY-----", "after"]));
        assert_eq!(v[1], json!("after"));
    }

    #[test]
    fn a_terraform_password_inside_an_array_with_marks_is_hidden() {
        // The certificate line makes the array's elements marked one by
        // one; the resource's `result` must still be hidden.
        let v = json!({"type": "random_password", "values": ["-----BEGIN CERTIFICATE-----", {"result": "hunter22"}]});
        assert_eq!(
            plain().redact_value(v),
            json!({"type": "random_password", "values": ["-----BEGIN CERTIFICATE-----", {"result": REDACTED}]})
        );
        // Outside such a resource, `result` is an ordinary key.
        let v = json!({"values": ["-----BEGIN CERTIFICATE-----", {"result": "hunter22"}]});
        assert_eq!(plain().redact(v.clone()), (v, 0));
    }

    #[test]
    fn a_secret_beside_an_id_needs_a_whole_id_and_a_whole_secret() {
        let aws_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        let sid = "AC0123456789abcdef0123456789abcdef";
        let token = "0123456789abcdef0123456789abcdef";
        // The ids, each a string of its own.
        for (id, secret) in [("AKIAIOSFODNN7EXAMPLE", aws_secret), (sid, token)] {
            let (v, _) = plain().redact(json!([id, secret]));
            assert_eq!(v[1], json!(REDACTED), "{id}");
            let (v, _) = plain().redact(json!({"id": id, "other": secret}));
            assert_eq!(v["other"], json!(REDACTED), "{id}");
        }
        // Not an id: the right length with the wrong letters, or an id
        // inside a longer string.
        for not_id in [
            "abcdefghijklmnopqrst",
            "Abcdefghijklmnopqrst",
            "AKIAIOSFODNN7EXAMPLE and more",
            "abcdefghijklmnopqrstuvwxyz01234567",
            "ACzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
            "sid AC0123456789abcdef0123456789abcdef",
        ] {
            for secret in [aws_secret, token] {
                let (v, _) = plain().redact(json!([not_id, secret]));
                assert_eq!(v[1], json!(secret), "{not_id} {secret}");
                let (v, _) = plain().redact(json!({"id": not_id, "other": secret}));
                assert_eq!(v["other"], json!(secret), "{not_id} {secret}");
            }
        }
        // Not a secret beside an id: the wrong length or letters.
        let forty_plain = "this-is-a-plain-forty-byte-description!!";
        assert_eq!(forty_plain.len(), 40);
        for (id, not_secret) in [
            ("AKIAIOSFODNN7EXAMPLE", forty_plain),
            (
                "AKIAIOSFODNN7EXAMPLE",
                "wjalrxutnfemi/k7mdeng/bpxrficyexamplekey",
            ),
            (sid, "deadbeef"),
            (sid, "ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ"),
            (sid, "0123456789ABCDEF0123456789ABCDEF"),
            (sid, "0123456789abcdef0123456789abcdef0"),
        ] {
            let (v, _) = plain().redact(json!([id, not_secret]));
            assert_eq!(v[1], json!(not_secret), "{id} {not_secret}");
        }
    }

    #[test]
    fn a_yaml_block_ends_at_a_line_indented_as_its_key() {
        for (text, want) in [
            (
                "  password: |\n    hunter22\n    more\n  user: dana",
                "  password: |\n    [REDACTED]\n  user: dana",
            ),
            (
                "password: |\n  hunter22\nuser: dana",
                "password: |\n  [REDACTED]\nuser: dana",
            ),
            (
                "- password: hunter22 and more\n- user: dana",
                "- password: [REDACTED]\n- user: dana",
            ),
            (
                "  - password: hunter22 and more",
                "  - password: [REDACTED]",
            ),
            (
                "the password: hunter22 and more",
                "the password: [REDACTED] and more",
            ),
        ] {
            assert_eq!(scrub(text), want, "{text}");
        }
    }

    fn strings(texts: &[&str]) -> Vec<Value> {
        texts.iter().map(|t| json!(t)).collect()
    }

    #[test]
    fn an_arrays_strings_with_nothing_found_skip_redaction_and_only_they() {
        let r = plain();
        // Two or more strings are scanned together; those where nothing is
        // found (ASCII or not) are marked clean, shorter ones than any
        // rule reads too.
        assert_eq!(
            r.clean_strings(&strings(&["a log line", "café au lait"])),
            [true, true]
        );
        assert_eq!(
            r.clean_strings(&strings(&["one line", "two lines", "ab", "three"])),
            [true; 4]
        );
        // One string alone saves nothing by joining: it is not marked.
        assert_eq!(r.clean_strings(&strings(&["a log line"])), [false]);
        // A hit marks its own string, not its neighbours; a zero-width
        // character sends its string the whole way; what is no string
        // is not marked.
        assert_eq!(
            r.clean_strings(&[
                json!("plain text"),
                json!("token ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2"),
                json!(7),
                json!("more plain text"),
                json!("t gh\u{200b}p_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2 x"),
                json!("last"),
            ]),
            [true, false, false, true, false, true]
        );
        // That one is redacted once the character is gone, which a scan
        // of the joined text, which keeps it, would not see.
        let (out, n) = r.redact(json!([
            "plain text",
            "t gh\u{200b}p_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2 x"
        ]));
        assert_eq!((out, n), (json!(["plain text", "t [REDACTED] x"]), 1));
        // A secret value that holds a line break could be found across two
        // joined strings: no string is marked.
        let r = Redactor::new([("API_TOKEN".to_string(), "abcd\nefgh".to_string())]);
        assert_eq!(
            r.clean_strings(&strings(&["a log line", "another line"])),
            [false, false]
        );
    }

    #[test]
    fn an_arrays_string_as_long_as_the_shortest_secret_is_scanned() {
        // A passed value of four characters: a string of four is read, one
        // of three cannot hold it.
        let r = Redactor::with_passed(
            [("PIN_TOKEN".to_string(), "Zq9x".to_string())],
            &["PIN_TOKEN".to_string()],
        );
        assert_eq!(
            r.clean_strings(&strings(&["Zq9x", "Zq9", "a log line"])),
            [false, true, true]
        );
        let (out, n) = r.redact(json!(["Zq9x", "Zq9", "a log line"]));
        assert_eq!(out, json!([REDACTED, "Zq9", "a log line"]));
        assert_eq!(n, 1);
    }

    #[test]
    fn secrets_side_by_side_are_replaced_one_by_one() {
        let r = Redactor::new([
            ("API_TOKEN".to_string(), "Qw3rTy7uIo".to_string()),
            ("DB_PASSWORD".to_string(), "Zx9cVb2nMm".to_string()),
        ]);
        // Touching: two replacements. Overlapping: one.
        let mut n = 0;
        assert_eq!(
            r.redact_text("Qw3rTy7uIoZx9cVb2nMm!", &mut n),
            "[REDACTED][REDACTED]!"
        );
        assert_eq!(n, 2);
        let r = Redactor::new([
            ("API_TOKEN".to_string(), "Qw3rTy7uIo".to_string()),
            ("DB_PASSWORD".to_string(), "7uIoZx9cVb".to_string()),
        ]);
        let mut n = 0;
        assert_eq!(r.redact_text("Qw3rTy7uIoZx9cVb!", &mut n), "[REDACTED]!");
        assert_eq!(n, 1);
    }

    #[test]
    fn an_array_under_a_weak_key_loses_its_generated_strings() {
        let (out, n) = plain().redact(json!({"session": ["Xy7kq9Lm2Pw4", "Morning keynote"]}));
        assert_eq!(out, json!({"session": [REDACTED, "Morning keynote"]}));
        assert_eq!(n, 1);
    }

    #[test]
    fn an_id_is_a_whole_string_of_its_exact_length() {
        let aws_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        let twilio_token = "0123456789abcdef0123456789abcdef";
        // Ids inside longer text (redacted there by the text rules) and
        // strings of an id's length that are none mark nothing beside
        // them.
        for id in [
            "AKIAIOSFODNN7EXAMPLE is the id",
            "01234567890123456789",
            "BKIAIOSFODNN7EXAMPLE",
        ] {
            let (out, _) = plain().redact(json!([id, aws_secret]));
            assert_eq!(out[1], json!(aws_secret), "{id}");
        }
        for id in [
            "AC0123456789abcdef0123456789abcdef is the account",
            "0123456789012345678901234567890123",
            "AD0123456789abcdef0123456789abcdef",
        ] {
            let (out, _) = plain().redact(json!([id, twilio_token]));
            assert_eq!(out[1], json!(twilio_token), "{id}");
        }
        // The ids themselves, padded with blanks, do.
        let (out, _) = plain().redact(json!([" AKIAIOSFODNN7EXAMPLE ", aws_secret]));
        assert_eq!(out[1], json!(REDACTED));
        let (out, _) = plain().redact(json!([" AC0123456789abcdef0123456789abcdef", twilio_token]));
        assert_eq!(out[1], json!(REDACTED));
    }

    #[test]
    fn a_token_split_by_a_zero_width_character_is_counted_with_the_others() {
        let (out, n) = counted("t ghp_a1B2c3D4e5\u{200b}a1B2c3D4e5a1B2c3D4e5a1B2 x");
        assert_eq!((out.as_str(), n), ("t [REDACTED] x", 1));
        // Added to what the count already holds.
        let mut n = 2;
        plain().redact_text("t ghp_a1B2c3D4e5\u{200b}a1B2c3D4e5a1B2c3D4e5a1B2 x", &mut n);
        assert_eq!(n, 3);
        // Nothing found: the text comes back as it was, zero-width
        // character and all, and nothing is counted.
        let (out, n) = counted("caf\u{e9}\u{200b} au lait, nothing here");
        assert_eq!(
            (out.as_str(), n),
            ("caf\u{e9}\u{200b} au lait, nothing here", 0)
        );
    }

    #[test]
    fn a_flag_is_hidden_only_when_its_name_is_secret_and_its_value_may_be() {
        // A secret name with a word no secret is, and a name that only
        // holds a secret word (the anchor arms on it), keep their value.
        for text in [
            "tool --password none -v",
            "tool --password 'none' -v",
            "tool --tokenizer bert-base -v",
        ] {
            assert_eq!(counted(text), (text.to_string(), 0), "{text}");
        }
        assert_eq!(
            counted("tool --password hunter2 -v"),
            ("tool --password [REDACTED] -v".to_string(), 1)
        );
    }

    #[test]
    fn a_key_with_no_value_or_one_already_hidden_is_left_alone() {
        for text in [
            "password=",
            "password= ",
            "the password: [REDACTED] was set",
            "password=[REDACTED]",
            "api_key: \"\"",
        ] {
            assert_eq!(counted(text), (text.to_string(), 0), "{text}");
        }
    }
}

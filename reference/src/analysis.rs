//! The text checks behind the draft commands: claims, voice, hashtags, links,
//! channel lengths and similarity.
//!
//! They are plain functions of the text (and the brand rules) so that every
//! command that combines them, like `policy-check` and `readiness`, reports
//! exactly what the single-purpose command would.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{json, Value};

use crate::error::CliError;

/// One problem found in a text, located by 1-based line and column (in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub rule: &'static str,
    pub text: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl Finding {
    pub fn to_json(&self) -> Value {
        json!({
            "rule": self.rule,
            "text": self.text,
            "line": self.line,
            "column": self.column,
            "message": self.message,
        })
    }
}

pub fn findings_json(findings: &[Finding]) -> Value {
    Value::Array(findings.iter().map(Finding::to_json).collect())
}

fn sort(findings: &mut [Finding]) {
    findings.sort_by(|a, b| (a.line, a.column, a.rule).cmp(&(b.line, b.column, b.rule)));
}

/// A line as lowercase characters, one per original character, so that match
/// positions are columns of the original line.
fn lower_chars(line: &str) -> Vec<char> {
    line.chars()
        .map(|c| c.to_lowercase().next().unwrap_or(c))
        .collect()
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Start indexes of `phrase` (lowercase) in `chars` where it stands as whole words.
fn find_phrase(chars: &[char], phrase: &str) -> Vec<usize> {
    let needle: Vec<char> = phrase.chars().collect();
    if needle.is_empty() || needle.len() > chars.len() {
        return Vec::new();
    }
    let mut hits = Vec::new();
    for start in 0..=chars.len() - needle.len() {
        let end = start + needle.len();
        if chars[start..end] != needle[..] {
            continue;
        }
        let before_ok = start == 0 || !is_word(chars[start - 1]) || !is_word(needle[0]);
        let after_ok = end == chars.len()
            || !is_word(chars[end])
            || !needle.last().is_some_and(|c| is_word(*c));
        if before_ok && after_ok {
            hits.push(start);
        }
    }
    hits
}

fn slice(chars: &[char], start: usize, len: usize) -> String {
    chars[start..start + len].iter().collect()
}

const CLAIMS: &[(&str, &str, &str)] = &[
    (
        "guaranteed",
        "absolute_claim",
        "promises an outcome no one can promise; say what the product does instead",
    ),
    (
        "guarantee",
        "absolute_claim",
        "promises an outcome no one can promise; say what the product does instead",
    ),
    (
        "guarantees",
        "absolute_claim",
        "promises an outcome no one can promise; say what the product does instead",
    ),
    (
        "risk-free",
        "absolute_claim",
        "claims there is no risk at all",
    ),
    (
        "never fails",
        "absolute_claim",
        "claims something cannot fail",
    ),
    (
        "always works",
        "absolute_claim",
        "claims something cannot fail",
    ),
    (
        "best in class",
        "superlative",
        "is a comparison with every competitor that needs a source",
    ),
    (
        "best-in-class",
        "superlative",
        "is a comparison with every competitor that needs a source",
    ),
    (
        "world's best",
        "superlative",
        "is a comparison with every competitor that needs a source",
    ),
    (
        "number one",
        "superlative",
        "is a ranking that needs a source",
    ),
    ("#1", "superlative", "is a ranking that needs a source"),
    (
        "industry-leading",
        "superlative",
        "is a comparison with every competitor that needs a source",
    ),
    (
        "unbeatable",
        "superlative",
        "is a comparison with every competitor that needs a source",
    ),
    (
        "proven to",
        "unsupported_proof",
        "claims proof; name the study or remove it",
    ),
    (
        "studies show",
        "unsupported_proof",
        "claims proof; name the study or remove it",
    ),
];

const SOURCE_MARKERS: &[&str] = &[
    "source:",
    "sources:",
    "according to",
    "(via ",
    "[1]",
    "[2]",
    "[3]",
];

/// Claims a post should not make without backing: absolute promises,
/// superlatives, claimed proof, and percentages with no source in the same sentence.
pub fn claims(text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for (line_index, line) in text.lines().enumerate() {
        let chars = lower_chars(line);
        let original: Vec<char> = line.chars().collect();
        for (phrase, rule, why) in CLAIMS {
            for start in find_phrase(&chars, phrase) {
                let found = slice(&original, start, phrase.chars().count());
                out.push(Finding {
                    rule,
                    message: format!("\"{found}\" {why}."),
                    text: found,
                    line: line_index + 1,
                    column: start + 1,
                });
            }
        }
        for (start, len) in percentages(&chars) {
            let sentence = sentence_around(&chars, start);
            if SOURCE_MARKERS.iter().any(|m| sentence.contains(m)) {
                continue;
            }
            let found = slice(&original, start, len);
            out.push(Finding {
                rule: "unsourced_percentage",
                message: format!(
                    "\"{found}\" is a figure with no source in the same sentence; add one, like (source: ...)."
                ),
                text: found,
                line: line_index + 1,
                column: start + 1,
            });
        }
    }
    sort(&mut out);
    out
}

/// Spans like `40%`, `12.5 %` or `30 percent`.
fn percentages(chars: &[char]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() || (i > 0 && is_word(chars[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || (chars[i] == '.' && i + 1 < chars.len() && chars[i + 1].is_ascii_digit()))
        {
            i += 1;
        }
        let mut j = i;
        if j < chars.len() && chars[j] == ' ' {
            j += 1;
        }
        if j < chars.len() && chars[j] == '%' {
            spans.push((start, j + 1 - start));
            i = j + 1;
        } else if chars[j..].starts_with(&['p', 'e', 'r', 'c', 'e', 'n', 't']) {
            spans.push((start, j + 7 - start));
            i = j + 7;
        }
    }
    spans
}

/// The sentence holding position `at`: bounded by `.`, `!` or `?` followed by
/// a space or the end of the line.
fn sentence_around(chars: &[char], at: usize) -> String {
    let ends_sentence = |i: usize| {
        matches!(chars[i], '.' | '!' | '?')
            && (i + 1 == chars.len() || chars[i + 1].is_whitespace())
    };
    let mut start = at;
    while start > 0 && !ends_sentence(start - 1) {
        start -= 1;
    }
    let mut end = at;
    while end < chars.len() && !ends_sentence(end) {
        end += 1;
    }
    chars[start..chars.len().min(end + 1)].iter().collect()
}

/// The brand rules from the brand file.
#[derive(Debug, Clone, Default)]
pub struct Brand {
    pub name: Option<String>,
    pub tone: Vec<String>,
    pub banned_words: Vec<String>,
    pub preferred_terms: Vec<(String, String)>,
    pub acronyms: Vec<String>,
    pub max_exclamation_marks: Option<i64>,
    pub max_emoji: Option<i64>,
    pub preferred_hashtags: Vec<String>,
    pub banned_hashtags: Vec<String>,
    pub posting_windows: BTreeMap<String, Vec<String>>,
}

fn string_list(value: &Value, key: &str, path: &Path) -> Result<Vec<String>, CliError> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => Ok(s.clone()),
                _ => Err(CliError::invalid_file(
                    path,
                    format!("{key} must be a list of strings"),
                )),
            })
            .collect(),
        Some(_) => Err(CliError::invalid_file(
            path,
            format!("{key} must be a list of strings"),
        )),
    }
}

fn optional_int(value: &Value, key: &str, path: &Path) -> Result<Option<i64>, CliError> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            v.as_i64().filter(|n| *n >= 0).map(Some).ok_or_else(|| {
                CliError::invalid_file(path, format!("{key} must be a whole number"))
            })
        }
    }
}

impl Brand {
    pub fn from_value(value: &Value, path: &Path) -> Result<Brand, CliError> {
        if !value.is_object() {
            return Err(CliError::invalid_file(
                path,
                "it must be a mapping of brand rules",
            ));
        }
        let mut preferred_terms = Vec::new();
        match value.get("preferred_terms") {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                for (avoid, prefer) in map {
                    let prefer = prefer.as_str().ok_or_else(|| {
                        CliError::invalid_file(path, "preferred_terms must map a term to a string")
                    })?;
                    preferred_terms.push((avoid.clone(), prefer.to_string()));
                }
            }
            Some(_) => {
                return Err(CliError::invalid_file(
                    path,
                    "preferred_terms must be a mapping",
                ))
            }
        }
        let hashtags = value.get("hashtags").cloned().unwrap_or(Value::Null);
        let mut posting_windows = BTreeMap::new();
        match value.get("posting_windows") {
            None | Some(Value::Null) => {}
            Some(windows @ Value::Object(map)) => {
                for channel in map.keys() {
                    let times = string_list(windows, channel, path)?;
                    for t in &times {
                        if !crate::dates::valid_time(t) {
                            return Err(CliError::invalid_file(
                                path,
                                format!("posting window {t:?} for {channel} is not an HH:MM time"),
                            ));
                        }
                    }
                    posting_windows.insert(channel.clone(), times);
                }
            }
            Some(_) => {
                return Err(CliError::invalid_file(
                    path,
                    "posting_windows must be a mapping",
                ))
            }
        }
        Ok(Brand {
            name: value
                .get("brand")
                .and_then(Value::as_str)
                .map(str::to_string),
            tone: string_list(value, "tone", path)?,
            banned_words: string_list(value, "banned_words", path)?,
            preferred_terms,
            acronyms: string_list(value, "acronyms", path)?,
            max_exclamation_marks: optional_int(value, "max_exclamation_marks", path)?,
            max_emoji: optional_int(value, "max_emoji", path)?,
            preferred_hashtags: string_list(&hashtags, "preferred", path)?,
            banned_hashtags: string_list(&hashtags, "banned", path)?,
            posting_windows,
        })
    }
}

fn is_emoji(c: char) -> bool {
    matches!(u32::from(c), 0x1F300..=0x1FAFF | 0x2600..=0x27BF | 0x1F000..=0x1F2FF)
}

/// The brand's voice rules, and an optional length limit.
pub fn voice(text: &str, brand: &Brand, max_length: Option<i64>) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut exclamations = 0i64;
    let mut emoji = 0i64;
    for (line_index, line) in text.lines().enumerate() {
        let chars = lower_chars(line);
        let original: Vec<char> = line.chars().collect();
        let line_no = line_index + 1;
        for word in &brand.banned_words {
            let phrase = word.to_lowercase();
            for start in find_phrase(&chars, &phrase) {
                let found = slice(&original, start, phrase.chars().count());
                out.push(Finding {
                    rule: "banned_word",
                    message: format!("\"{found}\" is on the brand's list of banned words."),
                    text: found,
                    line: line_no,
                    column: start + 1,
                });
            }
        }
        for (avoid, prefer) in &brand.preferred_terms {
            let phrase = avoid.to_lowercase();
            for start in find_phrase(&chars, &phrase) {
                let found = slice(&original, start, phrase.chars().count());
                out.push(Finding {
                    rule: "preferred_term",
                    message: format!("Write \"{prefer}\" instead of \"{found}\"."),
                    text: found,
                    line: line_no,
                    column: start + 1,
                });
            }
        }
        for (index, c) in original.iter().enumerate() {
            if *c == '!' {
                exclamations += 1;
                if brand
                    .max_exclamation_marks
                    .is_some_and(|max| exclamations == max + 1)
                {
                    out.push(Finding {
                        rule: "too_many_exclamations",
                        text: "!".into(),
                        line: line_no,
                        column: index + 1,
                        message: format!(
                            "More than {} exclamation mark(s); the brand's tone is calm.",
                            brand.max_exclamation_marks.unwrap_or(0)
                        ),
                    });
                }
            }
            if is_emoji(*c) {
                emoji += 1;
                if brand.max_emoji.is_some_and(|max| emoji == max + 1) {
                    out.push(Finding {
                        rule: "too_many_emoji",
                        text: c.to_string(),
                        line: line_no,
                        column: index + 1,
                        message: format!("More than {} emoji.", brand.max_emoji.unwrap_or(0)),
                    });
                }
            }
        }
        for (start, word) in words(&original) {
            let letters = word.chars().filter(|c| c.is_alphabetic()).count();
            let shouted = letters >= 4 && word.chars().all(|c| !c.is_lowercase());
            let known = brand.acronyms.iter().any(|a| a == &word);
            if shouted && !known {
                out.push(Finding {
                    rule: "shouting",
                    message: format!("\"{word}\" is in capitals; the brand does not shout."),
                    text: word,
                    line: line_no,
                    column: start + 1,
                });
            }
        }
    }
    if let Some(max) = max_length {
        let length = text.trim_end().chars().count();
        if length as i64 > max {
            out.push(Finding {
                rule: "too_long",
                text: String::new(),
                line: 1,
                column: 1,
                message: format!("The text is {length} characters, over the limit of {max}."),
            });
        }
    }
    sort(&mut out);
    out
}

/// Words made of letters only, skipping URLs, hashtags and mentions.
fn words(chars: &[char]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            i += 1;
            continue;
        }
        let token_start = i;
        while i < chars.len() && !chars[i].is_whitespace() {
            i += 1;
        }
        let token: String = chars[token_start..i].iter().collect();
        if token.contains("://") || token.starts_with('#') || token.starts_with('@') {
            continue;
        }
        let mut j = token_start;
        while j < i {
            if chars[j].is_alphabetic() {
                let start = j;
                while j < i && chars[j].is_alphabetic() {
                    j += 1;
                }
                out.push((start, chars[start..j].iter().collect()));
            } else {
                j += 1;
            }
        }
    }
    out
}

/// A hashtag and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hashtag {
    pub tag: String,
    pub line: usize,
    pub column: usize,
}

pub fn hashtags(text: &str) -> Vec<Hashtag> {
    let mut out = Vec::new();
    for (line_index, line) in text.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let starts =
                chars[i] == '#' && (i == 0 || chars[i - 1].is_whitespace() || chars[i - 1] == '(');
            if !starts {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < chars.len() && is_word(chars[j]) {
                j += 1;
            }
            let body = &chars[i + 1..j];
            if body.iter().any(|c| c.is_alphabetic()) {
                out.push(Hashtag {
                    tag: chars[i..j].iter().collect(),
                    line: line_index + 1,
                    column: i + 1,
                });
            }
            i = j.max(i + 1);
        }
    }
    out
}

/// A link found in a text, taken apart without any network use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub url: String,
    pub scheme: String,
    pub host: String,
    pub path: String,
    pub tracking: Vec<String>,
    pub line: usize,
    pub column: usize,
}

impl Link {
    pub fn to_json(&self) -> Value {
        json!({
            "url": self.url,
            "scheme": self.scheme,
            "host": self.host,
            "path": self.path,
            "tracking_parameters": self.tracking,
            "insecure": self.scheme == "http",
            "line": self.line,
            "column": self.column,
        })
    }
}

pub fn links(text: &str) -> Vec<Link> {
    let mut out = Vec::new();
    for (line_index, line) in text.lines().enumerate() {
        let mut search_from = 0;
        while let Some(offset) = find_scheme(&line[search_from..]) {
            let start = search_from + offset;
            let rest = &line[start..];
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let url =
                rest[..end].trim_end_matches(['.', ',', ';', ':', '!', '?', ')', ']', '"', '\'']);
            search_from = start + end.max(1);
            let Some((scheme, after)) = url.split_once("://") else {
                continue;
            };
            let host_end = after.find(['/', '?', '#']).unwrap_or(after.len());
            let host = &after[..host_end];
            if host.is_empty() {
                continue;
            }
            let rest_of_url = &after[host_end..];
            let path_end = rest_of_url.find(['?', '#']).unwrap_or(rest_of_url.len());
            let path = if path_end == 0 {
                "/"
            } else {
                &rest_of_url[..path_end]
            };
            let query = rest_of_url[path_end..]
                .strip_prefix('?')
                .map(|q| q.split('#').next().unwrap_or(""))
                .unwrap_or("");
            let tracking = query
                .split('&')
                .filter_map(|pair| pair.split('=').next())
                .filter(|name| name.starts_with("utm_") || *name == "fbclid" || *name == "gclid")
                .map(str::to_string)
                .collect();
            out.push(Link {
                url: url.to_string(),
                scheme: scheme.to_ascii_lowercase(),
                host: host.to_ascii_lowercase(),
                path: path.to_string(),
                tracking,
                line: line_index + 1,
                column: line[..start].chars().count() + 1,
            });
        }
    }
    out
}

fn find_scheme(text: &str) -> Option<usize> {
    match (text.find("http://"), text.find("https://")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The channels the backend knows, with the length each allows and how a link counts.
pub struct ChannelLimit {
    pub channel: &'static str,
    pub max_chars: usize,
    /// A link counts as this many characters on channels that shorten links.
    pub link_weight: Option<usize>,
    pub max_images: u32,
    pub recommended_hashtags: u32,
}

pub const CHANNEL_LIMITS: &[ChannelLimit] = &[
    ChannelLimit {
        channel: "x",
        max_chars: 280,
        link_weight: Some(23),
        max_images: 4,
        recommended_hashtags: 2,
    },
    ChannelLimit {
        channel: "linkedin",
        max_chars: 3000,
        link_weight: None,
        max_images: 9,
        recommended_hashtags: 3,
    },
    ChannelLimit {
        channel: "bluesky",
        max_chars: 300,
        link_weight: None,
        max_images: 4,
        recommended_hashtags: 2,
    },
    ChannelLimit {
        channel: "mastodon",
        max_chars: 500,
        link_weight: Some(23),
        max_images: 4,
        recommended_hashtags: 4,
    },
];

pub fn channel_limit(channel: &str) -> Option<&'static ChannelLimit> {
    CHANNEL_LIMITS.iter().find(|c| c.channel == channel)
}

/// The length of a post as the channel counts it.
pub fn channel_length(text: &str, limit: &ChannelLimit) -> usize {
    let text = text.trim();
    let raw = text.chars().count();
    match limit.link_weight {
        None => raw,
        Some(weight) => links(text)
            .iter()
            .fold(raw, |n, l| n - l.url.chars().count() + weight),
    }
}

fn shingles(text: &str) -> BTreeSet<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    if words.len() < 2 {
        return words.into_iter().collect();
    }
    words
        .windows(2)
        .map(|w| format!("{} {}", w[0], w[1]))
        .collect()
}

/// Jaccard similarity of word pairs, rounded to three decimals so outputs are
/// stable across platforms.
pub fn similarity(a: &str, b: &str) -> f64 {
    let (sa, sb) = (shingles(a), shingles(b));
    let union = sa.union(&sb).count();
    if union == 0 {
        return 0.0;
    }
    let shared = sa.intersection(&sb).count();
    round3(shared as f64 / union as f64)
}

pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_found_with_positions() {
        let f = claims("Guaranteed results!\nTeams see 40% more reach.");
        let rules: Vec<_> = f
            .iter()
            .map(|f| (f.rule, f.line, f.column, f.text.as_str()))
            .collect();
        assert_eq!(
            rules,
            vec![
                ("absolute_claim", 1, 1, "Guaranteed"),
                ("unsourced_percentage", 2, 11, "40%"),
            ]
        );
    }

    #[test]
    fn a_sourced_percentage_is_fine() {
        assert!(claims("Up 30% (source: Acme report, 2026). Next sentence.").is_empty());
        assert_eq!(claims("Up 30 percent. Source: none here").len(), 1);
    }

    #[test]
    fn words_match_whole() {
        assert!(claims("unguaranteed").is_empty());
        assert_eq!(claims("We are #1 here").len(), 1);
    }

    #[test]
    fn hashtags_need_a_letter() {
        let tags: Vec<_> = hashtags("#one #2 a#b (#three)")
            .into_iter()
            .map(|h| h.tag)
            .collect();
        assert_eq!(tags, vec!["#one", "#three"]);
    }

    #[test]
    fn links_are_taken_apart() {
        let l = links("See http://Example.org/a?utm_source=x&id=2, then https://b.example.");
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].url, "http://Example.org/a?utm_source=x&id=2");
        assert_eq!(l[0].host, "example.org");
        assert_eq!(l[0].tracking, vec!["utm_source"]);
        assert_eq!(l[1].url, "https://b.example");
        assert_eq!(l[1].path, "/");
    }

    #[test]
    fn links_count_as_23_on_x() {
        let text = format!("Hi https://example.com/{}", "a".repeat(100));
        let x = channel_limit("x").unwrap();
        assert_eq!(channel_length(&text, x), 3 + 23);
    }

    #[test]
    fn similarity_is_symmetric_and_bounded() {
        assert_eq!(similarity("a b c", "a b c"), 1.0);
        assert_eq!(similarity("a b c", "x y z"), 0.0);
        assert_eq!(
            similarity("a b c d", "a b c e"),
            similarity("a b c e", "a b c d")
        );
    }

    #[test]
    fn voice_rules() {
        let brand = Brand {
            banned_words: vec!["synergy".into()],
            preferred_terms: vec![("e-mail".into(), "email".into())],
            max_exclamation_marks: Some(1),
            ..Brand::default()
        };
        let f = voice("Synergy by e-mail!! NOW and API", &brand, Some(10));
        let rules: Vec<_> = f.iter().map(|f| f.rule).collect();
        assert_eq!(
            rules,
            vec![
                "banned_word",
                "too_long",
                "preferred_term",
                "too_many_exclamations"
            ]
        );
    }
}

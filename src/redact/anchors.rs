//! The first pass over a text: which rules could match, and on which lines.
//!
//! Every shape and the `key: value` rule names an anchor that each of its
//! matches contains (a literal such as `ghp_`, or a secret word followed by
//! a separator). One Aho-Corasick automaton finds all of them in one pass,
//! matching ASCII case-insensitively; a hit is then checked in a few bytes
//! around it (the literal's exact case, what follows a secret word) before
//! it arms its rule. A rule then reads only the lines holding its armed
//! hits, so a long text with one secret costs one pass, not one per rule.
//!
//! Each check looks at a bounded number of bytes around its hit, or at a
//! run that ends before the next hit of the same anchor, so the pass stays
//! linear in the text's length whatever it holds.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use super::names::HINTS;
use super::shapes::{Anchor, SHAPES};

/// The `key: value` rule's number, after the shapes'.
pub(super) const KEY_VALUE: usize = SHAPES.len();

/// How far a key name may run on after the secret word in it: a key is at
/// most 64 characters (`shapes::KEY_VALUE`), so a word further from the
/// separator is not in the key that ends there.
const KEY_REACH: usize = 72;

/// What a hit must also show before it arms its rule.
#[derive(Debug, Clone, Copy)]
enum Test {
    /// The text is this literal in this very case.
    Exact(&'static str),
    /// Nothing more.
    None,
    /// `://` with `user:` after it and a `@` before the next `/`.
    UrlUserinfo,
    /// A key name runs on to `:`, `=` (after an optional quote and blanks).
    KeyValue,
    /// Inside a `--flag` name that a blank ends.
    Flag,
    /// Inside an element name that `>` ends.
    Element,
}

#[derive(Debug, Clone, Copy)]
struct Trigger {
    rule: usize,
    test: Test,
}

/// A hit that armed `rule` at byte `at` of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Hit {
    pub rule: usize,
    pub at: usize,
}

#[derive(Debug, Clone)]
pub(super) struct Anchors {
    automaton: AhoCorasick,
    /// For each pattern of the automaton, the rules a hit may arm.
    triggers: Vec<Vec<Trigger>>,
    /// The shape armed by a dotted token, if any.
    dotted: Option<usize>,
}

impl Anchors {
    pub(super) fn new() -> Self {
        let mut patterns: Vec<String> = Vec::new();
        let mut triggers: Vec<Vec<Trigger>> = Vec::new();
        let mut add = |literal: &str, trigger: Trigger| {
            let key = literal.to_ascii_lowercase();
            let i = match patterns.iter().position(|p| *p == key) {
                Some(i) => i,
                None => {
                    patterns.push(key);
                    triggers.push(Vec::new());
                    patterns.len() - 1
                }
            };
            triggers[i].push(trigger);
        };
        let mut dotted = None;
        for (rule, shape) in SHAPES.iter().enumerate() {
            match shape.anchor {
                Anchor::Exact(literals) => {
                    for l in literals {
                        add(
                            l,
                            Trigger {
                                rule,
                                test: Test::Exact(l),
                            },
                        );
                    }
                }
                Anchor::AnyCase(literals) => {
                    for l in literals {
                        add(
                            l,
                            Trigger {
                                rule,
                                test: Test::None,
                            },
                        );
                    }
                }
                Anchor::UrlUserinfo => add(
                    "://",
                    Trigger {
                        rule,
                        test: Test::UrlUserinfo,
                    },
                ),
                Anchor::FlagWord | Anchor::ElementWord => {
                    let test = if matches!(shape.anchor, Anchor::FlagWord) {
                        Test::Flag
                    } else {
                        Test::Element
                    };
                    for w in HINTS {
                        add(w, Trigger { rule, test });
                    }
                }
                Anchor::DottedToken => dotted = Some(rule),
            }
        }
        for w in HINTS.iter().chain(&["value"]) {
            add(
                w,
                Trigger {
                    rule: KEY_VALUE,
                    test: Test::KeyValue,
                },
            );
        }
        // The literals are fixed text, checked by the unit tests; a DFA of
        // a few hundred states cannot exceed the builder's limits.
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&patterns)
            .expect("the fixed anchors build an automaton");
        Self {
            automaton,
            triggers,
            dotted,
        }
    }

    /// Every armed hit in `text`, sorted by rule and then position.
    pub(super) fn scan(&self, text: &str) -> Vec<Hit> {
        let b = text.as_bytes();
        let mut hits = Vec::new();
        // Overlapping: `github_pat_` holds the secret word `pat`, and both count.
        for m in self.automaton.find_overlapping_iter(text) {
            for t in &self.triggers[m.pattern().as_usize()] {
                if passes(b, m.start(), m.end(), t.test) {
                    hits.push(Hit {
                        rule: t.rule,
                        at: m.start(),
                    });
                }
            }
        }
        if let Some(rule) = self.dotted {
            for at in memchr::memchr_iter(b'.', b) {
                if is_dotted_token(b, at) {
                    hits.push(Hit { rule, at });
                }
            }
        }
        hits.sort_unstable();
        hits.dedup();
        hits
    }
}

fn is_token_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

fn is_key_byte(c: u8) -> bool {
    is_token_byte(c) || c == b'.'
}

/// White space that ends `\S` in every regex flavour used here.
fn is_blank_or_break(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The end of the run of bytes from `at` that `keep` accepts, at most `reach` long.
fn skip(b: &[u8], at: usize, reach: usize, keep: impl Fn(u8) -> bool) -> usize {
    let end = b.len().min(at.saturating_add(reach));
    b[at..end].iter().position(|&c| !keep(c)).map_or(end, |n| at + n)
}

fn passes(b: &[u8], start: usize, end: usize, test: Test) -> bool {
    match test {
        Test::None => true,
        Test::Exact(l) => &b[start..end] == l.as_bytes(),
        Test::UrlUserinfo => {
            // Each run stops at the next `://` (it holds `:` and `/`), so
            // the runs of all hits together read the text about once.
            let user_end = skip(b, end, usize::MAX, |c| {
                !matches!(c, b'/' | b':' | b'@') && !is_blank_or_break(c)
            });
            if b.get(user_end) != Some(&b':') {
                return false;
            }
            let pass_end = skip(b, user_end + 1, usize::MAX, |c| {
                !matches!(c, b'/' | b'@') && !is_blank_or_break(c)
            });
            b.get(pass_end) == Some(&b'@')
        }
        Test::KeyValue => {
            let mut at = skip(b, end, KEY_REACH, is_key_byte);
            if b.get(at) == Some(&b'\\') {
                at += 1;
            }
            if matches!(b.get(at), Some(b'"' | b'\'')) {
                at += 1;
            }
            at = skip(b, at, usize::MAX, |c| c == b' ' || c == b'\t');
            matches!(b.get(at), Some(b':' | b'='))
        }
        Test::Flag => {
            let after = skip(b, end, KEY_REACH, is_token_byte);
            if !matches!(b.get(after), Some(b' ' | b'\t')) {
                return false;
            }
            // `--` somewhere before the word, with only name bytes between.
            let mut i = start;
            let floor = start.saturating_sub(KEY_REACH);
            while i >= floor.max(2) {
                if &b[i - 2..i] == b"--" {
                    return true;
                }
                if !is_token_byte(b[i - 1]) {
                    return false;
                }
                i -= 1;
            }
            false
        }
        Test::Element => {
            let after = skip(b, end, KEY_REACH, |c| is_key_byte(c) || c == b':');
            b.get(after) == Some(&b'>')
        }
    }
}

/// Is the `.` at byte `at` followed by 6 or 7 token bytes, a `.` and 27
/// more (a Discord token's timestamp and the start of its signature)?
fn is_dotted_token(b: &[u8], at: usize) -> bool {
    [6, 7].iter().any(|&n| {
        let dot = at + 1 + n;
        dot + 28 <= b.len()
            && b[at + 1..dot].iter().all(|&c| is_token_byte(c))
            && b[dot] == b'.'
            && b[dot + 1..dot + 28].iter().all(|&c| is_token_byte(c))
    })
}

/// The lines holding `hits` (positions, ascending), each once: `(start,
/// end)` without the line break. Each line is found by reading back to the
/// previous line's end at most, so this is linear in the text's length.
pub(super) fn lines_of(text: &str, hits: impl Iterator<Item = usize>) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut lines: Vec<(usize, usize)> = Vec::new();
    let mut floor = 0;
    for at in hits {
        if lines.last().is_some_and(|&(_, end)| at < end) || at < floor {
            continue;
        }
        let start = memchr::memrchr(b'\n', &b[floor..at]).map_or(floor, |i| floor + i + 1);
        let end = memchr::memchr(b'\n', &b[at..]).map_or(b.len(), |i| at + i);
        lines.push((start, end));
        floor = end;
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> Vec<usize> {
        let mut r: Vec<usize> = Anchors::new().scan(text).iter().map(|h| h.rule).collect();
        r.dedup();
        r
    }

    #[test]
    fn exact_literals_keep_their_case() {
        let aws = 1;
        assert_eq!(rules("id AKIAIOSFODNN7EXAMPLE"), [aws]);
        assert!(rules("id akiaiosfodnn7example").is_empty());
    }

    #[test]
    fn secret_words_arm_key_value_only_before_a_separator() {
        assert!(rules("pass: x").contains(&KEY_VALUE));
        assert!(rules("\"API Key\" : x").contains(&KEY_VALUE));
        assert!(rules("{\\\"password\\\": 1}").contains(&KEY_VALUE));
        assert!(rules("DB_PASSWORD_FILE\t= x").contains(&KEY_VALUE));
        assert!(!rules("the password is long").contains(&KEY_VALUE));
        assert!(!rules("passport").contains(&KEY_VALUE));
        // A word further from the separator than a key can be long.
        // (`tok` is the anchor; what follows it is the rest of the key.)
        let far = format!("tok{}: x", "a".repeat(KEY_REACH + 1));
        assert!(!rules(&far).contains(&KEY_VALUE));
        let near = format!("tok{}: x", "a".repeat(KEY_REACH));
        assert!(rules(&near).contains(&KEY_VALUE));
    }

    #[test]
    fn flags_and_elements_need_their_punctuation() {
        let flag = SHAPES
            .iter()
            .position(|s| matches!(s.anchor, Anchor::FlagWord))
            .unwrap();
        let element = SHAPES
            .iter()
            .position(|s| matches!(s.anchor, Anchor::ElementWord))
            .unwrap();
        assert!(rules("x --api-token v").contains(&flag));
        assert!(rules("x --token\tv").contains(&flag));
        assert!(!rules("x -token v").contains(&flag));
        assert!(!rules("x --token=v").contains(&flag));
        assert!(!rules("x --a.token v").contains(&flag));
        assert!(rules("<db:password>").contains(&element));
        assert!(!rules("<password/>").contains(&element));
    }

    #[test]
    fn url_userinfo_needs_a_colon_and_an_at_before_the_path() {
        let url = SHAPES
            .iter()
            .position(|s| matches!(s.anchor, Anchor::UrlUserinfo))
            .unwrap();
        assert_eq!(rules("postgres://u:p@h/db"), [url]);
        assert_eq!(rules("x://:p@h"), [url]);
        assert!(rules("https://h/u:p@x").is_empty());
        assert!(rules("https://u@h").is_empty());
        assert!(rules("https://u:p h@x").is_empty());
    }

    #[test]
    fn dotted_tokens_need_both_dots_and_27_characters() {
        let t = "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs";
        assert_eq!(rules(t).len(), 1);
        assert!(rules(&t[..t.len() - 4]).is_empty());
        assert!(rules("a.b.c").is_empty());
    }

    #[test]
    fn lines_are_found_once_each() {
        let text = "aa\nbb bb\n\ncc";
        assert_eq!(lines_of(text, [0, 1].into_iter()), [(0, 2)]);
        assert_eq!(lines_of(text, [3, 6].into_iter()), [(3, 8)]);
        assert_eq!(lines_of(text, [1, 4, 10].into_iter()), [(0, 2), (3, 8), (10, 12)]);
        assert_eq!(lines_of("x", [0].into_iter()), [(0, 1)]);
    }
}

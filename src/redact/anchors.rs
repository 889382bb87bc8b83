//! The first pass over a text: which rules could match, and on which lines.
//!
//! Every shape and the `key: value` rule names an anchor that each of its
//! matches contains. The shapes' literals (`ghp_`, `://`, `-u`) are found by
//! a SIMD multi-literal search (Teddy, from the aho-corasick crate) for
//! their first bytes; the secret words (`token`, `pass`, ..., `bearer`) by
//! the same search over a copy of the text with every byte's `0x20` bit
//! set, which makes ASCII letters lower case and turns no other byte into a
//! letter; dotted tokens by a scan for dots. A hit is checked in a few bytes
//! around it (the literal's case, what follows a secret word) before it arms
//! its rule, and a rule then reads only the lines holding its armed hits, so
//! a long text with one secret costs one pass, not one per rule.
//!
//! Each check reads a bounded number of bytes around its hit, or a run that
//! ends before the next hit of the same anchor, so the pass stays linear in
//! the text's length whatever it holds.

use aho_corasick::{packed, AhoCorasick, Input, MatchKind, Span};

use std::cell::RefCell;

use super::names::HINTS;
use super::shapes::{Anchor, SHAPES};

thread_local! {
    /// The folded copy of a piece of the text being scanned, kept between calls.
    static FOLDED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// How much of the text is folded at a time.
const FOLD_PIECE: usize = 1 << 16;

/// How far past a piece its copy reads: more than the longest secret word.
const WORD_REACH: usize = 16;

/// The `key: value` rule's number, after the shapes'.
pub(super) const KEY_VALUE: usize = SHAPES.len();

/// How far a name may run on after the secret word in it: a key, a flag or
/// an element name is at most 64 characters (see `shapes`), so a word
/// further from the name's end is not in the name that ends there.
const KEY_REACH: usize = 72;

/// Search keys shorter than three bytes, for literals that share them.
const SHORT_KEYS: &[&str] = &["gl", "sk", "-u", "AC", "SK", "--", "hv"];

/// What a literal's hit must also show before it arms its rule.
#[derive(Debug, Clone, Copy)]
enum AnchorTest {
    /// Nothing more.
    None,
    /// A space or a tab follows.
    Blank,
    /// `?`, `&` or `;` comes before.
    SasQuery,
    /// `user:` after it and a `@` before the next `/`.
    UrlUserinfo,
    /// A key name runs on to `:`, `=` (after an optional quote and blanks).
    KeyValue,
    /// Inside a `--flag` name that a blank ends.
    Flag,
    /// Inside an element name that `>` ends.
    Element,
}

#[derive(Debug, Clone)]
struct Literal {
    text: &'static str,
    any_case: bool,
    rule: usize,
    test: AnchorTest,
}

/// A hit that armed `rule` at byte `at` of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Hit {
    pub rule: usize,
    pub at: usize,
}

/// The search for keys: Teddy where the CPU has it (x86-64 with SSSE3,
/// aarch64), an automaton elsewhere.
#[derive(Debug, Clone)]
enum Keys {
    Packed(packed::Searcher),
    Automaton(AhoCorasick),
}

impl Keys {
    fn new(keys: &[String]) -> Self {
        let packed = packed::Config::new()
            .match_kind(packed::MatchKind::LeftmostFirst)
            .builder()
            .extend(keys)
            .build();
        match packed {
            Some(p) => Self::Packed(p),
            None => Self::automaton(keys),
        }
    }

    fn automaton(keys: &[String]) -> Self {
        // Fixed, non-empty literals: the builder cannot refuse them.
        Self::Automaton(
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostFirst)
                .build(keys)
                .expect("the fixed anchors build an automaton"),
        )
    }

    /// Where the first key at or after byte `from` starts.
    fn find_from(&self, b: &[u8], from: usize) -> Option<usize> {
        let span = Span::from(from..b.len());
        match self {
            Self::Packed(p) => p.find_in(b, span).map(|m| m.start()),
            Self::Automaton(a) => a.find(Input::new(b).span(span)).map(|m| m.start()),
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Anchors {
    /// The first bytes of every literal; a hit says where to compare them.
    /// Three-byte keys and shorter ones are searched apart: Teddy compares
    /// as many leading bytes as its shortest key has, and two bytes let
    /// far more ordinary text through to be checked.
    keys: Vec<Keys>,
    /// The literals by their first byte (both cases for `any_case` ones).
    by_first: Vec<Vec<Literal>>,
    /// The shape armed by a dotted token.
    dotted: Option<usize>,
    /// The secret words, lower case, searched in the folded copy.
    words: Keys,
    /// The words' checks by their first byte (lower case).
    by_word_first: Vec<Vec<Literal>>,
    /// How many keys the search holds (Teddy takes at most 64).
    #[cfg(test)]
    key_count: (usize, usize),
}

/// The search key of `literal`: a short key it starts with, or its first
/// three bytes.
fn key_of(literal: &str) -> &str {
    SHORT_KEYS
        .iter()
        .find(|k| literal.starts_with(**k))
        .copied()
        .unwrap_or(&literal[..literal.len().min(3)])
}

impl Anchors {
    pub(super) fn new() -> Self {
        let mut literals: Vec<Literal> = Vec::new();
        let (mut flag, mut element, mut dotted) = (None, None, None);
        for (rule, shape) in SHAPES.iter().enumerate() {
            let mut add = |text: &'static str, any_case: bool, test: AnchorTest| {
                literals.push(Literal {
                    text,
                    any_case,
                    rule,
                    test,
                })
            };
            match shape.anchor {
                Anchor::Exact(ls) => ls.iter().for_each(|l| add(l, false, AnchorTest::None)),
                Anchor::AnyCase(ls) => ls.iter().for_each(|l| add(l, true, AnchorTest::None)),
                Anchor::Blank(ls) => ls.iter().for_each(|l| add(l, false, AnchorTest::Blank)),
                Anchor::SasSignature => add("sig=", false, AnchorTest::SasQuery),
                Anchor::UrlUserinfo => add("://", false, AnchorTest::UrlUserinfo),
                Anchor::FlagWord => flag = Some(rule),
                Anchor::ElementWord => element = Some(rule),
                Anchor::DottedToken => dotted = Some(rule),
            }
        }
        let mut keys: Vec<String> = Vec::new();
        let mut by_first: Vec<Vec<Literal>> = vec![Vec::new(); 256];
        for l in literals.iter().filter(|l| !l.any_case) {
            let key = key_of(l.text);
            keys.push(key.to_string());
            by_first[usize::from(l.text.as_bytes()[0])].push(l.clone());
        }
        keys.sort();
        keys.dedup();
        // A key that starts with another key is found through it.
        let all = keys.clone();
        keys.retain(|k| !all.iter().any(|o| o != k && k.starts_with(o.as_str())));
        #[cfg(test)]
        let key_count = (
            keys.iter().filter(|k| k.len() >= 3).count(),
            keys.iter().filter(|k| k.len() < 3).count(),
        );
        let (long, short): (Vec<String>, Vec<String>) =
            keys.into_iter().partition(|k| k.len() >= 3);
        // The secret words, found in the folded copy: each may arm the
        // `key: value` rule, a flag and an element; `bearer` also its shape.
        let mut words: Vec<String> = Vec::new();
        let mut by_word_first: Vec<Vec<Literal>> = vec![Vec::new(); 256];
        for w in HINTS.iter().copied().chain(["value"]) {
            let mut push = |rule: usize, test: AnchorTest| {
                by_word_first[usize::from(w.as_bytes()[0])].push(Literal {
                    text: w,
                    any_case: true,
                    rule,
                    test,
                })
            };
            push(KEY_VALUE, AnchorTest::KeyValue);
            if w != "value" {
                flag.into_iter().for_each(|r| push(r, AnchorTest::Flag));
                element
                    .into_iter()
                    .for_each(|r| push(r, AnchorTest::Element));
            }
            words.push(w.to_string());
        }
        for l in literals.iter().filter(|l| l.any_case) {
            let first = l.text.as_bytes()[0].to_ascii_lowercase();
            by_word_first[usize::from(first)].push(l.clone());
            words.push(l.text.to_ascii_lowercase());
        }
        words.sort();
        words.dedup();
        Self {
            keys: [long, short]
                .iter()
                .filter(|k| !k.is_empty())
                .map(|k| Keys::new(k))
                .collect(),
            words: Keys::new(&words),
            by_word_first,
            by_first,
            dotted,
            #[cfg(test)]
            key_count,
        }
    }

    /// Every armed hit in `text`, sorted by rule and then position.
    pub(super) fn scan(&self, text: &str) -> Vec<Hit> {
        let b = text.as_bytes();
        let mut hits = Vec::new();
        // Each hit restarts the search one byte on, so literals that
        // overlap (`sk_live_` holds `_live_`) are all seen; every literal
        // starting where a key is found is compared there.
        for keys in &self.keys {
            let mut from = 0;
            while from < b.len() {
                let Some(at) = keys.find_from(b, from) else {
                    break;
                };
                for l in &self.by_first[usize::from(b[at])] {
                    let end = at + l.text.len();
                    let same = b.get(at..end).is_some_and(|t| {
                        if l.any_case {
                            t.eq_ignore_ascii_case(l.text.as_bytes())
                        } else {
                            t == l.text.as_bytes()
                        }
                    });
                    if same && passes(b, at, end, l.test) {
                        hits.push(Hit { rule: l.rule, at });
                    }
                }
                from = at + 1;
            }
        }
        // Folded a piece at a time, so the copy stays small and in cache;
        // each piece reads on far enough to hold a word that starts in it.
        FOLDED.with(|folded| {
            let mut folded = folded.borrow_mut();
            let mut piece = 0;
            while piece < b.len() {
                let piece_end = (piece + FOLD_PIECE).min(b.len());
                folded.clear();
                folded.extend(
                    b[piece..(piece_end + WORD_REACH).min(b.len())]
                        .iter()
                        .map(|c| c | 0x20),
                );
                let mut from = 0;
                while from < piece_end - piece {
                    let Some(at) = self.words.find_from(&folded, from) else {
                        break;
                    };
                    if at >= piece_end - piece {
                        break;
                    }
                    for l in &self.by_word_first[usize::from(folded[at])] {
                        let (start, end) = (piece + at, piece + at + l.text.len());
                        if folded.get(at..at + l.text.len()) == Some(l.text.as_bytes())
                            && passes(b, start, end, l.test)
                        {
                            hits.push(Hit {
                                rule: l.rule,
                                at: start,
                            });
                        }
                    }
                    from = at + 1;
                }
                piece = piece_end;
            }
        });
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
    b[at..end]
        .iter()
        .position(|&c| !keep(c))
        .map_or(end, |n| at + n)
}

fn passes(b: &[u8], start: usize, end: usize, test: AnchorTest) -> bool {
    match test {
        AnchorTest::None => true,
        AnchorTest::Blank => matches!(b.get(end), Some(b' ' | b'\t')),
        AnchorTest::SasQuery => start > 0 && matches!(b[start - 1], b'?' | b'&' | b';'),
        AnchorTest::UrlUserinfo => {
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
        AnchorTest::KeyValue => {
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
        AnchorTest::Flag => {
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
        AnchorTest::Element => {
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
    fn a_literal_is_searched_by_its_short_key_or_first_three_bytes() {
        assert_eq!(key_of("ghp_"), "ghp");
        assert_eq!(key_of("sk_live_"), "sk");
        assert_eq!(key_of("-u"), "-u");
        assert_eq!(key_of("--user"), "--");
        assert_eq!(key_of("ACCA"), "AC");
        assert_eq!(key_of("://"), "://");
        // Shorter than three bytes and no short key: the whole literal.
        assert_eq!(key_of("x:"), "x:");
    }

    #[test]
    fn the_keys_fit_two_teddy_searches() {
        // Over 64 keys, Teddy is not built and the automaton, several times
        // slower, serves instead; the short keys' search is Teddy's slimmest.
        let (long, short) = Anchors::new().key_count;
        assert!(long <= 64, "{long} keys");
        assert!(short <= 16, "{short} short keys");
    }

    #[test]
    fn the_automaton_finds_what_teddy_finds() {
        let keys: Vec<String> = ["ghp", "://", "AC"].map(String::from).to_vec();
        let packed = Keys::new(&keys);
        let automaton = Keys::automaton(&keys);
        let text = b"x ghp_1 https://h ACb ghp";
        for from in 0..text.len() {
            assert_eq!(
                packed.find_from(text, from),
                automaton.find_from(text, from),
                "{from}"
            );
        }
    }

    #[test]
    fn literals_sharing_a_start_all_arm() {
        // `--` is the key of curl's `--user ` and of every flag name.
        let (curl, flag) = (
            SHAPES
                .iter()
                .position(|s| matches!(s.anchor, Anchor::Blank(l) if l.contains(&"--user")))
                .unwrap(),
            SHAPES
                .iter()
                .position(|s| matches!(s.anchor, Anchor::FlagWord))
                .unwrap(),
        );
        assert_eq!(rules("x --user d:p"), [curl]);
        assert_eq!(rules("x --user-token v"), [flag]);
        let aws = 1;
        assert!(rules("ACCA0123456789ABCDEF").contains(&aws));
        let bearer = rules("x BeArEr abc");
        assert_eq!(bearer.len(), 1);
        assert_eq!(rules("x bEARER abc"), bearer);
    }

    #[test]
    fn secret_words_arm_key_value_only_before_a_separator() {
        assert!(rules("pass: x").contains(&KEY_VALUE));
        assert!(rules("\"API Key\" : x").contains(&KEY_VALUE));
        assert!(rules("{\\\"password\\\": 1}").contains(&KEY_VALUE));
        assert!(rules("DB_PASSWORD_FILE\t= x").contains(&KEY_VALUE));
        assert!(!rules("the password is long").contains(&KEY_VALUE));
        assert!(!rules("passport").contains(&KEY_VALUE));
        assert!(!rules("scheduler: https://x").contains(&KEY_VALUE));
        // A word further from the separator than a key can be long.
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
        assert!(!rules("a => b").contains(&element));
    }

    #[test]
    fn a_word_is_checked_as_itself_not_as_a_longer_word_with_its_first_letter() {
        // `priv` shares `pas`'s first letter and is one byte longer: read
        // from its end, the `!` would be skipped and `:` found.
        assert!(!rules("pas!: x").contains(&KEY_VALUE));
        assert!(rules("pass: x").contains(&KEY_VALUE));
    }

    #[test]
    fn a_flag_may_start_the_text_or_follow_other_words() {
        let flag = SHAPES
            .iter()
            .position(|s| matches!(s.anchor, Anchor::FlagWord))
            .unwrap();
        assert!(rules("--token v").contains(&flag));
        assert!(rules("--api_token v").contains(&flag));
        assert!(rules("deploy --api-token v").contains(&flag));
        assert!(rules("deploy --db-user-token v").contains(&flag));
        assert!(!rules("deploy -api-token v").contains(&flag));
        // `--` alone ends the options: a word after it and a blank, or
        // after a byte no name holds, is no flag.
        assert!(!rules("deploy -- token v").contains(&flag));
        assert!(!rules("deploy --.token v").contains(&flag));
    }

    #[test]
    fn an_element_name_may_run_on_after_its_word() {
        let element = SHAPES
            .iter()
            .position(|s| matches!(s.anchor, Anchor::ElementWord))
            .unwrap();
        assert!(rules("<password_hash>").contains(&element));
        assert!(rules("<password.v2>").contains(&element));
        assert!(rules("<token:x>").contains(&element));
        assert!(!rules("<password hash>").contains(&element));
    }

    #[test]
    fn a_sas_signature_needs_a_query_separator_before_it() {
        let sas = SHAPES
            .iter()
            .position(|s| matches!(s.anchor, Anchor::SasSignature))
            .unwrap();
        for text in ["u?sig=abc", "u&sig=abc", "u;sig=abc", "?sig=abc"] {
            assert_eq!(rules(text), [sas], "{text}");
        }
        // Nothing before it to read, and a letter before it.
        assert!(rules("sig=abc").is_empty());
        assert!(rules("asig=abc").is_empty());
        assert!(rules("u/sig=abc").is_empty());
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
    fn a_dotted_token_has_6_or_7_characters_between_its_dots() {
        let sig = "ZnCjm1XVW7vRze4b7Cq4se7kKWs";
        for (middle, armed) in [
            ("Cl2FM", false),
            ("Cl2FMQ", true),
            ("Cl2FMQx", true),
            ("Cl2FMQxy", false),
        ] {
            let text = format!("MTk4NjIyNDgzNDcxOTI1MjQ4.{middle}.{sig}");
            assert_eq!(rules(&text).len(), usize::from(armed), "{middle}");
        }
        // The signature's 27 characters may end the text; 26 may not.
        assert_eq!(rules(&format!(".Cl2FMQ.{sig}")).len(), 1);
        assert!(rules(&format!(".Cl2FMQ.{}", &sig[1..])).is_empty());
        // Token characters include `_` and `-`; a dot in the middle part
        // or a blank in the signature breaks the token.
        assert_eq!(rules(&format!(".Cl_-MQ.{sig}")).len(), 1);
        assert!(rules(&format!(".Cl.FMQ.{sig}")).is_empty());
        assert!(rules(".Cl2FMQ.ZnCjm1XVW7 Rze4b7Cq4se7kKWs").is_empty());
    }

    #[test]
    fn words_are_found_across_the_folded_pieces() {
        // A word that starts in one piece and ends in the next, and one
        // that starts a piece.
        for pad in [FOLD_PIECE - 3, FOLD_PIECE - 1, FOLD_PIECE, FOLD_PIECE + 1] {
            let text = format!("{}PassWord=x", " ".repeat(pad));
            let hits = Anchors::new().scan(&text);
            assert!(
                hits.iter().any(|h| h.rule == KEY_VALUE && h.at == pad),
                "{pad}"
            );
        }
    }

    #[test]
    fn lines_are_found_once_each() {
        let text = "aa\nbb bb\n\ncc";
        assert_eq!(lines_of(text, [0, 1].into_iter()), [(0, 2)]);
        assert_eq!(lines_of(text, [3, 6].into_iter()), [(3, 8)]);
        assert_eq!(
            lines_of(text, [1, 4, 10].into_iter()),
            [(0, 2), (3, 8), (10, 12)]
        );
        assert_eq!(lines_of("x", [0].into_iter()), [(0, 1)]);
    }

    #[test]
    fn a_position_on_a_line_break_gives_the_empty_run_ending_there() {
        // The scan never reports one (no anchor starts with a line break),
        // but the function takes any positions: a line found ends before
        // its break, so a position on that break is not inside it and is
        // not dropped.
        assert_eq!(lines_of("aa\nbb", [0, 2].into_iter()), [(0, 2), (2, 2)]);
    }

    #[test]
    fn a_mysql_client_arms_its_shape_only_as_a_whole_word_before_a_blank() {
        let mysql = SHAPES
            .iter()
            .position(|s| matches!(s.anchor, Anchor::Blank(l) if l.contains(&"mysqldump")))
            .unwrap();
        for text in [
            "mysql -pX",
            "mysqldump\t-pX",
            "mariadb-dump -pX",
            "mariabackup -pX",
        ] {
            assert!(rules(text).contains(&mysql), "{text}");
        }
        for text in ["mysqld -pX", "mysql-p", "mysql:8 -pX", "mariadb_x -pX"] {
            assert!(!rules(text).contains(&mysql), "{text}");
        }
    }
}

//! Text the backend writes for people, made safe to show: control and
//! bidirectional characters removed, lengths capped, names quoted.

use super::model::MAX_NAME_CHARS;

/// Characters removed from catalog text: C0 and C1 controls (and DEL), the
/// bidirectional embeddings, overrides, isolates and marks, and the Unicode
/// line and paragraph separators, any of which can forge or reorder what a
/// person reads.
pub(super) fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{061C}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// Unsafe characters that separate words; they become one space.
fn is_break_char(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

/// A text after [`clean_text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanText {
    pub text: String,
    /// How many unsafe characters were removed (or turned into a space).
    pub removed: usize,
    /// Whether the text was cut to fit.
    pub cut: bool,
}

/// Remove unsafe characters (line breaks and tabs become one space) and cut
/// to at most `max_chars` characters and `max_bytes` bytes, on a character
/// boundary, ending a cut text with `…`.
pub fn clean_text(s: &str, max_chars: usize, max_bytes: usize) -> CleanText {
    let mut text = String::with_capacity(s.len().min(max_bytes));
    let mut removed = 0;
    // A break becomes a space only between words, never at either end.
    let mut pending_space = false;
    for c in s.chars() {
        if is_unsafe_char(c) {
            removed += 1;
            pending_space |= is_break_char(c) && !text.is_empty();
        } else {
            if pending_space && !c.is_whitespace() && !text.ends_with(' ') {
                text.push(' ');
            }
            pending_space = false;
            text.push(c);
        }
    }
    let chars = text.chars().count();
    let cut = chars > max_chars || text.len() > max_bytes;
    if cut {
        let keep_bytes = max_bytes.saturating_sub('…'.len_utf8());
        let keep_chars = max_chars.saturating_sub(1);
        let mut end = 0;
        for (n, (i, c)) in text.char_indices().enumerate() {
            if n >= keep_chars || i + c.len_utf8() > keep_bytes {
                break;
            }
            end = i + c.len_utf8();
        }
        text.truncate(end);
        text.push('…');
    }
    CleanText { text, removed, cut }
}

/// `s` as one printable line: unsafe characters removed, nothing cut. For
/// log lines that quote something a backend printed.
pub fn one_line(s: &str) -> String {
    clean_text(s, usize::MAX, usize::MAX).text
}

/// `s` quoted for a message: unsafe characters shown as `\u{…}` escapes,
/// quotes and backslashes escaped, at most 64 characters.
pub fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for (n, c) in s.chars().enumerate() {
        if n == MAX_NAME_CHARS {
            out.push('…');
            break;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if is_unsafe_char(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON pointer token for a key the backend chose (RFC 6901 escapes,
/// then made printable).
pub(super) fn pointer_token(key: &str) -> String {
    let q = quote(&key.replace('~', "~0").replace('/', "~1"));
    // Drop quote()'s surrounding quotes; a pointer token is bare.
    q[1..q.len() - 1]
        .replace("\\\"", "\"")
        .replace("\\\\", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_text_and_quote() {
        assert_eq!(clean_text("a\r\n\r\nb", 64, 1024).text, "a b");
        assert_eq!(clean_text("\nlead\r\n", 64, 1024).text, "lead");
        assert_eq!(clean_text("a\n b", 64, 1024).text, "a b");
        let c = clean_text("abcdef", 4, 1024);
        assert_eq!((c.text.as_str(), c.cut), ("abc…", true));
        let c = clean_text("abcd", 4, 1024);
        assert_eq!((c.text.as_str(), c.cut, c.removed), ("abcd", false, 0));
        // A cut never splits a character, whatever the byte budget.
        for max in 3..12 {
            let c = clean_text("ééééééé", usize::MAX, max);
            assert!(c.text.len() <= max, "{max}: {}", c.text);
        }
        assert_eq!(one_line("x\u{1b}[2J\ny"), "x[2J y");
        assert_eq!(
            quote("a\"b\\c\n\u{202e}"),
            "\"a\\\"b\\\\c\\u{000a}\\u{202e}\""
        );
        assert_eq!(quote(&"y".repeat(70)), format!("\"{}…\"", "y".repeat(64)));
    }
}

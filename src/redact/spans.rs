//! Where a key's value lies in a text: the spans the key rules redact,
//! read only as far as each form's own end so a long line of keys is read
//! once.

/// Is only indentation (or a YAML list dash) before byte `at` on its line?
/// Reads back over those bytes only, not to the line's start.
pub(super) fn starts_line(text: &str, at: usize) -> bool {
    let before = &text.as_bytes()[..at];
    before
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'-'))
        .is_none_or(|i| before[i] == b'\n')
}

fn is_line_break(c: char) -> bool {
    c == '\n' || c == '\r'
}

/// Where the value after a key and its separator (ending at `start`) lies.
/// Quoted: inside the quotes. After a quoted key (JSON text): up to `,`,
/// `}` or `]`. `one_word`: up to white space, `&`, `;` or a quote. Otherwise
/// the rest of the line. Never past the line's end, and each form reads
/// only as far as its own end (a long line of keys is read once, not once
/// per key).
pub(super) fn value_span(
    text: &str,
    start: usize,
    one_word: bool,
    quoted_key: bool,
) -> (usize, usize) {
    let rest = &text[start..];
    // JSON inside a JSON string: `\"value\"`.
    if let Some(body) = rest.strip_prefix("\\\"") {
        let b = body.as_bytes();
        let len = (0..b.len())
            .find(|&i| matches!(b[i], b'\n' | b'\r') || b[i..].starts_with(b"\\\""))
            .unwrap_or(b.len());
        return (start + 2, start + 2 + len);
    }
    if let Some(q) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let body = &rest[1..];
        let mut escaped = false;
        let close = body.char_indices().find(|&(_, c)| {
            if is_line_break(c) {
                return true;
            }
            let hit = c == q && !(escaped && q == '"');
            escaped = c == '\\' && !escaped;
            hit
        });
        let len = close.map_or(body.len(), |(i, _)| i);
        return (start + 1, start + 1 + len);
    }
    let end = if quoted_key {
        rest.find([',', '}', ']', '\n', '\r'])
    } else if one_word {
        rest.find(|c: char| c.is_whitespace() || matches!(c, '&' | ';' | '"' | '\''))
    } else {
        rest.find(is_line_break)
    }
    .unwrap_or(rest.len());
    let value = rest[..end].trim_end();
    (start, start + value.len())
}

/// The value of a header (`Authorization`, `Cookie`) whose key starts at
/// `key_start` and whose separator ends at `start`: the rest of the line,
/// or up to the quote that opened just before the key (`-H 'Cookie: a=1'`).
pub(super) fn header_value_span(text: &str, key_start: usize, start: usize) -> (usize, usize) {
    let rest = &text[start..];
    let line_end = rest.find(['\n', '\r']).unwrap_or(rest.len());
    let mut line = &rest[..line_end];
    if let Some(q) = text[..key_start]
        .chars()
        .next_back()
        .filter(|c| *c == '"' || *c == '\'')
    {
        if let Some(close) = line.find(q) {
            line = &line[..close];
        }
    }
    let value = line.trim_end();
    (start, start + value.len())
}

/// Spaces before the line holding byte `at`.
pub(super) fn line_indent(text: &str, at: usize) -> usize {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..]
        .bytes()
        .take_while(|b| *b == b' ')
        .count()
}

/// The end of the lines after `from` (the end of a `key: |` line) that are
/// blank or indented deeper than `indent`, and how many held text.
pub(super) fn block_end(text: &str, from: usize, indent: usize) -> (usize, usize) {
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

    /// The text of the span `value_span` gives.
    fn value(text: &str, start: usize, one_word: bool, quoted_key: bool) -> &str {
        let (a, b) = value_span(text, start, one_word, quoted_key);
        &text[a..b]
    }

    #[test]
    fn a_line_starts_after_indentation_and_list_dashes_only() {
        for (text, at, want) in [
            ("key: v", 0, true),
            ("  key: v", 2, true),
            ("\tkey: v", 1, true),
            ("- key: v", 2, true),
            ("  -\tkey: v", 4, true),
            ("x\nkey: v", 2, true),
            ("x\n  - key: v", 6, true),
            ("a key: v", 2, false),
            ("x- key: v", 3, false),
            ("x\ra key: v", 4, false),
            ("x\n a key", 5, false),
        ] {
            assert_eq!(starts_line(text, at), want, "{text:?} at {at}");
        }
    }

    #[test]
    fn a_quoted_value_ends_at_its_closing_quote_or_the_line() {
        for (text, want) in [
            ("\"abc\" rest", "abc"),
            ("'abc' rest", "abc"),
            // A backslash escapes a double quote, not a single one.
            ("\"a\\\"b\" rest", "a\\\"b"),
            ("'a\\'b' rest", "a\\"),
            // An escaped backslash escapes nothing more.
            ("\"a\\\\\"b", "a\\\\"),
            ("\"abc\ndef\"", "abc"),
            ("\"abc\rdef\"", "abc"),
            ("\"abc", "abc"),
            // JSON inside a JSON string.
            ("\\\"abc\\\" rest", "abc"),
            ("\\\"abc\ndef", "abc"),
            ("\\\"abc\rdef", "abc"),
            ("\\\"abc", "abc"),
        ] {
            assert_eq!(value(text, 0, true, false), want, "{text:?}");
        }
        // The span is at the text's own offsets.
        assert_eq!(value_span("k=\"abc\" x", 2, true, false), (3, 6));
        assert_eq!(value_span("k=\\\"abc\\\"", 2, true, false), (4, 7));
    }

    #[test]
    fn an_unquoted_value_ends_where_its_form_ends() {
        // After a quoted key (JSON text): a comma, a brace, a bracket or the line.
        for text in [
            "abc def, x",
            "abc def} x",
            "abc def] x",
            "abc def\nx",
            "abc def\rx",
        ] {
            assert_eq!(value(text, 0, false, true), "abc def", "{text:?}");
        }
        // One word: white space, `&`, `;` or a quote ends it.
        for text in [
            "abc def", "abc&def", "abc;def", "abc\"def", "abc'def", "abc\tdef", "abc\ndef",
        ] {
            assert_eq!(value(text, 0, true, false), "abc", "{text:?}");
        }
        // The rest of the line, less trailing blanks.
        assert_eq!(value("abc def  \nnext", 0, false, false), "abc def");
        assert_eq!(value("abc def\r\nnext", 0, false, false), "abc def");
        assert_eq!(value("abc def", 0, false, false), "abc def");
        assert_eq!(value_span("k=abc def", 2, true, false), (2, 5));
        assert_eq!(value_span("k=abc def", 2, false, false), (2, 9));
    }

    #[test]
    fn a_header_value_is_the_line_or_up_to_the_quote_before_its_key() {
        let text = "Cookie: a=1; b=2  \nnext";
        assert_eq!(header_value_span(text, 0, 8), (8, 16));
        let text = "Cookie: a=1; b=2\rnext";
        assert_eq!(header_value_span(text, 0, 8), (8, 16));
        let text = "-H 'Cookie: a=1; b=2' -v";
        assert_eq!(header_value_span(text, 4, 12), (12, 20));
        let text = "-H \"Cookie: a=1\" -v";
        assert_eq!(header_value_span(text, 4, 12), (12, 15));
        // A quote that does not close on the line: the rest of the line.
        let text = "'Cookie: a=1 b\n'";
        assert_eq!(header_value_span(text, 1, 9), (9, 14));
        // No quote before the key: a quote in the value is kept.
        let text = "Cookie: a='1' b";
        assert_eq!(header_value_span(text, 0, 8), (8, 15));
    }

    #[test]
    fn the_indent_is_the_spaces_that_open_the_line() {
        for (text, at, want) in [
            ("key: |", 0, 0),
            ("    key: |", 4, 4),
            ("a\n  key: |", 4, 2),
            ("a:\n  b:\n      key: |", 14, 6),
            ("a\n\tkey: |", 3, 0),
            ("  a\nkey: |", 4, 0),
        ] {
            assert_eq!(line_indent(text, at), want, "{text:?} at {at}");
        }
    }

    #[test]
    fn a_block_is_the_lines_deeper_than_its_key() {
        // (text, from, indent, (end, lines))
        for (text, from, indent, want) in [
            ("|\n  a\n  b\nc", 1, 0, (9, 2)),
            // Blank lines inside are part of it, those after it are not.
            ("|\n  a\n\n  b\nc", 1, 0, (10, 2)),
            ("|\n  a\n  \n\nc", 1, 0, (5, 1)),
            // A line indented exactly as the key ends it; one space more does not.
            ("|\n  a\n b", 1, 1, (5, 1)),
            ("|\n  a\n  b", 1, 1, (9, 2)),
            ("|\n a", 1, 1, (1, 0)),
            ("|\n a", 1, 0, (4, 1)),
            // To the end of the text.
            ("|\n  a", 1, 0, (5, 1)),
            // Nothing after the key's line.
            ("|", 1, 0, (1, 0)),
            ("|\n", 1, 0, (1, 0)),
            ("| x\n  a", 1, 0, (1, 0)),
            // The key's own line goes on after `from`: no block, however
            // deep the rest of that line.
            ("|   x", 1, 0, (1, 0)),
        ] {
            assert_eq!(block_end(text, from, indent), want, "{text:?} from {from}");
        }
    }
}

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

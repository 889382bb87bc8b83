//! Framing: one JSON-RPC message per LF-terminated line on stdin.
//!
//! Every read is capped: a line longer than `MAX_LINE` bytes is discarded
//! as it streams past, never buffered whole, so a hostile client can't make
//! the server hold more than one limit's worth of input. The nesting check
//! is a flat byte scan, so deep input can't overflow any stack before the
//! JSON parser sees it.

use std::io::{self, BufRead};

/// Longest accepted line, not counting the LF or one trailing CR.
pub const MAX_LINE: usize = 1 << 20;
/// Deepest accepted nesting; the top-level value counts as depth 1.
pub const MAX_DEPTH: usize = 64;

#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// One line, without its LF and without a trailing CR.
    Line(Vec<u8>),
    /// A line over the limit; its bytes were dropped.
    TooLong,
    /// End of input.
    Eof,
}

pub struct FrameReader<R> {
    inner: R,
    limit: usize,
}

impl<R: BufRead> FrameReader<R> {
    pub fn new(inner: R) -> Self {
        Self::with_limit(inner, MAX_LINE)
    }

    pub fn with_limit(inner: R, limit: usize) -> Self {
        Self { inner, limit }
    }

    /// Read the next frame. A final line without LF still counts as a line.
    pub fn next_frame(&mut self) -> io::Result<Frame> {
        let mut line = Vec::new();
        let mut overflow = false;
        let mut saw_any = false;
        loop {
            let chunk = match self.inner.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                if !saw_any {
                    return Ok(Frame::Eof);
                }
                break;
            }
            saw_any = true;
            let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            if !overflow {
                // One byte of slack for a trailing CR that is stripped below.
                if line.len() + take > self.limit + 1 {
                    overflow = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(&chunk[..take]);
                }
            }
            let consumed = if done { take + 1 } else { take };
            self.inner.consume(consumed);
            if done {
                break;
            }
        }
        if overflow {
            return Ok(Frame::TooLong);
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.len() > self.limit {
            return Ok(Frame::TooLong);
        }
        Ok(Frame::Line(line))
    }
}

/// Whether the JSON text nests deeper than `max` (objects and arrays; the
/// top-level value is depth 1). Brackets inside strings don't count.
pub fn exceeds_depth(text: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in text {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Whether a line holds nothing but JSON whitespace (such lines get no reply).
pub fn is_blank(line: &[u8]) -> bool {
    line.iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn frames(input: &[u8], limit: usize) -> Vec<Frame> {
        // A tiny buffer forces lines to span many fill_buf calls.
        let reader = io::BufReader::with_capacity(3, Cursor::new(input.to_vec()));
        let mut r = FrameReader::with_limit(reader, limit);
        let mut out = Vec::new();
        loop {
            let f = r.next_frame().unwrap();
            if f == Frame::Eof {
                break;
            }
            out.push(f);
        }
        out
    }

    #[test]
    fn splits_on_lf_and_strips_one_cr() {
        assert_eq!(
            frames(b"ab\r\ncd\n\nef", 10),
            vec![
                Frame::Line(b"ab".to_vec()),
                Frame::Line(b"cd".to_vec()),
                Frame::Line(Vec::new()),
                Frame::Line(b"ef".to_vec()),
            ]
        );
    }

    #[test]
    fn line_at_limit_is_kept_one_more_is_dropped_and_reading_goes_on() {
        let mut input = vec![b'a'; 10];
        input.push(b'\n');
        input.extend(vec![b'b'; 11]);
        input.push(b'\n');
        input.extend(b"ok\n");
        assert_eq!(
            frames(&input, 10),
            vec![
                Frame::Line(vec![b'a'; 10]),
                Frame::TooLong,
                Frame::Line(b"ok".to_vec())
            ]
        );
    }

    #[test]
    fn cr_does_not_count_toward_the_limit() {
        let mut input = vec![b'a'; 10];
        input.extend(b"\r\n");
        assert_eq!(frames(&input, 10), vec![Frame::Line(vec![b'a'; 10])]);
    }

    #[test]
    fn huge_line_is_not_buffered() {
        // 50 MB of input with a 1 KiB limit: the reader holds at most the limit.
        let mut input = vec![b'x'; 50_000_000];
        input.extend(b"\n{}\n");
        let reader = io::BufReader::new(Cursor::new(input));
        let mut r = FrameReader::with_limit(reader, 1024);
        assert_eq!(r.next_frame().unwrap(), Frame::TooLong);
        assert_eq!(r.next_frame().unwrap(), Frame::Line(b"{}".to_vec()));
        assert_eq!(r.next_frame().unwrap(), Frame::Eof);
    }

    #[test]
    fn depth_counts_top_level_as_one_and_ignores_strings() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(!exceeds_depth(nested(64).as_bytes(), 64));
        assert!(exceeds_depth(nested(65).as_bytes(), 64));
        assert!(!exceeds_depth(
            br#"{"a":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}"#,
            2
        ));
        assert!(!exceeds_depth(br#"["\"[[[["]"#, 1));
        assert!(!exceeds_depth(b"42", 0));
    }

    #[test]
    fn deep_input_does_not_overflow_the_stack() {
        let deep = "[".repeat(10_000_000);
        assert!(exceeds_depth(deep.as_bytes(), MAX_DEPTH));
    }

    #[test]
    fn blank_lines() {
        assert!(is_blank(b""));
        assert!(is_blank(b" \t "));
        assert!(!is_blank(b" {} "));
    }
}

//! Line framing and the depth check over arbitrary bytes.
//!
//! The framer is compared with a plain model of the rule (split on LF, drop
//! one trailing CR, a line longer than the limit is `TooLong`), read through
//! a tiny buffer so that lines straddle many refills. The depth check is
//! compared with the real nesting depth of every input that parses as JSON.

#![no_main]

use std::io::{BufReader, Cursor};

use libfuzzer_sys::fuzz_target;
use reachweaver_mcp::frame::{exceeds_depth, is_blank, Frame, FrameReader};
use serde_json::Value;

fn model(input: &[u8], limit: usize) -> Vec<Frame> {
    if input.is_empty() {
        return Vec::new();
    }
    let mut pieces: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    if input.last() == Some(&b'\n') {
        pieces.pop();
    }
    pieces
        .into_iter()
        .map(|p| {
            let p = p.strip_suffix(b"\r").unwrap_or(p);
            if p.len() > limit {
                Frame::TooLong
            } else {
                Frame::Line(p.to_vec())
            }
        })
        .collect()
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&a, rest)) = data.split_first() else {
        return;
    };
    let Some((&b, input)) = rest.split_first() else {
        return;
    };
    let limit = 1 + usize::from(a % 64);
    let capacity = 1 + usize::from(b % 16);

    let mut reader = FrameReader::with_limit(
        BufReader::with_capacity(capacity, Cursor::new(input)),
        limit,
    );
    let mut frames = Vec::new();
    loop {
        match reader.next_frame() {
            Ok(Frame::Eof) => break,
            Ok(f) => {
                if let Frame::Line(l) = &f {
                    assert!(l.len() <= limit, "a line over the limit got through");
                    assert!(!l.contains(&b'\n'), "a line holds an LF");
                    // Blank means nothing but whitespace; anything else is not blank.
                    let blank = l.iter().all(|c| b" \t\r\n".contains(c));
                    assert_eq!(is_blank(l), blank);
                }
                frames.push(f);
            }
            Err(e) => panic!("reading from memory failed: {e}"),
        }
        assert!(frames.len() <= input.len() + 1, "more frames than bytes");
    }
    assert_eq!(frames, model(input, limit));
    // After EOF, EOF again: the reader holds no half line.
    assert_eq!(reader.next_frame().ok(), Some(Frame::Eof));

    // The depth check is the real nesting depth for every JSON text
    // (serde_json itself stops at 128 levels).
    if let Ok(v) = serde_json::from_slice::<Value>(input) {
        let d = depth(&v);
        for max in [0, 1, d.saturating_sub(1), d, d + 1, 64] {
            assert_eq!(exceeds_depth(input, max), d > max, "depth {d}, max {max}");
        }
    }
    // Never a panic or overflow on anything.
    let _ = exceeds_depth(input, limit);
});

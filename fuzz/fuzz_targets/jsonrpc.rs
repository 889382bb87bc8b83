//! One stdin line -> a JSON-RPC message, then era classification and the
//! modern envelope check for every request that parses.
//!
//! Invariants: nothing panics; every refusal carries a code the server may
//! send for that step (docs/PROTOCOL.md A3-A9, C1-C3) and an id that is null or
//! a valid id; a request re-serialized as one line parses back to the same
//! request; every outbound line is one line with no raw line separators.

#![no_main]

use libfuzzer_sys::fuzz_target;
use reachweaver_mcp::era::{self, Era, Revision};
use reachweaver_mcp::error::RpcCode::{
    InvalidParams, InvalidRequest, ParseError, UnsupportedProtocolVersion,
};
use reachweaver_mcp::jsonrpc::{self, is_valid_id, Incoming};
use serde_json::{json, Value};

/// An outbound line must be a single line that parses back to `msg`.
fn check_line(msg: &Value) {
    let line = jsonrpc::to_line(msg);
    assert!(
        !line.contains(['\n', '\r', '\u{2028}', '\u{2029}', '\u{85}']),
        "outbound line breaks: {line:?}"
    );
    let back: Value = serde_json::from_str(&line).expect("an outbound line is JSON");
    assert_eq!(&back, msg, "an outbound line does not round-trip");
}

fuzz_target!(|data: &[u8]| {
    let incoming = jsonrpc::parse_line(data);
    let utf8 = std::str::from_utf8(data).is_ok();
    match incoming {
        Incoming::Invalid { id, error } => {
            assert!(
                [ParseError, InvalidRequest, InvalidParams].contains(&error.code),
                "unexpected code {}",
                error.code
            );
            if !utf8 {
                assert_eq!(error.code, ParseError);
            }
            assert!(id.is_null() || is_valid_id(&id), "bad id echoed: {id}");
            assert!(!error.message.is_empty());
            check_line(&jsonrpc::error(&id, &error));
        }
        Incoming::Request { id, method, params } => {
            assert!(utf8, "a request from bytes that are not UTF-8");
            assert!(is_valid_id(&id), "request with an invalid id: {id}");

            let again = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            let line = jsonrpc::to_line(&again);
            match jsonrpc::parse_line(line.as_bytes()) {
                Incoming::Request {
                    id: id2,
                    method: m2,
                    params: p2,
                } => {
                    assert_eq!(id2, id);
                    assert_eq!(m2, method);
                    assert_eq!(p2, params);
                }
                other => panic!("a request did not round-trip: {other:?}"),
            }

            match era::classify(&method, &params) {
                Era::Modern => {
                    match era::check_envelope(&params) {
                        Err(e) => {
                            assert!(
                                [InvalidParams, UnsupportedProtocolVersion].contains(&e.code),
                                "envelope check code {}",
                                e.code
                            );
                            check_line(&jsonrpc::error(&id, &e));
                        }
                        Ok(rev) => {
                            // A passing envelope names a handshake-less revision, the one returned.
                            let v = params
                                .get("_meta")
                                .and_then(|m| m.get(era::META_VERSION))
                                .and_then(Value::as_str);
                            assert!(rev.is_handshakeless());
                            assert_eq!(v.and_then(Revision::parse), Some(rev));
                        }
                    }
                }
                Era::Legacy => {
                    assert_ne!(method, "server/discover");
                }
            }
            let _ = era::negotiate(&method);
        }
        Incoming::Notification { method, params } => {
            assert!(utf8);
            let _ = (method, params);
        }
        Incoming::Response => assert!(utf8),
    }
});

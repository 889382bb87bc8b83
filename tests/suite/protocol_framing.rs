//! docs/PROTOCOL.md section A: framing and the JSON-RPC envelope, in every era.

use crate::support::mcp::*;
use serde_json::{json, Value};

fn ping(id: Value) -> Value {
    req(id, "ping", json!({}))
}

#[test]
fn a1_crlf_and_blank_lines() {
    let mut s = Server::start();
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r");
    assert_eq!(s.recv(), json!({"jsonrpc":"2.0","id":1,"result":{}}));
    s.send_raw(b"");
    s.send_raw(b"   \t ");
    s.expect_nothing_before_ping();
    assert_eq!(s.request(ping(json!(2)))["result"], json!({}));
}

#[test]
fn a3_invalid_utf8_is_parse_error_and_server_goes_on() {
    let mut s = Server::start();
    s.send_raw(b"\xff\xfe{\"jsonrpc\":\"2.0\"}");
    let r = s.recv();
    assert_eq!(r["id"], Value::Null);
    assert_eq!(r["error"]["code"], -32700);
    assert!(r["error"]["message"].is_string());
    assert_eq!(
        s.request(ping(json!(0))),
        json!({"jsonrpc":"2.0","id":0,"result":{}})
    );
}

#[test]
fn a4_invalid_json_is_parse_error() {
    let mut s = Server::start();
    s.send_raw(br#"{"jsonrpc":"2.0","id":1,"method":"#);
    let r = s.recv();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (Value::Null, json!(-32700))
    );
    assert_eq!(s.request(ping(json!(1)))["result"], json!({}));
}

fn padded_tools_list(total: usize) -> Vec<u8> {
    let head = format!(
        r#"{{"jsonrpc":"2.0","id":"big","method":"tools/list","params":{{"_meta":{},"pad":""#,
        env()
    );
    let tail = r#""}}"#;
    let pad = total - head.len() - tail.len();
    let mut line = head.into_bytes();
    line.extend(std::iter::repeat_n(b'a', pad));
    line.extend(tail.as_bytes());
    assert_eq!(line.len(), total);
    line
}

#[test]
fn a5_line_of_exactly_1mib_is_served() {
    let mut s = Server::start();
    s.send_raw(&padded_tools_list(1_048_576));
    let r = s.recv();
    assert_eq!(r["id"], "big");
    assert!(r["result"]["tools"].is_array(), "{r}");
}

#[test]
fn a5_oversize_line() {
    let mut s = Server::start();
    s.send_raw(&padded_tools_list(1_048_577));
    let r = s.recv();
    assert_eq!(r["id"], Value::Null);
    assert_eq!(r["error"]["code"], -32600);
    assert_eq!(s.request(ping(json!(7)))["result"], json!({}));
}

#[test]
fn a5_huge_line_is_discarded_and_server_goes_on() {
    let mut s = Server::start();
    let mut line = vec![b'x'; 20 << 20];
    line[0] = b'{';
    s.send_raw(&line);
    let r = s.recv();
    assert_eq!(r["error"]["code"], -32600);
    assert_eq!(s.request(ping(json!(8)))["result"], json!({}));
}

fn nested(n: usize, id: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{"_meta":{},"x":{}{}}}}}"#,
        env(),
        "[".repeat(n),
        "]".repeat(n)
    )
}

#[test]
fn a6_depth_64_accepted_65_refused() {
    let mut s = Server::start();
    // The line nests N+2 deep: N=62 is exactly 64.
    s.send_raw(nested(62, 62).as_bytes());
    let r = s.recv();
    assert_eq!(r["id"], 62);
    assert!(r["result"]["tools"].is_array(), "{r}");
    s.send_raw(nested(63, 63).as_bytes());
    let r = s.recv();
    assert!(r["id"] == Value::Null || r["id"] == 63);
    assert_eq!(r["error"]["code"], -32600);
}

#[test]
fn a6_deep_nesting_cannot_crash_the_parser() {
    let mut s = Server::start();
    let mut line = "[".repeat(500_000).into_bytes();
    line.extend("]".repeat(500_000).as_bytes());
    s.send_raw(&line);
    assert_eq!(s.recv()["error"]["code"], -32600);
    assert_eq!(s.request(ping(json!(1)))["result"], json!({}));
}

#[test]
fn a7_batches_refused_without_side_effects() {
    let mut s = Server::start();
    s.send_raw(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}]"#);
    let r = s.recv();
    assert_eq!(
        r,
        json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":r["error"]["message"]}})
    );
    s.expect_nothing_before_ping();
    // The initialize inside the batch did not happen: tools/list is still refused as uninitialized.
    assert_eq!(
        s.request(req(json!(2), "tools/list", json!({})))["error"]["code"],
        -32602
    );
    s.send_raw(b"[]");
    assert_eq!(s.recv()["error"]["code"], -32600);
}

#[test]
fn a8_non_object_top_level() {
    let mut s = Server::start();
    for line in ["42", "\"x\"", "true", "null"] {
        s.send_raw(line.as_bytes());
        let r = s.recv();
        assert_eq!(
            (r["id"].clone(), r["error"]["code"].clone()),
            (Value::Null, json!(-32600)),
            "{line}"
        );
    }
}

#[test]
fn a9_bad_envelope() {
    let mut s = Server::start();
    s.send_raw(br#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#);
    let r = s.recv();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(5), json!(-32600))
    );
    s.send_raw(br#"{"jsonrpc":"2.0","method":7}"#);
    let r = s.recv();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    s.send_raw(br#"{"id":6,"method":"ping"}"#);
    assert_eq!(s.recv()["error"]["code"], -32600);
}

#[test]
fn a10_null_id_is_not_executed() {
    let mut s = Server::start();
    s.send_raw(br#"{"jsonrpc":"2.0","id":null,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
    let r = s.recv();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    // Not executed: a real initialize still works and negotiates what it asks.
    assert_eq!(
        s.initialize("2025-06-18")["result"]["protocolVersion"],
        "2025-06-18"
    );
}

#[test]
fn a11_id_types() {
    let mut s = Server::start();
    for id in ["1.5", "true", "1.0", "1e3", "{}", "[1]"] {
        s.send_raw(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#).as_bytes());
        let r = s.recv();
        assert_eq!(
            (r["id"].clone(), r["error"]["code"].clone()),
            (Value::Null, json!(-32600)),
            "id {id}"
        );
    }
}

#[test]
fn a12_ids_echoed_exactly() {
    let mut s = Server::start();
    s.send_raw(br#"{"jsonrpc":"2.0","id":"7","method":"ping"}"#);
    assert_eq!(s.recv(), json!({"jsonrpc":"2.0","id":"7","result":{}}));
    for id in [
        "0",
        "-12",
        "\"\"",
        "\"h\u{e9}llo \u{2603}\"",
        "\"server-discover-probe-1\"",
    ] {
        s.send_raw(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#).as_bytes());
        let r = s.recv();
        assert_eq!(r["id"], serde_json::from_str::<Value>(id).unwrap());
    }
    // Past 2^53 and past 2^64: digit for digit, checked on the raw text.
    for big in ["9007199254740993", "123456789012345678901234567890"] {
        let mut raw = Server::start();
        raw.send_raw(format!(r#"{{"jsonrpc":"2.0","id":{big},"method":"unknown/x"}}"#).as_bytes());
        let line = raw.raw_line();
        assert!(line.contains(&format!(r#""id":{big}"#)), "{line}");
        assert!(line.contains("-32601"), "{line}");
    }
}

#[test]
fn a13_member_order_and_params_shapes() {
    let mut s = Server::start();
    s.send_raw(br#"{"method":"ping","jsonrpc":"2.0","id":3}"#);
    assert_eq!(s.recv(), json!({"jsonrpc":"2.0","id":3,"result":{}}));
    s.send_raw(br#"{"jsonrpc":"2.0","id":4,"method":"ping","params":[1]}"#);
    assert_eq!(s.recv()["error"]["code"], -32602);
    s.send_raw(br#"{"jsonrpc":"2.0","id":5,"method":"ping","params":null}"#);
    assert_eq!(s.recv()["error"]["code"], -32600);
    s.send_raw(br#"{"jsonrpc":"2.0","id":6,"method":"ping","params":"x"}"#);
    assert_eq!(s.recv()["error"]["code"], -32600);
}

#[test]
fn a14_notifications_never_answered() {
    let mut s = Server::start();
    for n in [
        r#"{"jsonrpc":"2.0","method":"notifications/whatever","params":5}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":"junk"}"#,
        r#"{"jsonrpc":"2.0","method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
    ] {
        s.send_raw(n.as_bytes());
    }
    s.expect_nothing_before_ping();
    assert_eq!(
        s.request(req(json!(1), "ping", json!({})))["result"],
        json!({})
    );
}

#[test]
fn a15_client_responses_ignored() {
    let mut s = Server::start();
    s.send_raw(br#"{"jsonrpc":"2.0","id":99,"result":{}}"#);
    s.send_raw(br#"{"jsonrpc":"2.0","id":98,"error":{"code":1,"message":"x"}}"#);
    s.expect_nothing_before_ping();
    assert_eq!(
        s.request(req(json!(1), "ping", json!({})))["result"],
        json!({})
    );
}

#[test]
fn a16_unknown_methods_in_both_eras() {
    let mut s = Server::start();
    s.initialize("2025-11-25");
    for m in [
        "prompts/list",
        "resources/list",
        "completion/complete",
        "logging/setLevel",
        "tasks/list",
        "nope",
    ] {
        let r = s.request(req(json!(m), m, json!({})));
        assert_eq!(r["error"]["code"], -32601, "legacy {m}");
        assert_eq!(r["id"], m);
        let r = s.request(modern(json!(format!("m-{m}")), m, json!({})));
        assert_eq!(r["error"]["code"], -32601, "modern {m}");
    }
}

#[test]
fn a17_invalid_params() {
    let mut s = Server::start();
    let r = s.request(req(json!(1), "server/discover", json!({})));
    assert_eq!(r["error"]["code"], -32602);
    let r = s.request(modern(json!(2), "tools/call", json!({"arguments": {}})));
    assert_eq!(r["error"]["code"], -32602);
    let r = s.request(modern(json!(3), "tools/list", json!({"cursor": "abc"})));
    assert_eq!(r["error"]["code"], -32602);
    let r = s.request(req(json!(4), "initialize", json!({"capabilities": {}})));
    assert_eq!(r["error"]["code"], -32602);
}

#[test]
fn a18_error_shape() {
    let mut s = Server::start();
    let r = s.request(req(json!(1), "nope", json!({})));
    assert!(r["error"]["code"].is_i64());
    assert!(r["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
    assert!(r.get("result").is_none());
}

#[test]
fn a20_id_reuse() {
    let mut s = Server::start();
    for _ in 0..3 {
        assert_eq!(
            s.request(req(json!(5), "ping", json!({})))["result"],
            json!({})
        );
    }
    // Two in-flight calls with the same id each get their own answer.
    let call = modern(
        json!(9),
        "tools/call",
        json!({"name": "version", "arguments": {}}),
    );
    s.send(&call);
    s.send(&call);
    let a = s.recv();
    let b = s.recv();
    assert_eq!((a["id"].clone(), b["id"].clone()), (json!(9), json!(9)));
    assert_eq!(a["result"]["isError"], false);
    assert_eq!(b["result"]["isError"], false);
}

//! docs/PROTOCOL.md sections B (era per message), C (modern) and D (legacy).

use crate::support::mcp::*;
use serde_json::{json, Value};

const SI: &str = "io.modelcontextprotocol/serverInfo";

fn assert_modern_result(r: &Value) {
    let res = &r["result"];
    assert_eq!(res["resultType"], "complete", "{r}");
    let si = &res["_meta"][SI];
    assert_eq!(si["name"], "reachweaver-mcp");
    assert!(si["version"].as_str().is_some_and(|v| !v.is_empty()));
}

fn assert_legacy_result(r: &Value) {
    let res = &r["result"];
    assert!(res.get("resultType").is_none(), "{r}");
    assert!(res.get("ttlMs").is_none(), "{r}");
    // A legacy result carries no identity in `_meta`; `tools/list` carries
    // only the digest of the served tools there (docs/PINS.md).
    let meta_keys: Vec<&String> = res
        .get("_meta")
        .and_then(Value::as_object)
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert!(
        meta_keys.is_empty() || meta_keys == ["io.reachweaver/tools-sha256"],
        "{r}"
    );
}

#[test]
fn b1_progress_token_meta_is_legacy() {
    let mut s = Server::start();
    let r = s.request(req(
        json!(1),
        "tools/list",
        json!({"_meta": {"progressToken": 1}}),
    ));
    assert_eq!(r["error"]["code"], -32602);
}

#[test]
fn b2_modern_is_stateless() {
    let mut s = Server::start();
    let r1 = s.request(modern(json!("r1"), "tools/list", json!({})));
    s.initialize("2025-06-18");
    let r2 = s.request(modern(json!("r1"), "tools/list", json!({})));
    assert_eq!(r1["result"], r2["result"]);
}

#[test]
fn b3_legacy_state_is_per_process() {
    let mut s = Server::start();
    s.initialize("2024-11-05");
    let tools = s.request(req(json!(2), "tools/list", json!({})))["result"]["tools"].clone();
    for t in tools.as_array().unwrap() {
        let keys: Vec<_> = t.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["name", "description", "inputSchema"], "{t}");
    }
    let mut other = Server::start();
    assert_eq!(
        other.request(req(json!(1), "tools/list", json!({})))["error"]["code"],
        -32602
    );
}

#[test]
fn b4_initialize_is_always_legacy() {
    let mut s = Server::start();
    let r = s.request(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"},"_meta": env()}}));
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
    assert_legacy_result(&r);
}

#[test]
fn b5_mixing_eras_on_one_process() {
    let mut s = Server::start();
    let d = s.request(modern(json!("d"), "server/discover", json!({})));
    assert_modern_result(&d);
    s.initialize("2025-11-25");
    let r = s.request(modern(json!(8), "tools/list", json!({})));
    assert_modern_result(&r);
    assert!(r["result"]["ttlMs"].is_u64());
    assert_eq!(r["result"]["cacheScope"], "public");
    let l = s.request(req(json!(9), "tools/list", json!({})));
    assert_legacy_result(&l);
}

#[test]
fn b6_discover_is_answered_at_once() {
    let mut s = Server::start();
    // Start-up (the catalog read, on a busy machine as long as it takes)
    // is over once the server says how it runs calls, before it reads
    // stdin; the clock starts there.
    s.stderr_when("the start-up line", |e| e.contains(" at once, up to "));
    let t = std::time::Instant::now();
    let r = s.request(modern(
        json!("server-discover-probe-1"),
        "server/discover",
        json!({}),
    ));
    assert!(r["result"].is_object());
    // The bound is what is promised: answered before a client's 10 s
    // timeout. Nothing the server does for it takes more than a moment,
    // so only a server that waits on something (a backend run, the
    // handshake) comes near it, however busy the machine.
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn c1_envelope_required() {
    let mut s = Server::start();
    let r = s.request(req(json!(4), "server/discover", json!({})));
    assert_eq!(r["error"]["code"], -32602);
    let r = s.request(req(
        json!(5),
        "tools/list",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
    ));
    assert_eq!(r["error"]["code"], -32602);
    // clientInfo is optional; unknown keys and the Inspector's capabilities are accepted.
    let r = s.request(req(json!(6), "server/discover", json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"roots":{"listChanged":true},"extensions":{"io.modelcontextprotocol/tasks":{}}},
        "io.modelcontextprotocol/logLevel": "debug",
        "progressToken": 3, "traceparent": "00-x", "vendor.example/x": 1}})));
    assert_modern_result(&r);
}

#[test]
fn c2_validation_order() {
    let mut s = Server::start();
    let r = s.request(req(json!(4), "tools/list", json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": 2026, "io.modelcontextprotocol/clientCapabilities": {}}})));
    assert_eq!(r["error"]["code"], -32602);
    // Version before method: an unknown method at a bad version is -32022.
    let r = s.request(req(json!(5), "nope/x", json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "1999-01-01", "io.modelcontextprotocol/clientCapabilities": {}}})));
    assert_eq!(r["error"]["code"], -32022);
    // Method before params: an unknown method with a bad cursor is -32601.
    let r = s.request(modern(json!(6), "nope/x", json!({"cursor": 5})));
    assert_eq!(r["error"]["code"], -32601);
}

#[test]
fn c3_unsupported_version() {
    let mut s = Server::start();
    let discover = s.request(modern(json!(1), "server/discover", json!({})));
    let served: Vec<Value> = discover["result"]["supportedVersions"]
        .as_array()
        .unwrap()
        .clone();
    for bad in ["1900-01-01", "2025-11-25", "junk"] {
        let r = s.request(req(json!(3), "tools/list", json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": bad, "io.modelcontextprotocol/clientCapabilities": {}}})));
        assert_eq!(r["id"], 3);
        assert_eq!(r["error"]["code"], -32022);
        assert!(r["error"]["message"].is_string());
        let data = &r["error"]["data"];
        assert_eq!(data["requested"], bad);
        let supported = data["supported"].as_array().unwrap();
        assert_eq!(supported[0], "2026-07-28");
        for v in supported {
            assert!(served.contains(v));
        }
    }
}

#[test]
fn c4_never_requires_client_capabilities() {
    let mut s = Server::start();
    let r = s.request(modern(
        json!(1),
        "tools/call",
        json!({"name": "version", "arguments": {}}),
    ));
    assert_modern_result(&r);
    assert_eq!(r["result"]["isError"], false);
}

#[test]
fn c5_discover() {
    let mut s = Server::start();
    let r = s.request(modern(
        json!("d1"),
        "server/discover",
        json!({"ignored": true}),
    ));
    assert_eq!(r["id"], "d1");
    let res = &r["result"];
    assert_modern_result(&r);
    assert_eq!(
        res["supportedVersions"],
        json!([
            "2026-07-28",
            "2025-11-25",
            "2025-06-18",
            "2025-03-26",
            "2024-11-05"
        ])
    );
    assert_eq!(
        res["capabilities"],
        json!({"tools": {"listChanged": false}})
    );
    assert!(res["ttlMs"].as_u64().is_some());
    assert_eq!(res["cacheScope"], "public");
    assert!(res["instructions"].as_str().is_some_and(|i| !i.is_empty()));
    assert!(
        res.get("serverInfo").is_none(),
        "serverInfo belongs in _meta"
    );
}

#[test]
fn c6_c7_every_modern_result_is_stamped() {
    let mut s = Server::start();
    let d = s.request(modern(json!(1), "server/discover", json!({})));
    let l = s.request(modern(json!(2), "tools/list", json!({})));
    let c = s.request(modern(json!(3), "tools/call", json!({"name": "version"})));
    for r in [&d, &l, &c] {
        assert_modern_result(r);
        assert_eq!(r["result"]["_meta"][SI], d["result"]["_meta"][SI]);
    }
}

#[test]
fn c8_tools_list_modern() {
    let mut s = Server::start();
    let a = s.request(modern(json!("s-2"), "tools/list", json!({})));
    let res = &a["result"];
    assert_modern_result(&a);
    assert!(res.get("nextCursor").is_none());
    assert!(res["ttlMs"].as_u64().is_some());
    assert_eq!(res["cacheScope"], "public");
    let tools = res["tools"].as_array().unwrap();
    assert!(
        tools.len() >= 20,
        "the reference backend offers about 30 tools, got {}",
        tools.len()
    );
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "deterministic order");
    let b = s.request(modern(json!("s-3"), "tools/list", json!({})));
    assert_eq!(
        a["result"]["tools"].to_string(),
        b["result"]["tools"].to_string()
    );
    for cursor in [json!("abc"), json!("")] {
        let r = s.request(modern(json!(9), "tools/list", json!({"cursor": cursor})));
        assert_eq!(r["error"]["code"], -32602);
    }
}

#[test]
fn c10_removed_methods() {
    let mut s = Server::start();
    for m in [
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tasks/get",
        "tasks/cancel",
    ] {
        let r = s.request(modern(json!(6), m, json!({})));
        assert_eq!(r["error"]["code"], -32601, "{m}");
    }
    // The same ping without the envelope is legacy and answered.
    assert_eq!(
        s.request(req(json!(7), "ping", json!({})))["result"],
        json!({})
    );
}

#[test]
fn c11_subscriptions_listen() {
    let mut s = Server::start();
    let r = s.request(modern(
        json!(9),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    ));
    assert_eq!(r["error"]["code"], -32601);
}

#[test]
fn c12_log_level_checked() {
    let mut s = Server::start();
    let mut m = modern(json!(1), "tools/list", json!({}));
    m["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("verbose");
    assert_eq!(s.request(m)["error"]["code"], -32602);
}

#[test]
fn c13_mrtr_fields_ignored() {
    let mut s = Server::start();
    let r = s.request(modern(
        json!(1),
        "tools/call",
        json!({"name": "version", "arguments": {},
        "inputResponses": {"x": {}}, "requestState": "abc"}),
    ));
    assert_eq!(r["result"]["resultType"], "complete");
    assert_eq!(r["result"]["isError"], false);
}

#[test]
fn d1_initialize_params_required() {
    for params in [
        json!({"capabilities":{},"clientInfo":{"name":"t","version":"1"}}),
        json!({"protocolVersion":"2025-11-25","clientInfo":{"name":"t","version":"1"}}),
        json!({"protocolVersion":"2025-11-25","capabilities":{}}),
        json!({"protocolVersion":5,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}),
        json!({"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t"}}),
    ] {
        let mut s = Server::start();
        let r = s.request(req(json!(1), "initialize", params.clone()));
        assert_eq!(r["error"]["code"], -32602, "{params}");
    }
}

#[test]
fn d2_version_negotiation() {
    for (asked, got) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
        ("2024-10-07", "2025-11-25"),
    ] {
        let mut s = Server::start();
        let r = s.initialize(asked);
        assert_eq!(r["id"], "init");
        assert_eq!(r["result"]["protocolVersion"], got, "asked {asked}");
    }
}

#[test]
fn d3_initialize_result_by_revision() {
    for (rev, keys) in [
        ("2024-11-05", vec!["name", "version"]),
        ("2025-03-26", vec!["name", "version"]),
        ("2025-06-18", vec!["name", "version", "title"]),
        (
            "2025-11-25",
            vec!["name", "version", "title", "description"],
        ),
    ] {
        let mut s = Server::start();
        let r = s.initialize(rev);
        let res = &r["result"];
        assert_eq!(
            res["capabilities"],
            json!({"tools": {"listChanged": false}})
        );
        let info: Vec<_> = res["serverInfo"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(info, keys, "{rev}");
        assert!(res["instructions"].is_string());
        assert_legacy_result(&r);
    }
}

#[test]
fn d4_requests_before_initialize() {
    let mut s = Server::start();
    assert_eq!(
        s.request(req(json!(1), "tools/list", json!({})))["error"]["code"],
        -32602
    );
    assert_eq!(
        s.request(req(json!(2), "ping", json!({})))["result"],
        json!({})
    );
    let r = s.request(req(json!(3), "tools/call", json!({"name": "version"})));
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(
        s.request(req(json!(4), "nope", json!({})))["error"]["code"],
        -32601
    );
}

#[test]
fn d5_initialized_notification_is_silent() {
    let mut s = Server::start();
    s.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    s.expect_nothing_before_ping();
    let r = s.request(req(
        json!("init"),
        "initialize",
        json!({
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}),
    ));
    assert!(r["result"].is_object());
    // Requests are served before `initialized` arrives.
    assert!(s.request(req(json!(2), "tools/list", json!({})))["result"]["tools"].is_array());
    s.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    s.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    s.expect_nothing_before_ping();
}

#[test]
fn d6_second_initialize_refused() {
    let mut s = Server::start();
    s.initialize("2025-11-25");
    let r = s.request(req(
        json!("init"),
        "initialize",
        json!({
        "protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}),
    ));
    assert_eq!(r["error"]["code"], -32600);
    let tools = s.request(req(json!(2), "tools/list", json!({})))["result"]["tools"].clone();
    assert!(tools[0].get("title").is_some(), "still 2025-11-25 shaped");
}

#[test]
fn d7_ping() {
    let mut s = Server::start();
    assert_eq!(
        s.request(req(json!("123"), "ping", json!({}))),
        json!({"jsonrpc":"2.0","id":"123","result":{}})
    );
    s.initialize("2024-11-05");
    s.send_raw(
        br#"{"jsonrpc":"2.0","id":5,"method":"ping","params":{"_meta":{"progressToken":2}}}"#,
    );
    assert_eq!(s.recv()["result"], json!({}));
}

#[test]
fn d8_tools_list_legacy() {
    let mut s = Server::start();
    s.initialize("2025-11-25");
    s.send_raw(br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    let r = s.recv();
    let keys: Vec<_> = r["result"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["tools", "_meta"]);
    let meta: Vec<_> = r["result"]["_meta"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(meta, ["io.reachweaver/tools-sha256"]);
    let r = s.request(req(json!(3), "tools/list", json!({"cursor": "x"})));
    assert_eq!(r["error"]["code"], -32602);
}

#[test]
fn d10_d11_other_methods_and_task_augmentation() {
    let mut s = Server::start();
    s.initialize("2025-11-25");
    assert_eq!(
        s.request(req(json!(1), "logging/setLevel", json!({"level": "info"})))["error"]["code"],
        -32601
    );
    let r = s.request(req(
        json!(2),
        "tools/call",
        json!({"name": "version", "task": {"ttl": 1000}}),
    ));
    assert_eq!(r["result"]["isError"], false);
    assert!(r["result"].get("task").is_none());
}

#[test]
fn d13_client_notifications_ignored() {
    let mut s = Server::start();
    s.initialize("2025-11-25");
    for m in [
        "notifications/progress",
        "notifications/roots/list_changed",
        "notifications/tasks/status",
    ] {
        s.send(&json!({"jsonrpc":"2.0","method":m,"params":{}}));
    }
    s.expect_nothing_before_ping();
}

fn tools_at(rev: &str) -> Vec<Value> {
    let mut s = Server::start();
    if rev == MODERN {
        s.request(modern(json!(1), "tools/list", json!({})))["result"]["tools"]
            .as_array()
            .unwrap()
            .clone()
    } else {
        s.initialize(rev);
        s.request(req(json!(1), "tools/list", json!({})))["result"]["tools"]
            .as_array()
            .unwrap()
            .clone()
    }
}

#[test]
fn e1_tool_fields_by_revision() {
    let allowed: &[(&str, &[&str])] = &[
        ("2024-11-05", &["name", "description", "inputSchema"]),
        (
            "2025-03-26",
            &["name", "description", "inputSchema", "annotations"],
        ),
        (
            "2025-06-18",
            &[
                "name",
                "title",
                "description",
                "inputSchema",
                "outputSchema",
                "annotations",
            ],
        ),
        (
            "2025-11-25",
            &[
                "name",
                "title",
                "description",
                "inputSchema",
                "outputSchema",
                "annotations",
            ],
        ),
        (
            MODERN,
            &[
                "name",
                "title",
                "description",
                "inputSchema",
                "outputSchema",
                "annotations",
            ],
        ),
    ];
    let mut names_first: Option<Vec<String>> = None;
    for (rev, keys) in allowed {
        let tools = tools_at(rev);
        let names: Vec<String> = tools
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        if let Some(first) = &names_first {
            assert_eq!(&names, first, "same tools in the same order at {rev}");
        }
        names_first = Some(names);
        for t in &tools {
            let got: Vec<&str> = t.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(&got, keys, "{rev}: {t}");
        }
    }
}

#[test]
fn e2_e3_e5_e7_names_descriptions_schemas_annotations() {
    let re = |n: &str| {
        !n.is_empty()
            && n.len() <= 64
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
    };
    let tools = tools_at(MODERN);
    let mut seen = std::collections::HashSet::new();
    for t in &tools {
        let name = t["name"].as_str().unwrap();
        assert!(re(name), "{name}");
        assert!(seen.insert(name.to_string()), "unique {name}");
        assert!(
            t["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{name}"
        );
        let schema = &t["inputSchema"];
        assert_eq!(schema["type"], "object", "{name}");
        assert!(schema.get("$schema").is_none());
        assert_eq!(schema["additionalProperties"], false, "{name}");
        let a = &t["annotations"];
        for k in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(a[k].is_boolean(), "{name} {k}");
        }
        assert_eq!(
            a["readOnlyHint"], true,
            "only read-only tools without --allow-drafts: {name}"
        );
        assert_eq!(a["openWorldHint"], false);
        assert_eq!(t["outputSchema"]["type"], "object");
    }
}

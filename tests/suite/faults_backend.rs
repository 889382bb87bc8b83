//! A backend that misbehaves during a tool call: each fault gets the exact
//! error result it deserves, nothing it started outlives the call, no
//! per-run temp folder is left behind, and the server answers afterwards.

use std::time::{Duration, Instant};

use crate::support::faults::*;
use serde_json::json;

#[test]
fn a_backend_killed_by_sigsegv_is_backend_failed() {
    let mut f = Faulty::start(&[]);
    let m = f.marker("segv");
    let res = f.expect_error(
        "crash",
        json!({"signal": "segv", "marker": m}),
        "backend_failed",
    );
    let msg = res["structuredContent"]["output"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(msg.contains("SIGSEGV"), "{msg}");
    // The first stderr line is quoted.
    assert!(msg.contains("about to crash"), "{msg}");
    f.ping();
    f.assert_no_leftover_tmp();
}

#[test]
fn a_backend_killed_by_sigabrt_is_backend_failed() {
    let mut f = Faulty::start(&[]);
    let res = f.expect_error("crash", json!({"signal": "abrt"}), "backend_failed");
    let msg = res["structuredContent"]["output"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(msg.contains("SIGABRT"), "{msg}");
    f.ping();
    f.assert_no_leftover_tmp();
}

#[test]
fn a_hanging_backend_times_out_and_its_tree_is_killed() {
    let mut f = Faulty::start(&["--call-timeout", "2"]);
    let m = f.marker("hang");
    let t = Instant::now();
    f.server.send(&crate::support::mcp::modern(
        json!("hang"),
        "tools/call",
        json!({"name": "hang", "arguments": {"marker": m}}),
    ));
    assert_running(&m);
    let r = f.server.recv_id(&json!("hang"));
    let took = t.elapsed();
    let envelope = &r["result"]["structuredContent"];
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(envelope["output"]["error"]["code"], "timeout", "{r}");
    // Not before the call timeout (2 s, counted from before the call was
    // sent); and, the run never ending by itself, the `timeout` answer is
    // what shows it was the timeout that ended it (no upper bound: the
    // wait for the answer only guards against a hang).
    assert!(took >= Duration::from_secs(2), "answered after {took:?}");
    assert_gone(&m);
    f.ping();
    f.assert_no_leftover_tmp();
    f.server.stderr_when("the timed-out call's log line", |l| {
        l.contains("call tool=hang exit=timeout")
    });
}

#[test]
fn garbage_on_stdout_is_backend_failed() {
    let mut f = Faulty::start(&[]);
    let res = f.expect_error("garbage", json!({}), "backend_failed");
    let msg = res["structuredContent"]["output"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(msg.contains("did not print one JSON document"), "{msg}");
    f.ping();
    f.assert_no_leftover_tmp();
}

#[test]
fn bytes_that_are_not_utf8_are_backend_failed_and_the_reply_is_clean_utf8() {
    let mut f = Faulty::start(&[]);
    // The harness checks that every stdout line is UTF-8 and parses.
    let res = f.expect_error("not_utf8", json!({}), "backend_failed");
    let msg = res["structuredContent"]["output"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(msg.contains("did not print one JSON document"), "{msg}");
    assert!(
        msg.contains("bad bytes on stderr: \u{FFFD}"),
        "stderr's bad bytes are replaced, not passed on: {msg:?}"
    );
    f.ping();
    f.assert_no_leftover_tmp();
}

#[test]
fn an_endless_stream_is_output_too_large_and_the_writer_is_killed() {
    let mut f = Faulty::start(&["--max-output-bytes", "65536"]);
    let m = f.marker("flood");
    // The flood never ends by itself: its answer, whenever it comes, is
    // the output bound's.
    let res = f.expect_error("flood", json!({"marker": m}), "output_too_large");
    let msg = res["structuredContent"]["output"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(msg.contains("65536"), "{msg}");
    assert_gone(&m);
    f.ping();
    f.assert_no_leftover_tmp();
}

#[test]
fn a_detached_daemon_does_not_outlive_the_call() {
    let mut f = Faulty::start(&[]);
    let m = f.marker("daemon");
    let res = f.call(json!("daemon"), "daemon", json!({"marker": m}));
    // The backend itself answered properly; what it left running must die.
    assert_eq!(res["isError"], false, "{res}");
    assert_eq!(
        res["structuredContent"],
        json!({"exit_code": 0, "output": {"started": true}})
    );
    assert_gone(&m);
    f.ping();
    f.assert_no_leftover_tmp();
}

#[test]
fn closing_stdout_then_running_on_times_out_and_is_killed() {
    let mut f = Faulty::start(&["--call-timeout", "2"]);
    let m = f.marker("closeout");
    let t = Instant::now();
    f.expect_error("close_stdout", json!({"marker": m}), "timeout");
    // Not before the call timeout; the `timeout` code shows what ended it.
    assert!(t.elapsed() >= Duration::from_secs(2), "{:?}", t.elapsed());
    assert_gone(&m);
    f.ping();
    f.assert_no_leftover_tmp();
}

#[test]
fn exiting_before_reading_or_printing_anything_is_backend_failed() {
    let mut f = Faulty::start(&[]);
    let res = f.expect_error("exit_early", json!({}), "backend_failed");
    let msg = res["structuredContent"]["output"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(
        msg.contains("exited with code 0 but did not print one JSON document"),
        "{msg}"
    );
    f.ping();
    f.assert_no_leftover_tmp();
}

#[test]
fn faults_in_concurrent_calls_stay_in_their_own_call() {
    let mut f = Faulty::start(&["--call-timeout", "3", "--max-concurrent-calls", "4"]);
    let m = f.marker("mixed");
    let calls = [
        ("a", "crash", json!({"signal": "segv"}), "backend_failed"),
        ("b", "flood", json!({"marker": m}), "output_too_large"),
        ("c", "hang", json!({"marker": m}), "timeout"),
        ("d", "garbage", json!({}), "backend_failed"),
    ];
    for (id, tool, args, _) in &calls {
        f.server.send(&crate::support::mcp::modern(
            json!(id),
            "tools/call",
            json!({"name": tool, "arguments": args}),
        ));
    }
    f.server.send(&crate::support::mcp::modern(
        json!("q"),
        "tools/call",
        json!({"name": "quick", "arguments": {}}),
    ));
    let mut seen = std::collections::HashMap::new();
    for _ in 0..calls.len() + 1 {
        let r = f.server.recv();
        seen.insert(r["id"].as_str().unwrap().to_string(), r);
    }
    for (id, _, _, code) in &calls {
        let r = &seen[*id];
        assert_eq!(
            r["result"]["structuredContent"]["output"]["error"]["code"], *code,
            "{r}"
        );
    }
    assert_eq!(
        seen["q"]["result"]["structuredContent"],
        json!({"exit_code": 0, "output": {"ok": true}})
    );
    assert_gone(&m);
    f.ping();
    f.assert_no_leftover_tmp();
}

#[test]
fn megabytes_on_stderr_neither_block_the_backend_nor_reach_the_client() {
    // A backend blocked on a full stderr pipe would never finish: the call
    // timeout would end it and the answer would be `timeout`, not its own.
    let mut f = Faulty::start(&["--call-timeout", "40"]);
    let res = f.call(json!("noisy"), "stderr_flood", json!({}));
    assert_eq!(
        res["structuredContent"],
        json!({"exit_code": 0, "output": {"ok": true}}),
        "{res}"
    );
    f.ping();
    f.assert_no_leftover_tmp();
}

//! A client that misbehaves: cancels what isn't running, leaves with calls
//! in flight, stops reading for a while, or closes its end of stdout.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use crate::support::faults::*;
use crate::support::mcp::{modern, req, server_bin, HANG_GUARD};
use serde_json::{json, Value};

fn cancel(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
           "params": {"requestId": id, "reason": "test"}})
}

#[test]
fn cancelling_an_unknown_or_finished_request_is_ignored() {
    let mut f = Faulty::start(&[]);
    let quick = |id: Value| modern(id, "tools/call", json!({"name": "quick", "arguments": {}}));
    let r = f.server.request(quick(json!(5)));
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"exit_code": 0, "output": {"ok": true}})
    );
    // Finished, never seen, wrong type of the same id, malformed, missing.
    f.server.send(&cancel(json!(5)));
    f.server.send(&cancel(json!(999)));
    f.server.send(&cancel(json!("5")));
    f.server.send(&cancel(json!({"not": "an id"})));
    f.server
        .send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}));
    f.server
        .send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled"}));
    // Cancels are handled as they are read; had any of them been answered,
    // that answer would come before the ping's.
    f.server.expect_nothing_before_ping();
    // The id can be used again, and the new call is not the cancelled one.
    let r = f.server.request(quick(json!(5)));
    assert_eq!(r["result"]["isError"], false, "{r}");
    f.ping();
}

#[test]
fn stdin_eof_with_hanging_calls_answers_them_at_the_call_timeout_and_exits_zero() {
    let mut f = Faulty::start(&["--max-concurrent-calls", "4", "--call-timeout", "1"]);
    let m = f.marker("eof");
    for id in ["h1", "h2", "h3"] {
        f.server.send(&modern(
            json!(id),
            "tools/call",
            json!({"name": "hang", "arguments": {"marker": m}}),
        ));
    }
    assert!(
        wait_for(Duration::from_secs(10), || pids_with(&m).len() >= 3).is_some(),
        "the hanging calls never all started"
    );
    let (status, _) = f.server.finish();
    assert_eq!(status.code(), Some(0));
    // EOF finishes the work, not cut short: each hanging call is answered,
    // and its answer is the call timeout's (the runs never end by
    // themselves), so --call-timeout is what bounded the exit.
    let mut ids = HashSet::new();
    for r in f.server.rest_after_exit() {
        assert_eq!(r["result"]["isError"], true, "{r}");
        assert_eq!(
            r["result"]["structuredContent"]["output"]["error"]["code"], "timeout",
            "{r}"
        );
        ids.insert(r["id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids.len(), 3, "every hanging call is answered: {ids:?}");
    assert_gone(&m);
    f.assert_no_leftover_tmp();
}

#[test]
fn sigterm_with_calls_running_exits_143_and_kills_them() {
    let mut f = Faulty::start(&["--max-concurrent-calls", "2"]);
    let m = f.marker("term");
    f.server.send(&modern(
        json!("h"),
        "tools/call",
        json!({"name": "hang", "arguments": {"marker": m}}),
    ));
    assert_running(&m);
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(f.server.pid() as i32, libc::SIGTERM);
    }
    // At once: the hanging run would last forever, and the default call
    // timeout (120 s) is longer than the wait, so only a stop that kills
    // the run exits at all; and nothing is written for the killed call.
    let status = f.server.wait_exit("SIGTERM");
    assert_eq!(status.code(), Some(143));
    let rest = f.server.rest_after_exit();
    assert!(rest.is_empty(), "written for a killed call: {rest:?}");
    assert_gone(&m);
}

#[test]
fn sigint_stops_at_once_like_sigterm() {
    let mut f = Faulty::start(&["--max-concurrent-calls", "2"]);
    let m = f.marker("int");
    f.server.send(&modern(
        json!("h"),
        "tools/call",
        json!({"name": "hang", "arguments": {"marker": m}}),
    ));
    assert_running(&m);
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(f.server.pid() as i32, libc::SIGINT);
    }
    // At once: the hanging run would last forever, and the default call
    // timeout (120 s) is longer than the wait, so only a stop that kills
    // the run exits at all; and nothing is written for the killed call.
    let status = f.server.wait_exit("SIGINT");
    assert_eq!(status.code(), Some(130));
    let rest = f.server.rest_after_exit();
    assert!(rest.is_empty(), "written for a killed call: {rest:?}");
    assert_gone(&m);
}

/// Whether the server `pid` has stopped reading its stdin (whose write end
/// is `stdin_fd`): requests wait unread in the pipe while its reading
/// thread, the main one, sleeps on a lock or condition (futex), not in a
/// read. Seen twice, 50 ms apart, with the same bytes unread, so a reader
/// that only meets a busy lock on its way is not taken for a paused one.
fn stopped_reading(pid: u32, stdin_fd: RawFd) -> bool {
    let look = || {
        let mut unread: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int; the descriptor is our open pipe end.
        if unsafe { libc::ioctl(stdin_fd, libc::FIONREAD, &mut unread) } != 0 {
            return None;
        }
        let call = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/syscall")).ok()?;
        let nr: i64 = call.split_whitespace().next()?.parse().ok()?;
        (unread > 0 && nr == libc::SYS_futex).then_some(unread)
    };
    let Some(first) = look() else {
        return false;
    };
    thread::sleep(Duration::from_millis(50));
    look() == Some(first)
}

/// A server on `faulty` driven by hand, for tests that must not read stdout.
fn raw_server(home: &std::path::Path) -> std::process::Child {
    Command::new(server_bin())
        .arg(format!("--backend={}", faulty().display()))
        .arg(format!("--home={}", home.display()))
        .arg("mcp-serve")
        .current_dir(home)
        .env_remove("REACHWEAVER_FAULT_CATALOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_client_that_stops_reading_loses_no_message() {
    let home = tempfile::tempdir().unwrap();
    let mut child = raw_server(home.path());
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();

    // Enough answers to fill the pipe and the server's queue many times.
    const N: usize = 4000;
    let stdin_fd = stdin.as_raw_fd();
    let writer = thread::spawn(move || {
        for i in 0..N {
            let line = modern(json!(i), "tools/list", json!({})).to_string();
            stdin.write_all(line.as_bytes()).unwrap();
            stdin.write_all(b"\n").unwrap();
        }
        stdin.flush().unwrap();
        stdin
    });
    // Nobody reads: the server must stop reading too, not drop. Wait until
    // it has (its reading thread waits with requests unread in its stdin),
    // or until the writer is done, which only a server that reads on allows:
    // the server holds at most 1,024 answers and 64 KiB fill each pipe.
    let server = child.id();
    let settled = wait_for(HANG_GUARD, || {
        writer.is_finished() || stopped_reading(server, stdin_fd)
    });
    assert!(
        settled.is_some(),
        "the server neither stopped reading nor read everything"
    );
    assert!(
        !writer.is_finished(),
        "the server kept reading although nobody read its answers (back-pressure missing)"
    );

    let mut reader = BufReader::new(stdout);
    let mut ids = HashSet::new();
    let mut bytes = 0usize;
    let mut line = String::new();
    while ids.len() < N {
        line.clear();
        let n = reader.read_line(&mut line).unwrap();
        assert!(n > 0, "stdout ended after {} answers", ids.len());
        bytes += n;
        assert!(line.ends_with('\n'), "a partial line");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("a line that does not parse ({e}): {line}"));
        assert!(v["result"]["tools"].is_array(), "{v}");
        let id = v["id"].as_u64().expect("an integer id") as usize;
        assert!(ids.insert(id), "id {id} answered twice");
    }
    assert!(
        bytes > 1 << 20,
        "the answers ({bytes} bytes) did fill the pipe"
    );
    let stdin = writer.join().unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    // Nothing after the last answer.
    line.clear();
    assert_eq!(reader.read_line(&mut line).unwrap(), 0, "extra: {line}");
}

#[test]
fn a_closed_stdout_ends_the_server_cleanly() {
    let home = tempfile::tempdir().unwrap();
    let mut child = raw_server(home.path());
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // Start-up is over once it answers.
    let ping = req(json!(1), "ping", json!({})).to_string();
    writeln!(stdin, "{ping}").unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("\"result\""), "{line}");

    // A call in flight when stdout goes away must die with the server.
    let m = marker("closed");
    let hang = modern(
        json!(2),
        "tools/call",
        json!({"name": "hang", "arguments": {"marker": m}}),
    );
    writeln!(stdin, "{hang}").unwrap();
    assert_running(&m);

    drop(stdout);
    // The next answer has nowhere to go.
    writeln!(stdin, "{}", req(json!(3), "ping", json!({}))).unwrap();
    stdin.flush().unwrap();
    // The hanging run never ends and the default call timeout (120 s) is
    // longer than the wait: only a server that stops at once exits in it.
    let mut status = None;
    let exited = wait_for(HANG_GUARD, || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    if exited.is_none() {
        let _ = child.kill();
        panic!("the server kept running with nobody to answer");
    }
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{status:?}");
    assert_gone(&m);
}

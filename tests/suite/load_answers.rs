//! Load: every request read gets exactly one answer whatever runs out, and
//! the server's threads and memory stay bounded however many requests a
//! client sends and however slowly it reads (docs/PROTOCOL.md I7-I9).
//! Each scenario runs in the modern era and in a legacy one.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::faults::{
    children_of, cmdline_args, live_children_of, status_field, thread_count,
};
use crate::support::mcp::{env, modern, req, Server};
use crate::support::sandbox::{is_root, World};
use crate::support::{fixture, install_executable, server_bin};

/// A user id no other process uses, so a process limit counts this
/// server's tasks alone (`RLIMIT_NPROC` counts every task of the user).
/// The tests' users: 47_311 here, 47_331 to 47_333 below for the process
/// shortages; sandbox_shapes.rs has 47_312 to 47_314, 47_321 and 47_322.
const LOAD_UID: u32 = 47_311;
/// The legacy revision the legacy runs negotiate.
const LEGACY: &str = "2025-06-18";
/// Threads of a server beyond its call workers: the reader, the stdout
/// writer, the signal watcher, the stderr logger, the zygote's keeper, and
/// one to spare.
const FIXED_THREADS: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    Modern,
    Legacy,
}

/// A `tools/call` of this era.
fn call(era: Era, id: Value, tool: &str, args: Value) -> Value {
    let params = json!({"name": tool, "arguments": args});
    match era {
        Era::Modern => modern(id, "tools/call", params),
        Era::Legacy => req(id, "tools/call", params),
    }
}

/// The legacy handshake as two lines.
fn handshake() -> String {
    let init = req(
        json!("init"),
        "initialize",
        json!({"protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "load", "version": "1"}}),
    );
    format!(
        "{init}\n{}\n",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
}

/// The load backend, installed where an unprivileged user can run it.
fn backend(world: &World) -> std::path::PathBuf {
    let b = world.path().join("load-backend");
    install_executable(&fixture("load-backend"), &b);
    b
}

/// The server on the load backend under `prlimit` options, as `LOAD_UID`
/// when the tests run as root (as the current user otherwise).
fn limited_server(world: &World, limits: &[&str], serve: &[&str]) -> Command {
    limited_server_as(LOAD_UID, world, limits, serve)
}

/// [`limited_server`] as `uid` when the tests run as root.
fn limited_server_as(uid: u32, world: &World, limits: &[&str], serve: &[&str]) -> Command {
    let home = world.folder("home");
    let mut c = Command::new("prlimit");
    c.args(limits);
    if is_root() {
        c.arg("setpriv")
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .arg("--clear-groups");
    }
    c.arg(&world.exe)
        .arg(format!("--backend={}", backend(world).display()))
        .arg(format!("--home={}", home.display()))
        .arg("mcp-serve")
        .args(serve)
        .current_dir(&home);
    c
}

/// Collect answers until every id in `ids` has one (each recv bounded),
/// and check each came exactly once; returns them by id.
fn answers_for(s: &mut Server, ids: &[Value], mut each: impl FnMut()) -> Vec<Value> {
    let mut got: Vec<Option<Value>> = vec![None; ids.len()];
    let mut left = ids.len();
    while left > 0 {
        let msg = s.recv_timeout(Duration::from_secs(120)).unwrap_or_else(|| {
            panic!(
                "{left} of {} ids unanswered; stderr:\n{}",
                ids.len(),
                s.stderr_text()
            )
        });
        let i = ids
            .iter()
            .position(|id| *id == msg["id"])
            .unwrap_or_else(|| panic!("an answer to no request sent: {msg}"));
        assert!(got[i].is_none(), "answered twice: {}", msg["id"]);
        got[i] = Some(msg);
        left -= 1;
        each();
    }
    got.into_iter().map(Option::unwrap).collect()
}

/// Two slow calls hold both slots, then 400 calls come at once, under a
/// process limit far below one thread per request: each is answered once,
/// and the server's threads stay its pool and a few more.
fn every_call_is_answered_once_with_both_slots_held(era: Era) {
    let w = World::new();
    let mut s = Server::spawn(limited_server(
        &w,
        &["--nproc=100"],
        &["--max-concurrent-calls=2", "--max-calls-per-minute=1000000"],
    ));
    if era == Era::Legacy {
        s.initialize(LEGACY);
    }
    let mut ids = Vec::new();
    for i in 0..2 {
        let id = json!(format!("slow-{i}"));
        s.send(&call(era, id.clone(), "nap", json!({"seconds": 2})));
        ids.push(id);
    }
    for i in 0..400 {
        s.send(&call(era, json!(i), "blob", json!({"kib": 1})));
        ids.push(json!(i));
    }
    let pid = s.pid();
    let mut most_threads = 0;
    let answers = answers_for(&mut s, &ids, || {
        most_threads = most_threads.max(thread_count(pid));
    });
    for a in &answers {
        assert_eq!(a["result"]["isError"], false, "{a}");
    }
    assert!(
        most_threads <= 2 + FIXED_THREADS,
        "{most_threads} threads for 2 workers"
    );
    assert!(
        s.stderr_text()
            .contains("calls: 2 at once, up to 64 waiting"),
        "{}",
        s.stderr_text()
    );
    let (status, _) = s.finish();
    assert_eq!(status.code(), Some(0), "{}", s.stderr_text());
    assert_eq!(s.rest_after_exit(), Vec::<Value>::new());
}

#[test]
fn i9_every_call_is_answered_once_with_both_slots_held_under_a_process_limit() {
    every_call_is_answered_once_with_both_slots_held(Era::Modern);
}

#[test]
fn i9_every_legacy_call_is_answered_once_with_both_slots_held_under_a_process_limit() {
    every_call_is_answered_once_with_both_slots_held(Era::Legacy);
}

/// A server spoken to directly: stdout is read only when the test says.
struct Direct {
    child: Child,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<String>>,
}

impl Direct {
    fn start(extra: &[&str], world: &World) -> Direct {
        let home = world.folder("home");
        let mut child = Command::new(server_bin())
            .arg(format!("--backend={}", backend(world).display()))
            .arg(format!("--home={}", home.display()))
            .arg("mcp-serve")
            .args(extra)
            .current_dir(&home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut err = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let e = Arc::clone(&stderr);
        thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = err.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                e.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
        Direct {
            child,
            stdout,
            stderr,
        }
    }

    fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The next stdout line (blocking; the server always answers).
    fn line(&mut self) -> String {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "stdout ended; stderr:\n{}", self.stderr_text());
        line
    }

    fn wait_for_stderr(&self, what: &str, cond: impl Fn(&str) -> bool) {
        let until = Instant::now() + Duration::from_secs(180);
        while !cond(&self.stderr_text()) {
            assert!(
                Instant::now() < until,
                "never: {what}; stderr:\n{}",
                self.stderr_text()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kib_of_status(pid: u32, field: &str) -> u64 {
    status_field(pid, field)
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("{field} of {pid}"))
}

/// The bound on answers waiting to be written (docs/PROTOCOL.md I8).
const ANSWER_BYTES: u64 = 16 << 20;

/// A client sends 200 calls, the first ones with half-megabyte answers,
/// and reads nothing:
/// the server stops reading, its memory stays within the documented bound
/// and its threads within its pool; once the client reads again, every call
/// is answered once.
fn a_client_that_stops_reading_holds_the_server_to_its_bounds(era: Era) {
    // More than the server holds (the answers' bound, the queue, a pipe
    // full of requests), so a server that keeps to its bounds stalls the
    // sender.
    const CALLS: usize = 200;
    let w = World::new();
    let mut d = Direct::start(
        &[
            "--max-concurrent-calls=2",
            "--max-calls-per-minute=1000000",
            "--max-output-bytes=4194304",
        ],
        &w,
    );
    let pid = d.child.id();
    let mut stdin = d.child.stdin.take().unwrap();
    if era == Era::Legacy {
        stdin.write_all(handshake().as_bytes()).unwrap();
        assert!(d.line().contains("\"protocolVersion\""));
    }
    let blob = |id: Value, kib: u32| {
        let mut c = call(era, id, "blob", json!({"kib": kib}));
        // Padding in `_meta` (which is not read) makes the requests outgrow
        // any pipe, so a server that reads on would let the sender finish.
        let mut meta = if era == Era::Modern { env() } else { json!({}) };
        meta["pad"] = json!("p".repeat(8192));
        c["params"]["_meta"] = meta;
        format!("{c}\n")
    };
    // One call first: its answer's size, and the server's memory at rest.
    stdin
        .write_all(blob(json!("warm"), 256).as_bytes())
        .unwrap();
    let one = d.line().len() as u64;
    assert!(one > 256 * 1024, "{one}");
    let rest_rss = kib_of_status(pid, "VmRSS") * 1024;

    let to_fill = (ANSWER_BYTES / one + 1) as usize;
    let big = to_fill + 8;
    let sent = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sender = {
        let (sent, done) = (Arc::clone(&sent), Arc::clone(&done));
        // Enough big answers to fill the answers' bound; the calls behind
        // them, small, fill the queue and the pipe.
        let lines: Vec<String> = (0..CALLS)
            .map(|i| blob(json!(i), if i < big { 256 } else { 1 }))
            .collect();
        thread::spawn(move || {
            for l in lines {
                stdin.write_all(l.as_bytes()).unwrap();
                sent.fetch_add(1, Ordering::SeqCst);
            }
            done.store(true, Ordering::SeqCst);
            // stdin closes here: the server ends once every call is answered.
        })
    };
    // Enough big calls have finished to fill the answers' bound: from here
    // on nothing moves until stdout is read.
    d.wait_for_stderr("the answers' bound reached", |e| {
        e.matches("call tool=blob").count() > to_fill
    });
    let mut most_rss = 0;
    let mut most_threads = 0;
    for _ in 0..25 {
        most_rss = most_rss.max(kib_of_status(pid, "VmRSS") * 1024);
        most_threads = most_threads.max(thread_count(pid));
        thread::sleep(Duration::from_millis(40));
    }
    let sent_while_stalled = sent.load(Ordering::SeqCst);
    eprintln!(
        "{era:?}: stalled with {sent_while_stalled} of {CALLS} calls sent: VmRSS at most {} KiB \
         (at rest {} KiB), {most_threads} threads, answers of {one} bytes",
        most_rss >> 10,
        rest_rss >> 10
    );
    assert!(
        !done.load(Ordering::SeqCst),
        "the server read all {CALLS} calls ({sent_while_stalled} sent) without its answers being read"
    );
    // The answers' bound, one answer per worker that started before it was
    // reached, and 16 MiB for the queue and the allocator's slack.
    let bound = rest_rss + ANSWER_BYTES + 2 * one + (16 << 20);
    assert!(
        most_rss <= bound,
        "VmRSS {} MiB over the bound {} MiB (at rest {} MiB)",
        most_rss >> 20,
        bound >> 20,
        rest_rss >> 20
    );
    assert!(
        most_threads <= 2 + FIXED_THREADS,
        "{most_threads} threads for 2 workers"
    );

    // The client reads again: every call is answered, once.
    let mut seen = vec![0u32; CALLS];
    let mut answered = 0;
    while answered < CALLS {
        let line = d.line();
        let msg: Value = serde_json::from_str(&line).unwrap();
        let i = msg["id"].as_u64().unwrap_or_else(|| panic!("{msg}")) as usize;
        assert_eq!(
            msg["result"]["isError"],
            false,
            "{}",
            &line[..line.len().min(400)]
        );
        seen[i] += 1;
        assert_eq!(seen[i], 1, "id {i} answered twice");
        answered += 1;
    }
    sender.join().unwrap();
    let mut rest = String::new();
    d.stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "", "lines after the last answer");
    let status = d.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", d.stderr_text());
}

#[test]
fn i8_a_client_that_stops_reading_holds_the_server_to_its_bounds() {
    a_client_that_stops_reading_holds_the_server_to_its_bounds(Era::Modern);
}

#[test]
fn i8_a_legacy_client_that_stops_reading_holds_the_server_to_its_bounds() {
    a_client_that_stops_reading_holds_the_server_to_its_bounds(Era::Legacy);
}

/// The calls-at-once number on the start-up line.
fn calls_at_once(stderr: &str) -> usize {
    let at = stderr
        .find("calls: ")
        .unwrap_or_else(|| panic!("no pool on the start-up line: {stderr}"));
    stderr[at + "calls: ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"))
}

/// Under a descriptor limit too low for the calls asked, the server runs
/// fewer at once and says so; calls wait instead of failing, and none is
/// blamed on the backend.
fn a_low_descriptor_limit_lowers_the_concurrency(era: Era) {
    let w = World::new();
    let mut s = Server::spawn(limited_server(
        &w,
        &["--nofile=64"],
        &[
            "--max-concurrent-calls=16",
            "--max-calls-per-minute=1000000",
        ],
    ));
    if era == Era::Legacy {
        s.initialize(LEGACY);
    }
    let mut ids = Vec::new();
    for i in 0..40 {
        s.send(&call(era, json!(i), "nap", json!({"seconds": 1})));
        ids.push(json!(i));
    }
    let answers = answers_for(&mut s, &ids, || {});
    // The whole log, once the server has exited: a call's log line comes
    // after its answer, and the absence of `backend_failed` means nothing
    // on a log still being written.
    let (status, _) = s.finish();
    let stderr = s.stderr_after_exit();
    assert!(status.success(), "{stderr}");
    for a in &answers {
        assert_eq!(a["result"]["isError"], false, "{a}\n{stderr}");
    }
    let calls = calls_at_once(&stderr);
    assert!((1..16).contains(&calls), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "note: --max-concurrent-calls 16 lowered to {calls} to fit RLIMIT_NOFILE 64"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("backend_failed"), "{stderr}");
}

#[test]
fn i7_a_low_descriptor_limit_lowers_the_concurrency() {
    a_low_descriptor_limit_lowers_the_concurrency(Era::Modern);
}

#[test]
fn i7_a_low_descriptor_limit_lowers_the_concurrency_for_legacy_calls() {
    a_low_descriptor_limit_lowers_the_concurrency(Era::Legacy);
}

/// A process's soft limit as `/proc/PID/limits` gives it, by the row's name
/// (`Max open files`, `Max processes`).
fn soft_limit(pid: u32, row: &str) -> String {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with(row)).unwrap();
    line[row.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// `prlimit --pid=PID ARG`, as `owner` when one is given: lowering a limit,
/// or raising it back up to the hard one, needs no privilege for one's own
/// processes, and root may lack CAP_SYS_RESOURCE (as in a container).
fn set_limit(pid: u32, arg: &str, owner: Option<u32>) {
    let mut c = match owner {
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={uid}"))
                .arg("--clear-groups")
                .arg("prlimit");
            c
        }
        None => Command::new("prlimit"),
    };
    let out = c.arg(format!("--pid={pid}")).arg(arg).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The call's answer is the server's own shortage of `what`.
fn assert_server_short_of(answer: &Value, what: &str, stderr: &str) {
    let res = &answer["result"];
    assert_eq!(res["isError"], true, "{answer}");
    let error = &res["structuredContent"]["output"]["error"];
    assert_eq!(error["code"], "resource_exhausted", "{answer}\n{stderr}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("The server ran out of {what}")),
        "{answer}"
    );
}

/// A tiny call of the load backend, in the modern era.
fn nap(id: &str) -> Value {
    call(Era::Modern, json!(id), "nap", json!({"seconds": 0}))
}

/// Descriptors running out in a running server are its own shortage:
/// `resource_exhausted`, never `backend_failed`; once there are
/// descriptors again, calls run.
#[test]
fn i9_descriptors_running_out_are_the_servers_shortage_not_the_backends() {
    let w = World::new();
    let home = w.folder("home");
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", backend(&w).display()))
        .arg(format!("--home={}", home.display()))
        .arg("mcp-serve")
        .current_dir(&home);
    let mut s = Server::spawn(cmd);
    let ok = s.request(nap("before"));
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    let pid = s.pid();
    let soft = soft_limit(pid, "Max open files");
    // The first call is over, descriptors closed, once its log line is out
    // (written after the answer).
    s.stderr_when("the first call's log line", |t| {
        t.contains("call tool=nap ")
    });
    // No descriptor beyond those open now: the kernel hands out the lowest
    // free number, so the limit is that number (a count would leave the
    // gaps below the highest descriptor free).
    let lowest_free = crate::support::faults::lowest_free_fd(pid);
    set_limit(pid, &format!("--nofile={lowest_free}:"), None);
    let short = s.request(nap("short"));
    set_limit(pid, &format!("--nofile={soft}:"), None);
    assert_server_short_of(&short, "open files", &s.stderr_text());
    let again = s.request(nap("after"));
    assert_eq!(again["result"]["isError"], false, "{again}");
}

/// A server with both slots busy and calls queued behind them.
fn busy_server(era: Era, naps: &[u64]) -> (World, Server, Vec<Value>) {
    let w = World::new();
    let home = w.folder("home");
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", backend(&w).display()))
        .arg(format!("--home={}", home.display()))
        .arg("mcp-serve")
        .arg("--max-concurrent-calls=2")
        .current_dir(&home);
    let mut s = Server::spawn(cmd);
    if era == Era::Legacy {
        s.initialize(LEGACY);
    }
    let mut ids = Vec::new();
    for (i, secs) in naps.iter().enumerate() {
        s.send(&call(era, json!(i), "nap", json!({"seconds": secs})));
        ids.push(json!(i));
    }
    // Answered once every call before it was read (I8: the reader answers
    // while calls wait).
    let pong = s.request(req(json!("ping"), "ping", json!({})));
    assert_eq!(pong["result"], json!({}));
    (w, s, ids)
}

/// The exit status once the server is gone (the wait only guards against
/// a hang: a server that let its runs end would write their answers).
fn exit_code_after(s: &mut Server) -> Option<i32> {
    s.wait_exit("the signal").code()
}

/// SIGTERM and SIGINT stop at once, queued and running calls unanswered,
/// with 128 + the signal's number, which tells a supervisor a stop from
/// the end of input.
fn a_signal_exits_with_128_plus_its_number(era: Era, sig: i32, code: i32) {
    let (_w, mut s, _) = busy_server(era, &[30, 30, 30, 30, 30, 30]);
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(s.pid() as i32, sig);
    }
    assert_eq!(exit_code_after(&mut s), Some(code), "{}", s.stderr_text());
    assert_eq!(
        s.rest_after_exit(),
        Vec::<Value>::new(),
        "nothing is written for calls stopped by a signal"
    );
}

#[test]
fn i3_sigterm_exits_143_with_calls_running_and_queued() {
    a_signal_exits_with_128_plus_its_number(Era::Modern, libc::SIGTERM, 143);
}

#[test]
fn i3_sigint_exits_130_with_legacy_calls_running_and_queued() {
    a_signal_exits_with_128_plus_its_number(Era::Legacy, libc::SIGINT, 130);
}

/// The end of input answers every call received, queued ones included,
/// then exits 0.
fn the_end_of_input_answers_the_queue_and_exits_zero(era: Era) {
    let (_w, mut s, ids) = busy_server(era, &[1, 1, 0, 0, 0, 0, 0, 0]);
    s.close_stdin();
    let answers = answers_for(&mut s, &ids, || {});
    for a in &answers {
        assert_eq!(a["result"]["isError"], false, "{a}");
    }
    assert_eq!(exit_code_after(&mut s), Some(0), "{}", s.stderr_text());
}

#[test]
fn i2_the_end_of_input_answers_the_queue_and_exits_zero() {
    the_end_of_input_answers_the_queue_and_exits_zero(Era::Modern);
}

#[test]
fn i2_the_end_of_input_answers_the_legacy_queue_and_exits_zero() {
    the_end_of_input_answers_the_queue_and_exits_zero(Era::Legacy);
}

/// The sandbox zygotes the server `pid` started (its children running
/// `__sandbox-helper @zygote`).
fn zygotes_of(pid: u32) -> Vec<u32> {
    children_of(pid)
        .into_iter()
        .filter(|&c| cmdline_args(c).iter().any(|a| a == b"@zygote"))
        .collect()
}

/// A zygote that was stopped (SIGSTOP) is replaced: the next call is
/// served by a fresh one, and the stopped one is killed. (A zygote that
/// stops while a call waits for it fails that call with `sandbox_failed`
/// within a second; handle.rs tests that wait.)
#[test]
fn a_stopped_sandbox_zygote_is_replaced_and_the_next_call_is_served() {
    let w = World::new();
    let home = w.folder("home");
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", backend(&w).display()))
        .arg(format!("--home={}", home.display()))
        .arg("mcp-serve")
        .current_dir(&home);
    let mut s = Server::spawn(cmd);
    let nap = |id: &str| call(Era::Modern, json!(id), "nap", json!({"seconds": 0}));
    let first = s.request(nap("first"));
    assert_eq!(first["result"]["isError"], false, "{first}");
    let old = zygotes_of(s.pid());
    assert_eq!(old.len(), 1, "{old:?}");
    // SAFETY: stopping the zygote our own server started.
    unsafe { libc::kill(old[0] as i32, libc::SIGSTOP) };
    let stopped = crate::support::faults::wait_for(Duration::from_secs(10), || {
        status_field(old[0], "State").is_some_and(|st| st.starts_with('T'))
    });
    let replaced = s.request(nap("replaced"));
    // Whatever happened, nothing stays stopped behind the test.
    // SAFETY: as above.
    unsafe { libc::kill(old[0] as i32, libc::SIGCONT) };
    assert!(stopped.is_some(), "the zygote never stopped");
    assert_eq!(replaced["result"]["isError"], false, "{replaced}");
    let now = zygotes_of(s.pid());
    assert!(
        !now.contains(&old[0]),
        "the stopped zygote is still there: {now:?}"
    );
    assert_eq!(now.len(), 1, "{now:?}");
}

/// A run whose sandbox stays silent (the zygote's next inits are stopped, so
/// the run's status pipe never speaks) fails with `sandbox_failed` within
/// the call timeout, not after the sandbox's own 20 s bound; the zygote is
/// replaced and the next call is served by a fresh one.
#[test]
fn a_silent_sandbox_fails_the_call_within_its_timeout_and_the_next_is_served() {
    let w = World::new();
    let home = w.folder("home");
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", backend(&w).display()))
        .arg(format!("--home={}", home.display()))
        .arg("mcp-serve")
        .arg("--call-timeout=2")
        .current_dir(&home);
    let mut s = Server::spawn(cmd);
    let nap = |id: &str| call(Era::Modern, json!(id), "nap", json!({"seconds": 0}));
    let first = s.request(nap("first"));
    assert_eq!(first["result"]["isError"], false, "{first}");
    let zygote = zygotes_of(s.pid());
    assert_eq!(zygote.len(), 1, "{zygote:?}");
    // The first run's init is gone once its answer is read; what is left
    // are the two inits forked ahead for the next runs. Both are stopped,
    // so whichever the next run gets stays silent.
    let mut spares = Vec::new();
    let found = crate::support::faults::wait_for(Duration::from_secs(10), || {
        spares = live_children_of(zygote[0]);
        spares.len() == 2
    });
    assert!(found.is_some(), "not two spare inits: {spares:?}");
    for &spare in &spares {
        // SAFETY: stopping a process our own server's zygote started.
        unsafe { libc::kill(spare as i32, libc::SIGSTOP) };
    }
    let stopped = crate::support::faults::wait_for(Duration::from_secs(10), || {
        spares
            .iter()
            .all(|&p| status_field(p, "State").is_some_and(|st| st.starts_with('T')))
    });
    let silent = s.request(nap("silent"));
    for &spare in &spares {
        // SAFETY: as above; nothing stays stopped behind the test.
        unsafe { libc::kill(spare as i32, libc::SIGCONT) };
    }
    assert!(stopped.is_some(), "the spares never stopped");
    let error = &silent["result"]["structuredContent"]["output"]["error"];
    assert_eq!(error["code"], "sandbox_failed", "{silent}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the sandbox zygote gave no word within 1.0 s"),
        "{message}"
    );
    // The silence allowed is what is left of the call timeout (2 s), not
    // the 20 s the sandbox waits when no call timeout bounds it: the
    // message names the wait it gave up after.
    let next = s.request(nap("next"));
    assert_eq!(next["result"]["isError"], false, "{next}");
    let now = zygotes_of(s.pid());
    assert!(
        !now.contains(&zygote[0]),
        "the silent zygote is still there: {now:?}"
    );
    assert_eq!(now.len(), 1, "{now:?}");
}

/// A start-up on a machine out of processes: the kernel checks can't fork,
/// which says nothing of the kernel, so the server refuses to start in
/// every mode, naming the shortage, instead of serving with the layers the
/// checks seemed to find missing.
fn a_shortage_at_start_gives_up_no_layer(uid: u32, mode: &str) {
    let w = World::new();
    // One process of this user at most: the server itself, so its first
    // fork fails. The user is the test's own: with another process of it
    // running, the server could not even be executed.
    let mut cmd = limited_server_as(uid, &w, &["--nproc=1"], &[&format!("--sandbox={mode}")]);
    cmd.stdin(Stdio::null());
    let out = crate::support::sandbox::output_within(cmd, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "the machine ran out of processes or threads while checking which layers this \
             kernel offers (unshare: fork: Resource temporarily unavailable (os error 11)); \
             no layer was given up for it"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("serving "), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn i9_out_of_processes_at_start_refuses_to_serve_in_require_mode() {
    a_shortage_at_start_gives_up_no_layer(47_332, "require");
}

#[test]
fn i9_out_of_processes_at_start_gives_up_no_layer_in_best_effort_mode() {
    a_shortage_at_start_gives_up_no_layer(47_333, "best-effort");
}

/// A user id of its own for the process-limit test, so lowering its limit
/// touches no other test's server.
const SHORT_UID: u32 = 47_331;

/// A running server that can't fork is short of processes itself: the call
/// is `resource_exhausted`, never `backend_failed`, and once processes are
/// free again calls run. The fork is made to happen on the call's path by
/// saving a masked file, which replaces the sandbox's zygote before the
/// next call.
#[test]
fn i9_processes_running_out_are_the_servers_shortage_not_the_backends() {
    let w = World::new();
    let home = w.folder("home");
    std::fs::write(home.join(".env"), "TOKEN=1\n").unwrap();
    // No limit at start: it is lowered once the server serves.
    let mut s = Server::spawn(limited_server_as(SHORT_UID, &w, &[], &[]));
    let ok = s.request(nap("before"));
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    let pid = s.pid();
    let soft = soft_limit(pid, "Max processes");
    let owner = is_root().then_some(SHORT_UID);
    // One process of this user at most, the server itself: any fork fails.
    set_limit(pid, "--nproc=1:", owner);
    // An editor's save: the masked file's name now points at a new file.
    let tmp = home.join(".env.save");
    std::fs::write(&tmp, "TOKEN=2\n").unwrap();
    std::fs::rename(&tmp, home.join(".env")).unwrap();
    let short = s.request(nap("short"));
    set_limit(pid, &format!("--nproc={soft}:"), owner);
    assert_server_short_of(&short, "processes or threads", &s.stderr_text());
    let again = s.request(nap("after"));
    assert_eq!(again["result"]["isError"], false, "{again}");
    let (status, _) = s.finish();
    let stderr = s.stderr_after_exit();
    assert!(status.success(), "{stderr}");
    assert!(!stderr.contains("backend_failed"), "{stderr}");
}

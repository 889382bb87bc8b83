//! The stdio loop: one reader (this thread), one writer thread that owns
//! stdout and writes whole lines, and one worker thread per tool call,
//! at most `max_concurrent` running at once.
//!
//! Shutdown: on stdin EOF no new request is read, the calls already
//! received run to their end (each bounded by `--call-timeout`), their
//! answers are written, and the loop returns, so a piped session gets every
//! answer. SIGTERM and SIGINT stop at once: calls still running are killed
//! (nothing is written for them), the lines already computed are flushed.

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::call::{CallOutcome, CallRunner};
use crate::cancel::Cancel;
use crate::dispatch::{Action, CallJob, Dispatcher, ProtocolInput};
use crate::error::{RpcCode, RpcError};
use crate::frame::{is_blank, Frame, FrameReader};
use crate::jsonrpc;

/// What the writer thread receives: a line, or the end of output.
enum Out {
    Line(String),
    Stop,
}

/// Queued outbound lines before the reader waits for the writer: a client
/// that stops reading stdout slows the server down, never loses a message.
const OUT_QUEUE: usize = 1024;
/// How long shutdown waits for cancelled calls to wind down.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(700);
/// How long shutdown waits for the last log lines to reach stderr.
const LOG_FLUSH: Duration = Duration::from_millis(200);

/// Calls in flight, by the exact JSON text of their id (so `"7"` and `7`
/// differ). A reused id maps to several calls; a cancel stops them all.
#[derive(Default)]
struct InFlight {
    calls: Mutex<HashMap<String, Vec<(u64, Cancel)>>>,
    next: Mutex<u64>,
}

impl InFlight {
    fn add(&self, id: &Value, cancel: Cancel) -> u64 {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        *next += 1;
        let seq = *next;
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(id.to_string())
            .or_default()
            .push((seq, cancel));
        seq
    }

    /// Remove a finished call; returns whether its answer may still be sent.
    /// The writer queue is fed under the same lock, so a cancel read before
    /// this point always suppresses the answer.
    fn finish(&self, id: &Value, seq: u64, send: impl FnOnce()) {
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let key = id.to_string();
        let mut cancelled = true;
        if let Some(list) = calls.get_mut(&key) {
            if let Some(pos) = list.iter().position(|(s, _)| *s == seq) {
                let (_, c) = list.remove(pos);
                cancelled = c.is_cancelled();
            }
            if list.is_empty() {
                calls.remove(&key);
            }
        }
        if !cancelled {
            send();
        }
    }

    fn cancel(&self, id: &Value) {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = calls.get(&id.to_string()) {
            for (_, c) in list {
                c.cancel();
            }
        }
    }

    fn cancel_all(&self) {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        for (_, c) in calls.values().flatten() {
            c.cancel();
        }
    }
}

/// A counting gate for `--max-concurrent-calls`, plus a count of live workers.
struct Slots {
    state: Mutex<(usize, usize)>, // (running calls, live workers)
    cv: Condvar,
    max: usize,
}

impl Slots {
    fn new(max: usize) -> Self {
        Self {
            state: Mutex::new((0, 0)),
            cv: Condvar::new(),
            max: max.max(1),
        }
    }

    fn worker_started(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 += 1;
    }

    fn worker_done(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 -= 1;
        self.cv.notify_all();
    }

    /// Wait for a free slot; gives up (false) when the call is cancelled first.
    fn acquire(&self, cancel: &Cancel) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if cancel.is_cancelled() {
                return false;
            }
            if st.0 < self.max {
                st.0 += 1;
                return true;
            }
            st = self
                .cv
                .wait_timeout(st, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn release(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0 -= 1;
        self.cv.notify_all();
    }

    /// Wait until no worker is alive, or the deadline (if any) passes.
    fn wait_idle(&self, deadline: Option<Instant>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while st.1 > 0 {
            let wait = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return,
                },
                None => Duration::from_millis(200),
            };
            st = self
                .cv
                .wait_timeout(st, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

struct Shared {
    protocol: ProtocolInput,
    runner: Arc<dyn CallRunner>,
    inflight: InFlight,
    slots: Slots,
    out: SyncSender<Out>,
    stopping: AtomicBool,
    /// Set by the writer when it has written every queued line and ended.
    writer_done: AtomicBool,
}

/// Serve until stdin closes and every call received is answered (or until
/// SIGTERM/SIGINT, or stdout closes).
pub(crate) fn serve(protocol: ProtocolInput, runner: Arc<dyn CallRunner>, max_concurrent: usize) {
    // Before any thread is spawned, so every thread inherits the mask and
    // SIGTERM reaches only the watcher.
    let sigterm = block_sigterm();
    crate::log::start_background();
    let stdin = io::stdin();
    serve_streams(
        protocol,
        runner,
        max_concurrent,
        stdin.lock(),
        io::stdout(),
        |shared, stdout_lock| watch_sigterm(sigterm, shared, stdout_lock),
    );
    crate::log::flush(LOG_FLUSH);
    let dropped = crate::log::dropped();
    if dropped > 0 {
        let _ = writeln!(
            io::stderr(),
            "{dropped} log lines were dropped because stderr was not read"
        );
    }
}

/// The loop over any reader and writer: [`serve`] gives it stdio and a
/// signal watcher (`started`, run once the writer is up); tests give it
/// bytes in memory. Returns after the reader's end, once every call
/// received is answered and every line written.
fn serve_streams<R: BufRead, W: Write + Send + 'static>(
    protocol: ProtocolInput,
    runner: Arc<dyn CallRunner>,
    max_concurrent: usize,
    reader: R,
    writer: W,
    started: impl FnOnce(Arc<Shared>, Arc<Mutex<()>>),
) {
    let (out_tx, out_rx) = sync_channel::<Out>(OUT_QUEUE);
    let shared = Arc::new(Shared {
        slots: Slots::new(max_concurrent),
        protocol,
        runner,
        inflight: InFlight::default(),
        out: out_tx,
        stopping: AtomicBool::new(false),
        writer_done: AtomicBool::new(false),
    });
    let stdout_lock = Arc::new(Mutex::new(()));
    let writer = {
        let shared = Arc::clone(&shared);
        let lock = Arc::clone(&stdout_lock);
        thread::Builder::new().name("stdout".into()).spawn(move || {
            write_loop(out_rx, &shared, &lock, writer);
            shared.writer_done.store(true, Ordering::SeqCst);
        })
    };
    let writer = match writer {
        Ok(w) => w,
        Err(e) => {
            crate::log::line(format!("cannot start the stdout writer: {e}"));
            return;
        }
    };
    started(Arc::clone(&shared), Arc::clone(&stdout_lock));

    read_loop(&shared, reader);

    // EOF: nothing new is read; every call already received runs to its
    // end (its own timeout bounds it) and is answered. A signal or a closed
    // stdout still stops everything at once, from their own threads.
    shared.slots.wait_idle(None);
    // Lines queued before this one are written first; then the writer ends.
    let _ = shared.out.send(Out::Stop);
    let _ = writer.join();
}

fn read_loop<R: BufRead>(shared: &Arc<Shared>, input: R) {
    let mut dispatcher = Dispatcher::new(&shared.protocol);
    let mut reader = FrameReader::new(input);
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let line = match reader.next_frame() {
            Ok(Frame::Eof) | Err(_) => return,
            Ok(Frame::TooLong) => {
                let err =
                    RpcError::detailed(RpcCode::InvalidRequest, "the line is longer than 1 MiB.");
                crate::log::line(format!("protocol error code={} line over 1 MiB", err.code));
                send(
                    shared,
                    jsonrpc::to_line(&jsonrpc::error(&Value::Null, &err)),
                );
                continue;
            }
            Ok(Frame::Line(line)) => line,
        };
        if is_blank(&line) {
            continue;
        }
        match dispatcher.handle(jsonrpc::parse_line(&line)) {
            Action::Nothing => {}
            Action::Reply(msg) => send(shared, jsonrpc::to_line(&msg)),
            Action::ReplyLine(line) => send(shared, line),
            Action::Cancel(id) => shared.inflight.cancel(&id),
            Action::Call(job) => start_call(shared, job),
        }
    }
}

fn send(shared: &Shared, line: String) {
    // A closed writer means stdout is gone and shutdown is under way.
    let _ = shared.out.send(Out::Line(line));
}

fn start_call(shared: &Arc<Shared>, job: CallJob) {
    let cancel = Cancel::new();
    let seq = shared.inflight.add(&job.id, cancel.clone());
    shared.slots.worker_started();
    let worker_shared = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name("call".into())
        .stack_size(512 * 1024)
        .spawn(move || {
            let s = worker_shared;
            run_call(&s, job, seq, &cancel);
            s.slots.worker_done();
        });
    if let Err(e) = spawned {
        shared.slots.worker_done();
        crate::log::line(format!("cannot start a call thread: {e}"));
    }
}

/// The worker: the whole call, from the slot to the queued answer. The
/// thread that spawns the backend also waits for it (the sandbox's
/// parent-death signal is tied to this thread).
fn run_call(shared: &Shared, job: CallJob, seq: u64, cancel: &Cancel) {
    let outcome = if shared.slots.acquire(cancel) {
        // A fault inside one call must not take the server down (A19).
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            shared.runner.run_call(&job.tool, &job.arguments, cancel)
        }));
        shared.slots.release();
        outcome.map_err(|_| crate::log::line(format!("internal fault in call tool={}", job.tool)))
    } else {
        // Cancelled while waiting for a slot.
        Ok(CallOutcome::Cancelled)
    };
    let line = match outcome {
        Ok(CallOutcome::Done(envelope)) => Some(jsonrpc::to_line(&jsonrpc::result(
            &job.id,
            shared.protocol.call_result(job.revision, &envelope),
        ))),
        Ok(CallOutcome::Cancelled) => None,
        Err(()) => Some(jsonrpc::to_line(&jsonrpc::error(
            &job.id,
            &RpcError::detailed(RpcCode::InternalError, "the call failed inside the server."),
        ))),
    };
    shared.inflight.finish(&job.id, seq, || {
        if let Some(line) = line {
            let _ = shared.out.send(Out::Line(line));
        }
    });
}

fn write_loop<W: Write>(rx: Receiver<Out>, shared: &Shared, lock: &Mutex<()>, mut out: W) {
    for msg in rx {
        let Out::Line(line) = msg else {
            return;
        };
        let _guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        let ok = out
            .write_all(line.as_bytes())
            .and_then(|_| out.write_all(b"\n"))
            .and_then(|_| out.flush());
        if ok.is_err() {
            // stdout closed: nobody can hear us; stop cleanly.
            shared.stopping.store(true, Ordering::SeqCst);
            shared.inflight.cancel_all();
            crate::log::line("stdout closed; stopping");
            // The reader may sit in a blocking read of stdin forever; leave now.
            shared
                .slots
                .wait_idle(Some(Instant::now() + SHUTDOWN_GRACE));
            crate::log::flush(LOG_FLUSH);
            std::process::exit(0);
        }
    }
}

/// SIGTERM and SIGINT: stop at once (runs killed, computed answers
/// flushed). Handled on a thread of its own with sigwait, so no handler runs
/// inside another thread's write.
fn block_sigterm() -> libc::sigset_t {
    // SAFETY: plain libc signal-set calls on a local set. Spawned children
    // start with an empty mask (std resets it), so the backend is unaffected.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn watch_sigterm(set: libc::sigset_t, shared: Arc<Shared>, stdout_lock: Arc<Mutex<()>>) {
    let _ = thread::Builder::new()
        .name("sigterm".into())
        .spawn(move || {
            let mut sig: libc::c_int = 0;
            // SAFETY: sigwait on a valid set, with a valid out-pointer.
            let rc = unsafe { libc::sigwait(&set, &mut sig) };
            if rc != 0 {
                return;
            }
            shared.stopping.store(true, Ordering::SeqCst);
            shared.inflight.cancel_all();
            shared
                .slots
                .wait_idle(Some(Instant::now() + SHUTDOWN_GRACE));
            // Answers already computed are written (briefly: a client that
            // stopped reading must not hold the exit up).
            if shared.out.try_send(Out::Stop).is_ok() {
                let until = Instant::now() + LOG_FLUSH;
                while !shared.writer_done.load(Ordering::SeqCst) && Instant::now() < until {
                    thread::sleep(Duration::from_millis(5));
                }
            }
            // Hold the stdout lock so no line is cut in half, then leave.
            let _guard = stdout_lock.lock().unwrap_or_else(|e| e.into_inner());
            let _ = io::stdout().lock().flush();
            crate::log::flush(LOG_FLUSH);
            std::process::exit(0);
        });
}

#[cfg(test)]
mod tests {
    //! The loop over bytes in memory, with a stand-in for the backend: what
    //! the reader, the workers and the writer do together, without a process.

    use super::*;
    use crate::dispatch::tests::{input, modern, req};
    use crate::envelope::Envelope;
    use crate::error::{ErrorCode, ToolError};
    use serde_json::{json, Map};

    /// Answers by its arguments: `{"error": code}` a tool error of that
    /// code, `{"panic": true}` a fault, `{"until_cancelled": true}` waits
    /// for the cancel, `{"sleep_ms": n}` answers late; anything else `{"ok": true}`.
    struct FakeRunner;

    impl CallRunner for FakeRunner {
        fn run_call(&self, tool: &str, args: &Map<String, Value>, cancel: &Cancel) -> CallOutcome {
            if let Some(code) = args.get("error").and_then(Value::as_str) {
                let code = ErrorCode::ALL
                    .into_iter()
                    .find(|c| c.as_str() == code)
                    .unwrap();
                return CallOutcome::Done(Envelope::from_error(&ToolError::of(code)));
            }
            if args.contains_key("panic") {
                panic!("a fault inside the call");
            }
            if args.contains_key("until_cancelled") {
                let until = Instant::now() + Duration::from_secs(10);
                while !cancel.is_cancelled() && Instant::now() < until {
                    thread::sleep(Duration::from_millis(5));
                }
                return CallOutcome::Cancelled;
            }
            if let Some(ms) = args.get("sleep_ms").and_then(Value::as_u64) {
                thread::sleep(Duration::from_millis(ms));
            }
            CallOutcome::Done(Envelope::from_run(0, json!({"ok": true, "tool": tool})))
        }
    }

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Serve `input` to its end; every line written, in order.
    fn run(input_bytes: Vec<u8>, max_concurrent: usize) -> Vec<Value> {
        let sink = Sink::default();
        serve_streams(
            input(),
            Arc::new(FakeRunner),
            max_concurrent,
            io::Cursor::new(input_bytes),
            sink.clone(),
            |_, _| {},
        );
        let bytes = sink.0.lock().unwrap().clone();
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.is_empty() || text.ends_with('\n'), "{text:?}");
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn lines(msgs: &[Value]) -> Vec<u8> {
        let mut out = Vec::new();
        for m in msgs {
            out.extend_from_slice(m.to_string().as_bytes());
            out.push(b'\n');
        }
        out
    }

    fn by_id<'a>(answers: &'a [Value], id: &Value) -> &'a Value {
        let found: Vec<&Value> = answers.iter().filter(|a| &a["id"] == id).collect();
        assert_eq!(found.len(), 1, "answers for {id}: {answers:?}");
        found[0]
    }

    fn call(id: Value, args: Value) -> Value {
        modern(
            id,
            "tools/call",
            json!({"name": "version", "arguments": args}),
        )
    }

    #[test]
    fn every_error_code_from_the_runner_is_an_is_error_result() {
        let msgs: Vec<Value> = ErrorCode::ALL
            .iter()
            .enumerate()
            .map(|(i, c)| call(json!(i), json!({"error": c.as_str()})))
            .collect();
        let answers = run(lines(&msgs), 4);
        assert_eq!(answers.len(), ErrorCode::ALL.len());
        for (i, c) in ErrorCode::ALL.iter().enumerate() {
            let r = by_id(&answers, &json!(i));
            assert!(r.get("error").is_none(), "{r}");
            let res = &r["result"];
            assert_eq!(res["isError"], true, "{c}");
            assert_eq!(res["resultType"], "complete");
            assert_eq!(
                res["structuredContent"],
                json!({"exit_code": 2, "output": {"error": {"code": c.as_str(), "message": c.hint()}}})
            );
        }
    }

    #[test]
    fn legacy_calls_are_answered_for_the_negotiated_revision() {
        let answers = run(
            lines(&[
                req(
                    json!("init"),
                    "initialize",
                    json!({"protocolVersion": "2024-11-05", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"}}),
                ),
                req(json!(1), "tools/call", json!({"name": "version"})),
                req(
                    json!(2),
                    "tools/call",
                    json!({"name": "version", "arguments": {"error": "path_outside_root"}}),
                ),
            ]),
            1,
        );
        assert_eq!(answers[0]["result"]["protocolVersion"], "2024-11-05");
        let ok = &by_id(&answers, &json!(1))["result"];
        assert_eq!(
            ok,
            &json!({"content": [{"type": "text",
                "text": r#"{"exit_code":0,"output":{"ok":true,"tool":"version"}}"#}],
                "isError": false})
        );
        let bad = &by_id(&answers, &json!(2))["result"];
        assert_eq!(bad["isError"], true);
        assert!(bad.get("structuredContent").is_none());
    }

    #[test]
    fn a_fault_in_a_call_is_an_internal_error_and_the_loop_goes_on() {
        let answers = run(
            lines(&[
                call(json!(1), json!({"panic": true})),
                req(json!(2), "ping", json!({})),
                call(json!(3), json!({})),
            ]),
            2,
        );
        assert_eq!(
            by_id(&answers, &json!(1))["error"],
            json!({"code": -32603, "message": "Internal error: the call failed inside the server."})
        );
        assert_eq!(by_id(&answers, &json!(2))["result"], json!({}));
        assert_eq!(by_id(&answers, &json!(3))["result"]["isError"], false);
    }

    #[test]
    fn a_cancelled_call_is_never_answered() {
        let answers = run(
            lines(&[
                call(json!(5), json!({"until_cancelled": true})),
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 5}}),
                req(json!(6), "ping", json!({})),
            ]),
            2,
        );
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0]["id"], 6);
    }

    #[test]
    fn the_end_of_input_waits_for_calls_in_flight() {
        let answers = run(
            lines(&[
                call(json!(1), json!({"sleep_ms": 400})),
                call(json!(2), json!({"sleep_ms": 10})),
            ]),
            2,
        );
        assert_eq!(answers.len(), 2);
        // The quick call was not held up by the slow one.
        assert_eq!(answers[0]["id"], 2);
        assert_eq!(answers[1]["id"], 1);
    }

    #[test]
    fn a_line_over_1_mib_is_refused_and_the_next_is_served() {
        let mut bytes = vec![b'x'; (1 << 20) + 10];
        bytes.push(b'\n');
        bytes.extend_from_slice(b"\n   \n");
        bytes.extend(lines(&[req(json!(2), "ping", json!({}))]));
        let answers = run(bytes, 1);
        assert_eq!(
            answers,
            [
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600,
                    "message": "Invalid Request: the line is longer than 1 MiB."}}),
                json!({"jsonrpc": "2.0", "id": 2, "result": {}}),
            ]
        );
    }

    #[test]
    fn protocol_errors_and_answers_keep_the_order_received() {
        let mut bytes = b"{\"jsonrpc\":\n".to_vec();
        bytes.extend(lines(&[
            req(json!(1), "tools/list", json!({})),
            modern(json!(2), "server/discover", json!({})),
        ]));
        let answers = run(bytes, 1);
        let codes: Vec<Value> = answers.iter().map(|a| a["error"]["code"].clone()).collect();
        assert_eq!(codes, [json!(-32700), json!(-32602), Value::Null]);
        assert_eq!(answers[2]["result"]["instructions"], "Use the tools.");
    }
}

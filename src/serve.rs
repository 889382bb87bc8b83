//! The stdio loop: one reader (this thread), one writer thread that writes
//! whole lines to stdout, and a fixed pool of worker threads, started once,
//! that take tool calls from a bounded queue. A worker whose answer finds
//! stdout idle and no line waiting writes it itself: handing it to the
//! writer would only add a thread's wake-up to every call.
//!
//! Nothing here starts a thread per request: a call read from stdin waits
//! in the queue until a worker is free, and protocol requests (`ping`,
//! `tools/list`, `notifications/cancelled`, ...) are answered by the reader
//! while calls wait. Memory stays bounded whatever the client does: the
//! reader reads no further line while the queue is full or the answers
//! waiting to be written reach their bound ([`QueueBounds`]), and a worker
//! starts no call while the answers waiting are at their bound. The client
//! then sees the server stop reading until it reads stdout again.
//!
//! Every call read gets exactly one answer, except a call the client
//! cancelled (nothing is written for it, H1): a call that cannot run
//! because the server has no worker gets a `resource_exhausted` tool error.
//!
//! Shutdown: on stdin EOF no new request is read, the calls already
//! received (queued or running) run to their end (each bounded by
//! `--call-timeout`), their answers are written, and the loop returns, so a
//! piped session gets every answer. SIGTERM and SIGINT stop at once: queued
//! calls are dropped, running calls are killed (nothing is written for
//! either), the lines already computed are flushed, and the process exits
//! with 128 + the signal's number.

use std::collections::VecDeque;
use std::io::{self, BufRead, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::call::{CallOutcome, CallRunner};
use crate::cancel::Cancel;
use crate::dispatch::{self, Action, CallJob, Dispatcher, ProtocolInput};
use crate::envelope::Envelope;
use crate::error::{ErrorCode, RpcCode, RpcError, ToolError};
use crate::frame::{is_blank, Frame, FrameReader};
use crate::jsonrpc;

/// How long shutdown waits for cancelled calls to wind down.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(700);
/// How long shutdown waits for the last log lines to reach stderr.
const LOG_FLUSH: Duration = Duration::from_millis(200);
/// Stack of a worker thread: the call path is shallow, and the pool's
/// threads are started once for the server's whole life.
const WORKER_STACK: usize = 512 * 1024;

/// What the server holds for a client at most (docs/PROTOCOL.md I8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueBounds {
    /// Calls read and waiting for a worker.
    pub queued_calls: usize,
    /// Bytes of the request lines of those calls.
    pub queued_bytes: usize,
    /// Answers computed and waiting to be written to stdout.
    pub answers: usize,
    /// Bytes of those answers.
    pub answer_bytes: usize,
}

impl QueueBounds {
    /// The documented numbers.
    pub(crate) const SERVED: QueueBounds = QueueBounds {
        queued_calls: 64,
        queued_bytes: 8 << 20,
        answers: 1024,
        answer_bytes: 16 << 20,
    };
}

/// A tool call read and waiting for a worker.
struct Queued {
    job: CallJob,
    /// The exact JSON text of its id, so `"7"` and `7` differ (H2).
    key: String,
    /// The length of its request line.
    bytes: usize,
}

/// A call a worker is running.
struct Running {
    seq: u64,
    key: String,
    cancel: Cancel,
}

/// Everything the reader, the workers and the writer share, under one lock
/// (every critical section is a few pointer moves).
#[derive(Default)]
struct LoopState {
    queue: VecDeque<Queued>,
    queued_bytes: usize,
    running: Vec<Running>,
    next_seq: u64,
    /// Answers waiting for the writer, oldest first.
    out: VecDeque<String>,
    /// Bytes of `out` and of the line the writer is writing now.
    out_bytes: usize,
    /// The line the writer holds counts until it is written.
    writing: bool,
    /// Worker threads alive.
    workers: usize,
    /// The reader waits for room (backpressure) instead of reading.
    reading_paused: bool,
    /// stdin ended: workers leave once the queue is empty.
    eof: bool,
    /// A signal or a closed stdout: nothing more runs or is read.
    stopping: bool,
    /// The writer writes what is left in `out`, then ends.
    finish: bool,
    writer_done: bool,
}

/// stdout (or what tests give instead), held while one whole line is written.
type Sink = Mutex<Box<dyn Write + Send>>;

pub(crate) struct Shared {
    protocol: ProtocolInput,
    runner: Arc<dyn CallRunner>,
    bounds: QueueBounds,
    state: Mutex<LoopState>,
    /// Workers wait here for a call they may start.
    work: Condvar,
    /// The writer waits here for a line.
    lines: Condvar,
    /// The reader waits here for room, shutdown for workers to end, a
    /// signal for the writer to finish.
    changed: Condvar,
    /// Whoever holds it writes one whole line: the writer, a worker with
    /// its own answer, or the signal watcher before it exits.
    sink: Sink,
}

/// How the pool of workers started.
#[derive(Debug)]
pub(crate) struct PoolStart {
    /// Workers asked for (the effective `--max-concurrent-calls`).
    pub asked: usize,
    /// Workers running.
    pub started: usize,
    /// Why the others could not be started.
    pub error: Option<io::Error>,
}

impl PoolStart {
    /// The start-up line's words for the pool.
    pub(crate) fn describe(&self, bounds: QueueBounds) -> String {
        let mut s = format!(
            "calls: {} at once, up to {} waiting",
            self.started, bounds.queued_calls
        );
        if self.started < self.asked {
            s.push_str(&format!(
                "; warning: only {} of {} call workers could be started ({}); ",
                self.started,
                self.asked,
                self.error
                    .as_ref()
                    .map_or_else(|| "no reason given".to_string(), ToString::to_string)
            ));
            if self.started == 0 {
                s.push_str("every tool call is answered resource_exhausted");
            } else {
                s.push_str("calls run fewer at once");
            }
        }
        s
    }
}

fn lock(m: &Mutex<LoopState>) -> MutexGuard<'_, LoopState> {
    // Every update keeps the state whole before anything can panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn new(
        protocol: ProtocolInput,
        runner: Arc<dyn CallRunner>,
        bounds: QueueBounds,
        sink: Box<dyn Write + Send>,
    ) -> Self {
        Shared {
            sink: Mutex::new(sink),
            protocol,
            runner,
            bounds,
            state: Mutex::new(LoopState::default()),
            work: Condvar::new(),
            lines: Condvar::new(),
            changed: Condvar::new(),
        }
    }

    fn wait<'a>(cv: &Condvar, st: MutexGuard<'a, LoopState>) -> MutexGuard<'a, LoopState> {
        cv.wait(st).unwrap_or_else(|e| e.into_inner())
    }

    fn wait_until<'a>(
        cv: &Condvar,
        st: MutexGuard<'a, LoopState>,
        deadline: Instant,
    ) -> (MutexGuard<'a, LoopState>, bool) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (st, false);
        }
        let (st, _) = cv.wait_timeout(st, left).unwrap_or_else(|e| e.into_inner());
        (st, true)
    }

    /// Whether the answers waiting leave room for more.
    fn answers_have_room(&self, st: &LoopState) -> bool {
        st.out.len() + usize::from(st.writing) < self.bounds.answers
            && st.out_bytes < self.bounds.answer_bytes
    }

    /// Whether the reader may read one more line.
    fn may_read(&self, st: &LoopState) -> bool {
        st.queue.len() < self.bounds.queued_calls
            && st.queued_bytes < self.bounds.queued_bytes
            && self.answers_have_room(st)
    }

    /// The line being written is out (or failed): room for answers, so
    /// workers may start calls and the reader read; a line that waited
    /// meanwhile goes to the writer.
    fn written(&self, len: usize, ok: bool) {
        let mut st = lock(&self.state);
        st.writing = false;
        st.out_bytes -= len + 1;
        self.work.notify_all();
        self.changed.notify_all();
        if ok && !st.out.is_empty() {
            self.lines.notify_one();
        }
    }

    /// Queue a line for the writer.
    fn push_line(&self, st: &mut LoopState, line: String) {
        st.out_bytes += line.len() + 1;
        st.out.push_back(line);
        self.lines.notify_one();
    }

    fn send(&self, line: String) {
        let mut st = lock(&self.state);
        if !st.stopping {
            self.push_line(&mut st, line);
        }
    }

    /// Block until the reader may read again; false once stopping.
    fn wait_for_room(&self) -> bool {
        let mut st = lock(&self.state);
        loop {
            if st.stopping {
                return false;
            }
            if self.may_read(&st) {
                st.reading_paused = false;
                return true;
            }
            st.reading_paused = true;
            st = Self::wait(&self.changed, st);
        }
    }

    /// A call read from stdin: queued for a worker, or answered at once when
    /// there is no worker to run it.
    fn enqueue(&self, job: CallJob, bytes: usize) {
        let mut st = lock(&self.state);
        if st.stopping {
            return;
        }
        if st.workers == 0 {
            let e = ToolError::templated(ErrorCode::ResourceExhausted, "threads to run calls on");
            crate::log::line(format!(
                "call tool={} exit=2 error={} ms=0",
                job.tool,
                e.code()
            ));
            let envelope = Envelope::from_error(&e);
            crate::audit::not_run(&job.audit_request(), crate::audit::Ended::Done(&envelope));
            let line = jsonrpc::to_line(&jsonrpc::result(
                &job.id,
                self.protocol.call_result(job.revision, &envelope),
            ));
            self.push_line(&mut st, line);
            return;
        }
        st.queued_bytes += bytes;
        st.queue.push_back(Queued {
            key: job.id.to_string(),
            job,
            bytes,
        });
        self.work.notify_one();
    }

    /// `notifications/cancelled`: a queued call with this id leaves the
    /// queue unanswered and never runs; a running one is stopped.
    fn cancel(&self, id: &Value) {
        let key = id.to_string();
        let mut st = lock(&self.state);
        let before = st.queue.len();
        let mut freed = 0;
        st.queue.retain(|q| {
            let keep = q.key != key;
            if !keep {
                freed += q.bytes;
                crate::log::line(format!("call tool={} exit=cancelled ms=0", q.job.tool));
                crate::audit::not_run(&q.job.audit_request(), crate::audit::Ended::Cancelled);
            }
            keep
        });
        st.queued_bytes -= freed;
        if st.queue.len() != before {
            self.changed.notify_all();
        }
        for r in st.running.iter().filter(|r| r.key == key) {
            r.cancel.cancel();
        }
    }

    /// Stop everything now: queued calls dropped, running ones cancelled.
    fn stop(&self) {
        let mut st = lock(&self.state);
        st.stopping = true;
        st.queue.clear();
        st.queued_bytes = 0;
        for r in &st.running {
            r.cancel.cancel();
        }
        self.work.notify_all();
        self.lines.notify_all();
        self.changed.notify_all();
    }

    /// Wait until no worker is alive, or the deadline (if any) passes.
    fn wait_workers_gone(&self, deadline: Option<Instant>) {
        let mut st = lock(&self.state);
        while st.workers > 0 {
            st = match deadline {
                Some(d) => {
                    let (st, more) = Self::wait_until(&self.changed, st, d);
                    if !more {
                        return;
                    }
                    st
                }
                None => Self::wait(&self.changed, st),
            };
        }
    }

    /// Tell the writer to write what is left and end; wait (up to the
    /// deadline, if any) until it has.
    fn finish_writing(&self, deadline: Option<Instant>) {
        let mut st = lock(&self.state);
        st.finish = true;
        self.lines.notify_all();
        while !st.writer_done {
            st = match deadline {
                Some(d) => {
                    let (st, more) = Self::wait_until(&self.changed, st, d);
                    if !more {
                        return;
                    }
                    st
                }
                None => Self::wait(&self.changed, st),
            };
        }
    }
}

/// The pool: `n` workers started now; fewer when a thread cannot be started.
fn start_pool(shared: &Arc<Shared>, n: usize) -> PoolStart {
    let mut start = PoolStart {
        asked: n,
        started: 0,
        error: None,
    };
    for i in 0..n {
        // Counted before the thread runs, so a call read at once finds it.
        lock(&shared.state).workers += 1;
        let s = Arc::clone(shared);
        let spawned = thread::Builder::new()
            .name(format!("call-{i}"))
            .stack_size(WORKER_STACK)
            .spawn(move || worker(&s));
        match spawned {
            Ok(_) => start.started += 1,
            Err(e) => {
                lock(&shared.state).workers -= 1;
                start.error = Some(e);
                break;
            }
        }
    }
    start
}

/// One worker: take the oldest queued call (while the answers waiting
/// leave room), run it, queue its answer; until EOF has emptied the queue
/// or the server stops.
fn worker(shared: &Shared) {
    loop {
        let next = {
            let mut st = lock(&shared.state);
            loop {
                if st.stopping || (st.eof && st.queue.is_empty()) {
                    break None;
                }
                // No call starts while the answers waiting are at their bound.
                let next = if shared.answers_have_room(&st) {
                    st.queue.pop_front()
                } else {
                    None
                };
                if let Some(q) = next {
                    st.queued_bytes -= q.bytes;
                    st.next_seq += 1;
                    let seq = st.next_seq;
                    let cancel = Cancel::new();
                    st.running.push(Running {
                        seq,
                        key: q.key,
                        cancel: cancel.clone(),
                    });
                    // The queue shrank: the reader may read again.
                    shared.changed.notify_all();
                    break Some((q.job, seq, cancel));
                }
                st = Shared::wait(&shared.work, st);
            }
        };
        let Some((job, seq, cancel)) = next else {
            break;
        };
        let line = answer_call(shared, &job, &cancel);
        let mut st = lock(&shared.state);
        if let Some(pos) = st.running.iter().position(|r| r.seq == seq) {
            st.running.swap_remove(pos);
        }
        // A cancel read before this point always suppresses the answer:
        // both happen under this lock.
        let Some(line) = line else { continue };
        if cancel.is_cancelled() || st.stopping {
            continue;
        }
        if st.writing || !st.out.is_empty() {
            // Another line is on its way: this one goes after it.
            shared.push_line(&mut st, line);
            continue;
        }
        // stdout is idle: this worker writes its answer itself, counted as
        // the line being written so the bounds see it.
        st.writing = true;
        st.out_bytes += line.len() + 1;
        drop(st);
        let ok = write_line(shared, &line);
        shared.written(line.len(), ok.is_ok());
        if ok.is_err() {
            stdout_closed(shared);
        }
    }
    let mut st = lock(&shared.state);
    st.workers -= 1;
    shared.changed.notify_all();
}

/// The whole call, from the worker's start to its answer line (`None`:
/// cancelled, nothing is written). The thread that spawns the backend also
/// waits for it (the sandbox's parent-death signal is tied to this thread).
fn answer_call(shared: &Shared, job: &CallJob, cancel: &Cancel) -> Option<String> {
    let request = job.audit_request();
    let audit = match crate::audit::begin_call(&request) {
        Ok(audit) => audit,
        Err(refused) => {
            let result = shared.protocol.call_result(job.revision, &refused);
            return Some(jsonrpc::to_line(&jsonrpc::result(&job.id, result)));
        }
    };
    // A fault inside one call must not take the server down (A19).
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        shared.runner.run_call(&job.tool, &job.arguments, cancel)
    }));
    let ended = outcome
        .as_ref()
        .map_or(crate::audit::Ended::Fault, CallOutcome::audited);
    audit.end(&request, ended);
    match outcome {
        Ok(CallOutcome::Done(envelope)) => Some(jsonrpc::to_line(&jsonrpc::result(
            &job.id,
            shared.protocol.call_result(job.revision, &envelope),
        ))),
        Ok(CallOutcome::Cancelled) => None,
        Ok(CallOutcome::UnknownTool) => Some(jsonrpc::to_line(&dispatch::unknown_tool(
            &job.id, &job.tool,
        ))),
        Err(_) => {
            crate::log::line(format!("internal fault in call tool={}", job.tool));
            Some(jsonrpc::to_line(&jsonrpc::error(
                &job.id,
                &RpcError::detailed(RpcCode::InternalError, "the call failed inside the server."),
            )))
        }
    }
}

/// Serve until stdin closes and every call received is answered (or until
/// SIGTERM/SIGINT, or stdout closes). `announce` is told how the pool
/// started, once, before the first line is read.
pub(crate) fn serve(
    protocol: ProtocolInput,
    runner: Arc<dyn CallRunner>,
    workers: usize,
    announce: impl FnOnce(&PoolStart, QueueBounds),
) -> io::Result<()> {
    // Before any thread is spawned, so every thread inherits the mask and
    // the signals reach only the watcher.
    let signals = block_signals();
    crate::log::start_background();
    let stdin = io::stdin();
    let served = serve_streams(
        protocol,
        runner,
        QueueBounds::SERVED,
        workers,
        stdin.lock(),
        io::stdout(),
        |shared, pool| {
            announce(pool, QueueBounds::SERVED);
            watch_signals(signals, shared);
        },
    );
    crate::log::flush(LOG_FLUSH);
    let dropped = crate::log::dropped();
    if dropped > 0 {
        let _ = writeln!(
            io::stderr(),
            "{dropped} log lines were dropped because stderr was not read"
        );
    }
    served
}

/// The loop over any reader and writer: [`serve`] gives it stdio and a
/// signal watcher (`started`, run once the writer and the pool are up);
/// tests give it bytes in memory. Returns after the reader's end, once
/// every call received is answered and every line written.
fn serve_streams<R: BufRead, W: Write + Send + 'static>(
    protocol: ProtocolInput,
    runner: Arc<dyn CallRunner>,
    bounds: QueueBounds,
    workers: usize,
    reader: R,
    writer: W,
    started: impl FnOnce(Arc<Shared>, &PoolStart),
) -> io::Result<()> {
    let shared = Arc::new(Shared::new(protocol, runner, bounds, Box::new(writer)));
    let writer = {
        let shared = Arc::clone(&shared);
        thread::Builder::new()
            .name("stdout".into())
            .spawn(move || write_loop(&shared))?
    };
    let pool = start_pool(&shared, workers);
    started(Arc::clone(&shared), &pool);

    read_loop(&shared, reader);

    // EOF: nothing new is read; every call already received runs to its
    // end (its own timeout bounds it) and is answered. A signal or a closed
    // stdout still stops everything at once, from their own threads.
    {
        let mut st = lock(&shared.state);
        st.eof = true;
        shared.work.notify_all();
    }
    shared.wait_workers_gone(None);
    shared.finish_writing(None);
    let _ = writer.join();
    Ok(())
}

fn read_loop<R: BufRead>(shared: &Shared, input: R) {
    let mut dispatcher = Dispatcher::new(&shared.protocol);
    let mut reader = FrameReader::new(input);
    // Backpressure: while the queue or the answers waiting are full, no
    // further line is read, so a cancel behind it is read only once there
    // is room again (docs/PROTOCOL.md I8).
    while shared.wait_for_room() {
        let line = match reader.next_frame() {
            Ok(Frame::Eof) | Err(_) => return,
            Ok(Frame::TooLong) => {
                let err =
                    RpcError::detailed(RpcCode::InvalidRequest, "the line is longer than 1 MiB.");
                crate::log::line(format!("protocol error code={} line over 1 MiB", err.code));
                shared.send(jsonrpc::to_line(&jsonrpc::error(&Value::Null, &err)));
                continue;
            }
            Ok(Frame::Line(line)) => line,
        };
        if is_blank(&line) {
            continue;
        }
        match dispatcher.handle(jsonrpc::parse_line(&line)) {
            Action::Nothing => {}
            Action::Reply(msg) => shared.send(jsonrpc::to_line(&msg)),
            Action::ReplyLine(line) => shared.send(line),
            Action::Cancel(id) => shared.cancel(&id),
            Action::Call(job) => shared.enqueue(job, line.len()),
        }
    }
}

/// One whole line and its newline, flushed, under the sink's lock.
fn write_line(shared: &Shared, line: &str) -> io::Result<()> {
    let mut out = shared.sink.lock().unwrap_or_else(|e| e.into_inner());
    out.write_all(line.as_bytes())
        .and_then(|_| out.write_all(b"\n"))
        .and_then(|_| out.flush())
}

/// stdout closed: nobody can hear us; stop cleanly. The reader may sit in a
/// blocking read of stdin forever, so the process leaves from here.
fn stdout_closed(shared: &Shared) -> ! {
    shared.stop();
    crate::log::line("stdout closed; stopping");
    shared.wait_workers_gone(Some(Instant::now() + SHUTDOWN_GRACE));
    crate::audit::stop();
    crate::log::flush(LOG_FLUSH);
    std::process::exit(0);
}

fn write_loop(shared: &Shared) {
    loop {
        let line = {
            let mut st = lock(&shared.state);
            loop {
                // One line at a time: a worker may be writing its own.
                if !st.writing {
                    if let Some(line) = st.out.pop_front() {
                        st.writing = true;
                        break Some(line);
                    }
                }
                // Lines computed before a stop are still written.
                if st.out.is_empty() && (st.finish || st.stopping) {
                    break None;
                }
                st = Shared::wait(&shared.lines, st);
            }
        };
        let Some(line) = line else {
            break;
        };
        let ok = write_line(shared, &line);
        shared.written(line.len(), ok.is_ok());
        if ok.is_err() {
            stdout_closed(shared);
        }
    }
    let mut st = lock(&shared.state);
    st.writer_done = true;
    shared.changed.notify_all();
}

/// SIGTERM and SIGINT: stop at once (queued calls dropped, runs killed,
/// computed answers flushed), then exit with 128 + the signal's number.
/// Handled on a thread of its own with sigwait, so no handler runs inside
/// another thread's write.
fn block_signals() -> libc::sigset_t {
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

/// The exit code after a signal, as a shell reports a process the signal
/// ended: 143 for SIGTERM, 130 for SIGINT, so a supervisor can tell a stop
/// from the end of input (0).
pub(crate) fn signal_exit_code(sig: libc::c_int) -> i32 {
    128 + sig
}

fn watch_signals(set: libc::sigset_t, shared: Arc<Shared>) {
    let spawned = thread::Builder::new()
        .name("signals".into())
        .stack_size(128 * 1024)
        .spawn(move || {
            let mut sig: libc::c_int = 0;
            // SAFETY: sigwait on a valid set, with a valid out-pointer.
            let rc = unsafe { libc::sigwait(&set, &mut sig) };
            if rc != 0 {
                return;
            }
            stop_on_signal(&shared, sig);
        });
    if let Err(e) = spawned {
        // Without the watcher the blocked signals would be ignored: let
        // them end the process by their default action instead.
        crate::log::line(format!("cannot start the signal watcher: {e}"));
        // SAFETY: unblocking the set this thread blocked; other threads
        // keep the mask, and the kernel then delivers to this one.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    }
}

fn stop_on_signal(shared: &Shared, sig: libc::c_int) {
    let name = if sig == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    crate::log::line(format!("{name}; stopping"));
    // Nothing new is read, started or queued for writing from here on; the
    // answers computed before are still written.
    shared.stop();
    shared.wait_workers_gone(Some(Instant::now() + SHUTDOWN_GRACE));
    crate::audit::stop();
    // Written briefly: a client that stopped reading must not hold the exit up.
    shared.finish_writing(Some(Instant::now() + LOG_FLUSH));
    // Hold stdout so no line is cut in half, then leave.
    let mut out = shared.sink.lock().unwrap_or_else(|e| e.into_inner());
    let _ = out.flush();
    crate::log::flush(LOG_FLUSH);
    std::process::exit(signal_exit_code(sig));
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
    /// for the cancel, `{"sleep_ms": n}` answers late, `{"until_written":
    /// id}` waits until the answer to `id` was written, `{"size": n}`
    /// answers with n bytes of text; every call records its `"tag"`.
    #[derive(Clone, Default)]
    struct FakeRunner {
        sink: Sink,
        ran: Arc<Mutex<Vec<String>>>,
    }

    impl CallRunner for FakeRunner {
        fn run_call(&self, tool: &str, args: &Map<String, Value>, cancel: &Cancel) -> CallOutcome {
            if let Some(tag) = args.get("tag").and_then(Value::as_str) {
                self.ran.lock().unwrap().push(tag.to_string());
            }
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
            if args.contains_key("unknown") {
                return CallOutcome::UnknownTool;
            }
            if args.contains_key("until_cancelled") {
                let until = Instant::now() + Duration::from_secs(10);
                while !cancel.is_cancelled() && Instant::now() < until {
                    thread::sleep(Duration::from_millis(5));
                }
                return CallOutcome::Cancelled;
            }
            if let Some(id) = args.get("until_written") {
                let wanted = format!("\"id\":{id}");
                let until = Instant::now() + Duration::from_secs(10);
                let mut seen = false;
                while !seen && Instant::now() < until {
                    seen = String::from_utf8_lossy(&self.sink.0.lock().unwrap()).contains(&wanted);
                    thread::sleep(Duration::from_millis(2));
                }
                return CallOutcome::Done(Envelope::from_run(0, json!({"seen": seen})));
            }
            if let Some(ms) = args.get("sleep_ms").and_then(Value::as_u64) {
                thread::sleep(Duration::from_millis(ms));
            }
            if let Some(n) = args.get("size").and_then(Value::as_u64) {
                let text = "x".repeat(n as usize);
                return CallOutcome::Done(Envelope::from_run(0, json!({"text": text})));
            }
            CallOutcome::Done(Envelope::from_run(0, json!({"ok": true, "tool": tool})))
        }
    }

    /// stdout in memory; while `held`, every write waits (a client that
    /// stopped reading).
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>, Arc<(Mutex<bool>, Condvar)>);

    impl Sink {
        fn hold(&self, held: bool) {
            let (m, cv) = &*self.1;
            *m.lock().unwrap() = held;
            cv.notify_all();
        }

        fn answers(&self) -> Vec<Value> {
            let bytes = self.0.lock().unwrap().clone();
            let text = String::from_utf8(bytes).unwrap();
            assert!(text.is_empty() || text.ends_with('\n'), "{text:?}");
            text.lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        }
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let (m, cv) = &*self.1;
            let mut held = m.lock().unwrap();
            while *held {
                held = cv.wait(held).unwrap();
            }
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Serve `input` to its end with these bounds and workers; every line
    /// written, in order, and the tags of the calls that ran.
    fn run_with(
        input_bytes: Vec<u8>,
        workers: usize,
        bounds: QueueBounds,
    ) -> (Vec<Value>, Vec<String>) {
        let runner = FakeRunner::default();
        let sink = runner.sink.clone();
        serve_streams(
            input(),
            Arc::new(runner.clone()),
            bounds,
            workers,
            io::Cursor::new(input_bytes),
            sink.clone(),
            |_, _| {},
        )
        .unwrap();
        let ran = runner.ran.lock().unwrap().clone();
        (sink.answers(), ran)
    }

    /// Serve `input` to its end; every line written, in order.
    fn run(input_bytes: Vec<u8>, workers: usize) -> Vec<Value> {
        run_with(input_bytes, workers, QueueBounds::SERVED).0
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
    fn a_tool_the_runner_does_not_know_is_answered_as_an_unknown_tool_is() {
        let answers = run(lines(&[call(json!(7), json!({"unknown": true}))]), 1);
        assert_eq!(
            answers,
            vec![json!({"jsonrpc": "2.0", "id": 7,
                        "error": {"code": -32602, "message": "Unknown tool: version"}})]
        );
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

    #[test]
    fn signals_exit_as_a_shell_reports_them() {
        assert_eq!(signal_exit_code(libc::SIGTERM), 143);
        assert_eq!(signal_exit_code(libc::SIGINT), 130);
    }

    fn ids(answers: &[Value]) -> Vec<Value> {
        answers.iter().map(|a| a["id"].clone()).collect()
    }

    #[test]
    fn pings_and_lists_are_answered_while_calls_wait_for_the_one_worker() {
        let mut msgs = vec![call(json!(1), json!({"until_written": "l"}))];
        for i in 2..6 {
            msgs.push(call(json!(i), json!({})));
        }
        msgs.push(req(json!("p"), "ping", json!({})));
        msgs.push(modern(json!("l"), "tools/list", json!({})));
        let answers = run(lines(&msgs), 1);
        assert_eq!(answers.len(), 7, "{answers:?}");
        // The first call held the only worker until the list was answered.
        assert_eq!(ids(&answers)[..2], [json!("p"), json!("l")]);
        assert_eq!(
            by_id(&answers, &json!(1))["result"]["structuredContent"]["output"],
            json!({"seen": true})
        );
        // The calls behind it ran in the order received.
        assert_eq!(
            ids(&answers)[2..],
            [json!(1), json!(2), json!(3), json!(4), json!(5)]
        );
    }

    #[test]
    fn a_cancelled_queued_call_never_runs_and_gets_no_answer() {
        let cancel = |id: Value| {
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": id}})
        };
        let (answers, ran) = run_with(
            lines(&[
                call(json!(1), json!({"tag": "one", "until_written": "p"})),
                call(json!(2), json!({"tag": "two"})),
                // The same number as a string is another id (H2).
                call(json!("2"), json!({"tag": "two-string"})),
                call(json!(3), json!({"tag": "three"})),
                cancel(json!(2)),
                req(json!("p"), "ping", json!({})),
            ]),
            1,
            QueueBounds::SERVED,
        );
        assert_eq!(ids(&answers), [json!("p"), json!(1), json!("2"), json!(3)]);
        assert_eq!(ran, ["one", "two-string", "three"]);
    }

    #[test]
    fn every_call_is_answered_once_when_far_more_arrive_than_the_queue_holds() {
        let bounds = QueueBounds {
            queued_calls: 3,
            queued_bytes: 1 << 20,
            answers: 2,
            answer_bytes: 1 << 20,
        };
        let msgs: Vec<Value> = (0..300).map(|i| call(json!(i), json!({}))).collect();
        let (answers, _) = run_with(lines(&msgs), 2, bounds);
        assert_eq!(answers.len(), 300);
        for i in 0..300 {
            assert_eq!(by_id(&answers, &json!(i))["result"]["isError"], false);
        }
    }

    #[test]
    fn without_a_worker_calls_are_resource_exhausted_and_the_rest_is_served() {
        let answers = run(
            lines(&[
                call(json!(1), json!({})),
                req(json!(2), "ping", json!({})),
                call(json!(3), json!({})),
            ]),
            0,
        );
        assert_eq!(ids(&answers), [json!(1), json!(2), json!(3)]);
        for id in [1, 3] {
            let res = &by_id(&answers, &json!(id))["result"];
            assert_eq!(res["isError"], true);
            assert_eq!(
                res["structuredContent"]["output"]["error"]["code"],
                "resource_exhausted"
            );
        }
    }

    #[test]
    fn the_pool_describes_itself_for_the_start_up_line() {
        let full = PoolStart {
            asked: 4,
            started: 4,
            error: None,
        };
        assert_eq!(
            full.describe(QueueBounds::SERVED),
            "calls: 4 at once, up to 64 waiting"
        );
        let short = PoolStart {
            asked: 4,
            started: 1,
            error: Some(io::Error::from_raw_os_error(libc::EAGAIN)),
        };
        let text = short.describe(QueueBounds::SERVED);
        assert!(
            text.starts_with("calls: 1 at once, up to 64 waiting; warning: only 1 of 4 call workers could be started (Resource temporarily unavailable"),
            "{text}"
        );
        let none = PoolStart {
            asked: 2,
            started: 0,
            error: None,
        };
        assert!(none
            .describe(QueueBounds::SERVED)
            .ends_with("every tool call is answered resource_exhausted"));
    }

    /// A reader over bytes in memory that says how far it has been read.
    struct Counted {
        data: Vec<u8>,
        pos: Arc<Mutex<usize>>,
    }

    impl io::Read for Counted {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let mut pos = self.pos.lock().unwrap();
            let n = buf.len().min(self.data.len() - *pos);
            buf[..n].copy_from_slice(&self.data[*pos..*pos + n]);
            *pos += n;
            Ok(n)
        }
    }

    /// Wait (bounded) for a condition on the shared state.
    fn wait_for(shared: &Shared, what: &str, cond: impl Fn(&LoopState) -> bool) {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            if cond(&lock(&shared.state)) {
                return;
            }
            assert!(Instant::now() < until, "never: {what}");
            thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn a_client_that_stops_reading_stops_the_reader_and_the_workers() {
        let bounds = QueueBounds {
            queued_calls: 4,
            queued_bytes: 1 << 20,
            answers: 1000,
            answer_bytes: 20_000,
        };
        let msgs: Vec<Value> = (0..200)
            .map(|i| call(json!(i), json!({"size": 3000})))
            .collect();
        let data = lines(&msgs);
        let total = data.len();
        let pos = Arc::new(Mutex::new(0));
        let reader = io::BufReader::with_capacity(
            256,
            Counted {
                data,
                pos: Arc::clone(&pos),
            },
        );
        let runner = FakeRunner::default();
        let sink = runner.sink.clone();
        sink.hold(true);
        let (tx, rx) = std::sync::mpsc::channel();
        let serving = {
            let sink = sink.clone();
            thread::spawn(move || {
                serve_streams(
                    input(),
                    Arc::new(runner),
                    bounds,
                    2,
                    reader,
                    sink,
                    |shared, _| tx.send(shared).unwrap(),
                )
            })
        };
        let shared = rx.recv().unwrap();
        // The answers fill up to their bound, and then nothing moves while
        // stdout is not read: the reader waits, no worker starts a call.
        wait_for(&shared, "the reader paused behind full answers", |st| {
            st.reading_paused && st.out_bytes >= bounds.answer_bytes && st.running.is_empty()
        });
        let read_then = *pos.lock().unwrap();
        assert!(read_then < total, "{read_then} of {total} bytes read");
        {
            let st = lock(&shared.state);
            // At most the bound plus one answer per worker that started
            // before the bound was reached.
            // (the text comes twice: as the text item and as structuredContent).
            let one = 2 * 3000 + 600;
            assert!(
                st.out_bytes < bounds.answer_bytes + 2 * one,
                "{}",
                st.out_bytes
            );
        }
        // The reader waits for room, however long: it read nothing more.
        thread::sleep(Duration::from_millis(50));
        assert_eq!(*pos.lock().unwrap(), read_then);
        sink.hold(false);
        serving.join().unwrap().unwrap();
        let answers = sink.answers();
        assert_eq!(answers.len(), 200);
        for i in 0..200 {
            assert_eq!(by_id(&answers, &json!(i))["result"]["isError"], false);
        }
    }
}

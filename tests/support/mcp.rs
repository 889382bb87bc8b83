//! A fresh copy of the example workspace with its
//! database, the real server binary started against the reference backend,
//! and JSON lines in and out.
//!
//! Every stdout line a test receives is checked here to be one JSON-RPC 2.0
//! response (docs/PROTOCOL.md A2), and, when `RWMCP_WIRE_LOG` names a file, is
//! appended there with the revision in use so that `ci/validate_wire.py`
//! can check it against the official models of that revision.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const MODERN: &str = "2026-07-28";

/// How long a wait for an event may last before the test gives up on it.
/// Not a bound on the server's speed: it only keeps a server that never
/// does what is awaited from hanging the suite, and is long enough for a
/// machine busy with other work.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// The modern `_meta` envelope.
pub fn env() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

pub use super::{reference_bin, repo_root, server_bin};

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        let ft = entry.file_type().unwrap();
        if ft.is_dir() {
            copy_dir(&entry.path(), &target);
        } else if ft.is_file() {
            let name = entry.file_name().to_string_lossy().to_string();
            // The database is made fresh by `init`, never copied.
            if !name.ends_with(".db") && !name.contains(".db-") {
                fs::copy(entry.path(), &target).unwrap();
            }
        }
    }
}

/// A private copy of `examples/workspace` with a fresh database.
pub struct Workspace {
    pub dir: tempfile::TempDir,
}

impl Workspace {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("rwmcp-ws-")
            .tempdir()
            .unwrap();
        copy_dir(&repo_root().join("examples/workspace"), dir.path());
        let out = Command::new(reference_bin())
            .arg(format!("--home={}", dir.path().display()))
            .arg("init")
            .arg("--format=json")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "init failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Workspace { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Where each sent request's id leads: its method and revision, for the wire log.
#[derive(Default)]
struct Sent {
    by_id: HashMap<String, (String, String)>,
}

pub struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    pub stderr: Arc<Mutex<String>>,
    /// Set once the server's stderr reached end of file (everything read).
    stderr_ended: Arc<AtomicBool>,
    sent: Sent,
    /// The legacy revision negotiated on this process, once initialized.
    legacy: Option<String>,
    pub ws: Option<Workspace>,
}

#[derive(Default)]
pub struct Opts {
    pub extra_serve_args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Name the workspace's database with the owner's own `--db` (a draft
    /// writes only a database the owner names).
    pub own_db: bool,
}

impl Server {
    /// A fresh server on a fresh workspace, reference backend, default options.
    pub fn start() -> Self {
        Self::start_with(Opts::default())
    }

    pub fn start_with(opts: Opts) -> Self {
        let ws = Workspace::new();
        let mut cmd = Command::new(server_bin());
        cmd.arg(format!("--backend={}", reference_bin().display()))
            .arg(format!("--home={}", ws.path().display()));
        if opts.own_db {
            cmd.arg(format!(
                "--db={}",
                ws.path().join("data/reachweaver.db").display()
            ));
        }
        cmd.arg("mcp-serve")
            .args(&opts.extra_serve_args)
            .current_dir(ws.path());
        for (k, v) in &opts.env {
            cmd.env(k, v);
        }
        let mut s = Self::spawn(cmd);
        s.ws = Some(ws);
        s
    }

    /// Start any command line speaking MCP on stdio.
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, rx) = channel();
        thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match r.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8(buf.clone()).expect("stdout is UTF-8");
                        assert!(line.ends_with('\n'), "partial stdout line: {line:?}");
                        if tx.send(line.trim_end_matches('\n').to_string()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let err_buf = Arc::new(Mutex::new(String::new()));
        let eb = Arc::clone(&err_buf);
        let stderr_ended = Arc::new(AtomicBool::new(false));
        let ended = Arc::clone(&stderr_ended);
        thread::spawn(move || {
            let mut bytes = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                match stderr.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        // Decoded whole each time, so a character split
                        // between two reads is not lost.
                        bytes.extend_from_slice(&chunk[..n]);
                        *eb.lock().unwrap() = String::from_utf8_lossy(&bytes).into_owned();
                    }
                }
            }
            ended.store(true, Ordering::SeqCst);
        });
        let stdin = child.stdin.take();
        Server {
            child,
            stdin,
            lines: rx,
            stderr: err_buf,
            stderr_ended,
            sent: Sent::default(),
            legacy: None,
            ws: None,
        }
    }

    pub fn ws_path(&self) -> &Path {
        self.ws.as_ref().expect("server has a workspace").path()
    }

    /// Send raw bytes followed by LF.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        // A request written raw (framing tests) is remembered like any other, so
        // its reply reaches the wire log with its method and revision.
        if let Ok(msg) = serde_json::from_slice::<Value>(bytes) {
            self.remember(&msg);
        }
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Send one message (compact JSON line), remembering its method and revision.
    pub fn send(&mut self, msg: &Value) {
        self.send_raw(msg.to_string().as_bytes());
    }

    fn remember(&mut self, msg: &Value) {
        if let (Some(id), Some(method)) = (msg.get("id"), msg.get("method").and_then(Value::as_str))
        {
            let modern = msg
                .pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
                .is_some();
            let rev = if method == "server/discover" || modern {
                MODERN.to_string()
            } else if method == "initialize" {
                "initialize".to_string()
            } else {
                self.legacy.clone().unwrap_or_else(|| "none".into())
            };
            self.sent
                .by_id
                .insert(id.to_string(), (method.to_string(), rev));
        }
    }

    /// Send a request and wait for its response.
    pub fn request(&mut self, msg: Value) -> Value {
        let id = msg["id"].clone();
        self.send(&msg);
        self.recv_id(&id)
    }

    /// The legacy handshake at `version`; returns the initialize result.
    pub fn initialize(&mut self, version: &str) -> Value {
        let r = self.request(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name":"t","version":"1"}}}));
        self.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        r
    }

    /// The next stdout line, parsed and checked; panics after `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Value> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => Some(self.check_line(&line)),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    pub fn recv(&mut self) -> Value {
        self.recv_timeout(HANG_GUARD).unwrap_or_else(|| {
            panic!(
                "no reply within {HANG_GUARD:?}; stderr:\n{}",
                self.stderr_text()
            )
        })
    }

    /// The next message, which must be the response with this id (tests
    /// that interleave several requests use `recv` and match ids themselves).
    pub fn recv_id(&mut self, id: &Value) -> Value {
        let msg = self.recv_timeout(HANG_GUARD).unwrap_or_else(|| {
            panic!(
                "no reply for id {id} within {HANG_GUARD:?}; stderr:\n{}",
                self.stderr_text()
            )
        });
        assert_eq!(&msg["id"], id, "expected the reply for id {id}, got {msg}");
        msg
    }

    /// Proves that nothing was written for the lines sent before: sends a
    /// `ping` with a fresh id and requires the very next line to be its
    /// answer. The server reads one line at a time and answers every line
    /// but a tool call on the reading thread, through one queue to the one
    /// writer (src/serve.rs): an answer to any earlier line that is not a
    /// tool call would be written before this one. A tool call runs on a
    /// worker and may be answered later: to prove that one is never
    /// answered, end the session ([`Server::finish`]) and look at
    /// [`Server::rest_after_exit`].
    pub fn expect_nothing_before_ping(&mut self) {
        static N: AtomicU64 = AtomicU64::new(0);
        let id = json!(format!(
            "nothing-before-{}",
            N.fetch_add(1, Ordering::Relaxed)
        ));
        self.send(&req(id.clone(), "ping", json!({})));
        let msg = self.recv_timeout(HANG_GUARD).unwrap_or_else(|| {
            panic!(
                "no answer to ping {id} within {HANG_GUARD:?}; stderr:\n{}",
                self.stderr_text()
            )
        });
        assert_eq!(
            msg,
            json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            "something was written before the answer to ping {id}"
        );
    }

    /// Every stdout line not yet received, once the server has exited (after
    /// [`Server::finish`] or [`Server::wait_exit`]): read until stdout ends.
    pub fn rest_after_exit(&mut self) -> Vec<Value> {
        let deadline = Instant::now() + HANG_GUARD;
        let mut rest = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => rest.push(self.check_line(&line)),
                Err(RecvTimeoutError::Disconnected) => return rest,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("stdout did not end within {HANG_GUARD:?}; read so far: {rest:?}")
                }
            }
        }
    }

    fn check_line(&mut self, line: &str) -> Value {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "not JSON-RPC 2.0: {line}");
        let is_result = v.get("result").is_some();
        let is_error = v.get("error").is_some();
        assert!(is_result ^ is_error, "exactly one of result/error: {line}");
        assert!(
            v.get("id").is_some(),
            "a response always has an id member: {line}"
        );
        assert!(
            !line.contains('\u{2028}') && !line.contains('\u{2029}'),
            "raw line separators in {line}"
        );
        if let Some(code) = v.pointer("/error/code") {
            // G1-G3: only the standard codes and -32022; nothing in the
            // implementation-defined range, no retired or HTTP-only codes.
            let code = code.as_i64().expect("integer error code");
            assert!(
                [-32700, -32600, -32601, -32602, -32603, -32022].contains(&code),
                "error code {code} is not one this server may send: {line}"
            );
            assert!(v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()));
        }
        let (method, mut rev) = self
            .sent
            .by_id
            .get(&v["id"].to_string())
            .cloned()
            .unwrap_or_else(|| ("".into(), "none".into()));
        if method == "initialize" {
            if let Some(p) = v.pointer("/result/protocolVersion").and_then(Value::as_str) {
                if self.legacy.is_none() {
                    self.legacy = Some(p.to_string());
                }
                rev = p.to_string();
            } else {
                rev = "none".into();
            }
        }
        if v.pointer("/error/code").and_then(Value::as_i64) == Some(-32022) {
            // G4: the version error answers modern (envelope) traffic only.
            assert_eq!(rev, MODERN, "-32022 sent to non-modern traffic: {line}");
        }
        wire_log(&rev, &method, &v);
        v
    }

    /// The next stdout line as raw text (for byte-exact checks), within 30 s.
    pub fn raw_line(&mut self) -> String {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(30))
            .expect("a stdout line within 30 s");
        self.check_line(&line);
        line
    }

    /// The server's stderr as read so far. The server writes a call's log
    /// line after its answer, and another thread reads the pipe, so a line
    /// may still be on its way: to look for one, use [`Server::stderr_when`]
    /// (or [`Server::stderr_after_exit`] once the server has exited).
    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The server's stderr once `ready` holds for it; panics, naming `what`,
    /// when it does not within 30 s or the server's stderr ended without it.
    pub fn stderr_when(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // Read whether the pipe had ended before the text, so the last
            // look sees everything there will ever be.
            let ended = self.stderr_ended.load(Ordering::SeqCst);
            let text = self.stderr_text();
            if ready(&text) {
                return text;
            }
            if ended || Instant::now() > deadline {
                panic!("stderr never showed {what}:\n{text}");
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Everything the server wrote to stderr, once the pipe has ended (the
    /// server has exited: after [`Server::finish`]); panics after 30 s.
    pub fn stderr_after_exit(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        // The reader stores the last text before it marks the end.
        while !self.stderr_ended.load(Ordering::SeqCst) {
            if Instant::now() > deadline {
                panic!("stderr did not end:\n{}", self.stderr_text());
            }
            thread::sleep(Duration::from_millis(10));
        }
        self.stderr_text()
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Close stdin and wait for the exit; returns the status and how long it took.
    pub fn finish(&mut self) -> (ExitStatus, Duration) {
        self.close_stdin();
        let t = Instant::now();
        let status = self.wait_exit("stdin's end of file");
        (status, t.elapsed())
    }

    /// Wait for the server to exit after `after` (what should end it).
    /// [`HANG_GUARD`] only keeps a broken server from hanging the suite;
    /// when it passes, the server is killed and the test fails.
    pub fn wait_exit(&mut self, after: &str) -> ExitStatus {
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "the server did not exit within {HANG_GUARD:?} of {after}; stderr:\n{}",
                    self.stderr_text()
                );
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's process, for a test that signals or waits on it itself.
    #[allow(dead_code)]
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wire_log(rev: &str, method: &str, msg: &Value) {
    let Ok(path) = std::env::var("RWMCP_WIRE_LOG") else {
        return;
    };
    let entry = json!({"revision": rev, "method": method, "message": msg});
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    // One write per entry keeps lines whole across parallel tests.
    f.write_all(format!("{entry}\n").as_bytes()).unwrap();
}

/// A request helper: `{"jsonrpc":"2.0","id":id,"method":m,"params":p}`.
pub fn req(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":method,"params":params})
}

/// A modern request with the envelope merged into `params._meta`.
pub fn modern(id: Value, method: &str, mut params: Value) -> Value {
    params["_meta"] = env();
    req(id, method, params)
}

/// The envelope of a tool result, parsed from its text item.
pub fn envelope_of(result: &Value) -> Value {
    let text = result["content"][0]["text"]
        .as_str()
        .expect("one text item");
    serde_json::from_str(text).expect("the text item is the JSON envelope")
}

//! `--audit-log FILE`: one JSON line per served request that does
//! something (start-up, `tools/list`, every `tools/call`, shutdown), in a
//! hash chain per file, optionally signed under the owner's key
//! (docs/AUDIT.md). The serve loop calls in at the points where a request
//! or an outcome is known; without `--audit-log` every call here returns
//! at once.

mod append;
pub(crate) use crate::canonical;
pub(crate) mod chain;
mod record;
pub(crate) mod verify;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use serde_json::{json, Map, Value};

use crate::envelope::Envelope;
use crate::error::{ErrorCode, ToolError};
use crate::redact::Redactor;

use append::{AuditFile, Before};
use chain::{seal, sha256_hex, Key};

/// The record format's version (`v`).
pub(crate) const FORMAT: u64 = 1;

/// The request `_meta` members kept: the client's identity on
/// 2026-07-28 requests, and a W3C trace context.
pub(crate) const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub(crate) const META_TRACEPARENT: &str = "traceparent";

/// The owner's audit options, checked.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub log: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub sync: bool,
    pub required: bool,
}

struct Audit {
    file: Mutex<AuditFile>,
    key: Option<Key>,
    required: bool,
    redactor: Redactor,
    session: Value,
    session_id: String,
    client: Mutex<Option<Value>>,
    seq: AtomicU64,
    reported: AtomicBool,
    /// The closing record is written once, whichever way the server stops.
    stopped: AtomicBool,
    catalog_sha256: Option<String>,
    backend_sha256: Option<String>,
}

static AUDIT: OnceLock<Audit> = OnceLock::new();
static CATALOG_SHA256: OnceLock<String> = OnceLock::new();

/// The catalog document as `describe` printed it (hashed once).
pub(crate) fn note_catalog(bytes: &[u8]) {
    let _ = CATALOG_SHA256.set(sha256_hex(bytes));
}

/// Why the audit log could not be started.
#[derive(Debug)]
pub(crate) enum StartError {
    Key(PathBuf, chain::KeyError),
    Open(PathBuf, std::io::Error),
    KeyWithoutLog,
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Key(p, e) => write!(f, "--audit-key {}: {e}", p.display()),
            StartError::Open(p, e) => write!(f, "--audit-log {}: {e}", p.display()),
            StartError::KeyWithoutLog => {
                f.write_str("--audit-key, --audit-sync and --audit-required need --audit-log FILE")
            }
        }
    }
}

impl std::error::Error for StartError {}

/// Open the log and write the start record. A log that cannot be written
/// stops the start only under `--audit-required`; a refused key always does.
pub(crate) fn start(
    settings: &Settings,
    redactor: &Redactor,
    backend: &Path,
) -> Result<(), StartError> {
    let Some(path) = &settings.log else {
        if settings.key.is_some() || settings.sync || settings.required {
            return Err(StartError::KeyWithoutLog);
        }
        return Ok(());
    };
    let key = match &settings.key {
        Some(k) => Some(Key::load(k, Some(path)).map_err(|e| StartError::Key(k.clone(), e))?),
        None => None,
    };
    let file = match AuditFile::open(path, settings.sync) {
        Ok(f) => f,
        Err(e) if settings.required => return Err(StartError::Open(path.clone(), e)),
        Err(e) => {
            crate::log::line(format!(
                "audit: cannot open {}: {e}; serving goes on without an audit log",
                path.display()
            ));
            return Ok(());
        }
    };
    let audit = Audit::new(file, key, settings.required, redactor, backend);
    let mut body = Map::new();
    body.insert(
        "server".into(),
        json!({"name": env!("CARGO_PKG_NAME"), "version": env!("CARGO_PKG_VERSION")}),
    );
    body.insert(
        "backend".into(),
        json!(redactor.redact_str(&backend.display().to_string())),
    );
    let written = audit.write("start", body);
    let audit = AUDIT.get_or_init(|| audit);
    if let Err(e) = written {
        if audit.required {
            return Err(StartError::Open(path.clone(), e));
        }
        audit.report(&e);
    }
    Ok(())
}

impl Audit {
    fn new(
        file: AuditFile,
        key: Option<Key>,
        required: bool,
        redactor: &Redactor,
        backend: &Path,
    ) -> Audit {
        let started = record::now_ms();
        let pid = std::process::id();
        let session_id = format!("{pid:x}.{started:x}.{:x}", started_nanos());
        Audit {
            file: Mutex::new(file),
            key,
            required,
            redactor: redactor.clone(),
            session: json!({"id": session_id, "pid": pid, "started": record::utc_ms(started)}),
            session_id,
            client: Mutex::new(None),
            seq: AtomicU64::new(0),
            reported: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            catalog_sha256: CATALOG_SHA256.get().cloned(),
            backend_sha256: std::fs::read(backend).ok().map(|b| sha256_hex(&b)),
        }
    }

    /// The `call` record of a call that took `elapsed` and ended so.
    fn record_call(
        &self,
        job: &Request<'_>,
        elapsed: std::time::Duration,
        outcome: Ended<'_>,
    ) -> std::io::Result<()> {
        let mut m = call_fields(self, job);
        m.insert(
            "duration_ms".into(),
            json!((elapsed.as_micros() as f64) / 1000.0),
        );
        m.extend(record::outcome(outcome));
        self.digests(&mut m);
        self.write("call", m)
    }
}

fn started_nanos() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}

impl Audit {
    /// Append one record of `kind` (and a genesis record first when the
    /// file is new). The session's line counter advances under the same lock.
    fn write(&self, kind: &str, fields: Map<String, Value>) -> std::io::Result<()> {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        file.append(|before| {
            let mut lines = Vec::new();
            let (prev, torn) = match before {
                Before::Empty { follows } => {
                    let mut g = self.common("genesis");
                    g.insert("follows".into(), json!(follows));
                    let line = seal(
                        g,
                        &append::genesis_prev(follows.as_ref()),
                        self.key.as_ref(),
                    );
                    let h = sha256_hex(line.as_bytes());
                    lines.push(line);
                    (h, false)
                }
                Before::Line(h) => (h.clone(), false),
                Before::Torn(h) => (h.clone(), true),
            };
            let mut body = self.common(kind);
            if torn {
                body.insert("after_torn".into(), json!(true));
            }
            if kind == "stop" {
                let n = self.seq.load(Ordering::Relaxed) - 1;
                body.insert("session_lines".into(), json!(n));
            }
            body.extend(fields);
            lines.push(seal(body, &prev, self.key.as_ref()));
            lines
        })
        .map(|_| ())
    }

    fn common(&self, kind: &str) -> Map<String, Value> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let mut m = Map::new();
        m.insert("v".into(), json!(FORMAT));
        m.insert("type".into(), json!(kind));
        m.insert("time".into(), json!(record::utc_ms(record::now_ms())));
        m.insert("id".into(), json!(format!("{}.{seq}", self.session_id)));
        m.insert("seq".into(), json!(seq));
        m.insert("session".into(), self.session.clone());
        m
    }

    /// A write failure, said once on stderr.
    fn report(&self, e: &std::io::Error) {
        if !self.reported.swap(true, Ordering::Relaxed) {
            crate::log::line(format!(
                "audit: cannot write the audit log: {e}; {}",
                if self.required {
                    "calls are refused (audit_failed) until it can be written"
                } else {
                    "serving goes on (reported once)"
                }
            ));
        }
    }

    /// The client members: the request's `_meta` identity if it has one,
    /// else the one `initialize` gave; and a trace context. All redacted.
    fn client_fields(&self, meta: Option<&Value>, m: &mut Map<String, Value>) {
        let from_meta = meta.and_then(|x| x.get(META_CLIENT_INFO)).cloned();
        let client = from_meta.or_else(|| self.client.lock().ok().and_then(|c| c.clone()));
        m.insert(
            "client".into(),
            self.redactor.redact_value(client.unwrap_or(Value::Null)),
        );
        if let Some(tp) = meta
            .and_then(|x| x.get(META_TRACEPARENT))
            .and_then(Value::as_str)
        {
            let tp: String = tp.chars().take(128).collect();
            m.insert("traceparent".into(), json!(self.redactor.redact_str(&tp)));
        }
    }

    fn digests(&self, m: &mut Map<String, Value>) {
        m.insert("catalog_sha256".into(), json!(self.catalog_sha256));
        m.insert("backend_sha256".into(), json!(self.backend_sha256));
    }
}

/// `initialize` named the client.
pub(crate) fn client_info(info: Option<&Value>) {
    if let (Some(a), Some(info)) = (AUDIT.get(), info) {
        if let Ok(mut c) = a.client.lock() {
            *c = Some(info.clone());
        }
    }
}

/// A `tools/list` was answered.
pub(crate) fn tools_list(id: &Value, meta: Option<&Value>) {
    let Some(a) = AUDIT.get() else { return };
    let mut m = Map::new();
    m.insert("jsonrpc_id".into(), a.redactor.redact_value(id.clone()));
    a.client_fields(meta, &mut m);
    a.digests(&mut m);
    if let Err(e) = a.write("tools_list", m) {
        a.report(&e);
    }
}

/// The server stops: the closing record counts the session's lines.
pub(crate) fn stop() {
    let Some(a) = AUDIT.get() else { return };
    if a.stopped.swap(true, Ordering::Relaxed) {
        return;
    }
    if let Err(e) = a.write("stop", Map::new()) {
        a.report(&e);
    }
}

/// What a `tools/call` asked.
pub(crate) struct Request<'a> {
    pub id: &'a Value,
    pub tool: &'a str,
    pub arguments: &'a Map<String, Value>,
    /// The request's `_meta`.
    pub meta: Option<&'a Value>,
}

/// A `tools/call` that ended without reaching a worker: naming no served
/// tool, cancelled while queued, or refused for want of a worker.
pub(crate) fn not_run(job: &Request<'_>, ended: Ended<'_>) {
    let Some(a) = AUDIT.get() else { return };
    if let Err(e) = a.record_call(job, std::time::Duration::ZERO, ended) {
        a.report(&e);
    }
}

/// How a call ended.
pub(crate) enum Ended<'a> {
    Done(&'a Envelope),
    Cancelled,
    UnknownTool,
    /// A fault inside the server.
    Fault,
}

/// A call about to run. Under `--audit-required` its start is recorded
/// first, and a call whose start cannot be recorded is refused: the
/// envelope to answer with.
pub(crate) struct Call {
    started: Instant,
}

pub(crate) fn begin_call(job: &Request<'_>) -> Result<Call, Box<Envelope>> {
    let call = Call {
        started: Instant::now(),
    };
    let Some(a) = AUDIT.get() else {
        return Ok(call);
    };
    if !a.required {
        return Ok(call);
    }
    let mut m = call_fields(a, job);
    m.remove("arguments_hmac");
    match a.write("call_start", m) {
        Ok(()) => Ok(call),
        Err(e) => {
            a.report(&e);
            Err(Box::new(Envelope::from_error(&ToolError::templated(
                ErrorCode::AuditFailed,
                "the audit log could not be written",
            ))))
        }
    }
}

impl Call {
    /// The call ended (`None`: it failed inside the server).
    pub(crate) fn end(self, job: &Request<'_>, outcome: Ended<'_>) {
        let Some(a) = AUDIT.get() else { return };
        if let Err(e) = a.record_call(job, self.started.elapsed(), outcome) {
            a.report(&e);
        }
    }
}

/// For the benchmark (benches/mcp_bench.rs): a session of its own writing
/// the server's `call` records to a file, each as after a typical call.
#[doc(hidden)]
pub struct BenchLog {
    audit: Audit,
    envelope: Envelope,
}

impl BenchLog {
    pub fn open(path: &Path, sync: bool, redactor: &Redactor) -> std::io::Result<BenchLog> {
        let file = AuditFile::open(path, sync)?;
        let audit = Audit::new(file, None, false, redactor, Path::new("/proc/self/exe"));
        let mut envelope = Envelope::from_run(1, json!({"findings": ["a", "b"], "count": 2}));
        envelope.meta.insert(
            crate::envelope::META_SANDBOX.into(),
            json!({"layers": ["userns", "landlock", "seccomp"], "policy_sha256": "0".repeat(64)}),
        );
        Ok(BenchLog { audit, envelope })
    }

    /// One `call` record: arguments redacted, outcome, digests, chained,
    /// appended under the lock (and synced, if opened so).
    pub fn call(&self, id: u64, arguments: &Map<String, Value>) -> std::io::Result<()> {
        let id = json!(id);
        let job = Request {
            id: &id,
            tool: "log_summary",
            arguments,
            meta: None,
        };
        let ended = Ended::Done(&self.envelope);
        self.audit
            .record_call(&job, std::time::Duration::from_micros(1234), ended)
    }
}

fn call_fields(a: &Audit, job: &Request<'_>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("jsonrpc_id".into(), a.redactor.redact_value(job.id.clone()));
    m.insert("tool".into(), json!(job.tool));
    a.client_fields(job.meta, &mut m);
    let (args, _) = a.redactor.redact(Value::Object(job.arguments.clone()));
    m.insert("arguments".into(), args);
    if let Some(key) = &a.key {
        let hmac = canonical::to_string(&Value::Object(job.arguments.clone()))
            .ok()
            .map(|c| key.arguments(&c));
        m.insert("arguments_hmac".into(), json!(hmac));
    }
    m
}

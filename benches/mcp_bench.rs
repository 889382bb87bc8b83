//! Side-by-side measurements of what a sandboxed tool call costs, driven by
//! `ci/bench.sh` (see BENCHMARKS.md for the numbers and how to read them).
//!
//! Every comparison runs interleaved in one process: each round performs
//! one call of every method, in an order shuffled from round to round,
//! so a busy machine slows all of them alike and the ratios stay
//! meaningful even when the absolute numbers move. Nothing here asserts a
//! speed; a call that fails (an error result, a non-zero exit) stops the
//! run, so the numbers are always numbers of working calls.
//!
//! `cargo bench --bench mcp_bench -- --help` lists the options.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

mod common;

use common::{log_result, typical_result};
use reachweaver_mcp::cli::{Globals, SandboxMode, ServeArgs};
use reachweaver_mcp::dispatch::{Action, Dispatcher};
use reachweaver_mcp::jsonrpc;
use reachweaver_mcp::redact::Redactor;
use reachweaver_mcp::sandbox::{RunKind, Sandbox, SandboxOptions};
use reachweaver_mcp::startup::App;

const MODERN: &str = "2026-07-28";

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

// ---------------------------------------------------------------------------
// Options.

struct Opts {
    /// Calls per method in the interleaved per-call comparison.
    calls: usize,
    /// Server starts per backend.
    startups: usize,
    /// Calls per configuration in the throughput comparison (tiny backend).
    throughput_calls: usize,
    /// In-process `tools/list` handlings.
    list_iters: usize,
    noop: PathBuf,
    py: PathBuf,
    reference: Option<PathBuf>,
    workspace: Option<PathBuf>,
    /// Other builds of the server to compare against, call for call.
    compare: Vec<(String, PathBuf)>,
    /// Where the work folders go.
    work: PathBuf,
    /// The markdown report.
    out: Option<PathBuf>,
    /// Only the interleaved per-call section.
    only_calls: bool,
    only_startup: bool,
    /// Only the in-process redaction section (needs no backend).
    only_redaction: bool,
    /// Only the in-process audit-line section (needs no backend).
    only_audit: bool,
    /// Records per log in the audit-line section.
    audit_lines: usize,
    /// Also time the server with `--pin` in the per-call section, and the
    /// re-identification alone in process.
    with_pins: bool,
    /// Size of the pre-filled log in the audit-line section, in MiB.
    audit_fill_mib: u64,
}

fn usage() -> &'static str {
    "mcp_bench --bench --noop PATH --py PATH --work DIR [--calls N] [--startups N] \
     [--throughput-calls N] [--list-iters N] [--reference PATH --workspace DIR] \
     [--compare-server [NAME=]PATH]... [--out FILE] [--only-calls | --only-startup] [--with-pins]\n\
     mcp_bench --bench --only-redaction [--out FILE]\n\
     mcp_bench --bench --only-audit [--work DIR] [--audit-lines N] [--audit-fill-mib N] [--out FILE]"
}

fn parse_opts() -> Result<Option<Opts>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo test --benches` runs this binary without `--bench`: there is
    // nothing to measure then.
    if !args.iter().any(|a| a == "--bench") {
        println!("mcp_bench: measures only under `cargo bench` (see ci/bench.sh)");
        return Ok(None);
    }
    let mut o = Opts {
        calls: 1000,
        startups: 200,
        throughput_calls: 1000,
        list_iters: 20_000,
        noop: PathBuf::new(),
        py: PathBuf::new(),
        reference: None,
        workspace: None,
        compare: Vec::new(),
        work: std::env::temp_dir().join("rwmcp-bench"),
        out: None,
        only_calls: false,
        only_startup: false,
        only_redaction: false,
        only_audit: false,
        audit_lines: 3000,
        audit_fill_mib: 100,
        with_pins: false,
    };
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| anyhow!("{a} needs a value"));
        match a.as_str() {
            "--bench" => {}
            "--calls" => o.calls = val()?.parse()?,
            "--startups" => o.startups = val()?.parse()?,
            "--throughput-calls" => o.throughput_calls = val()?.parse()?,
            "--list-iters" => o.list_iters = val()?.parse()?,
            "--noop" => o.noop = PathBuf::from(val()?),
            "--py" => o.py = PathBuf::from(val()?),
            "--reference" => o.reference = Some(PathBuf::from(val()?)),
            "--workspace" => o.workspace = Some(PathBuf::from(val()?)),
            "--compare-server" => {
                let v = val()?;
                let (name, path) = v.split_once('=').unwrap_or((v.as_str(), v.as_str()));
                o.compare.push((name.to_string(), PathBuf::from(path)));
            }
            "--work" => o.work = PathBuf::from(val()?),
            "--out" => o.out = Some(PathBuf::from(val()?)),
            "--only-calls" => o.only_calls = true,
            "--only-startup" => o.only_startup = true,
            "--only-redaction" => o.only_redaction = true,
            "--only-audit" => o.only_audit = true,
            "--with-pins" => o.with_pins = true,
            "--audit-lines" => o.audit_lines = val()?.parse()?,
            "--audit-fill-mib" => o.audit_fill_mib = val()?.parse()?,
            "--help" | "-h" => {
                println!("{}", usage());
                return Ok(None);
            }
            other => bail!("unknown option {other}\n{}", usage()),
        }
    }
    if o.only_redaction || o.only_audit {
        return Ok(Some(o));
    }
    if o.noop.as_os_str().is_empty() || o.py.as_os_str().is_empty() {
        bail!("--noop and --py are required\n{}", usage());
    }
    o.noop = std::fs::canonicalize(&o.noop).context("--noop")?;
    o.py = std::fs::canonicalize(&o.py).context("--py")?;
    Ok(Some(o))
}

// ---------------------------------------------------------------------------
// Statistics.

#[derive(Clone, Copy)]
struct Stats {
    n: usize,
    median: f64,
    p99: f64,
    mean: f64,
}

/// Median, 99th percentile (nearest rank) and mean, in milliseconds.
fn stats(samples: &[Duration]) -> Stats {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(|a, b| a.total_cmp(b));
    let n = ms.len();
    if n == 0 {
        return Stats {
            n,
            median: f64::NAN,
            p99: f64::NAN,
            mean: f64::NAN,
        };
    }
    let median = if n % 2 == 1 {
        ms[n / 2]
    } else {
        (ms[n / 2 - 1] + ms[n / 2]) / 2.0
    };
    let rank = ((0.99 * n as f64).ceil() as usize).clamp(1, n);
    Stats {
        n,
        median,
        p99: ms[rank - 1],
        mean: ms.iter().sum::<f64>() / n as f64,
    }
}

fn fmt_ms(v: f64) -> String {
    if v < 1.0 {
        format!("{:.3}", v)
    } else if v < 100.0 {
        format!("{:.2}", v)
    } else {
        format!("{:.0}", v)
    }
}

// ---------------------------------------------------------------------------
// Processes measured from outside.

/// Spawn, read stdout and stderr to the end, wait; fail on a non-zero exit.
fn run_plain(cmd: &mut Command) -> Result<Duration> {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawn {cmd:?}"))?;
    let mut out = Vec::new();
    let mut err = Vec::new();
    if let Some(mut s) = child.stdout.take() {
        s.read_to_end(&mut out)?;
    }
    if let Some(mut s) = child.stderr.take() {
        s.read_to_end(&mut err)?;
    }
    let status = child.wait()?;
    let took = started.elapsed();
    if !status.success() || out != b"{}\n" {
        bail!(
            "{cmd:?}: {status}, stdout {:?}, stderr {:?}",
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&err)
        );
    }
    Ok(took)
}

/// The environment every directly started backend gets: what the sandbox
/// would pass, so neither side gains from a different environment.
fn plain_env(cmd: &mut Command) -> &mut Command {
    cmd.env_clear();
    for name in ["PATH", "HOME", "LANG", "TZ"] {
        if let Ok(v) = std::env::var(name) {
            cmd.env(name, v);
        }
    }
    cmd.env("TMPDIR", std::env::temp_dir())
}

/// The backend's argv for one call, as the server builds it.
fn call_argv(backend: &Path) -> Vec<String> {
    vec![
        backend.to_string_lossy().into_owned(),
        "noop".into(),
        "--format=json".into(),
    ]
}

/// `bwrap --unshare-all` with the least file system a backend runs in:
/// `/usr` (and the merged-usr links), the backend's folder, `/dev`, `/proc`.
fn bwrap_cmd(backend: &Path, root: &Path) -> Command {
    let dir = backend.parent().unwrap_or(Path::new("/"));
    let mut c = Command::new("bwrap");
    c.args(["--unshare-all", "--die-with-parent", "--new-session"])
        .args(["--ro-bind", "/usr", "/usr"])
        .args(["--symlink", "usr/bin", "/bin"])
        .args(["--symlink", "usr/lib", "/lib"])
        .args(["--symlink", "usr/lib64", "/lib64"])
        .args(["--dev", "/dev", "--proc", "/proc"])
        .arg("--ro-bind")
        .arg(dir)
        .arg(dir)
        .arg("--ro-bind")
        .arg(root)
        .arg(root)
        .arg("--chdir")
        .arg(root)
        .args(call_argv(backend));
    c
}

fn unshare_cmd(backend: &Path) -> Command {
    let mut c = Command::new("unshare");
    c.arg("-rn").args(call_argv(backend));
    c
}

// ---------------------------------------------------------------------------
// An MCP client over stdio.

struct Reply {
    id: u64,
    at: Instant,
    msg: Value,
}

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    replies: Receiver<Reply>,
    next_id: u64,
    label: String,
}

struct ServerSpec<'a> {
    bin: &'a Path,
    backend: &'a Path,
    root: &'a Path,
    max_concurrent: u32,
    globals: Vec<String>,
    /// Options of `mcp-serve` beyond the ones every server here gets.
    serve_args: Vec<String>,
}

impl Server {
    fn start(spec: &ServerSpec<'_>) -> Result<(Server, Instant)> {
        let mut cmd = Command::new(spec.bin);
        cmd.arg(format!("--backend={}", spec.backend.display()))
            .args(&spec.globals)
            .arg("mcp-serve")
            .arg(format!("--root={}", spec.root.display()))
            .arg(format!("--max-concurrent-calls={}", spec.max_concurrent))
            .arg("--max-calls-per-minute=100000000")
            .args(&spec.serve_args)
            .current_dir(spec.root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let started = Instant::now();
        let mut child = cmd.spawn().with_context(|| format!("start {cmd:?}"))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let stdin = child.stdin.take();
        let (tx, rx) = channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let at = Instant::now();
                let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let id = msg.get("id").and_then(Value::as_u64).unwrap_or(u64::MAX);
                if tx.send(Reply { id, at, msg }).is_err() {
                    break;
                }
            }
        });
        Ok((
            Server {
                child,
                stdin,
                replies: rx,
                next_id: 1,
                label: spec.backend.display().to_string(),
            },
            started,
        ))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, method: &str, mut params: Value) -> Result<(u64, Instant)> {
        let id = self.next_id;
        self.next_id += 1;
        params["_meta"] = meta();
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut text = line.to_string();
        text.push('\n');
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        let at = Instant::now();
        stdin.write_all(text.as_bytes())?;
        stdin.flush()?;
        Ok((id, at))
    }

    fn recv(&self) -> Result<Reply> {
        let r = self
            .replies
            .recv_timeout(Duration::from_secs(60))
            .with_context(|| format!("no answer from the server for {}", self.label))?;
        if let Some(e) = r.msg.get("error") {
            bail!("{}: error answer {e}", self.label);
        }
        if r.msg.pointer("/result/isError") == Some(&Value::Bool(true)) {
            bail!("{}: error result {}", self.label, r.msg["result"]);
        }
        Ok(r)
    }

    /// One request, answered: the client-observed round trip.
    fn round_trip(&mut self, method: &str, params: Value) -> Result<Duration> {
        let (id, sent) = self.send(method, params)?;
        let r = self.recv()?;
        if r.id != id {
            bail!("answer to {} while waiting for {id}", r.id);
        }
        Ok(r.at.duration_since(sent))
    }

    fn call(&mut self, arguments: Value) -> Result<Duration> {
        self.round_trip(
            "tools/call",
            json!({"name": "noop", "arguments": arguments}),
        )
    }

    fn list(&mut self) -> Result<Duration> {
        self.round_trip("tools/list", json!({}))
    }

    fn stop(mut self) -> Result<()> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = self.child.try_wait()? {
                if !st.success() {
                    bail!("{}: server exited with {st}", self.label);
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                bail!("{}: server did not stop at EOF", self.label);
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}

fn status_field(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

// ---------------------------------------------------------------------------
// Report.

#[derive(Default)]
struct Report {
    md: String,
}

impl Report {
    fn line(&mut self, s: impl AsRef<str>) {
        println!("{}", s.as_ref());
        self.md.push_str(s.as_ref());
        self.md.push('\n');
    }

    fn table(
        &mut self,
        title: &str,
        rows: &[(String, Stats)],
        base: usize,
        extra: &[(usize, String)],
    ) {
        self.line(format!("\n### {title}\n"));
        let mut head = format!(
            "| method | n | median ms | p99 ms | mean ms | median / {} |",
            rows[base].0
        );
        let mut rule = String::from("| --- | ---: | ---: | ---: | ---: | ---: |");
        for (_, name) in extra {
            head.push_str(&format!(" median / {name} |"));
            rule.push_str(" ---: |");
        }
        self.line(head);
        self.line(rule);
        for (name, s) in rows {
            let mut row = format!(
                "| {name} | {} | {} | {} | {} | {:.2}× |",
                s.n,
                fmt_ms(s.median),
                fmt_ms(s.p99),
                fmt_ms(s.mean),
                s.median / rows[base].1.median
            );
            for (idx, _) in extra {
                row.push_str(&format!(" {:.2}× |", s.median / rows[*idx].1.median));
            }
            self.line(row);
        }
    }
}

// ---------------------------------------------------------------------------
// Sections.

type Method<'a> = (String, Box<dyn FnMut() -> Result<Duration> + 'a>);

/// Run every method `n` times, interleaved: each round runs every method
/// once, in an order shuffled per round (a fixed order would always put
/// the same method right after another and charge it for that one's
/// aftermath, such as a process still exiting).
fn interleave(n: usize, methods: &mut [Method<'_>]) -> Result<Vec<(String, Stats)>> {
    let m = methods.len();
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); m];
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut order: Vec<usize> = (0..m).collect();
    for _ in 0..n {
        for i in (1..m).rev() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            order.swap(i, (rng % (i as u64 + 1)) as usize);
        }
        for &i in &order {
            let d = (methods[i].1)().with_context(|| methods[i].0.clone())?;
            samples[i].push(d);
        }
    }
    Ok(methods
        .iter()
        .zip(samples.iter())
        .map(|((name, _), s)| (name.clone(), stats(s)))
        .collect())
}

fn sandbox_for(backend: &Path, root: &Path, helper: &Path) -> Result<Sandbox> {
    let opts = SandboxOptions {
        mode: SandboxMode::Require,
        backend: backend.to_path_buf(),
        root: root.to_path_buf(),
        read: Vec::new(),
        db: None,
        allow_read: Vec::new(),
        pass_env: Vec::new(),
        helper: Some(helper.to_path_buf()),
        ..SandboxOptions::default()
    };
    Sandbox::detect(&opts).map_err(|e| anyhow!("{e}"))
}

/// One run through the sandbox from this process: spawn, read, wait.
fn run_sandboxed(sb: &Sandbox, argv: &[String], root: &Path) -> Result<Duration> {
    let started = Instant::now();
    let mut child = sb
        .spawn(RunKind::ReadOnly, argv, root)
        .map_err(|e| anyhow!("{e}"))?;
    let mut out = Vec::new();
    let mut err = Vec::new();
    if let Some(mut s) = child.stdout.take() {
        s.read_to_end(&mut out)?;
    }
    if let Some(mut s) = child.stderr.take() {
        s.read_to_end(&mut err)?;
    }
    let status = child.wait()?;
    let took = started.elapsed();
    if !status.success() || out != b"{}\n" {
        bail!(
            "sandboxed run: {status}, stdout {:?}, stderr {:?}",
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&err)
        );
    }
    drop(child);
    Ok(took)
}

/// The rows as a table of median, p99 and mean.
fn stats_table(rep: &mut Report, rows: &[(String, Stats)]) {
    rep.line("| what | n | median ms | p99 ms | mean ms |");
    rep.line("| --- | ---: | ---: | ---: | ---: |");
    for (name, s) in rows {
        rep.line(format!(
            "| {name} | {} | {} | {} | {} |",
            s.n,
            fmt_ms(s.median),
            fmt_ms(s.p99),
            fmt_ms(s.mean)
        ));
    }
}

/// One run through the sandbox whose watched calls are answered: its output
/// is read on threads of its own while `wait` answers the run's supervisor
/// (a caller that reads to the end first would leave a connect unanswered).
fn run_watched(sb: &Sandbox, argv: &[String], root: &Path) -> Result<Duration> {
    let started = Instant::now();
    let mut child = sb
        .spawn(RunKind::ReadOnly, argv, root)
        .map_err(|e| anyhow!("{e}"))?;
    fn drain<R: Read + Send + 'static>(s: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut s) = s {
                let _ = s.read_to_end(&mut v);
            }
            v
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let status = child.wait()?;
    let took = started.elapsed();
    let out = out.join().map_err(|_| anyhow!("stdout reader"))?;
    let err = err.join().unwrap_or_default();
    if !status.success() || out != b"{}\n" {
        bail!(
            "sandboxed run: {status}, stdout {:?}, stderr {:?}",
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&err)
        );
    }
    Ok(took)
}

/// A sandboxed run that tries 1,000 TCP connects to an internet address,
/// each handed to the run's supervisor and refused, beside the same run
/// trying none: what a run that keeps trying costs, per attempt.
fn refused_connects(ctx: &Ctx<'_>, rep: &mut Report) -> Result<()> {
    let root = ctx.root.as_path();
    let sb = sandbox_for(&ctx.o.noop, root, &ctx.server)?;
    let noop = ctx.o.noop.to_string_lossy().into_owned();
    let argv = |n: u32| vec![noop.clone(), "noop".to_string(), format!("--connects={n}")];
    let (none, many) = (argv(0), argv(1000));
    let rounds = ctx.o.calls.min(200);
    let mut methods: Vec<Method<'_>> = vec![
        (
            "sandboxed run, no connect".to_string(),
            Box::new(|| run_watched(&sb, &none, root)),
        ),
        (
            "sandboxed run, 1,000 refused connects".to_string(),
            Box::new(|| run_watched(&sb, &many, root)),
        ),
    ];
    let rows = interleave(rounds, &mut methods)?;
    rep.line(format!(
        "\n### A run that makes 1,000 refused connects, tiny C backend ({rounds} rounds interleaved)\n"
    ));
    stats_table(rep, &rows);
    let per = (rows[1].1.median - rows[0].1.median) / 1000.0;
    rep.line(format!(
        "\nEach refused connect (socket, the supervisor's look and answer, close): {} µs at the median.",
        fmt_ms(per * 1000.0)
    ));
    Ok(())
}

struct Ctx<'a> {
    o: &'a Opts,
    server: PathBuf,
    root: PathBuf,
}

fn per_call(ctx: &Ctx<'_>, backend: &Path, label: &str, rep: &mut Report) -> Result<()> {
    let argv = call_argv(backend);
    let root = ctx.root.as_path();
    let sb = sandbox_for(backend, root, &ctx.server)?;
    let spec = ServerSpec {
        bin: &ctx.server,
        backend,
        root,
        max_concurrent: 1,
        globals: Vec::new(),
        serve_args: Vec::new(),
    };
    let (mut server, _) = Server::start(&spec)?;
    server.round_trip("server/discover", json!({}))?;
    let mut others: Vec<(String, Server)> = Vec::new();
    for (name, bin) in &ctx.o.compare {
        let (mut s, _) = Server::start(&ServerSpec {
            bin,
            globals: Vec::new(),
            serve_args: Vec::new(),
            ..spec
        })?;
        s.round_trip("server/discover", json!({}))?;
        others.push((name.clone(), s));
    }
    // The same server with --pin: the backend re-identified before each call.
    if ctx.o.with_pins {
        let pins = ctx
            .o
            .work
            .join(format!("pins-{}.json", label.replace(' ', "-")));
        let _ = std::fs::remove_file(&pins);
        let (mut s, _) = Server::start(&ServerSpec {
            serve_args: vec![format!("--pin={}", pins.display())],
            globals: Vec::new(),
            ..spec
        })?;
        s.round_trip("server/discover", json!({}))?;
        others.push(("this server, --pin".to_string(), s));
    }
    // Warm every path once (page cache, first zygote start, lazy statics).
    run_plain(plain_env(Command::new(&argv[0]).args(&argv[1..])))?;
    run_sandboxed(&sb, &argv, root)?;
    server.call(json!({}))?;
    for (_, s) in others.iter_mut() {
        s.call(json!({}))?;
    }

    let mut methods: Vec<Method<'_>> = vec![
        (
            "plain spawn (fork/exec+wait)".into(),
            Box::new(|| run_plain(plain_env(Command::new(&argv[0]).args(&argv[1..])))),
        ),
        (
            "sandboxed spawn (library)".into(),
            Box::new(|| run_sandboxed(&sb, &argv, root)),
        ),
        (
            "tools/call via server".into(),
            Box::new(|| server.call(json!({}))),
        ),
        (
            "unshare -rn".into(),
            Box::new(|| run_plain(plain_env(&mut unshare_cmd(backend)))),
        ),
        (
            "bwrap --unshare-all".into(),
            Box::new(|| run_plain(plain_env(&mut bwrap_cmd(backend, root)))),
        ),
    ];
    for (name, s) in others.iter_mut() {
        methods.push((
            format!("tools/call via {name}"),
            Box::new(|| s.call(json!({}))),
        ));
    }
    let started = Instant::now();
    let rows = interleave(ctx.o.calls, &mut methods)?;
    drop(methods);
    let mut extra = vec![(4, "bwrap".to_string())];
    for (i, (name, _)) in others.iter().enumerate() {
        extra.push((5 + i, name.clone()));
    }
    rep.table(
        &format!(
            "Per-call cost, {label} ({} rounds interleaved, {:.0} s)",
            ctx.o.calls,
            started.elapsed().as_secs_f64()
        ),
        &rows,
        0,
        &extra,
    );
    rep.line(format!(
        "\nsandboxed spawn / plain: {:.2}×; tools/call / plain: {:.2}×; sandboxed spawn / bwrap: {:.2}×; tools/call / bwrap: {:.2}×",
        rows[1].1.median / rows[0].1.median,
        rows[2].1.median / rows[0].1.median,
        rows[1].1.median / rows[4].1.median,
        rows[2].1.median / rows[4].1.median,
    ));
    if ctx.o.with_pins {
        // The pinned server is the last method.
        let pinned = &rows[rows.len() - 1].1;
        rep.line(format!(
            "tools/call with --pin / without: {:.3}× (median {:.3} ms / {:.3} ms)",
            pinned.median / rows[2].1.median,
            pinned.median,
            rows[2].1.median
        ));
    }
    server.stop()?;
    for (_, s) in others {
        s.stop()?;
    }
    Ok(())
}

/// Calls per second with one server allowing 1 and one allowing 2 calls
/// at once, the client keeping as many in flight; blocks alternate.
fn throughput(
    ctx: &Ctx<'_>,
    backend: &Path,
    label: &str,
    total: usize,
    rep: &mut Report,
) -> Result<()> {
    let root = ctx.root.as_path();
    let mut builds = vec![("this build".to_string(), ctx.server.clone())];
    builds.extend(ctx.o.compare.iter().cloned());
    struct Config {
        build: String,
        inflight: usize,
        server: Server,
        spent: Duration,
        done: usize,
        latency: Vec<Duration>,
    }
    let mut configs = Vec::new();
    for (build, bin) in &builds {
        for max in [1u32, 2] {
            let (mut server, _) = Server::start(&ServerSpec {
                bin,
                backend,
                root,
                max_concurrent: max,
                globals: Vec::new(),
                serve_args: Vec::new(),
            })?;
            server.round_trip("server/discover", json!({}))?;
            server.call(json!({}))?;
            configs.push(Config {
                build: build.clone(),
                inflight: max as usize,
                server,
                spent: Duration::ZERO,
                done: 0,
                latency: Vec::new(),
            });
        }
    }
    let block = 50.min(total.max(1));
    let blocks = total.div_ceil(block);
    let call = || json!({"name": "noop", "arguments": {}});
    for _ in 0..blocks {
        for c in configs.iter_mut() {
            let started = Instant::now();
            let mut sent: HashMap<u64, Instant> = HashMap::new();
            let mut issued = 0;
            while issued < block.min(c.inflight) {
                let (id, at) = c.server.send("tools/call", call())?;
                sent.insert(id, at);
                issued += 1;
            }
            while !sent.is_empty() {
                let r = c.server.recv()?;
                let at = sent.remove(&r.id).context("an answer to an unknown id")?;
                c.latency.push(r.at.duration_since(at));
                if issued < block {
                    let (id, at) = c.server.send("tools/call", call())?;
                    sent.insert(id, at);
                    issued += 1;
                }
            }
            c.spent += started.elapsed();
            c.done += block;
        }
    }
    rep.line(format!(
        "\n### Throughput, {label} ({blocks} alternating blocks of {block} calls)\n"
    ));
    rep.line("| build | --max-concurrent-calls = calls in flight | calls | calls/s | median latency ms | p99 ms | calls/s vs 1 in flight |");
    rep.line("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut one = 0.0;
    let mut summary = Vec::new();
    for c in &configs {
        let rate = c.done as f64 / c.spent.as_secs_f64();
        if c.inflight == 1 {
            one = rate;
        } else {
            summary.push(format!("{}: {:.2}×", c.build, rate / one));
        }
        let s = stats(&c.latency);
        rep.line(format!(
            "| {} | {} | {} | {rate:.0} | {} | {} | {:.2}× |",
            c.build,
            c.inflight,
            c.done,
            fmt_ms(s.median),
            fmt_ms(s.p99),
            rate / one
        ));
    }
    rep.line(format!(
        "\n2 in flight / 1 in flight: {}",
        summary.join("; ")
    ));
    for c in configs {
        c.server.stop()?;
    }
    Ok(())
}

/// Spawn to first `server/discover` answer, both backends interleaved.
fn startup(ctx: &Ctx<'_>, rep: &mut Report) -> Result<()> {
    let root = ctx.root.as_path();
    let backends = [
        (ctx.o.noop.as_path(), "tiny C backend"),
        (ctx.o.py.as_path(), "Python backend"),
    ];
    let mut methods: Vec<Method<'_>> = Vec::new();
    for (backend, label) in backends {
        let mut builds = vec![("".to_string(), ctx.server.clone())];
        if backend == ctx.o.noop.as_path() {
            for (name, bin) in &ctx.o.compare {
                builds.push((format!(" ({name})"), bin.clone()));
            }
        }
        for (suffix, server) in builds {
            methods.push((
                format!("start-up, {label}{suffix}"),
                Box::new(move || {
                    let (mut s, started) = Server::start(&ServerSpec {
                        bin: &server,
                        backend,
                        root,
                        max_concurrent: 1,
                        globals: Vec::new(),
                        serve_args: Vec::new(),
                    })?;
                    let (_, _) = s.send("server/discover", json!({}))?;
                    let r = s.recv()?;
                    let took = r.at.duration_since(started);
                    s.stop()?;
                    Ok(took)
                }),
            ));
        }
    }
    for (backend, label) in backends {
        let argv = call_argv(backend);
        methods.push((
            format!("plain spawn, {label}"),
            Box::new(move || run_plain(plain_env(Command::new(&argv[0]).args(&argv[1..])))),
        ));
    }
    let rows = interleave(ctx.o.startups, &mut methods)?;
    rep.line(format!(
        "\n### Start-up: spawn to the first `server/discover` answer ({} rounds interleaved)\n",
        ctx.o.startups
    ));
    stats_table(rep, &rows);
    Ok(())
}

/// Processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|st| {
                    let rest = st.rsplit_once(") ")?.1;
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

fn is_zygote(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| c.split(|&b| b == 0).any(|a| a == b"@zygote"))
        .unwrap_or(false)
}

/// Peak RSS (VmHWM) of the server: idle after start-up and a `tools/list`,
/// then after 4 calls ran at once; and what the sandbox's own processes
/// (zygote, each run's init) hold while they run.
fn memory(ctx: &Ctx<'_>, rep: &mut Report) -> Result<()> {
    let root = ctx.root.as_path();
    let mut idle = Vec::new();
    let mut busy = Vec::new();
    let mut threads = Vec::new();
    let mut zygote = Vec::new();
    let mut inits = Vec::new();
    for _ in 0..5 {
        let (mut s, _) = Server::start(&ServerSpec {
            bin: &ctx.server,
            backend: &ctx.o.noop,
            root,
            max_concurrent: 4,
            globals: Vec::new(),
            serve_args: Vec::new(),
        })?;
        s.round_trip("server/discover", json!({}))?;
        s.list()?;
        let pid = s.pid();
        idle.push(status_field(pid, "VmHWM").context("VmHWM")?);
        for _ in 0..4 {
            s.send(
                "tools/call",
                json!({"name": "noop", "arguments": {"ms": 300}}),
            )?;
        }
        thread::sleep(Duration::from_millis(150));
        threads.push(status_field(pid, "Threads").unwrap_or(0));
        if let Some(z) = children_of(pid).into_iter().find(|c| is_zygote(*c)) {
            zygote.push(status_field(z, "VmHWM").unwrap_or(0));
            for init in children_of(z) {
                inits.push(status_field(init, "VmRSS").unwrap_or(0));
            }
        }
        for _ in 0..4 {
            s.recv()?;
        }
        busy.push(status_field(pid, "VmHWM").context("VmHWM")?);
        s.stop()?;
    }
    let mid = |v: &mut Vec<u64>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    let row = |rep: &mut Report, what: &str, kib: u64| {
        rep.line(format!("| {what} | {kib} | {:.1} |", kib as f64 / 1024.0));
    };
    rep.line("\n### Peak RSS (median of 5 servers, tiny backend)\n");
    rep.line("| process, state | KiB | MiB |");
    rep.line("| --- | ---: | ---: |");
    row(
        rep,
        "server VmHWM, idle (after discover and tools/list)",
        mid(&mut idle),
    );
    let t = mid(&mut threads);
    row(
        rep,
        &format!("server VmHWM, after 4 concurrent calls ({t} threads while they ran)"),
        mid(&mut busy),
    );
    if !zygote.is_empty() {
        row(
            rep,
            "sandbox zygote VmHWM (a process of its own)",
            mid(&mut zygote),
        );
        row(
            rep,
            "one run's init VmRSS (mostly shared with the zygote)",
            mid(&mut inits),
        );
    }
    Ok(())
}

/// `tools/list` handled in-process (parse, dispatch, serialize: the
/// server's part of the round trip) and through the server's stdio.
fn tools_list(ctx: &Ctx<'_>, rep: &mut Report) -> Result<()> {
    let mut rows: Vec<(String, Stats)> = Vec::new();
    let mut cases: Vec<(String, PathBuf, Globals, PathBuf)> = vec![(
        "tiny backend (1 tool)".into(),
        ctx.o.noop.clone(),
        Globals::default(),
        ctx.root.clone(),
    )];
    if let (Some(reference), Some(ws)) = (&ctx.o.reference, &ctx.o.workspace) {
        cases.push((
            "reference backend".into(),
            reference.clone(),
            Globals {
                home: Some(ws.clone()),
                ..Globals::default()
            },
            ws.clone(),
        ));
    }
    for (label, backend, globals, root) in cases {
        let mut serve = ServeArgs::default_values();
        serve.start.root = Some(root.clone());
        let globals = Globals {
            backend: Some(backend.clone()),
            ..globals
        };
        let app = App::start_with_helper(&globals, &serve, Some(ctx.server.clone()))?;
        let input = app.protocol_input();
        let mut d = Dispatcher::new(&input);
        let line =
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}})
                .to_string();
        let mut inside = Vec::with_capacity(ctx.o.list_iters);
        let mut bytes = 0;
        for _ in 0..ctx.o.list_iters {
            let t = Instant::now();
            let text = match d.handle(jsonrpc::parse_line(line.as_bytes())) {
                Action::ReplyLine(text) => text,
                Action::Reply(v) => jsonrpc::to_line(&v),
                _ => bail!("tools/list gave no reply"),
            };
            inside.push(t.elapsed());
            bytes = text.len();
        }
        let tools = app.tools.len();
        drop(app);
        rows.push((
            format!("{label}, {tools} tools, {bytes} bytes: in-process"),
            stats(&inside),
        ));

        let mut server_globals = Vec::new();
        if let Some(h) = &globals.home {
            server_globals.push(format!("--home={}", h.display()));
        }
        let (mut s, _) = Server::start(&ServerSpec {
            bin: &ctx.server,
            backend: &backend,
            root: &root,
            max_concurrent: 1,
            globals: server_globals,
            serve_args: Vec::new(),
        })?;
        s.round_trip("server/discover", json!({}))?;
        let mut outside = Vec::with_capacity(ctx.o.calls);
        for _ in 0..ctx.o.calls {
            outside.push(s.list()?);
        }
        s.stop()?;
        rows.push((
            format!("{label}: client-observed over stdio"),
            stats(&outside),
        ));
    }
    rep.line("\n### tools/list\n");
    rep.line("| what | n | median µs | p99 µs | mean µs |");
    rep.line("| --- | ---: | ---: | ---: | ---: |");
    for (name, s) in &rows {
        rep.line(format!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} |",
            s.n,
            s.median * 1e3,
            s.p99 * 1e3,
            s.mean * 1e3
        ));
    }
    Ok(())
}

/// Redaction in-process: one call of `Redactor::redact` on a result, the
/// document moved in as the server does (its copy is made outside the timing).
fn redaction(rep: &mut Report) -> Result<()> {
    let started = Instant::now();
    let redactor = Redactor::new(vec![(
        "REACHWEAVER_SMTP_PASS".to_string(),
        "a-secret-from-the-environment".to_string(),
    )]);
    let built = started.elapsed();
    let mut cases: Vec<(String, Value, usize)> =
        vec![("typical result".into(), typical_result(), 20_000)];
    for (label, bytes, n) in [
        ("log summary, 64 KiB", 64 << 10, 400),
        ("log summary, 256 KiB (the default cap)", 256 << 10, 100),
        ("log summary, 1 MiB", 1 << 20, 30),
        ("log summary, 4 MiB (the largest cap)", 4 << 20, 10),
    ] {
        cases.push((label.into(), log_result(bytes), n));
    }
    rep.line("\n### Redaction (in-process, per result)\n");
    rep.line(format!(
        "Building the redactor (once, at start): {:.2} ms.\n",
        built.as_secs_f64() * 1e3
    ));
    rep.line("| result | bytes | n | replaced | median µs | p99 µs | µs per MiB |");
    rep.line("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (label, doc, n) in cases {
        let bytes = doc.to_string().len();
        let mut samples = Vec::with_capacity(n);
        let mut replaced = 0;
        for _ in 0..n {
            let copy = doc.clone();
            let t = Instant::now();
            let (out, count) = redactor.redact(copy);
            samples.push(t.elapsed());
            replaced = count;
            drop(out);
        }
        let s = stats(&samples);
        let median_us = s.median * 1e3;
        rep.line(format!(
            "| {label} | {bytes} | {} | {replaced} | {:.1} | {:.1} | {:.0} |",
            s.n,
            median_us,
            s.p99 * 1e3,
            median_us / (bytes as f64 / (1 << 20) as f64)
        ));
    }
    Ok(())
}

/// What `--audit-log` adds to a call: building, chaining and appending its
/// `call` record (arguments redacted, the last line read back under the
/// lock), on an empty log and on a pre-filled one, with and without
/// `--audit-sync`. The four logs take turns, in an order shuffled from
/// round to round, like the other comparisons.
fn audit_line(o: &Opts, rep: &mut Report) -> Result<()> {
    use reachweaver_mcp::audit::BenchLog;
    let dir = o.work.join("audit");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let redactor = Redactor::new(vec![(
        "REACHWEAVER_SMTP_PASS".to_string(),
        "a-secret-from-the-environment".to_string(),
    )]);
    // A filled log: whole lines of a record's typical size.
    let full = dir.join("filled.log");
    {
        let line = format!(
            "{{\"v\":1,\"type\":\"call\",\"pad\":\"{}\"}}\n",
            "x".repeat(600)
        );
        let mut f = std::io::BufWriter::new(std::fs::File::create(&full)?);
        let mut written = 0u64;
        while written < o.audit_fill_mib << 20 {
            f.write_all(line.as_bytes())?;
            written += line.len() as u64;
        }
        f.flush()?;
    }
    let filled_mib = std::fs::metadata(&full)?.len() as f64 / (1u64 << 20) as f64;
    std::fs::copy(&full, dir.join("filled-sync.log"))?;
    let logs = [
        ("empty log", "empty.log", false),
        ("empty log, --audit-sync", "empty-sync.log", true),
        ("filled log", "filled.log", false),
        ("filled log, --audit-sync", "filled-sync.log", true),
    ];
    let opened: Vec<BenchLog> = logs
        .iter()
        .map(|(_, f, sync)| BenchLog::open(&dir.join(f), *sync, &redactor))
        .collect::<std::io::Result<_>>()?;
    let args = json!({"log": "logs/app.log", "since": "2026-01-01", "level": "error", "limit": 50});
    let args = args.as_object().cloned().unwrap_or_default();
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(o.audit_lines); logs.len()];
    let mut order: Vec<usize> = (0..logs.len()).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..o.audit_lines {
        shuffle(&mut order, &mut seed);
        for &i in &order {
            let t = Instant::now();
            opened[i].call(round as u64, &args)?;
            samples[i].push(t.elapsed());
        }
    }
    rep.line("\n### The audit line (in-process, per call)\n");
    rep.line(format!(
        "One `call` record per call; the filled log started at {filled_mib:.0} MiB. Files under {}.\n",
        dir.display()
    ));
    rep.line("| log | n | median µs | p99 µs | mean µs |");
    rep.line("| --- | ---: | ---: | ---: | ---: |");
    for ((label, _, _), s) in logs.iter().zip(&samples) {
        let s = stats(s);
        rep.line(format!(
            "| {label} | {} | {:.1} | {:.1} | {:.1} |",
            s.n,
            s.median * 1e3,
            s.p99 * 1e3,
            s.mean * 1e3
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// What `--pin` adds to a call in the server: one `stat` of the backend's
/// path compared with the identity last hashed (the backend unchanged).
fn pins_check(o: &Opts, rep: &mut Report) -> Result<()> {
    let watch = reachweaver_mcp::pins::BenchWatch::open(&o.noop)?;
    let n = o.calls.max(1) * 20;
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let ok = watch.check();
        samples.push(t.elapsed());
        if !ok {
            bail!("{} changed while it was measured", o.noop.display());
        }
    }
    let s = stats(&samples);
    rep.line("\n### The backend re-identified (in-process, per call, --pin)\n");
    rep.line("| check | n | median µs | p99 µs | mean µs |");
    rep.line("| --- | ---: | ---: | ---: | ---: |");
    rep.line(format!(
        "| stat, identity unchanged | {} | {:.2} | {:.2} | {:.2} |",
        s.n,
        s.median * 1e3,
        s.p99 * 1e3,
        s.mean * 1e3
    ));
    Ok(())
}

/// Fisher-Yates with a xorshift generator: a fixed, reproducible order per round.
fn shuffle(v: &mut [usize], seed: &mut u64) {
    for i in (1..v.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        v.swap(i, (*seed % (i as u64 + 1)) as usize);
    }
}

fn machine(rep: &mut Report) {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpus = thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    rep.line(format!(
        "machine: {cpus} CPUs ({model}), Linux {}, load average {}",
        kernel.trim(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    ));
}

fn main() -> Result<()> {
    let Some(o) = parse_opts()? else {
        return Ok(());
    };
    let server = PathBuf::from(env!("CARGO_BIN_EXE_reachweaver-mcp"));
    let root = o.work.join("root");
    std::fs::create_dir_all(&root)?;
    let root = std::fs::canonicalize(&root)?;
    let ctx = Ctx {
        o: &o,
        server,
        root,
    };
    let mut rep = Report::default();
    rep.line("## Results");
    rep.line("");
    machine(&mut rep);
    let started = Instant::now();
    if o.only_audit {
        audit_line(&o, &mut rep)?;
        if let Some(out) = &o.out {
            std::fs::write(out, &rep.md).with_context(|| format!("{}", out.display()))?;
        }
        return Ok(());
    }
    if o.only_redaction {
        redaction(&mut rep)?;
        if let Some(out) = &o.out {
            std::fs::write(out, &rep.md).with_context(|| format!("{}", out.display()))?;
        }
        return Ok(());
    }
    if o.only_startup {
        startup(&ctx, &mut rep)?;
    } else {
        per_call(&ctx, &o.noop, "tiny C backend", &mut rep)?;
        refused_connects(&ctx, &mut rep)?;
        per_call(&ctx, &o.py, "Python backend", &mut rep)?;
        if o.with_pins {
            pins_check(&o, &mut rep)?;
        }
    }
    if !o.only_calls && !o.only_startup {
        throughput(
            &ctx,
            &o.noop,
            "tiny C backend",
            o.throughput_calls,
            &mut rep,
        )?;
        throughput(
            &ctx,
            &o.py,
            "Python backend",
            o.throughput_calls / 4,
            &mut rep,
        )?;
        tools_list(&ctx, &mut rep)?;
        redaction(&mut rep)?;
        audit_line(&o, &mut rep)?;
        memory(&ctx, &mut rep)?;
        startup(&ctx, &mut rep)?;
    }
    rep.line("");
    machine(&mut rep);
    rep.line(format!(
        "total time {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    if let Some(out) = &o.out {
        std::fs::write(out, &rep.md).with_context(|| format!("{}", out.display()))?;
    }
    Ok(())
}

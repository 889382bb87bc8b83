//! `sandbox probe` and `sandbox status` on macOS.
//!
//! Each escape attempt runs as the server binary's hidden `__probe-attempt`
//! command, once outside the sandbox as a positive control (it must work
//! there, or the line says it proves nothing) and once inside, under the
//! read-only policy a tool call gets. The probe checks what it can itself
//! rather than take the attempt's word: its own loopback listeners count
//! connections, and files that must not appear are looked for afterwards.
//! Allowed attempts (read the root, write the temp folder, a sysctl from
//! the allow-list) must succeed inside, so a profile that refuses
//! everything can't pass for a tight one.
//!
//! An attempt exits 0 when the operation succeeded, 1 when it was refused,
//! and prints one line saying what happened.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::sandbox::probe::listeners::{Listeners, Which};
use crate::sandbox::SandboxMode;
use crate::sandbox::{LayerStatus, RunKind, Sandbox, SandboxOptions, StatusReport};

mod attempts;

pub use self::attempts::attempt;
use self::attempts::{launchd_job_exists, remove_launchd_job, Attempt};

const LINE: &str = "sandbox-exec (deny-by-default profile, no network)";

fn os_version() -> String {
    Command::new("/usr/bin/sw_vers")
        .arg("-productVersion")
        .output()
        .ok()
        .map(|o| format!("macOS {}", String::from_utf8_lossy(&o.stdout).trim()))
        .unwrap_or_default()
}

/// `sandbox status`: `layer` is what the platform found, `trial` one run
/// under the real generated profile.
pub fn status(mut layer: LayerStatus, trial: fn() -> Result<(), String>) -> StatusReport {
    let trial_line = if layer.available {
        match trial() {
            Ok(()) => "passed: /usr/bin/true ran under the generated profile".to_string(),
            Err(e) => {
                layer.available = false;
                layer.detail = format!("a trial run under the generated profile failed: {e}");
                format!("FAILED: {e}")
            }
        }
    } else {
        format!("not run: {}", layer.detail)
    };
    let missing = if layer.available {
        Vec::new()
    } else {
        vec![layer.detail.clone()]
    };
    StatusReport {
        platform: "macos",
        kernel: os_version(),
        landlock_abi: None,
        layers: vec![layer],
        require_missing: missing,
        require_layers: LINE.into(),
        best_effort_layers: LINE.into(),
        trial: Some(trial_line),
        promises: Vec::new(),
        apparmor: None,
    }
}

// ---------------------------------------------------------------------
// The probe.
// ---------------------------------------------------------------------

/// Should the attempt work inside (an allowed operation) or not (an escape)?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Refused,
    Allowed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Check {
    /// Only the attempt's own exit status.
    Report,
    /// No connection or datagram may reach this listener.
    Listener(Which),
    /// This path must not exist afterwards.
    Absent(usize),
    /// launchd must not know a job by this label afterwards.
    LaunchdJob(String),
    /// This file must have no execute bit afterwards.
    NotExecutable(PathBuf),
}

struct Spec {
    name: &'static str,
    what: String,
    attempt: Attempt,
    args: Vec<String>,
    /// An escape (`Refused`) is first tried outside the sandbox as a
    /// positive control; an allowed operation needs none, as it must simply
    /// work inside.
    expect: Expect,
    check: Check,
    /// The session the positive control needs, for attempts that only work
    /// in some (a GUI login, a launchd user domain): where the control
    /// fails, the line says "not applicable here" and why, instead of
    /// failing the probe. `None`: the control must work everywhere.
    session: Option<&'static str>,
    /// The kind of run the attempt is made in.
    kind: RunKind,
}

#[derive(Debug, serde::Serialize)]
struct Line {
    name: &'static str,
    what: String,
    /// "held", "escaped", "allowed", "wrongly refused", "not applicable here".
    result: &'static str,
    /// "ok", "failed" (proves nothing here), "not applicable" (the control
    /// needs a session this machine does not have) or "none".
    control: &'static str,
    detail: String,
}

/// The fixture folder, removed when the probe ends.
struct FixtureDir(PathBuf);

impl Drop for FixtureDir {
    fn drop(&mut self) {
        crate::sandbox::remove_tree(&self.0);
    }
}

struct Fixture {
    _dir: FixtureDir,
    root: PathBuf,
    outside: PathBuf,
    secret: PathBuf,
    /// The database a draft attempt may write, alone in its folder.
    db: PathBuf,
    /// Paths that attempts must not create, by index.
    absent: Vec<PathBuf>,
    net: Listeners,
}

fn fixture() -> anyhow::Result<Fixture> {
    // The fixture lives in the user's temp folder, outside every grant
    // except the run's own private folder inside it.
    use std::os::unix::fs::DirBuilderExt;
    let made = std::env::temp_dir().join(format!(
        "reachweaver-probe-{:016x}",
        crate::sandbox::random_u64()
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&made)?;
    let dir = FixtureDir(made);
    let base = std::fs::canonicalize(&dir.0)?;
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(&root)?;
    std::fs::create_dir_all(&outside)?;
    std::fs::write(root.join("allowed.txt"), b"readable")?;
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, b"not for runs")?;
    std::fs::create_dir_all(base.join("db"))?;
    let db = base.join("db/probe.db");
    std::fs::write(&db, b"")?;

    let net = Listeners::start()?;
    Ok(Fixture {
        _dir: dir,
        root,
        outside,
        secret,
        db,
        absent: Vec::new(),
        net,
    })
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn specs(fx: &mut Fixture, server_pid: u32, home: &Path) -> Vec<Spec> {
    let pid = server_pid.to_string();
    let marker = format!("reachweaver-probe-{:016x}", crate::sandbox::random_u64());
    // Not named `.plist`: the sandbox decides by folder, not by name, and
    // the positive control really writes here for a moment, so neither
    // launchd nor the background-items notice may take it for an agent.
    let launch_agent = home
        .join("Library/LaunchAgents")
        .join(format!("{marker}.probe"));
    let outside_write = fx.outside.join("written.txt");
    let root_write = fx.root.join("written.txt");
    let beside_db = fx
        .db
        .parent()
        .map_or_else(|| fx.outside.join("beside.txt"), |d| d.join("beside.txt"));
    fx.absent = vec![
        launch_agent.clone(),
        outside_write.clone(),
        root_write.clone(),
        beside_db.clone(),
    ];
    let job = format!("org.reachweaver.probe.{marker}");
    let spec = |name: &'static str, what: &str, attempt: Attempt, args: Vec<String>| Spec {
        name,
        what: what.to_string(),
        attempt,
        args,
        expect: Expect::Refused,
        check: Check::Report,
        session: None,
        kind: RunKind::ReadOnly,
    };
    const GUI: &str = "needs a GUI login session (Launch Services, the pasteboard and Apple \
                       Events serve only that), which this machine's session is not";
    const USER_DOMAIN: &str = "needs a launchd per-user domain of a login session, which this \
                               machine's session does not reach";
    let mut v = vec![
        // Network: nothing may leave, not even to loopback.
        Spec {
            check: Check::Listener(Which::Tcp4),
            ..spec(
                "net-tcp",
                "TCP connect to 127.0.0.1",
                Attempt::Tcp,
                vec![fx.net.tcp4.to_string()],
            )
        },
        Spec {
            check: Check::Listener(Which::Udp),
            ..spec(
                "net-udp",
                "UDP send to 127.0.0.1",
                Attempt::Udp,
                vec![fx.net.udp.to_string()],
            )
        },
        Spec {
            check: Check::Listener(Which::Unix),
            ..spec(
                "net-unix",
                "connect to a unix socket outside the grants",
                Attempt::Unix,
                vec![s(&fx.net.host_sock)],
            )
        },
        spec(
            "net-socket",
            "create an AF_INET socket",
            Attempt::Socket,
            vec![],
        ),
        // Files outside the grants.
        spec(
            "read-outside",
            "read a file outside the grants",
            Attempt::Read,
            vec![s(&fx.secret)],
        ),
        spec(
            "list-home",
            "list the home folder",
            Attempt::List,
            vec![s(home)],
        ),
        spec(
            "read-keychains",
            "list ~/Library/Keychains",
            Attempt::List,
            vec![s(&home.join("Library/Keychains"))],
        ),
        Spec {
            check: Check::Absent(1),
            ..spec(
                "write-outside",
                "write a file outside the grants",
                Attempt::Write,
                vec![s(&outside_write)],
            )
        },
        Spec {
            check: Check::Absent(2),
            ..spec(
                "write-root",
                "write in the read-only root",
                Attempt::Write,
                vec![s(&root_write)],
            )
        },
        Spec {
            check: Check::Absent(0),
            ..spec(
                "write-launchagents",
                "write a LaunchAgent (runs at the next login)",
                Attempt::Write,
                vec![s(&launch_agent)],
            )
        },
        spec(
            "hardlink",
            "hard-link an outside file into the temp folder and read it",
            Attempt::Hardlink,
            vec![s(&fx.secret)],
        ),
        spec(
            "exec-tmpdir",
            "run a script written in the temp folder",
            Attempt::ExecWritten,
            vec![],
        ),
        // Other processes.
        spec(
            "procargs",
            "read the server's argv and environment (sysctl kern.procargs2)",
            Attempt::Procargs,
            vec![pid.clone()],
        ),
        spec(
            "procinfo",
            "read the server's executable path (proc_pidpath)",
            Attempt::Procinfo,
            vec![pid.clone()],
        ),
        spec(
            "signal",
            "signal the server (kill 0)",
            Attempt::Signal,
            vec![pid.clone()],
        ),
        spec(
            "env-secret",
            "see a secret-named variable of the server",
            Attempt::Env,
            vec!["REACHWEAVER_PROBE_API_TOKEN".into()],
        ),
        // Services: the keychain, Launch Services (`open`), Apple Events.
        spec(
            "keychain",
            "look up the keychain service (securityd)",
            Attempt::Mach,
            vec!["com.apple.SecurityServer".into()],
        ),
        spec(
            "keychain-xpc",
            "look up the keychain service (securityd.xpc)",
            Attempt::Mach,
            vec!["com.apple.securityd.xpc".into()],
        ),
        Spec {
            session: Some(GUI),
            ..spec(
                "open",
                "look up Launch Services, as `open` does",
                Attempt::Mach,
                vec!["com.apple.coreservices.launchservicesd".into()],
            )
        },
        Spec {
            session: Some(GUI),
            ..spec(
                "appleevents",
                "look up the Apple Event manager",
                Attempt::Mach,
                vec!["com.apple.coreservices.appleevents".into()],
            )
        },
        Spec {
            session: Some(GUI),
            ..spec(
                "pasteboard",
                "look up the pasteboard (what was copied)",
                Attempt::Mach,
                vec!["com.apple.pasteboard.1".into()],
            )
        },
        Spec {
            session: Some(GUI),
            ..spec(
                "notifications",
                "look up distributed notifications (messages to every app)",
                Attempt::Mach,
                vec!["com.apple.distributed_notifications@Uv3".into()],
            )
        },
        // A job launchd starts runs outside this sandbox: submitting one
        // is an escape, not a lookup.
        Spec {
            session: Some(USER_DOMAIN),
            check: Check::LaunchdJob(job.clone()),
            ..spec(
                "launchctl-submit",
                "submit a launchd job (runs outside the sandbox)",
                Attempt::Exec,
                vec![
                    "/bin/launchctl".into(),
                    "submit".into(),
                    "-l".into(),
                    job.clone(),
                    "--".into(),
                    "/usr/bin/true".into(),
                ],
            )
        },
        spec(
            "iokit-properties",
            "read the machine's hardware identifier (IOKit IOPlatformUUID)",
            Attempt::Iokit,
            vec!["IOPlatformUUID".into()],
        ),
        // A draft writes the database and its companions, nothing beside
        // them, and leaves no execute bit on them.
        Spec {
            check: Check::Absent(3),
            kind: RunKind::Draft,
            ..spec(
                "draft-write-beside",
                "write beside the database in a draft run",
                Attempt::Write,
                vec![s(&beside_db)],
            )
        },
        Spec {
            check: Check::NotExecutable(fx.db.clone()),
            kind: RunKind::Draft,
            ..spec(
                "draft-exec-bit",
                "leave an execute bit on the database in a draft run",
                Attempt::ChmodX,
                vec![s(&fx.db)],
            )
        },
        // Ask Launch Services to bring the already running Finder up hidden
        // and in the background: the same request `open` makes for any
        // app, with nothing shown when the control succeeds outside.
        Spec {
            session: Some(GUI),
            ..spec(
                "open-tool",
                "run /usr/bin/open (Launch Services starts an app)",
                Attempt::Exec,
                vec![
                    "/usr/bin/open".into(),
                    "-g".into(),
                    "-j".into(),
                    "-a".into(),
                    "Finder".into(),
                ],
            )
        },
    ];
    // Positive checks: what a run must still be able to do.
    for (name, what, attempt, args) in [
        (
            "allowed-read-root",
            "read a file in the root",
            Attempt::Read,
            vec![s(&fx.root.join("allowed.txt"))],
        ),
        (
            "allowed-write-tmpdir",
            "write in the private temp folder",
            Attempt::WriteTmpdir,
            vec![],
        ),
        (
            "allowed-sysctl",
            "read hw.ncpu",
            Attempt::Sysctl,
            vec!["hw.ncpu".to_string()],
        ),
        (
            "allowed-exec-system",
            "run /usr/bin/true",
            Attempt::Exec,
            vec!["/usr/bin/true".to_string()],
        ),
        (
            "allowed-userinfo",
            "look up opendirectoryd (user lookups)",
            Attempt::Mach,
            vec!["com.apple.system.opendirectoryd.libinfo".to_string()],
        ),
        (
            "allowed-sh",
            "run /bin/sh -c (it reads which shell to be)",
            Attempt::Exec,
            vec!["/bin/sh".into(), "-c".into(), "exit 0".into()],
        ),
    ] {
        v.push(Spec {
            expect: Expect::Allowed,
            ..spec(name, what, attempt, args)
        });
    }
    v.push(Spec {
        expect: Expect::Allowed,
        kind: RunKind::Draft,
        ..spec(
            "allowed-draft-write-db",
            "write the database in a draft run",
            Attempt::Write,
            vec![s(&fx.db)],
        )
    });
    v
}

/// A line's result. An escape attempt whose control needs a session this
/// machine lacks is "not applicable here" when it held (an escape is an
/// escape wherever it happens). Pure.
fn line_result(expect: Expect, escaped: bool, control: &str) -> &'static str {
    match (expect, escaped) {
        (Expect::Refused, false) if control == "not applicable" => "not applicable here",
        (Expect::Refused, false) => "held",
        (Expect::Refused, true) => "escaped",
        (Expect::Allowed, true) => "allowed",
        (Expect::Allowed, false) => "wrongly refused",
    }
}

/// A folder made for the probe when it was missing, removed (if still
/// empty) when the probe ends; one that existed is left as it was.
struct MadeDir(Option<PathBuf>);

impl MadeDir {
    fn ensure(dir: &Path) -> std::io::Result<MadeDir> {
        if dir.is_dir() {
            return Ok(MadeDir(None));
        }
        // Only the missing folders are made, and only the deepest is
        // removed: ~/Library exists on every account.
        std::fs::create_dir_all(dir)?;
        Ok(MadeDir(Some(dir.to_path_buf())))
    }
}

impl Drop for MadeDir {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            let _ = std::fs::remove_dir(&d);
        }
    }
}

fn run_attempt(cmd: &mut Command) -> (bool, String) {
    match cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
    {
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stdout).trim().to_string();
            let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
            let detail = if text.is_empty() { err } else { text };
            (o.status.success(), detail)
        }
        Err(e) => (false, e.to_string()),
    }
}

fn run_inside(sb: &Sandbox, exe: &Path, cwd: &Path, sp: &Spec) -> (bool, String) {
    let mut argv = vec![
        s(exe),
        "__probe-attempt".to_string(),
        sp.attempt.to_string(),
    ];
    argv.extend(sp.args.iter().cloned());
    let mut child = match sb.spawn(sp.kind, &argv, cwd) {
        Ok(c) => c,
        Err(e) => return (false, format!("could not start: {e}")),
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let status = child.wait();
    // The draft sweep runs when the child goes: before anything is checked.
    drop(child);
    let ok = status.as_ref().map(|s| s.success()).unwrap_or(false);
    let ended = match status.as_ref().ok().map(|s| {
        use std::os::unix::process::ExitStatusExt;
        (s.code(), s.signal())
    }) {
        Some((Some(c), _)) => Some(super::Ended::Code(c)),
        Some((None, Some(sig))) => Some(super::Ended::Signal(sig)),
        _ => None,
    };
    if let Some(why) = ended.and_then(|e| super::died_at_start(e, out.as_bytes(), err.as_bytes())) {
        return (false, format!("the sandbox stopped it at start: {why}"));
    }
    let detail = if out.trim().is_empty() { err } else { out };
    (ok, detail.trim().to_string())
}

/// What a positive control made, removed before the same attempt runs
/// inside: a file the control wrote where the run must not write would
/// otherwise count as the run's escape. A leftover that can't be removed
/// stops the probe, as every later line would be wrong.
fn clean_after_control(fx: &Fixture, sp: &Spec) -> anyhow::Result<()> {
    let mut made = vec![fx.outside.join("hardlink"), fx.outside.join("probe.sh")];
    match &sp.check {
        Check::Absent(i) => made.extend(fx.absent.get(*i).cloned()),
        Check::LaunchdJob(label) => {
            if !remove_launchd_job(label) {
                anyhow::bail!(
                    "the positive control of {} left launchd job {label} behind",
                    sp.name
                );
            }
        }
        Check::NotExecutable(path) => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        }
        Check::Report | Check::Listener(_) => {}
    }
    for p in made {
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => anyhow::bail!(
                "the positive control of {} left {} behind: {e}",
                sp.name,
                p.display()
            ),
        }
    }
    Ok(())
}

pub fn run(json: bool) -> anyhow::Result<u8> {
    // A secret-named variable in the server's environment that no run may
    // see, set before any thread starts.
    std::env::set_var("REACHWEAVER_PROBE_API_TOKEN", "probe-secret-value");
    let exe = std::fs::canonicalize(std::env::current_exe()?)?;
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .ok_or_else(|| anyhow::anyhow!("HOME is not set"))?;
    let mut fx = fixture()?;
    // The LaunchAgents control writes into ~/Library/LaunchAgents, which a
    // fresh account (a CI machine's) does not have yet: made for the probe
    // and removed afterwards if the probe made it.
    let _agents = MadeDir::ensure(&home.join("Library/LaunchAgents"))?;
    let server_pid = std::process::id();
    let specs = specs(&mut fx, server_pid, &home);
    let opts = SandboxOptions {
        mode: SandboxMode::Require,
        backend: exe.clone(),
        root: fx.root.clone(),
        db: Some(fx.db.clone()),
        ..SandboxOptions::default()
    };
    let sb = Sandbox::detect(&opts)?;
    let mut lines = Vec::new();
    for sp in &specs {
        let control = if sp.expect == Expect::Refused {
            let mut cmd = Command::new(&exe);
            cmd.arg("__probe-attempt")
                .arg(sp.attempt.word())
                .args(&sp.args);
            cmd.current_dir(&fx.root);
            // The attempts that use "the temp folder" use, outside, a
            // folder no grant covers.
            cmd.env("TMPDIR", &fx.outside);
            let (ok, _) = run_attempt(&mut cmd);
            clean_after_control(&fx, sp)?;
            match (ok, sp.session) {
                (true, _) => "ok",
                (false, Some(_)) => "not applicable",
                (false, None) => "failed",
            }
        } else {
            "none"
        };
        let before = match &sp.check {
            Check::Listener(w) => fx.net.counters.get(*w),
            _ => 0,
        };
        let (ok, detail) = run_inside(&sb, &exe, &fx.root, sp);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut escaped = ok;
        let mut detail = detail;
        match &sp.check {
            Check::Report => {}
            Check::Listener(w) => {
                escaped |= fx.net.counters.get(*w) > before;
            }
            Check::Absent(i) => {
                if let Some(p) = fx.absent.get(*i) {
                    if p.exists() {
                        escaped = true;
                        let _ = std::fs::remove_file(p);
                    }
                }
            }
            Check::LaunchdJob(label) => {
                if launchd_job_exists(label) {
                    escaped = true;
                    remove_launchd_job(label);
                }
            }
            Check::NotExecutable(path) => {
                use std::os::unix::fs::PermissionsExt;
                // Checked after the run and its sweep: a draft may try to
                // set the bit, none may be left on the host.
                let mode = std::fs::metadata(path).map(|m| m.permissions().mode());
                escaped = mode.as_ref().map_or(true, |m| m & 0o111 != 0);
                let shown = match &mode {
                    Ok(m) => format!("{:o}", m & 0o7777),
                    Err(e) => e.to_string(),
                };
                detail = format!("{detail}; afterwards the mode is {shown}");
                let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
            }
        }
        let result = line_result(sp.expect, escaped, control);
        if result == "not applicable here" {
            detail = format!("{} ({detail})", sp.session.unwrap_or("not applicable"));
        }
        lines.push(Line {
            name: sp.name,
            what: sp.what.clone(),
            result,
            control,
            detail,
        });
    }
    std::env::remove_var("REACHWEAVER_PROBE_API_TOKEN");
    let escapes = lines.iter().filter(|l| l.result == "escaped").count();
    let refused = lines
        .iter()
        .filter(|l| l.result == "wrongly refused")
        .count();
    let no_control = lines.iter().filter(|l| l.control == "failed").count();
    let not_here = lines
        .iter()
        .filter(|l| l.result == "not applicable here")
        .count();
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(
            &mut out,
            &serde_json::json!({
                "platform": "macos",
                "layers": LINE,
                "attempts": lines,
                "escapes": escapes,
                "wrongly_refused": refused,
                "controls_failed": no_control,
                "not_applicable": not_here,
            }),
        )?;
        writeln!(out)?;
    } else {
        writeln!(out, "sandbox probe ({}): {LINE}", os_version())?;
        for l in &lines {
            let control = match l.control {
                "failed" => " (control failed outside: proves nothing here)",
                _ => "",
            };
            writeln!(out, "  {:<16} {:<22} {}{control}", l.result, l.name, l.what)?;
            writeln!(out, "  {:<16} {:<22}   {}", "", "", l.detail)?;
        }
        writeln!(
            out,
            "{} attempts: {escapes} escaped, {refused} wrongly refused, {no_control} without a working control, \
             {not_here} not applicable here",
            lines.len()
        )?;
    }
    Ok(u8::from(escapes > 0 || refused > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_escape_has_a_control_and_allowed_operations_none() {
        let mut fx = fixture().unwrap();
        let home = std::env::temp_dir();
        let specs = specs(&mut fx, std::process::id(), &home);
        for name in [
            "hardlink",
            "exec-tmpdir",
            "write-root",
            "write-launchagents",
            "open-tool",
        ] {
            let sp = specs.iter().find(|s| s.name == name).unwrap();
            assert_eq!(sp.expect, Expect::Refused, "{name}");
        }
        assert!(specs.iter().any(|s| s.expect == Expect::Allowed));
        // The LaunchAgent the control really writes is never an agent.
        assert!(fx
            .absent
            .iter()
            .all(|p| p.extension().is_none_or(|e| e != "plist")));
    }

    #[test]
    fn what_a_control_writes_is_gone_before_the_run_tries() {
        let mut fx = fixture().unwrap();
        // A stand-in home, so the test never touches the real LaunchAgents.
        let home = fx.outside.join("home");
        std::fs::create_dir_all(home.join("Library/LaunchAgents")).unwrap();
        let specs = specs(&mut fx, std::process::id(), &home);
        for sp in &specs {
            if let Check::Absent(i) = sp.check {
                let path = fx.absent[i].clone();
                std::fs::write(&path, b"control").unwrap();
                std::fs::write(fx.outside.join("hardlink"), b"x").unwrap();
                clean_after_control(&fx, sp).unwrap();
                assert!(!path.exists(), "{}: {}", sp.name, path.display());
                assert!(!fx.outside.join("hardlink").exists());
            }
        }
        // write-outside, write-root, write-launchagents and
        // draft-write-beside all check a path.
        let checked = specs
            .iter()
            .filter(|s| matches!(s.check, Check::Absent(_)))
            .count();
        assert_eq!(checked, 4);
    }

    /// Only what needs a GUI login or a launchd user domain may be "not
    /// applicable": files, sockets, sysctls, signals, process information,
    /// exec, IOKit and drafts must have a working control everywhere.
    #[test]
    fn only_session_bound_controls_may_be_not_applicable() {
        let mut fx = fixture().unwrap();
        let home = fx.outside.join("home");
        let specs = specs(&mut fx, std::process::id(), &home);
        let bound: Vec<&str> = specs
            .iter()
            .filter(|s| s.session.is_some())
            .map(|s| s.name)
            .collect();
        assert_eq!(
            bound,
            vec![
                "open",
                "appleevents",
                "pasteboard",
                "notifications",
                "launchctl-submit",
                "open-tool"
            ]
        );
        for name in [
            "net-tcp",
            "net-unix",
            "read-outside",
            "write-outside",
            "write-launchagents",
            "procargs",
            "signal",
            "exec-tmpdir",
            "iokit-properties",
            "draft-write-beside",
            "draft-exec-bit",
        ] {
            let sp = specs.iter().find(|s| s.name == name).unwrap();
            assert_eq!(sp.session, None, "{name}");
            assert_eq!(sp.expect, Expect::Refused, "{name}");
        }
        let drafts: Vec<&str> = specs
            .iter()
            .filter(|s| s.kind == RunKind::Draft)
            .map(|s| s.name)
            .collect();
        assert_eq!(
            drafts,
            vec![
                "draft-write-beside",
                "draft-exec-bit",
                "allowed-draft-write-db"
            ]
        );
    }

    #[test]
    fn a_held_attempt_without_its_session_is_not_applicable_and_an_escape_still_an_escape() {
        assert_eq!(
            line_result(Expect::Refused, false, "not applicable"),
            "not applicable here"
        );
        assert_eq!(
            line_result(Expect::Refused, true, "not applicable"),
            "escaped"
        );
        assert_eq!(line_result(Expect::Refused, false, "ok"), "held");
        assert_eq!(line_result(Expect::Refused, false, "failed"), "held");
        assert_eq!(
            line_result(Expect::Allowed, false, "none"),
            "wrongly refused"
        );
        assert_eq!(line_result(Expect::Allowed, true, "none"), "allowed");
    }

    #[test]
    fn the_probe_socket_fits_and_is_removed_with_the_fixture() {
        let fx = fixture().unwrap();
        let sock = fx.net.host_sock.clone();
        assert!(crate::sandbox::sockpath::fits_sun_path(
            &sock,
            crate::sandbox::sockpath::SUN_PATH_MACOS
        ));
        assert!(sock.exists());
        let dir = sock.parent().unwrap().to_path_buf();
        drop(fx);
        assert!(!dir.exists());
    }

    #[test]
    fn a_missing_launchagents_folder_is_made_and_removed_an_existing_one_kept() {
        let top = tempfile::tempdir().unwrap();
        let agents = top.path().join("Library/LaunchAgents");
        {
            let _made = MadeDir::ensure(&agents).unwrap();
            assert!(agents.is_dir());
        }
        assert!(!agents.exists());
        std::fs::create_dir_all(&agents).unwrap();
        {
            let _kept = MadeDir::ensure(&agents).unwrap();
        }
        assert!(agents.is_dir());
    }

    #[test]
    fn every_attempt_has_one_word_and_is_found_by_it() {
        let mut words = std::collections::BTreeSet::new();
        for a in Attempt::ALL {
            assert!(words.insert(a.word()), "{a:?}: {} twice", a.word());
            assert_eq!(Attempt::from_word(a.word()), Some(*a));
        }
    }
}

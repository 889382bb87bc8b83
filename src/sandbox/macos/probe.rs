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
//! The machinery is the Linux probe's (`sandbox/probe/`): the same specs,
//! runner and report line; what is macOS's own is the attempts
//! (`probe/attempts.rs`), the fixture and the suite (here), how a truth is
//! checked (`probe_truth.rs`), and the report (`probe_report.rs`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::probe_report::{self, ControlResult, Line, LAYERS as LINE};
use super::probe_truth::{clean_after_control, got_through, Truth};
use crate::sandbox::probe::listeners::{Listeners, Which};
use crate::sandbox::probe::model::{self, spec, Outcome};
use crate::sandbox::probe::runner::{run_control, run_inside, Place};
use crate::sandbox::SandboxMode;
use crate::sandbox::{LayerStatus, Sandbox, SandboxOptions, StatusReport};

mod attempts;

pub use self::attempts::attempt;
use self::attempts::Attempt;

/// A spec of the macOS suite.
type Spec = model::Spec<Attempt, Truth>;

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

/// The fixture: a private folder in the user's temp folder, outside every
/// grant except the run's own private folder inside it, removed when the
/// probe ends; and the loopback listeners.
struct Fixture {
    base: PathBuf,
    exe: PathBuf,
    root: PathBuf,
    outside: PathBuf,
    secret: PathBuf,
    /// The database a draft attempt may write, alone in its folder.
    db: PathBuf,
    net: Listeners,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        crate::sandbox::remove_tree(&self.base);
    }
}

impl Fixture {
    fn new() -> anyhow::Result<Fixture> {
        use std::os::unix::fs::DirBuilderExt;
        let exe = std::fs::canonicalize(std::env::current_exe()?)?;
        let net = Listeners::start()?;
        let made = std::env::temp_dir().join(format!(
            "reachweaver-probe-{:016x}",
            crate::sandbox::random_u64()
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&made)?;
        let base = match std::fs::canonicalize(&made) {
            Ok(b) => b,
            Err(e) => {
                crate::sandbox::remove_tree(&made);
                return Err(e.into());
            }
        };
        // From here on, dropping the fixture removes the folder.
        let fx = Fixture {
            exe,
            root: base.join("root"),
            outside: base.join("outside"),
            secret: base.join("outside/secret.txt"),
            db: base.join("db/probe.db"),
            base,
            net,
        };
        std::fs::create_dir_all(&fx.root)?;
        std::fs::create_dir_all(&fx.outside)?;
        std::fs::write(fx.root.join("allowed.txt"), b"readable")?;
        std::fs::write(&fx.secret, b"not for runs")?;
        std::fs::create_dir_all(fx.base.join("db"))?;
        std::fs::write(&fx.db, b"")?;
        Ok(fx)
    }

    fn s(p: &Path) -> String {
        p.display().to_string()
    }
}

impl Place for Fixture {
    fn exe(&self) -> &Path {
        &self.exe
    }
    fn root(&self) -> &Path {
        &self.root
    }
    /// The attempts that use "the temp folder" use, outside, a folder no
    /// grant covers.
    fn control_tmpdir(&self) -> &Path {
        &self.outside
    }
}

/// A spec of this suite: an attempt, its arguments, and what it tries in
/// words.
fn mac(name: &str, attempt: Attempt, args: &[&str], what: &'static str) -> Spec {
    let args = args.iter().map(|a| a.to_string()).collect();
    spec(name, attempt, args, "", &[]).what(what)
}

const GUI: &str = "needs a GUI login session (Launch Services, the pasteboard and Apple \
                   Events serve only that), which this machine's session is not";
const USER_DOMAIN: &str = "needs a launchd per-user domain of a login session, which this \
                           machine's session does not reach";

/// The suite, in report order: one attempt a row, the way it is read.
#[rustfmt::skip]
fn specs(fx: &Fixture, server_pid: u32, home: &Path) -> Vec<Spec> {
    use Attempt as A;
    use Truth::{Absent, LaunchdJob, Listener, NoExecBit};
    let s = |p: &Path| Fixture::s(p);
    let (pid, db, secret) = (server_pid.to_string(), s(&fx.db), s(&fx.secret));
    let marker = format!("reachweaver-probe-{:016x}", crate::sandbox::random_u64());
    // Not named `.plist`: the sandbox decides by folder, not by name, and
    // the positive control really writes here for a moment, so neither
    // launchd nor the background-items notice may take it for an agent.
    let agent = home.join("Library/LaunchAgents").join(format!("{marker}.probe"));
    let outside_write = fx.outside.join("written.txt");
    let root_write = fx.root.join("written.txt");
    let beside_db = fx.db.with_file_name("beside.txt");
    let job = format!("org.reachweaver.probe.{marker}");
    let submit = ["/bin/launchctl", "submit", "-l", &job, "--", "/usr/bin/true"];
    let (tcp, udp) = (fx.net.tcp4.to_string(), fx.net.udp.to_string());
    let mach = |name: &str, service: &str, what| mac(name, A::Mach, &[service], what);
    vec![
        // Network: nothing may leave, not even to loopback.
        mac("net-tcp", A::Tcp, &[&tcp], "TCP connect to 127.0.0.1").truth(Listener(Which::Tcp4)),
        mac("net-udp", A::Udp, &[&udp], "UDP send to 127.0.0.1").truth(Listener(Which::Udp)),
        mac("net-unix", A::Unix, &[&s(&fx.net.host_sock)],
            "connect to a unix socket outside the grants")
            .truth(Listener(Which::Unix)),
        mac("net-socket", A::Socket, &[], "create an AF_INET socket"),
        // Files outside the grants.
        mac("read-outside", A::Read, &[&secret], "read a file outside the grants"),
        mac("list-home", A::List, &[&s(home)], "list the home folder"),
        mac("read-keychains", A::List, &[&s(&home.join("Library/Keychains"))],
            "list ~/Library/Keychains"),
        mac("write-outside", A::Write, &[&s(&outside_write)], "write a file outside the grants")
            .truth(Absent(outside_write)),
        mac("write-root", A::Write, &[&s(&root_write)], "write in the read-only root")
            .truth(Absent(root_write)),
        mac("write-launchagents", A::Write, &[&s(&agent)],
            "write a LaunchAgent (runs at the next login)")
            .truth(Absent(agent)),
        mac("hardlink", A::Hardlink, &[&secret],
            "hard-link an outside file into the temp folder and read it"),
        mac("exec-tmpdir", A::ExecWritten, &[], "run a script written in the temp folder"),
        // Other processes.
        mac("procargs", A::Procargs, &[&pid],
            "read the server's argv and environment (sysctl kern.procargs2)"),
        mac("procinfo", A::Procinfo, &[&pid], "read the server's executable path (proc_pidpath)"),
        mac("signal", A::Signal, &[&pid], "signal the server (kill 0)"),
        mac("env-secret", A::Env, &[SECRET_ENV], "see a secret-named variable of the server"),
        // Services: the keychain, Launch Services (`open`), Apple Events.
        mach("keychain", "com.apple.SecurityServer", "look up the keychain service (securityd)"),
        mach("keychain-xpc", "com.apple.securityd.xpc", "look up the keychain service (securityd.xpc)"),
        mach("open", "com.apple.coreservices.launchservicesd",
            "look up Launch Services, as `open` does")
            .needs_session(GUI),
        mach("appleevents", "com.apple.coreservices.appleevents", "look up the Apple Event manager")
            .needs_session(GUI),
        mach("pasteboard", "com.apple.pasteboard.1", "look up the pasteboard (what was copied)")
            .needs_session(GUI),
        mach("notifications", "com.apple.distributed_notifications@Uv3",
            "look up distributed notifications (messages to every app)")
            .needs_session(GUI),
        // A job launchd starts runs outside this sandbox: submitting one
        // is an escape, not a lookup.
        mac("launchctl-submit", A::Exec, &submit, "submit a launchd job (runs outside the sandbox)")
            .needs_session(USER_DOMAIN)
            .truth(LaunchdJob(job.clone())),
        mac("iokit-properties", A::Iokit, &["IOPlatformUUID"],
            "read the machine's hardware identifier (IOKit IOPlatformUUID)"),
        // A draft writes the database and its companions, nothing beside
        // them, and leaves no execute bit on them.
        mac("draft-write-beside", A::Write, &[&s(&beside_db)],
            "write beside the database in a draft run")
            .truth(Absent(beside_db)).draft(),
        mac("draft-exec-bit", A::ChmodX, &[&db], "leave an execute bit on the database in a draft run")
            .truth(NoExecBit(fx.db.clone())).draft(),
        // Ask Launch Services to bring the already running Finder up hidden
        // and in the background: the same request `open` makes for any
        // app, with nothing shown when the control succeeds outside.
        mac("open-tool", A::Exec, &["/usr/bin/open", "-g", "-j", "-a", "Finder"],
            "run /usr/bin/open (Launch Services starts an app)")
            .needs_session(GUI),
        // Positive checks: what a run must still be able to do.
        mac("allowed-read-root", A::Read, &[&s(&fx.root.join("allowed.txt"))],
            "read a file in the root")
            .allowed(),
        mac("allowed-write-tmpdir", A::WriteTmpdir, &[], "write in the private temp folder").allowed(),
        mac("allowed-sysctl", A::Sysctl, &["hw.ncpu"], "read hw.ncpu").allowed(),
        mac("allowed-exec-system", A::Exec, &["/usr/bin/true"], "run /usr/bin/true").allowed(),
        mach("allowed-userinfo", "com.apple.system.opendirectoryd.libinfo",
            "look up opendirectoryd (user lookups)")
            .allowed(),
        mac("allowed-sh", A::Exec, &["/bin/sh", "-c", "exit 0"],
            "run /bin/sh -c (it reads which shell to be)")
            .allowed(),
        mac("allowed-draft-write-db", A::Write, &[&db],
            "write the database in a draft run").allowed().draft(),
    ]
}

/// A secret-named variable in the server's environment that no run may see.
const SECRET_ENV: &str = "REACHWEAVER_PROBE_API_TOKEN";

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

fn run_one(sb: &Sandbox, fx: &Fixture, sp: &Spec) -> anyhow::Result<Line> {
    let control = if sp.allowed {
        ControlResult::None
    } else {
        let c = run_control(fx, sp, &sp.args, None);
        clean_after_control(&fx.outside, sp)?;
        ControlResult::of(sp, matches!(c, Outcome::Ok(_)))
    };
    let before = match &sp.truth {
        Truth::Listener(w) => fx.net.counters.get(*w),
        _ => 0,
    };
    let inside = run_inside(sb, fx, sp, &sp.args, None);
    // The listeners count on threads of their own.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let mut detail = inside.text().trim().to_string();
    let reported_ok = matches!(inside, Outcome::Ok(_));
    let through = got_through(&fx.net.counters, sp, reported_ok, before, &mut detail);
    Ok(Line::judged(sp, through, control, detail))
}

pub fn run(json: bool) -> anyhow::Result<u8> {
    // Set before any thread starts.
    std::env::set_var(SECRET_ENV, "probe-secret-value");
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .ok_or_else(|| anyhow::anyhow!("HOME is not set"))?;
    let fx = Fixture::new()?;
    // The LaunchAgents control writes into ~/Library/LaunchAgents, which a
    // fresh account (a CI machine's) does not have yet: made for the probe
    // and removed afterwards if the probe made it.
    let _agents = MadeDir::ensure(&home.join("Library/LaunchAgents"))?;
    let specs = specs(&fx, std::process::id(), &home);
    let opts = SandboxOptions {
        mode: SandboxMode::Require,
        backend: fx.exe.clone(),
        root: fx.root.clone(),
        db: Some(fx.db.clone()),
        ..SandboxOptions::default()
    };
    let sb = Sandbox::detect(&opts)?;
    let mut lines = Vec::new();
    for sp in &specs {
        lines.push(run_one(&sb, &fx, sp)?);
    }
    std::env::remove_var(SECRET_ENV);
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &probe_report::json(&lines))?;
        writeln!(out)?;
    } else {
        out.write_all(probe_report::text(&os_version(), &lines).as_bytes())?;
    }
    Ok(probe_report::exit_code(&lines))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::RunKind;

    fn named<'a>(specs: &'a [Spec], name: &str) -> &'a Spec {
        specs
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no spec {name}"))
    }

    #[test]
    fn every_escape_has_a_control_and_allowed_operations_none() {
        let fx = Fixture::new().unwrap();
        let home = fx.outside.join("home");
        let specs = specs(&fx, std::process::id(), &home);
        for name in [
            "hardlink",
            "exec-tmpdir",
            "write-root",
            "write-launchagents",
            "open-tool",
        ] {
            assert!(!named(&specs, name).allowed, "{name}");
        }
        assert!(specs.iter().any(|s| s.allowed));
        // The LaunchAgent the control really writes is never an agent.
        for sp in &specs {
            if let Truth::Absent(p) = &sp.truth {
                assert!(
                    p.extension().is_none_or(|e| e != "plist"),
                    "{}",
                    p.display()
                );
            }
        }
    }

    #[test]
    fn what_a_control_writes_is_gone_before_the_run_tries() {
        let fx = Fixture::new().unwrap();
        // A stand-in home, so the test never touches the real LaunchAgents.
        let home = fx.outside.join("home");
        std::fs::create_dir_all(home.join("Library/LaunchAgents")).unwrap();
        let specs = specs(&fx, std::process::id(), &home);
        let mut checked = Vec::new();
        for sp in &specs {
            if let Truth::Absent(path) = &sp.truth {
                std::fs::write(path, b"control").unwrap();
                std::fs::write(fx.outside.join("hardlink"), b"x").unwrap();
                clean_after_control(&fx.outside, sp).unwrap();
                assert!(!path.exists(), "{}: {}", sp.name, path.display());
                assert!(!fx.outside.join("hardlink").exists());
                checked.push(sp.name.as_str());
            }
        }
        assert_eq!(
            checked,
            [
                "write-outside",
                "write-root",
                "write-launchagents",
                "draft-write-beside"
            ]
        );
    }

    /// Only what needs a GUI login or a launchd user domain may be "not
    /// applicable": files, sockets, sysctls, signals, process information,
    /// exec, IOKit and drafts must have a working control everywhere.
    #[test]
    fn only_session_bound_controls_may_be_not_applicable() {
        let fx = Fixture::new().unwrap();
        let home = fx.outside.join("home");
        let specs = specs(&fx, std::process::id(), &home);
        let bound: Vec<&str> = specs
            .iter()
            .filter(|s| s.session().is_some())
            .map(|s| s.name.as_str())
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
            let sp = named(&specs, name);
            assert_eq!(sp.session(), None, "{name}");
            assert!(!sp.allowed, "{name}");
        }
        let drafts: Vec<&str> = specs
            .iter()
            .filter(|s| s.kind == RunKind::Draft)
            .map(|s| s.name.as_str())
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
    fn every_spec_says_what_it_tries() {
        let fx = Fixture::new().unwrap();
        let home = fx.outside.join("home");
        let specs = specs(&fx, std::process::id(), &home);
        assert_eq!(specs.len(), 34);
        for sp in &specs {
            assert!(!sp.what.is_empty(), "{}", sp.name);
        }
    }

    #[test]
    fn the_probe_socket_fits_and_is_removed_with_the_fixture() {
        let fx = Fixture::new().unwrap();
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

//! The attempts whose truth the attempt's own report can't give: a
//! stand-in server that must survive cleaning up after a run, output and
//! process floods, daemons and processes that outlive their run, each
//! checked from the host.

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::attempts::Attempt;
use super::fixture::{kill_marker, marker_pids, wait_for, Fixture};
use super::model::{spec, Outcome};
use super::runner::{parse_report, reader, run_control, run_inside, signal_name, RUN_TIMEOUT};
use super::Spec;
use crate::sandbox::{RunKind, Sandbox, SandboxMode, SandboxOptions};

/// The file's permission bits when it exists with an execute bit.
pub(super) fn exec_bits(p: &Path) -> Option<u32> {
    let m = std::fs::symlink_metadata(p).ok()?;
    let mode = m.mode() & 0o7777;
    (m.is_file() && mode & 0o111 != 0).then_some(mode)
}

/// Whether `pid` appears in `path` as a whole number.
pub(super) fn carries_pid(path: &str, pid: u32) -> bool {
    let pid = pid.to_string();
    path.split(|c: char| !c.is_ascii_digit()).any(|t| t == pid)
}

/// Outside: the attempt builds the chain in the control's TMPDIR.
pub(super) fn deep_tmp_control(fx: &Fixture, sp: &Spec) -> Outcome {
    let marker = sp.args.get(1).cloned().unwrap_or_default();
    match run_control(fx, sp, &sp.args, None) {
        Outcome::Ok(s) if fx.ctl_tmp.join(&marker).is_dir() => Outcome::Ok(s),
        Outcome::Ok(s) => Outcome::Failed(format!("reported {s} but nothing is there")),
        other => other,
    }
}

/// Inside: a stand-in server process runs the attempt as one call, on a
/// thread with a call thread's stack, and cleans up after it. Then nothing
/// of the run may be left in the system temp folder, and the stand-in must
/// have lived to report.
pub(super) fn deep_tmp_inside(fx: &Fixture, sp: &Spec) -> Outcome {
    let marker = sp.args.get(1).cloned().unwrap_or_default();
    let mut cmd = Command::new(&fx.exe);
    cmd.args(["__probe-attempt", "serve-one-call"])
        .arg(&fx.root)
        .arg(&fx.home)
        .arg(&fx.db)
        .arg(sp.attempt.word())
        .args(&sp.args)
        .current_dir(&fx.root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Outcome::NotRun(format!("stand-in server: {e}")),
    };
    let server = child.id();
    let out = reader(child.stdout.take(), 1 << 16);
    let err = reader(child.stderr.take(), 1 << 16);
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                break child.wait().ok();
            }
        }
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    // What the run left: its folder by the stand-in's pid, or the chain's
    // top wherever it is.
    let prefix = format!("reachweaver-run-{server}-");
    let mut left = Vec::new();
    if let Ok(d) = std::fs::read_dir(&fx.tmp_base) {
        for e in d.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix) || name == marker {
                left.push(e.path());
            } else if std::fs::symlink_metadata(e.path().join(&marker)).is_ok() {
                left.push(e.path().join(&marker));
            }
        }
    }
    for p in &left {
        let _ = crate::sandbox::tmpdir::try_remove_tree(p);
    }
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.and_then(|s| s.signal()) {
        return Outcome::Ok(format!(
            "the server stand-in died with {} cleaning up; left {left:?}",
            signal_name(sig)
        ));
    }
    if status.and_then(|s| s.code()) == Some(4) {
        return Outcome::Ok(format!(
            "the server stand-in's call thread panicked cleaning up; left {left:?}"
        ));
    }
    if status.and_then(|s| s.code()) == Some(3) {
        return Outcome::NotRun(format!(
            "stand-in server: {}",
            String::from_utf8_lossy(&err).trim()
        ));
    }
    if !left.is_empty() {
        return Outcome::Ok(format!("left behind in the temp folder: {left:?}"));
    }
    match parse_report(&out, status) {
        Outcome::Ok(_) => Outcome::Failed("cleaned up".into()),
        other => other,
    }
}

/// `__probe-attempt serve-one-call ROOT HOME DB ATTEMPT ARGS...`: what the
/// server does for one call (a sandbox of the probe's shape, the run on a
/// thread with a call thread's stack, the clean-up when it ends), printing
/// the run's report. Exit 3 when the sandbox can't be set up.
pub(crate) fn serve_one_call(args: &[String]) -> u8 {
    // The server's call threads have this stack (see serve.rs).
    const CALL_STACK: usize = 512 * 1024;
    if args.len() < 4 {
        eprintln!("serve-one-call: ROOT HOME DB ATTEMPT [ARGS...]");
        return 3;
    }
    let args = args.to_vec();
    let call = move || -> Result<Vec<u8>, String> {
        let exe = std::env::current_exe()
            .and_then(std::fs::canonicalize)
            .map_err(|e| e.to_string())?;
        let root = PathBuf::from(&args[0]);
        let opts = SandboxOptions {
            mode: SandboxMode::Require,
            backend: exe.clone(),
            root: root.clone(),
            read: vec![PathBuf::from(&args[1])],
            home: Some(PathBuf::from(&args[1])),
            db: Some(PathBuf::from(&args[2])),
            allow_read: Vec::new(),
            pass_env: Vec::new(),
            ..SandboxOptions::default()
        };
        let sb = Sandbox::detect(&opts).map_err(|e| e.to_string())?;
        let mut argv = vec![Fixture::s(&exe), "__probe-attempt".to_string()];
        argv.extend(args[3..].iter().cloned());
        let mut child = sb
            .spawn(RunKind::ReadOnly, &argv, &root)
            .map_err(|e| e.to_string())?;
        let out = reader(child.stdout.take(), 1 << 16);
        let _ = child.wait();
        // Dropping the run removes its temp folder, here on the call thread.
        drop(child);
        Ok(out.join().unwrap_or_default())
    };
    let thread = match std::thread::Builder::new()
        .stack_size(CALL_STACK)
        .spawn(call)
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("serve-one-call: {e}");
            return 3;
        }
    };
    match thread.join() {
        Ok(Ok(out)) => {
            let mut o = std::io::stdout().lock();
            let _ = o.write_all(&out);
            let _ = o.flush();
            0
        }
        Ok(Err(e)) => {
            eprintln!("serve-one-call: {e}");
            3
        }
        // A server's call thread that panics fails its call at least.
        Err(_) => 4,
    }
}

/// Flood stdout; read up to the cap, then kill the run. Contained means the
/// whole run was gone right after the kill.
pub(super) fn flood(fx: &Fixture, sp: &Spec, sb: Option<&Sandbox>) -> Outcome {
    const CAP: usize = 4 << 20;
    let drain = |r: &mut dyn Read| -> usize {
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0;
        while total < CAP {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        total
    };
    match sb {
        None => {
            let mut child = match Command::new(&fx.exe)
                .args(["__probe-attempt", sp.attempt.word()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
            {
                Ok(c) => c,
                Err(e) => return Outcome::Failed(e.to_string()),
            };
            let got = child.stdout.as_mut().map(|s| drain(s)).unwrap_or(0);
            let _ = child.kill();
            let _ = child.wait();
            if got >= CAP {
                Outcome::Ok(format!("{got} bytes"))
            } else {
                Outcome::Failed(format!("only {got} bytes"))
            }
        }
        Some(sb) => {
            let argv = vec![
                Fixture::s(&fx.exe),
                "__probe-attempt".into(),
                sp.attempt.word().into(),
            ];
            let tmp_before = run_tmpdirs();
            let mut child = match sb.spawn(RunKind::ReadOnly, &argv, &fx.root) {
                Ok(c) => c,
                Err(e) => return Outcome::NotRun(format!("sandbox: {e}")),
            };
            let mut stdout = child.stdout.take();
            let got = stdout.as_mut().map(|s| drain(s)).unwrap_or(0);
            let t = Instant::now();
            child.kill_tree();
            let waited = child.wait();
            drop(child);
            // The reader sees end of file only when every process holding
            // the pipe is gone.
            let eof = stdout
                .as_mut()
                .map(|s| {
                    let mut buf = vec![0u8; 1 << 16];
                    loop {
                        match s.read(&mut buf) {
                            Ok(0) => break true,
                            Ok(_) => continue,
                            Err(_) => break false,
                        }
                    }
                })
                .unwrap_or(true);
            let elapsed = t.elapsed();
            let leftover: Vec<PathBuf> = run_tmpdirs()
                .into_iter()
                .filter(|d| !tmp_before.contains(d))
                .collect();
            if got < CAP {
                Outcome::Ok(format!("the run stopped by itself after {got} bytes"))
            } else if waited.is_err()
                || !eof
                || elapsed > Duration::from_secs(5)
                || !leftover.is_empty()
            {
                Outcome::Ok(format!(
                    "not contained: eof={eof} after {elapsed:?}, temp folders left {leftover:?}"
                ))
            } else {
                Outcome::Failed("contained".into())
            }
        }
    }
}

/// This process's private run folders currently in the temp folder.
pub(super) fn run_tmpdirs() -> Vec<PathBuf> {
    let Ok(prefix) = crate::sandbox::tmpdir::own_run_prefix() else {
        return Vec::new();
    };
    let Ok(tmp) = std::fs::canonicalize(std::env::temp_dir()) else {
        return Vec::new();
    };
    std::fs::read_dir(tmp)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// A backend that leaves a daemon behind and returns: the daemon must be
/// gone once the call is over.
pub(super) fn daemon(fx: &Fixture, sp: &Spec, sb: Option<&Sandbox>) -> Outcome {
    let marker = fx.marker();
    let args = vec![marker.clone()];
    match sb {
        None => {
            let r = run_control(fx, sp, &args, None);
            let alive = wait_for(|| !marker_pids(&marker).is_empty(), Duration::from_secs(20));
            kill_marker(&marker);
            match r {
                Outcome::Ok(_) if alive => Outcome::Ok("the daemon outlived the call".into()),
                Outcome::Ok(_) => Outcome::Failed("no daemon seen".into()),
                other => other,
            }
        }
        Some(sb) => {
            let r = run_inside(sb, fx, sp, &args, None);
            // Give a surviving daemon time to show up.
            std::thread::sleep(Duration::from_millis(300));
            let left = marker_pids(&marker);
            kill_marker(&marker);
            match r {
                Outcome::Ok(_) if left.is_empty() => Outcome::Failed("gone".into()),
                Outcome::Ok(_) => {
                    Outcome::Ok(format!("the daemon outlived the call (pids {left:?})"))
                }
                Outcome::Failed(e) => Outcome::Failed(format!("the attempt failed: {e}")),
                not_run @ Outcome::NotRun(_) => not_run,
            }
        }
    }
}

/// Two calls in a row: the first leaves traces, the second (the attempt)
/// looks for them. Outside, both run as plain children of the probe.
pub(super) fn next_call(fx: &Fixture, sp: &Spec, sb: Option<&Sandbox>) -> Outcome {
    let marker = fx.marker();
    let args = vec![marker.clone()];
    let first = Spec {
        control: sp.control,
        kind: sp.kind,
        ..spec("leave-traces", Attempt::LeaveTraces, vec![], "", &[])
    };
    let left = match sb {
        None => run_control(fx, &first, &args, None),
        Some(sb) => run_inside(sb, fx, &first, &args, None),
    };
    let found = match left {
        Outcome::Ok(_) => match sb {
            // The control's TMPDIR is emptied before each run: the second
            // finds the other traces.
            None => run_control(fx, sp, &args, None),
            Some(sb) => run_inside(sb, fx, sp, &args, None),
        },
        Outcome::Failed(e) => Outcome::Failed(format!("the first call failed: {e}")),
        not_run @ Outcome::NotRun(_) => not_run,
    };
    // Whatever was left and not found (a daemon the attempt could not see).
    kill_marker(&marker);
    found
}

/// Outside: a process whose parent is killed keeps running (orphans live on).
pub(super) fn outlive_control(fx: &Fixture) -> Outcome {
    let marker = fx.marker();
    let mut parent = match Command::new(&fx.exe)
        .args(["__probe-attempt", "daemon", &marker])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let seen = wait_for(|| !marker_pids(&marker).is_empty(), Duration::from_secs(5));
    let _ = parent.kill();
    let _ = parent.wait();
    std::thread::sleep(Duration::from_millis(200));
    let alive = !marker_pids(&marker).is_empty();
    kill_marker(&marker);
    if seen && alive {
        Outcome::Ok("the process outlived its killed parent".into())
    } else {
        Outcome::Failed("no surviving process seen".into())
    }
}

/// Inside: `sandbox run` (standing in for the server) is killed with
/// SIGKILL while its run sleeps; the run must die with it.
pub(super) fn outlive_inside(fx: &Fixture) -> Outcome {
    let marker = fx.marker();
    let mut server = match Command::new(&fx.exe)
        .arg("sandbox")
        .arg("run")
        .arg("--root")
        .arg(&fx.root)
        .arg("--")
        .arg(&fx.exe)
        .args(["__probe-attempt", "sleep-marker", &marker])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let started = wait_for(|| !marker_pids(&marker).is_empty(), Duration::from_secs(10));
    let _ = server.kill();
    let _ = server.wait();
    if !started {
        kill_marker(&marker);
        return Outcome::Failed("the run never started (proves nothing)".into());
    }
    if wait_for(|| marker_pids(&marker).is_empty(), Duration::from_secs(3)) {
        Outcome::Failed("gone".into())
    } else {
        let left = marker_pids(&marker);
        kill_marker(&marker);
        Outcome::Ok(format!(
            "the run outlived the killed server (pids {left:?})"
        ))
    }
}

//! `sandbox status|run|probe|apparmor-profile`: let owners and CI jobs see, on their own
//! machine, which layers the kernel gives and that they hold, with the same
//! policy a tool call gets.
//!
//! This is the command line's side; the sandbox itself never sees the
//! command line.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::cli::{DeniedReport, Globals, SandboxCommand};
use crate::config::{Owner, OwnerInput};
use crate::sandbox::{self, Layer, RunKind, Sandbox, SandboxMode, SandboxOptions};

/// `sandbox status|run|probe|apparmor-profile`.
pub(crate) fn cli(globals: &Globals, cmd: SandboxCommand) -> anyhow::Result<u8> {
    match cmd {
        SandboxCommand::Status { json } => status(json),
        SandboxCommand::Run {
            root,
            allow_read,
            protect,
            report,
            command,
        } => run(globals, root, allow_read, &protect, &report, command),
        SandboxCommand::Probe {
            json,
            without,
            junit,
        } => probe(json, without, junit.as_deref()),
        SandboxCommand::ApparmorProfile { exe, abi } => {
            apparmor_profile(exe.as_deref(), abi.as_deref())
        }
    }
}

fn status(json: bool) -> anyhow::Result<u8> {
    let report = sandbox::status();
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        writeln!(out, "platform: {} {}", report.platform, report.kernel)?;
        if let Some(abi) = report.landlock_abi {
            writeln!(out, "landlock ABI: {abi}")?;
        }
        for l in &report.layers {
            let mark = if l.available {
                "available"
            } else {
                "missing  "
            };
            writeln!(out, "  {mark}  {:<15} {}", l.name(), l.detail)?;
        }
        if let Some(trial) = &report.trial {
            writeln!(out, "trial run: {trial}")?;
        }
        if !report.promises.is_empty() {
            writeln!(out, "promises:")?;
            for p in &report.promises {
                let (mark, by) = if p.held() {
                    let by: Vec<&str> = p.held_by.iter().map(|h| h.name()).collect();
                    ("held    ", format!("by {}", by.join(", ")))
                } else {
                    ("NOT HELD", format!("needs {}", p.needs))
                };
                let tier = match p.tier {
                    sandbox::promises::Tier::Always => "",
                    sandbox::promises::Tier::WhereAvailable => " [where the kernel allows]",
                    sandbox::promises::Tier::Feature => " [--allow-drafts]",
                };
                writeln!(out, "  {mark}  {}{tier}: {by}", p.text)?;
            }
        }
        if let Some(a) = &report.apparmor {
            writeln!(out, "apparmor: {}", a.detail)?;
        }
        if report.require_missing.is_empty() {
            writeln!(
                out,
                "mcp-serve (--sandbox require) would use: {}",
                report.require_layers
            )?;
        } else {
            writeln!(
                out,
                "mcp-serve (--sandbox require) would refuse to start: missing {}",
                report.require_missing.join("; ")
            )?;
            writeln!(
                out,
                "mcp-serve --sandbox best-effort would use: {}",
                report.best_effort_layers
            )?;
        }
    }
    Ok(0)
}

/// The options `sandbox run` uses: the read-only tool policy with `CMD` as
/// the backend, the globals' files readable, `--root` (default: the current
/// folder) as root and working folder; every path resolved and guarded by
/// the same code as the server's.
fn run_options(
    globals: &Globals,
    root: Option<PathBuf>,
    allow_read: Vec<PathBuf>,
    program: &str,
) -> anyhow::Result<(Owner, SandboxOptions)> {
    let globals = Globals {
        backend: Some(PathBuf::from(program)),
        ..globals.clone()
    };
    let owner = Owner::resolve(&OwnerInput {
        globals: &globals,
        backend_option: "the command",
        root: root.as_deref(),
        allow_read: &allow_read,
    })?;
    let mut opts = owner.sandbox_options(SandboxMode::Require, &[], None)?;
    if owner.root.is_none() {
        opts.root = owner.current_folder_root()?;
    }
    Ok((owner, opts))
}

/// The protected entries beneath the root and the home that a tool run
/// hides, found the way the server finds them: the default patterns and
/// `--protect`, with the owner's fixed files readable as in a tool run.
fn masks(owner: &Owner, opts: &SandboxOptions, protect: &[String]) -> anyhow::Result<Vec<PathBuf>> {
    let fixed: Vec<(&'static str, &Path)> = [
        ("accounts", &owner.accounts),
        ("profile", &owner.profile),
        ("database", &owner.db),
    ]
    .into_iter()
    .filter_map(|(what, f)| f.as_ref().map(|f| (what, f.path.as_path())))
    .collect();
    let protected = crate::protect::Protected::new(protect, &fixed)?;
    let folders: Vec<&Path> = std::iter::once(opts.root.as_path())
        .chain(opts.home.as_deref().filter(|h| *h != opts.root))
        .collect();
    Ok(crate::protect::scan(&folders, &protected).hidden)
}

/// `sandbox run --fail-on-denied`'s exit when the command tried something
/// and was refused, or when nobody could watch it. On macOS "tried" is what
/// the unified log showed within its grace (best effort).
pub const EXIT_DENIED: u8 = 86;

/// Write the reports `report` asks for; the exit code, given the command's.
fn finish_report(
    report: &DeniedReport,
    denied: &crate::sandbox::denied::Denied,
    code: u8,
) -> anyhow::Result<u8> {
    if let Some(p) = &report.report {
        let mut text = serde_json::to_string_pretty(&denied.to_json())?;
        text.push('\n');
        std::fs::write(p, text).with_context(|| format!("--report {}", p.display()))?;
    }
    if let Some(p) = &report.report_junit {
        std::fs::write(p, denied.to_junit("sandbox run"))
            .with_context(|| format!("--report-junit {}", p.display()))?;
    }
    // A run read from the unified log counts as watched: what it saw fails
    // the run, and what it missed is why its report says best effort.
    use crate::sandbox::denied::Watch;
    let unknown = !matches!(denied.watch, Watch::Watched | Watch::Log);
    if report.fail_on_denied && (denied.fails() || unknown) {
        return Ok(EXIT_DENIED);
    }
    Ok(code)
}

fn run(
    globals: &Globals,
    root: Option<PathBuf>,
    allow_read: Vec<PathBuf>,
    protect: &[String],
    report: &DeniedReport,
    command: Vec<String>,
) -> anyhow::Result<u8> {
    let (program, args) = command
        .split_first()
        .context("sandbox run needs a command")?;
    let (owner, opts) = run_options(globals, root, allow_read, program)?;
    // A run here reproduces a tool run, so it hides what a tool run hides:
    // an owner told to reproduce a failed call here must not have the
    // backend read `.env` where the tool run could not.
    let masks = masks(&owner, &opts, protect)?;
    let sandbox = Sandbox::detect(&opts)?.regrant(&opts, masks)?;
    let mut argv = vec![opts.backend.to_string_lossy().into_owned()];
    argv.extend(args.iter().cloned());
    // macOS has no supervisor: a report there is read from the unified
    // log, best effort (docs/DENIED.md).
    #[cfg(target_os = "macos")]
    if report.report.is_some() || report.report_junit.is_some() || report.fail_on_denied {
        crate::sandbox::macos::spawn::watch_unified_log();
    }
    let mut child = sandbox.spawn(RunKind::ReadOnly, &argv, &opts.root)?;
    // When our own output goes away (a reader that stopped), the run is
    // killed rather than left blocked on a full pipe.
    let pid = child.pid() as libc::pid_t;
    let out = child.stdout.take().map(|s| pump(s, std::io::stdout(), pid));
    let err = child.stderr.take().map(|s| pump(s, std::io::stderr(), pid));
    // The run's watched calls are answered here while the pumps copy.
    crate::run::supervise_until_exit(&mut child);
    // The pipes reach end of file only once the helper has exited, and it
    // isn't reaped before the pumps are done, so their kill can't hit a
    // recycled pid.
    for t in [out, err].into_iter().flatten() {
        let _ = t.join();
    }
    let status = child.wait()?;
    finish_report(report, &child.denied(), exit_code(status))
}

/// Copy a run's output to ours on a thread; if ours fails, kill the run.
fn pump<R, W>(mut from: R, mut to: W, pid: libc::pid_t) -> std::thread::JoinHandle<()>
where
    R: std::io::Read + Send + 'static,
    W: Write + Send + 'static,
{
    std::thread::spawn(move || {
        if std::io::copy(&mut from, &mut to).is_err() {
            // SAFETY: the helper is reaped only after this thread is joined,
            // so the pid (and its process group) is still the run's.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
        }
    })
}

/// A shell's view of an exit status: the code, or 128 + the signal.
pub(crate) fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => (128 + s) as u8,
        _ => 125,
    }
}

fn probe(json: bool, without: Option<Layer>, junit: Option<&Path>) -> anyhow::Result<u8> {
    sandbox::probe(json, without, junit)
}

/// `sandbox apparmor-profile [--exe PATH] [--abi 3.0|4.0]`: the profile for
/// this binary, or for the one at `PATH`, on stdout; the ABI chosen, when
/// not given, and why, on stderr.
#[cfg(target_os = "linux")]
fn apparmor_profile(exe: Option<&Path>, abi: Option<&str>) -> anyhow::Result<u8> {
    use crate::sandbox::linux::apparmor;
    let abi = match abi {
        Some(a) => apparmor::Abi::parse(a).with_context(|| format!("--abi {a}: 3.0 or 4.0"))?,
        None => {
            let (abi, why) = apparmor::detect_abi();
            eprintln!("{why}");
            abi
        }
    };
    let (exe, named) = match exe {
        Some(p) => (p.to_path_buf(), format!("--exe {}", p.display())),
        None => {
            let p = std::env::current_exe().context("could not find this binary's path")?;
            let named = format!("this binary ({})", p.display());
            (p, named)
        }
    };
    // The kernel attaches a profile by the executed file's resolved path,
    // so links are followed here, once.
    let canonical = std::fs::canonicalize(&exe).with_context(|| named.clone())?;
    if !canonical.is_file() {
        anyhow::bail!("{named}: {} is not a file", canonical.display());
    }
    let text = apparmor::profile(&canonical, abi)?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(0)
}

#[cfg(not(target_os = "linux"))]
fn apparmor_profile(_exe: Option<&Path>, _abi: Option<&str>) -> anyhow::Result<u8> {
    anyhow::bail!(
        "sandbox apparmor-profile is for Linux, where AppArmor may restrict user namespaces; \
         this is {}",
        std::env::consts::OS
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::denied::{Attempt, Denied, Watch};

    /// `--fail-on-denied`: a report read from the unified log fails the run
    /// on what it saw, and only then; one nobody watched always fails it.
    #[test]
    fn fail_on_denied_takes_the_logs_report_at_its_word_and_no_further() {
        let fail = DeniedReport {
            fail_on_denied: true,
            ..DeniedReport::default()
        };
        let mut log = Denied::new(Watch::Log);
        assert_eq!(finish_report(&fail, &log, 3).unwrap(), 3);
        log.record(Attempt {
            call: "network-outbound",
            layer: "sandbox-exec",
            ..Attempt::default()
        });
        assert_eq!(finish_report(&fail, &log, 0).unwrap(), EXIT_DENIED);
        let nobody = Denied::new(Watch::Unavailable);
        assert_eq!(finish_report(&fail, &nobody, 0).unwrap(), EXIT_DENIED);
        let watched = Denied::new(Watch::Watched);
        assert_eq!(finish_report(&fail, &watched, 0).unwrap(), 0);
        // Without the flag the command's own exit stands.
        assert_eq!(finish_report(&DeniedReport::default(), &log, 0).unwrap(), 0);
    }
}

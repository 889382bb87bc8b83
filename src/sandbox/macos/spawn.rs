//! Starting a run under sandbox-exec (macOS only; the argv comes from the
//! pure builder in `macos.rs`, the exec chain from `discover` at start).

use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::sandbox::policy::{self, Layers};
use crate::sandbox::SandboxMode;
use crate::sandbox::{
    Layer, LayerStatus, RunKind, SandboxError, SandboxOptions, SandboxedChild, StatusReport,
};

use super::{ExecChain, RunProfile};

pub struct State {
    chain: ExecChain,
}

fn available() -> Result<(), String> {
    if Path::new(super::SANDBOX_EXEC).exists() {
        Ok(())
    } else {
        Err(format!("{} is missing", super::SANDBOX_EXEC))
    }
}

/// The user's home from the password database when `HOME` is unset, so a
/// missing variable can't widen what counts as "outside the home".
fn home_dir() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        return Some(PathBuf::from(h));
    }
    // SAFETY: getpwuid returns a pointer into static storage or null; the
    // directory is copied out at once.
    unsafe {
        let pw = libc::getpwuid(libc::getuid());
        if pw.is_null() || (*pw).pw_dir.is_null() {
            return None;
        }
        use std::os::unix::ffi::OsStrExt;
        let dir = std::ffi::CStr::from_ptr((*pw).pw_dir);
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes())))
    }
}

impl State {
    pub fn detect(opts: &SandboxOptions) -> Result<State, SandboxError> {
        if let Err(e) = available() {
            if opts.mode == SandboxMode::Require {
                return Err(SandboxError::Unavailable(e));
            }
        }
        let home = home_dir();
        let path_env = std::env::var("PATH").ok();
        // An exec chain that can't be known (an `env` line naming a program
        // not on PATH) stops the start, whatever the mode: the run would
        // otherwise start whatever `env` finds inside the sandbox.
        let chain = super::discover(&opts.backend, home.as_deref(), path_env.as_deref())
            .map_err(|e| SandboxError::Unavailable(e.to_string()))?;
        Ok(State { chain })
    }

    pub fn layers_line(&self) -> String {
        "sandbox-exec (deny-by-default profile, no network)".to_string()
    }

    pub fn without(&mut self, _layer: Layer) {}

    pub fn spawn(
        &self,
        opts: &SandboxOptions,
        kind: RunKind,
        argv: &[String],
        cwd: &Path,
        stdin: Option<OwnedFd>,
    ) -> Result<SandboxedChild, SandboxError> {
        let tmpdir = crate::sandbox::make_private_tmpdir().map_err(SandboxError::Io)?;
        let guard = crate::sandbox::TmpGuard(Some(tmpdir.clone()));
        let server_env: Vec<(String, String)> = std::env::vars().collect();
        let p = policy::build(&policy::BuildInput {
            opts,
            kind,
            // The exec chain found at start carries the runtime; the
            // Linux-shaped system folders are not granted here (the base
            // profile names Apple's own).
            runtime: &opts.allow_read,
            env: &server_env,
            layers: Layers::default(),
            tmpdir: &tmpdir,
            argv,
            cwd,
            parent_pid: std::process::id(),
        });
        let full = super::build_argv(&RunProfile {
            policy: &p,
            chain: &self.chain,
            db: opts.db.as_deref(),
            draft: kind == RunKind::Draft,
        });
        let mut cmd = Command::new(&full[0]);
        cmd.args(&full[1..])
            .env_clear()
            .envs(p.env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        match stdin {
            Some(fd) => cmd.stdin(Stdio::from(fd)),
            None => cmd.stdin(Stdio::null()),
        };
        // Descriptors the server inherited without close-on-exec (from the
        // MCP client, a terminal, a parent's pipes) must not reach the
        // backend, as on Linux: mark every one above stderr close-on-exec.
        // SAFETY: only fcntl and getrlimit, both async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                let mut lim = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                    lim.rlim_cur.min(65_536) as libc::c_int
                } else {
                    4096
                };
                for fd in 3..max {
                    let flags = libc::fcntl(fd, libc::F_GETFD);
                    if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                        libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                    }
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(SandboxError::Io)?;
        // What confined the run: the profile and argv sandbox-exec received.
        let attestation =
            crate::sandbox::layers::Attestation::new(&["sandbox_exec"], full.join("\0").as_bytes());
        Ok(SandboxedChild {
            attestation: Some(attestation),
            after: None,
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            child: child.into(),
            tmpdir: guard.release(),
            done: false,
        })
    }
}

pub fn status() -> StatusReport {
    super::probe::status()
}

pub fn helper_main(_policy: &str) -> anyhow::Result<u8> {
    anyhow::bail!("the sandbox helper is not used on macOS")
}

pub fn probe(
    json: bool,
    without: Option<Layer>,
    junit: Option<&std::path::Path>,
) -> anyhow::Result<u8> {
    if without.is_some() {
        anyhow::bail!("--without switches off Linux layers; macOS has one layer, sandbox-exec");
    }
    if junit.is_some() {
        anyhow::bail!("--junit is written by the Linux probe; on macOS use --json");
    }
    super::probe::run(json)
}

pub fn probe_attempt(name: &str, args: &[String]) -> u8 {
    super::probe::attempt(name, args)
}

/// Kept for the status report's layer list.
pub(super) fn layer_status() -> LayerStatus {
    let a = available();
    LayerStatus {
        name: "sandbox-exec",
        available: a.is_ok(),
        detail: a.err().unwrap_or_else(|| "deny-by-default profile".into()),
    }
}

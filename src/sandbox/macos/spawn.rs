//! Starting a run under sandbox-exec (macOS only; the argv comes from the
//! pure builder in `macos.rs`).

use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cli::SandboxMode;
use crate::sandbox::policy::{self, Layers};
use crate::sandbox::{
    Layer, LayerStatus, RunKind, SandboxError, SandboxOptions, SandboxedChild, StatusReport,
};

pub struct State {
    runtime: Vec<PathBuf>,
}

fn available() -> Result<(), String> {
    if Path::new(super::SANDBOX_EXEC).exists() {
        Ok(())
    } else {
        Err(format!("{} is missing", super::SANDBOX_EXEC))
    }
}

impl State {
    pub fn detect(opts: &SandboxOptions) -> Result<State, SandboxError> {
        if let Err(e) = available() {
            if opts.mode == SandboxMode::Require {
                return Err(SandboxError::Unavailable(e));
            }
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let path_env = std::env::var("PATH").ok();
        Ok(State {
            runtime: policy::runtime_paths(
                &opts.backend,
                home.as_deref(),
                path_env.as_deref(),
                &opts.allow_read,
            ),
        })
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
            runtime: &self.runtime,
            env: &server_env,
            layers: Layers::default(),
            tmpdir: &tmpdir,
            argv,
            cwd,
            parent_pid: std::process::id(),
        });
        let full = super::build_argv(&p);
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
        let mut child = cmd.spawn().map_err(SandboxError::Io)?;
        Ok(SandboxedChild {
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            child: child.into(),
            tmpdir: guard.release(),
            done: false,
        })
    }
}

pub fn status() -> StatusReport {
    let a = available();
    let missing = a.as_ref().err().cloned().into_iter().collect();
    StatusReport {
        platform: "macos",
        kernel: String::new(),
        landlock_abi: None,
        layers: vec![LayerStatus {
            name: "sandbox-exec",
            available: a.is_ok(),
            detail: a.err().unwrap_or_else(|| "deny-by-default profile".into()),
        }],
        require_missing: missing,
        require_layers: "sandbox-exec (deny-by-default profile, no network)".into(),
        best_effort_layers: "sandbox-exec (deny-by-default profile, no network)".into(),
    }
}

pub fn helper_main(_policy: &str) -> anyhow::Result<u8> {
    anyhow::bail!("the sandbox helper is not used on macOS")
}

pub fn probe(_json: bool, _without: Option<Layer>) -> anyhow::Result<u8> {
    anyhow::bail!("sandbox probe runs on Linux only")
}

pub fn probe_attempt(_name: &str, _args: &[String]) -> u8 {
    2
}

//! Platforms without a sandbox: `require` refuses, `best-effort` has
//! nothing to offer either, so every run is refused.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use crate::sandbox::{Layer, RunKind, SandboxError, SandboxOptions, SandboxedChild, StatusReport};

pub struct State;

impl crate::sandbox::Platform for State {
    fn detect(_opts: &SandboxOptions) -> Result<State, SandboxError> {
        Err(SandboxError::Unavailable(format!(
            "no sandbox for {}",
            std::env::consts::OS
        )))
    }

    fn layers_line(&self) -> String {
        "none".into()
    }

    /// The promises are assessed on Linux only, where they rest on several
    /// layers; here nothing holds them.
    fn promises_line(&self, _opts: &SandboxOptions, _drafts: bool) -> String {
        String::new()
    }

    fn drafts_refused(&self, _opts: &SandboxOptions) -> Option<String> {
        None
    }

    fn bound_waits(&self, _call_timeout: Option<Duration>) {}

    fn spawn(
        &self,
        _opts: &SandboxOptions,
        _kind: RunKind,
        _argv: &[String],
        _cwd: &Path,
        _stdin: Option<OwnedFd>,
        _exe: Option<BorrowedFd<'_>>,
    ) -> Result<SandboxedChild, SandboxError> {
        Err(SandboxError::Unavailable(
            "no sandbox on this platform".into(),
        ))
    }

    fn helper_main(_arg: &str) -> anyhow::Result<u8> {
        anyhow::bail!("no sandbox helper on this platform")
    }

    fn status() -> StatusReport {
        StatusReport {
            platform: std::env::consts::OS,
            kernel: String::new(),
            landlock_abi: None,
            layers: Vec::new(),
            require_missing: vec!["a sandbox for this platform".into()],
            require_layers: "none".into(),
            best_effort_layers: "none".into(),
            trial: None,
            promises: Vec::new(),
            apparmor: None,
        }
    }

    fn probe(_json: bool, _without: Option<Layer>, _junit: Option<&Path>) -> anyhow::Result<u8> {
        anyhow::bail!("sandbox probe runs on Linux only")
    }

    fn probe_attempt(_name: &str, _args: &[String]) -> u8 {
        2
    }
}

//! Platforms without a sandbox: `require` refuses, `best-effort` has
//! nothing to offer either, so every run is refused.

use std::os::fd::OwnedFd;
use std::path::Path;

use crate::sandbox::{Layer, RunKind, SandboxError, SandboxOptions, SandboxedChild, StatusReport};

pub struct State;

impl State {
    pub fn detect(_opts: &SandboxOptions) -> Result<State, SandboxError> {
        Err(SandboxError::Unavailable(format!(
            "no sandbox for {}",
            std::env::consts::OS
        )))
    }

    pub fn layers_line(&self) -> String {
        "none".into()
    }

    pub fn without(&mut self, _layer: Layer) {}

    /// The promises are assessed on Linux only, where they rest on several
    /// layers; here the one profile holds what it holds.
    pub fn promises_line(&self, _drafts: bool) -> String {
        String::new()
    }

    pub fn drafts_refused(&self) -> Option<String> {
        None
    }

    pub fn spawn(
        &self,
        _opts: &SandboxOptions,
        _kind: RunKind,
        _argv: &[String],
        _cwd: &Path,
        _stdin: Option<OwnedFd>,
    ) -> Result<SandboxedChild, SandboxError> {
        Err(SandboxError::Unavailable(
            "no sandbox on this platform".into(),
        ))
    }
}

pub fn status() -> StatusReport {
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

pub fn helper_main(_policy: &str) -> anyhow::Result<u8> {
    anyhow::bail!("no sandbox helper on this platform")
}

pub fn probe(
    _json: bool,
    _without: Option<Layer>,
    _junit: Option<&std::path::Path>,
) -> anyhow::Result<u8> {
    anyhow::bail!("sandbox probe runs on Linux only")
}

pub fn probe_attempt(_name: &str, _args: &[String]) -> u8 {
    2
}

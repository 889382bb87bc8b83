//! The Linux sandbox as the rest of the server sees it: detection once,
//! then one `spawn` per run with the layers decided at start.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::{layers_line, Detected};
use crate::sandbox::policy::{self, Layers};
use crate::sandbox::SandboxMode;
use crate::sandbox::{Layer, RunKind, SandboxError, SandboxOptions, SandboxedChild, StatusReport};

pub use super::helper_main;

pub struct State {
    detected: Detected,
    runtime: Vec<PathBuf>,
    layers: Layers,
    mode: SandboxMode,
    without: Vec<Layer>,
    /// Forks the runs; started on the first one.
    pub(super) zygotes: super::Slot,
    /// Where runs' cgroups are made, when the machine gives them.
    cgroups: Option<super::cgroup::Parent>,
}

impl State {
    pub fn detect(opts: &SandboxOptions) -> Result<State, SandboxError> {
        let detected = Detected::probe();
        if opts.mode == SandboxMode::Require {
            let missing = detected.missing_for_require();
            if !missing.is_empty() {
                return Err(SandboxError::Unavailable(format!(
                    "this kernel cannot give {} (use --sandbox best-effort to run with less)",
                    missing.join("; ")
                )));
            }
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let path_env = std::env::var("PATH").ok();
        let runtime = policy::runtime_paths(
            &opts.backend,
            home.as_deref(),
            path_env.as_deref(),
            &opts.allow_read,
        );
        let mut layers = detected.layers(&[]);
        let cgroups = if layers.cgroup {
            match set_up_cgroups() {
                Ok(parent) => Some(parent),
                // Found but not usable: fail closed where every available
                // layer is required, else run without and say so.
                Err(e) if opts.mode == SandboxMode::Require => {
                    return Err(SandboxError::Unavailable(format!(
                        "{e} (use --sandbox best-effort to run without per-run cgroups)"
                    )))
                }
                Err(_) => {
                    layers.cgroup = false;
                    None
                }
            }
        } else {
            None
        };
        Ok(State {
            layers,
            detected,
            runtime,
            mode: opts.mode,
            without: Vec::new(),
            zygotes: super::Slot::default(),
            cgroups,
        })
    }

    /// The layers every run gets.
    pub fn layers(&self) -> Layers {
        self.layers
    }

    pub fn layers_line(&self) -> String {
        layers_line(&self.detected, &self.layers, self.mode, &self.without)
    }

    pub fn without(&mut self, layer: Layer) {
        if !self.without.contains(&layer) {
            self.without.push(layer);
        }
        self.layers = self.detected.layers(&self.without);
    }

    pub fn spawn(
        &self,
        opts: &SandboxOptions,
        kind: RunKind,
        argv: &[String],
        cwd: &Path,
        stdin: Option<OwnedFd>,
    ) -> Result<SandboxedChild, SandboxError> {
        super::spawn(
            opts,
            &self.runtime,
            self.layers,
            Some(&self.zygotes),
            self.cgroups.as_ref(),
            kind,
            argv,
            cwd,
            stdin,
        )
    }
}

fn set_up_cgroups() -> Result<super::cgroup::Parent, String> {
    use super::cgroup;
    let token = format!(
        "{}.{:x}",
        std::process::id(),
        crate::sandbox::tmpdir::random_u64()
    );
    let plan = cgroup::assess(&cgroup::facts(), &token)?;
    cgroup::Parent::set_up(&plan, cgroup::CgroupLimits::default())
}

/// `sandbox status`.
pub fn status() -> StatusReport {
    let d = Detected::probe();
    let layers = d.layers(&[]);
    StatusReport {
        platform: "linux",
        kernel: d.kernel.clone(),
        landlock_abi: Some(d.landlock_abi),
        layers: d.report(),
        require_missing: d.missing_for_require(),
        require_layers: layers_line(&d, &layers, SandboxMode::Require, &[]),
        best_effort_layers: layers_line(&d, &layers, SandboxMode::BestEffort, &[]),
        apparmor: Some(super::apparmor::restriction().report()),
    }
}

/// `sandbox probe`.
pub fn probe(
    json: bool,
    without: Option<Layer>,
    junit: Option<&std::path::Path>,
) -> anyhow::Result<u8> {
    crate::sandbox::probe::run(json, without, junit)
}

pub fn probe_attempt(name: &str, args: &[String]) -> u8 {
    crate::sandbox::probe::attempts::run(name, args)
}

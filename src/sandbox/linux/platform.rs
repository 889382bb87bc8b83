//! The Linux sandbox as the rest of the server sees it: detection once,
//! then one `spawn` per run with the layers decided at start.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::{layers_line, Detected};
use crate::sandbox::policy::{self, Layers};
use crate::sandbox::promises;
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
    facts: promises::Facts,
    /// How the trial run at start ended.
    trial: Result<(), String>,
    /// Layers switched off because the trial run failed with them (best-effort).
    given_up: Vec<&'static str>,
}

/// Whether the database is the only entry of its folder (SQLite's
/// companions aside, which a draft may write anyway).
fn db_alone(db: &Path) -> bool {
    let (Some(folder), Some(name)) = (db.parent(), db.file_name()) else {
        return false;
    };
    let Ok(entries) = std::fs::read_dir(folder) else {
        return false;
    };
    let name = name.to_string_lossy().into_owned();
    let companions = ["-journal", "-wal", "-shm"].map(|c| format!("{name}{c}"));
    entries.flatten().all(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        n == name || companions.contains(&n)
    })
}

impl State {
    pub fn detect(opts: &SandboxOptions) -> Result<State, SandboxError> {
        let detected = Detected::probe();
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
        let facts = promises::Facts {
            root: detected.root,
            db_alone: opts.db.as_deref().is_some_and(db_alone),
        };
        let mut state = State {
            layers,
            detected,
            runtime,
            mode: opts.mode,
            without: Vec::new(),
            zygotes: super::Slot::default(),
            cgroups,
            facts,
            trial: Ok(()),
            given_up: Vec::new(),
        };
        // What status calls available has been applied: one run of a
        // program that does nothing, with every layer in force.
        state.trial = state.trial_run(opts);
        if let Err(failure) = &state.trial {
            if opts.mode == SandboxMode::Require {
                return Err(SandboxError::Unavailable(format!(
                    "a trial run with every layer this kernel offers failed: {failure} \
                     (use --sandbox best-effort to run with the layers that apply)"
                )));
            }
            state.give_up_failing_layers(opts);
        }
        if opts.mode == SandboxMode::Require {
            let unheld = promises::unheld_always(&state.promises());
            if !unheld.is_empty() {
                return Err(SandboxError::Unavailable(format!(
                    "this machine cannot hold what every run is promised: {} \
                     (use --sandbox best-effort to run with less)",
                    unheld.join("; ")
                )));
            }
        }
        Ok(state)
    }

    /// Take again the facts that depend on the grants (the database's folder).
    pub fn regrant(&mut self, opts: &SandboxOptions) {
        self.facts.db_alone = opts.db.as_deref().is_some_and(db_alone);
    }

    /// One run of `true` with the layers in force: `Err` says why it failed.
    fn trial_run(&self, opts: &SandboxOptions) -> Result<(), String> {
        let Some(program) = true_program() else {
            // Nothing harmless to run: the first real run is the trial.
            return Ok(());
        };
        let argv = [program.to_string_lossy().into_owned()];
        let cwd = opts.root.clone();
        let mut child = self
            .spawn(opts, RunKind::ReadOnly, &argv, &cwd, None)
            .map_err(|e| e.to_string())?;
        child.stdout = None;
        child.stderr = None;
        let status = child.wait().map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("the trial program ended with {status}"))
        }
    }

    /// In best-effort mode: switch off, one at a time, each layer whose
    /// absence lets the trial run pass, and remember what was given up.
    fn give_up_failing_layers(&mut self, opts: &SandboxOptions) {
        for layer in [
            Layer::Mountns,
            Layer::Landlock,
            Layer::Seccomp,
            Layer::Caps,
            Layer::Netns,
            Layer::Pidns,
        ] {
            let before = (self.layers, self.without.clone());
            self.without(layer);
            match self.trial_run(opts) {
                Ok(()) => {
                    self.given_up.push(layer.name());
                    self.trial = Ok(());
                    return;
                }
                Err(_) => {
                    (self.layers, self.without) = before;
                }
            }
        }
    }

    /// What each promise is held by here.
    pub fn promises(&self) -> Vec<promises::PromiseStatus> {
        promises::assess(&self.layers, self.facts)
    }

    /// Why `--allow-drafts` can't be honoured here (`None`: it can).
    pub fn drafts_refused(&self) -> Option<String> {
        let draft = self
            .promises()
            .into_iter()
            .find(|p| p.id == "draft_confined")?;
        (!draft.held()).then(|| {
            format!(
                "{} is held by nothing here: it needs {}",
                draft.text, draft.needs
            )
        })
    }

    /// The layers every run gets.
    pub fn layers(&self) -> Layers {
        self.layers
    }

    pub fn layers_line(&self) -> String {
        let mut line = layers_line(&self.detected, &self.layers, self.mode, &self.without);
        if !self.given_up.is_empty() {
            line.push_str(&format!(
                "; GIVEN UP (failed in a trial run): {}",
                self.given_up.join(", ")
            ));
        }
        line
    }

    /// The start-up line's promises part.
    pub fn promises_line(&self, drafts: bool) -> String {
        promises::line(&self.promises(), drafts)
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

/// `sandbox status`: what this kernel offers, and what a trial run with
/// every layer in force showed.
pub fn status() -> StatusReport {
    let d = Detected::probe();
    let layers = d.layers(&[]);
    let trial = trial_for_status();
    let (trial_line, promises) = match &trial {
        Ok(state) => (
            match &state.trial {
                Ok(()) => "passed: every layer listed as available was applied".to_string(),
                Err(e) => format!("FAILED: {e}"),
            },
            state.promises(),
        ),
        Err(e) => (
            format!("not run: {e}"),
            promises::assess(
                &layers,
                promises::Facts {
                    root: d.root,
                    db_alone: false,
                },
            ),
        ),
    };
    let mut require_missing = promises::unheld_always(&promises);
    if let Ok(state) = &trial {
        if let Err(e) = &state.trial {
            require_missing.push(format!("a trial run with every layer failed: {e}"));
        }
    }
    StatusReport {
        platform: "linux",
        kernel: d.kernel.clone(),
        landlock_abi: Some(d.landlock_abi),
        layers: d.report(),
        require_missing,
        require_layers: layers_line(&d, &layers, SandboxMode::Require, &[]),
        best_effort_layers: layers_line(&d, &layers, SandboxMode::BestEffort, &[]),
        trial: Some(trial_line),
        promises,
        apparmor: Some(super::apparmor::restriction().report()),
    }
}

/// The program the trial runs: one that does nothing and exits 0.
fn true_program() -> Option<PathBuf> {
    ["/usr/bin/true", "/bin/true"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// A sandbox like a server's, with a throwaway root and `true` as its
/// backend, in best-effort mode so that a failing trial is reported
/// rather than refused.
fn trial_for_status() -> Result<State, String> {
    let program = true_program().ok_or("no /usr/bin/true or /bin/true to run")?;
    let root = tempfile_root().map_err(|e| format!("a folder for the trial: {e}"))?;
    let opts = SandboxOptions {
        mode: SandboxMode::BestEffort,
        backend: program,
        root: root.0.clone(),
        ..SandboxOptions::default()
    };
    State::detect(&opts).map_err(|e| e.to_string())
}

/// A fresh empty folder, removed on drop.
struct TrialRoot(PathBuf);

impl Drop for TrialRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn tempfile_root() -> std::io::Result<TrialRoot> {
    let base = std::env::temp_dir();
    let dir = base.join(format!(
        "reachweaver-trial-{:016x}",
        crate::sandbox::tmpdir::random_u64()
    ));
    std::fs::create_dir(&dir)?;
    Ok(TrialRoot(dir))
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

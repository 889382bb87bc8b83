//! The server's side of the Linux sandbox, all of it: what is found and
//! built once per detection (the layers, the runtime paths, the cgroup
//! parent, the bound on a run's silent start), what is built once per
//! sandbox's grants (the zygote's configuration: both minimal roots and the
//! read-only policy its spares arm themselves with; a detection is shared
//! by sandboxes regranted from it), then one `spawn` per run, whose policy
//! is encoded once and attested from the bytes sent. `handle.rs` holds the
//! zygote the server talks to and the run it gets back. What the run then
//! does, in which order, is `sandbox/LAYERS.md`, "Order of the layers".

mod handle;
mod masks;

use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::cgroup;
use super::detect::{layers_line, Detected};
use super::wire::{request, usable, ZygoteConfig, STATUS_TIMEOUT};
use crate::sandbox::draft;
use crate::sandbox::policy::{self, Layers};
use crate::sandbox::promises;
use crate::sandbox::SandboxMode;
use crate::sandbox::{Layer, RunKind, SandboxError, SandboxOptions, SandboxedChild, StatusReport};

pub(crate) use handle::Run;

/// The longest the server waits for a stopped zygote before it gives up on
/// it (a silent one is given up after the sandbox's silence bound).
const STOPPED_LIMIT: Duration = Duration::from_secs(1);

pub struct State {
    detected: Detected,
    runtime: Vec<PathBuf>,
    layers: Layers,
    mode: SandboxMode,
    without: Vec<Layer>,
    /// How long a run's start may stay silent (the zygote's or helper's
    /// word on its layers) before the run fails, in milliseconds; set once
    /// the call timeout is known, on a detection already shared.
    silence_ms: AtomicU64,
    /// Forks the runs; started on the first one.
    zygote: handle::ZygoteCell,
    /// The zygote's configuration, built for the grants and layers of the
    /// last run: every run of a sandbox has the same, so it is built once
    /// per sandbox (and again when its grants or layers change).
    built: Mutex<Option<BuiltConfig>>,
    /// Where runs' cgroups are made, when the machine gives them.
    cgroups: Option<cgroup::Parent>,
    /// How the trial run at start ended.
    trial: Result<(), String>,
    /// Layers switched off because the trial run failed with them (best-effort).
    given_up: Vec<Layer>,
}

/// A zygote configuration and what it was built from.
struct BuiltConfig {
    opts: SandboxOptions,
    layers: Layers,
    config: Option<Arc<ZygoteConfig>>,
    /// The watch over the masked paths its spares hide.
    masks: Arc<masks::MaskWatch>,
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

/// Whether `--sandbox best-effort` may give `layer` up when the trial run
/// fails with it, and in which turn (lowest first). Only one layer is
/// given up, the first whose absence lets the trial pass, so the turn
/// decides what a run loses; a layer with no turn is never given up.
fn give_up_rank(layer: Layer) -> Option<u8> {
    match layer {
        Layer::Mountns => Some(0),
        Layer::Landlock => Some(1),
        Layer::Seccomp => Some(2),
        Layer::Caps => Some(3),
        Layer::Netns => Some(4),
        Layer::Pidns => Some(5),
        Layer::Userns
        | Layer::Ipcns
        | Layer::Utsns
        | Layer::PidMax
        | Layer::Cgroup
        | Layer::Rlimits
        | Layer::LandlockTcp
        | Layer::LandlockScope
        | Layer::SandboxExec => None,
    }
}

/// The zygote's configuration for these layers and a sandbox's grants
/// (both kinds of run's minimal roots, and the policy read-only spares arm
/// themselves with), or `None` where runs need the re-executed helper.
fn zygote_config(
    layers: &Layers,
    opts: &SandboxOptions,
    runtime: &[PathBuf],
) -> Option<ZygoteConfig> {
    usable(layers).then(|| {
        // Only with a minimal root is the temp folder the same for every
        // run; without one it is named per run on the host, and the run's
        // own layers wait for its request.
        let armed = layers.has(Layer::Mountns).then(|| {
            policy::build(&policy::BuildInput {
                opts,
                kind: RunKind::ReadOnly,
                runtime,
                env: &[],
                layers: *layers,
                tmpdir: Path::new(""),
                argv: &[],
                cwd: &opts.root,
                parent_pid: std::process::id(),
            })
        });
        // The armed policy carries the read-only minimal root already.
        let read_only = armed.as_ref().and_then(|p| p.mounts.clone());
        let draft = layers
            .has(Layer::Mountns)
            .then(|| policy::mount_plan(opts, runtime, RunKind::Draft));
        ZygoteConfig::new(layers, read_only, draft, armed)
    })
}

/// Why a trial run failed: the machine ran out (nothing to conclude of the
/// layers), or it failed.
enum Trial {
    Short(SandboxError),
    Failed(String),
}

impl Trial {
    fn of(e: SandboxError) -> Trial {
        match (&e, e.exhausted()) {
            (SandboxError::Io(io), Some(_)) => Trial::Short(SandboxError::ShortAtStart(
                format!("starting a trial run ({io})"),
                io.raw_os_error().unwrap_or(libc::EAGAIN),
            )),
            (SandboxError::Exhausted(m, errno), Some(_)) => Trial::Short(
                SandboxError::ShortAtStart(format!("starting a trial run ({m})"), *errno),
            ),
            _ => Trial::Failed(e.to_string()),
        }
    }
}

impl std::fmt::Display for Trial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trial::Short(e) => e.fmt(f),
            Trial::Failed(m) => f.write_str(m),
        }
    }
}

/// How long a run's start may stay silent: well under the call's own
/// timeout, so a call the sandbox can't start is answered within it.
fn silence_for(call_timeout: Option<Duration>) -> Duration {
    match call_timeout {
        Some(t) if !t.is_zero() => (t / 2).min(STATUS_TIMEOUT),
        _ => STATUS_TIMEOUT,
    }
}

impl State {
    pub fn detect(opts: &SandboxOptions) -> Result<State, SandboxError> {
        let mut state = State::detect_untried(opts)?;
        state.try_layers(opts)?;
        Ok(state)
    }

    /// [`State::detect`] without its trial run: the caller's first run
    /// stands for it, since a run that starts has had every layer applied
    /// (a layer that fails fails the run). [`State::tried`] says how that
    /// run went.
    pub fn detect_untried(opts: &SandboxOptions) -> Result<State, SandboxError> {
        let detected = Detected::probe();
        // A probe that could not fork, or ran out inside, says nothing of
        // the kernel: serving with the layers it seemed to lack would be a
        // weaker sandbox chosen by a passing shortage, in any mode.
        if let Some(e) = detected.shortage() {
            return Err(SandboxError::ShortAtStart(
                format!("checking which layers this kernel offers ({e})"),
                e.errno.unwrap_or(libc::EAGAIN),
            ));
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
        let cgroups = if layers.has(Layer::Cgroup) {
            match set_up_cgroups() {
                Ok(parent) => Some(parent),
                // Out of descriptors or memory says nothing of the cgroup.
                Err(e) if e.is_shortage() => {
                    return Err(SandboxError::ShortAtStart(
                        format!("setting up the runs' cgroups ({e})"),
                        e.errno.unwrap_or(libc::ENOMEM),
                    ))
                }
                // Found but not usable: fail closed where every available
                // layer is required, else run without and say so.
                Err(e) if opts.mode == SandboxMode::Require => {
                    return Err(SandboxError::Unavailable(format!(
                        "{e} (use --sandbox best-effort to run without per-run cgroups)"
                    )))
                }
                Err(_) => {
                    layers.remove(Layer::Cgroup);
                    None
                }
            }
        } else {
            None
        };
        let state = State {
            silence_ms: AtomicU64::new(STATUS_TIMEOUT.as_millis() as u64),
            layers,
            detected,
            runtime,
            mode: opts.mode,
            without: Vec::new(),
            zygote: handle::ZygoteCell::default(),
            built: Mutex::new(None),
            cgroups,
            trial: Ok(()),
            given_up: Vec::new(),
        };
        state.check_promises(opts)?;
        Ok(state)
    }

    /// After [`State::detect_untried`]: `ran` says whether the first run
    /// started. If it did, the layers are proven; if not, the trial run
    /// says whether they are to blame, with its consequences (refused in
    /// `require` mode, layers given up in `best-effort`). `Ok(true)` when
    /// the layers in force changed, so the run may be tried again.
    pub fn tried(&mut self, opts: &SandboxOptions, ran: bool) -> Result<bool, SandboxError> {
        if ran {
            self.trial = Ok(());
            return Ok(false);
        }
        self.try_layers(opts)
    }

    /// What status calls available has been applied: one run of a program
    /// that does nothing, with every layer in force. `Ok(true)` when layers
    /// were given up for its failure.
    fn try_layers(&mut self, opts: &SandboxOptions) -> Result<bool, SandboxError> {
        self.trial = match self.trial_run(opts) {
            Err(Trial::Short(e)) => return Err(e),
            r => r.map_err(|e| e.to_string()),
        };
        let mut changed = false;
        if let Err(failure) = &self.trial {
            if opts.mode == SandboxMode::Require {
                return Err(SandboxError::Unavailable(format!(
                    "a trial run with every layer this kernel offers failed: {failure} \
                     (use --sandbox best-effort to run with the layers that apply)"
                )));
            }
            // Only best-effort gets here, and it refuses no promise:
            // `require` checked them at detection, and its layers stay.
            changed = self.give_up_failing_layers(opts);
        }
        Ok(changed)
    }

    /// In `require` mode, what every run is promised must be held here.
    fn check_promises(&self, opts: &SandboxOptions) -> Result<(), SandboxError> {
        if opts.mode == SandboxMode::Require {
            let unheld = promises::unheld_always(&self.promises(opts));
            if !unheld.is_empty() {
                return Err(SandboxError::Unavailable(format!(
                    "this machine cannot hold what every run is promised: {} \
                     (use --sandbox best-effort to run with less)",
                    unheld.join("; ")
                )));
            }
        }
        Ok(())
    }

    /// One run of `true` with the layers in force: `Err` says why it failed.
    fn trial_run(&self, opts: &SandboxOptions) -> Result<(), Trial> {
        let Some(program) = true_program() else {
            // Nothing harmless to run: the first real run is the trial.
            return Ok(());
        };
        let argv = [program.to_string_lossy().into_owned()];
        let cwd = opts.root.clone();
        let mut child = self
            .spawn(opts, RunKind::ReadOnly, &argv, &cwd, None, None)
            .map_err(Trial::of)?;
        child.stdout = None;
        child.stderr = None;
        let status = child
            .wait()
            .map_err(|e| Trial::Failed(format!("waiting for the trial program: {e}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(Trial::Failed(format!(
                "the trial program ended with {status}"
            )))
        }
    }

    /// In best-effort mode: switch off, one at a time, each layer whose
    /// absence lets the trial run pass, and remember what was given up;
    /// whether one was.
    fn give_up_failing_layers(&mut self, opts: &SandboxOptions) -> bool {
        let mut order: Vec<(u8, Layer)> = Layer::ALL
            .iter()
            .filter_map(|&l| Some((give_up_rank(l)?, l)))
            .collect();
        order.sort_unstable_by_key(|(rank, _)| *rank);
        for (_, layer) in order {
            let before = (self.layers, self.without.clone());
            self.without(layer);
            match self.trial_run(opts) {
                Ok(()) => {
                    self.given_up.push(layer);
                    self.trial = Ok(());
                    return true;
                }
                // Whether the layer is to blame can't be told on a machine
                // that ran out; none is given up for it.
                Err(Trial::Short(_)) => {
                    (self.layers, self.without) = before;
                    return false;
                }
                Err(Trial::Failed(_)) => {
                    (self.layers, self.without) = before;
                }
            }
        }
        false
    }

    /// What each promise is held by here, for a sandbox with these grants:
    /// the database's folder is looked at when asked, so a sandbox
    /// regranted from this detection is judged by its own database.
    pub fn promises(&self, opts: &SandboxOptions) -> Vec<promises::PromiseStatus> {
        let facts = promises::Facts {
            root: self.detected.root,
            db_alone: opts.db.as_deref().is_some_and(db_alone),
        };
        promises::assess(&self.layers, facts)
    }

    /// Why `--allow-drafts` can't be honoured here (`None`: it can).
    pub fn drafts_refused(&self, opts: &SandboxOptions) -> Option<String> {
        let draft = self
            .promises(opts)
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
                self.given_up
                    .iter()
                    .map(|l| l.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        line
    }

    /// The start-up line's promises part.
    pub fn promises_line(&self, opts: &SandboxOptions, drafts: bool) -> String {
        promises::line(&self.promises(opts), drafts)
    }

    pub fn without(&mut self, layer: Layer) {
        if !self.without.contains(&layer) {
            self.without.push(layer);
        }
        self.layers = self.detected.layers(&self.without);
    }

    /// Bound the wait for a run's start by the call timeout.
    pub fn bound_waits(&self, call_timeout: Option<Duration>) {
        let ms = silence_for(call_timeout).as_millis().min(u64::MAX as u128) as u64;
        self.silence_ms.store(ms, Ordering::Relaxed);
    }

    /// The zygote's configuration for this sandbox's grants and these
    /// layers: the one built before when they are the same.
    fn config_for(
        &self,
        opts: &SandboxOptions,
        layers: &Layers,
    ) -> Option<(Arc<ZygoteConfig>, Arc<masks::MaskWatch>)> {
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = built.as_ref() {
            if p.layers == *layers && p.opts == *opts {
                return p.config.clone().map(|c| (c, Arc::clone(&p.masks)));
            }
        }
        let config = zygote_config(layers, opts, &self.runtime).map(Arc::new);
        // Only a zygote's spares build their minimal root ahead of a call.
        let masks = Arc::new(masks::MaskWatch::new(match &config {
            Some(_) if layers.has(Layer::Mountns) => &opts.masks,
            _ => &[],
        }));
        *built = Some(BuiltConfig {
            opts: opts.clone(),
            layers: *layers,
            config: config.clone(),
            masks: Arc::clone(&masks),
        });
        config.map(|c| (c, masks))
    }

    fn silence(&self) -> Duration {
        Duration::from_millis(self.silence_ms.load(Ordering::Relaxed))
    }

    /// Spawn one run. `stdin` replaces `/dev/null` only for the probe's
    /// terminal attempt. Runs with their own user and PID namespaces are
    /// forked by the sandbox's zygote; others by a re-executed helper.
    pub fn spawn(
        &self,
        opts: &SandboxOptions,
        kind: RunKind,
        argv: &[String],
        cwd: &Path,
        stdin: Option<OwnedFd>,
        exe: Option<BorrowedFd<'_>>,
    ) -> Result<SandboxedChild, SandboxError> {
        let layers = self.layers;
        // With a minimal root the run's temp folder is a tmpfs of its own
        // mount namespace: nothing on the host to make, name or clean up.
        if !layers.has(Layer::Mountns) {
            // Without a minimal root the paths are granted by name: refuse
            // a run once one of them names another file than at start.
            policy::check_pins(&opts.pins).map_err(SandboxError::LayerFailed)?;
        }
        let (tmpdir, guard) = if layers.has(Layer::Mountns) {
            // Replaced by the plan's own folder when the policy is built.
            (PathBuf::new(), crate::sandbox::TmpGuard(None))
        } else {
            let dir = crate::sandbox::make_private_tmpdir().map_err(SandboxError::Io)?;
            (dir.clone(), crate::sandbox::TmpGuard(Some(dir)))
        };
        let server_env: Vec<(String, String)> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let policy = policy::build(&policy::BuildInput {
            opts,
            kind,
            runtime: &self.runtime,
            env: &server_env,
            layers,
            tmpdir: &tmpdir,
            argv,
            cwd,
            parent_pid: std::process::id(),
        });
        let helper = opts
            .helper
            .as_deref()
            .unwrap_or(Path::new("/proc/self/exe"));
        // The draft's folder as it was, to remove afterwards what the run
        // added: held open from now on, and checked against the same pin
        // the mount layer checks (the plan is pure, so without a mount
        // namespace it is built here for its pins alone).
        let sweep = match kind {
            RunKind::Draft => policy
                .mounts
                .as_ref()
                .and_then(|m| m.draft.clone())
                .or_else(|| policy::mount_plan(opts, &self.runtime, kind).draft)
                .map(|d| draft::DraftSweep::before(&d))
                .transpose()?,
            _ => None,
        };
        // Encoded once: the bytes the run gets are the bytes attested.
        let sent = request::encode_policy(&policy)?;
        let attestation =
            crate::sandbox::layers::Attestation::new(layers.set_of(), sent.as_bytes());
        // The run's cgroup lives as long as the run; a layer in force that
        // cannot be set up fails the run.
        let mut run_cgroup = match (layers.has(Layer::Cgroup), self.cgroups.as_ref()) {
            (false, _) => None,
            (true, Some(parent)) => Some(parent.run().map_err(|e| match e.errno {
                // The server's own descriptors ran out, not the layer.
                Some(n) if e.is_shortage() => {
                    SandboxError::Io(std::io::Error::from_raw_os_error(n))
                }
                _ => SandboxError::LayerFailed(e.detail),
            })?),
            (true, None) => {
                return Err(SandboxError::LayerFailed(
                    "cgroup: the layer is on but no cgroup was set up".into(),
                ))
            }
        };
        let silence = self.silence();
        let config = self.config_for(opts, &layers);
        let mut child = match config {
            Some((config, masks)) => {
                let procs = run_cgroup.as_mut().and_then(cgroup::RunCgroup::take_procs);
                let waits = handle::Waits {
                    silence,
                    stopped: STOPPED_LIMIT.min(silence),
                };
                // Looked at before the zygote is asked for: a change while
                // one starts makes the next call replace it again.
                let masks_at = masks.state();
                handle::spawn(
                    &self.zygote,
                    helper,
                    &config,
                    masks_at,
                    waits,
                    &sent,
                    guard,
                    stdin,
                    procs,
                    exe,
                )
            }
            None => {
                let procs = run_cgroup.as_mut().and_then(cgroup::RunCgroup::take_procs);
                handle::spawn_reexec(helper, &sent, guard, stdin, exe, silence, procs)
            }
        }?;
        child.attestation = Some(attestation);
        if let (Some(run), Some(parent)) = (run_cgroup.as_ref(), self.cgroups.as_ref()) {
            child.memory_bound = Some((parent.memory_max(), run.memory_events()));
        }
        if sweep.is_some() || run_cgroup.is_some() {
            child.after = Some(Box::new(move || {
                if let Some(s) = sweep {
                    s.after();
                }
                drop(run_cgroup);
            }) as Box<dyn FnOnce() + Send>);
        }
        Ok(child)
    }
}

fn set_up_cgroups() -> Result<cgroup::Parent, cgroup::StepError> {
    let token = format!(
        "{}.{:x}",
        std::process::id(),
        crate::sandbox::tmpdir::random_u64()
    );
    let plan = cgroup::assess(&cgroup::facts(), &token)
        .map_err(|e| cgroup::StepError::plain(super::step_error::LayerStep::CgroupCreate, e))?;
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
            // `sandbox status` serves no database.
            state.promises(&SandboxOptions::default()),
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

impl crate::sandbox::Platform for State {
    fn detect(opts: &SandboxOptions) -> Result<State, SandboxError> {
        State::detect(opts)
    }

    fn detect_untried(opts: &SandboxOptions) -> Result<State, SandboxError> {
        State::detect_untried(opts)
    }

    fn tried(&mut self, opts: &SandboxOptions, ran: bool) -> Result<bool, SandboxError> {
        State::tried(self, opts, ran)
    }

    fn layers_line(&self) -> String {
        State::layers_line(self)
    }

    fn promises_line(&self, opts: &SandboxOptions, drafts: bool) -> String {
        State::promises_line(self, opts, drafts)
    }

    fn drafts_refused(&self, opts: &SandboxOptions) -> Option<String> {
        State::drafts_refused(self, opts)
    }

    fn bound_waits(&self, call_timeout: Option<Duration>) {
        State::bound_waits(self, call_timeout)
    }

    fn spawn(
        &self,
        opts: &SandboxOptions,
        kind: RunKind,
        argv: &[String],
        cwd: &Path,
        stdin: Option<OwnedFd>,
        exe: Option<BorrowedFd<'_>>,
    ) -> Result<SandboxedChild, SandboxError> {
        State::spawn(self, opts, kind, argv, cwd, stdin, exe)
    }

    fn helper_main(arg: &str) -> anyhow::Result<u8> {
        super::helper_main(arg)
    }

    fn status() -> StatusReport {
        status()
    }

    fn probe(json: bool, without: Option<Layer>, junit: Option<&Path>) -> anyhow::Result<u8> {
        crate::sandbox::probe::run(json, without, junit)
    }

    fn probe_attempt(name: &str, args: &[String]) -> u8 {
        crate::sandbox::probe::attempts::run(name, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(errno: i32) -> SandboxError {
        SandboxError::Io(std::io::Error::from_raw_os_error(errno))
    }

    #[test]
    fn a_trial_that_ran_out_is_a_shortage_and_any_other_failure_is_the_layers() {
        for errno in [libc::EAGAIN, libc::ENOMEM, libc::EMFILE, libc::ENFILE] {
            let Trial::Short(e) = Trial::of(io(errno)) else {
                panic!("errno {errno} read as a layer's failure");
            };
            assert!(
                matches!(e, SandboxError::ShortAtStart(_, n) if n == errno),
                "{e}"
            );
            assert!(e.to_string().contains("while starting a trial run"), "{e}");
        }
        let Trial::Short(e) = Trial::of(SandboxError::Exhausted("fork".into(), libc::EAGAIN))
        else {
            panic!("a fork refused inside the run read as a layer's failure");
        };
        assert_eq!(
            e.to_string(),
            "the machine ran out of processes or threads while starting a trial run (fork); \
             no layer was given up for it: start again once there are some to spare"
        );
        for not_short in [
            io(libc::EPERM),
            io(libc::ENOENT),
            SandboxError::Exhausted("fork".into(), libc::EPERM),
            SandboxError::LayerFailed("landlock: EINVAL".into()),
            SandboxError::Exec(std::io::Error::from_raw_os_error(libc::ENOMEM)),
        ] {
            let said = not_short.to_string();
            assert!(matches!(Trial::of(not_short), Trial::Failed(m) if m == said));
        }
    }

    #[test]
    fn a_runs_start_may_stay_silent_half_the_call_timeout_and_at_most_20_s() {
        let s = |secs: u64| silence_for(Some(Duration::from_secs(secs)));
        assert_eq!(silence_for(None), STATUS_TIMEOUT);
        assert_eq!(s(0), STATUS_TIMEOUT);
        assert_eq!(s(1), Duration::from_millis(500));
        assert_eq!(s(2), Duration::from_secs(1));
        assert_eq!(s(39), Duration::from_millis(19_500));
        assert_eq!(s(40), Duration::from_secs(20));
        assert_eq!(s(41), Duration::from_secs(20));
        assert_eq!(STATUS_TIMEOUT, Duration::from_secs(20));
    }
}

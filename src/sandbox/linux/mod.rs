//! The Linux sandbox, laid out by process role and by layer.
//!
//! Process roles:
//! - `handle.rs`: the server's side. It starts the sandbox's zygote once,
//!   hands it each run (policy + six descriptors), and holds the run it
//!   gets back (pid, pidfd, run channel); or re-executes itself as the
//!   helper where runs cannot have their own user and PID namespaces.
//! - `zygote.rs`: the long-lived, single-threaded helper in one empty user
//!   and network namespace; it keeps the next run's init forked ahead.
//! - `init.rs`: the run's init, pid 1 of the run's own PID namespace: the
//!   spare's setup (id maps, `pid_max`, the minimal root, namespace
//!   counters), then the run's own layers, the backend, the reaping.
//! - `reexec.rs`: the re-executed helper of the fallback shape.
//!
//! Wire formats (`wire.rs`): the status pipe, the request, the run channel.
//! What the kernel offers (`detect.rs`) is found once at start.
//! `apparmor.rs` reads Ubuntu's AppArmor restriction on user namespaces for
//! `sandbox status` and builds the profile `sandbox apparmor-profile` prints.
//!
//! Layers, one file each, in the order a run applies them: `namespaces.rs`,
//! `mounts.rs`, `cgroup.rs` (entered by the init first, where available), `rlimits.rs`,
//! `landlock.rs`, `caps.rs`, `seccomp.rs`. Their names come from the one
//! list in `sandbox/layers.rs`.
//!
//! ```text
//! server ──spawn once──▶ zygote (`__sandbox-helper @zygote`)
//!   │  control socket      │ close fds, setsid, parent-death signal, user + empty network namespace
//!   │  (policy + 6 fds)    └─clone(user, PID, IPC, UTS, mount)─▶ spare init (pid 1), forked ahead
//!   │                            │ id maps, host name, pid_max, memfd_noexec, minimal root, no nested namespaces
//!   │                            │ … request forwarded by the zygote …
//!   │                            │ cgroup (where available), rlimits, Landlock, capabilities, seccomp
//!   │                            └─fork─▶ execve(backend)
//!   └── run channel (one per run): 'P' pid + pidfd, 'S' backend status, 'Z' init status
//! ```
//!
//! Init waits for the backend, kills and reaps whatever it left in the
//! namespace, and reports the backend's status. Killing init makes the
//! kernel kill everything left in the namespace, and its mount namespace
//! (with the run's `/tmp`) goes with it. The status pipe (close-on-exec)
//! stays silent when the backend was executed and carries a message when
//! anything before that failed: the server then reports a failed layer and
//! never sees an unconfined run.
//!
//! Caveat for the re-exec shape: the parent-death signal follows the
//! *thread* that spawned the helper, so `spawn` must be called from a
//! thread that outlives the run. The zygote is spawned from a thread of its
//! own for that reason.

pub mod apparmor;
pub mod caps;
pub mod cgroup;
mod detect;
use super::draft;
mod handle;
mod init;
pub mod landlock;
pub mod mounts;
pub mod namespaces;
pub mod platform;
mod reexec;
pub mod rlimits;
pub mod seccomp;
mod wire;
pub mod zygote;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::policy::{self, Layers};
use super::{RunKind, SandboxError, SandboxOptions, SandboxedChild};

pub use detect::{kernel_at_least, layers_line, Detected, PID_MAX};
pub(crate) use handle::{usable, Config, Run, Slot};
pub use reexec::helper_main;
pub use wire::{POLICY_ENV, POLICY_FROM_ENV};

// ---------------------------------------------------------------------------
// Parent side.

/// Spawn one run. `stdin` replaces `/dev/null` only for the probe's
/// terminal attempt. Runs with their own user and PID namespaces are forked
/// by the sandbox's zygote; others by a re-executed helper.
#[allow(clippy::too_many_arguments)]
pub fn spawn(
    opts: &SandboxOptions,
    runtime: &[PathBuf],
    layers: Layers,
    zygotes: Option<&Slot>,
    cgroups: Option<&cgroup::Parent>,
    kind: RunKind,
    argv: &[String],
    cwd: &Path,
    stdin: Option<OwnedFd>,
) -> Result<SandboxedChild, SandboxError> {
    // With a minimal root the run's temp folder is a tmpfs of its own mount
    // namespace: nothing on the host to make, name or clean up.
    if !layers.mountns {
        // Without a minimal root the paths are granted by name: refuse a
        // run once one of them names another file than at start.
        policy::check_pins(&opts.pins).map_err(SandboxError::LayerFailed)?;
    }
    let (tmpdir, guard) = if layers.mountns {
        // Replaced by the plan's own folder when the policy is built.
        (PathBuf::new(), super::TmpGuard(None))
    } else {
        let dir = super::make_private_tmpdir().map_err(SandboxError::Io)?;
        (dir.clone(), super::TmpGuard(Some(dir)))
    };
    let server_env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let policy = policy::build(&policy::BuildInput {
        opts,
        kind,
        runtime,
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
    // The draft's folder as it was, to remove afterwards what the run added.
    let sweep = match (kind, &opts.db) {
        (RunKind::Draft, Some(db)) => match db.parent() {
            Some(folder) => Some(
                draft::DraftSweep::before(&policy::DraftDb {
                    folder: folder.to_path_buf(),
                    db: db.clone(),
                    pin: None,
                    folder_pin: None,
                })
                .map_err(SandboxError::Io)?,
            ),
            None => None,
        },
        _ => None,
    };
    let attestation = super::layers::Attestation::new(
        &layers.names(),
        &serde_json::to_vec(&policy).unwrap_or_default(),
    );
    // The run's cgroup lives as long as the run; a layer in force that
    // cannot be set up fails the run.
    let mut run_cgroup = match (layers.cgroup, cgroups) {
        (false, _) => None,
        (true, Some(parent)) => Some(parent.run().map_err(|e| match e.errno {
            // The server's own descriptors ran out, not the layer.
            Some(n) if super::shortage(n).is_some() => {
                SandboxError::Io(std::io::Error::from_raw_os_error(n))
            }
            _ => SandboxError::LayerFailed(e.message),
        })?),
        (true, None) => {
            return Err(SandboxError::LayerFailed(
                "cgroup: the layer is on but no cgroup was set up".into(),
            ))
        }
    };
    let mut child = match zygotes {
        Some(slot) if usable(&layers) => {
            let plan = |k| layers.mountns.then(|| policy::mount_plan(opts, runtime, k));
            let config = Config::new(&layers, plan(RunKind::ReadOnly), plan(RunKind::Draft));
            let procs = run_cgroup.as_mut().and_then(cgroup::RunCgroup::take_procs);
            handle::spawn(slot, helper, &config, &policy, guard, stdin, procs)
        }
        _ if layers.cgroup => {
            return Err(SandboxError::LayerFailed(
                "cgroup: runs without their own PID namespace cannot enter a cgroup".into(),
            ))
        }
        _ => handle::spawn_reexec(helper, &policy, guard, stdin),
    }?;
    child.attestation = Some(attestation);
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

//! The Linux sandbox, laid out by process role and by layer.
//!
//! Process roles:
//! - `server/`: the server's side, all of it. What is found once per
//!   detection (`server/mod.rs`: layers, runtime paths, the cgroup parent,
//!   the trial run), then per run: the run's policy, minimal root and the
//!   zygote's configuration from the sandbox's grants; it starts the
//!   sandbox's zygote once, hands it each run (policy + six descriptors),
//!   and holds the run it gets back (pid, pidfd, run channel;
//!   `server/handle.rs`); or re-executes itself as the helper where runs
//!   cannot have their own user and PID namespaces.
//! - `zygote.rs`: the long-lived, single-threaded helper in one empty user
//!   and network namespace; it keeps the next run's init forked ahead.
//! - `init.rs`: the run's init, pid 1 of the run's own PID namespace: the
//!   spare's setup (id maps, `pid_max`, the minimal root, namespace
//!   counters), then the run's own layers, the backend, the reaping.
//! - `reexec.rs`: the re-executed helper of the fallback shape.
//!
//! The contract between these processes (`wire/`): the zygote's
//! configuration, the ready handshake, the request, the status pipe with
//! its typed failure, the run channel.
//! What the kernel offers (`detect.rs`, with `kernel.rs`'s small probes) is
//! found once at start.
//! `apparmor.rs` reads Ubuntu's AppArmor restriction on user namespaces for
//! `sandbox status` and builds the profile `sandbox apparmor-profile` prints.
//!
//! Layers, one file each: `namespaces.rs`, `mounts.rs`, `cgroup.rs`,
//! `rlimits.rs`, `landlock.rs`, `caps.rs`, `seccomp.rs`. Their names come
//! from the one list in `sandbox/layers.rs`. A spare init takes the
//! namespaces and the minimal root when it is forked; a read-only run's
//! spare also arms rlimits, Landlock, caps and seccomp then, before any
//! request exists (every read-only run of a sandbox has the same grants),
//! and enters the run's cgroup once its request arrives; a `draft` run's
//! init enters the cgroup and applies those four only after its request.
//!
//! ```text
//! server ──spawn once──▶ zygote (`__sandbox-helper @zygote`)
//!   │  control socket      │ close fds, setsid, parent-death signal, user + empty network namespace
//!   │  (policy + 6 fds)    └─clone(user, PID, IPC, UTS, mount)─▶ spare init (pid 1), forked ahead
//!   │                            │ id maps, host name, pid_max, memfd_noexec, minimal root, no nested namespaces
//!   │                            │ read-only: rlimits, Landlock, capabilities, seccomp (armed ahead)
//!   │                            │ … request forwarded by the zygote …
//!   │                            │ cgroup (where available); draft: rlimits, Landlock, capabilities, seccomp
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
mod init;
mod kernel;
pub mod landlock;
pub mod mounts;
pub mod namespaces;
mod reexec;
pub mod rlimits;
pub mod seccomp;
pub(crate) mod server;
pub mod step_error;
mod wire;
pub mod zygote;

pub use detect::PID_MAX;
pub use reexec::helper_main;
pub(crate) use server::Run;

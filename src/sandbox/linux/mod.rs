//! The Linux sandbox, laid out by process role and by layer.
//!
//! Process roles:
//! - `server/`: the server's side, all of it. What is found once per
//!   detection (`server/mod.rs`: layers, runtime paths, the cgroup parent,
//!   the trial run), then per run: the run's policy, minimal root and the
//!   zygote's configuration from the sandbox's grants; it starts the
//!   sandbox's zygote once, hands it each run (its encoded policy and `RunFds`),
//!   and holds the run it gets back (pid, pidfd, run channel;
//!   `server/handle.rs`); or re-executes itself as the helper where runs
//!   cannot have their own user and PID namespaces.
//! - `zygote.rs`: the long-lived, single-threaded helper in one empty user
//!   and network namespace; it keeps the next run's init forked ahead.
//! - `init.rs`: the run's init, pid 1 of the run's own PID namespace: its
//!   steps of the confinement, the backend, the reaping.
//! - `reexec.rs`: the re-executed helper of the fallback shape.
//!
//! The contract between these processes (`wire/`): the zygote's
//! configuration, the ready handshake, the request (the policy, encoded
//! once, and `RunFds`), the status pipe with its typed
//! failure, the run channel.
//! What the kernel offers (`detect.rs`, with `kernel.rs`'s small probes) is
//! found once at start.
//! `apparmor.rs` reads Ubuntu's AppArmor restriction on user namespaces for
//! `sandbox status` and builds the profile `sandbox apparmor-profile` prints.
//!
//! Layers, one file each: `namespaces.rs`, `mounts.rs`, `cgroup.rs`,
//! `rlimits.rs`, `landlock.rs`, `caps.rs`, `seccomp.rs`. Their names come
//! from the one list in `sandbox/layers.rs`; `steps.rs` takes them in the
//! one order every run has, which `sandbox/LAYERS.md` ("Order of the
//! layers") tells at length, with what each process does and when.
//!
//! Caveat for the re-exec shape: the parent-death signal follows the
//! *thread* that spawned the helper, so `spawn` must be called from a
//! thread that outlives the run. The zygote is spawned from a thread of its
//! own for that reason.

pub mod apparmor;
pub mod caps;
pub mod cgroup;
pub mod cgroup_restore;
mod detect;
mod init;
mod kernel;
pub mod landlock;
pub mod mounts;
pub mod namespaces;
mod reexec;
pub mod refused;
pub mod rlimits;
pub mod seccomp;
pub(crate) mod server;
pub mod step_error;
mod steps;
pub(crate) mod supervise;
mod wire;
pub mod zygote;

pub use detect::PID_MAX;
pub use reexec::helper_main;
pub(crate) use server::Run;

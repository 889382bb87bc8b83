//! `sandbox probe`: try every escape we know of, inside the same sandbox a
//! tool call gets, and say what the kernel answered.
//!
//! Each attempt runs twice: first outside the sandbox as a positive control
//! (it must work there, or the line says the attempt proves nothing), then
//! inside it, as the server binary's hidden `__probe-attempt` command under
//! the read-only policy. The probe doesn't take the attempt's word for it:
//! it runs its own listeners on loopback (TCP on 127.0.0.1 and ::1, UDP, a
//! unix socket outside the root, an abstract unix socket) and counts what
//! reaches them, fingerprints the files before and after, watches the
//! terminal's input queue and looks for marker processes that outlived
//! their run.
//!
//! Every attempt names the layers that hold it on this kernel ("holders").
//! With `--without LAYER` the probe predicts which attempts must now get
//! through (those held by that layer alone) and the layer matrix test
//! checks the prediction against what happened, so the table in
//! `sandbox/LAYERS.md` is tested, not just written.
//!
//! One machinery for Linux and macOS: what the probe reasons about
//! (specs, controls, outcomes; Linux's truths, holders and verdicts) is in
//! `model.rs`, starting one attempt and reading its report line in
//! `runner.rs`, the loopback listeners in `listeners.rs`, and the table
//! that names a platform's attempts in `table.rs`. What differs is each
//! platform's attempts, fixture, suite and truths: macOS's are in
//! `sandbox/macos/probe*`. On Linux, `suite.rs` runs the suite and writes
//! the report, the suite is in `specs.rs`, the host's side of it (folders,
//! fingerprints, terminal) in `fixture.rs`, and what the probe checks from
//! the host itself in `host_checks.rs`. `attempts/` is the code that runs
//! as `__probe-attempt`, inside the sandbox and outside as the control.

pub(super) mod listeners;
pub(super) mod report_line;
// Holders, predictions and verdicts are Linux's: on macOS they are unused.
#[cfg_attr(target_os = "macos", allow(dead_code))]
pub(super) mod model;
pub(super) mod runner;
pub(super) mod table;

#[cfg(target_os = "linux")]
pub(super) mod attempts;
#[cfg(target_os = "linux")]
mod fixture;
#[cfg(target_os = "linux")]
mod host_checks;
#[cfg(target_os = "linux")]
mod junit;
#[cfg(target_os = "linux")]
mod specs;
#[cfg(target_os = "linux")]
mod suite;

/// A spec of the Linux suite.
#[cfg(target_os = "linux")]
type Spec = model::Spec<attempts::Attempt, model::Truth>;

#[cfg(target_os = "linux")]
pub(crate) use self::host_checks::serve_one_call;
#[cfg(target_os = "linux")]
pub(super) use self::suite::run;

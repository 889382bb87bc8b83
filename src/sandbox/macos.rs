//! macOS: the run is started by `/usr/bin/sandbox-exec` with a profile made
//! of the static deny-by-default base in `sandbox/reachweaver.sb` and one
//! generated rule per kind of grant. The generated rules refer to `-D`
//! parameters only, so no path the owner chose is ever spliced into profile
//! text (a path with a quote or parenthesis can't change the profile).
//!
//! What the profile needs to know about how the backend starts (the
//! interpreter behind a `#!` line, every symlink on the way to it, the
//! libraries a Homebrew Python loads) is found once at start by [`discover()`]
//! and kept as plain data ([`ExecChain`]); [`build_profile`] is a pure
//! function of that and the run's policy. So this module is compiled
//! everywhere and its golden tests, which describe real macOS layouts as
//! data, run in every CI job; only `spawn` and `probe` (the parts that start
//! processes) are macOS-only, and the probe's report (`probe_report`) and
//! truth checks (`probe_truth`) are tested everywhere too.
//!
//! The parts, by job: `paths` (the spellings the sandbox matches),
//! `discover` (the exec chain, found at start) with `layouts` (the Homebrew
//! and Python installation layouts it follows), `profile` (the profile and
//! argv, pure), `ended` (a run the profile stopped at start), `fds` (the
//! inherited-descriptor decisions) and `unified_log` (a run's denials read
//! back from the log: its parser is tested everywhere, `log` runs on macOS).

mod discover;
mod ended;
mod fds;
mod layouts;
mod paths;
#[cfg(target_os = "macos")]
pub mod probe;
#[cfg(any(test, target_os = "macos"))]
mod probe_report;
#[cfg(any(test, target_os = "macos"))]
mod probe_truth;
mod profile;
#[cfg(target_os = "macos")]
pub mod spawn;
#[cfg(any(test, target_os = "macos"))]
pub(crate) mod unified_log;

use std::path::PathBuf;

// Used by the macOS `backend_folder` and the tests only.
#[cfg(any(test, target_os = "macos"))]
pub(crate) use discover::tree_for;
pub use discover::{discover, shim_manager, user_site_for, DiscoverError};
pub use ended::{died_at_start, sandbox_exec_refusal, Ended};
pub use fds::{fd_sweep_limit, listed_fd_count};
pub use layouts::{opt_kegs_named, HOMEBREW_PYTHON_KEGS};
pub use paths::{canonical, resolve_recording, stored_spelling};
pub use profile::{build_argv, build_profile, db_files, RunProfile, RunTag};

/// The static base profile.
pub const BASE_PROFILE: &str = include_str!("../../sandbox/reachweaver.sb");

/// sandbox-exec, by absolute path so `PATH` can't substitute another.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// How the backend starts, found at start: plain data, so the profile
/// builder is pure and its golden files can describe any Mac's layout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecChain {
    /// Trees that are read, mapped and executed: an interpreter's
    /// installation (a framework version folder, a uv Python), a virtual
    /// environment, the backend's install prefix when it is outside the home.
    pub exec_trees: Vec<PathBuf>,
    /// Single executables: the backend itself and each resolved interpreter.
    pub exec_files: Vec<PathBuf>,
    /// Every symlink crossed on the way, in its literal spelling
    /// (`/opt/homebrew/bin/python3`, a venv's `bin/python`, `opt/sqlite`).
    pub hops: Vec<PathBuf>,
    /// Library folders that are read and mapped, not executed: the `lib`
    /// of each Homebrew keg a Homebrew Python's modules link against, and a
    /// site-packages folder its installation links to.
    pub lib_trees: Vec<PathBuf>,
    /// For `#!/usr/bin/env NAME`: the interpreter found on `PATH` at start
    /// (literal, so a venv stays a venv) and the line's arguments, run in
    /// front of the script instead of letting `env` search again inside the
    /// sandbox (where it could reach Apple's `/usr/bin/python3` stub).
    pub launcher: Vec<String>,
}

fn push_unique(list: &mut Vec<PathBuf>, p: PathBuf) {
    if !list.contains(&p) {
        list.push(p);
    }
}

#[cfg(test)]
mod tests;

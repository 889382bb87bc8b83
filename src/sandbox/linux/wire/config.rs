//! Server → zygote, at its start: how the zygote is run (its helper
//! argument, the environment variable its configuration travels in) and
//! the configuration itself, built once per sandbox by the server.

use crate::sandbox::Layer;
use serde::{Deserialize, Serialize};

use super::request::{to_json, EncodeError};
use super::status::{Failure, RunStep};
use crate::sandbox::policy::{Layers, MountPlan, Policy};
use crate::sandbox::RunKind;

/// The helper argument that starts a zygote instead of one run.
pub const ZYGOTE_ARG: &str = "@zygote";
/// The environment variable that carries the policy (or the zygote's
/// configuration) to the helper: argv would show it to every user through
/// `/proc/*/cmdline`.
pub const POLICY_ENV: &str = "REACHWEAVER_SANDBOX_POLICY";
/// The helper argument meaning "read the policy from `POLICY_ENV`".
pub const POLICY_FROM_ENV: &str = "@env";
/// The same, and execute the backend from the descriptor at `EXE_FD`
/// (the one the server hashed for `--pin`) rather than its path.
pub const POLICY_FROM_ENV_EXE: &str = "@env+exe";

/// Whether runs with these layers can be forked by a zygote: each run needs
/// its own user and PID namespaces (the PID namespace is what kills a run's
/// whole tree); without them the re-exec helper serves.
pub(crate) fn usable(layers: &Layers) -> bool {
    layers.has(Layer::Userns) && layers.has(Layer::Pidns)
}

/// What the zygote is started with: the layers of every run it forks, the
/// minimal root of each kind of run, which its spares build ahead, and the
/// policy a read-only spare arms itself with before its request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ZygoteConfig {
    pub(crate) parent_pid: u32,
    pub(crate) layers: Layers,
    pub(crate) read_only: Option<MountPlan>,
    pub(crate) draft: Option<MountPlan>,
    /// A read-only run's policy without its argv and environment: every
    /// read-only run of the sandbox has its confinement (see
    /// [`Policy::confinement`]), so a spare applies it ahead and runs only
    /// a request that asks for exactly that. `None` where the run's temp
    /// folder is on the host, named per run (no mount namespace).
    pub(crate) armed: Option<Policy>,
}

impl ZygoteConfig {
    pub(crate) fn new(
        layers: &Layers,
        read_only: Option<MountPlan>,
        draft: Option<MountPlan>,
        armed: Option<Policy>,
    ) -> ZygoteConfig {
        ZygoteConfig {
            parent_pid: std::process::id(),
            layers: *layers,
            read_only,
            draft,
            armed,
        }
    }

    /// The policy a spare of this kind arms itself with before its request.
    pub(crate) fn armed(&self, kind: RunKind) -> Option<&Policy> {
        match kind {
            RunKind::ReadOnly => self.armed.as_ref(),
            RunKind::Draft => None,
        }
    }

    pub(crate) fn plan(&self, kind: RunKind) -> Option<&MountPlan> {
        match kind {
            RunKind::ReadOnly => self.read_only.as_ref(),
            RunKind::Draft => self.draft.as_ref(),
        }
    }
}

/// The configuration as the zygote's environment variable carries it.
pub(crate) fn encode(config: &ZygoteConfig) -> Result<std::ffi::OsString, EncodeError> {
    use std::os::unix::ffi::OsStringExt;
    to_json("zygote config", config).map(std::ffi::OsString::from_vec)
}

/// The configuration a zygote was started with.
pub(crate) fn decode(text: &[u8]) -> Result<ZygoteConfig, Failure> {
    serde_json::from_slice(text)
        .map_err(|e| Failure::layer(RunStep::Request, format!("zygote config: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zygotes_serve_only_runs_with_user_and_pid_namespaces() {
        let all = Layers::of(&[Layer::Userns, Layer::Pidns]);
        assert!(usable(&all));
        assert!(!usable(&all.without(Layer::Pidns)));
        assert!(!usable(&all.without(Layer::Userns)));
    }

    #[test]
    fn the_config_round_trips_and_names_each_kinds_plan() {
        let c = ZygoteConfig::new(&Layers::default(), None, None, None);
        let back = decode(encode(&c).unwrap().as_encoded_bytes()).unwrap();
        assert_eq!(back, c);
        assert!(decode(b"").is_err());
        assert!(c.plan(RunKind::ReadOnly).is_none() && c.plan(RunKind::Draft).is_none());
    }

    #[test]
    fn only_read_only_spares_are_armed_ahead() {
        let layers = Layers::default();
        let plan = |root: &str| MountPlan {
            binds: vec![],
            devices: vec![root.into()],
            tmp: crate::sandbox::policy::TmpFs {
                mount: "/tmp".into(),
                dir: "/tmp/run".into(),
                size_bytes: 1,
                inodes: 1,
            },
            draft: None,
            proc: true,
            masks: vec![],
        };
        let armed = Policy {
            program: "/bin/b".into(),
            argv: vec![],
            env: vec![],
            cwd: "/".into(),
            read_exec: vec![],
            read: vec![],
            read_write: vec!["/tmp/run".into()],
            tmpdir: "/tmp/run".into(),
            write_files: vec![],
            mounts: Some(plan("/dev/null")),
            kind: RunKind::ReadOnly,
            layers,
            rlimits: Default::default(),
            parent_pid: 1,
        };
        let c = ZygoteConfig::new(
            &layers,
            Some(plan("/dev/null")),
            Some(plan("/dev/zero")),
            Some(armed.clone()),
        );
        assert_eq!(c.armed(RunKind::ReadOnly), Some(&armed));
        assert_eq!(c.armed(RunKind::Draft), None);
        let back = decode(encode(&c).unwrap().as_encoded_bytes()).unwrap();
        assert_eq!(back, c);
    }
}

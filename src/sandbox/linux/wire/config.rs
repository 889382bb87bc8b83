//! Server → zygote, at its start: how the zygote is run (its helper
//! argument, the environment variable its configuration travels in) and
//! the configuration itself, built once per sandbox by the server.

use serde::{Deserialize, Serialize};

use crate::sandbox::policy::{Layers, MountPlan};
use crate::sandbox::RunKind;

/// The helper argument that starts a zygote instead of one run.
pub const ZYGOTE_ARG: &str = "@zygote";
/// The environment variable that carries the policy (or the zygote's
/// configuration) to the helper: argv would show it to every user through
/// `/proc/*/cmdline`.
pub const POLICY_ENV: &str = "REACHWEAVER_SANDBOX_POLICY";
/// The helper argument meaning "read the policy from `POLICY_ENV`".
pub const POLICY_FROM_ENV: &str = "@env";

/// Whether runs with these layers can be forked by a zygote: each run needs
/// its own user and PID namespaces (the PID namespace is what kills a run's
/// whole tree); without them the re-exec helper serves.
pub(crate) fn usable(layers: &Layers) -> bool {
    layers.userns && layers.pidns
}

/// What the zygote is started with: the layers of every run it forks, and
/// the minimal root of each kind of run, which its spares build ahead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Config {
    pub(crate) parent_pid: u32,
    pub(crate) layers: Layers,
    pub(crate) read_only: Option<MountPlan>,
    pub(crate) draft: Option<MountPlan>,
}

impl Config {
    pub(crate) fn new(
        layers: &Layers,
        read_only: Option<MountPlan>,
        draft: Option<MountPlan>,
    ) -> Config {
        Config {
            parent_pid: std::process::id(),
            layers: *layers,
            read_only,
            draft,
        }
    }

    pub(crate) fn plan(&self, kind: RunKind) -> Option<&MountPlan> {
        match kind {
            RunKind::ReadOnly => self.read_only.as_ref(),
            RunKind::Draft => self.draft.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zygotes_serve_only_runs_with_user_and_pid_namespaces() {
        let all = Layers {
            userns: true,
            pidns: true,
            ..Layers::default()
        };
        assert!(usable(&all));
        assert!(!usable(&Layers {
            pidns: false,
            ..all
        }));
        assert!(!usable(&Layers {
            userns: false,
            ..all
        }));
    }

    #[test]
    fn the_config_round_trips_and_names_each_kinds_plan() {
        let c = Config::new(&Layers::default(), None, None);
        let back: Config = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert!(c.plan(RunKind::ReadOnly).is_none() && c.plan(RunKind::Draft).is_none());
    }
}

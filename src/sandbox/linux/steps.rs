//! The one order in which a run is confined, whichever way it is started;
//! `sandbox/LAYERS.md` ("Order of the layers") tells it at length. The
//! zygote's spares, `draft` spares and the re-executed helper take the same
//! steps in the same order: what differs between them ([`RunShape`]) is only
//! which process takes a step and when ([`Phase`]), and which steps one
//! call already made.

use crate::sandbox::Layer;

use super::wire::{last_error, Failure, RunStep};
use super::{caps, landlock, mounts, namespaces, rlimits, seccomp};
use crate::sandbox::policy::{Layers, MountPlan, Policy};

/// One step of the confinement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// The run's namespaces: a spare's come with the zygote's clone; the
    /// re-exec helper's one `unshare` also maps the ids and names the UTS
    /// namespace.
    Namespaces,
    IdMaps,
    NotDumpable,
    UtsNames,
    /// As the PID namespace's init: its `pid_max`, executable memfds refused.
    PidNamespace,
    /// The minimal root, with the nested-namespace counters set to 0 after it.
    MinimalRoot,
    Rlimits,
    Landlock,
    Caps,
    NoNewPrivs,
    Seccomp,
}

/// Every run's steps, in order.
pub(super) const STEPS: [Step; 11] = [
    Step::Namespaces,
    Step::IdMaps,
    Step::NotDumpable,
    Step::UtsNames,
    Step::PidNamespace,
    Step::MinimalRoot,
    Step::Rlimits,
    Step::Landlock,
    Step::Caps,
    Step::NoNewPrivs,
    Step::Seccomp,
];

/// When, in a run's life, a step is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// By the process that starts the run, as it starts it.
    Start,
    /// By the run's init before its call is known.
    Setup,
    /// The run's own layers: by a spare before its request when it is
    /// armed ahead, else once the request is there; by the re-exec
    /// helper's init (or, without a PID namespace, its child) after it
    /// changed to the working folder.
    Arm,
}

/// How a run is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunShape {
    /// Forked by the zygote; `armed_ahead` for a read-only run, whose
    /// layers don't depend on the call.
    Spare { armed_ahead: bool },
    /// By a re-executed helper; with a PID namespace its init is the
    /// namespace's init and builds the root, without one nothing does.
    Reexec { pid_ns: bool },
}

impl RunShape {
    /// When `shape` takes `step`; `None` when it doesn't (made by another
    /// step's call, or without the namespace it needs).
    pub(super) fn phase(self, step: Step) -> Option<Phase> {
        use Step::*;
        match (step, self) {
            (Namespaces, _) => Some(Phase::Start),
            (IdMaps | UtsNames, RunShape::Reexec { .. }) => None,
            (NotDumpable, RunShape::Reexec { .. }) => Some(Phase::Start),
            (IdMaps | NotDumpable | UtsNames, RunShape::Spare { .. }) => Some(Phase::Setup),
            (PidNamespace | MinimalRoot, RunShape::Reexec { pid_ns: false }) => None,
            (PidNamespace | MinimalRoot, _) => Some(Phase::Setup),
            (Rlimits | Landlock | Caps | NoNewPrivs | Seccomp, _) => Some(Phase::Arm),
        }
    }

    /// Whether the run's own layers are in force before its request.
    pub(super) fn arms_before_request(self) -> bool {
        matches!(self, RunShape::Spare { armed_ahead: true })
    }
}

/// `shape`'s steps with their phases, in the one order.
pub(super) fn steps(shape: RunShape) -> impl Iterator<Item = (Step, Phase)> {
    STEPS
        .into_iter()
        .filter_map(move |s| shape.phase(s).map(|p| (s, p)))
}

/// What the steps are taken with.
pub(super) struct Confinement<'a> {
    pub(super) shape: RunShape,
    pub(super) layers: &'a Layers,
    /// The ids mapped to themselves in the run's user namespace.
    pub(super) ids: (u32, u32),
    pub(super) plan: Option<&'a MountPlan>,
    /// The policy of the run's own layers; only [`Phase::Arm`] reads it.
    pub(super) policy: Option<&'a Policy>,
    pub(super) program: Option<&'a seccompiler::BpfProgram>,
    /// The watched filter and its seal, for a run whose server supervises
    /// it (`supervise.rs`); the plain `program` when the kernel can't.
    pub(super) watched: Option<&'a seccomp::Watched>,
    pub(super) last_cap: u32,
}

impl Confinement<'_> {
    /// Take every step of `phase`, in order.
    pub(super) fn take(&self, phase: Phase) -> Result<(), Failure> {
        for (step, _) in steps(self.shape).filter(|&(_, p)| p == phase) {
            self.step(step)?;
        }
        Ok(())
    }

    fn step(&self, step: Step) -> Result<(), Failure> {
        let layers = self.layers;
        let (uid, gid) = self.ids;
        match step {
            // A spare's namespaces are made by the zygote's clone.
            Step::Namespaces => match self.shape {
                RunShape::Spare { .. } => Ok(()),
                RunShape::Reexec { .. } => namespaces::unshare_and_map(layers, uid, gid)
                    .map_err(Failure::of(Layer::Userns)),
            },
            Step::IdMaps => {
                // A non-dumpable process can't write its own id maps, so
                // the zygote's setting is lifted for exactly that; the next
                // step restores it.
                // SAFETY: integer-only prctl.
                if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) } != 0 {
                    return Err(last_error("dumpable for the id maps"));
                }
                namespaces::map_to_themselves(uid, gid).map_err(Failure::of(Layer::Userns))
            }
            Step::NotDumpable => {
                // SAFETY: integer-only prctl.
                if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
                    return Err(last_error("not dumpable"));
                }
                Ok(())
            }
            Step::UtsNames if layers.has(Layer::Utsns) => {
                namespaces::name_uts().map_err(Failure::of(Layer::Utsns))
            }
            Step::PidNamespace => init_namespace(layers),
            Step::MinimalRoot => minimal_root_and_limits(layers, self.plan),
            Step::Rlimits if layers.has(Layer::Rlimits) => {
                rlimits::apply(&self.policy()?.rlimits).map_err(Failure::of(Layer::Rlimits))
            }
            Step::Landlock => match layers.landlock_abi() {
                Some(abi) => landlock::apply(
                    self.policy()?,
                    abi,
                    layers.has(Layer::LandlockTcp),
                    layers.has(Layer::LandlockScope),
                )
                .map_err(Failure::of(Layer::Landlock)),
                None => Ok(()),
            },
            Step::Caps if layers.has(Layer::Caps) => {
                caps::apply(self.last_cap, layers.caps_bounding).map_err(Failure::of(Layer::Caps))
            }
            Step::NoNewPrivs => caps::set_no_new_privs().map_err(Failure::of(Layer::Caps)),
            Step::Seccomp => match (self.program, self.watched) {
                (Some(program), Some(watched)) => super::supervise::install(watched, program),
                (Some(program), None) => {
                    seccomp::apply(program).map_err(Failure::of(Layer::Seccomp))
                }
                (None, _) => Ok(()),
            },
            Step::UtsNames | Step::Rlimits | Step::Caps => Ok(()),
        }
    }

    fn policy(&self) -> Result<&Policy, Failure> {
        self.policy
            .ok_or_else(|| Failure::layer(RunStep::Request, "no policy to arm the run with"))
    }
}

/// As a PID namespace's init: its `pid_max`, and executable memfds refused.
fn init_namespace(layers: &Layers) -> Result<(), Failure> {
    // SAFETY: getpid can't fail.
    if unsafe { libc::getpid() } != 1 {
        return Err(Failure::layer(
            Layer::Pidns,
            "pidns: not the namespace's init",
        ));
    }
    if let Some(max) = layers.pid_max() {
        namespaces::set_pid_max(max)
            .map_err(|e| Failure::step(Layer::PidMax, e.within("pid_max")))?;
    }
    namespaces::set_memfd_noexec()
        .map_err(|e| Failure::step(RunStep::Process, e.within("memfd_noexec")))?;
    Ok(())
}

/// Build the minimal root (when asked for) between opening the namespace
/// counters and setting them to 0: building it clones mount trees, which a
/// zero counter refuses, and it hides `/proc/sys`.
fn minimal_root_and_limits(layers: &Layers, plan: Option<&MountPlan>) -> Result<(), Failure> {
    let counters = if layers.ns_limits {
        Some(
            namespaces::open_ns_limits()
                .map_err(|e| Failure::step(Layer::Userns, e.within("nested namespaces")))?,
        )
    } else {
        None
    };
    match (plan, layers.has(Layer::Mountns)) {
        (Some(plan), true) => mounts::apply(plan).map_err(Failure::of(Layer::Mountns))?,
        (None, false) => {}
        _ => {
            return Err(Failure::layer(
                Layer::Mountns,
                "mountns: the mount plan and the layers disagree",
            ))
        }
    }
    if let Some(c) = counters {
        namespaces::write_ns_limits(c)
            .map_err(|e| Failure::step(Layer::Userns, e.within("nested namespaces")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(shape: RunShape) -> Vec<(Step, Phase)> {
        steps(shape).collect()
    }

    #[test]
    fn every_shape_takes_its_steps_in_the_one_order_and_phases_never_go_back() {
        use Phase::*;
        use Step::*;
        let arm = [
            (Rlimits, Arm),
            (Landlock, Arm),
            (Caps, Arm),
            (NoNewPrivs, Arm),
            (Seccomp, Arm),
        ];
        let spare = [
            vec![
                (Namespaces, Start),
                (IdMaps, Setup),
                (NotDumpable, Setup),
                (UtsNames, Setup),
                (PidNamespace, Setup),
                (MinimalRoot, Setup),
            ],
            arm.to_vec(),
        ]
        .concat();
        for armed_ahead in [true, false] {
            assert_eq!(listed(RunShape::Spare { armed_ahead }), spare);
        }
        let reexec = [
            vec![
                (Namespaces, Start),
                (NotDumpable, Start),
                (PidNamespace, Setup),
                (MinimalRoot, Setup),
            ],
            arm.to_vec(),
        ]
        .concat();
        assert_eq!(listed(RunShape::Reexec { pid_ns: true }), reexec);
        let flat = [
            vec![(Namespaces, Start), (NotDumpable, Start)],
            arm.to_vec(),
        ]
        .concat();
        assert_eq!(listed(RunShape::Reexec { pid_ns: false }), flat);
        let rank = |p: Phase| [Start, Setup, Arm].iter().position(|&q| q == p);
        for shape in [
            RunShape::Spare { armed_ahead: true },
            RunShape::Reexec { pid_ns: true },
            RunShape::Reexec { pid_ns: false },
        ] {
            let ranks: Vec<_> = steps(shape).map(|(_, p)| rank(p)).collect();
            assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{shape:?}");
        }
    }

    #[test]
    fn only_a_read_only_spare_arms_before_its_request() {
        assert!(RunShape::Spare { armed_ahead: true }.arms_before_request());
        assert!(!RunShape::Spare { armed_ahead: false }.arms_before_request());
        assert!(!RunShape::Reexec { pid_ns: true }.arms_before_request());
    }
}

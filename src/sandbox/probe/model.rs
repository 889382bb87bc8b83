//! What the probe reasons about: the layers that hold an attempt, how an
//! attempt's truth is established, one run's outcome, and the verdict a
//! report line carries. Pure data: nothing here runs anything.
//!
//! One model for Linux and macOS: a spec holds its platform's `Attempt`
//! (the variant of that platform's attempt table, never the word) and its
//! platform's truth (Linux's is [`Truth`], macOS's in
//! `macos/probe_truth.rs`). macOS judges and reports its lines itself
//! (`macos/probe_report.rs`); the holders, predictions and verdicts are
//! Linux's.

use std::path::PathBuf;

use serde::Serialize;

pub(in crate::sandbox) use super::listeners::Which;
use super::report_line::LEGACY_TIOCSTI_OFF;
use crate::sandbox::policy::Layers;
use crate::sandbox::{Layer, RunKind};

/// A layer, a part of one, or a mechanism that stops an attempt.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::sandbox) enum Stopper {
    /// A whole layer, in force when the run applies it.
    Layer(Layer),
    /// Landlock's pathname unix-socket right (ABI 9).
    LandlockUnix,
    /// Landlock's truncate right (ABI 3).
    LandlockTruncate,
    /// Seccomp's refusal of `truncate(2)` by path, made where Landlock has
    /// no truncate right.
    SeccompTruncate,
    /// The namespace counters set to 0.
    NsLimits,
    /// The run's PID namespace with `vm.memfd_noexec` = 2, which only a
    /// server running as root can set (the file belongs to the host's root).
    MemfdNoexec,
    /// RLIMIT_NPROC (the kernel exempts real root).
    Nproc,
    /// What the helper does whatever the layers: the built environment,
    /// no_new_privs, the kill path.
    Helper,
    /// Without a PID namespace, the re-executed helper is the run's child
    /// subreaper and kills every process the run leaves behind.
    Subreaper,
    /// Capabilities dropped, for a run that is not uid 0: `setuid(0)`
    /// needs CAP_SETUID. A root server's run without a user namespace is
    /// uid 0 already (with no capability), which this can't change.
    CapsUnprivileged,
    /// The run's TMPDIR is its own tmpfs, capped in size and inodes, gone
    /// with the run's mount namespace.
    Tmpfs,
    /// The run's TMPDIR is mounted noexec: nothing there can be executed
    /// or mapped executable, not even through the dynamic loader.
    Noexec,
}

impl Stopper {
    /// The layer this holder is (part of); `None` for what the server does
    /// whatever the layers.
    pub(super) fn layer(self) -> Option<Layer> {
        Some(match self {
            Stopper::Layer(l) => l,
            Stopper::LandlockUnix | Stopper::LandlockTruncate => Layer::Landlock,
            Stopper::SeccompTruncate => Layer::Seccomp,
            Stopper::NsLimits => Layer::Userns,
            Stopper::MemfdNoexec => Layer::Pidns,
            Stopper::Nproc => Layer::Rlimits,
            Stopper::CapsUnprivileged => Layer::Caps,
            Stopper::Tmpfs | Stopper::Noexec => Layer::Mountns,
            Stopper::Helper | Stopper::Subreaper => return None,
        })
    }

    /// As the JSON report spells it: a whole layer by its name.
    pub(super) fn name(self) -> &'static str {
        match self {
            Stopper::Layer(l) => l.name(),
            Stopper::LandlockUnix => "landlock_unix",
            Stopper::LandlockTruncate => "landlock_truncate",
            Stopper::SeccompTruncate => "seccomp_truncate",
            Stopper::NsLimits => "ns_limits",
            Stopper::MemfdNoexec => "memfd_noexec",
            Stopper::Nproc => "nproc",
            Stopper::Helper => "helper",
            Stopper::Subreaper => "subreaper",
            Stopper::CapsUnprivileged => "caps_unprivileged",
            Stopper::Tmpfs => "tmpfs",
            Stopper::Noexec => "noexec",
        }
    }

    /// Whether it holds in a run with these layers, run by this uid.
    pub(super) fn active(self, l: &Layers, uid: u32) -> bool {
        // A layer, or a part of one, holds only with that layer on.
        if self.layer().is_some_and(|layer| !l.has(layer)) {
            return false;
        }
        match self {
            Stopper::Layer(_) | Stopper::Tmpfs | Stopper::Noexec | Stopper::Helper => true,
            // Parts of a layer that are there only with more of it.
            Stopper::LandlockUnix => l.landlock_abi().is_some_and(|a| a >= 9),
            Stopper::LandlockTruncate => l.landlock_truncates(),
            Stopper::SeccompTruncate => !l.landlock_truncates(),
            Stopper::NsLimits => l.ns_limits,
            Stopper::Nproc | Stopper::CapsUnprivileged => uid != 0,
            Stopper::MemfdNoexec => uid == 0,
            Stopper::Subreaper => !l.has(Layer::Pidns),
        }
    }
}

impl Serialize for Stopper {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A whole layer reads as the layer itself (`Seccomp`, not
/// `Layer(Seccomp)`), as the JUnit report's "held by" writes it.
impl std::fmt::Debug for Stopper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopper::Layer(l) => write!(f, "{l:?}"),
            Stopper::LandlockUnix => f.write_str("LandlockUnix"),
            Stopper::LandlockTruncate => f.write_str("LandlockTruncate"),
            Stopper::SeccompTruncate => f.write_str("SeccompTruncate"),
            Stopper::NsLimits => f.write_str("NsLimits"),
            Stopper::MemfdNoexec => f.write_str("MemfdNoexec"),
            Stopper::Nproc => f.write_str("Nproc"),
            Stopper::Helper => f.write_str("Helper"),
            Stopper::Subreaper => f.write_str("Subreaper"),
            Stopper::CapsUnprivileged => f.write_str("CapsUnprivileged"),
            Stopper::Tmpfs => f.write_str("Tmpfs"),
            Stopper::Noexec => f.write_str("Noexec"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::sandbox) enum Control {
    /// A plain child of the probe.
    Host,
    /// A child in a bare user+net+mount namespace with every capability.
    Userns,
    /// A plain child that works only in a session this machine may not
    /// have (a GUI login, a launchd user domain), said here: where it fails,
    /// the line is "not applicable here", not a control that failed.
    #[cfg(any(test, target_os = "macos"))]
    Session(&'static str),
}

/// How the truth of a Linux attempt is established.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::sandbox) enum Truth {
    /// Only the attempt's own report.
    #[default]
    Report,
    Listener(Which),
    /// The fixture files must be unchanged.
    Files,
    /// The fixture files must be unchanged once the run is over, whatever
    /// the attempt saw while it ran (a draft run's new file in the
    /// database's folder is removed by the server when the run ends).
    FilesAfter,
    /// The terminal's input queue must stay empty.
    Tty,
    Flood,
    Daemon,
    OutliveParent,
    /// A first call leaves traces (`leave-traces`); the attempt is the next
    /// call, which must see none of them.
    NextCall,
    /// The file the attempt created must not have an execute bit.
    ExecBits(PathBuf),
    /// A folder chain left in TMPDIR must neither outlive the run nor take
    /// the server (a stand-in process) down while it is cleaned up.
    DeepTmp,
    /// The reported TMPDIR must not contain the server's pid.
    NoServerPid(u32),
    /// The listed processes must not include the server (the run's own
    /// `proc` shows the run's processes only).
    ProcHidesServer(u32),
    /// The attempt watches a host folder while the probe touches a file
    /// there; seeing it is getting through.
    Watch(Trigger),
    /// The mount ids the attempt lists must not include the host's.
    HostMounts,
    /// The attempt stats a host path: seeing that same file (device and
    /// inode as the probe sees it on the host) is getting through; a file
    /// of the run's own at the same path (its TMPDIR's tmpfs where the
    /// host's home is under /tmp) is not.
    HostFile(PathBuf),
    /// Once the run is over this file must hold no more disk than the
    /// run's file-size limit. The control reserves in a scratch file of its
    /// own instead (its first argument replaced).
    Reserved(PathBuf),
    /// A sanity check of the run's report of refused attempts: the
    /// attempt's network calls must be refused and named there.
    Denied(Reported),
}

/// What a run's report of refused attempts must say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::sandbox) enum Reported {
    /// A connect to this destination (`address:port`).
    Destination(String),
    /// A DNS query for this name.
    Lookup(String),
    /// This many connects to distinct destinations: the first
    /// [`crate::sandbox::denied::MAX_ENTRIES`] kept, the rest counted.
    Flood(u64),
    /// A system call outside the allow-list, named with the errno the
    /// plain filter gives it, outside the compatibility class.
    Syscall { call: String, answer: String },
}

impl Reported {
    /// The inside run's outcome, judged by its report: `Ok` when the report
    /// says what it must. Where no run can be watched (`watchable` false:
    /// without the seccomp layer, or a run not forked by the zygote into
    /// its network namespace), the report must say so rather than come
    /// back empty. Pure.
    pub(in crate::sandbox) fn judge(
        &self,
        report: &crate::sandbox::denied::Denied,
        watchable: bool,
    ) -> Outcome {
        use crate::sandbox::denied::{Watch, MAX_ENTRIES};
        if !watchable {
            return match report.watch {
                Watch::Unavailable => {
                    Outcome::Ok("unavailable, as nobody can watch a run here".into())
                }
                _ => Outcome::Failed(format!(
                    "a report where nobody can watch: {}",
                    report.to_json()
                )),
            };
        }
        if report.watch != Watch::Watched {
            return Outcome::Failed(format!("the run was not watched: {}", report.to_json()));
        }
        let named = |found: Option<&crate::sandbox::denied::Attempt>, what: &str| match found {
            Some(a) => Outcome::Ok(format!(
                "{what} reported, held by {}, answered {}",
                a.layer, a.answer
            )),
            None => Outcome::Failed(format!("{what} not in the report: {}", report.to_json())),
        };
        match self {
            Reported::Destination(d) => {
                named(report.entries.iter().find(|a| a.destination() == *d), d)
            }
            Reported::Lookup(name) => named(
                report
                    .entries
                    .iter()
                    .find(|a| a.dns.as_deref() == Some(name.as_str())),
                name,
            ),
            Reported::Syscall { call, answer } => {
                match report
                    .syscalls
                    .entries
                    .iter()
                    .find(|r| r.call == call.as_str())
                {
                    Some(r) if r.answer == answer.as_str() => {
                        Outcome::Ok(format!("{call} reported ×{}, answered {answer}", r.count))
                    }
                    Some(r) => Outcome::Failed(format!(
                        "{call} reported answered {}, not {answer}",
                        r.answer
                    )),
                    None => {
                        Outcome::Failed(format!("{call} not in the report: {}", report.to_json()))
                    }
                }
            }
            Reported::Flood(n) => {
                let kept = report.entries.len() as u64;
                let bound = (MAX_ENTRIES as u64).min(*n);
                if report.total == *n && kept == bound && report.omitted == n - bound {
                    Outcome::Ok(format!("{n} attempts: {kept} kept, {} counted", n - bound))
                } else {
                    Outcome::Failed(format!(
                        "{n} attempts, yet total {}, kept {kept}, omitted {}",
                        report.total, report.omitted
                    ))
                }
            }
        }
    }
}

/// What the probe does on the host while a watching attempt runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::sandbox) enum Trigger {
    /// Create and remove this file.
    Create(PathBuf),
    /// Open this file for reading.
    Open(PathBuf),
}

impl Trigger {
    pub(super) fn fire(&self) {
        match self {
            Trigger::Create(p) => {
                let _ = std::fs::write(p, b"probe");
                let _ = std::fs::remove_file(p);
            }
            Trigger::Open(p) => {
                let _ = std::fs::File::open(p);
            }
        }
    }
}

/// One attempt of a platform's suite. `A` is the platform's `Attempt`,
/// `T` how the platform establishes whether the run got through.
pub(in crate::sandbox) struct Spec<A, T> {
    pub(in crate::sandbox) name: String,
    /// What the attempt tries, in words (the macOS report shows it).
    #[cfg(any(test, target_os = "macos"))]
    pub(in crate::sandbox) what: &'static str,
    pub(in crate::sandbox) attempt: A,
    pub(in crate::sandbox) args: Vec<String>,
    pub(in crate::sandbox) control: Control,
    /// What the inside run must report (a prefix); for allowed attempts,
    /// "ok".
    pub(in crate::sandbox) expect: String,
    pub(in crate::sandbox) holders: Vec<Stopper>,
    pub(in crate::sandbox) truth: T,
    /// A sanity check that must work inside (else the probe proves nothing).
    pub(in crate::sandbox) allowed: bool,
    /// The run kind the attempt runs under.
    pub(in crate::sandbox) kind: RunKind,
}

pub(in crate::sandbox) fn spec<A, T: Default>(
    name: impl Into<String>,
    attempt: A,
    args: Vec<String>,
    expect: &str,
    holders: &[Stopper],
) -> Spec<A, T> {
    Spec {
        name: name.into(),
        #[cfg(any(test, target_os = "macos"))]
        what: "",
        attempt,
        args,
        control: Control::Host,
        expect: expect.to_string(),
        holders: holders.to_vec(),
        truth: T::default(),
        allowed: false,
        kind: RunKind::ReadOnly,
    }
}

impl<A, T> Spec<A, T> {
    pub(in crate::sandbox) fn truth(mut self, t: T) -> Spec<A, T> {
        self.truth = t;
        self
    }
    pub(in crate::sandbox) fn in_userns(mut self) -> Spec<A, T> {
        self.control = Control::Userns;
        self
    }
    pub(in crate::sandbox) fn draft(mut self) -> Spec<A, T> {
        self.kind = RunKind::Draft;
        self
    }
    pub(in crate::sandbox) fn allowed(mut self) -> Spec<A, T> {
        self.allowed = true;
        self.expect = "ok".into();
        self
    }
    #[cfg(any(test, target_os = "macos"))]
    pub(in crate::sandbox) fn what(mut self, what: &'static str) -> Spec<A, T> {
        self.what = what;
        self
    }
    /// The control needs a session this machine may lack (see
    /// [`Control::Session`]).
    #[cfg(any(test, target_os = "macos"))]
    pub(in crate::sandbox) fn needs_session(mut self, why: &'static str) -> Spec<A, T> {
        self.control = Control::Session(why);
        self
    }
    /// Why the control may not work here, if it needs a session.
    #[cfg(any(test, target_os = "macos"))]
    pub(in crate::sandbox) fn session(&self) -> Option<&'static str> {
        match self.control {
            Control::Session(why) => Some(why),
            _ => None,
        }
    }
}

/// What one run of an attempt produced.
#[derive(Debug, Clone)]
pub(in crate::sandbox) enum Outcome {
    Ok(String),
    Failed(String),
    /// The sandbox itself refused to start the run: nothing was tried.
    NotRun(String),
}

impl Outcome {
    pub(in crate::sandbox) fn text(&self) -> &str {
        match self {
            Outcome::Ok(s) | Outcome::Failed(s) | Outcome::NotRun(s) => s,
        }
    }
}

/// What the holders table predicts for an attempt with the layers in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Prediction {
    /// A sanity check: it must work inside.
    Allowed,
    /// A holder is in force.
    Blocked,
    /// No holder is in force: nothing stops it.
    Escaped,
}

impl Prediction {
    pub(super) fn of<A, T>(sp: &Spec<A, T>, layers: &Layers, uid: u32) -> Prediction {
        if sp.allowed {
            Prediction::Allowed
        } else if sp.holders.iter().any(|h| h.active(layers, uid)) {
            Prediction::Blocked
        } else {
            Prediction::Escaped
        }
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Prediction::Allowed => "allowed",
            Prediction::Blocked => "blocked",
            Prediction::Escaped => "escaped",
        }
    }
}

impl std::fmt::Display for Prediction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// What a report line says about one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(super) enum Verdict {
    /// Stopped inside, and the control shows it works outside.
    #[serde(rename = "blocked")]
    Blocked,
    /// It did inside what it tried.
    #[serde(rename = "ESCAPED")]
    Escaped,
    /// Stopped inside, but it failed outside too: it proves nothing.
    #[serde(rename = "unproven")]
    Unproven,
    /// The sandbox refused to start the run: nothing was tried.
    #[serde(rename = "FAILED")]
    Failed,
    /// A sanity check that worked inside.
    #[serde(rename = "allowed")]
    Allowed,
    /// A sanity check that failed inside.
    #[serde(rename = "BROKEN")]
    Broken,
    /// No layer this machine gives holds it: the server does not make this
    /// promise here.
    #[serde(rename = "not promised")]
    NotPromised,
    /// Outside the sandbox the kernel itself refused it (it lacks the
    /// system call, or can't do it on this file system): there is nothing
    /// here to escape through. The reason is [`not_applicable`]'s.
    #[serde(rename = "not applicable")]
    NotApplicable,
}

/// Why an attempt can't apply on this kernel, from what its control got
/// outside the sandbox: `None` when the control says nothing of the kind.
/// The control runs with no layer at all, so ENOSYS there is the kernel's
/// own (a system call it lacks), EOPNOTSUPP a file system or kernel
/// without the operation (`user.*` xattrs on tmpfs before 6.6, for one),
/// and ENOTTY a file system without the ioctl.
/// Pure.
pub(super) fn not_applicable(control: &Outcome) -> Option<&'static str> {
    match control {
        Outcome::Failed(s) if word(s) == "ENOSYS" => {
            Some("this kernel lacks the system call (outside it got ENOSYS)")
        }
        Outcome::Failed(s) if word(s) == "EOPNOTSUPP" => {
            Some("this kernel or file system can't do it (outside it got EOPNOTSUPP)")
        }
        // An ioctl the file system doesn't implement (ext4's own on tmpfs).
        Outcome::Failed(s) if word(s) == "ENOTTY" => {
            Some("this file system has no such ioctl (outside it got ENOTTY)")
        }
        // TIOCSTI on a kernel built without it for unprivileged callers.
        Outcome::Failed(s) if word(s) == "EIO" && s.contains(LEGACY_TIOCSTI_OFF) => Some(
            "this kernel refuses TIOCSTI to every unprivileged caller \
             (outside it got EIO: dev.tty.legacy_tiocsti is 0)",
        ),
        _ => None,
    }
}

/// The first word of a report: the errno an attempt got, before any
/// detail (`ENOSYS (open)`, `EOPNOTSUPP after 3 MiB`).
fn word(s: &str) -> &str {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or("")
}

impl Verdict {
    /// The verdict on an attempt from its two runs. Pure.
    pub(super) fn of(
        inside: &Outcome,
        allowed: bool,
        control: &Outcome,
        predicted: Prediction,
        switched_off: bool,
    ) -> Verdict {
        let control_ok = matches!(control, Outcome::Ok(_));
        match (inside, allowed, control_ok) {
            (Outcome::NotRun(_), _, _) => Verdict::Failed,
            // No layer this machine gives holds it: the server does not make
            // this promise here (its start-up line and `sandbox status` say
            // so), whatever the attempt happened to get. With a layer switched
            // off for the matrix, the prediction is checked instead.
            (_, false, _) if predicted == Prediction::Escaped && !switched_off => {
                Verdict::NotPromised
            }
            (Outcome::Ok(_), true, _) => Verdict::Allowed,
            (Outcome::Failed(_), true, _) => Verdict::Broken,
            (Outcome::Ok(_), false, _) => Verdict::Escaped,
            (Outcome::Failed(_), false, true) => Verdict::Blocked,
            (Outcome::Failed(_), false, false) if not_applicable(control).is_some() => {
                Verdict::NotApplicable
            }
            (Outcome::Failed(_), false, false) => Verdict::Unproven,
        }
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Verdict::Blocked => "blocked",
            Verdict::Escaped => "ESCAPED",
            Verdict::Unproven => "unproven",
            Verdict::Failed => "FAILED",
            Verdict::Allowed => "allowed",
            Verdict::Broken => "BROKEN",
            Verdict::NotPromised => "not promised",
            Verdict::NotApplicable => "not applicable",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Line {
    pub name: String,
    pub verdict: Verdict,
    /// What the inside run got: the errno, the signal, or the observation.
    pub inside: String,
    pub expected: String,
    pub expected_matches: bool,
    pub control: String,
    pub control_ok: bool,
    /// Why it can't apply here, for a line that is not applicable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_applicable: Option<&'static str>,
    pub holders: Vec<Stopper>,
    /// What the holders table predicts with the layers in force.
    pub predicted: Prediction,
}

#[derive(Debug, Serialize)]
pub(super) struct Report {
    pub layers: String,
    pub without: Option<&'static str>,
    pub uid: u32,
    pub landlock_abi: Option<i32>,
    pub attempts: Vec<Line>,
    pub escaped: usize,
    pub broken: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect_to(port: u16) -> crate::sandbox::denied::Attempt {
        crate::sandbox::denied::Attempt {
            call: "connect",
            family: Some("inet".into()),
            address: Some("192.0.2.1".into()),
            port: Some(port),
            layer: "netns",
            answer: "ENETUNREACH",
            ..Default::default()
        }
    }

    fn watched(attempts: impl IntoIterator<Item = crate::sandbox::denied::Attempt>) -> Denied {
        let mut d = Denied::new(Watch::Watched);
        for a in attempts {
            d.record(a);
        }
        d
    }

    use crate::sandbox::denied::{Denied, Watch, MAX_ENTRIES};

    fn ok(o: &Outcome) -> bool {
        matches!(o, Outcome::Ok(_))
    }

    #[test]
    fn the_report_must_name_the_destination_and_the_name_asked_for() {
        let to = Reported::Destination("192.0.2.1:443".into());
        assert!(ok(&to.judge(&watched([connect_to(443)]), true)));
        assert!(!ok(&to.judge(&watched([connect_to(444)]), true)));
        assert!(!ok(&to.judge(&watched([]), true)));
        let lookup = Reported::Lookup("x.invalid".into());
        let mut asked = connect_to(53);
        asked.dns = Some("x.invalid".into());
        assert!(ok(&lookup.judge(&watched([asked.clone()]), true)));
        asked.dns = Some("y.invalid".into());
        assert!(!ok(&lookup.judge(&watched([asked]), true)));
    }

    #[test]
    fn a_flood_must_be_kept_to_the_bound_and_the_rest_counted() {
        let n = MAX_ENTRIES as u64 + 8;
        let flood = Reported::Flood(n);
        let all = watched((0..n).map(|i| connect_to(1024 + i as u16)));
        match flood.judge(&all, true) {
            Outcome::Ok(s) => assert_eq!(s, format!("{n} attempts: {MAX_ENTRIES} kept, 8 counted")),
            other => panic!("{other:?}"),
        }
        // One attempt fewer, or one kept past the bound, is not what the
        // flood made.
        let short = watched((0..n - 1).map(|i| connect_to(1024 + i as u16)));
        assert!(!ok(&flood.judge(&short, true)));
        let mut over = all.clone();
        over.entries.push(connect_to(9));
        assert!(!ok(&flood.judge(&over, true)));
        let mut uncounted = all;
        uncounted.omitted -= 1;
        assert!(!ok(&flood.judge(&uncounted, true)));
    }

    #[test]
    fn the_report_must_name_an_unlisted_call_with_its_errno() {
        use std::borrow::Cow;
        let want = Reported::Syscall {
            call: "personality".into(),
            answer: "ENOSYS".into(),
        };
        let mut d = watched([]);
        assert!(!ok(&want.judge(&d, true)));
        // In the compatibility class it is not named: not enough.
        d.record_syscall(Cow::Borrowed("personality"), Cow::Borrowed("ENOSYS"), true);
        assert!(!ok(&want.judge(&d, true)));
        let mut wrong = watched([]);
        wrong.record_syscall(Cow::Borrowed("personality"), Cow::Borrowed("EPERM"), false);
        assert!(!ok(&want.judge(&wrong, true)));
        d.record_syscall(Cow::Borrowed("personality"), Cow::Borrowed("ENOSYS"), false);
        match want.judge(&d, true) {
            Outcome::Ok(s) => assert_eq!(s, "personality reported ×1, answered ENOSYS"),
            other => panic!("{other:?}"),
        }
        assert!(ok(&want.judge(&Denied::new(Watch::Unavailable), false)));
        assert!(!ok(&want.judge(&Denied::new(Watch::Unavailable), true)));
    }

    #[test]
    fn an_unwatched_run_passes_only_where_nobody_could_watch() {
        let to = Reported::Destination("192.0.2.1:443".into());
        let unwatched = Denied::new(Watch::Unavailable);
        assert!(!ok(&to.judge(&unwatched, true)));
        assert!(ok(&to.judge(&unwatched, false)));
        let lost = Denied::new(Watch::Lost);
        assert!(!ok(&to.judge(&lost, true)));
        assert!(!ok(&to.judge(&watched([connect_to(443)]), false)));
    }

    #[test]
    fn every_holder_is_a_layer_or_part_of_one_and_keeps_its_report_words() {
        use Stopper::{
            CapsUnprivileged, Helper, LandlockUnix, MemfdNoexec, Noexec, Nproc, NsLimits,
            Subreaper, Tmpfs,
        };
        // (holder, its layer, JSON word, JUnit word)
        let parts = [
            (
                LandlockUnix,
                Some(Layer::Landlock),
                "landlock_unix",
                "landlockunix",
            ),
            (NsLimits, Some(Layer::Userns), "ns_limits", "nslimits"),
            (
                MemfdNoexec,
                Some(Layer::Pidns),
                "memfd_noexec",
                "memfdnoexec",
            ),
            (Nproc, Some(Layer::Rlimits), "nproc", "nproc"),
            (
                CapsUnprivileged,
                Some(Layer::Caps),
                "caps_unprivileged",
                "capsunprivileged",
            ),
            (Tmpfs, Some(Layer::Mountns), "tmpfs", "tmpfs"),
            (Noexec, Some(Layer::Mountns), "noexec", "noexec"),
            (Helper, None, "helper", "helper"),
            (Subreaper, None, "subreaper", "subreaper"),
        ];
        let words = |h: Stopper| {
            let json = serde_json::to_string(&h).expect("a holder serializes");
            (json, format!("{h:?}").to_lowercase())
        };
        let all = {
            let mut l = Layers::of(&[
                Layer::Userns,
                Layer::Pidns,
                Layer::Rlimits,
                Layer::Caps,
                Layer::Mountns,
            ]);
            l.ns_limits = true;
            l.set_landlock_abi(Some(9));
            l
        };
        for (h, layer, json, junit) in parts {
            assert_eq!(h.layer(), layer, "{h:?}");
            assert_eq!(words(h), (format!("\"{json}\""), junit.to_string()));
            // A part holds for one uid or the other with its layer on, and
            // for neither with it off.
            let Some(layer) = layer else { continue };
            assert!(h.active(&all, 0) || h.active(&all, 1000), "{h:?}");
            let mut off = all;
            match layer {
                Layer::Landlock => off.set_landlock_abi(None),
                Layer::Userns => off.remove(Layer::Userns),
                Layer::Pidns => off.remove(Layer::Pidns),
                Layer::Rlimits => off.remove(Layer::Rlimits),
                Layer::Caps => off.remove(Layer::Caps),
                Layer::Mountns => off.remove(Layer::Mountns),
                other => panic!("{h:?} is part of {other:?}, which this test can't switch off"),
            }
            assert!(!h.active(&off, 0) && !h.active(&off, 1000), "{h:?}");
        }
        for l in Layer::ALL {
            let h = Stopper::Layer(*l);
            assert_eq!(h.layer(), Some(*l));
            assert_eq!(h.name(), l.name());
            assert_eq!(
                serde_json::to_string(&h).ok(),
                Some(format!("\"{}\"", l.name()))
            );
        }
        assert_eq!(words(Stopper::Layer(Layer::LandlockTcp)).1, "landlocktcp");
        assert_eq!(words(Stopper::Layer(Layer::PidMax)).1, "pidmax");
        // A whole layer and its parts are switched on exactly when it is.
        let on = Layers::of(&[Layer::Mountns]);
        for uid in [0, 1000] {
            assert!(Noexec.active(&on, uid) && Tmpfs.active(&on, uid));
            assert!(Stopper::Layer(Layer::Mountns).active(&on, uid));
            assert!(!Stopper::Layer(Layer::Seccomp).active(&on, uid));
            assert!(!Noexec.active(&Layers::default(), uid));
        }
    }

    #[test]
    fn verdicts_follow_the_two_runs_and_the_prediction() {
        use Prediction as P;
        use Verdict as V;
        let ok = Outcome::Ok("x".into());
        let failed = Outcome::Failed("EPERM".into());
        let not_run = Outcome::NotRun("sandbox: no".into());
        let enosys = Outcome::Failed("ENOSYS".into());
        let unsupported = Outcome::Failed("EOPNOTSUPP (setxattr)".into());
        let enoent = Outcome::Failed("ENOENT".into());
        // (inside, allowed, control, predicted, switched_off) -> verdict
        let cases = [
            (&not_run, false, true, P::Blocked, false, V::Failed),
            (&not_run, true, true, P::Allowed, false, V::Failed),
            (&not_run, false, true, P::Escaped, false, V::Failed),
            (&ok, false, true, P::Escaped, false, V::NotPromised),
            (&failed, false, true, P::Escaped, false, V::NotPromised),
            (&ok, false, true, P::Escaped, true, V::Escaped),
            (&failed, false, true, P::Escaped, true, V::Blocked),
            (&ok, true, false, P::Allowed, false, V::Allowed),
            (&failed, true, true, P::Allowed, false, V::Broken),
            (&ok, false, false, P::Blocked, false, V::Escaped),
            (&failed, false, true, P::Blocked, false, V::Blocked),
            (&failed, false, false, P::Blocked, false, V::Unproven),
        ];
        for (inside, allowed, control_ok, predicted, off, want) in cases {
            let control = if control_ok { &ok } else { &enoent };
            assert_eq!(
                Verdict::of(inside, allowed, control, predicted, off),
                want,
                "{inside:?} allowed={allowed} control_ok={control_ok} {predicted:?} off={off}"
            );
        }
        // The kernel refused it outside too: not applicable, unless it got
        // through inside, which is an escape whatever the control got.
        let by_control = [
            (&failed, &enosys, V::NotApplicable),
            (&enosys, &enosys, V::NotApplicable),
            (&failed, &unsupported, V::NotApplicable),
            (&ok, &enosys, V::Escaped),
            (&failed, &enoent, V::Unproven),
            (&failed, &Outcome::Failed("ENOSYSX".into()), V::Unproven),
            (&failed, &Outcome::Ok("ENOSYS".into()), V::Blocked),
        ];
        for (inside, control, want) in by_control {
            assert_eq!(
                Verdict::of(inside, false, control, P::Blocked, false),
                want,
                "{inside:?} {control:?}"
            );
        }
        // Not promised and a sanity check's verdicts don't look at it.
        assert_eq!(
            Verdict::of(&failed, false, &enosys, P::Escaped, false),
            V::NotPromised
        );
        assert_eq!(
            Verdict::of(&failed, true, &enosys, P::Allowed, false),
            V::Broken
        );
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_root_servers_fork_bomb_is_held_by_its_runs_cgroup_alone() {
        use crate::sandbox::probe::attempts::Attempt;
        use crate::sandbox::probe::specs::FORK_BOMB_HOLDERS;
        let sp: crate::sandbox::probe::Spec = spec(
            "fork-bomb",
            Attempt::ForkBomb,
            vec![],
            "EAGAIN",
            FORK_BOMB_HOLDERS,
        );
        // Before Linux 6.14 a root server's runs have no pid_max of their
        // own and RLIMIT_NPROC does not bind root: only the cgroup holds.
        let cgroup = Layers::of(&[Layer::Pidns, Layer::Rlimits, Layer::Cgroup]);
        assert_eq!(Prediction::of(&sp, &cgroup, 0), Prediction::Blocked);
        let without = Layers::of(&[Layer::Pidns, Layer::Rlimits]);
        assert_eq!(Prediction::of(&sp, &without, 0), Prediction::Escaped);
        assert_eq!(Prediction::of(&sp, &without, 1000), Prediction::Blocked);
    }

    #[test]
    fn not_applicable_names_the_kernels_refusal() {
        for (control, want) in [
            (
                "ENOSYS",
                Some("this kernel lacks the system call (outside it got ENOSYS)"),
            ),
            (
                "ENOSYS (statmount)",
                Some("this kernel lacks the system call (outside it got ENOSYS)"),
            ),
            (
                "EOPNOTSUPP after 0 MiB",
                Some("this kernel or file system can't do it (outside it got EOPNOTSUPP)"),
            ),
            (
                "ENOTTY (get)",
                Some("this file system has no such ioctl (outside it got ENOTTY)"),
            ),
            (
                "EIO (dev.tty.legacy_tiocsti is 0)",
                Some(
                    "this kernel refuses TIOCSTI to every unprivileged caller \
                     (outside it got EIO: dev.tty.legacy_tiocsti is 0)",
                ),
            ),
            // An EIO for any other reason says nothing of the kernel.
            ("EIO", None),
            ("EPERM", None),
            ("ENOTTYX", None),
            ("ENOSYSTEM", None),
            ("", None),
        ] {
            assert_eq!(
                not_applicable(&Outcome::Failed(control.into())),
                want,
                "{control}"
            );
        }
        assert_eq!(not_applicable(&Outcome::Ok("ENOSYS".into())), None);
        assert_eq!(not_applicable(&Outcome::NotRun("ENOSYS".into())), None);
    }

    #[test]
    fn verdicts_and_predictions_keep_their_report_words() {
        let words: Vec<String> = [
            Verdict::Blocked,
            Verdict::Escaped,
            Verdict::Unproven,
            Verdict::Failed,
            Verdict::Allowed,
            Verdict::Broken,
            Verdict::NotPromised,
            Verdict::NotApplicable,
        ]
        .iter()
        .map(|v| {
            let json = serde_json::to_string(v).expect("a verdict serializes");
            assert_eq!(json, format!("\"{}\"", v.as_str()));
            format!("{v:<8}|")
        })
        .collect();
        assert_eq!(
            words,
            [
                "blocked |",
                "ESCAPED |",
                "unproven|",
                "FAILED  |",
                "allowed |",
                "BROKEN  |",
                "not promised|",
                "not applicable|"
            ]
        );
        for (p, w) in [
            (Prediction::Allowed, "allowed"),
            (Prediction::Blocked, "blocked"),
            (Prediction::Escaped, "escaped"),
        ] {
            assert_eq!(p.as_str(), w);
            assert_eq!(
                serde_json::to_string(&p).expect("a prediction serializes"),
                format!("\"{w}\"")
            );
        }
    }
}

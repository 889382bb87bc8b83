//! The macOS probe's report: how a line is judged from what the run did
//! and what its positive control got, and the text and JSON it is written
//! as. Pure, so it is built and tested on every platform; the probe that
//! fills it (`probe.rs`) runs on macOS only.

use std::fmt::Write as _;

use serde::Serialize;

use crate::sandbox::probe::model::Spec;

/// The layers line: macOS has one layer, the generated profile.
pub(crate) const LAYERS: &str = "sandbox-exec (deny-by-default profile, no network)";

/// What the positive control got outside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum ControlResult {
    /// It did what it tried: the inside line means something.
    #[serde(rename = "ok")]
    Ok,
    /// It failed outside too: the line proves nothing here.
    #[serde(rename = "failed")]
    Failed,
    /// It needs a session this machine does not have.
    #[serde(rename = "not applicable")]
    NotApplicable,
    /// An allowed operation needs none: it must simply work inside.
    #[serde(rename = "none")]
    None,
}

impl ControlResult {
    /// What a spec's control got: `worked` says whether it did what it
    /// tried outside. An allowed operation needs no control.
    pub(crate) fn of<A, T>(sp: &Spec<A, T>, worked: bool) -> ControlResult {
        match (sp.allowed, worked, sp.session()) {
            (true, _, _) => ControlResult::None,
            (false, true, _) => ControlResult::Ok,
            (false, false, Some(_)) => ControlResult::NotApplicable,
            (false, false, None) => ControlResult::Failed,
        }
    }
}

/// What a line says about one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Finding {
    /// An escape the sandbox stopped.
    #[serde(rename = "held")]
    Held,
    #[serde(rename = "escaped")]
    Escaped,
    /// An allowed operation that worked inside.
    #[serde(rename = "allowed")]
    Allowed,
    /// An allowed operation the sandbox refused.
    #[serde(rename = "wrongly refused")]
    WronglyRefused,
    /// An escape that held, whose control needs a session this machine
    /// lacks.
    #[serde(rename = "not applicable here")]
    NotApplicableHere,
}

impl Finding {
    /// The finding on a line. An escape attempt whose control needs a
    /// session this machine lacks is "not applicable here" when it held
    /// (an escape is an escape wherever it happens).
    pub(crate) fn of(allowed: bool, got_through: bool, control: ControlResult) -> Finding {
        match (allowed, got_through) {
            (false, false) if control == ControlResult::NotApplicable => Finding::NotApplicableHere,
            (false, false) => Finding::Held,
            (false, true) => Finding::Escaped,
            (true, true) => Finding::Allowed,
            (true, false) => Finding::WronglyRefused,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Finding::Held => "held",
            Finding::Escaped => "escaped",
            Finding::Allowed => "allowed",
            Finding::WronglyRefused => "wrongly refused",
            Finding::NotApplicableHere => "not applicable here",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Line {
    pub name: String,
    pub what: &'static str,
    pub result: Finding,
    pub control: ControlResult,
    /// What the inside run said, and what the probe saw afterwards.
    pub detail: String,
}

impl Line {
    /// A spec's judged line. A line that is not applicable here starts
    /// with why (the session its control needs).
    pub(crate) fn judged<A, T>(
        sp: &Spec<A, T>,
        got_through: bool,
        control: ControlResult,
        detail: String,
    ) -> Line {
        let result = Finding::of(sp.allowed, got_through, control);
        let detail = if result == Finding::NotApplicableHere {
            format!("{} ({detail})", sp.session().unwrap_or("not applicable"))
        } else {
            detail
        };
        Line {
            name: sp.name.clone(),
            what: sp.what,
            result,
            control,
            detail,
        }
    }
}

/// The totals the last line and the JSON report give.
struct Totals {
    escapes: usize,
    refused: usize,
    no_control: usize,
    not_here: usize,
}

impl Totals {
    fn of(lines: &[Line]) -> Totals {
        let count = |f: &dyn Fn(&Line) -> bool| lines.iter().filter(|l| f(l)).count();
        Totals {
            escapes: count(&|l| l.result == Finding::Escaped),
            refused: count(&|l| l.result == Finding::WronglyRefused),
            no_control: count(&|l| l.control == ControlResult::Failed),
            not_here: count(&|l| l.result == Finding::NotApplicableHere),
        }
    }
}

/// `sandbox probe --json`.
pub(crate) fn json(lines: &[Line]) -> serde_json::Value {
    let t = Totals::of(lines);
    serde_json::json!({
        "platform": "macos",
        "layers": LAYERS,
        "attempts": lines,
        "escapes": t.escapes,
        "wrongly_refused": t.refused,
        "controls_failed": t.no_control,
        "not_applicable": t.not_here,
    })
}

/// `sandbox probe`: `os` is the system's name and version.
pub(crate) fn text(os: &str, lines: &[Line]) -> String {
    let t = Totals::of(lines);
    let mut out = format!("sandbox probe ({os}): {LAYERS}\n");
    for l in lines {
        let control = match l.control {
            ControlResult::Failed => " (control failed outside: proves nothing here)",
            _ => "",
        };
        let _ = writeln!(
            out,
            "  {:<16} {:<22} {}{control}",
            l.result.as_str(),
            l.name,
            l.what
        );
        let _ = writeln!(out, "  {:<16} {:<22}   {}", "", "", l.detail);
    }
    let _ = writeln!(
        out,
        "{} attempts: {} escaped, {} wrongly refused, {} without a working control, \
         {} not applicable here",
        lines.len(),
        t.escapes,
        t.refused,
        t.no_control,
        t.not_here
    );
    out
}

/// The exit code: 1 when anything escaped or an allowed operation was
/// refused.
pub(crate) fn exit_code(lines: &[Line]) -> u8 {
    let t = Totals::of(lines);
    u8::from(t.escapes > 0 || t.refused > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::probe::model::spec;

    #[test]
    fn a_held_attempt_without_its_session_is_not_applicable_and_an_escape_still_an_escape() {
        use ControlResult as C;
        use Finding as F;
        // (allowed, got through, control) -> finding
        let cases = [
            (false, false, C::NotApplicable, F::NotApplicableHere),
            (false, true, C::NotApplicable, F::Escaped),
            (false, false, C::Ok, F::Held),
            (false, false, C::Failed, F::Held),
            (false, false, C::None, F::Held),
            (false, true, C::Ok, F::Escaped),
            (true, false, C::None, F::WronglyRefused),
            (true, true, C::None, F::Allowed),
        ];
        for (allowed, through, control, want) in cases {
            assert_eq!(
                Finding::of(allowed, through, control),
                want,
                "allowed={allowed} through={through} {control:?}"
            );
        }
    }

    /// A spec of a stand-in suite (the attempt is its word).
    fn sp(name: &str, what: &'static str) -> Spec<&'static str, ()> {
        spec(name, "attempt", vec![], "", &[]).what(what)
    }

    #[test]
    fn a_control_is_judged_by_whether_it_worked_and_needed_a_session() {
        use ControlResult as C;
        let escape = sp("e", "an escape");
        let bound = sp("b", "a lookup").needs_session("gui");
        let allowed = sp("a", "a read").allowed();
        let allowed_bound = sp("ab", "a lookup").needs_session("gui").allowed();
        // (spec, worked) -> control
        let cases = [
            (&allowed, false, C::None),
            (&allowed_bound, true, C::None),
            (&escape, true, C::Ok),
            (&bound, true, C::Ok),
            (&bound, false, C::NotApplicable),
            (&escape, false, C::Failed),
        ];
        for (spec, worked, want) in cases {
            assert_eq!(
                ControlResult::of(spec, worked),
                want,
                "{} {worked}",
                spec.name
            );
        }
    }

    /// One line of each kind, as the probe judges them.
    fn fixed_lines() -> Vec<Line> {
        let gui = "needs a GUI login session";
        let line = |spec: Spec<&'static str, ()>, worked: bool, through: bool, detail: &str| {
            let control = ControlResult::of(&spec, worked);
            Line::judged(&spec, through, control, detail.to_string())
        };
        vec![
            line(
                sp("net-tcp", "TCP connect to 127.0.0.1"),
                true,
                false,
                "connect tcp: Operation not permitted (os error 1)",
            ),
            line(
                sp("read-outside", "read a file outside the grants"),
                true,
                true,
                "read /x/secret.txt: succeeded",
            ),
            line(
                sp("pasteboard", "look up the pasteboard (what was copied)").needs_session(gui),
                false,
                false,
                "look up com.apple.pasteboard.1: bootstrap_look_up: 1100",
            ),
            line(
                sp(
                    "procinfo",
                    "read the server's executable path (proc_pidpath)",
                ),
                false,
                false,
                "proc_pidpath of pid 7: Operation not permitted (os error 1)",
            ),
            line(
                sp("allowed-read-root", "read a file in the root").allowed(),
                false,
                true,
                "read /x/root/allowed.txt: succeeded",
            ),
            line(
                sp("allowed-sysctl", "read hw.ncpu").allowed(),
                false,
                false,
                "sysctl hw.ncpu: Operation not permitted (os error 1)",
            ),
        ]
    }

    #[test]
    fn the_text_report_keeps_its_lines() {
        let want = "\
sandbox probe (macOS 15.1): sandbox-exec (deny-by-default profile, no network)
  held             net-tcp                TCP connect to 127.0.0.1
                                            connect tcp: Operation not permitted (os error 1)
  escaped          read-outside           read a file outside the grants
                                            read /x/secret.txt: succeeded
  not applicable here pasteboard             look up the pasteboard (what was copied)
                                            needs a GUI login session (look up com.apple.pasteboard.1: bootstrap_look_up: 1100)
  held             procinfo               read the server's executable path (proc_pidpath) (control failed outside: proves nothing here)
                                            proc_pidpath of pid 7: Operation not permitted (os error 1)
  allowed          allowed-read-root      read a file in the root
                                            read /x/root/allowed.txt: succeeded
  wrongly refused  allowed-sysctl         read hw.ncpu
                                            sysctl hw.ncpu: Operation not permitted (os error 1)
6 attempts: 1 escaped, 1 wrongly refused, 1 without a working control, 1 not applicable here
";
        assert_eq!(text("macOS 15.1", &fixed_lines()), want);
    }

    #[test]
    fn the_json_report_keeps_its_words_and_order() {
        let lines = fixed_lines();
        let got = serde_json::to_string(&json(&lines[2..4])).expect("the report serializes");
        let want = concat!(
            r#"{"platform":"macos","layers":"sandbox-exec (deny-by-default profile, no network)","#,
            r#""attempts":[{"name":"pasteboard","what":"look up the pasteboard (what was copied)","#,
            r#""result":"not applicable here","control":"not applicable","#,
            r#""detail":"needs a GUI login session (look up com.apple.pasteboard.1: bootstrap_look_up: 1100)"},"#,
            r#"{"name":"procinfo","what":"read the server's executable path (proc_pidpath)","#,
            r#""result":"held","control":"failed","#,
            r#""detail":"proc_pidpath of pid 7: Operation not permitted (os error 1)"}],"#,
            r#""escapes":0,"wrongly_refused":0,"controls_failed":1,"not_applicable":1}"#
        );
        assert_eq!(got, want);
        let words: Vec<String> = [
            Finding::Held,
            Finding::Escaped,
            Finding::Allowed,
            Finding::WronglyRefused,
            Finding::NotApplicableHere,
        ]
        .iter()
        .map(|f| {
            let json = serde_json::to_string(f).expect("a finding serializes");
            assert_eq!(json, format!("\"{}\"", f.as_str()));
            json
        })
        .collect();
        assert_eq!(
            words,
            [
                "\"held\"",
                "\"escaped\"",
                "\"allowed\"",
                "\"wrongly refused\"",
                "\"not applicable here\""
            ]
        );
        let control = serde_json::to_string(&[
            ControlResult::Ok,
            ControlResult::Failed,
            ControlResult::NotApplicable,
            ControlResult::None,
        ])
        .expect("controls serialize");
        assert_eq!(control, r#"["ok","failed","not applicable","none"]"#);
    }

    #[test]
    fn the_exit_code_fails_on_an_escape_or_a_wrongly_refused_operation_alone() {
        let lines = fixed_lines();
        // held, not applicable here, unproven, allowed: passes.
        let quiet: Vec<Line> = [0, 2, 3, 4].iter().map(|&i| lines[i].clone()).collect();
        assert_eq!(exit_code(&quiet), 0);
        assert_eq!(exit_code(&[]), 0);
        assert_eq!(exit_code(&lines[1..2]), 1, "an escape");
        assert_eq!(exit_code(&lines[5..6]), 1, "a wrongly refused operation");
    }
}

//! The probe's report as JUnit XML, so a CI system shows one test per
//! attempt: a failure for an attempt that got through or a sanity check
//! that broke, an error for one that never ran, and skipped (with the
//! reason) for one that proved nothing, is not promised here, or is not
//! applicable on this kernel, as none: the command exits 0 for them, and the report agrees.

use std::fmt::Write;

use super::model::{Report, Verdict};

/// Text made safe for XML content and attribute values. Characters XML 1.0
/// cannot carry at all (most control characters) become U+FFFD.
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => {
                let _ = write!(out, "&#{};", c as u32);
            }
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// What a line becomes: `None` for a pass, else (element, type, message).
fn outcome(verdict: Verdict) -> Option<(&'static str, &'static str, &'static str)> {
    match verdict {
        Verdict::Blocked | Verdict::Allowed => None,
        Verdict::NotPromised => Some((
            "skipped",
            "not-promised",
            "not promised on this machine: no layer it gives holds it",
        )),
        Verdict::Escaped => Some(("failure", "escaped", "got through")),
        Verdict::Broken => Some((
            "failure",
            "broken",
            "a sanity check failed inside the sandbox",
        )),
        Verdict::Unproven => Some((
            "skipped",
            "unproven",
            "proved nothing: the attempt failed outside the sandbox too",
        )),
        Verdict::Failed => Some(("error", "not-run", "the sandbox refused to start the run")),
        Verdict::NotApplicable => {
            Some(("skipped", "not-applicable", "not applicable on this kernel"))
        }
    }
}

/// The whole document. Pure.
pub(super) fn render(r: &Report) -> String {
    let mut failures = 0;
    let mut errors = 0;
    let mut skipped = 0;
    for l in &r.attempts {
        match outcome(l.verdict) {
            Some(("failure", ..)) => failures += 1,
            Some(("skipped", ..)) => skipped += 1,
            Some(_) => errors += 1,
            None => {}
        }
    }
    let suite = match r.without {
        Some(l) => format!("sandbox probe --without {l}"),
        None => "sandbox probe".to_string(),
    };
    let mut x = String::new();
    x.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"reachweaver-mcp\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\">",
        r.attempts.len()
    );
    let _ = writeln!(
        x,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">",
        escape(&suite),
        r.attempts.len()
    );
    x.push_str("    <properties>\n");
    for (k, v) in [
        ("layers", r.layers.clone()),
        ("uid", r.uid.to_string()),
        (
            "landlock_abi",
            r.landlock_abi.map(|a| a.to_string()).unwrap_or_default(),
        ),
    ] {
        let _ = writeln!(x, "      <property name=\"{k}\" value=\"{}\"/>", escape(&v));
    }
    x.push_str("    </properties>\n");
    for l in &r.attempts {
        let _ = write!(
            x,
            "    <testcase classname=\"sandbox.probe\" name=\"{}\" time=\"0\"",
            escape(&l.name)
        );
        let holders: Vec<String> = l
            .holders
            .iter()
            .map(|h| format!("{h:?}").to_lowercase())
            .collect();
        let details = format!(
            "verdict: {}\ninside: {}\nexpected: {}\ncontrol (outside the sandbox): {}\nheld by: {}\npredicted: {}",
            l.verdict,
            l.inside,
            l.expected,
            l.control,
            holders.join(", "),
            l.predicted
        );
        match outcome(l.verdict) {
            None => {
                let _ = writeln!(
                    x,
                    ">\n      <system-out>{}</system-out>\n    </testcase>",
                    escape(&details)
                );
            }
            Some((element, ty, message)) => {
                // An attempt that proved nothing is about its control run:
                // the message quotes what it got outside the sandbox.
                let observed = if let Some(why) = l.not_applicable {
                    why.to_string()
                } else if ty == "unproven" {
                    format!("outside it got {}", l.control)
                } else {
                    format!("inside it got {}", l.inside)
                };
                let _ = writeln!(
                    x,
                    ">\n      <{element} type=\"{ty}\" message=\"{}: {}\">{}</{element}>\n    </testcase>",
                    message,
                    escape(&observed),
                    escape(&details)
                );
            }
        }
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::probe::model::{Line, Prediction, Stopper};

    #[test]
    fn markup_quotes_and_control_characters_are_escaped() {
        assert_eq!(
            escape(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&apos;&lt;/a&gt;"
        );
        assert_eq!(escape("a\tb\nc\rd"), "a&#9;b&#10;c&#13;d");
        assert_eq!(escape("nul\0bell\u{7}"), "nul\u{fffd}bell\u{fffd}");
        assert_eq!(escape("tcp-connect-::1 é"), "tcp-connect-::1 é");
    }

    fn line(name: &str, verdict: Verdict, inside: &str) -> Line {
        Line {
            name: name.into(),
            verdict,
            inside: inside.into(),
            expected: "EPERM".into(),
            expected_matches: false,
            control: "ok".into(),
            control_ok: true,
            not_applicable: None,
            holders: vec![Stopper::Layer(crate::sandbox::Layer::Seccomp)],
            predicted: Prediction::Blocked,
        }
    }

    #[test]
    fn one_testcase_per_attempt_with_failures_and_errors_counted() {
        let r = Report {
            layers: "seccomp & <all>".into(),
            without: None,
            uid: 0,
            landlock_abi: Some(7),
            attempts: vec![
                line("a", Verdict::Blocked, "EPERM"),
                line("b<\"x\">", Verdict::Escaped, "read 3 bytes & more"),
                Line {
                    control: "ENOSYS-outside".into(),
                    control_ok: false,
                    ..line("c", Verdict::Unproven, "ENOSYS")
                },
                line("d", Verdict::Broken, "EACCES"),
                line("e", Verdict::Failed, "sandbox: no"),
                Line {
                    control: "ENOSYS".into(),
                    control_ok: false,
                    not_applicable: Some(
                        "this kernel lacks the system call (outside it got ENOSYS)",
                    ),
                    ..line("f", Verdict::NotApplicable, "ENOSYS")
                },
            ],
            escaped: 1,
            broken: 2,
        };
        let x = render(&r);
        assert_eq!(x.matches("<testcase ").count(), 6);
        assert_eq!(x.matches("</testcase>").count(), 6);
        assert_eq!(x.matches("<failure ").count(), 2);
        assert_eq!(x.matches("<error ").count(), 1);
        assert_eq!(x.matches("<skipped ").count(), 2);
        assert!(
            x.contains("tests=\"6\" failures=\"2\" errors=\"1\" skipped=\"2\""),
            "{x}"
        );
        // Not applicable: skipped, with its own type and the kernel's reason.
        assert!(
            x.contains("<skipped type=\"not-applicable\" message=\"not applicable on this kernel: this kernel lacks the system call (outside it got ENOSYS)\">"),
            "{x}"
        );
        // Proved nothing: skipped, with what the control got outside.
        assert!(
            x.contains("<skipped type=\"unproven\" message=\"proved nothing: the attempt failed outside the sandbox too: outside it got ENOSYS-outside\">"),
            "{x}"
        );
        assert!(
            x.contains("message=\"got through: inside it got read 3 bytes &amp; more\""),
            "{x}"
        );
        assert!(x.contains("name=\"b&lt;&quot;x&quot;&gt;\""), "{x}");
        assert!(x.contains("read 3 bytes &amp; more"), "{x}");
        assert!(x.contains("value=\"seccomp &amp; &lt;all&gt;\""), "{x}");
        assert!(!x.contains("b<\""), "{x}");
    }

    #[test]
    fn a_sanity_check_says_it_was_predicted_allowed() {
        let r = Report {
            layers: "all".into(),
            without: None,
            uid: 0,
            landlock_abi: None,
            attempts: vec![Line {
                predicted: Prediction::Allowed,
                ..line("read-root", Verdict::Allowed, "ok")
            }],
            escaped: 0,
            broken: 0,
        };
        let x = render(&r);
        assert!(x.contains("predicted: allowed</system-out>"), "{x}");
        assert!(!x.contains("predicted: blocked"), "{x}");
    }
}

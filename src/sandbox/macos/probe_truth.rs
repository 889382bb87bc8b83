//! How the macOS probe tells whether a run got through beyond the
//! attempt's own word (its listeners, a file that must not appear, a
//! launchd job, an execute bit), and what a positive control left that
//! must go before the same attempt runs inside. Built and tested on every
//! platform; launchd is asked through `/bin/launchctl`, which only a Mac
//! has.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::sandbox::probe::listeners::{Counters, Which};
use crate::sandbox::probe::model::Spec;

/// How the truth of a macOS attempt is established.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Truth {
    /// Only the attempt's own report.
    #[default]
    Report,
    /// No connection or datagram may reach this listener.
    Listener(Which),
    /// This path must not exist once the run is over.
    Absent(PathBuf),
    /// launchd must not know a job by this label once the run is over.
    LaunchdJob(String),
    /// This file must have no execute bit once the run is over.
    NoExecBit(PathBuf),
}

/// Whether launchd knows a job by this label (`launchctl list LABEL`).
pub(crate) fn launchd_job_exists(label: &str) -> bool {
    Command::new("/bin/launchctl")
        .args(["list", label])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Remove a job the probe's control submitted; whether it is gone. launchd
/// may take a moment to drop it, so the answer is awaited for up to two
/// seconds.
pub(crate) fn remove_launchd_job(label: &str) -> bool {
    for _ in 0..20 {
        let _ = Command::new("/bin/launchctl")
            .args(["remove", label])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !launchd_job_exists(label) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

/// What a positive control made, removed before the same attempt runs
/// inside: a file the control wrote where the run must not write would
/// otherwise count as the run's escape. `outside` is the control's temp
/// folder. A leftover that can't be removed stops the probe, as every
/// later line would be wrong.
pub(crate) fn clean_after_control<A>(outside: &Path, sp: &Spec<A, Truth>) -> anyhow::Result<()> {
    let mut made = vec![outside.join("hardlink"), outside.join("probe.sh")];
    match &sp.truth {
        Truth::Absent(p) => made.push(p.clone()),
        // The job is removed by asking; one that stays is a leftover.
        Truth::LaunchdJob(label) if !remove_launchd_job(label) => anyhow::bail!(
            "the positive control of {} left launchd job {label} behind",
            sp.name
        ),
        Truth::NoExecBit(path) => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        }
        _ => {}
    }
    for p in made {
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => anyhow::bail!(
                "the positive control of {} left {} behind: {e}",
                sp.name,
                p.display()
            ),
        }
    }
    Ok(())
}

/// Whether the inside run got through, by the spec's truth, checked once
/// the run (and a draft's sweep) is over: `reported_ok` is the attempt's
/// own word, `listener_before` the listener's count before the run.
/// `detail` gets what the check saw. What the run left is removed.
pub(crate) fn got_through<A>(
    counters: &Counters,
    sp: &Spec<A, Truth>,
    reported_ok: bool,
    listener_before: usize,
    detail: &mut String,
) -> bool {
    match &sp.truth {
        Truth::Report => reported_ok,
        Truth::Listener(w) => reported_ok || counters.get(*w) > listener_before,
        Truth::Absent(p) => {
            let there = p.exists();
            if there {
                let _ = std::fs::remove_file(p);
            }
            reported_ok || there
        }
        Truth::LaunchdJob(label) => {
            let there = launchd_job_exists(label);
            if there {
                remove_launchd_job(label);
            }
            reported_ok || there
        }
        Truth::NoExecBit(path) => {
            use std::os::unix::fs::PermissionsExt;
            // A draft may try to set the bit, none may be left on the
            // host; a file that can't be looked at counts as one left.
            let mode = std::fs::metadata(path).map(|m| m.permissions().mode());
            let shown = match &mode {
                Ok(m) => format!("{:o}", m & 0o7777),
                Err(e) => e.to_string(),
            };
            *detail = format!("{detail}; afterwards the mode is {shown}");
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
            mode.as_ref().map_or(true, |m| m & 0o111 != 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::sandbox::probe::listeners::Listeners;
    use crate::sandbox::probe::model::spec;

    fn with(truth: Truth) -> Spec<&'static str, Truth> {
        spec("t", "write", vec![], "", &[]).truth(truth)
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn what_a_control_made_is_removed_and_what_it_cannot_remove_stops_the_probe() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path();
        let written = outside.join("written.txt");
        let kept = outside.join("kept.txt");
        for p in [
            &written,
            &kept,
            &outside.join("hardlink"),
            &outside.join("probe.sh"),
        ] {
            std::fs::write(p, b"control").unwrap();
        }
        clean_after_control(outside, &with(Truth::Absent(written.clone()))).unwrap();
        assert!(!written.exists());
        assert!(!outside.join("hardlink").exists());
        assert!(!outside.join("probe.sh").exists());
        assert!(kept.exists(), "only what the control made goes");
        // Nothing there is fine.
        clean_after_control(outside, &with(Truth::Report)).unwrap();
        // The control of a "no execute bit" attempt set the bit: cleared.
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o755)).unwrap();
        clean_after_control(outside, &with(Truth::NoExecBit(kept.clone()))).unwrap();
        assert_eq!(mode(&kept), 0o600);
        // A leftover that is not a file can't be removed: the probe stops.
        let stuck = outside.join("stuck");
        std::fs::create_dir(&stuck).unwrap();
        std::fs::write(stuck.join("inside"), b"x").unwrap();
        let e = clean_after_control(outside, &with(Truth::Absent(stuck.clone())))
            .expect_err("a leftover stops the probe");
        assert!(e.to_string().contains("left"), "{e}");
        assert!(e.to_string().contains(&stuck.display().to_string()), "{e}");
    }

    #[test]
    fn a_file_that_must_not_appear_counts_when_it_is_there_and_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("written.txt");
        let counters = Counters::default();
        let sp = with(Truth::Absent(path.clone()));
        let mut detail = String::new();
        assert!(!got_through(&counters, &sp, false, 0, &mut detail));
        assert!(
            got_through(&counters, &sp, true, 0, &mut detail),
            "its word"
        );
        std::fs::write(&path, b"run").unwrap();
        assert!(got_through(&counters, &sp, false, 0, &mut detail));
        assert!(!path.exists(), "what the run left is removed");
        assert_eq!(detail, "", "nothing to add");
        let report = with(Truth::Report);
        assert!(got_through(&counters, &report, true, 0, &mut detail));
        assert!(!got_through(&counters, &report, false, 0, &mut detail));
    }

    #[test]
    fn an_execute_bit_left_counts_and_is_cleared_and_a_missing_file_counts_too() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("probe.db");
        std::fs::write(&db, b"").unwrap();
        let counters = Counters::default();
        let sp = with(Truth::NoExecBit(db.clone()));
        // Only what is left counts, not what the attempt said.
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut detail = "chmod 755: succeeded".to_string();
        assert!(!got_through(&counters, &sp, true, 0, &mut detail));
        assert_eq!(detail, "chmod 755: succeeded; afterwards the mode is 600");
        // Any one execute bit is one too many.
        for bits in [0o700, 0o610, 0o601] {
            std::fs::set_permissions(&db, std::fs::Permissions::from_mode(bits)).unwrap();
            let mut detail = String::new();
            assert!(
                got_through(&counters, &sp, false, 0, &mut detail),
                "{bits:o}"
            );
            assert_eq!(detail, format!("; afterwards the mode is {bits:o}"));
            assert_eq!(mode(&db), 0o600, "cleared for the next attempt");
        }
        std::fs::remove_file(&db).unwrap();
        let mut detail = String::new();
        assert!(got_through(&counters, &sp, false, 0, &mut detail));
        assert!(detail.starts_with("; afterwards the mode is "), "{detail}");
    }

    #[test]
    fn a_connection_that_reached_the_listener_counts_whatever_the_attempt_said() {
        let net = Listeners::start().unwrap();
        let sp = with(Truth::Listener(Which::Tcp4));
        let mut detail = String::new();
        assert!(!got_through(&net.counters, &sp, false, 0, &mut detail));
        assert!(got_through(&net.counters, &sp, true, 0, &mut detail));
        let _conn = std::net::TcpStream::connect(net.tcp4).unwrap();
        // The listener counts on a thread of its own: wait for it.
        while net.counters.get(Which::Tcp4) == 0 {
            std::thread::yield_now();
        }
        let seen = net.counters.get(Which::Tcp4);
        assert!(got_through(
            &net.counters,
            &sp,
            false,
            seen - 1,
            &mut detail
        ));
        assert!(!got_through(&net.counters, &sp, false, seen, &mut detail));
        // Another listener's count is not this one's.
        let udp = with(Truth::Listener(Which::Udp));
        assert!(!got_through(&net.counters, &udp, false, 0, &mut detail));
    }
}

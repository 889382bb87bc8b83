//! Running the suite on Linux: every attempt outside (the control) and
//! inside, judged by its truth, and the report written as text, JSON or
//! JUnit.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::attempts;
use super::fixture::{fingerprint, wait_for, Fixture, Pty, PLANTED_ENV};
use super::host_checks::{
    carries_pid, daemon, deep_tmp_control, deep_tmp_inside, exec_bits, flood, next_call,
    outlive_control, outlive_inside,
};
use super::junit;
use super::model::{not_applicable, Line, Outcome, Prediction, Report, Truth, Verdict};
use super::runner::{
    run_control, run_control_watched, run_inside, run_inside_reported, run_inside_watched,
};
use super::Spec;
use crate::sandbox::policy::Layers;
use crate::sandbox::SandboxMode;
use crate::sandbox::{Layer, Sandbox, SandboxOptions};

/// `sandbox probe`.
pub(in crate::sandbox) fn run(
    json: bool,
    without: Option<Layer>,
    junit: Option<&Path>,
) -> anyhow::Result<u8> {
    // Planted before any thread starts, so the environment isn't shared yet.
    for (k, v) in PLANTED_ENV {
        if std::env::var_os(k).is_none() {
            std::env::set_var(k, v);
        }
    }
    let fx = Fixture::new()?;
    let opts = SandboxOptions {
        mode: SandboxMode::Require,
        backend: fx.exe.clone(),
        root: fx.root.clone(),
        read: vec![fx.home.clone()],
        home: Some(fx.home.clone()),
        db: Some(fx.db.clone()),
        allow_read: Vec::new(),
        pass_env: Vec::new(),
        ..SandboxOptions::default()
    };
    let mut sb = Sandbox::detect(&opts)?;
    if let Some(l) = without {
        // The layer matrix: every run of this probe goes without it, and the
        // layers line says so.
        sb.state.without(l);
    }
    let layers = sb.state.layers();
    let line = sb.layers_line();
    let mut out = std::io::stdout().lock();
    if !json {
        if let Some(l) = without {
            writeln!(
                out,
                "!!! WARNING: the {} layer is SWITCHED OFF for this probe; the results show what the other layers hold !!!",
                l.name()
            )?;
        }
        writeln!(out, "layers: {line}")?;
    }
    // SAFETY: getuid can't fail.
    let uid = unsafe { libc::getuid() };
    let server_pid = std::process::id();
    let mut lines = Vec::new();
    for sp in fx.specs(server_pid, layers.caps_bounding) {
        let l = run_one(&sb, &fx, &sp, &layers, uid, without.is_some())?;
        if !json {
            writeln!(out, "{}", render(&l))?;
            out.flush()?;
        }
        lines.push(l);
    }
    let escaped = lines
        .iter()
        .filter(|l| l.verdict == Verdict::Escaped)
        .count();
    let not_promised = lines
        .iter()
        .filter(|l| l.verdict == Verdict::NotPromised)
        .count();
    let broken = lines
        .iter()
        .filter(|l| l.verdict == Verdict::Broken || l.verdict == Verdict::Failed)
        .count();
    let report = Report {
        layers: line,
        without: without.map(Layer::name),
        uid,
        landlock_abi: layers.landlock_abi(),
        attempts: lines,
        escaped,
        broken,
    };
    if let Some(path) = junit {
        std::fs::write(path, junit::render(&report))
            .with_context(|| format!("writing the JUnit report {}", path.display()))?;
    }
    if json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        let unproven = report
            .attempts
            .iter()
            .filter(|l| l.verdict == Verdict::Unproven)
            .count();
        let not_applicable = report
            .attempts
            .iter()
            .filter(|l| l.verdict == Verdict::NotApplicable)
            .count();
        writeln!(
            out,
            "{} attempts: {} got through, {} broken or not run, {} proved nothing (control failed), {} not applicable on this kernel, {} not promised on this machine",
            report.attempts.len(),
            escaped,
            broken,
            unproven,
            not_applicable,
            not_promised
        )?;
    }
    Ok(if escaped + broken > 0 { 1 } else { 0 })
}

/// A stat that saw a file at the host path got through only if it is the
/// host's file. Pure.
fn judge_host_file(inside: Outcome, host: &str) -> Outcome {
    match inside {
        Outcome::Ok(s) if !s.ends_with(&format!(", {host}")) => Outcome::Failed(format!(
            "only the run's own file there ({s}; the host's is {host})"
        )),
        other => other,
    }
}

fn render(l: &Line) -> String {
    let mut s = format!("{:<8} {:<32} {}", l.verdict, l.name, l.inside);
    if !l.expected_matches && l.verdict == Verdict::Blocked {
        s.push_str(&format!("  (expected {})", l.expected));
    }
    if let Some(why) = l.not_applicable {
        s.push_str(&format!("  [not applicable on this kernel: {why}]"));
    } else if !l.control_ok {
        s.push_str(&format!("  [proves nothing: outside it got {}]", l.control));
    }
    if l.predicted == Prediction::Escaped && l.verdict == Verdict::Blocked {
        s.push_str("  (held by a layer the table doesn't list)");
    }
    if l.predicted == Prediction::Blocked && l.verdict == Verdict::Escaped {
        s.push_str("  (its holders don't hold it yet)");
    }
    if l.predicted == Prediction::Escaped && l.verdict == Verdict::Escaped {
        s.push_str("  (no layer in force holds it)");
    }
    s
}

fn run_one(
    sb: &Sandbox,
    fx: &Fixture,
    sp: &Spec,
    layers: &Layers,
    uid: u32,
    switched_off: bool,
) -> anyhow::Result<Line> {
    // A sanity check is predicted to work; an attempt to be blocked when a
    // holder is in force, else to get through.
    let predicted = Prediction::of(sp, layers, uid);
    let (control, inside) = match &sp.truth {
        // The report's checks are sanity checks judged by the report.
        Truth::Denied(want) => {
            use crate::sandbox::Layer::{Netns, Pidns, Seccomp, Userns};
            let (_, report) = run_inside_reported(sb, fx, sp, &sp.args);
            // The zygote's runs are watched: the seccomp layer's, in its
            // network namespace, forked into user and PID namespaces.
            let watchable = [Seccomp, Netns, Userns, Pidns]
                .iter()
                .all(|l| layers.has(*l));
            (
                Outcome::Ok("not needed".into()),
                want.judge(&report, watchable),
            )
        }
        // A sanity check needs no control: it must simply work inside.
        _ if sp.allowed => (
            Outcome::Ok("not needed".into()),
            run_inside(sb, fx, sp, &sp.args, None),
        ),
        Truth::Flood => (flood(fx, sp, None), flood(fx, sp, Some(sb))),
        Truth::Daemon => (daemon(fx, sp, None), daemon(fx, sp, Some(sb))),
        Truth::NextCall => (next_call(fx, sp, None), next_call(fx, sp, Some(sb))),
        Truth::OutliveParent => (outlive_control(fx), outlive_inside(fx)),
        Truth::Tty => {
            // The queue is flushed when the attempt's session ends, so it is
            // watched while the attempt runs (it lingers after injecting).
            let pty = Pty::open()?;
            let mut seen = 0;
            let c =
                run_control_watched(fx, sp, &sp.args, Some(pty.slave.try_clone()?), &mut || {
                    seen = seen.max(pty.pending())
                });
            let c = match c {
                Outcome::Ok(_) if seen == 0 => Outcome::Failed("no byte arrived".into()),
                other => other,
            };
            pty.flush();
            let mut seen = 0;
            let i = run_inside_watched(
                sb,
                fx,
                sp,
                &sp.args,
                Some(pty.slave.try_clone()?),
                &mut || seen = seen.max(pty.pending()),
            );
            let i = if seen > 0 {
                Outcome::Ok(format!("{seen} byte(s) reached the terminal's input"))
            } else {
                i
            };
            pty.flush();
            (c, i)
        }
        Truth::Files | Truth::FilesAfter => {
            fx.reset()?;
            let before = fingerprint(&fx.base.join("fs"));
            let c = run_control(fx, sp, &sp.args, None);
            let changed = fingerprint(&fx.base.join("fs")) != before;
            let c = match c {
                Outcome::Ok(s) if changed => Outcome::Ok(s),
                Outcome::Ok(s) => Outcome::Failed(format!("reported {s} but nothing changed")),
                other => other,
            };
            fx.reset()?;
            let before = fingerprint(&fx.base.join("fs"));
            let i = run_inside(sb, fx, sp, &sp.args, None);
            let after = fingerprint(&fx.base.join("fs"));
            let i = if after != before {
                let diff: Vec<String> = after
                    .iter()
                    .filter(|(k, v)| before.get(*k) != Some(v))
                    .map(|(k, _)| k.display().to_string())
                    .chain(
                        before
                            .keys()
                            .filter(|k| !after.contains_key(*k))
                            .map(|k| k.display().to_string()),
                    )
                    .collect();
                Outcome::Ok(format!("changed {}", diff.join(", ")))
            } else if sp.truth == Truth::FilesAfter {
                Outcome::Failed(format!(
                    "nothing left once the run was over (inside: {})",
                    i.text()
                ))
            } else {
                i
            };
            fx.reset()?;
            (c, i)
        }
        Truth::Listener(w) => {
            let n0 = fx.net.counters.get(*w);
            let c = run_control(fx, sp, &sp.args, None);
            let got = wait_for(|| fx.net.counters.get(*w) > n0, Duration::from_secs(2));
            let c = match c {
                Outcome::Ok(s) if !got => {
                    Outcome::Failed(format!("reported {s} but the listener saw nothing"))
                }
                other => other,
            };
            let n1 = fx.net.counters.get(*w);
            let i = run_inside(sb, fx, sp, &sp.args, None);
            std::thread::sleep(Duration::from_millis(50));
            let n2 = fx.net.counters.get(*w);
            let i = if n2 > n1 {
                Outcome::Ok(format!(
                    "the listener received {} connection(s)/datagram(s)",
                    n2 - n1
                ))
            } else {
                i
            };
            (c, i)
        }
        Truth::ExecBits(p) => {
            fx.reset()?;
            let c = match run_control(fx, sp, &sp.args, None) {
                Outcome::Ok(s) if exec_bits(p).is_some() => Outcome::Ok(s),
                Outcome::Ok(s) => {
                    Outcome::Failed(format!("reported {s} but the host sees no execute bit"))
                }
                other => other,
            };
            fx.reset()?;
            let i = run_inside(sb, fx, sp, &sp.args, None);
            // What counts is the host once the run is over.
            let i = match (exec_bits(p), i) {
                (Some(mode), _) => {
                    Outcome::Ok(format!("{} has mode {mode:o} on the host", p.display()))
                }
                (None, Outcome::Ok(s)) => {
                    Outcome::Failed(format!("no executable left on the host (inside: {s})"))
                }
                (None, other) => other,
            };
            fx.reset()?;
            (c, i)
        }
        Truth::DeepTmp => {
            let c = deep_tmp_control(fx, sp);
            let i = deep_tmp_inside(fx, sp);
            (c, i)
        }
        Truth::ProcHidesServer(pid) => {
            let judge = |o: Outcome| match o {
                Outcome::Ok(list) if carries_pid(&list, *pid) => {
                    Outcome::Ok(format!("the server's pid {pid} is listed"))
                }
                Outcome::Ok(list) => Outcome::Failed(format!(
                    "only the run's own processes ({})",
                    list.trim_start_matches("pids ")
                )),
                other => other,
            };
            let c = judge(run_control(fx, sp, &sp.args, None));
            let i = judge(run_inside(sb, fx, sp, &sp.args, None));
            (c, i)
        }
        Truth::NoServerPid(pid) => {
            let judge = |o: Outcome| match o {
                Outcome::Ok(path) if carries_pid(&path, *pid) => {
                    Outcome::Ok(format!("TMPDIR {path} carries the server's pid {pid}"))
                }
                Outcome::Ok(path) => Outcome::Failed(format!("no server pid in TMPDIR {path}")),
                other => other,
            };
            let c = judge(run_control(fx, sp, &sp.args, None));
            let i = judge(run_inside(sb, fx, sp, &sp.args, None));
            (c, i)
        }
        Truth::Watch(t) => {
            let mut last = Instant::now();
            let mut fire = || {
                if last.elapsed() > Duration::from_millis(100) {
                    t.fire();
                    last = Instant::now();
                }
            };
            let c = run_control_watched(fx, sp, &sp.args, None, &mut fire);
            let i = run_inside_watched(sb, fx, sp, &sp.args, None, &mut fire);
            (c, i)
        }
        Truth::HostFile(p) => {
            fx.reset()?;
            let host = std::fs::metadata(p)
                .map(|m| attempts::file_id(m.dev(), m.ino()))
                .with_context(|| format!("{} on the host", p.display()))?;
            let c = run_control(fx, sp, &sp.args, None);
            fx.reset()?;
            let i = judge_host_file(run_inside(sb, fx, sp, &sp.args, None), &host);
            (c, i)
        }
        Truth::HostMounts => {
            let host: std::collections::BTreeSet<u64> = attempts::listmount()
                .unwrap_or_default()
                .into_iter()
                .collect();
            let judge = |o: Outcome| match o {
                Outcome::Ok(list) => {
                    let ids: Vec<u64> = list.split(',').filter_map(|x| x.parse().ok()).collect();
                    let seen = ids.iter().filter(|i| host.contains(i)).count();
                    if seen > 0 {
                        Outcome::Ok(format!("listed {seen} of the host's {} mounts", host.len()))
                    } else {
                        Outcome::Failed(format!("only the run's own {} mounts", ids.len()))
                    }
                }
                other => other,
            };
            let c = judge(run_control(fx, sp, &sp.args, None));
            let i = judge(run_inside(sb, fx, sp, &sp.args, None));
            (c, i)
        }
        Truth::Reserved(p) => {
            let limit = crate::sandbox::policy::Rlimits::default().file_size;
            let on_disk = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.blocks() * 512);
            let scratch = fx.base.join("reserve-scratch");
            std::fs::write(&scratch, b"")?;
            let mut args = sp.args.clone();
            if let Some(a) = args.first_mut() {
                *a = Fixture::s(&scratch);
            }
            let c = match run_control(fx, sp, &args, None) {
                Outcome::Ok(s) if on_disk(&scratch) > limit => Outcome::Ok(s),
                Outcome::Ok(s) => Outcome::Failed(format!(
                    "reported {s} but the file holds {} bytes",
                    on_disk(&scratch)
                )),
                other => other,
            };
            let _ = std::fs::remove_file(&scratch);
            fx.reset()?;
            let i = run_inside(sb, fx, sp, &sp.args, None);
            let held = on_disk(p);
            let i = if held > limit {
                Outcome::Ok(format!(
                    "{} holds {} MiB on the host after the run",
                    p.display(),
                    held >> 20
                ))
            } else {
                i
            };
            fx.reset()?;
            (c, i)
        }
        Truth::Report => {
            fx.reset()?;
            let c = run_control(fx, sp, &sp.args, None);
            fx.reset()?;
            let i = run_inside(sb, fx, sp, &sp.args, None);
            (c, i)
        }
    };
    let control_ok = matches!(control, Outcome::Ok(_));
    let expected_matches = match (&inside, sp.allowed) {
        (Outcome::Ok(_), true) => true,
        // `A|B`: either answer is right (the first is what every layer in
        // force gives; the second what the layer behind gives alone).
        (Outcome::Failed(s), false) => sp.expect.split('|').any(|e| s.starts_with(e)),
        _ => false,
    };
    let verdict = Verdict::of(&inside, sp.allowed, &control, predicted, switched_off);
    let why_not_applicable = match verdict {
        Verdict::NotApplicable => not_applicable(&control),
        _ => None,
    };
    Ok(Line {
        name: sp.name.clone(),
        verdict,
        inside: inside.text().to_string(),
        expected: sp.expect.clone(),
        expected_matches,
        control: control.text().to_string(),
        control_ok,
        not_applicable: why_not_applicable,
        holders: sp.holders.clone(),
        predicted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_of_the_hosts_home_counts_only_the_hosts_own_file() {
        let host = attempts::file_id(2049, 131_073);
        // The run's TMPDIR tmpfs at the same path: another device.
        let own = Outcome::Ok("stat: 60 bytes, mode 41777, device 48, inode 1".into());
        match judge_host_file(own, &host) {
            Outcome::Failed(s) => {
                assert!(s.starts_with("only the run's own file"), "{s}");
                assert!(
                    s.ends_with("the host's is device 2049, inode 131073)"),
                    "{s}"
                );
            }
            other => panic!("{other:?}"),
        }
        // The same inode number on another device is still another file.
        let same_ino = Outcome::Ok("stat: 1 bytes, mode 40755, device 48, inode 131073".into());
        assert!(matches!(
            judge_host_file(same_ino, &host),
            Outcome::Failed(_)
        ));
        // Nor is an inode whose number merely begins with the host's.
        let longer = Outcome::Ok("stat: 1 bytes, mode 40755, device 2049, inode 1310731".into());
        assert!(matches!(judge_host_file(longer, &host), Outcome::Failed(_)));
        let other_dev = Outcome::Ok("stat: 1 bytes, mode 40755, device 12049, inode 131073".into());
        assert!(matches!(
            judge_host_file(other_dev, &host),
            Outcome::Failed(_)
        ));
        let seen = Outcome::Ok("stat: 1 bytes, mode 40755, device 2049, inode 131073".into());
        assert!(matches!(judge_host_file(seen, &host), Outcome::Ok(_)));
        let hidden = Outcome::Failed("ENOENT".into());
        assert_eq!(judge_host_file(hidden, &host).text(), "ENOENT");
    }
}

//! `sandbox probe --json` on this machine, as root (or whoever runs the
//! tests) and as an unprivileged user: every escape attempt is blocked with
//! its exact expected errno, every sanity check works, and the only attempts
//! allowed to "prove nothing" are one the kernel itself lacks (x32 system
//! calls, when the positive control gets ENOSYS outside too) and, for an
//! unprivileged user, opening a file by handle (the control needs
//! CAP_DAC_READ_SEARCH). Nothing gets through.

use std::time::Duration;

use crate::support::sandbox::{output_within, text, Who, World};
use serde_json::Value;

/// The suite's attempts and the exact result each must get inside.
const EXPECTED: &[(&str, &str)] = &[
    // The run's supervisor answers as the empty network namespace would.
    ("tcp-connect-127.0.0.1", "ENETUNREACH"),
    ("tcp-connect-::1", "ENETUNREACH"),
    // Its bind is refused.
    ("udp-send-127.0.0.1", "EPERM"),
    ("mptcp-connect-127.0.0.1", "ENETUNREACH"),
    // Its address flipped by another thread while the main thread
    // connects: every connect still refused, nothing reaches the host.
    ("connect-with-swapped-address", "ENETUNREACH"),
    ("dns-lookup-localhost", "EAI_AGAIN"),
    ("socket-raw-icmp", "EPERM"),
    ("socket-packet", "EPERM"),
    ("socket-netlink", "EPERM"),
    ("socket-vsock", "EPERM"),
    ("abstract-unix-connect", "EPERM"),
    ("host-unix-connect", "EPERM"),
    ("socketpair-dgram", "EPERM"),
    ("socketpair-seqpacket", "EPERM"),
    ("io-uring-setup", "EPERM"),
    ("x32-syscall", "SIGSYS"),
    ("unshare-userns", "EPERM"),
    ("clone-newuser", "EPERM"),
    ("clone3", "ENOSYS"),
    ("mount-tmpfs", "EPERM"),
    ("read-outside-root", "ENOENT"),
    ("list-outside-root", "ENOENT"),
    ("read-symlink-out-of-root", "ENOENT"),
    ("read-dotdot-out-of-root", "ENOENT"),
    ("exec-outside-runtime", "ENOENT"),
    ("write-database", "EROFS"),
    ("draft-create-in-root", "EROFS"),
    ("draft-create-in-home", "EROFS"),
    ("chmod-host-file", "EPERM"),
    ("chown-host-file", "EPERM"),
    ("utime-host-file", "EPERM"),
    ("setxattr-host-file", "EPERM"),
    ("read-server-environ", "ENOENT"),
    ("read-server-cmdline", "ENOENT"),
    ("kill-server", "ESRCH"),
    ("ptrace-server", "EPERM"),
    ("tiocsti-terminal", "EPERM"),
    ("setuid-0", "EINVAL"),
    ("no-new-privs-off", "NoNewPrivs=1"),
    ("seccomp-off", "Seccomp=2"),
    ("caps-held", "CapEff=0 CapPrm=0 CapInh=0 CapBnd=0 CapAmb=0"),
    ("fork-bomb", "EAGAIN after "),
    ("memory-bomb", "ENOMEM after "),
    ("stdout-flood", "contained"),
    ("daemon-outlives-call", "gone"),
    ("next-call-sees-nothing", "none"),
    ("run-outlives-killed-server", "gone"),
    ("loader-and-secret-env", "absent"),
    // Grants: a draft run may write the database and SQLite's companions,
    // nothing else in that folder.
    ("draft-db-replaced-by-symlink", "EBUSY"),
    ("draft-db-symlink-renamed-over", "EACCES"),
    ("draft-symlink-in-db-folder", "nothing left"),
    ("draft-mkdir-in-db-folder", "nothing left"),
    ("draft-fifo-in-db-folder", "nothing left"),
    ("draft-other-file-in-db-folder", "nothing left"),
    ("draft-rename-beside-db", "EBUSY"),
    ("draft-replace-beside-db", "EBUSY"),
    ("draft-write-beside-db", "EROFS"),
    ("draft-executable-in-db-folder", "EPERM"),
    ("draft-mknod-exec-companion", "EPERM"),
    // Disk and devices: no blocks reserved past the file-size limit, no
    // whiteout device (seccomp answers; the clean-up would remove one).
    ("draft-fallocate-keep-size", "EOPNOTSUPP"),
    (
        "draft-rename-whiteout",
        "nothing left once the run was over (inside: EPERM)",
    ),
    // Where a second layer lands in front of today's, either errno is
    // right: the first is today's holder, the second the mount namespace's.
    ("read-through-planted-symlink", "ENOENT"),
    ("stat-through-planted-symlink", "ENOENT"),
    // The run's temp folder.
    ("tmpdir-deep-chain", "cleaned up"),
    ("tmpdir-size-cap", "ENOSPC"),
    ("tmpdir-inode-cap", "ENOSPC"),
    ("tmpdir-name-carries-server-pid", "no server pid"),
    // Metadata of host files.
    ("file-setattr-host-file", "ENOSYS"),
    ("ioctl-setflags-read-only-fd", "ENOTTY"),
    ("ioctl-fssetxattr-read-only-fd", "ENOTTY"),
    ("ioctl-ext4-setversion-read-only-fd", "ENOTTY"),
    // Memory and code outside RLIMIT_AS.
    ("memfd-outside-rlimit-as", "ENOSYS"),
    ("memfd-exec", "ENOSYS"),
    // Observation outside the grant.
    ("inotify-system-tmp", "ENOSYS"),
    ("inotify-etc", "ENOSYS"),
    ("inotify-shared-root", "ENOSYS"),
    ("fanotify-outside", "ENOSYS"),
    ("getxattr-outside-file", "ENOENT"),
    ("stat-etc-hostname", "ENOENT"),
    (
        "uname-nodename",
        "nodename reachweaver-run domainname (none)",
    ),
    ("stat-outside-file", "ENOENT"),
    ("stat-server-home", "ENOENT"),
    ("readlink-outside", "ENOENT"),
    ("listmount-host-mounts", "ENOSYS"),
    ("statmount-host-mount", "ENOSYS"),
    ("stat-proc-server", "ENOENT"),
    ("list-proc", "EACCES"),
    // Execution outside the runtime.
    ("exec-from-tmpdir", "EPERM"),
    ("exec-via-loader-from-tmpdir", "exit 127"),
    ("mmap-exec-tmpdir", "EPERM"),
    ("open-by-handle-outside", "ENOSYS"),
];

const ALLOWED: &[&str] = &[
    "allowed-read-root",
    "allowed-list-root",
    "allowed-read-db",
    "allowed-write-tmpdir",
    "allowed-socketpair-stream",
    "allowed-start-child",
    "allowed-draft-writes-db-journal",
    "allowed-draft-fallocate-db",
    "allowed-read-beside-db",
    "report-names-a-connect",
    "report-names-a-lookup",
    "report-bounds-a-flood",
    "report-names-an-unlisted-call",
];

fn expected_for(name: &str) -> &'static str {
    if let Some((_, e)) = EXPECTED.iter().find(|(n, _)| *n == name) {
        return e;
    }
    for op in [
        "create", "write", "truncate", "rename", "unlink", "mkdir", "link", "mknod",
    ] {
        for place in ["root", "home", "outside"] {
            if name == format!("{op}-in-{place}") {
                // Seccomp refuses mknod before any path is looked at.
                if op == "mknod" {
                    return "EPERM";
                }
                // The read-only bind answers first; outside every grant
                // there is nothing to find.
                return if place == "outside" {
                    "ENOENT"
                } else {
                    "EROFS"
                };
            }
        }
    }
    panic!("the probe reports an attempt this test doesn't know: {name}");
}

/// Runs the probe; with `junit`, also returns the JUnit report it wrote.
fn probe(who: Who, junit: bool) -> (Value, Option<String>) {
    let w = World::new();
    let mut cmd = w.cmd(who, w.path());
    cmd.args(["sandbox", "probe", "--json"]);
    let xml = w.path().join("probe-junit.xml");
    if junit {
        cmd.arg("--junit").arg(&xml);
    }
    let out = output_within(cmd, Duration::from_secs(400));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "probe printed no JSON ({e}); exit {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        )
    });
    // Exit 1 when anything got through or broke, else 0.
    let want = if report["escaped"] == 0 && report["broken"] == 0 {
        0
    } else {
        1
    };
    assert_eq!(
        out.status.code(),
        Some(want),
        "probe exit status; report:\n{report:#}\nstderr:\n{}",
        text(&out.stderr)
    );
    let xml = junit
        .then(|| std::fs::read_to_string(&xml).unwrap_or_else(|e| panic!("no JUnit report: {e}")));
    (report, xml)
}

fn expected_matches(inside: &str, want: &str) -> bool {
    want.split('|').any(|w| inside.starts_with(w))
}

fn check(report: &Value, unprivileged: bool) {
    let attempts = report["attempts"].as_array().expect("attempts");
    assert_eq!(report["escaped"], 0, "{report:#}");
    assert_eq!(report["broken"], 0, "{report:#}");
    assert!(report["without"].is_null());
    assert!(
        report["layers"].as_str().unwrap().contains("seccomp"),
        "{}",
        report["layers"]
    );
    // The named attempts, 24 file operations, and the sanity checks.
    assert_eq!(
        attempts.len(),
        EXPECTED.len() + 24 + ALLOWED.len(),
        "{report:#}"
    );
    for a in attempts {
        let name = a["name"].as_str().unwrap();
        let inside = a["inside"].as_str().unwrap();
        let verdict = a["verdict"].as_str().unwrap();
        if ALLOWED.contains(&name) {
            assert_eq!(verdict, "allowed", "{name}: {a}");
            assert_eq!(a["predicted"], "allowed", "{name}: {a}");
            continue;
        }
        let want = expected_for(name);
        assert!(
            expected_matches(inside, want),
            "{name}: inside got {inside:?}, expected {want:?}: {a}"
        );
        assert_eq!(a["predicted"], "blocked", "{name}: {a}");
        if verdict == "not applicable" {
            // The kernel itself lacks the x32 ABI: nothing to escape through.
            assert_eq!(name, "x32-syscall", "{a}");
            assert_eq!(a["control"], "ENOSYS", "{a}");
            assert_eq!(
                a["not_applicable"], "this kernel lacks the system call (outside it got ENOSYS)",
                "{a}"
            );
        } else if verdict == "unproven" {
            match name {
                // Only a process with CAP_DAC_READ_SEARCH opens by handle.
                "open-by-handle-outside" if unprivileged => {
                    assert_eq!(a["control"], "EPERM", "{a}")
                }
                _ => panic!("{name} proved nothing (its control failed): {a}"),
            }
        } else {
            assert_eq!(verdict, "blocked", "{name}: {a}");
            assert_eq!(a["control_ok"], true, "{name}: {a}");
        }
    }
    let fork = attempts.iter().find(|a| a["name"] == "fork-bomb").unwrap();
    let count: usize = fork["inside"]
        .as_str()
        .unwrap()
        .trim_start_matches("EAGAIN after ")
        .trim_end_matches(" processes")
        .parse()
        .unwrap();
    // Unprivileged runs hit RLIMIT_NPROC (256); real root is exempt from it
    // and hits the PID namespace's pid_max (512) instead.
    if unprivileged {
        assert!(count < 256, "{fork}");
    } else {
        assert!(count < 512, "{fork}");
    }
}

#[test]
fn every_escape_is_blocked_for_the_user_running_the_tests() {
    let (report, xml) = probe(Who::Me, true);
    check(&report, !crate::support::sandbox::is_root());
    check_junit(&report, &xml.expect("JUnit report"));
}

#[test]
fn every_escape_is_blocked_for_an_unprivileged_user() {
    let (report, _) = probe(Who::Unprivileged, false);
    check(&report, true);
}

/// The JUnit report holds one test case per attempt, in order, with a
/// failure exactly where something got through or broke, skipped (with
/// the outside result) where an attempt proved nothing, and an error where
/// one never ran; all text is escaped XML.
fn check_junit(report: &Value, xml: &str) {
    let doc = xml::parse(xml);
    assert_eq!(doc.name, "testsuites", "{xml}");
    let suites: Vec<&xml::Element> = doc
        .children
        .iter()
        .filter(|c| c.name == "testsuite")
        .collect();
    assert_eq!(suites.len(), 1, "{xml}");
    let suite = suites[0];
    let cases: Vec<&xml::Element> = suite
        .children
        .iter()
        .filter(|c| c.name == "testcase")
        .collect();
    let attempts = report["attempts"].as_array().unwrap();
    assert_eq!(cases.len(), attempts.len(), "one test case per attempt");
    assert_eq!(
        suite.attr("tests"),
        Some(attempts.len().to_string().as_str())
    );
    let mut failures = 0;
    let mut errors = 0;
    let mut skipped = 0;
    for (case, a) in cases.iter().zip(attempts) {
        assert_eq!(case.attr("name"), a["name"].as_str(), "{a}");
        let failure = case.children.iter().find(|c| c.name == "failure");
        let error = case.children.iter().find(|c| c.name == "error");
        match a["verdict"].as_str().unwrap() {
            "blocked" | "allowed" => assert!(failure.is_none() && error.is_none(), "{a}"),
            "ESCAPED" | "BROKEN" => {
                let f = failure.unwrap_or_else(|| panic!("no failure for {a}"));
                // The element's text carries what happened inside, unescaped back.
                assert!(f.text.contains(a["inside"].as_str().unwrap()), "{a}");
                failures += 1;
            }
            // Proved nothing, or not promised here: not a fault (the
            // command exits 0), so skipped, with the reason.
            "unproven" | "not promised" | "not applicable" => {
                let s = case
                    .children
                    .iter()
                    .find(|c| c.name == "skipped")
                    .unwrap_or_else(|| panic!("not skipped: {a}"));
                assert!(failure.is_none() && error.is_none(), "{a}");
                if a["verdict"] == "unproven" {
                    let want = format!("outside it got {}", a["control"].as_str().unwrap());
                    assert!(s.attr("message").unwrap().ends_with(&want), "{a}");
                }
                if a["verdict"] == "not applicable" {
                    assert_eq!(s.attr("type"), Some("not-applicable"), "{a}");
                    let why = a["not_applicable"].as_str().unwrap();
                    assert!(s.attr("message").unwrap().ends_with(why), "{a}");
                }
                skipped += 1;
            }
            _ => {
                assert!(error.is_some(), "no error for {a}");
                errors += 1;
            }
        }
        // The details name the prediction the holders table made for it.
        let predicted = format!("predicted: {}", a["predicted"].as_str().unwrap());
        let details: String = case.children.iter().map(|c| c.text.clone()).collect();
        assert!(details.contains(&predicted), "{a}: {details}");
    }
    assert_eq!(suite.attr("failures"), Some(failures.to_string().as_str()));
    assert_eq!(suite.attr("errors"), Some(errors.to_string().as_str()));
    assert_eq!(suite.attr("skipped"), Some(skipped.to_string().as_str()));
    let layers = suite
        .children
        .iter()
        .find(|c| c.name == "properties")
        .and_then(|p| p.children.iter().find(|c| c.attr("name") == Some("layers")))
        .and_then(|p| p.attr("value"));
    assert_eq!(layers, report["layers"].as_str(), "{xml}");
}

/// A strict reader for the XML subset the report uses: elements,
/// attributes, text, the five named entities and numeric references. Any
/// raw `<`, `&` or quote where it doesn't belong fails the test.
mod xml {
    #[derive(Debug)]
    pub struct Element {
        pub name: String,
        pub attrs: Vec<(String, String)>,
        pub children: Vec<Element>,
        pub text: String,
    }

    impl Element {
        pub fn attr(&self, k: &str) -> Option<&str> {
            self.attrs
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        }
    }

    pub fn parse(s: &str) -> Element {
        let s = s.trim_start();
        let s = match s.strip_prefix("<?xml") {
            Some(rest) => &rest[rest.find("?>").expect("end of declaration") + 2..],
            None => s,
        };
        let mut p = Parser {
            s: s.as_bytes(),
            i: 0,
        };
        p.ws();
        let e = p.element();
        p.ws();
        assert_eq!(p.i, p.s.len(), "trailing content after the root element");
        e
    }

    struct Parser<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl Parser<'_> {
        fn ws(&mut self) {
            while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
        }
        fn name(&mut self) -> String {
            let start = self.i;
            while self.i < self.s.len()
                && (self.s[self.i].is_ascii_alphanumeric() || b"-_:.".contains(&self.s[self.i]))
            {
                self.i += 1;
            }
            assert!(self.i > start, "expected a name at {}", self.i);
            String::from_utf8(self.s[start..self.i].to_vec()).unwrap()
        }
        fn expect(&mut self, b: u8) {
            assert_eq!(
                self.s.get(self.i),
                Some(&b),
                "expected {:?} at {}",
                b as char,
                self.i
            );
            self.i += 1;
        }
        /// Text up to `end`, with references resolved.
        fn chars_until(&mut self, end: u8) -> String {
            let mut out = String::new();
            let start = self.i;
            while self.s[self.i] != end {
                match self.s[self.i] {
                    b'<' => panic!("raw '<' at {}", self.i),
                    b'&' => {
                        let semi = self.s[self.i..]
                            .iter()
                            .position(|&c| c == b';')
                            .expect("';'");
                        let ent = std::str::from_utf8(&self.s[self.i + 1..self.i + semi]).unwrap();
                        let c = match ent {
                            "amp" => '&',
                            "lt" => '<',
                            "gt" => '>',
                            "quot" => '"',
                            "apos" => '\'',
                            n if n.starts_with('#') => {
                                char::from_u32(n[1..].parse().expect("decimal reference")).unwrap()
                            }
                            other => panic!("unknown entity &{other}; at {}", self.i),
                        };
                        out.push(c);
                        self.i += semi + 1;
                    }
                    _ => {
                        let len = utf8_len(self.s[self.i]);
                        out.push_str(std::str::from_utf8(&self.s[self.i..self.i + len]).unwrap());
                        self.i += len;
                    }
                }
                assert!(self.i < self.s.len(), "unterminated text from {start}");
            }
            out
        }
        fn element(&mut self) -> Element {
            self.expect(b'<');
            let name = self.name();
            let mut attrs = Vec::new();
            loop {
                self.ws();
                match self.s[self.i] {
                    b'/' => {
                        self.i += 1;
                        self.expect(b'>');
                        return Element {
                            name,
                            attrs,
                            children: Vec::new(),
                            text: String::new(),
                        };
                    }
                    b'>' => {
                        self.i += 1;
                        break;
                    }
                    _ => {
                        let k = self.name();
                        self.expect(b'=');
                        self.expect(b'"');
                        let v = self.chars_until(b'"');
                        self.expect(b'"');
                        assert!(
                            !attrs.iter().any(|(n, _)| *n == k),
                            "duplicate attribute {k}"
                        );
                        attrs.push((k, v));
                    }
                }
            }
            let mut children = Vec::new();
            let mut text = String::new();
            loop {
                if self.s[self.i..].starts_with(b"</") {
                    self.i += 2;
                    let close = self.name();
                    assert_eq!(close, name, "mismatched closing tag");
                    self.ws();
                    self.expect(b'>');
                    return Element {
                        name,
                        attrs,
                        children,
                        text,
                    };
                }
                if self.s[self.i] == b'<' {
                    children.push(self.element());
                } else {
                    text.push_str(&self.chars_until(b'<'));
                }
            }
        }
    }

    fn utf8_len(b: u8) -> usize {
        match b {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            _ => 4,
        }
    }
}

/// A server whose HOME is /tmp finds, in its runs, the run's own /tmp at
/// that path: the probe must not take that for the host's home (it once
/// reported it as got through).
#[test]
fn a_home_at_the_runs_own_tmp_is_not_taken_for_the_hosts() {
    let w = World::new();
    let mut cmd = w.cmd(Who::Unprivileged, w.path());
    cmd.args(["sandbox", "probe", "--json"]).env("HOME", "/tmp");
    let out = output_within(cmd, Duration::from_secs(400));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "probe printed no JSON ({e}); exit {:?}\nstderr:\n{}",
            out.status,
            text(&out.stderr)
        )
    });
    let home = report["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "stat-server-home")
        .unwrap();
    assert_eq!(home["verdict"], "blocked", "{home}");
    let inside = home["inside"].as_str().unwrap();
    assert!(
        inside.starts_with("only the run's own file there (stat: "),
        "{home}"
    );
    let control = home["control"].as_str().unwrap();
    assert!(control.starts_with("stat: "), "{home}");
    // The host's file, as the control saw it, is the one named as the host's.
    let host_id = &control[control.find("device ").unwrap()..];
    assert!(
        inside.ends_with(&format!("the host's is {host_id})")),
        "{home}"
    );
    assert_eq!(report["escaped"], 0, "{report}");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

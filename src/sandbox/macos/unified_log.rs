//! What a run was refused, read from macOS's unified log (docs/DENIED.md).
//! Each run's profile tags its denials with a token of its own
//! (`(with message "reachweaver-run:<16 hex>")`), and `log stream` is asked
//! for the sandbox's denial lines carrying that token. Best effort: the log
//! is written by another process and delivered late, and may drop lines
//! under load, so a report from here says so
//! ([`crate::sandbox::denied::Watch::Log`]).
//!
//! The argv, the line parser and the mapping to [`Attempt`] are pure and
//! tested on every platform; starting and stopping `log` is macOS only.
//! None of this has run on a Mac: the line shape is the one Apple's
//! sandbox has been seen to write, and a line of any other shape is
//! skipped, never trusted.

use std::io::BufRead;

use crate::sandbox::denied::{Attempt, Denied};

/// `log`, by absolute path so `PATH` can't substitute another.
pub const LOG: &str = "/usr/bin/log";
/// The longest ndjson line read; a longer one is skipped whole, so a run
/// can't make the server hold an unbounded line.
pub const MAX_LINE: usize = 16 * 1024;
/// The longest process name or target kept, in bytes before escaping.
pub const MAX_FIELD: usize = 512;
/// The layer every attempt from here is held by.
pub const LAYER: &str = "sandbox-exec";

/// The sandbox's denial lines of one run: those the kernel's sandbox
/// extension writes (sender image under `/Sandbox`, process 0) or its
/// reporting subsystem does, that say `deny`, and that carry `tag`.
pub fn predicate(tag: &str) -> String {
    format!(
        "(((processID == 0) AND (senderImagePath CONTAINS \"/Sandbox\")) OR \
         (subsystem == \"com.apple.sandbox.reporting\")) AND \
         (eventMessage CONTAINS[c] \"deny\") AND (eventMessage CONTAINS \"{tag}\")"
    )
}

/// The argv of the `log stream` that watches one run.
pub fn argv(tag: &str) -> Vec<String> {
    [
        LOG,
        "stream",
        "--style",
        "ndjson",
        "--level",
        "info",
        "--predicate",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(std::iter::once(predicate(tag)))
    .collect()
}

/// One denial line: `Sandbox: curl(4321) deny(1) network-outbound 1.2.3.4:443`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The process name, escaped and bounded.
    pub process: String,
    pub pid: u32,
    /// How many refusals the line stands for (the sandbox folds repeats).
    pub count: u64,
    /// The operation (`network-outbound`, `file-read-data`, ...).
    pub operation: String,
    /// What it was refused on, escaped and bounded; `None` when the line
    /// names nothing.
    pub target: Option<String>,
}

/// Printable ASCII is kept, every other byte (and `\`) is written `\xNN`,
/// at most [`MAX_FIELD`] bytes of input, a cut marked with `...`: nothing
/// the run chose reaches a report unescaped or unbounded.
fn escape(s: &str) -> String {
    let bytes = s.as_bytes();
    let cut = bytes.len() > MAX_FIELD;
    let mut out = String::new();
    for &b in &bytes[..bytes.len().min(MAX_FIELD)] {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    if cut {
        out.push_str("...");
    }
    out
}

/// The denial in one ndjson line of `log stream`, if the line is one and
/// carries `tag`. Anything else (the stream's banner, JSON of another
/// shape, another run's line, a message this parser does not know) is
/// `None`.
pub fn parse_line(line: &str, tag: &str) -> Option<Refusal> {
    if line.len() > MAX_LINE {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let msg = v.get("eventMessage")?.as_str()?;
    // The token must end where this one's does: a line whose hex digits
    // run on past it carries some other token.
    let at = msg.find(tag)?;
    let after = &msg[at + tag.len()..];
    if after.starts_with(|c: char| c.is_ascii_hexdigit()) {
        return None;
    }
    // The rest is read with the token taken out, wherever the profile's
    // message put it.
    let untagged = format!("{}{after}", &msg[..at]);
    let untagged = untagged.trim();
    let body = untagged.strip_prefix("Sandbox: ").unwrap_or(untagged);
    let deny = body.find(") deny(")?;
    let (who, rest) = body.split_at(deny + 1);
    let open = who.rfind('(')?;
    let process = &who[..open];
    let pid: u32 = who[open + 1..who.len() - 1].parse().ok()?;
    let rest = rest.strip_prefix(" deny(")?;
    let close = rest.find(')')?;
    let count: u64 = rest[..close].parse().ok()?;
    let rest = rest[close + 1..].trim_start();
    let op_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let operation = &rest[..op_end];
    if operation.is_empty()
        || !operation
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'*')
    {
        return None;
    }
    let target = rest[op_end..].trim();
    Some(Refusal {
        process: escape(process),
        pid,
        count,
        operation: escape(operation),
        target: (!target.is_empty()).then(|| escape(target)),
    })
}

/// Operations named in reports as they are; any other is `other`, its
/// name kept beside the target.
const OPERATIONS: &[&str] = &[
    "network-outbound",
    "network-inbound",
    "network-bind",
    "file-read-data",
    "file-read-metadata",
    "file-read-xattr",
    "file-write-create",
    "file-write-data",
    "file-write-unlink",
    "file-write-mode",
    "file-write-xattr",
    "file-link",
    "file-map-executable",
    "file-ioctl",
    "process-exec",
    "process-exec-interpreter",
    "process-fork",
    "process-info-pidinfo",
    "signal",
    "sysctl-read",
    "sysctl-write",
    "mach-lookup",
    "iokit-open",
    "ipc-posix-shm-read-data",
    "ipc-posix-shm-write-create",
    "nvram-get",
];

/// A network target: `1.2.3.4:443`, `[::1]:53`, a unix socket's path,
/// perhaps after `local:` or `remote:`. (family, address, port)
fn network_target(t: &str) -> (Option<String>, String, Option<u16>) {
    let t = t
        .strip_prefix("local:")
        .or_else(|| t.strip_prefix("remote:"))
        .unwrap_or(t);
    if t.starts_with('/') {
        return (Some("unix".into()), t.to_string(), None);
    }
    if let Some(v6) = t.strip_prefix('[') {
        if let Some((addr, port)) = v6.split_once("]:") {
            if let Ok(p) = port.parse() {
                return (Some("inet6".into()), addr.to_string(), Some(p));
            }
        }
    }
    if let Some((addr, port)) = t.rsplit_once(':') {
        if !addr.contains(':') {
            if let Ok(p) = port.parse() {
                let family = addr
                    .parse::<std::net::Ipv4Addr>()
                    .is_ok()
                    .then(|| "inet".into());
                return (family, addr.to_string(), Some(p));
            }
        }
    }
    (None, t.to_string(), None)
}

/// The report's entry for one refusal.
pub fn attempt(r: &Refusal) -> Attempt {
    let known = OPERATIONS.iter().copied().find(|&o| o == r.operation);
    let base = Attempt {
        call: known.unwrap_or("other"),
        layer: LAYER,
        answer: "refused",
        process: Some(format!("{}({})", r.process, r.pid)),
        ..Attempt::default()
    };
    let network = matches!(known, Some("network-outbound" | "network-bind"));
    match (&r.target, network, known) {
        (Some(t), true, _) => {
            let (family, address, port) = network_target(t);
            Attempt {
                family,
                address: Some(address),
                port,
                ..base
            }
        }
        (Some(t), false, Some(_)) => Attempt {
            address: Some(t.clone()),
            ..base
        },
        (Some(t), false, None) => Attempt {
            address: Some(format!("{} {t}", r.operation)),
            ..base
        },
        (None, _, Some(_)) => Attempt {
            note: Some("no target logged"),
            ..base
        },
        (None, _, None) => Attempt {
            address: Some(r.operation.clone()),
            ..base
        },
    }
}

/// Keep one refusal: one entry, counted as many times as the line says
/// (at least once).
pub fn record(d: &mut Denied, r: &Refusal) {
    let a = attempt(r);
    let call = a.call;
    d.record(a);
    let more = r.count.saturating_sub(1);
    d.total = d.total.saturating_add(more);
    let n = d.counts.entry(call).or_insert(0);
    *n = n.saturating_add(more);
}

/// One line of at most [`MAX_LINE`] bytes into `buf` (without its
/// newline): `Ok(Some(true))` a whole line, `Ok(Some(false))` a longer one,
/// read to its end and dropped, `Ok(None)` the end of the stream.
pub fn read_line<R: BufRead>(r: &mut R, buf: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    buf.clear();
    let mut whole = true;
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            return Ok(if !whole {
                Some(false)
            } else if buf.is_empty() {
                None
            } else {
                Some(true)
            });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if whole && buf.len() + take <= MAX_LINE {
            buf.extend_from_slice(&chunk[..take]);
        } else {
            whole = false;
            buf.clear();
        }
        r.consume(take + usize::from(done));
        if done {
            return Ok(Some(whole));
        }
    }
}

#[cfg(target_os = "macos")]
pub use watch::LogWatch;

#[cfg(target_os = "macos")]
mod watch {
    use std::io::BufReader;
    use std::process::{Child, Command, Stdio};
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex, PoisonError};

    use super::{argv, parse_line, read_line, record};
    use crate::sandbox::denied::{Denied, Watch};

    /// How long after the run ends `log stream` is still read: the
    /// sandbox's lines reach the log asynchronously, so a run's last
    /// refusals are written after it exits. Later ones are lost, which is
    /// one reason the report says best effort.
    pub const GRACE: std::time::Duration = std::time::Duration::from_millis(1500);
    /// How long a run waits for `log stream` to print its first line (it
    /// announces its filter before it streams) before starting anyway.
    pub const START_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

    struct Running {
        log: Child,
        seen: Arc<Mutex<Denied>>,
        reader: std::thread::JoinHandle<()>,
    }

    /// One run's `log stream`: started before the run, read on a thread
    /// into a bounded [`Denied`], stopped [`GRACE`] after the run ends.
    pub struct LogWatch {
        running: Mutex<Option<Running>>,
        done: Mutex<Option<Denied>>,
    }

    impl LogWatch {
        /// Start watching for `tag`. If `log` can't be started the report
        /// says `unavailable`.
        pub fn start(tag: &str) -> LogWatch {
            let unavailable = || LogWatch {
                running: Mutex::new(None),
                done: Mutex::new(Some(Denied::new(Watch::Unavailable))),
            };
            let a = argv(tag);
            let Ok(mut log) = Command::new(&a[0])
                .args(&a[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
            else {
                return unavailable();
            };
            let Some(out) = log.stdout.take() else {
                let _ = log.kill();
                let _ = log.wait();
                return unavailable();
            };
            let seen = Arc::new(Mutex::new(Denied::new(Watch::Log)));
            let (started, first) = mpsc::channel();
            let tag = tag.to_string();
            let into = Arc::clone(&seen);
            let reader = std::thread::spawn(move || {
                let mut r = BufReader::new(out);
                let mut buf = Vec::new();
                let mut started = Some(started);
                while let Ok(Some(whole)) = read_line(&mut r, &mut buf) {
                    if let Some(s) = started.take() {
                        let _ = s.send(());
                    }
                    let line = String::from_utf8_lossy(&buf);
                    if let Some(refusal) = whole.then(|| parse_line(&line, &tag)).flatten() {
                        record(
                            &mut into.lock().unwrap_or_else(PoisonError::into_inner),
                            &refusal,
                        );
                    }
                }
            });
            // `log` prints its filter before it streams: the run starts
            // once it has, or after a bounded wait (best effort either way).
            let _ = first.recv_timeout(START_WAIT);
            LogWatch {
                running: Mutex::new(Some(Running { log, seen, reader })),
                done: Mutex::new(None),
            }
        }

        /// The report, once the run has ended: the first call waits
        /// [`GRACE`] for late lines and stops `log`; later calls return the
        /// same report. A `log` that ended by itself before it was stopped
        /// (refused, or killed) watched only part of the run: `unavailable`,
        /// with what it saw.
        pub fn finish(&self) -> Denied {
            let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(d) = done.as_ref() {
                return d.clone();
            }
            let taken = self
                .running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let Some(mut r) = taken else {
                return Denied::new(Watch::Unavailable);
            };
            std::thread::sleep(GRACE);
            let ended_by_itself = !matches!(r.log.try_wait(), Ok(None));
            let _ = r.log.kill();
            let _ = r.log.wait();
            let _ = r.reader.join();
            let mut d = r
                .seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if ended_by_itself {
                d.watch = Watch::Unavailable;
            }
            *done = Some(d.clone());
            d
        }
    }

    impl Drop for LogWatch {
        fn drop(&mut self) {
            let taken = self
                .running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(mut r) = taken {
                let _ = r.log.kill();
                let _ = r.log.wait();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::denied::{Watch, MAX_ENTRIES};

    const TAG: &str = "reachweaver-run:00112233445566ff";

    fn line(msg: &str) -> String {
        serde_json::json!({
            "timestamp": "2026-12-06 07:00:00.000000+0000",
            "messageType": "Error",
            "processID": 0,
            "senderImagePath": "/System/Library/Extensions/Sandbox.kext/Contents/MacOS/Sandbox",
            "subsystem": "",
            "eventMessage": msg,
        })
        .to_string()
    }

    #[test]
    fn the_token_is_sixteen_hex_digits() {
        use crate::sandbox::macos::RunTag;
        assert_eq!(RunTag(0xab).to_string(), "reachweaver-run:00000000000000ab");
        assert_eq!(
            RunTag(u64::MAX).to_string(),
            "reachweaver-run:ffffffffffffffff"
        );
        assert_eq!(RunTag(0x0011_2233_4455_66ff).to_string(), TAG);
    }

    #[test]
    fn the_predicate_and_argv_are_exactly_these() {
        assert_eq!(
            predicate(TAG),
            "(((processID == 0) AND (senderImagePath CONTAINS \"/Sandbox\")) OR \
             (subsystem == \"com.apple.sandbox.reporting\")) AND \
             (eventMessage CONTAINS[c] \"deny\") AND \
             (eventMessage CONTAINS \"reachweaver-run:00112233445566ff\")"
        );
        let a = argv(TAG);
        assert_eq!(
            a[..7],
            [
                "/usr/bin/log",
                "stream",
                "--style",
                "ndjson",
                "--level",
                "info",
                "--predicate"
            ]
        );
        assert_eq!(a[7], predicate(TAG));
        assert_eq!(a.len(), 8);
    }

    #[test]
    fn an_ipv4_connection_is_a_network_attempt() {
        let r = parse_line(
            &line(&format!(
                "Sandbox: curl(4321) deny(1) network-outbound 93.184.216.34:443 {TAG}"
            )),
            TAG,
        )
        .unwrap();
        assert_eq!(
            r,
            Refusal {
                process: "curl".into(),
                pid: 4321,
                count: 1,
                operation: "network-outbound".into(),
                target: Some("93.184.216.34:443".into()),
            }
        );
        let a = attempt(&r);
        assert_eq!(a.call, "network-outbound");
        assert_eq!(a.family.as_deref(), Some("inet"));
        assert_eq!(a.address.as_deref(), Some("93.184.216.34"));
        assert_eq!(a.port, Some(443));
        assert_eq!(a.layer, "sandbox-exec");
        assert_eq!(a.process.as_deref(), Some("curl(4321)"));
        assert_eq!(a.destination(), "93.184.216.34:443");
    }

    #[test]
    fn ipv6_and_unix_socket_targets_keep_their_family() {
        let v6 = parse_line(
            &line(&format!(
                "Sandbox: python3.12(77) deny(2) network-outbound [::1]:53 {TAG}"
            )),
            TAG,
        )
        .unwrap();
        assert_eq!(v6.process, "python3.12");
        assert_eq!(v6.count, 2);
        let a = attempt(&v6);
        assert_eq!(
            (a.family.as_deref(), a.address.as_deref(), a.port),
            (Some("inet6"), Some("::1"), Some(53))
        );
        assert_eq!(a.destination(), "[::1]:53");
        let unix = parse_line(
            &line(&format!(
                "{TAG} Sandbox: Python(9) deny(1) network-outbound /private/var/run/mDNSResponder"
            )),
            TAG,
        );
        // The token before the message: found, and not part of the target.
        let unix = unix.unwrap();
        let a = attempt(&unix);
        assert_eq!(a.family.as_deref(), Some("unix"));
        assert_eq!(a.address.as_deref(), Some("/private/var/run/mDNSResponder"));
        assert_eq!(a.port, None);
        let bind = attempt(
            &parse_line(
                &line(&format!(
                    "Sandbox: node(5) deny(1) network-bind local:*:8080 {TAG}"
                )),
                TAG,
            )
            .unwrap(),
        );
        assert_eq!(
            (
                bind.call,
                bind.family.as_deref(),
                bind.address.as_deref(),
                bind.port
            ),
            ("network-bind", None, Some("*"), Some(8080))
        );
    }

    #[test]
    fn file_and_unknown_operations_name_the_operation_and_target() {
        let r = parse_line(
            &line(&format!(
                "Sandbox: Google Chrome Helper(812) deny(1) file-read-data /Users/me/.ssh/id_ed25519 {TAG}"
            )),
            TAG,
        )
        .unwrap();
        assert_eq!(r.process, "Google Chrome Helper");
        let a = attempt(&r);
        assert_eq!(a.call, "file-read-data");
        assert_eq!(a.family, None);
        assert_eq!(a.address.as_deref(), Some("/Users/me/.ssh/id_ed25519"));
        assert_eq!(a.destination(), "/Users/me/.ssh/id_ed25519");
        let odd = attempt(
            &parse_line(
                &line(&format!(
                    "Sandbox: sh(3) deny(1) user-preference-read com.apple.x {TAG}"
                )),
                TAG,
            )
            .unwrap(),
        );
        assert_eq!(odd.call, "other");
        assert_eq!(
            odd.address.as_deref(),
            Some("user-preference-read com.apple.x")
        );
        let bare = attempt(
            &parse_line(
                &line(&format!("Sandbox: sh(3) deny(1) process-fork {TAG}")),
                TAG,
            )
            .unwrap(),
        );
        assert_eq!(bare.call, "process-fork");
        assert_eq!(bare.destination(), "no target logged");
        // A network operation with no target is an entry, not a panic.
        let net = attempt(
            &parse_line(
                &line(&format!("Sandbox: sh(3) deny(1) network-outbound {TAG}")),
                TAG,
            )
            .unwrap(),
        );
        assert_eq!(net.destination(), "no target logged");
    }

    #[test]
    fn another_runs_line_or_none_is_skipped() {
        let msg = "Sandbox: curl(1) deny(1) network-outbound 192.0.2.1:80";
        assert_eq!(parse_line(&line(msg), TAG), None);
        let other = format!("{msg} reachweaver-run:99112233445566ff");
        assert_eq!(parse_line(&line(&other), TAG), None);
        // A longer token that starts with this one's is another run's.
        let longer = format!("{msg} {TAG}0");
        assert_eq!(parse_line(&line(&longer), TAG), None);
        assert!(parse_line(&line(&format!("{msg} {TAG}")), TAG).is_some());
        assert!(parse_line(&line(&format!("{msg} {TAG}\"")), TAG).is_some());
    }

    #[test]
    fn garbage_and_unknown_shapes_are_skipped() {
        let t = format!(" {TAG}");
        for bad in [
            String::new(),
            "Filtering the log data using \"...\"".to_string(),
            "{".to_string(),
            "[1,2]".to_string(),
            format!("{{\"eventMessage\": 7, \"x\": \"{TAG}\"}}"),
            format!("{{\"message\": \"curl(1) deny(1) network-outbound{t}\"}}"),
            line(&format!(
                "Sandbox: curl(x) deny(1) network-outbound 1.2.3.4:5{t}"
            )),
            line(&format!(
                "Sandbox: curl(1) deny(y) network-outbound 1.2.3.4:5{t}"
            )),
            line(&format!("Sandbox: curl(1) deny(1){t}")),
            line(&format!("Sandbox: curl(1) deny(1) NETWORK 1.2.3.4:5{t}")),
            line(&format!(
                "Sandbox: curl 1 deny(1) network-outbound 1.2.3.4:5{t}"
            )),
            line(&format!(
                "Sandbox: curl(99999999999) deny(1) network-outbound a{t}"
            )),
            line(&format!("Sandbox: ) deny(1) network-outbound a{t}")),
            line(&format!("allow(1) network-outbound 1.2.3.4:5{t}")),
        ] {
            assert_eq!(parse_line(&bad, TAG), None, "{bad}");
        }
    }

    #[test]
    fn odd_characters_are_escaped_and_fields_bounded() {
        let r = parse_line(
            &line(&format!(
                "Sandbox: a\u{1b}b\\(1) deny(1) file-read-data /tmp/x\ny\u{e9} {TAG}"
            )),
            TAG,
        )
        .unwrap();
        assert_eq!(r.process, "a\\x1bb\\x5c");
        assert_eq!(r.target.as_deref(), Some("/tmp/x\\x0ay\\xc3\\xa9"));
        let exact = "p".repeat(MAX_FIELD - 1);
        let at = parse_line(
            &line(&format!(
                "Sandbox: x(1) deny(1) file-read-data /{exact} {TAG}"
            )),
            TAG,
        )
        .unwrap();
        assert_eq!(at.target.as_deref().map(str::len), Some(MAX_FIELD));
        let over = parse_line(
            &line(&format!(
                "Sandbox: x(1) deny(1) file-read-data /{exact}q {TAG}"
            )),
            TAG,
        )
        .unwrap();
        let t = over.target.unwrap();
        assert_eq!(t.len(), MAX_FIELD + 3);
        assert!(t.ends_with("p..."), "{t}");
    }

    #[test]
    fn lines_are_bounded_at_max_line() {
        let msg = format!("Sandbox: x(1) deny(1) file-read-data /a {TAG}");
        let base = line(&msg);
        let pad = |n: usize| {
            let mut v: serde_json::Value = serde_json::from_str(&base).unwrap();
            v["pad"] = serde_json::Value::String("z".repeat(n));
            v.to_string()
        };
        let short = pad(0).len();
        let fits = pad(MAX_LINE - short);
        assert_eq!(fits.len(), MAX_LINE);
        assert!(parse_line(&fits, TAG).is_some());
        let over = pad(MAX_LINE - short + 1);
        assert_eq!(over.len(), MAX_LINE + 1);
        assert_eq!(parse_line(&over, TAG), None);

        // The reader drops an over-long line whole and goes on.
        let stream = format!("{fits}\n{over}\n{base}\nlast");
        let mut r = std::io::BufReader::with_capacity(64, stream.as_bytes());
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), Some(true));
        assert_eq!(buf.len(), MAX_LINE);
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), Some(false));
        assert!(buf.is_empty());
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), Some(true));
        assert_eq!(buf, base.as_bytes());
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), Some(true));
        assert_eq!(buf, b"last");
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), None);
        let mut r = std::io::BufReader::new(&b"\n"[..]);
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), Some(true));
        assert!(buf.is_empty());
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), None);
    }

    #[test]
    fn a_folded_line_counts_as_many_and_the_list_stays_bounded() {
        let mut d = Denied::new(Watch::Log);
        let r = parse_line(
            &line(&format!(
                "Sandbox: curl(1) deny(5) network-outbound 192.0.2.1:80 {TAG}"
            )),
            TAG,
        )
        .unwrap();
        record(&mut d, &r);
        assert_eq!(d.total, 5);
        assert_eq!(d.counts["network-outbound"], 5);
        assert_eq!(d.entries.len(), 1);
        let zero = Refusal {
            count: 0,
            ..r.clone()
        };
        record(&mut d, &zero);
        assert_eq!(d.total, 6);
        for _ in 0..MAX_ENTRIES {
            record(&mut d, &r);
        }
        assert_eq!(d.entries.len(), MAX_ENTRIES);
        assert_eq!(d.omitted, 2);
        assert_eq!(d.to_json()["status"], "unified log (best effort)");
    }
}

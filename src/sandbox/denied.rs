//! What a run tried and was refused: the network calls its supervisor saw,
//! the other system calls refused by name, and whether the filter killed
//! the run (docs/DENIED.md). Plain data, filled by the supervisor
//! (`linux/supervise.rs`) and rendered here for the result's `_meta`, the
//! log line, `sandbox run --report` (JSON) and `--report-junit`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{json, Value};

/// How many attempts are kept in full; the rest are only counted, so a run
/// that floods its supervisor costs the server a bounded amount.
pub const MAX_ENTRIES: usize = 32;
/// Longest DNS name kept (the protocol's own bound on a name).
pub const MAX_NAME: usize = 253;

/// Whether anyone watched the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watch {
    /// A supervisor held the run's listener for the whole run.
    Watched,
    /// Nobody could watch (no seccomp layer, no user notification in the
    /// kernel, or a run started another way): no news is not good news.
    Unavailable,
    /// The supervisor stopped reading before the run ended: the kernel
    /// failed the run's watched calls from then on.
    Lost,
    /// Read from macOS's unified log after the fact (docs/DENIED.md): what
    /// was seen was refused, but a refusal the log dropped or delivered
    /// after the grace is missing, so none seen is not none made.
    Log,
}

impl Watch {
    fn name(&self) -> &'static str {
        match self {
            Watch::Watched => "watched",
            Watch::Unavailable => "unavailable",
            Watch::Lost => "supervisor lost",
            Watch::Log => "unified log (best effort)",
        }
    }
}

/// One refused attempt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attempt {
    /// The system call (`connect`, `sendto`, ...).
    pub call: &'static str,
    /// `inet`, `inet6`, `unix`, or the family's number.
    pub family: Option<String>,
    pub address: Option<String>,
    pub port: Option<u16>,
    /// The name a DNS query asked for, escaped.
    pub dns: Option<String>,
    /// Why the destination is missing, when it is.
    pub note: Option<&'static str>,
    /// The layer that holds the refusal.
    pub layer: &'static str,
    /// What the call was answered (`ENETUNREACH`, `success (not sent)`).
    pub answer: &'static str,
    /// The process that made it, `name(pid)`, escaped, where the source
    /// names it (the unified log does).
    pub process: Option<String>,
}

impl Attempt {
    /// Where it went, for people: `api.example.com (DNS via 127.0.0.1:53)`,
    /// `192.0.2.1:443`, or the note.
    pub fn destination(&self) -> String {
        let at = match (&self.address, self.port) {
            (Some(a), Some(p)) if a.contains(':') => Some(format!("[{a}]:{p}")),
            (Some(a), Some(p)) => Some(format!("{a}:{p}")),
            (Some(a), None) => Some(a.clone()),
            _ => None,
        };
        match (&self.dns, at) {
            (Some(n), Some(at)) => format!("{n} (DNS via {at})"),
            (Some(n), None) => format!("{n} (DNS)"),
            (None, Some(at)) => at,
            (None, None) => self.note.unwrap_or("unknown").to_string(),
        }
    }

    fn to_json(&self) -> Value {
        let mut o = serde_json::Map::new();
        o.insert("call".into(), json!(self.call));
        if let Some(f) = &self.family {
            o.insert("family".into(), json!(f));
        }
        if let Some(a) = &self.address {
            o.insert("address".into(), json!(a));
        }
        if let Some(p) = self.port {
            o.insert("port".into(), json!(p));
        }
        if let Some(n) = &self.dns {
            o.insert("dns".into(), json!(n));
        }
        if let Some(n) = self.note {
            o.insert("note".into(), json!(n));
        }
        o.insert("layer".into(), json!(self.layer));
        o.insert("answer".into(), json!(self.answer));
        if let Some(p) = &self.process {
            o.insert("process".into(), json!(p));
        }
        Value::Object(o)
    }
}

/// Refused calls of one name that got one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The system call's name (`ptrace`, or `syscall_<nr>`).
    pub call: Cow<'static, str>,
    /// The errno it was answered, by name (`EPERM`).
    pub answer: Cow<'static, str>,
    pub count: u64,
}

/// The system calls outside the network family a run was refused.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Syscalls {
    /// Refused calls by name and answer: the first [`MAX_ENTRIES`] kinds.
    pub entries: Vec<Refused>,
    /// Every refused call outside the compatibility class.
    pub total: u64,
    /// Calls of kinds met once the list was full: counted, not kept.
    pub omitted: u64,
    /// The compatibility class (calls clean runs make), by name: counted
    /// apart, never failing a job.
    pub compatibility: BTreeMap<Cow<'static, str>, u64>,
}

/// Everything refused in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    pub watch: Watch,
    /// The first [`MAX_ENTRIES`] attempts.
    pub entries: Vec<Attempt>,
    /// Every attempt, by call.
    pub counts: BTreeMap<&'static str, u64>,
    /// Every attempt, kept or not.
    pub total: u64,
    /// Attempts made once the list was full: counted, not kept.
    pub omitted: u64,
    /// The other refused system calls, by name.
    pub syscalls: Syscalls,
    /// The run's command died of `SIGSYS`: what the filter's kill gives (a
    /// foreign architecture's or an x32 call, which can't be named).
    pub killed_by_filter: bool,
}

impl Denied {
    pub fn new(watch: Watch) -> Denied {
        Denied {
            watch,
            entries: Vec::new(),
            counts: BTreeMap::new(),
            total: 0,
            omitted: 0,
            syscalls: Syscalls::default(),
            killed_by_filter: false,
        }
    }

    /// Count a refused system call by name: in the compatibility class
    /// apart, the others kept by name and answer while there is room for
    /// another kind.
    pub fn record_syscall(
        &mut self,
        call: Cow<'static, str>,
        answer: Cow<'static, str>,
        compatibility: bool,
    ) {
        let s = &mut self.syscalls;
        if compatibility {
            let n = s.compatibility.entry(call).or_insert(0);
            *n = n.saturating_add(1);
            return;
        }
        s.total = s.total.saturating_add(1);
        if let Some(r) = s
            .entries
            .iter_mut()
            .find(|r| r.call == call && r.answer == answer)
        {
            r.count = r.count.saturating_add(1);
        } else if s.entries.len() < MAX_ENTRIES {
            s.entries.push(Refused {
                call,
                answer,
                count: 1,
            });
        } else {
            s.omitted = s.omitted.saturating_add(1);
        }
    }

    /// Count an attempt, and keep it while there is room: where it was
    /// kept.
    pub fn record(&mut self, a: Attempt) -> Option<usize> {
        self.total = self.total.saturating_add(1);
        let n = self.counts.entry(a.call).or_insert(0);
        *n = n.saturating_add(1);
        if self.entries.len() < MAX_ENTRIES {
            self.entries.push(a);
            Some(self.entries.len() - 1)
        } else {
            self.omitted = self.omitted.saturating_add(1);
            None
        }
    }

    /// The DNS name a kept attempt turned out to ask for.
    pub fn name_dns(&mut self, entry: Option<usize>, name: String) {
        let Some(i) = entry.filter(|&i| i < self.entries.len()) else {
            return;
        };
        self.entries[i].dns = Some(name);
        // A resolver asks again (each server, each attempt): the same
        // attempt, just made last, is counted but kept once.
        if i + 1 == self.entries.len() && self.entries[..i].contains(&self.entries[i]) {
            self.entries.pop();
        }
    }

    /// The value of `_meta["io.reachweaver/denied"]` and of `--report`.
    pub fn to_json(&self) -> Value {
        let s = &self.syscalls;
        json!({
            "status": self.watch.name(),
            "network": self.total,
            "counts": self.counts,
            "entries": self.entries.iter().map(Attempt::to_json).collect::<Vec<_>>(),
            "omitted": self.omitted,
            "syscalls": {
                "refused": s.total,
                "entries": s.entries.iter().map(|r| json!({
                    "call": r.call, "answer": r.answer, "count": r.count,
                })).collect::<Vec<_>>(),
                "omitted": s.omitted,
                "compatibility": s.compatibility,
            },
            "killed_by_filter": self.killed_by_filter,
        })
    }

    /// Network attempts and refused system calls outside the
    /// compatibility class.
    pub fn refusals(&self) -> u64 {
        self.total.saturating_add(self.syscalls.total)
    }

    /// The log line's field: the count, or why there is none; the
    /// compatibility calls apart and the filter's kill when there were.
    pub fn log_field(&self) -> String {
        let mut f = match self.watch {
            Watch::Unavailable => " denied=unavailable".into(),
            Watch::Lost => format!(" denied={} supervisor=lost", self.refusals()),
            Watch::Watched => format!(" denied={}", self.refusals()),
            Watch::Log => format!(" denied={} watch=log", self.refusals()),
        };
        let compat: u64 = self.syscalls.compatibility.values().sum();
        if compat > 0 {
            f.push_str(&format!(" compat={compat}"));
        }
        if self.killed_by_filter {
            f.push_str(" killed=SIGSYS");
        }
        f
    }

    /// JUnit: one failing case per attempted destination (kept entries,
    /// each destination once), or one passing case when there was none; a
    /// run nobody watched is one skipped case, never a pass.
    pub fn to_junit(&self, suite: &str) -> String {
        let mut cases = String::new();
        let mut seen = std::collections::BTreeSet::new();
        let mut failures = 0;
        for a in &self.entries {
            let dest = a.destination();
            if !seen.insert(dest.clone()) {
                continue;
            }
            failures += 1;
            cases.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                xml(suite),
                xml(&format!("network: {dest}")),
                xml(&format!("{} refused by {}: {}", a.call, a.layer, a.answer)),
                xml(&a.to_json().to_string()),
            ));
        }
        for r in &self.syscalls.entries {
            failures += 1;
            cases.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\">\n      <failure message=\"{}\"/>\n    </testcase>\n",
                xml(suite),
                xml(&format!("syscall: {} ({})", r.call, r.answer)),
                xml(&format!("{} refused {} times: {}", r.call, r.count, r.answer)),
            ));
        }
        if self.syscalls.omitted > 0 {
            failures += 1;
            cases.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"syscall: {} more calls\">\n      <failure message=\"calls of kinds beyond the first {MAX_ENTRIES} were only counted\"/>\n    </testcase>\n",
                xml(suite),
                self.syscalls.omitted
            ));
        }
        if self.killed_by_filter {
            failures += 1;
            cases.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"killed by the seccomp filter\">\n      <failure message=\"the command died of SIGSYS\"/>\n    </testcase>\n",
                xml(suite)
            ));
        }
        let omitted = self.omitted;
        if omitted > 0 {
            failures += 1;
            cases.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"network: {omitted} more attempts\">\n      <failure message=\"{omitted} attempts beyond the first {MAX_ENTRIES} were only counted\"/>\n    </testcase>\n",
                xml(suite)
            ));
        }
        let skipped = match self.watch {
            Watch::Watched if failures == 0 => {
                cases.push_str(&format!(
                    "    <testcase classname=\"{}\" name=\"no network attempt\"/>\n",
                    xml(suite)
                ));
                0
            }
            Watch::Watched => 0,
            Watch::Log if failures > 0 => 0,
            // The log can't tell a clean run from one whose refusals it
            // dropped: nothing seen is a skip, never a pass.
            Watch::Log | Watch::Unavailable | Watch::Lost => {
                cases.push_str(&format!(
                    "    <testcase classname=\"{}\" name=\"network attempts\">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                    xml(suite),
                    xml(&format!("not known: {}", self.watch.name()))
                ));
                1
            }
        };
        let tests = cases.matches("<testcase ").count();
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" skipped=\"{skipped}\">\n{cases}</testsuite>\n",
            xml(suite)
        )
    }

    /// Whether `--fail-on-denied` fails the run: a network attempt, a
    /// refused call outside the compatibility class, or the filter's kill.
    pub fn fails(&self) -> bool {
        self.refusals() > 0 || self.killed_by_filter
    }
}

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// The name the first question of a DNS query asks for, `None` when the
/// datagram is not a query or its name is malformed. Labels are joined by
/// dots; bytes other than letters, digits, `-` and `_` are written `\xNN`,
/// so nothing the run chose reaches a log or a report unescaped. At most
/// [`MAX_NAME`] bytes of name are read.
pub fn dns_query_name(datagram: &[u8]) -> Option<String> {
    // The header: id, flags (QR=0 for a query, opcode 0), QDCOUNT >= 1.
    let header = datagram.get(..12)?;
    if header[2] & 0x80 != 0 || header[2] & 0x78 != 0 {
        return None;
    }
    if u16::from_be_bytes([header[4], header[5]]) == 0 {
        return None;
    }
    let mut at = 12;
    let mut name = String::new();
    let mut read = 0usize;
    loop {
        let len = usize::from(*datagram.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        // A compression pointer (or a reserved label type) has no place in
        // a question's first name.
        if len > 63 {
            return None;
        }
        read += len + 1;
        if read > MAX_NAME + 1 {
            return None;
        }
        let label = datagram.get(at..at + len)?;
        at += len;
        if !name.is_empty() {
            name.push('.');
        }
        for &b in label {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
                name.push(char::from(b));
            } else {
                name.push_str(&format!("\\x{b:02x}"));
            }
        }
    }
    // The root name asks for nothing nameable.
    if name.is_empty() {
        None
    } else {
        Some(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(labels: &[&[u8]]) -> Vec<u8> {
        let mut d = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for l in labels {
            d.push(l.len() as u8);
            d.extend_from_slice(l);
        }
        d.push(0);
        d.extend_from_slice(&[0, 1, 0, 1]);
        d
    }

    #[test]
    fn a_query_gives_its_name() {
        assert_eq!(
            dns_query_name(&query(&[b"api", b"example", b"com"])).as_deref(),
            Some("api.example.com")
        );
    }

    #[test]
    fn odd_bytes_in_a_name_are_escaped() {
        assert_eq!(
            dns_query_name(&query(&[b"a.b", b"x\ny<", b"_srv-1"])).as_deref(),
            Some("a\\x2eb.x\\x0ay\\x3c._srv-1")
        );
    }

    #[test]
    fn answers_empty_questions_pointers_and_truncation_give_nothing() {
        let mut answer = query(&[b"example", b"com"]);
        answer[2] |= 0x80;
        assert_eq!(dns_query_name(&answer), None);
        let mut opcode = query(&[b"example", b"com"]);
        opcode[2] = 0x08;
        assert_eq!(dns_query_name(&opcode), None);
        let mut none = query(&[b"example", b"com"]);
        none[5] = 0;
        assert_eq!(dns_query_name(&none), None);
        let mut pointer = query(&[b"example"]);
        pointer[12] = 0xc0;
        assert_eq!(dns_query_name(&pointer), None);
        let whole = query(&[b"example", b"com"]);
        // Cut anywhere inside the name: nothing.
        for end in 0..whole.len() - 4 {
            assert_eq!(dns_query_name(&whole[..end]), None, "cut at {end}");
        }
        assert_eq!(dns_query_name(&query(&[])), None);
    }

    #[test]
    fn names_are_bounded_at_the_protocols_limit() {
        // 4 labels of 63 bytes: 4*64 = 256 bytes of name, one past.
        let l = [b'a'; 63];
        assert_eq!(dns_query_name(&query(&[&l, &l, &l, &l])), None);
        // 253 characters: 3 labels of 63, one of 61 (3*64 + 62 = 254 read).
        let last = [b'b'; 61];
        let name = dns_query_name(&query(&[&l, &l, &l, &last])).unwrap();
        assert_eq!(name.len(), MAX_NAME);
        let over = [b'b'; 62];
        assert_eq!(dns_query_name(&query(&[&l, &l, &l, &over])), None);
        let long = [b'c'; 64];
        assert_eq!(dns_query_name(&query(&[&long])), None);
    }

    fn connect(i: u16) -> Attempt {
        Attempt {
            call: "connect",
            family: Some("inet".into()),
            address: Some("192.0.2.1".into()),
            port: Some(i),
            layer: "netns",
            answer: "ENETUNREACH",
            ..Attempt::default()
        }
    }

    #[test]
    fn the_first_entries_are_kept_and_the_rest_only_counted() {
        let mut d = Denied::new(Watch::Watched);
        for i in 0..MAX_ENTRIES as u16 {
            d.record(connect(i));
        }
        assert_eq!(d.entries.len(), MAX_ENTRIES);
        assert_eq!(d.to_json()["omitted"], 0);
        d.record(connect(9999));
        assert_eq!(d.entries.len(), MAX_ENTRIES);
        assert_eq!(d.total, MAX_ENTRIES as u64 + 1);
        let j = d.to_json();
        assert_eq!(j["omitted"], 1);
        assert_eq!(j["counts"]["connect"], MAX_ENTRIES as u64 + 1);
        assert_eq!(j["network"], MAX_ENTRIES as u64 + 1);
        assert_eq!(j["status"], "watched");
        assert_eq!(j["entries"][0]["address"], "192.0.2.1");
        assert_eq!(j["entries"][0]["port"], 0);
        assert_eq!(j["entries"][0]["layer"], "netns");
    }

    #[test]
    fn destinations_read_as_people_write_them() {
        assert_eq!(connect(443).destination(), "192.0.2.1:443");
        let v6 = Attempt {
            address: Some("2001:db8::1".into()),
            ..connect(80)
        };
        assert_eq!(v6.destination(), "[2001:db8::1]:80");
        let dns = Attempt {
            dns: Some("api.example.com".into()),
            address: Some("127.0.0.1".into()),
            port: Some(53),
            ..Attempt::default()
        };
        assert_eq!(dns.destination(), "api.example.com (DNS via 127.0.0.1:53)");
        let unread = Attempt {
            note: Some("address unreadable"),
            ..Attempt::default()
        };
        assert_eq!(unread.destination(), "address unreadable");
    }

    #[test]
    fn the_log_field_says_unavailable_and_lost_apart_from_a_count() {
        let mut d = Denied::new(Watch::Watched);
        assert_eq!(d.log_field(), " denied=0");
        assert!(!d.fails());
        d.record(connect(1));
        assert_eq!(d.log_field(), " denied=1");
        assert!(d.fails());
        assert_eq!(
            Denied::new(Watch::Unavailable).log_field(),
            " denied=unavailable"
        );
        assert_eq!(
            Denied::new(Watch::Unavailable).to_json()["status"],
            "unavailable"
        );
        d.watch = Watch::Lost;
        assert_eq!(d.log_field(), " denied=1 supervisor=lost");
    }

    #[test]
    fn junit_has_one_failing_case_per_destination() {
        let mut d = Denied::new(Watch::Watched);
        let clean = d.to_junit("run");
        assert!(
            clean.contains("tests=\"1\" failures=\"0\" skipped=\"0\""),
            "{clean}"
        );
        assert!(clean.contains("name=\"no network attempt\"/>"));
        d.record(connect(443));
        d.record(connect(443));
        d.record(Attempt {
            dns: Some("a<b".into()),
            ..connect(53)
        });
        let j = d.to_junit("run \"x\"");
        assert!(
            j.contains("tests=\"2\" failures=\"2\" skipped=\"0\""),
            "{j}"
        );
        assert!(j.contains("name=\"network: 192.0.2.1:443\""));
        assert!(j.contains("name=\"network: a&lt;b (DNS via 192.0.2.1:53)\""));
        assert!(j.contains("classname=\"run &quot;x&quot;\""));
        assert!(!j.contains("no network attempt"));
        let un = Denied::new(Watch::Unavailable).to_junit("run");
        assert!(
            un.contains("tests=\"1\" failures=\"0\" skipped=\"1\""),
            "{un}"
        );
    }

    #[test]
    fn a_lookup_asked_again_is_counted_and_kept_once() {
        let mut d = Denied::new(Watch::Watched);
        let first = d.record(connect(53));
        d.name_dns(first, "example.com".into());
        let other = d.record(connect(443));
        let again = d.record(connect(53));
        assert_eq!((first, other, again), (Some(0), Some(1), Some(2)));
        // The same attempt again, made last: counted, not kept twice.
        d.name_dns(again, "example.com".into());
        assert_eq!(d.entries.len(), 2);
        assert_eq!(d.total, 3);
        // Kept once is not left out: nothing is omitted.
        assert_eq!(d.to_json()["omitted"], 0);
        let third = d.record(connect(53));
        d.name_dns(third, "other.example".into());
        assert_eq!(d.entries.len(), 3);
        assert_eq!(d.entries[2].dns.as_deref(), Some("other.example"));
        d.name_dns(Some(99), "nowhere".into());
        d.name_dns(None, "nowhere".into());
        assert_eq!(d.entries.len(), 3);
    }

    fn refuse(d: &mut Denied, call: &'static str, answer: &'static str) {
        d.record_syscall(Cow::Borrowed(call), Cow::Borrowed(answer), false);
    }

    #[test]
    fn refused_calls_are_counted_by_name_and_answer() {
        let mut d = Denied::new(Watch::Watched);
        refuse(&mut d, "ptrace", "EPERM");
        refuse(&mut d, "mount", "EPERM");
        refuse(&mut d, "mount", "EPERM");
        refuse(&mut d, "ioctl", "ENOTTY");
        refuse(&mut d, "ioctl", "EPERM");
        let j = d.to_json();
        assert_eq!(
            j["syscalls"],
            json!({
                "refused": 5,
                "entries": [
                    {"call": "ptrace", "answer": "EPERM", "count": 1},
                    {"call": "mount", "answer": "EPERM", "count": 2},
                    {"call": "ioctl", "answer": "ENOTTY", "count": 1},
                    {"call": "ioctl", "answer": "EPERM", "count": 1},
                ],
                "omitted": 0,
                "compatibility": {},
            })
        );
        assert_eq!(j["network"], 0);
        assert_eq!(j["killed_by_filter"], false);
        assert_eq!(d.log_field(), " denied=5");
        assert!(d.fails());
    }

    #[test]
    fn the_first_kinds_of_refused_calls_are_kept_and_the_rest_only_counted() {
        let mut d = Denied::new(Watch::Watched);
        let names: Vec<&'static str> = (0..=MAX_ENTRIES)
            .map(|i| &*Box::leak(format!("call_{i}").into_boxed_str()))
            .collect();
        for n in &names[..MAX_ENTRIES] {
            refuse(&mut d, n, "ENOSYS");
        }
        assert_eq!(d.syscalls.entries.len(), MAX_ENTRIES);
        assert_eq!(d.syscalls.omitted, 0);
        // A kind already kept is still counted in its entry when full.
        refuse(&mut d, names[0], "ENOSYS");
        assert_eq!(d.syscalls.entries[0].count, 2);
        assert_eq!(d.syscalls.omitted, 0);
        // One kind more: counted, not kept.
        refuse(&mut d, names[MAX_ENTRIES], "ENOSYS");
        refuse(&mut d, names[MAX_ENTRIES], "ENOSYS");
        assert_eq!(d.syscalls.entries.len(), MAX_ENTRIES);
        assert_eq!(d.syscalls.omitted, 2);
        assert_eq!(d.syscalls.total, MAX_ENTRIES as u64 + 3);
        assert_eq!(d.to_json()["syscalls"]["omitted"], 2);
        let j = d.to_junit("run");
        assert!(j.contains("name=\"syscall: 2 more calls\""), "{j}");
    }

    #[test]
    fn compatibility_calls_are_counted_apart_and_fail_nothing() {
        let mut d = Denied::new(Watch::Watched);
        for _ in 0..3 {
            d.record_syscall(Cow::Borrowed("clone3"), Cow::Borrowed("ENOSYS"), true);
        }
        d.record_syscall(Cow::Borrowed("fchown"), Cow::Borrowed("EPERM"), true);
        assert!(!d.fails());
        assert_eq!(d.refusals(), 0);
        assert_eq!(d.log_field(), " denied=0 compat=4");
        let j = d.to_json();
        assert_eq!(j["syscalls"]["refused"], 0);
        assert_eq!(j["syscalls"]["entries"], json!([]));
        assert_eq!(
            j["syscalls"]["compatibility"],
            json!({"clone3": 3, "fchown": 1})
        );
        let junit = d.to_junit("run");
        assert!(
            junit.contains("tests=\"1\" failures=\"0\"") && junit.contains("no network attempt"),
            "{junit}"
        );
        // One call outside the class fails the job.
        refuse(&mut d, "ptrace", "EPERM");
        assert!(d.fails());
        assert_eq!(d.log_field(), " denied=1 compat=4");
        let junit = d.to_junit("run");
        assert!(
            junit.contains("failures=\"1\"") && junit.contains("name=\"syscall: ptrace (EPERM)\""),
            "{junit}"
        );
    }

    #[test]
    fn a_run_killed_by_the_filter_fails_and_says_so() {
        let mut d = Denied::new(Watch::Watched);
        d.killed_by_filter = true;
        assert!(d.fails());
        assert_eq!(d.log_field(), " denied=0 killed=SIGSYS");
        assert_eq!(d.to_json()["killed_by_filter"], true);
        let j = d.to_junit("run");
        assert!(
            j.contains("failures=\"1\"") && j.contains("killed by the seccomp filter"),
            "{j}"
        );
    }

    #[test]
    fn a_report_read_from_the_log_says_best_effort_everywhere() {
        let mut d = Denied::new(Watch::Log);
        assert_eq!(d.to_json()["status"], "unified log (best effort)");
        assert_eq!(d.log_field(), " denied=0 watch=log");
        assert!(!d.fails());
        // Nothing seen is not a pass.
        let none = d.to_junit("run");
        assert!(
            none.contains("tests=\"1\" failures=\"0\" skipped=\"1\""),
            "{none}"
        );
        assert!(none.contains("not known: unified log (best effort)"));
        assert!(!none.contains("no network attempt"));
        d.record(Attempt {
            process: Some("curl(4321)".into()),
            ..connect(443)
        });
        assert!(d.fails());
        assert_eq!(d.log_field(), " denied=1 watch=log");
        assert_eq!(d.to_json()["entries"][0]["process"], "curl(4321)");
        let seen = d.to_junit("run");
        assert!(
            seen.contains("tests=\"1\" failures=\"1\" skipped=\"0\""),
            "{seen}"
        );
        // Absent where the source names no process.
        assert!(connect(1).to_json().get("process").is_none());
    }
}

//! Limits on how much the backend may be asked to do (README, Options of `mcp-serve`): the
//! per-minute call budget, the fixed caps on what a run may print, and how
//! many calls the server's own process limits let run at once.
//!
//! The rate limit bounds how hard a model in a loop can drive the backend.
//! It counts calls that started, in a sliding window, so a burst of refused
//! calls (bad arguments, or over the limit) costs nothing and a started call
//! counts even if it is later cancelled or times out.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{ErrorCode, ToolError};

/// The sliding window of the rate limit.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);

/// stderr kept from a run; only its first line is ever used.
pub(crate) const MAX_STDERR_BYTES: usize = 64 * 1024;

/// The catalog run's bounds (docs/BACKEND.md, Catalog).
pub(crate) const CATALOG_MAX_BYTES: usize = 16 * 1024 * 1024;
pub(crate) const CATALOG_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the limiter gets the time from; tests substitute a fake.
pub(crate) trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// At most `max` starts in any [`WINDOW`].
pub(crate) struct RateLimiter {
    max: usize,
    clock: Box<dyn Clock>,
    starts: Mutex<VecDeque<Instant>>,
}

impl RateLimiter {
    pub(crate) fn new(max: u32) -> Self {
        Self::with_clock(max, Box::new(SystemClock))
    }

    pub(crate) fn with_clock(max: u32, clock: Box<dyn Clock>) -> Self {
        Self {
            max: max.max(1) as usize,
            clock,
            starts: Mutex::new(VecDeque::new()),
        }
    }

    /// Record a start if the budget allows it; otherwise say how long to wait.
    pub(crate) fn try_start(&self) -> Result<(), ToolError> {
        let now = self.clock.now();
        // The queue is only ever pushed and popped whole; a poisoned lock still holds a valid one.
        let mut starts = self.starts.lock().unwrap_or_else(|e| e.into_inner());
        while starts
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW)
        {
            starts.pop_front();
        }
        if starts.len() < self.max {
            starts.push_back(now);
            return Ok(());
        }
        let oldest = starts.front().copied().unwrap_or(now);
        let wait = WINDOW.saturating_sub(now.saturating_duration_since(oldest));
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        Err(ToolError::templated(
            ErrorCode::RateLimited,
            &format!(
                "at most {} may start per minute. Wait {} second{}",
                self.max,
                secs.max(1),
                if secs.max(1) == 1 { "" } else { "s" }
            ),
        ))
    }
}

/// Descriptors the server holds for one call at most, while its run
/// starts: the run's stdout, stderr and status pipes, its run channel and
/// the zygote's socket pair, `/dev/null` for stdin, the run cgroup's
/// `cgroup.procs` (four stay open while the run goes on: stdout, stderr,
/// the run channel and the run's pidfd).
pub(crate) const DESCRIPTORS_PER_CALL: u64 = 10;
/// Descriptors kept for the server itself beyond those open at start: the
/// zygote's control socket and the pipes that start it, files read while a
/// run is set up, and slack.
pub(crate) const DESCRIPTORS_KEPT: u64 = 16;
/// Tasks (threads and processes counted against the user's process limit)
/// one call adds: its worker thread, the run's init, the backend and one
/// process of the backend's own.
pub(crate) const TASKS_PER_CALL: u64 = 4;
/// Tasks kept for the server itself beyond those of its user at start: its
/// reader, writer, logger and signal threads, the zygote and its keeper
/// thread, the spare init the zygote forks ahead, and slack.
pub(crate) const TASKS_KEPT: u64 = 16;

/// The process limits that bound how many calls can run at once, as found
/// at start. `None`: no limit, or one the kernel does not apply to us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcessLimits {
    /// `RLIMIT_NOFILE` (soft).
    pub open_files: Option<u64>,
    /// Descriptors open now.
    pub open_now: u64,
    /// `RLIMIT_NPROC` (soft); counts every task of the real user.
    pub tasks: Option<u64>,
    /// Tasks of the real user now.
    pub tasks_now: u64,
}

/// How many calls run at once, and why fewer than asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Concurrency {
    pub calls: usize,
    /// One sentence per limit that lowered it, for the start-up line.
    pub notes: Vec<String>,
}

/// The calls that fit under `total` with `used` taken and `kept` kept,
/// `per` each (never fewer than none).
fn fitting(total: u64, used: u64, kept: u64, per: u64) -> u64 {
    total.saturating_sub(used).saturating_sub(kept) / per
}

/// Lower `asked` to what the process limits can hold, at least one call
/// (a call that then runs out is answered `resource_exhausted`). Pure.
pub(crate) fn fit(asked: usize, limits: &ProcessLimits) -> Concurrency {
    let mut calls = asked.max(1) as u64;
    let mut notes = Vec::new();
    let mut lower = |fits: u64, what: String| {
        if fits < calls {
            let now = fits.max(1);
            let mut note = format!(
                "--max-concurrent-calls {asked} lowered to {now} to fit {what}; raise the limit to run more at once"
            );
            if fits == 0 {
                note = format!(
                    "{what} leaves room for no call at all: calls run one at a time and may be answered resource_exhausted; raise the limit"
                );
            }
            notes.push(note);
            calls = now;
        }
    };
    if let Some(total) = limits.open_files {
        let fits = fitting(
            total,
            limits.open_now,
            DESCRIPTORS_KEPT,
            DESCRIPTORS_PER_CALL,
        );
        lower(
            fits,
            format!(
                "RLIMIT_NOFILE {total} ({DESCRIPTORS_PER_CALL} descriptors per call; {} open at start, {DESCRIPTORS_KEPT} kept)",
                limits.open_now
            ),
        );
    }
    if let Some(total) = limits.tasks {
        let fits = fitting(total, limits.tasks_now, TASKS_KEPT, TASKS_PER_CALL);
        lower(
            fits,
            format!(
                "RLIMIT_NPROC {total} ({TASKS_PER_CALL} threads and processes per call; {} of this user's at start, {TASKS_KEPT} kept)",
                limits.tasks_now
            ),
        );
    }
    Concurrency {
        calls: usize::try_from(calls).unwrap_or(usize::MAX),
        notes,
    }
}

impl ProcessLimits {
    /// This process's limits and use, now.
    pub(crate) fn measure() -> ProcessLimits {
        let open_files = soft_limit(libc::RLIMIT_NOFILE);
        // Root (more exactly CAP_SYS_RESOURCE or CAP_SYS_ADMIN, which root
        // has) is not held to RLIMIT_NPROC.
        // SAFETY: geteuid can't fail.
        let exempt = unsafe { libc::geteuid() } == 0;
        let tasks = if exempt {
            None
        } else {
            soft_limit(libc::RLIMIT_NPROC)
        };
        ProcessLimits {
            open_files,
            open_now: open_descriptors(),
            tasks,
            tasks_now: if tasks.is_some() { user_tasks() } else { 0 },
        }
    }
}

#[cfg(target_os = "linux")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_os = "linux"))]
type Resource = libc::c_int;

fn soft_limit(resource: Resource) -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(resource, &mut r) } != 0 || r.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    Some(r.rlim_cur)
}

/// Descriptors this process has open (the listing's own not counted).
fn open_descriptors() -> u64 {
    let dir = if cfg!(target_os = "linux") {
        "/proc/self/fd"
    } else {
        "/dev/fd"
    };
    std::fs::read_dir(dir).map_or(0, |d| (d.count() as u64).saturating_sub(1))
}

/// Threads of every process whose real user is ours: what `RLIMIT_NPROC`
/// counts. Only Linux shows them; elsewhere the limit is taken as unused.
fn user_tasks() -> u64 {
    if !cfg!(target_os = "linux") {
        return 0;
    }
    // SAFETY: getuid can't fail.
    let uid = unsafe { libc::getuid() }.to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut tasks = 0;
    for e in procs.flatten() {
        if !e
            .file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next().map(str::to_string))
        };
        if field("Uid:").as_deref() == Some(uid.as_str()) {
            tasks += field("Threads:")
                .and_then(|t| t.parse::<u64>().ok())
                .unwrap_or(1);
        }
    }
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn limits(open_files: Option<u64>, tasks: Option<u64>) -> ProcessLimits {
        ProcessLimits {
            open_files,
            open_now: 6,
            tasks,
            tasks_now: 3,
        }
    }

    #[test]
    fn without_limits_the_asked_concurrency_stands() {
        let c = fit(16, &limits(None, None));
        assert_eq!((c.calls, c.notes.len()), (16, 0));
        // Zero is never asked (clap refuses it), but one call always runs.
        assert_eq!(fit(0, &limits(None, None)).calls, 1);
    }

    #[test]
    fn descriptors_bound_the_calls_at_the_exact_boundary() {
        // 6 open + 16 kept + 4 calls of 10 = 62.
        assert_eq!(fit(16, &limits(Some(62), None)).calls, 4);
        assert_eq!(fit(16, &limits(Some(61), None)).calls, 3);
        assert_eq!(fit(16, &limits(Some(72), None)).calls, 5);
        // Exactly enough for what is asked: nothing lowered, nothing said.
        let c = fit(4, &limits(Some(62), None));
        assert_eq!((c.calls, c.notes.len()), (4, 0));
        let c = fit(16, &limits(Some(64), None));
        assert_eq!(
            c.notes,
            [
                "--max-concurrent-calls 16 lowered to 4 to fit RLIMIT_NOFILE 64 (10 descriptors \
              per call; 6 open at start, 16 kept); raise the limit to run more at once"
            ]
        );
    }

    #[test]
    fn tasks_bound_the_calls_at_the_exact_boundary() {
        // 3 tasks + 16 kept + 2 calls of 4 = 27.
        assert_eq!(fit(8, &limits(None, Some(27))).calls, 2);
        assert_eq!(fit(8, &limits(None, Some(26))).calls, 1);
        let c = fit(8, &limits(None, Some(100)));
        assert_eq!((c.calls, c.notes.len()), (8, 0));
    }

    #[test]
    fn the_tighter_limit_wins_and_both_are_named() {
        let c = fit(16, &limits(Some(64), Some(27)));
        assert_eq!(c.calls, 2);
        assert_eq!(c.notes.len(), 2);
        assert!(c.notes[0].contains("RLIMIT_NOFILE 64"), "{:?}", c.notes);
        assert!(
            c.notes[1].contains("lowered to 2 to fit RLIMIT_NPROC 27"),
            "{:?}",
            c.notes
        );
    }

    #[test]
    fn no_room_at_all_still_runs_one_call_and_says_so() {
        let c = fit(4, &limits(Some(31), None));
        assert_eq!(c.calls, 1);
        assert_eq!(
            c.notes,
            [
                "RLIMIT_NOFILE 31 (10 descriptors per call; 6 open at start, 16 kept) leaves room \
              for no call at all: calls run one at a time and may be answered resource_exhausted; \
              raise the limit"
            ]
        );
    }

    #[test]
    fn this_process_is_measured() {
        let l = ProcessLimits::measure();
        // Test harnesses have at least stdin, stdout and stderr.
        assert!(l.open_now >= 3, "{l:?}");
        if l.tasks.is_some() {
            assert!(l.tasks_now >= 1, "{l:?}");
        }
    }

    #[derive(Clone)]
    struct FakeClock(Arc<Mutex<Instant>>);

    impl FakeClock {
        fn new() -> Self {
            FakeClock(Arc::new(Mutex::new(Instant::now())))
        }
        fn advance(&self, d: Duration) {
            *self.0.lock().unwrap() += d;
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> Instant {
            *self.0.lock().unwrap()
        }
    }

    fn limiter(max: u32) -> (RateLimiter, FakeClock) {
        let clock = FakeClock::new();
        (RateLimiter::with_clock(max, Box::new(clock.clone())), clock)
    }

    #[test]
    fn allows_n_then_refuses_with_seconds_to_wait() {
        let (l, clock) = limiter(3);
        for _ in 0..3 {
            l.try_start().unwrap();
            clock.advance(Duration::from_secs(10));
        }
        // Oldest start was 30 s ago: 30 s to wait.
        let e = l.try_start().unwrap_err();
        assert_eq!(e.code(), "rate_limited");
        assert!(e.message().contains("Wait 30 seconds"), "{}", e.message());
    }

    #[test]
    fn window_slides() {
        let (l, clock) = limiter(2);
        l.try_start().unwrap();
        clock.advance(Duration::from_secs(30));
        l.try_start().unwrap();
        clock.advance(Duration::from_secs(29));
        assert!(l.try_start().is_err());
        clock.advance(Duration::from_secs(1));
        // The first start is now exactly 60 s old and leaves the window.
        l.try_start().unwrap();
        assert!(l.try_start().is_err());
    }

    #[test]
    fn refused_calls_do_not_count() {
        let (l, clock) = limiter(1);
        l.try_start().unwrap();
        for _ in 0..100 {
            assert!(l.try_start().is_err());
        }
        clock.advance(WINDOW);
        l.try_start().unwrap();
    }

    #[test]
    fn partial_seconds_round_up() {
        let (l, clock) = limiter(1);
        l.try_start().unwrap();
        clock.advance(Duration::from_millis(59_500));
        let e = l.try_start().unwrap_err();
        assert!(e.message().contains("Wait 1 second "), "{}", e.message());
    }
}

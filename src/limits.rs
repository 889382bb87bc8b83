//! Limits on how much the backend may be asked to do (README, Options of `mcp-serve`): the
//! per-minute call budget, and the fixed caps on what a run may print.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

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

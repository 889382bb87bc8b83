//! A cancellation flag that a waiting run can sleep on: set by
//! `notifications/cancelled`, by stdin EOF, or by the call's own deadline.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

#[derive(Clone, Default, Debug)]
pub struct Cancel(Arc<(Mutex<bool>, Condvar)>);

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn cancel(&self) {
        let (flag, cv) = &*self.0;
        // A poisoned lock still holds a valid bool; cancelling must never fail.
        let mut set = flag.lock().unwrap_or_else(|e| e.into_inner());
        *set = true;
        cv.notify_all();
    }

    pub fn is_cancelled(&self) -> bool {
        *self.0 .0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sleep up to `d`, waking early on cancellation. Returns whether cancelled.
    pub fn wait_timeout(&self, d: Duration) -> bool {
        let (flag, cv) = &*self.0;
        let guard = flag.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = cv
            .wait_timeout_while(guard, d, |set| !*set)
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_on_cancel_from_another_thread() {
        let c = Cancel::new();
        let c2 = c.clone();
        let t = std::thread::spawn(move || c2.wait_timeout(Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(20));
        c.cancel();
        assert!(t.join().unwrap());
        assert!(c.is_cancelled());
    }

    #[test]
    fn times_out_when_not_cancelled() {
        let c = Cancel::new();
        assert!(!c.wait_timeout(Duration::from_millis(5)));
        assert!(!c.is_cancelled());
    }
}

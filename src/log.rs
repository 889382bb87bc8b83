//! stderr logging that never blocks a request: lines go through a bounded
//! queue to one writer thread, and are dropped (and counted) when a client
//! pipes stderr and never reads it.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::OnceLock;

static QUEUE: OnceLock<SyncSender<String>> = OnceLock::new();
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Route later log lines through the background writer (call once, when
/// serving starts). Before that, lines are written directly.
pub fn start_background() {
    QUEUE.get_or_init(|| {
        let (tx, rx) = sync_channel::<String>(1024);
        let spawned = std::thread::Builder::new()
            .name("stderr-log".into())
            .spawn(move || {
                let stderr = std::io::stderr();
                for line in rx {
                    let mut err = stderr.lock();
                    let _ = writeln!(err, "{line}");
                }
            });
        if spawned.is_err() {
            // Without the thread, a queue would only fill up; log nothing rather than block.
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
        tx
    });
}

/// Log one line (no newline inside).
pub fn line(text: impl Into<String>) {
    let text: String = text.into().replace(['\n', '\r'], " ");
    match QUEUE.get() {
        Some(tx) => match tx.try_send(text) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
            }
        },
        None => {
            let _ = writeln!(std::io::stderr().lock(), "{text}");
        }
    }
}

/// Lines dropped because stderr was not being read.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

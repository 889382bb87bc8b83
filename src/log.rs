//! stderr logging that never blocks a request: lines go through a bounded
//! queue to one writer thread, and are dropped (and counted) when a client
//! pipes stderr and never reads it.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::OnceLock;
use std::time::Duration;

enum LogEntry {
    Line(String),
    /// Answered once every line queued before it has been written.
    Flush(SyncSender<()>),
}

static QUEUE: OnceLock<SyncSender<LogEntry>> = OnceLock::new();
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Route later log lines through the background writer (call once, when
/// serving starts). Before that, lines are written directly.
pub(crate) fn start_background() {
    QUEUE.get_or_init(|| {
        let (tx, rx) = sync_channel::<LogEntry>(1024);
        let spawned = std::thread::Builder::new()
            .name("stderr-log".into())
            .spawn(move || {
                let stderr = std::io::stderr();
                for entry in rx {
                    match entry {
                        LogEntry::Line(line) => {
                            let _ = writeln!(stderr.lock(), "{line}");
                        }
                        LogEntry::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            });
        if spawned.is_err() {
            // Without the thread, a queue would only fill up; log nothing rather than block.
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
        tx
    });
}

/// Log one line: whatever it quotes, no line break, control or
/// bidirectional character gets through.
pub(crate) fn line(text: impl Into<String>) {
    let text = crate::catalog::one_line(&text.into());
    match QUEUE.get() {
        Some(tx) => match tx.try_send(LogEntry::Line(text)) {
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

/// Wait (at most `timeout`) until every line logged so far is written, so
/// the last lines are not lost when the process exits.
pub(crate) fn flush(timeout: Duration) {
    let Some(tx) = QUEUE.get() else {
        return;
    };
    let (done_tx, done_rx) = sync_channel(1);
    // A full queue means stderr is not being read: don't wait for it.
    if tx.try_send(LogEntry::Flush(done_tx)).is_ok() {
        let _ = done_rx.recv_timeout(timeout);
    }
}

/// Lines dropped because stderr was not being read.
pub(crate) fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

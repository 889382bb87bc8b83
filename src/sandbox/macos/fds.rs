//! Inherited descriptors: the decisions, as pure functions; `spawn` makes
//! the system calls.

/// The first descriptor number the kernel can never hand out: macOS caps a
/// process's descriptors at the smaller of its soft `RLIMIT_NOFILE` and
/// `kern.maxfilesperproc` (a soft limit of `RLIM_INFINITY` is common for
/// programs that raise it). Sweeping up to this misses nothing. Pure.
pub fn fd_sweep_limit(rlim_cur: u64, maxfilesperproc: u64) -> i32 {
    let cap = rlim_cur.min(maxfilesperproc);
    i32::try_from(cap).unwrap_or(i32::MAX)
}

/// How many entries of the kernel's descriptor list (`PROC_PIDLISTFDS`,
/// which answers with the bytes it filled) can be trusted: `None` when the
/// call failed or filled the whole buffer, as a full buffer may have been
/// cut short; the caller then sweeps every number instead. Pure.
pub fn listed_fd_count(returned_bytes: i32, entry_size: usize, capacity: usize) -> Option<usize> {
    let bytes = usize::try_from(returned_bytes).ok()?;
    if entry_size == 0 {
        return None;
    }
    let n = bytes / entry_size;
    (n < capacity).then_some(n)
}

//! What every attempt shares: the symbolic name of an errno, and the small
//! wrappers that turn a failed call or a missing argument into the text an
//! attempt reports.

use std::ffi::CString;

/// The symbolic name of an errno value.
pub(super) fn errno_name(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::EROFS => "EROFS",
        libc::EPIPE => "EPIPE",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTSOCK => "ENOTSOCK",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ESOCKTNOSUPPORT => "ESOCKTNOSUPPORT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENETDOWN => "ENETDOWN",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNRESET => "ECONNRESET",
        libc::ENODEV => "ENODEV",
        libc::ENXIO => "ENXIO",
        libc::ELOOP => "ELOOP",
        _ => return format!("E{e}"),
    };
    name.to_string()
}

pub(super) fn os_err() -> String {
    errno_name(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

pub(super) fn io(e: std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => errno_name(n),
        None => format!("{e}"),
    }
}

pub(super) fn check(r: libc::c_long) -> Result<libc::c_long, String> {
    if r < 0 {
        Err(os_err())
    } else {
        Ok(r)
    }
}

pub(super) fn cstr(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| "EINVAL".to_string())
}

pub(super) fn arg(args: &[String], i: usize) -> Result<&str, String> {
    args.get(i)
        .map(String::as_str)
        .ok_or_else(|| format!("missing argument {i}"))
}

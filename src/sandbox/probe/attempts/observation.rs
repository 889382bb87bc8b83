//! Attempts to observe the host and other runs: watching folders, listing
//! processes and mounts, the machine's names.

use std::os::fd::{FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use super::errno::{check, cstr, io};
use super::Tried;

// System calls too new for the libc crate (the same numbers on every
// architecture since the tables were unified).
// System calls too new for the libc crate (the same numbers on every
// architecture since the tables were unified).
const SYS_STATMOUNT: libc::c_long = 457;

const SYS_LISTMOUNT: libc::c_long = 458;

const LSMT_ROOT: u64 = u64::MAX;

const STATMOUNT_SB_BASIC: u64 = 1;

/// Watch a folder for the probe's own activity there (it creates, opens or
/// touches a file named `name` while this waits up to 3 s).
pub(super) fn inotify_watch(dir: &str, name: &str) -> Tried {
    // SAFETY: inotify calls on a descriptor we own; events are read into our buffer.
    let fd =
        check(unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) } as _)? as i32;
    // SAFETY: a fresh descriptor nobody else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let d = cstr(dir)?;
    let mask = libc::IN_CREATE | libc::IN_OPEN | libc::IN_ATTRIB | libc::IN_DELETE;
    // SAFETY: d is a NUL-terminated path we own; fd is the inotify descriptor owned above.
    check(unsafe { libc::inotify_add_watch(fd, d.as_ptr(), mask) } as _)?;
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut buf = [0u8; 8192];
    while Instant::now() < deadline {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one pollfd we own.
        unsafe { libc::poll(&mut pfd, 1, 100) };
        // SAFETY: read into a buffer we own.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            continue;
        }
        // struct inotify_event: wd, mask, cookie, len, then the name.
        let mut off = 0usize;
        while off + 16 <= n as usize {
            let len =
                u32::from_ne_bytes([buf[off + 12], buf[off + 13], buf[off + 14], buf[off + 15]])
                    as usize;
            let end = (off + 16 + len).min(n as usize);
            let raw = &buf[off + 16..end];
            let ev = String::from_utf8_lossy(raw.split(|&b| b == 0).next().unwrap_or(&[]));
            if ev == name {
                drop(owned);
                return Ok(format!("saw the host touch {dir}/{name}"));
            }
            off = end;
        }
    }
    drop(owned);
    Err("no event".into())
}

/// fanotify: an unprivileged listener may watch single inodes when it asks
/// for file ids.
pub(super) fn fanotify_watch(dir: &str) -> Tried {
    const FAN_CLASS_NOTIF: libc::c_long = 0;
    const FAN_REPORT_FID: libc::c_long = 0x200;
    const FAN_MARK_ADD: libc::c_long = 1;
    const FAN_OPEN: u64 = 0x20;
    const FAN_EVENT_ON_CHILD: u64 = 0x0800_0000;
    // SAFETY: fanotify_init/mark with integers and a C string we own.
    let fd = check(unsafe {
        libc::syscall(
            libc::SYS_fanotify_init,
            FAN_CLASS_NOTIF | FAN_REPORT_FID,
            libc::O_RDONLY as libc::c_long,
        )
    })? as i32;
    // SAFETY: a fresh descriptor nobody else owns.
    let _owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let d = cstr(dir)?;
    // SAFETY: the call reads only d, a NUL-terminated path we own, and integers.
    check(unsafe {
        libc::syscall(
            libc::SYS_fanotify_mark,
            fd,
            FAN_MARK_ADD,
            FAN_OPEN | FAN_EVENT_ON_CHILD,
            libc::AT_FDCWD,
            d.as_ptr(),
        )
    })
    .map_err(|e| format!("{e} (mark)"))?;
    Ok(format!("fanotify watch on {dir}"))
}

/// struct mnt_id_req, first version (24 bytes).
#[repr(C)]
struct MntIdReq {
    size: u32,
    spare: u32,
    mnt_id: u64,
    param: u64,
}

/// The unique ids of every mount this process can list.
pub(crate) fn listmount() -> Result<Vec<u64>, String> {
    let mut all = Vec::new();
    let mut last = 0u64;
    loop {
        let req = MntIdReq {
            size: std::mem::size_of::<MntIdReq>() as u32,
            spare: 0,
            mnt_id: LSMT_ROOT,
            param: last,
        };
        let mut ids = [0u64; 256];
        // SAFETY: listmount reads the request and fills the array we own.
        let n = check(unsafe {
            libc::syscall(
                SYS_LISTMOUNT,
                &req as *const MntIdReq,
                ids.as_mut_ptr(),
                ids.len(),
                0u32,
            )
        })? as usize;
        all.extend_from_slice(&ids[..n]);
        if n < ids.len() || all.len() > 100_000 {
            return Ok(all);
        }
        last = ids[n - 1];
    }
}

pub(super) fn statmount(id: &str) -> Tried {
    let id: u64 = id.parse().map_err(|_| "bad mount id")?;
    let req = MntIdReq {
        size: std::mem::size_of::<MntIdReq>() as u32,
        spare: 0,
        mnt_id: id,
        param: STATMOUNT_SB_BASIC,
    };
    let mut buf = vec![0u64; 512];
    // SAFETY: statmount reads the request and fills the buffer we own.
    check(unsafe {
        libc::syscall(
            SYS_STATMOUNT,
            &req as *const MntIdReq,
            buf.as_mut_ptr(),
            buf.len() * 8,
            0u32,
        )
    })?;
    Ok(format!("statmount of host mount {id} answered"))
}

/// What `uname()` names the machine. Getting through is seeing the host's
/// own node name or NIS domain name (`node` and `domain`, as the probe
/// sees them); the run's fixed names never count, so a host named like a
/// run proves nothing (its control fails).
pub(super) fn uname_nodename(node: &str, domain: &str) -> Tried {
    use crate::sandbox::linux::namespaces::{uts_names, RUN_DOMAINNAME, RUN_HOSTNAME};
    let (n, d) = uts_names()?;
    if (n == node && n != RUN_HOSTNAME) || (d == domain && d != RUN_DOMAINNAME) {
        Ok(format!("nodename {n} domainname {d}: the host's"))
    } else {
        Err(format!("nodename {n} domainname {d}"))
    }
}

/// The numeric entries of a folder (a proc's processes), listed.
pub(super) fn list_pids(dir: &str) -> Tried {
    std::fs::read_dir(dir)
        .map(|d| {
            let pids: Vec<String> = d
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
                .collect();
            format!("pids {}", pids.join(","))
        })
        .map_err(io)
}

pub(super) fn list_mounts() -> Tried {
    listmount().map(|ids| ids.iter().map(u64::to_string).collect::<Vec<_>>().join(","))
}

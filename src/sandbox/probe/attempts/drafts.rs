//! Attempts of a draft run, which may write the database and its companions:
//! replacing grants, execute bits, disk reserved past the file-size limit,
//! devices in the database's folder.

use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::errno::{check, cstr, io, os_err};
use super::Tried;

/// Delete the file and put a symlink in its place.
pub(super) fn replace_with_symlink(path: &str, target: &str) -> Tried {
    std::fs::remove_file(path).map_err(|e| format!("{} (unlink)", io(e)))?;
    std::os::unix::fs::symlink(target, path).map_err(|e| format!("{} (symlink)", io(e)))?;
    Ok(format!("{path} is now a symlink to {target}"))
}

/// Make a symlink beside the file, then rename it over the file.
pub(super) fn symlink_rename_over(path: &str, target: &str) -> Tried {
    let p = Path::new(path);
    let link = p.with_file_name(".reachweaver-probe-link");
    std::os::unix::fs::symlink(target, &link).map_err(|e| format!("{} (symlink)", io(e)))?;
    if let Err(e) = std::fs::rename(&link, p) {
        let _ = std::fs::remove_file(&link);
        return Err(format!("{} (rename)", io(e)));
    }
    Ok(format!("{path} replaced by a symlink to {target}"))
}

/// Write a new file beside `path` and rename it over `path`.
pub(super) fn replace(path: &str) -> Tried {
    let p = Path::new(path);
    let tmp = p.with_file_name(".reachweaver-probe-new");
    std::fs::write(&tmp, b"replaced by the probe\n").map_err(|e| format!("{} (create)", io(e)))?;
    if let Err(e) = std::fs::rename(&tmp, p) {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{} (rename)", io(e)));
    }
    Ok(format!("{path} replaced"))
}

/// Create a file with every execute bit asked for, the way an attacker
/// would: umask cleared first, mode set again afterwards. The probe checks
/// the mode it really got on the host.
pub(super) fn create_exec(path: &str) -> Tried {
    // SAFETY: umask takes an integer.
    unsafe { libc::umask(0) };
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(path)
        .map_err(io)?;
    // SAFETY: fchmod on a descriptor we own; its failure is what we report.
    unsafe { libc::fchmod(f.as_raw_fd(), 0o755) };
    let mode = f.metadata().map_err(io)?.mode() & 0o7777;
    if mode & 0o111 != 0 {
        Ok(format!("created with mode {mode:o}"))
    } else {
        Err(format!("created without execute bits (mode {mode:o})"))
    }
}

/// The same through `mknod`, whose mode is a second place to ask for
/// execute bits: a regular file made this way under a database companion's
/// name would otherwise be kept by the draft sweep.
pub(super) fn mknod_exec(path: &str) -> Tried {
    let p = cstr(path)?;
    // SAFETY: umask takes an integer.
    unsafe { libc::umask(0) };
    // SAFETY: mknod of a regular file on a C string we own.
    check(unsafe { libc::mknod(p.as_ptr(), libc::S_IFREG | 0o755, 0) } as _)?;
    let mode = std::fs::symlink_metadata(path).map_err(io)?.mode() & 0o7777;
    if mode & 0o111 != 0 {
        Ok(format!("made with mode {mode:o}"))
    } else {
        Err(format!("made without execute bits (mode {mode:o})"))
    }
}

/// Reserve `mib` MiB at the start of an existing file with `fallocate`
/// (`mode` `plain`: mode 0; `keep-size`: `FALLOC_FL_KEEP_SIZE`), under the
/// run's file-size limit (lowered to it here too, so the control outside
/// runs under the same limit), and say what the file then holds on disk.
pub(super) fn fallocate(path: &str, mode: &str, mib: &str) -> Tried {
    let mode = match mode {
        "plain" => 0,
        "keep-size" => libc::FALLOC_FL_KEEP_SIZE,
        other => return Err(format!("unknown mode {other}")),
    };
    let mib: libc::off_t = mib.parse().map_err(|_| "bad size")?;
    let limit = crate::sandbox::policy::Rlimits::default().file_size;
    // SAFETY: getrlimit/setrlimit on a struct we own; lowering needs no privilege.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_FSIZE, &mut r) != 0 {
            return Err(format!("{} (getrlimit)", os_err()));
        }
        if r.rlim_cur > limit {
            r.rlim_cur = limit;
            if libc::setrlimit(libc::RLIMIT_FSIZE, &r) != 0 {
                return Err(format!("{} (setrlimit)", os_err()));
            }
        }
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| format!("{} (open)", io(e)))?;
    // SAFETY: fallocate on a descriptor we own.
    check(unsafe { libc::fallocate(f.as_raw_fd(), mode, 0, mib << 20) } as _)?;
    let m = f.metadata().map_err(io)?;
    Ok(format!(
        "{} MiB on disk for a size of {} bytes (file-size limit {} MiB)",
        (m.blocks() * 512) >> 20,
        m.len(),
        limit >> 20
    ))
}

/// Make `src`, then rename it to `dst` with `RENAME_WHITEOUT`, which leaves
/// a whiteout (a 0:0 character device) at `src`. `dst`, a plain file, is
/// removed again, so the device is all the attempt leaves.
pub(super) fn rename_whiteout(src: &str, dst: &str) -> Tried {
    use std::os::unix::fs::FileTypeExt;
    std::fs::write(src, b"probe").map_err(|e| format!("{} (create)", io(e)))?;
    let (from, to) = (cstr(src)?, cstr(dst)?);
    // SAFETY: renameat2 with C strings we own.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_WHITEOUT,
        )
    };
    if r != 0 {
        let e = os_err();
        let _ = std::fs::remove_file(src);
        return Err(e);
    }
    let _ = std::fs::remove_file(dst);
    let m = std::fs::symlink_metadata(src).map_err(io)?;
    if m.file_type().is_char_device() {
        Ok(format!("a whiteout device ({}) is left at {src}", m.rdev()))
    } else {
        Err(format!("renamed, but no whiteout at {src}"))
    }
}

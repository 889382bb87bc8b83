//! Attempts on files: reading and listing outside the grants, every way of
//! changing a file or its metadata, and opening one by handle past every
//! path check.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use super::errno::{check, cstr, io};
use super::Tried;

pub(super) fn read(path: &str) -> Tried {
    let mut s = String::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_string(&mut s))
        .map(|n| format!("read {n} bytes"))
        .map_err(io)
}

pub(super) fn list(dir: &str) -> Tried {
    std::fs::read_dir(dir)
        .map(|d| format!("{} entries", d.count()))
        .map_err(io)
}

pub(super) fn create(path: &str) -> Tried {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| f.write_all(b"probe"))
        .map(|()| "created".into())
        .map_err(io)
}

pub(super) fn write(path: &str) -> Tried {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(b"probe"))
        .map(|()| "written".into())
        .map_err(io)
}

pub(super) fn truncate(path: &str) -> Tried {
    let p = cstr(path)?;
    // SAFETY: truncate on a C string we own.
    check(unsafe { libc::truncate(p.as_ptr(), 0) } as _).map(|_| "truncated".into())
}

pub(super) fn rename(from: &str, to: &str) -> Tried {
    std::fs::rename(from, to)
        .map(|()| "renamed".into())
        .map_err(io)
}

pub(super) fn unlink(path: &str) -> Tried {
    std::fs::remove_file(path)
        .map(|()| "unlinked".into())
        .map_err(io)
}

pub(super) fn mkdir(path: &str) -> Tried {
    std::fs::create_dir(path)
        .map(|()| "created".into())
        .map_err(io)
}

pub(super) fn link(from: &str, to: &str) -> Tried {
    std::fs::hard_link(from, to)
        .map(|()| "linked".into())
        .map_err(io)
}

pub(super) fn symlink(target: &str, path: &str) -> Tried {
    std::os::unix::fs::symlink(target, path)
        .map(|()| "symlink created".into())
        .map_err(io)
}

pub(super) fn mknod(path: &str) -> Tried {
    let p = cstr(path)?;
    // SAFETY: mknod of a FIFO on a C string we own.
    check(unsafe { libc::mknod(p.as_ptr(), libc::S_IFIFO | 0o600, 0) } as _)
        .map(|_| "fifo created".into())
}

pub(super) fn chmod(path: &str) -> Tried {
    let p = cstr(path)?;
    // SAFETY: chmod on a C string we own.
    check(unsafe { libc::chmod(p.as_ptr(), 0o640) } as _).map(|_| "mode changed".into())
}

pub(super) fn chown(path: &str) -> Tried {
    let p = cstr(path)?;
    // SAFETY: chown to our own ids, on a C string we own.
    check(unsafe { libc::chown(p.as_ptr(), libc::getuid(), libc::getgid()) } as _)
        .map(|_| "owner set".into())
}

pub(super) fn utime(path: &str) -> Tried {
    let p = cstr(path)?;
    // SAFETY: utimensat with "now" for both times.
    check(unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), std::ptr::null(), 0) } as _)
        .map(|_| "times changed".into())
}

pub(super) fn setxattr(path: &str) -> Tried {
    let p = cstr(path)?;
    let key = cstr("user.reachweaver-probe")?;
    // SAFETY: setxattr with buffers we own.
    check(unsafe { libc::setxattr(p.as_ptr(), key.as_ptr(), b"x".as_ptr().cast(), 1, 0) } as _)
        .map(|_| "attribute set".into())
}

pub(super) fn exec(prog: &str) -> Tried {
    std::process::Command::new(prog)
        .stdin(std::process::Stdio::null())
        .status()
        .map(|s| format!("ran: {s}"))
        .map_err(io)
}

pub(super) fn stat(path: &str) -> Tried {
    std::fs::metadata(path)
        .map(|m| {
            format!(
                "stat: {} bytes, mode {:o}, {}",
                m.len(),
                m.mode(),
                file_id(m.dev(), m.ino())
            )
        })
        .map_err(io)
}

/// How the stat attempt names the file it saw, so the probe can tell the
/// host's file from the run's own at the same path.
pub(crate) fn file_id(dev: u64, ino: u64) -> String {
    format!("device {dev}, inode {ino}")
}

pub(super) fn readlink(path: &str) -> Tried {
    std::fs::read_link(path)
        .map(|t| format!("-> {}", t.display()))
        .map_err(io)
}

// Request numbers from <linux/fs.h> and ext4's own header.
// Request numbers from <linux/fs.h> and ext4's own header.
pub(crate) const FS_IOC_GETFLAGS: libc::c_ulong = 0x8008_6601;

const FS_IOC_SETFLAGS: libc::c_ulong = 0x4008_6602;

pub(crate) const FS_IOC_GETVERSION: libc::c_ulong = 0x8008_7601;

const FS_IOC_FSGETXATTR: libc::c_ulong = 0x801c_581f;

const FS_IOC_FSSETXATTR: libc::c_ulong = 0x401c_5820;

const EXT4_IOC_GETVERSION: libc::c_ulong = 0x8008_6603;

const EXT4_IOC_SETVERSION: libc::c_ulong = 0x4008_6604;

/// "Not for dump(8)": a flag the file's owner may set without capability,
/// and harmless to leave behind.
const FS_NODUMP_FL: libc::c_int = 0x40;

const FS_XFLAG_NODUMP: u32 = 0x80;

const SYS_FILE_GETATTR: libc::c_long = 468;

const SYS_FILE_SETATTR: libc::c_long = 469;

pub(super) fn getxattr(path: &str, name: &str) -> Tried {
    let p = cstr(path)?;
    let n = cstr(name)?;
    let mut buf = [0u8; 256];
    // SAFETY: getxattr into a buffer we own.
    let len =
        check(
            unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) }
                as _,
        )?;
    Ok(format!(
        "{name} = {:?}",
        String::from_utf8_lossy(&buf[..len as usize])
    ))
}

/// Set an inode flag through `file_setattr`, which Landlock doesn't mediate.
pub(super) fn file_setattr(path: &str) -> Tried {
    // struct file_attr (24 bytes): xflags, extsize, nextents, projid, cowextsize.
    #[repr(C)]
    #[derive(Default)]
    struct FileAttr {
        xflags: u64,
        extsize: u32,
        nextents: u32,
        projid: u32,
        cowextsize: u32,
    }
    let p = cstr(path)?;
    let mut a = FileAttr::default();
    let size = std::mem::size_of::<FileAttr>();
    // SAFETY: file_getattr/file_setattr read and write the struct we own.
    check(unsafe {
        libc::syscall(
            SYS_FILE_GETATTR,
            libc::AT_FDCWD,
            p.as_ptr(),
            &mut a as *mut FileAttr,
            size,
            0u32,
        )
    })
    .map_err(|e| format!("{e} (file_getattr)"))?;
    a.xflags |= u64::from(FS_XFLAG_NODUMP);
    a.nextents = 0;
    // SAFETY: the call reads a, a struct we own of the size passed, on a path we own.
    check(unsafe {
        libc::syscall(
            SYS_FILE_SETATTR,
            libc::AT_FDCWD,
            p.as_ptr(),
            &a as *const FileAttr,
            size,
            0u32,
        )
    })?;
    Ok("inode flag set through file_setattr".into())
}

/// Change an inode's flags or generation through a read-only descriptor.
pub(super) fn ioctl_flags(kind: &str, path: &str) -> Tried {
    let f = std::fs::File::open(path).map_err(|e| format!("{} (open)", io(e)))?;
    let fd = f.as_raw_fd();
    // SAFETY (all three): the ioctls read and write values we own.
    match kind {
        "setflags" => {
            // The kernel reads and writes an int, whatever the name says.
            let mut flags: libc::c_int = 0;
            // SAFETY: the ioctl writes an int into flags, which we own.
            check(unsafe { libc::ioctl(fd, FS_IOC_GETFLAGS, &mut flags) } as _)
                .map_err(|e| format!("{e} (get)"))?;
            flags |= FS_NODUMP_FL;
            // SAFETY: the ioctl reads an int from flags, which we own.
            check(unsafe { libc::ioctl(fd, FS_IOC_SETFLAGS, &flags) } as _)?;
            Ok("flags set through a read-only descriptor".into())
        }
        "fssetxattr" => {
            // struct fsxattr: five u32 and 8 bytes of padding.
            let mut x = [0u32; 7];
            // SAFETY: the ioctl writes a struct fsxattr (28 bytes) into x, which holds 28.
            check(unsafe { libc::ioctl(fd, FS_IOC_FSGETXATTR, x.as_mut_ptr()) } as _)
                .map_err(|e| format!("{e} (get)"))?;
            x[0] |= FS_XFLAG_NODUMP;
            // SAFETY: the ioctl reads a struct fsxattr (28 bytes) from x, which holds 28.
            check(unsafe { libc::ioctl(fd, FS_IOC_FSSETXATTR, x.as_ptr()) } as _)?;
            Ok("xflags set through a read-only descriptor".into())
        }
        "setversion" => {
            let mut v: libc::c_int = 0;
            // SAFETY: the ioctl writes an int into v, which we own.
            check(unsafe { libc::ioctl(fd, EXT4_IOC_GETVERSION, &mut v) } as _)
                .map_err(|e| format!("{e} (get)"))?;
            let nv = v.wrapping_add(1);
            // SAFETY: the ioctl reads an int from nv, which we own.
            check(unsafe { libc::ioctl(fd, EXT4_IOC_SETVERSION, &nv) } as _)?;
            Ok("generation changed through a read-only descriptor".into())
        }
        other => Err(format!("unknown ioctl kind {other}")),
    }
}

/// Get a handle for `path`, then open it by handle through a descriptor
/// of `mount_dir` (any folder of the same file system).
pub(super) fn open_by_handle(path: &str, mount_dir: &str) -> Tried {
    let p = cstr(path)?;
    // struct file_handle: handle_bytes, handle_type, then up to 128 bytes.
    let mut h = [0u32; 2 + 32];
    h[0] = 128;
    let mut mount_id: libc::c_int = 0;
    // SAFETY: name_to_handle_at fills the buffer and id we own.
    check(unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            libc::AT_FDCWD,
            p.as_ptr(),
            h.as_mut_ptr(),
            &mut mount_id,
            0,
        )
    })
    .map_err(|e| format!("{e} (name_to_handle_at)"))?;
    let dir = std::fs::File::open(mount_dir).map_err(|e| format!("{} (open)", io(e)))?;
    // SAFETY: open_by_handle_at reads the handle we own; the descriptor is wrapped.
    let fd = check(unsafe {
        libc::syscall(
            libc::SYS_open_by_handle_at,
            dir.as_raw_fd(),
            h.as_ptr(),
            libc::O_RDONLY,
        )
    })? as i32;
    // SAFETY: a fresh descriptor nobody else owns.
    let mut f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut s = Vec::new();
    f.read_to_end(&mut s).map_err(io)?;
    Ok(format!("read {} bytes by handle", s.len()))
}

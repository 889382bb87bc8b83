//! The second generation of escape attempts: grants that can be replaced
//! by a draft run, disk space and devices a draft run can make, the run's
//! temp folder, metadata of host files, memory and code outside the
//! address-space limit, observation of the host and of other runs, and
//! execution outside the runtime. Same contract as `attempts.rs`: `Ok` is
//! what got through, `Err` the exact errno (or observation) that stopped it.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::errno::{arg, check, cstr, errno_name, io, os_err};

type Outcome = Result<String, String>;

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

// System calls too new for the libc crate (the same numbers on every
// architecture since the tables were unified).
const SYS_STATMOUNT: libc::c_long = 457;
const SYS_LISTMOUNT: libc::c_long = 458;
const SYS_FILE_GETATTR: libc::c_long = 468;
const SYS_FILE_SETATTR: libc::c_long = 469;
const LSMT_ROOT: u64 = u64::MAX;
const STATMOUNT_SB_BASIC: u64 = 1;

fn tmpdir() -> Result<PathBuf, String> {
    std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .ok_or_else(|| "no TMPDIR".to_string())
}

/// `arg(args, i)?` for a function returning `Option<Outcome>`.
macro_rules! arg_or {
    ($args:expr, $i:expr) => {
        match arg($args, $i) {
            Ok(a) => a,
            Err(e) => return Some(Err(e)),
        }
    };
}

/// The attempts this module knows, or `None` for another module's name.
pub(crate) fn attempt(name: &str, args: &[String]) -> Option<Outcome> {
    Some(match name {
        "replace-with-symlink" => replace_with_symlink(arg_or!(args, 0), arg_or!(args, 1)),
        "symlink-rename-over" => symlink_rename_over(arg_or!(args, 0), arg_or!(args, 1)),
        "symlink" => std::os::unix::fs::symlink(arg_or!(args, 0), arg_or!(args, 1))
            .map(|()| "symlink created".into())
            .map_err(io),
        "replace" => replace(arg_or!(args, 0)),
        "create-exec" => create_exec(arg_or!(args, 0)),
        "mknod-exec" => mknod_exec(arg_or!(args, 0)),
        "stat" => std::fs::metadata(arg_or!(args, 0))
            .map(|m| {
                format!(
                    "stat: {} bytes, mode {:o}, inode {}",
                    m.len(),
                    m.mode(),
                    m.ino()
                )
            })
            .map_err(io),
        "readlink" => std::fs::read_link(arg_or!(args, 0))
            .map(|t| format!("-> {}", t.display()))
            .map_err(io),
        "getxattr" => getxattr(arg_or!(args, 0), arg_or!(args, 1)),
        "deep-tmpdir" => deep_tmpdir(arg_or!(args, 0), arg_or!(args, 1)),
        "fill-size" => fill_size(arg_or!(args, 0)),
        "fill-inodes" => fill_inodes(arg_or!(args, 0)),
        "tmpdir-path" => tmpdir().map(|p| p.display().to_string()),
        "file-setattr" => file_setattr(arg_or!(args, 0)),
        "ioctl-flags" => ioctl_flags(arg_or!(args, 0), arg_or!(args, 1)),
        "memfd-fill" => memfd_fill(arg_or!(args, 0)),
        "memfd-exec" => memfd_exec(arg_or!(args, 0)),
        "inotify-watch" => inotify_watch(arg_or!(args, 0), arg_or!(args, 1)),
        "fanotify-watch" => fanotify_watch(arg_or!(args, 0)),
        "listmount" => {
            listmount().map(|ids| ids.iter().map(u64::to_string).collect::<Vec<_>>().join(","))
        }
        "statmount" => statmount(arg_or!(args, 0)),
        "exec-tmpdir" => exec_tmpdir(arg_or!(args, 0)),
        "exec-loader" => exec_loader(arg_or!(args, 0)),
        "mmap-exec-tmpdir" => mmap_exec_tmpdir(),
        "open-by-handle" => open_by_handle(arg_or!(args, 0), arg_or!(args, 1)),
        "fallocate" => fallocate(arg_or!(args, 0), arg_or!(args, 1), arg_or!(args, 2)),
        "rename-whiteout" => rename_whiteout(arg_or!(args, 0), arg_or!(args, 1)),
        "leave-traces" => leave_traces(arg_or!(args, 0)),
        "find-traces" => find_traces(arg_or!(args, 0)),
        "uname-nodename" => uname_nodename(arg_or!(args, 0), arg_or!(args, 1)),
        _ => return None,
    })
}

/// Delete the file and put a symlink in its place.
fn replace_with_symlink(path: &str, target: &str) -> Outcome {
    std::fs::remove_file(path).map_err(|e| format!("{} (unlink)", io(e)))?;
    std::os::unix::fs::symlink(target, path).map_err(|e| format!("{} (symlink)", io(e)))?;
    Ok(format!("{path} is now a symlink to {target}"))
}

/// Make a symlink beside the file, then rename it over the file.
fn symlink_rename_over(path: &str, target: &str) -> Outcome {
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
fn replace(path: &str) -> Outcome {
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
fn create_exec(path: &str) -> Outcome {
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
fn mknod_exec(path: &str) -> Outcome {
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

fn getxattr(path: &str, name: &str) -> Outcome {
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

/// `mkdir d && cd d`, `depth` times below `$TMPDIR/MARKER`, relative paths
/// only, then leave a file at the bottom and exit without cleaning up.
fn deep_tmpdir(depth: &str, marker: &str) -> Outcome {
    let depth: usize = depth.parse().map_err(|_| "bad depth")?;
    let top = tmpdir()?.join(marker);
    std::fs::create_dir(&top).map_err(io)?;
    std::env::set_current_dir(&top).map_err(io)?;
    let d = cstr("d")?;
    for level in 0..depth {
        // SAFETY: mkdir/chdir on a C string we own.
        if unsafe { libc::mkdir(d.as_ptr(), 0o700) } != 0 || unsafe { libc::chdir(d.as_ptr()) } != 0
        {
            return Err(format!("{} at level {level}", os_err()));
        }
    }
    std::fs::write("left-behind", b"probe").map_err(io)?;
    // And a folder its owner can't list, so a plain recursive removal fails
    // at the bottom and whatever fallback there is has to cope.
    let locked = cstr("locked")?;
    // SAFETY: mkdir on a C string we own.
    if unsafe { libc::mkdir(locked.as_ptr(), 0o300) } == 0 {
        let _ = std::fs::write("locked/inside", b"probe");
    }
    Ok(format!("built {depth} levels with a file at the bottom"))
}

/// Claim `mib` MiB in `$TMPDIR`, in files below the file-size limit.
fn fill_size(mib: &str) -> Outcome {
    let mib: u64 = mib.parse().map_err(|_| "bad size")?;
    const FILE_MIB: u64 = 32;
    let dir = tmpdir()?.join("reachweaver-probe-fill");
    std::fs::create_dir(&dir).map_err(io)?;
    let mut done = 0u64;
    let mut stopped = None;
    let mut n = 0;
    while done < mib && stopped.is_none() {
        let p = dir.join(format!("f{n}"));
        n += 1;
        let f = match std::fs::File::create(&p) {
            Ok(f) => f,
            Err(e) => {
                stopped = Some(io(e));
                break;
            }
        };
        let len = (FILE_MIB << 20) as libc::off_t;
        // SAFETY: fallocate on a descriptor we own. Real blocks are claimed,
        // which is what a size cap counts, without writing them.
        let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len) };
        if r == 0 {
            done += FILE_MIB;
            continue;
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
            stopped = Some(io(e));
            break;
        }
        // No fallocate here: write the bytes.
        let block = vec![0u8; 1 << 20];
        let mut f = f;
        for _ in 0..FILE_MIB {
            if let Err(e) = f.write_all(&block) {
                stopped = Some(io(e));
                break;
            }
            done += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    match stopped {
        None => Ok(format!("{done} MiB claimed in TMPDIR")),
        Some(e) => Err(format!("{e} after {done} MiB")),
    }
}

/// Create up to `count` empty files in `$TMPDIR`.
fn fill_inodes(count: &str) -> Outcome {
    let count: usize = count.parse().map_err(|_| "bad count")?;
    let dir = tmpdir()?.join("reachweaver-probe-inodes");
    std::fs::create_dir(&dir).map_err(io)?;
    let mut made = 0;
    let mut stopped = None;
    for i in 0..count {
        if let Err(e) = std::fs::File::create_new(dir.join(i.to_string())) {
            stopped = Some(io(e));
            break;
        }
        made += 1;
    }
    let _ = std::fs::remove_dir_all(&dir);
    match stopped {
        None => Ok(format!("{made} files created in TMPDIR")),
        Some(e) => Err(format!("{e} after {made} files")),
    }
}

/// Set an inode flag through `file_setattr`, which Landlock doesn't mediate.
fn file_setattr(path: &str) -> Outcome {
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
fn ioctl_flags(kind: &str, path: &str) -> Outcome {
    let f = std::fs::File::open(path).map_err(|e| format!("{} (open)", io(e)))?;
    let fd = f.as_raw_fd();
    // SAFETY (all three): the ioctls read and write values we own.
    match kind {
        "setflags" => {
            // The kernel reads and writes an int, whatever the name says.
            let mut flags: libc::c_int = 0;
            check(unsafe { libc::ioctl(fd, FS_IOC_GETFLAGS, &mut flags) } as _)
                .map_err(|e| format!("{e} (get)"))?;
            flags |= FS_NODUMP_FL;
            check(unsafe { libc::ioctl(fd, FS_IOC_SETFLAGS, &flags) } as _)?;
            Ok("flags set through a read-only descriptor".into())
        }
        "fssetxattr" => {
            // struct fsxattr: five u32 and 8 bytes of padding.
            let mut x = [0u32; 7];
            check(unsafe { libc::ioctl(fd, FS_IOC_FSGETXATTR, x.as_mut_ptr()) } as _)
                .map_err(|e| format!("{e} (get)"))?;
            x[0] |= FS_XFLAG_NODUMP;
            check(unsafe { libc::ioctl(fd, FS_IOC_FSSETXATTR, x.as_ptr()) } as _)?;
            Ok("xflags set through a read-only descriptor".into())
        }
        "setversion" => {
            let mut v: libc::c_int = 0;
            check(unsafe { libc::ioctl(fd, EXT4_IOC_GETVERSION, &mut v) } as _)
                .map_err(|e| format!("{e} (get)"))?;
            let nv = v.wrapping_add(1);
            check(unsafe { libc::ioctl(fd, EXT4_IOC_SETVERSION, &nv) } as _)?;
            Ok("generation changed through a read-only descriptor".into())
        }
        other => Err(format!("unknown ioctl kind {other}")),
    }
}

fn memfd(name: &str) -> Result<OwnedFd, String> {
    let n = cstr(name)?;
    // SAFETY: memfd_create with a C string we own; the descriptor is wrapped.
    let fd = check(unsafe { libc::memfd_create(n.as_ptr(), libc::MFD_CLOEXEC) } as _)?;
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Hold `mib` MiB in memfds that are never mapped: memory RLIMIT_AS
/// doesn't count. Each stays below the file-size limit, which applies to
/// memfds too; there is no limit on how many there are.
fn memfd_fill(mib: &str) -> Outcome {
    const EACH_MIB: usize = 32;
    let mib: usize = mib.parse().map_err(|_| "bad size")?;
    let block = vec![0x5au8; 1 << 20];
    let mut held = Vec::new();
    let mut done = 0;
    while done < mib {
        let mut f = std::fs::File::from(memfd("reachweaver-probe")?);
        f.set_len((EACH_MIB as u64) << 20)
            .map_err(|e| format!("{} (ftruncate)", io(e)))?;
        for _ in 0..EACH_MIB {
            f.write_all(&block)
                .map_err(|e| format!("{} after {done} MiB", io(e)))?;
            done += 1;
        }
        held.push(f);
    }
    Ok(format!("{done} MiB held in {} memfds", held.len()))
}

/// Copy a program into a memfd and run it from there.
fn memfd_exec(prog: &str) -> Outcome {
    let mut src = std::fs::File::open(prog).map_err(|e| format!("{} (open)", io(e)))?;
    // Not close-on-exec: fexecve of a script would need it open; an ELF doesn't care.
    let n = cstr("reachweaver-probe-exec")?;
    // SAFETY: memfd_create with a C string we own.
    let fd = check(unsafe { libc::memfd_create(n.as_ptr(), 0) } as _)? as i32;
    // SAFETY: a fresh descriptor nobody else owns.
    let mut mf = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    std::io::copy(&mut src, &mut mf).map_err(io)?;
    let argv0 = cstr("true")?;
    let argv = [argv0.as_ptr(), std::ptr::null()];
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    // SAFETY: the child only calls fexecve and _exit.
    let pid = check(unsafe { libc::fork() } as _)? as i32;
    if pid == 0 {
        unsafe {
            libc::fexecve(mf.as_raw_fd(), argv.as_ptr(), envp.as_ptr());
            let e = *libc::__errno_location();
            libc::_exit(100 + e.min(100));
        }
    }
    let mut st = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 {
        Ok("ran a program from a memfd".into())
    } else if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) >= 100 {
        Err(format!(
            "{} (fexecve)",
            errno_name(libc::WEXITSTATUS(st) - 100)
        ))
    } else {
        Err(format!("the program failed: status {st:#x}"))
    }
}

/// Watch a folder for the probe's own activity there (it creates, opens or
/// touches a file named `name` while this waits up to 3 s).
fn inotify_watch(dir: &str, name: &str) -> Outcome {
    // SAFETY: inotify calls on a descriptor we own; events are read into our buffer.
    let fd =
        check(unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) } as _)? as i32;
    // SAFETY: a fresh descriptor nobody else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let d = cstr(dir)?;
    let mask = libc::IN_CREATE | libc::IN_OPEN | libc::IN_ATTRIB | libc::IN_DELETE;
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
fn fanotify_watch(dir: &str) -> Outcome {
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

fn statmount(id: &str) -> Outcome {
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

/// Copy `prog` into `$TMPDIR` with `mode`.
fn copy_to_tmpdir(prog: &str, name: &str, mode: u32) -> Result<PathBuf, String> {
    let dst = tmpdir()?.join(name);
    let mut src = std::fs::File::open(prog).map_err(|e| format!("{} (open)", io(e)))?;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&dst)
        .map_err(|e| format!("{} (copy)", io(e)))?;
    std::io::copy(&mut src, &mut out).map_err(io)?;
    Ok(dst)
}

fn status_outcome(what: &str, r: std::io::Result<std::process::ExitStatus>) -> Outcome {
    match r {
        Ok(s) if s.success() => Ok(format!("{what}: exit 0")),
        Ok(s) => Err(match s.code() {
            Some(c) => format!("exit {c}"),
            None => format!("{s}"),
        }),
        Err(e) => Err(io(e)),
    }
}

/// Run a copy of `prog` straight from `$TMPDIR`.
fn exec_tmpdir(prog: &str) -> Outcome {
    let p = copy_to_tmpdir(prog, "reachweaver-probe-prog", 0o755)?;
    let r = std::process::Command::new(&p)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    status_outcome("ran a program from TMPDIR", r)
}

/// The dynamic loader named in this executable's PT_INTERP, else the usual
/// places.
pub(crate) fn loader() -> Option<PathBuf> {
    let from_elf = || -> Option<PathBuf> {
        let mut f = std::fs::File::open(std::env::current_exe().ok()?).ok()?;
        let mut head = [0u8; 64];
        f.read_exact(&mut head).ok()?;
        if &head[..4] != b"\x7fELF" || head[4] != 2 {
            return None;
        }
        let u16at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]) as u64;
        let phoff = u64::from_le_bytes(head[0x20..0x28].try_into().ok()?);
        let (phentsize, phnum) = (u16at(0x36), u16at(0x38));
        use std::os::unix::fs::FileExt;
        for i in 0..phnum {
            let mut ph = [0u8; 56];
            f.read_exact_at(&mut ph, phoff + i * phentsize).ok()?;
            if u32::from_le_bytes(ph[0..4].try_into().ok()?) == 3 {
                let off = u64::from_le_bytes(ph[8..16].try_into().ok()?);
                let size = u64::from_le_bytes(ph[32..40].try_into().ok()?);
                let mut s = vec![0u8; size.min(4096) as usize];
                f.read_exact_at(&mut s, off).ok()?;
                let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
                return Some(PathBuf::from(String::from_utf8_lossy(&s[..end]).as_ref()));
            }
        }
        None
    };
    from_elf().or_else(|| {
        [
            "/lib64/ld-linux-x86-64.so.2",
            "/lib/ld-linux-aarch64.so.1",
            "/lib/ld-musl-x86_64.so.1",
        ]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
    })
}

/// Run a copy of `prog` in `$TMPDIR` through the dynamic loader, which
/// maps it with PROT_EXEC instead of executing it.
fn exec_loader(prog: &str) -> Outcome {
    let ld = loader().ok_or("no dynamic loader found")?;
    let p = copy_to_tmpdir(prog, "reachweaver-probe-ld-prog", 0o644)?;
    let r = std::process::Command::new(&ld)
        .arg(&p)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    status_outcome("ran a program from TMPDIR through the loader", r)
}

/// Map a file of `$TMPDIR` executable.
fn mmap_exec_tmpdir() -> Outcome {
    let p = tmpdir()?.join("reachweaver-probe-blob");
    std::fs::write(&p, vec![0xc3u8; 4096]).map_err(io)?;
    let f = std::fs::File::open(&p).map_err(io)?;
    // SAFETY: a private read+exec mapping of our own file, unmapped at once.
    let m = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_PRIVATE,
            f.as_raw_fd(),
            0,
        )
    };
    if m == libc::MAP_FAILED {
        return Err(os_err());
    }
    unsafe { libc::munmap(m, 4096) };
    Ok("mapped a TMPDIR file executable".into())
}

/// Get a handle for `path`, then open it by handle through a descriptor
/// of `mount_dir` (any folder of the same file system).
fn open_by_handle(path: &str, mount_dir: &str) -> Outcome {
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

/// Reserve `mib` MiB at the start of an existing file with `fallocate`
/// (`mode` `plain`: mode 0; `keep-size`: `FALLOC_FL_KEEP_SIZE`), under the
/// run's file-size limit (lowered to it here too, so the control outside
/// runs under the same limit), and say what the file then holds on disk.
fn fallocate(path: &str, mode: &str, mib: &str) -> Outcome {
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
fn rename_whiteout(src: &str, dst: &str) -> Outcome {
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

/// What `uname()` names the machine. Getting through is seeing the host's
/// own node name or NIS domain name (`node` and `domain`, as the probe
/// sees them); the run's fixed names never count, so a host named like a
/// run proves nothing (its control fails).
fn uname_nodename(node: &str, domain: &str) -> Outcome {
    use crate::sandbox::linux::namespaces::{uts_names, RUN_DOMAINNAME, RUN_HOSTNAME};
    let (n, d) = uts_names()?;
    if (n == node && n != RUN_HOSTNAME) || (d == domain && d != RUN_DOMAINNAME) {
        Ok(format!("nodename {n} domainname {d}: the host's"))
    } else {
        Err(format!("nodename {n} domainname {d}"))
    }
}

/// The SysV key a marker's shared memory segment is made under (never
/// `IPC_PRIVATE`, which is 0).
fn marker_key(marker: &str) -> libc::key_t {
    let h = marker.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    (h & 0x7fff_fffe) as libc::key_t + 1
}

/// What one call leaves for the next: a file in its TMPDIR, a file in
/// `/dev/shm` (POSIX shared memory), a SysV shared memory segment and a
/// detached process, each named by `marker`. Reports what it could leave.
fn leave_traces(marker: &str) -> Outcome {
    let mut left = Vec::new();
    if let Ok(dir) = tmpdir() {
        if std::fs::write(dir.join(marker), b"trace").is_ok() {
            left.push("tmp file");
        }
    }
    if std::fs::write(Path::new("/dev/shm").join(marker), b"trace").is_ok() {
        left.push("/dev/shm file");
    }
    // SAFETY: creating a segment under a key of our own; no memory is mapped.
    if unsafe { libc::shmget(marker_key(marker), 4096, libc::IPC_CREAT | 0o600) } >= 0 {
        left.push("SysV segment");
    }
    // The `daemon` attempt leaves the process (a detached grandchild) and
    // returns.
    let daemon = std::env::current_exe().and_then(|exe| {
        std::process::Command::new(exe)
            .args(["__probe-attempt", "daemon", marker])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
    });
    if daemon.is_ok_and(|s| s.success()) {
        left.push("process");
    }
    Ok(format!("left: {}", left.join(", ")))
}

/// Look for what `leave-traces` left under `marker` and remove it: `Ok`
/// names what was seen (the earlier call got through to this one), `Err`
/// says `none`.
fn find_traces(marker: &str) -> Outcome {
    let mut seen = Vec::new();
    if let Ok(dir) = tmpdir() {
        if std::fs::remove_file(dir.join(marker)).is_ok() {
            seen.push("tmp file".to_string());
        }
    }
    if std::fs::remove_file(Path::new("/dev/shm").join(marker)).is_ok() {
        seen.push("/dev/shm file".to_string());
    }
    // SAFETY: looking up a segment by key and removing it; nothing is mapped.
    unsafe {
        let id = libc::shmget(marker_key(marker), 0, 0);
        if id >= 0 {
            libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
            seen.push("SysV segment".to_string());
        }
    }
    // A process from the earlier call, found by the marker in its command
    // line (this process's own carries it too, and is skipped).
    let me = std::process::id().to_string();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(pid) = name.parse::<i32>() else {
            continue;
        };
        if name == me {
            continue;
        }
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if cmd.split(|&b| b == 0).any(|a| a == marker.as_bytes()) {
            // SAFETY: killing a process that carries our own marker.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            seen.push(format!("process {pid}"));
        }
    }
    if seen.is_empty() {
        Err("none".into())
    } else {
        Ok(format!("seen: {}", seen.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_markers_sysv_key_is_never_ipc_private_and_stays_the_same() {
        // FNV-1a of nothing, its top and bottom bits cleared, plus one.
        assert_eq!(
            marker_key(""),
            ((0x811c_9dc5_u32 & 0x7fff_fffe) + 1) as libc::key_t
        );
        for m in ["", "rwprobe-1-0-0", "rwprobe-4242-17-ffff"] {
            let k = marker_key(m);
            assert!(k > 0, "{m}: {k}");
            assert_eq!(k, marker_key(m));
        }
        assert_ne!(marker_key("rwprobe-1-0-0"), marker_key("rwprobe-1-1-0"));
    }

    #[test]
    fn the_loader_is_found_for_this_executable() {
        let ld = loader().expect("a dynamic loader");
        assert!(ld.is_absolute(), "{}", ld.display());
    }
}

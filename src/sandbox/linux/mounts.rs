//! The mount layer: each run gets its own mount namespace whose root is a
//! fresh tmpfs holding exactly what the policy grants, read-only binds of
//! the runtime, the root folder, the fixed files and the backend at their
//! usual paths, a minimal `/dev` (null, zero, random, urandom, and `fd`
//! linked to the run's own `/proc/self/fd`), a `/proc` of its own processes,
//! and a size- and inode-capped `noexec` tmpfs as `/tmp` (the run's
//! `TMPDIR`). No host mount is visible afterwards.
//!
//! Why a second file layer beside Landlock: Landlock decides opens, but
//! `stat`, `readlink`, `getxattr`, inotify, the mount table and `/proc`
//! are not its business, and a bug or a missing right there would expose
//! every file. Here a host path that is not bound simply does not exist.
//!
//! Every source is opened once with `openat2(RESOLVE_NO_SYMLINKS)` and
//! bound through that descriptor (`open_tree` + `move_mount`), so a link
//! planted on the way cannot redirect a bind, and a pinned path (root,
//! fixed files, backend) that no longer names the inode it named when the
//! server started refuses the run.
//!
//! Order (run in the run's init, which owns the user and mount namespaces):
//! private propagation; a staging tmpfs on an existing host folder;
//! `pivot_root` into it with the host below `/oldroot`; the new root tmpfs
//! at `/newroot`; binds, devices, `/tmp`, the draft folder; the new root
//! made read-only; the host detached; `pivot_root(".", ".")` into the new
//! root and the staging tmpfs detached.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::step_error::{LayerStep, StepError};
use crate::sandbox::policy::{Bind, DraftDb, MountPlan, Pin};

const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

/// Host folders tried, in order, for the staging tmpfs: any existing
/// folder will do, since it is covered only inside the run's namespace.
const STAGING: &[&str] = &["/tmp", "/mnt", "/run", "/var/tmp"];

/// The attributes a bind gets. Pure.
pub fn bind_attrs(exec: bool, writable: bool, device: bool) -> u64 {
    let mut a = MOUNT_ATTR_NOSUID;
    if !exec {
        a |= MOUNT_ATTR_NOEXEC;
    }
    if !writable {
        a |= MOUNT_ATTR_RDONLY;
    }
    if !device {
        a |= MOUNT_ATTR_NODEV;
    }
    a
}

/// The tmpfs options of the run's `/tmp`. Pure.
pub fn tmp_options(size_bytes: u64, inodes: u64) -> String {
    format!("size={size_bytes},nr_inodes={inodes},mode=0700")
}

/// The entries of the draft folder that are bound read-only over
/// themselves: everything but the database and its companions. Pure.
pub fn draft_frozen(draft: &DraftDb, entries: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let writable = draft.writable_names();
    entries
        .iter()
        .filter(|n| n.as_slice() != b"." && n.as_slice() != b"..")
        .filter(|n| !writable.iter().any(|w| w.as_bytes() == n.as_slice()))
        .cloned()
        .collect()
}

fn err(step: LayerStep, what: impl std::fmt::Display) -> StepError {
    StepError::last(step, format_args!("mount namespace: {what}"))
}

fn check(detail: String) -> StepError {
    StepError::plain(LayerStep::MountCheck, detail)
}

fn cpath(p: &Path) -> Result<CString, StepError> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| check(format!("mount namespace: a NUL byte in {}", p.display())))
}

/// `/prefix` + an absolute path.
fn under(prefix: &str, p: &Path) -> PathBuf {
    let rel = p.strip_prefix("/").unwrap_or(p);
    Path::new(prefix).join(rel)
}

fn mount(
    step: LayerStep,
    src: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), StepError> {
    let c = |s: Option<&str>| s.map(|s| CString::new(s).unwrap_or_default());
    let (src_c, fs_c, data_c) = (c(src), c(fstype), c(data));
    let t = cpath(target)?;
    let ptr = |o: &Option<CString>| o.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string that outlives the call, or null.
    let r = unsafe {
        libc::mount(
            ptr(&src_c),
            t.as_ptr(),
            ptr(&fs_c),
            flags,
            ptr(&data_c).cast(),
        )
    };
    if r != 0 {
        return Err(err(step, format_args!("mount {}", target.display())));
    }
    Ok(())
}

/// `openat2(O_PATH)` with no symbolic link followed anywhere: a final link
/// comes back as the link itself.
fn open_nofollow(p: &Path) -> Result<OwnedFd, StepError> {
    open_nofollow_io(p).map_err(|e| open_failed(p, &e))
}

fn open_failed(p: &Path, e: &std::io::Error) -> StepError {
    StepError::io(
        LayerStep::MountOpen,
        format_args!("mount namespace: open {}", p.display()),
        e,
    )
}

fn open_nofollow_io(p: &Path) -> std::io::Result<OwnedFd> {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let c = CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 reads the path and the struct we own.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn fstat(fd: &OwnedFd) -> Result<libc::stat, StepError> {
    // SAFETY: fstat fills a struct we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into st, which we own, from a descriptor we own.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(err(LayerStep::MountStat, "fstat"));
    }
    Ok(st)
}

fn kind(st: &libc::stat) -> libc::mode_t {
    st.st_mode & libc::S_IFMT
}

/// Clone the mount tree at `fd`, set its attributes, attach it at `target`.
fn bind_fd(fd: &OwnedFd, target: &Path, attrs: u64) -> Result<(), StepError> {
    // SAFETY: open_tree on a descriptor we own with an empty path.
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            fd.as_raw_fd(),
            c"".as_ptr(),
            OPEN_TREE_CLONE
                | AT_RECURSIVE
                | libc::AT_EMPTY_PATH as libc::c_uint
                | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    if tree < 0 {
        return Err(err(
            LayerStep::MountClone,
            format_args!("clone the mount for {}", target.display()),
        ));
    }
    // SAFETY: a descriptor just returned to us.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as RawFd) };
    set_attrs(&tree, attrs, true)
        .map_err(|e| e.map_detail(|d| format!("{d} (attributes of {})", target.display())))?;
    let t = cpath(target)?;
    // SAFETY: move_mount of our detached tree onto a path string we own.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if r != 0 {
        return Err(err(
            LayerStep::MountAttach,
            format_args!("attach {}", target.display()),
        ));
    }
    Ok(())
}

/// `mount_setattr` on the mount at `fd` (and below it when `recursive`).
fn set_attrs(fd: &OwnedFd, attrs: u64, recursive: bool) -> Result<(), StepError> {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    let attr = MountAttr {
        attr_set: attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags = libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // SAFETY: mount_setattr reads the struct we own.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r != 0 {
        return Err(err(LayerStep::MountAttributes, "set mount attributes"));
    }
    Ok(())
}

fn create_failed(p: &Path, e: &std::io::Error) -> StepError {
    StepError::io(
        LayerStep::MountCreate,
        format_args!("mount namespace: create {}", p.display()),
        e,
    )
}

fn mkdir_all(p: &Path) -> Result<(), StepError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(p)
        .map_err(|e| create_failed(p, &e))
}

/// Make an empty file to bind a file over (unless one is there already,
/// as inside a folder bound before).
fn touch(p: &Path) -> Result<(), StepError> {
    if let Some(parent) = p.parent() {
        if std::fs::symlink_metadata(parent).is_err() {
            mkdir_all(parent)?;
        }
    }
    if std::fs::symlink_metadata(p).is_ok() {
        return Ok(());
    }
    std::fs::File::create(p)
        .map(drop)
        .map_err(|e| create_failed(p, &e))
}

fn check_pin(path: &Path, st: &libc::stat, pin: Option<Pin>) -> Result<(), StepError> {
    if let Some(pin) = pin {
        if st.st_dev != pin.dev || st.st_ino != pin.ino {
            return Err(check(format!(
                "{} changed after this call checked it; the next call looks again and uses what is there then",
                path.display()
            )));
        }
    }
    Ok(())
}

/// One bind of the plan, from `/oldroot` into `/newroot`.
fn apply_bind(b: &Bind) -> Result<(), StepError> {
    let src = under("/oldroot", &b.path);
    let dst = under("/newroot", &b.path);
    let fd = match open_nofollow_io(&src) {
        Ok(fd) => fd,
        // A fixed file that doesn't exist (yet) is simply not there;
        // anything pinned that vanished, or any other error, is a refusal.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && b.pin.is_none() => return Ok(()),
        Err(e) => return Err(open_failed(&b.path, &e)),
    };
    let st = fstat(&fd)?;
    check_pin(&b.path, &st, b.pin)?;
    match kind(&st) {
        libc::S_IFLNK => {
            // A system path that is a link (`/bin` -> `usr/bin`): the same
            // link in the new root; its target is granted on its own or not at all.
            if b.fixed_file || b.pin.is_some() {
                return Err(check(format!("{} is a symbolic link", b.path.display())));
            }
            let target = std::fs::read_link(&src).map_err(|e| {
                StepError::io(
                    LayerStep::MountLink,
                    format_args!("mount namespace: read link {}", b.path.display()),
                    &e,
                )
            })?;
            if let Some(parent) = dst.parent() {
                mkdir_all(parent)?;
            }
            std::os::unix::fs::symlink(&target, &dst).map_err(|e| {
                StepError::io(
                    LayerStep::MountLink,
                    format_args!("mount namespace: link {}", dst.display()),
                    &e,
                )
            })
        }
        libc::S_IFDIR => {
            if b.fixed_file {
                return Err(check(format!("{} is not a regular file", b.path.display())));
            }
            if std::fs::symlink_metadata(&dst).is_err() {
                mkdir_all(&dst)?;
            }
            bind_fd(&fd, &dst, bind_attrs(b.exec, false, false))
        }
        libc::S_IFREG => {
            touch(&dst)?;
            bind_fd(&fd, &dst, bind_attrs(b.exec, false, false))
        }
        _ => Err(check(format!(
            "{} is neither a folder nor a regular file",
            b.path.display()
        ))),
    }
}

/// The draft folder: writable, with the database bound over itself and
/// every other entry read-only over itself.
fn apply_draft(d: &DraftDb) -> Result<(), StepError> {
    let src = under("/oldroot", &d.folder);
    let dst = under("/newroot", &d.folder);
    let fd = open_nofollow(&src)?;
    let st = fstat(&fd)?;
    if kind(&st) != libc::S_IFDIR {
        return Err(check(format!("{} is not a folder", d.folder.display())));
    }
    check_pin(&d.folder, &st, d.folder_pin)?;
    if std::fs::symlink_metadata(&dst).is_err() {
        mkdir_all(&dst)?;
    }
    bind_fd(&fd, &dst, bind_attrs(false, true, false))?;
    let names: Vec<Vec<u8>> = std::fs::read_dir(&dst)
        .map_err(|e| {
            StepError::io(
                LayerStep::MountList,
                format_args!("mount namespace: list {}", d.folder.display()),
                &e,
            )
        })?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().as_bytes().to_vec())
        .collect();
    for name in draft_frozen(d, &names) {
        let name = Path::new(OsStr::from_bytes(&name));
        let entry_src = src.join(name);
        let Ok(efd) = open_nofollow(&entry_src) else {
            continue;
        };
        let st = fstat(&efd)?;
        // Links, sockets and pipes can't carry a mount; Landlock refuses
        // making new ones, and a regular file can't be put in their place
        // under a name SQLite doesn't use without the run noticing nothing.
        if matches!(kind(&st), libc::S_IFDIR | libc::S_IFREG) {
            bind_fd(&efd, &dst.join(name), bind_attrs(false, false, false))?;
        }
    }
    let db_src = under("/oldroot", &d.db);
    match open_nofollow_io(&db_src) {
        Ok(dbfd) => {
            let st = fstat(&dbfd)?;
            check_pin(&d.db, &st, d.pin)?;
            if kind(&st) != libc::S_IFREG {
                return Err(check(format!("{} is not a regular file", d.db.display())));
            }
            bind_fd(
                &dbfd,
                &under("/newroot", &d.db),
                bind_attrs(false, true, false),
            )
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && d.pin.is_none() => Ok(()),
        Err(e) => Err(open_failed(&d.db, &e)),
    }
}

fn apply_device(dev: &Path) -> Result<(), StepError> {
    let fd = open_nofollow(&under("/oldroot", dev))?;
    if kind(&fstat(&fd)?) != libc::S_IFCHR {
        return Err(check(format!("{} is not a device", dev.display())));
    }
    let dst = under("/newroot", dev);
    touch(&dst)?;
    let writable = dev == Path::new("/dev/null");
    bind_fd(&fd, &dst, bind_attrs(false, writable, true))
}

/// `/dev/fd`, as a link to `/proc/self/fd`: a `#!` backend executed from
/// the descriptor the server hashed (`--pin`) is handed to its interpreter
/// as `/dev/fd/N`.
fn fd_folder() -> Result<(), StepError> {
    let dev = Path::new("/newroot/dev");
    let link = dev.join("fd");
    if std::fs::symlink_metadata(&link).is_ok() {
        return Ok(());
    }
    mkdir_all(dev)?;
    std::os::unix::fs::symlink("/proc/self/fd", &link).map_err(|e| create_failed(&link, &e))
}

/// What a run's resolver reads: one loopback name server, so a lookup
/// goes to the same place on every machine, where the run's supervisor
/// sees the name asked for (docs/DENIED.md).
pub const RESOLV_CONF: &str =
    "# reachweaver-mcp: the run has no network; lookups are refused.\nnameserver 127.0.0.1\n";

/// Write [`RESOLV_CONF`] into the new root, unless a bind brought an
/// `/etc/resolv.conf` of its own.
fn resolver_conf() -> Result<(), StepError> {
    let path = Path::new("/newroot/etc/resolv.conf");
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(());
    }
    if let Some(etc) = path.parent() {
        mkdir_all(etc)?;
    }
    std::fs::write(path, RESOLV_CONF).map_err(|e| create_failed(path, &e))
}

/// Cover each protected path with an empty read-only file or folder (made
/// in the staging tmpfs, which the binds keep alive once it is detached).
fn apply_masks(masks: &[PathBuf]) -> Result<(), StepError> {
    if masks.is_empty() {
        return Ok(());
    }
    let empty_file = Path::new("/mask-file");
    let empty_dir = Path::new("/mask-dir");
    std::fs::File::create(empty_file).map_err(|e| create_failed(empty_file, &e))?;
    mkdir_all(empty_dir)?;
    let file_fd = open_nofollow(empty_file)?;
    let dir_fd = open_nofollow(empty_dir)?;
    let ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    for m in masks {
        let dst = under("/newroot", m);
        let Ok(meta) = std::fs::symlink_metadata(&dst) else {
            // Gone since start: nothing to hide.
            continue;
        };
        if meta.is_dir() {
            bind_fd(&dir_fd, &dst, ro)?;
        } else if meta.is_file() {
            bind_fd(&file_fd, &dst, ro)?;
        }
    }
    Ok(())
}

fn pivot_root(new: &str, old: &str) -> Result<(), StepError> {
    let (n, o) = (cpath(Path::new(new))?, cpath(Path::new(old))?);
    // SAFETY: pivot_root takes two path strings we own.
    if unsafe { libc::syscall(libc::SYS_pivot_root, n.as_ptr(), o.as_ptr()) } != 0 {
        return Err(err(LayerStep::MountPivot, "pivot_root"));
    }
    Ok(())
}

fn chdir(p: &str) -> Result<(), StepError> {
    std::env::set_current_dir(p).map_err(|e| {
        StepError::io(
            LayerStep::MountPivot,
            format_args!("mount namespace: chdir {p}"),
            &e,
        )
    })
}

fn detach(p: &str) -> Result<(), StepError> {
    let c = cpath(Path::new(p))?;
    // SAFETY: umount2 on a path string we own.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(err(LayerStep::MountPivot, format_args!("detach {p}")));
    }
    Ok(())
}

/// Build the run's minimal root and enter it. The caller is the only
/// process of a new mount namespace owned by its user namespace.
pub fn apply(plan: &MountPlan) -> Result<(), StepError> {
    mount(
        LayerStep::MountPropagation,
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    let staging = STAGING
        .iter()
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_dir()))
        .ok_or_else(|| check("mount namespace: no folder to stage the new root on".to_string()))?;
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    mount(
        LayerStep::MountTmpfs,
        Some("tmpfs"),
        Path::new(staging),
        Some("tmpfs"),
        flags,
        Some("size=64k,nr_inodes=64,mode=0700"),
    )?;
    for d in ["newroot", "oldroot"] {
        mkdir_all(&Path::new(staging).join(d))?;
    }
    pivot_root(staging, &format!("{staging}/oldroot"))?;
    chdir("/")?;
    mount(
        LayerStep::MountTmpfs,
        Some("tmpfs"),
        Path::new("/newroot"),
        Some("tmpfs"),
        flags,
        Some("size=1m,nr_inodes=4096,mode=0755"),
    )?;

    // The temp folder first: grants below /tmp get their mount points in it.
    let tmp = under("/newroot", &plan.tmp.mount);
    mkdir_all(&tmp)?;
    mount(
        LayerStep::MountTmpfs,
        Some("tmpfs"),
        &tmp,
        Some("tmpfs"),
        flags,
        Some(&tmp_options(plan.tmp.size_bytes, plan.tmp.inodes)),
    )?;
    {
        use std::os::unix::fs::DirBuilderExt;
        let dir = under("/newroot", &plan.tmp.dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| create_failed(&dir, &e))?;
    }
    for b in &plan.binds {
        apply_bind(b)?;
    }
    if plan.proc {
        // The run's own processes only: this init owns the PID namespace,
        // and `subset=pid` leaves out everything that is not a process
        // (sysctls, kernel memory, the host's mount and device lists).
        let dst = Path::new("/newroot/proc");
        mkdir_all(dst)?;
        mount(
            LayerStep::MountProc,
            Some("proc"),
            dst,
            Some("proc"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY,
            Some("subset=pid"),
        )?;
    }
    for d in &plan.devices {
        apply_device(d)?;
    }
    if plan.proc {
        fd_folder()?;
    }
    if let Some(d) = &plan.draft {
        apply_draft(d)?;
    }
    apply_masks(&plan.masks)?;
    resolver_conf()?;
    // Nothing may be added beside the binds: the skeleton is read-only.
    let skeleton = open_nofollow(Path::new("/newroot"))?;
    set_attrs(
        &skeleton,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        false,
    )?;
    drop(skeleton);

    detach("/oldroot")?;
    chdir("/newroot")?;
    pivot_root(".", ".")?;
    detach(".")?;
    chdir("/")
}

/// Whether the kernel gives a run a mount namespace with the calls
/// [`apply`] needs (`open_tree`, `move_mount`, `mount_setattr`: Linux
/// 5.12), tried for real in a short-lived child.
pub fn available(kernel: &str, userns: bool) -> Result<(), StepError> {
    start_available(kernel, userns)?.finish()
}

/// [`available`], started in its child without waiting for it.
pub(super) fn start_available(
    kernel: &str,
    userns: bool,
) -> Result<super::kernel::Pending, StepError> {
    if !super::kernel::kernel_at_least(kernel, 5, 12) {
        return Err(StepError::plain(
            LayerStep::MountCheck,
            "a minimal root needs Linux 5.12 (mount_setattr)",
        ));
    }
    let attr: [u64; 4] = [MOUNT_ATTR_RDONLY, 0, 0, 0];
    // Without a user namespace only a server holding CAP_SYS_ADMIN (root)
    // gets this far; its runs' mount namespaces are then owned by the host's.
    let flags = if userns {
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS
    } else {
        libc::CLONE_NEWNS
    };
    Ok(super::kernel::Pending::start(
        "mount namespace with a minimal root",
        // The child's steps: of them, the tree's clone may run out of
        // descriptors, and each may run out of memory.
        LayerStep::MountClone,
        move || {
            // SAFETY: only system calls on static strings and a struct prepared
            // before the fork (async-signal-safe), in a child that then exits.
            unsafe {
                if libc::unshare(flags) != 0 {
                    return super::kernel::errno();
                }
                if libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) != 0
                {
                    return super::kernel::errno();
                }
                let tree = libc::syscall(
                    libc::SYS_open_tree,
                    libc::AT_FDCWD,
                    c"/".as_ptr(),
                    OPEN_TREE_CLONE | AT_RECURSIVE,
                );
                if tree < 0 {
                    return super::kernel::errno();
                }
                if libc::syscall(
                    libc::SYS_mount_setattr,
                    tree as libc::c_int,
                    c"".as_ptr(),
                    libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
                    attr.as_ptr(),
                    std::mem::size_of_val(&attr),
                ) != 0
                {
                    return super::kernel::errno();
                }
                0
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_are_nosuid_and_read_only_noexec_nodev_unless_said() {
        assert_eq!(
            bind_attrs(false, false, false),
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV
        );
        assert_eq!(
            bind_attrs(true, false, false),
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV
        );
        assert_eq!(
            bind_attrs(false, true, true),
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC
        );
    }

    #[test]
    fn tmp_is_capped_and_private() {
        assert_eq!(
            tmp_options(64 << 20, 4096),
            "size=67108864,nr_inodes=4096,mode=0700"
        );
    }

    #[test]
    fn draft_freezes_everything_but_the_database_and_its_companions() {
        let d = DraftDb {
            folder: PathBuf::from("/h"),
            db: PathBuf::from("/h/rw.db"),
            pin: None,
            folder_pin: None,
        };
        let names: Vec<Vec<u8>> = [
            ".",
            "..",
            "rw.db",
            "rw.db-journal",
            "rw.db-wal",
            "rw.db-shm",
            "accounts.yaml",
            "profile.yaml",
            "rw.db-other",
            "campaigns",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        let frozen: Vec<String> = draft_frozen(&d, &names)
            .into_iter()
            .map(|n| String::from_utf8(n).unwrap())
            .collect();
        assert_eq!(
            frozen,
            ["accounts.yaml", "profile.yaml", "rw.db-other", "campaigns"]
        );
    }

    #[test]
    fn paths_are_placed_under_a_prefix() {
        assert_eq!(
            under("/newroot", Path::new("/usr/lib")),
            PathBuf::from("/newroot/usr/lib")
        );
        assert_eq!(under("/oldroot", Path::new("/")), PathBuf::from("/oldroot"));
    }
}

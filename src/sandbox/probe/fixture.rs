//! The probe's world on the host: the fixture folders, the loopback
//! listeners that count what reaches them, the file fingerprints, the
//! terminal and the marker processes an attempt may leave behind.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::attempts;
use super::listeners::Listeners;
use super::runner::Place;

/// The probe's world: a temp folder with the root, a backend home, a
/// folder outside both, and the listeners.
pub(super) struct Fixture {
    pub(super) base: PathBuf,
    pub(super) exe: PathBuf,
    pub(super) root: PathBuf,
    pub(super) home: PathBuf,
    pub(super) outside: PathBuf,
    pub(super) db: PathBuf,
    /// The TMPDIR of the positive controls (emptied before each).
    pub(super) ctl_tmp: PathBuf,
    /// The canonical system temp folder.
    pub(super) tmp_base: PathBuf,
    pub(super) net: Listeners,
    pub(super) marker_seq: AtomicUsize,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = crate::sandbox::tmpdir::try_remove_tree(&self.ctl_tmp);
        crate::sandbox::remove_tree(&self.base);
    }
}

impl Fixture {
    pub(super) fn new() -> anyhow::Result<Fixture> {
        let exe = std::fs::canonicalize(std::env::current_exe()?)?;
        let tmp = std::fs::canonicalize(std::env::temp_dir())?;
        let base = tmp.join(format!(
            "reachweaver-probe-{}-{:x}",
            std::process::id(),
            crate::sandbox::random_u64()
        ));
        std::fs::create_dir(&base).with_context(|| format!("{}", base.display()))?;
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700))?;
        let fs = base.join("fs");
        let net = Listeners::start()?;
        let fx = Fixture {
            root: fs.join("root"),
            home: fs.join("home"),
            outside: fs.join("outside"),
            db: fs.join("home/db/reachweaver.db"),
            ctl_tmp: base.join("control-tmp"),
            tmp_base: tmp,
            base,
            exe,
            net,
            marker_seq: AtomicUsize::new(0),
        };
        fx.reset()?;
        Ok(fx)
    }

    /// Rebuild the file fixture (attempts change it on purpose). The
    /// folders and the database keep their inodes: the sandbox pinned them
    /// at start and refuses runs once they name other files. A positive
    /// control may replace the database (with a link, say): the original
    /// inode is kept under a second name outside the fixture and linked
    /// back.
    pub(super) fn reset(&self) -> anyhow::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let db_folder = self.db.parent().context("db folder")?;
        let keep = self.base.join("db-original");
        std::fs::create_dir_all(db_folder)?;
        if !keep.exists() {
            std::fs::write(&self.db, b"")?;
            std::fs::hard_link(&self.db, &keep)?;
        }
        let original = std::fs::metadata(&keep)?.ino();
        match std::fs::symlink_metadata(&self.db) {
            Ok(m) if m.ino() == original => {}
            Ok(m) => {
                if m.is_dir() {
                    crate::sandbox::remove_tree(&self.db);
                    std::fs::hard_link(&keep, &self.db)?;
                } else {
                    // Put back in one rename, so a run's root set up
                    // meanwhile never finds the database missing.
                    let next = db_folder.join(".reachweaver.db.reset");
                    let _ = std::fs::remove_file(&next);
                    std::fs::hard_link(&keep, &next)?;
                    std::fs::rename(&next, &self.db)?;
                }
            }
            Err(_) => std::fs::hard_link(&keep, &self.db)?,
        }
        for d in [&self.root, &self.home, &self.outside, db_folder] {
            std::fs::create_dir_all(d)?;
            for e in std::fs::read_dir(d)?.flatten() {
                let p = e.path();
                if p == self.db || self.db.starts_with(&p) {
                    continue;
                }
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    crate::sandbox::remove_tree(&p);
                } else {
                    std::fs::remove_file(&p)?;
                }
            }
        }
        for d in [&self.root, &self.home, &self.outside] {
            std::fs::write(d.join("victim.txt"), b"original\n")?;
            std::fs::set_permissions(d.join("victim.txt"), std::fs::Permissions::from_mode(0o644))?;
        }
        std::fs::create_dir_all(self.root.join("sub"))?;
        std::fs::write(self.root.join("sub/inside.txt"), b"inside the root\n")?;
        std::fs::write(self.outside.join("secret.txt"), b"outside the root\n")?;
        std::os::unix::fs::symlink("../outside/secret.txt", self.root.join("link-out"))?;
        std::fs::write(&self.db, b"SQLite format 3\0probe database\n")?;
        let t = self.outside.join("true");
        let small = ["/usr/bin/true", "/bin/true"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.exists());
        std::fs::copy(small.unwrap_or(&self.exe), &t)?;
        std::fs::set_permissions(&t, std::fs::Permissions::from_mode(0o755))?;
        std::fs::create_dir_all(self.root.join("mnt"))?;
        // A program the run may read (but not execute) from its root.
        std::fs::create_dir_all(self.root.join("tools"))?;
        std::fs::copy(&t, self.root.join("tools/true"))?;
        std::fs::set_permissions(
            self.root.join("tools/true"),
            std::fs::Permissions::from_mode(0o755),
        )?;
        // Beside the database: a file the draft run must not replace, and
        // a symlink to outside, as an earlier draft run could have planted.
        let db_dir = self.db.parent().context("db folder")?;
        std::fs::write(db_dir.join("accounts.yaml"), b"accounts: []\n")?;
        std::os::unix::fs::symlink(self.outside.join("secret.txt"), db_dir.join("planted-link"))?;
        std::os::unix::fs::symlink("secret.txt", self.outside.join("alias"))?;
        // An attribute to read from outside (if the file system has them,
        // else the control says so).
        let p = std::ffi::CString::new(
            self.outside
                .join("secret.txt")
                .as_os_str()
                .as_encoded_bytes(),
        )?;
        // SAFETY: setxattr with C strings and a buffer we own.
        unsafe {
            libc::setxattr(
                p.as_ptr(),
                c"user.reachweaver-probe".as_ptr(),
                b"outside-value".as_ptr().cast(),
                13,
                0,
            )
        };
        Ok(())
    }

    pub(super) fn marker(&self) -> String {
        format!(
            "rwprobe-{}-{}-{:x}",
            std::process::id(),
            self.marker_seq.fetch_add(1, Ordering::SeqCst),
            crate::sandbox::random_u64() & 0xffff_ffff
        )
    }

    pub(super) fn s(p: &Path) -> String {
        p.to_string_lossy().into_owned()
    }
}

impl Place for Fixture {
    fn exe(&self) -> &Path {
        &self.exe
    }
    fn root(&self) -> &Path {
        &self.root
    }
    /// Emptied before each control.
    fn control_tmpdir(&self) -> &Path {
        let _ = crate::sandbox::tmpdir::try_remove_tree(&self.ctl_tmp);
        let _ = std::fs::create_dir(&self.ctl_tmp);
        &self.ctl_tmp
    }
}

/// Variables the probe plants in its own environment (when not already
/// set) to show they never reach a run.
pub(super) const PLANTED_ENV: &[(&str, &str)] = &[
    ("LD_PRELOAD", "libc.so.6"),
    ("PYTHONPATH", "/nonexistent/reachweaver-probe"),
    ("NODE_OPTIONS", "--no-warnings"),
    ("BASH_ENV", "/nonexistent/reachweaver-probe.sh"),
    (
        "REACHWEAVER_PROBE_API_TOKEN",
        "probe-secret-value-0123456789",
    ),
];

/// Sleeping marker processes (`__probe-attempt sleep-marker MARKER`); the
/// processes that merely pass the marker along don't count.
pub(super) fn marker_pids(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
                // Exactly `EXE __probe-attempt sleep-marker MARKER`: the server
                // and its forks carry the marker in other positions.
                let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
                if args.len() >= 4
                    && args[1] == b"__probe-attempt"
                    && args[2] == b"sleep-marker"
                    && args[3] == marker.as_bytes()
                {
                    pids.push(pid);
                }
            }
        }
    }
    pids
}

pub(super) fn wait_for(mut cond: impl FnMut() -> bool, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(super) fn kill_marker(marker: &str) {
    for pid in marker_pids(marker) {
        // SAFETY: signalling a process that carries our own marker.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// A fingerprint of every file under the fixture (type, size, mode, times,
/// content), to prove an attempt changed nothing.
pub(super) fn fingerprint(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut map = BTreeMap::new();
    pub(super) fn walk(dir: &Path, map: &mut BTreeMap<PathBuf, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            let content = if m.is_file() {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                std::fs::read(&p).unwrap_or_default().hash(&mut h);
                format!("{:016x}", h.finish())
            } else {
                String::new()
            };
            let xattr = {
                let c = std::ffi::CString::new(p.to_string_lossy().as_bytes()).unwrap_or_default();
                let mut buf = [0u8; 256];
                // SAFETY: listxattr into a buffer we own.
                let n = unsafe { libc::llistxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
                if n > 0 {
                    String::from_utf8_lossy(&buf[..n as usize]).into_owned()
                } else {
                    String::new()
                }
            };
            let flags = if m.is_file() || m.is_dir() {
                inode_flags(&p)
            } else {
                String::new()
            };
            // A folder's size and times follow its entries, which are
            // fingerprinted themselves: a file made and removed again (as
            // SQLite's journal is) leaves nothing behind but those.
            let times = if m.is_dir() {
                String::from("-")
            } else {
                format!(
                    "{} {}.{} {}.{}",
                    m.len(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.ctime(),
                    m.ctime_nsec()
                )
            };
            map.insert(
                p.clone(),
                format!(
                    "{:o} {} {} {times} {} {xattr} {flags} {content}",
                    m.mode(),
                    m.uid(),
                    m.gid(),
                    m.nlink()
                ),
            );
            if m.is_dir() {
                walk(&p, map);
            }
        }
    }
    walk(dir, &mut map);
    map
}

/// The inode flags and generation, as `lsattr` and `lsattr -v` read them.
pub(super) fn inode_flags(p: &Path) -> String {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(p)
    else {
        return "?".into();
    };
    // Both are ints to the kernel.
    let mut flags: libc::c_int = 0;
    let mut generation: libc::c_int = 0;
    // SAFETY: the two get ioctls write integers we own.
    let (a, b) = unsafe {
        (
            libc::ioctl(f.as_raw_fd(), attempts::FS_IOC_GETFLAGS, &mut flags),
            libc::ioctl(f.as_raw_fd(), attempts::FS_IOC_GETVERSION, &mut generation),
        )
    };
    format!(
        "flags={} gen={}",
        if a == 0 {
            format!("{flags:x}")
        } else {
            "-".into()
        },
        if b == 0 {
            format!("{generation}")
        } else {
            "-".into()
        }
    )
}

pub(super) struct Pty {
    pub(super) master: OwnedFd,
    pub(super) slave: OwnedFd,
}

impl Pty {
    pub(super) fn open() -> anyhow::Result<Pty> {
        // SAFETY: standard pseudo-terminal setup on descriptors we own.
        unsafe {
            let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            if m < 0 {
                anyhow::bail!("posix_openpt: {}", std::io::Error::last_os_error());
            }
            let master = OwnedFd::from_raw_fd(m);
            if libc::grantpt(m) != 0 || libc::unlockpt(m) != 0 {
                anyhow::bail!("pty: {}", std::io::Error::last_os_error());
            }
            let mut name = [0 as libc::c_char; 128];
            if libc::ptsname_r(m, name.as_mut_ptr(), name.len()) != 0 {
                anyhow::bail!("ptsname: {}", std::io::Error::last_os_error());
            }
            let s = libc::open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            if s < 0 {
                anyhow::bail!("pty slave: {}", std::io::Error::last_os_error());
            }
            // Raw mode: the input queue counts every byte, not whole lines.
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(s, &mut t) == 0 {
                libc::cfmakeraw(&mut t);
                libc::tcsetattr(s, libc::TCSANOW, &t);
            }
            Ok(Pty {
                master,
                slave: OwnedFd::from_raw_fd(s),
            })
        }
    }

    /// Bytes waiting in the terminal's input queue.
    pub(super) fn pending(&self) -> i32 {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes an int we own.
        unsafe { libc::ioctl(self.slave.as_raw_fd(), libc::FIONREAD, &mut n) };
        let _ = &self.master;
        n
    }

    pub(super) fn flush(&self) {
        // SAFETY: discarding the input queue of our own terminal.
        unsafe { libc::tcflush(self.slave.as_raw_fd(), libc::TCIFLUSH) };
    }
}

//! The one check every path passes before it enters a sandbox policy,
//! whoever proposed it: an owner option, the backend's catalog, an install
//! prefix, `--allow-read` or `--root`.
//!
//! Some folders must never be granted because granting them (or any folder
//! that holds them) opens the user's files, other runs' temporary files,
//! devices or process information: `/`, the user's home folder and its
//! parents, and each system's own such folders ([`guarded`]). On Linux those
//! are `/proc`, `/sys`, `/dev`, `/tmp`, `/run` and `/etc`; on macOS `/dev`,
//! the `/private` tree that `/tmp`, `/var` and `/etc` point into, the
//! per-user temp and cache folders under `/var/folders`, `/Volumes`,
//! `/Library`, `/System` and `/Users`. Paths inside `/proc`, `/sys` and
//! `/dev` are refused too, since each file there is a door to the kernel or
//! to another process.
//!
//! The lists are data per platform, and the pure check takes the platform
//! as a parameter, so both systems' rules are tested wherever the tests
//! run. A list for both would refuse `/Library` or `/Users` on Linux, where
//! nothing says they are not an owner's own folders.
//!
//! Comparison is on canonical paths, and the home folder is known under
//! every spelling: `HOME` as written, `HOME` with its symlinks resolved, and
//! the password database's entry (used alone when `HOME` is unset). On macOS
//! a path is also compared in the spellings the file system gives the same
//! folder without a symlink to resolve: `/tmp`, `/var` and `/etc` against
//! their `/private` targets, and `/System/Volumes/Data/...` (the data
//! volume, firmlinked to `/Users`, `/Library`, ...) against the short form.
//! [`refusal`] is pure; [`Guard::check`] adds the file-system lookups.

use std::ffi::{CStr, OsString};
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

/// Which system's folders the guard knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    Linux,
    MacOs,
}

impl System {
    /// The system this server runs on (macOS rules on macOS, Linux rules
    /// everywhere else).
    pub const CURRENT: System = if cfg!(target_os = "macos") {
        System::MacOs
    } else {
        System::Linux
    };
}

/// Linux: kernel interfaces, devices, the shared temp folder, runtime
/// sockets and system settings.
const LINUX_GUARDED: &[&str] = &["/proc", "/sys", "/dev", "/tmp", "/run", "/etc"];
const LINUX_BENEATH: &[&str] = &["/proc", "/sys", "/dev"];

/// macOS: devices; `/private`, which holds the shared temp folder, every
/// user's temp and cache folders (`/private/var/folders`), system settings
/// and daemons' data, with the short spellings that point into it;
/// `/Volumes` (every mounted disk, the system disk included); `/Library`
/// (other programs' settings, keychains, launch daemons); `/System`; and
/// `/Users` (every user's home) with its shared, world-writable folder.
const MACOS_GUARDED: &[&str] = &[
    "/dev",
    "/tmp",
    "/var",
    "/etc",
    "/private",
    "/private/tmp",
    "/private/var",
    "/private/etc",
    "/var/folders",
    "/private/var/folders",
    "/Volumes",
    "/Library",
    "/System",
    "/Users",
    "/Users/Shared",
];
const MACOS_BENEATH: &[&str] = &["/dev"];

/// macOS keeps each user's temp folder (`$TMPDIR`, `…/T`), cache folder
/// (`…/C`) and more under `/private/var/folders/XX/YYYY/`: those and the
/// two levels above them are as shared as `/tmp` (every run's private
/// folder lives in `…/T`), so they are refused; a folder below them is
/// like a folder in `/tmp` and is left to the caller's own checks.
const MACOS_USER_TEMP: &str = "/private/var/folders";
const MACOS_USER_TEMP_DEPTH: usize = 3;

/// The folders a platform refuses, and refuses as ancestors too.
pub fn guarded(platform: System) -> &'static [&'static str] {
    match platform {
        System::Linux => LINUX_GUARDED,
        System::MacOs => MACOS_GUARDED,
    }
}

/// The folders whose whole content a platform refuses.
pub fn guarded_beneath(platform: System) -> &'static [&'static str] {
    match platform {
        System::Linux => LINUX_BENEATH,
        System::MacOs => MACOS_BENEATH,
    }
}

/// Why a path may not be granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `/` itself.
    FileSystemRoot,
    /// The user's home folder itself.
    Home(PathBuf),
    /// A folder that holds the user's home folder.
    HoldsHome(PathBuf),
    /// A guarded system folder, or a folder that holds one.
    System(&'static str),
    /// A path inside `/proc`, `/sys` or `/dev`.
    InsideSystem(&'static str),
    /// A user's temp or cache folder under macOS's `/private/var/folders`,
    /// or a folder that holds one.
    UserTemp(PathBuf),
    /// Not an absolute path.
    Relative,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::FileSystemRoot => write!(f, "/ would open every file on this machine"),
            Refusal::Home(h) => write!(
                f,
                "it is your home folder {}, which holds every file of yours; name a folder inside it",
                h.display()
            ),
            Refusal::HoldsHome(h) => {
                write!(f, "it holds your home folder {}", h.display())
            }
            Refusal::System(s) => write!(f, "it is or holds {s}, which is never granted"),
            Refusal::InsideSystem(s) => write!(f, "it is inside {s}, which is never granted"),
            Refusal::UserTemp(p) => write!(
                f,
                "{} holds users' temp and cache folders (every run's private folder among them), which are never granted",
                p.display()
            ),
            Refusal::Relative => write!(f, "it is not an absolute path"),
        }
    }
}

/// Whether `path` may enter a policy on this system, given every spelling
/// of the user's home. Pure: `path` is compared as written, so pass it
/// canonical (and [`Guard::check`] also passes the spelling the owner used).
pub fn refusal(path: &Path, homes: &[PathBuf]) -> Option<Refusal> {
    refusal_on(System::CURRENT, path, homes)
}

/// [`refusal`] with that platform's rules, whatever system runs it.
pub fn refusal_on(platform: System, path: &Path, homes: &[PathBuf]) -> Option<Refusal> {
    if !path.is_absolute() {
        return Some(Refusal::Relative);
    }
    let path = normalize(path);
    let mut spellings = vec![path.clone()];
    if platform == System::MacOs {
        for alt in macos_spellings(&path) {
            if !spellings.contains(&alt) {
                spellings.push(alt);
            }
        }
    }
    spellings
        .iter()
        .find_map(|p| refusal_of(platform, p, homes))
}

fn refusal_of(platform: System, path: &Path, homes: &[PathBuf]) -> Option<Refusal> {
    if path == Path::new("/") {
        return Some(Refusal::FileSystemRoot);
    }
    for home in homes {
        let home = normalize(home);
        let home_spellings = if platform == System::MacOs {
            std::iter::once(home.clone())
                .chain(macos_spellings(&home))
                .collect()
        } else {
            vec![home.clone()]
        };
        if home_spellings.iter().any(|h| h == path) {
            return Some(Refusal::Home(home));
        }
        if home_spellings.iter().any(|h| h.starts_with(path)) {
            return Some(Refusal::HoldsHome(home));
        }
    }
    for g in guarded(platform) {
        if Path::new(g).starts_with(path) {
            return Some(Refusal::System(g));
        }
    }
    for g in guarded_beneath(platform) {
        if path.starts_with(g) {
            return Some(Refusal::InsideSystem(g));
        }
    }
    if platform == System::MacOs {
        if let Ok(rest) = path.strip_prefix(MACOS_USER_TEMP) {
            if rest.components().count() <= MACOS_USER_TEMP_DEPTH {
                return Some(Refusal::UserTemp(path.to_path_buf()));
            }
        }
    }
    None
}

/// The other spellings macOS gives the same folder without a symlink that
/// canonicalization would resolve on another system: `/tmp`, `/var`,
/// `/etc` and their `/private` targets both ways, and the data volume's
/// `/System/Volumes/Data/...` for the firmlinked short form.
fn macos_spellings(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut short = path.to_path_buf();
    if let Ok(rest) = path.strip_prefix("/System/Volumes/Data") {
        short = Path::new("/").join(rest);
        out.push(short.clone());
    }
    for name in ["tmp", "var", "etc"] {
        let plain = Path::new("/").join(name);
        let private = Path::new("/private").join(name);
        if let Ok(rest) = short.strip_prefix(&plain) {
            out.push(private.join(rest));
        } else if let Ok(rest) = short.strip_prefix(&private) {
            out.push(plain.join(rest));
        }
    }
    out.retain(|p| p != path);
    out
}

/// `.` dropped and `..` applied by name (for the spelling as given; the
/// canonical spelling is checked separately); never above `/`.
pub(crate) fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The guard with this user's home folder known under every spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    homes: Vec<PathBuf>,
}

impl Guard {
    /// The guard for the user running this process.
    pub fn for_this_user() -> Guard {
        Guard::from_home_env(std::env::var_os("HOME"))
    }

    /// `HOME` as given (`None`: unset), its canonical form, and the
    /// password database's home with its canonical form.
    pub fn from_home_env(home: Option<OsString>) -> Guard {
        let mut homes = Vec::new();
        let mut add = |p: PathBuf| {
            if p.is_absolute() {
                let canonical = p.canonicalize().ok();
                for q in std::iter::once(normalize(&p)).chain(canonical) {
                    if !homes.contains(&q) {
                        homes.push(q);
                    }
                }
            }
        };
        if let Some(h) = home.filter(|h| !h.is_empty()) {
            add(PathBuf::from(h));
        }
        // The database is asked even when HOME is set: a HOME changed for
        // one program must not hide where the user's files really are.
        if let Some(h) = home_from_password_database() {
            add(h);
        }
        Guard { homes }
    }

    /// A guard for explicit home spellings (tests, and callers that know better).
    pub fn with_homes(homes: Vec<PathBuf>) -> Guard {
        Guard { homes }
    }

    /// Every spelling of the home folder this guard refuses.
    pub fn homes(&self) -> &[PathBuf] {
        &self.homes
    }

    /// The canonical home folder (the first one that exists), for messages
    /// and for "beneath the home" checks.
    pub fn home(&self) -> Option<&Path> {
        self.homes
            .iter()
            .find(|h| h.is_dir())
            .or(self.homes.first())
            .map(PathBuf::as_path)
    }

    /// Check `path` under both spellings (as given, and canonical); return
    /// the canonical form. A path that does not exist yet is made canonical
    /// through its parent, so a symlinked parent cannot slip past.
    pub fn check(&self, path: &Path) -> Result<PathBuf, Refusal> {
        if let Some(r) = refusal(path, &self.homes) {
            return Err(r);
        }
        let canonical = canonical_or_parent(path);
        match refusal(&canonical, &self.homes) {
            Some(r) => Err(r),
            None => Ok(canonical),
        }
    }

    /// Pure form of [`Guard::check`] for a path already canonical.
    pub fn refusal(&self, canonical: &Path) -> Option<Refusal> {
        refusal(canonical, &self.homes)
    }
}

/// `p` canonical; when it does not exist, its parent canonical joined with
/// its name; when neither exists, `p` with `.` and `..` applied.
pub fn canonical_or_parent(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    let normal = normalize(p);
    match (normal.parent(), normal.file_name()) {
        (Some(parent), Some(name)) => match parent.canonicalize() {
            Ok(c) => c.join(name),
            Err(_) => normal,
        },
        _ => normal,
    }
}

/// The buffer the password database entry is first read into, and the
/// most it grows to when an entry does not fit (`ERANGE`).
const PASSWD_BUF_START: usize = 4096;
const PASSWD_BUF_MAX: usize = 1 << 20;

/// The buffer to try after `ERANGE` with one of `len` bytes: twice as big,
/// until the cap.
fn larger_passwd_buffer(len: usize) -> Option<usize> {
    (len < PASSWD_BUF_MAX).then(|| len * 2)
}

/// This user's home folder from the password database (`getpwuid_r`).
pub fn home_from_password_database() -> Option<PathBuf> {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let mut buf = vec![0u8; PASSWD_BUF_START];
    loop {
        // SAFETY: zeroed passwd is a valid out-parameter; buf outlives the call
        // and its length is passed; result is checked before use.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: pwd and buf outlive the call, buf's length is passed, and result is read only when rc is 0.
        let rc = unsafe {
            libc::getpwuid_r(
                uid,
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut result,
            )
        };
        if rc == libc::ERANGE {
            if let Some(len) = larger_passwd_buffer(buf.len()) {
                buf.resize(len, 0);
                continue;
            }
        }
        if rc != 0 || result.is_null() || pwd.pw_dir.is_null() {
            return None;
        }
        // SAFETY: pw_dir points into buf, NUL-terminated by getpwuid_r.
        let dir = unsafe { CStr::from_ptr(pwd.pw_dir) };
        let dir = PathBuf::from(OsString::from_vec(dir.to_bytes().to_vec()));
        return dir.is_absolute().then_some(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn homes() -> Vec<PathBuf> {
        vec![PathBuf::from("/home/u")]
    }

    #[test]
    fn the_file_system_root_is_refused() {
        assert_eq!(
            refusal(Path::new("/"), &homes()),
            Some(Refusal::FileSystemRoot)
        );
        assert_eq!(
            refusal(Path::new("/tmp/.."), &homes()),
            Some(Refusal::FileSystemRoot)
        );
    }

    #[test]
    fn the_home_folder_and_its_parents_are_refused() {
        assert_eq!(
            refusal(Path::new("/home/u"), &homes()),
            Some(Refusal::Home("/home/u".into()))
        );
        assert_eq!(
            refusal(Path::new("/home/u/"), &homes()),
            Some(Refusal::Home("/home/u".into()))
        );
        assert_eq!(
            refusal(Path::new("/home"), &homes()),
            Some(Refusal::HoldsHome("/home/u".into()))
        );
        assert_eq!(refusal(Path::new("/home/u/rw"), &homes()), None);
        assert_eq!(refusal(Path::new("/home/other"), &homes()), None);
    }

    #[test]
    fn system_folders_and_what_holds_them_are_refused() {
        for (p, g) in [
            ("/proc", "/proc"),
            ("/sys", "/sys"),
            ("/dev", "/dev"),
            ("/tmp", "/tmp"),
            ("/run", "/run"),
            ("/etc", "/etc"),
        ] {
            assert_eq!(
                refusal_on(System::Linux, Path::new(p), &[]),
                Some(Refusal::System(g)),
                "{p}"
            );
        }
        for (p, g) in [
            ("/proc/self", "/proc"),
            ("/proc/1/root", "/proc"),
            ("/sys/kernel", "/sys"),
            ("/dev/sda", "/dev"),
        ] {
            assert_eq!(
                refusal_on(System::Linux, Path::new(p), &[]),
                Some(Refusal::InsideSystem(g)),
                "{p}"
            );
        }
    }

    #[test]
    fn paths_inside_tmp_and_etc_pass_the_guard_itself() {
        // Catalog paths and the database folder have their own, stricter
        // checks (beneath the home; the folder itself guarded).
        assert_eq!(refusal(Path::new("/tmp/x.db"), &homes()), None);
        assert_eq!(refusal(Path::new("/etc/passwd"), &homes()), None);
        assert_eq!(refusal(Path::new("/srv/rw/data/rw.db"), &homes()), None);
    }

    #[test]
    fn each_platform_has_its_own_system_folders() {
        let mac = |p: &str| refusal_on(System::MacOs, Path::new(p), &[]);
        let linux = |p: &str| refusal_on(System::Linux, Path::new(p), &[]);
        for (p, g) in [
            ("/private", "/private"),
            ("/private/tmp", "/private/tmp"),
            ("/private/var", "/private/var"),
            ("/private/etc", "/private/etc"),
            ("/var/folders", "/var/folders"),
            ("/private/var/folders", "/private/var/folders"),
            ("/Volumes", "/Volumes"),
            ("/Library", "/Library"),
            ("/System", "/System"),
            ("/Users", "/Users"),
            ("/Users/Shared", "/Users/Shared"),
            ("/tmp", "/tmp"),
            ("/var", "/var"),
            ("/etc", "/etc"),
            ("/dev", "/dev"),
        ] {
            assert_eq!(mac(p), Some(Refusal::System(g)), "{p}");
        }
        assert_eq!(mac("/dev/disk0"), Some(Refusal::InsideSystem("/dev")));
        // Linux rules do not name macOS folders: there /Library and /Users
        // may be anybody's own.
        for p in ["/Library", "/Users", "/Volumes", "/System", "/private"] {
            assert_eq!(linux(p), None, "{p}");
        }
        // And macOS has no /proc, /sys or /run to guard.
        for p in ["/proc/self", "/sys/kernel", "/run"] {
            assert_eq!(mac(p), None, "{p}");
            assert!(linux(p).is_some(), "{p}");
        }
        // What a backend legitimately names on a Mac still passes.
        for p in [
            "/Library/Frameworks/Python.framework/Versions/3.12",
            "/Volumes/Work/campaigns",
            "/opt/homebrew/Cellar/python@3.12/3.12.7_1",
            "/Users/ann/campaigns",
        ] {
            assert_eq!(
                refusal_on(System::MacOs, Path::new(p), &[PathBuf::from("/Users/ann")]),
                None,
                "{p}"
            );
        }
    }

    #[test]
    fn macos_refuses_every_users_temp_and_cache_folders() {
        let mac = |p: &str| refusal_on(System::MacOs, Path::new(p), &[]);
        for p in [
            "/private/var/folders/xy",
            "/private/var/folders/xy/abc123",
            "/private/var/folders/xy/abc123/T",
            "/private/var/folders/xy/abc123/C",
            // The short spelling, compared as its /private target.
            "/var/folders/xy/abc123/T",
        ] {
            assert!(
                matches!(mac(p), Some(Refusal::UserTemp(_))),
                "{p}: {:?}",
                mac(p)
            );
        }
        // A folder below the temp folder is like one in /tmp.
        assert_eq!(mac("/private/var/folders/xy/abc123/T/work"), None);
        assert_eq!(
            refusal_on(System::Linux, Path::new("/var/folders/xy/abc123/T"), &[]),
            None
        );
    }

    #[test]
    fn macos_knows_the_private_and_data_volume_spellings() {
        let home = vec![PathBuf::from("/Users/ann")];
        let mac = |p: &str| refusal_on(System::MacOs, Path::new(p), &home);
        // The data volume's spelling of the home and of what holds it.
        assert_eq!(
            mac("/System/Volumes/Data/Users/ann"),
            Some(Refusal::Home("/Users/ann".into()))
        );
        assert_eq!(
            mac("/System/Volumes/Data/Users"),
            Some(Refusal::HoldsHome("/Users/ann".into()))
        );
        assert_eq!(
            mac("/System/Volumes/Data/Library"),
            Some(Refusal::System("/Library"))
        );
        // The data volume itself holds everything, the home included.
        assert!(mac("/System/Volumes/Data").is_some());
        assert!(mac("/System/Volumes/Data/private/tmp").is_some());
        assert_eq!(mac("/System/Volumes/Data/Users/ann/campaigns"), None);
        // /private targets and their short forms are one folder.
        assert_eq!(mac("/private/tmp/x.db"), None);
        assert!(mac("/private/tmp").is_some());
        // A home under /var (root's is /var/root) is found in either spelling.
        let root_home = vec![PathBuf::from("/var/root")];
        assert_eq!(
            refusal_on(System::MacOs, Path::new("/private/var/root"), &root_home),
            Some(Refusal::Home("/var/root".into()))
        );
    }

    #[test]
    fn relative_paths_are_refused() {
        assert_eq!(refusal(Path::new("x"), &homes()), Some(Refusal::Relative));
    }

    #[test]
    fn a_home_spelled_through_a_symlink_is_refused_under_both_spellings() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap().join("real-home");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().canonicalize().unwrap().join("link-home");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let guard = Guard::from_home_env(Some(link.clone().into_os_string()));
        assert!(guard.homes().contains(&link));
        assert!(guard.homes().contains(&real));
        assert_eq!(guard.check(&real), Err(Refusal::Home(real.clone())));
        assert!(matches!(guard.check(&link), Err(Refusal::Home(_))));
        // A path inside, through the link, comes back canonical.
        std::fs::create_dir(real.join("rw")).unwrap();
        assert_eq!(guard.check(&link.join("rw")), Ok(real.join("rw")));
        // A path whose canonical form is the home is refused however spelled.
        let sneaky = dir.path().join("sneaky");
        std::os::unix::fs::symlink(&real, &sneaky).unwrap();
        assert!(matches!(guard.check(&sneaky), Err(Refusal::Home(_))));
    }

    #[test]
    fn an_unset_home_falls_back_to_the_password_database() {
        let db_home = home_from_password_database().expect("this user has a passwd entry");
        let guard = Guard::from_home_env(None);
        assert!(
            guard.homes().contains(&normalize(&db_home)),
            "{:?}",
            guard.homes()
        );
        assert!(guard.check(&db_home).is_err());
        let empty = Guard::from_home_env(Some(OsString::new()));
        assert!(empty.homes().contains(&normalize(&db_home)));
    }

    #[test]
    fn a_fine_path_comes_back_canonical() {
        let dir = tempfile::tempdir().unwrap();
        let guard = Guard::with_homes(homes());
        let inner = dir.path().join("a");
        std::fs::create_dir(&inner).unwrap();
        assert_eq!(
            guard.check(&inner.join("./.")),
            Ok(inner.canonicalize().unwrap())
        );
        // Not existing yet: canonical through its parent.
        assert_eq!(
            guard.check(&inner.join("new.db")),
            Ok(inner.canonicalize().unwrap().join("new.db"))
        );
    }

    #[test]
    fn a_symlink_to_a_guarded_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        // /dev is guarded on both systems, so this runs on a Mac too.
        let link = dir.path().join("to-dev");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        let guard = Guard::with_homes(homes());
        assert!(matches!(
            guard.check(&link),
            Err(Refusal::InsideSystem("/dev"))
        ));
        let slash = dir.path().join("to-slash");
        std::os::unix::fs::symlink("/", &slash).unwrap();
        assert_eq!(guard.check(&slash), Err(Refusal::FileSystemRoot));
    }

    #[test]
    fn a_path_not_yet_made_is_checked_where_its_parent_really_is() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        // /dev is guarded on both systems, so this runs on a Mac too.
        let link = base.join("to-dev");
        std::os::unix::fs::symlink("/dev", &link).unwrap();
        let missing = link.join("not-there");
        assert_eq!(
            canonical_or_parent(&missing),
            PathBuf::from("/dev/not-there")
        );
        let guard = Guard::with_homes(homes());
        assert_eq!(guard.check(&missing), Err(Refusal::InsideSystem("/dev")));
        // A link to a fine folder: the new name comes back where it will be made.
        std::fs::create_dir(base.join("real")).unwrap();
        std::os::unix::fs::symlink(base.join("real"), base.join("to-real")).unwrap();
        assert_eq!(
            guard.check(&base.join("to-real/new.db")),
            Ok(base.join("real/new.db"))
        );
        // Neither the path nor its parent exists: `.` and `..` applied by name.
        assert_eq!(
            canonical_or_parent(&base.join("gone/../also-gone/./x")),
            base.join("also-gone/x")
        );
        // What exists comes back fully resolved.
        assert_eq!(
            canonical_or_parent(&base.join("to-real")),
            base.join("real")
        );
        assert_eq!(canonical_or_parent(Path::new("/")), PathBuf::from("/"));
    }

    #[test]
    fn the_guards_pure_check_refuses_what_check_refuses() {
        let guard = Guard::with_homes(homes());
        assert_eq!(
            guard.refusal(Path::new("/home/u")),
            Some(Refusal::Home("/home/u".into()))
        );
        assert_eq!(
            guard.refusal(Path::new("/home")),
            Some(Refusal::HoldsHome("/home/u".into()))
        );
        assert_eq!(guard.refusal(Path::new("/")), Some(Refusal::FileSystemRoot));
        assert_eq!(
            guard.refusal(Path::new("/dev/null")),
            Some(Refusal::InsideSystem("/dev"))
        );
        assert_eq!(guard.refusal(Path::new("rw")), Some(Refusal::Relative));
        assert_eq!(guard.refusal(Path::new("/home/u/rw")), None);
        assert_eq!(guard.homes(), &[PathBuf::from("/home/u")]);
    }

    #[test]
    fn a_macos_home_given_in_its_data_volume_spelling_is_known_in_the_short_one() {
        let long = PathBuf::from("/System/Volumes/Data/Users/ann");
        let home = vec![long.clone()];
        let mac = |p: &str| refusal_on(System::MacOs, Path::new(p), &home);
        assert_eq!(mac("/Users/ann"), Some(Refusal::Home(long.clone())));
        assert_eq!(
            mac("/System/Volumes/Data/Users/ann"),
            Some(Refusal::Home(long.clone()))
        );
        // /Users is guarded anyway; the home decides first.
        assert_eq!(mac("/Users"), Some(Refusal::HoldsHome(long.clone())));
        assert_eq!(mac("/Users/ann/campaigns"), None);
        assert_eq!(mac("/Users/bob"), None);
        // A /private home asked for by its short spelling, and the reverse.
        let home = vec![PathBuf::from("/private/var/root")];
        assert_eq!(
            refusal_on(System::MacOs, Path::new("/var/root"), &home),
            Some(Refusal::Home("/private/var/root".into()))
        );
        // Linux knows no other spelling: there the long form is just a path.
        assert_eq!(
            refusal_on(System::Linux, Path::new("/Users/ann"), &[long]),
            None
        );
    }

    #[test]
    fn each_refusal_says_why() {
        for (r, want) in [
            (
                Refusal::FileSystemRoot,
                "/ would open every file on this machine",
            ),
            (
                Refusal::Home("/home/u".into()),
                "it is your home folder /home/u, which holds every file of yours; name a folder inside it",
            ),
            (
                Refusal::HoldsHome("/home/u".into()),
                "it holds your home folder /home/u",
            ),
            (
                Refusal::System("/etc"),
                "it is or holds /etc, which is never granted",
            ),
            (
                Refusal::InsideSystem("/proc"),
                "it is inside /proc, which is never granted",
            ),
            (
                Refusal::UserTemp("/private/var/folders/xy".into()),
                "/private/var/folders/xy holds users' temp and cache folders (every run's private folder among them), which are never granted",
            ),
            (Refusal::Relative, "it is not an absolute path"),
        ] {
            assert_eq!(r.to_string(), want);
        }
    }

    #[test]
    fn the_home_is_the_first_spelling_that_exists() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        let guard = Guard::with_homes(vec!["/no/such/home".into(), real.clone()]);
        assert_eq!(guard.home(), Some(real.as_path()));
        // None exists: the first, for messages.
        let guard = Guard::with_homes(vec!["/no/such/home".into(), "/no/such/other".into()]);
        assert_eq!(guard.home(), Some(Path::new("/no/such/home")));
        assert_eq!(Guard::with_homes(Vec::new()).home(), None);
    }

    #[test]
    fn the_password_entry_buffer_doubles_up_to_one_mebibyte() {
        assert_eq!(larger_passwd_buffer(PASSWD_BUF_START), Some(8192));
        assert_eq!(larger_passwd_buffer(512 * 1024), Some(1 << 20));
        assert_eq!(larger_passwd_buffer(1 << 20), None);
        assert_eq!(larger_passwd_buffer((1 << 20) + 1), None);
        // From the first size, the cap is reached exactly.
        let mut len = PASSWD_BUF_START;
        let mut steps = 0;
        while let Some(next) = larger_passwd_buffer(len) {
            len = next;
            steps += 1;
        }
        assert_eq!((len, steps), (PASSWD_BUF_MAX, 8));
    }
}

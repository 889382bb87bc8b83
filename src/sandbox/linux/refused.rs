//! The system calls a watched run is refused, as the report names them:
//! the number's name on this architecture, and whether the call is one
//! every clean run makes (the compatibility class, counted apart and never
//! failing a job).

use std::borrow::Cow;

/// The name of system call `nr` on this architecture (`syscall_<nr>` for a
/// number the table doesn't know: one newer than it, or no call at all).
pub fn name(nr: i32) -> Cow<'static, str> {
    usize::try_from(nr)
        .ok()
        .and_then(syscalls::Sysno::new)
        .map_or_else(
            || Cow::Owned(format!("syscall_{nr}")),
            |s| Cow::Borrowed(s.name()),
        )
}

/// A refusal every clean run meets, and why it is harmless.
#[derive(Debug)]
struct Compat {
    nr: i64,
    /// The first argument, where only one value is expected.
    arg0: Option<u64>,
    /// Why callers take the refusal in their stride (for readers of the
    /// list and docs/DENIED.md; the report names the call only).
    #[cfg_attr(not(test), allow(dead_code))]
    why: &'static str,
}

/// What the reference backend, the Python example backend, CPython, glibc
/// and Node.js make in clean runs and handle when refused (measured by
/// running every reference tool, the Python backends and Node.js 20 under
/// the watched filter and reading the reports).
const COMPATIBILITY: &[Compat] = &[
    Compat {
        nr: libc::SYS_clone3,
        arg0: None,
        why: "glibc tries clone3 for threads and posix_spawn, and on ENOSYS uses clone",
    },
    Compat {
        nr: libc::SYS_socket,
        arg0: Some(libc::AF_UNIX as u64),
        why: "glibc's lookups of users and hosts ask nscd first, then read the files",
    },
    Compat {
        nr: libc::SYS_pkey_alloc,
        arg0: None,
        why: "V8 (Node.js) asks for a memory protection key at start and goes on without one",
    },
    Compat {
        nr: libc::SYS_fchown,
        arg0: None,
        why:
            "SQLite gives its journal the database's owner when run as root, and ignores a refusal",
    },
];

/// Whether a refused call with number `nr` and arguments `args` is in the
/// compatibility class.
pub fn is_compatibility(nr: i32, args: &[u64; 6]) -> bool {
    COMPATIBILITY
        .iter()
        .any(|c| c.nr == i64::from(nr) && c.arg0.is_none_or(|a| a == args[0]))
}

/// The errno's name as the report shows it.
pub fn errno_name(e: i32) -> Cow<'static, str> {
    Cow::Borrowed(match e {
        libc::EPERM => "EPERM",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTTY => "ENOTTY",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EACCES => "EACCES",
        libc::EINVAL => "EINVAL",
        _ => return Cow::Owned(format!("errno {e}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_named_for_this_architecture_and_unknown_ones_by_number() {
        assert_eq!(name(libc::SYS_ptrace as i32), "ptrace");
        assert_eq!(name(libc::SYS_mount as i32), "mount");
        assert_eq!(name(425), "io_uring_setup");
        assert_eq!(name(libc::SYS_clone3 as i32), "clone3");
        assert_eq!(name(libc::SYS_memfd_create as i32), "memfd_create");
        // Newer than libc's tables: the kernel's own names.
        assert_eq!(name(458), "listmount");
        assert_eq!(name(469), "file_setattr");
        // No such call (yet), and nonsense.
        assert_eq!(name(4000), "syscall_4000");
        assert_eq!(name(-1), "syscall_-1");
        #[cfg(target_arch = "x86_64")]
        assert_eq!(name(101), "ptrace");
        #[cfg(target_arch = "aarch64")]
        assert_eq!(name(117), "ptrace");
    }

    #[test]
    fn the_compatibility_class_is_exactly_its_list() {
        let nr = |n: i64| n as i32;
        assert!(is_compatibility(nr(libc::SYS_clone3), &[0; 6]));
        assert!(is_compatibility(nr(libc::SYS_fchown), &[3, 0, 0, 0, 0, 0]));
        assert!(is_compatibility(nr(libc::SYS_pkey_alloc), &[0; 6]));
        let unix = [libc::AF_UNIX as u64, 1, 0, 0, 0, 0];
        assert!(is_compatibility(nr(libc::SYS_socket), &unix));
        // A socket of another family is not: a netlink or packet socket
        // is something a clean run doesn't ask for.
        for family in [libc::AF_NETLINK, libc::AF_PACKET, libc::AF_INET] {
            let args = [family as u64, 1, 0, 0, 0, 0];
            assert!(!is_compatibility(nr(libc::SYS_socket), &args), "{family}");
        }
        for n in [
            libc::SYS_ptrace,
            libc::SYS_mount,
            425,
            libc::SYS_clone,
            libc::SYS_fchownat,
            libc::SYS_memfd_create,
            libc::SYS_ioctl,
        ] {
            assert!(!is_compatibility(nr(n), &[0; 6]), "syscall {n}");
        }
    }

    #[test]
    fn the_compatibility_list_is_documented() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/DENIED.md"),
        )
        .unwrap();
        for c in COMPATIBILITY {
            assert!(!c.why.is_empty());
            let n = name(c.nr as i32);
            assert!(doc.contains(&format!("`{n}`")), "{n} in docs/DENIED.md");
        }
    }

    #[test]
    fn errnos_are_named() {
        assert_eq!(errno_name(libc::EPERM), "EPERM");
        assert_eq!(errno_name(libc::ENOSYS), "ENOSYS");
        assert_eq!(errno_name(libc::ENOTTY), "ENOTTY");
        assert_eq!(errno_name(libc::EOPNOTSUPP), "EOPNOTSUPP");
        assert_eq!(errno_name(4095), "errno 4095");
    }
}

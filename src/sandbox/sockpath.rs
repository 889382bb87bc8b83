//! Where `sandbox probe` binds its unix socket, on both platforms. A
//! socket's path must fit `sun_path`, and a user's temp folder can already
//! be long (on macOS `/private/var/folders/xx/…/T/` is about 50 bytes, and
//! macOS allows 103), so the socket lives apart from the probe's other
//! fixtures, under a short name in the system's `/tmp`, whatever `$TMPDIR`
//! is. Neither sandbox grants that folder, so the socket is "outside".

use std::path::{Path, PathBuf};

/// `sun_path`'s size, its closing NUL included: a socket's path must be
/// shorter by one.
pub const SUN_PATH_MACOS: usize = 104;
pub const SUN_PATH_LINUX: usize = 108;

/// This platform's `sun_path` size.
pub const SUN_PATH: usize = if cfg!(target_os = "macos") {
    SUN_PATH_MACOS
} else {
    SUN_PATH_LINUX
};

/// The system temp folder in the spelling the platform's sandbox matches.
pub const TMP_ROOT_MACOS: &str = "/private/tmp";
pub const TMP_ROOT_LINUX: &str = "/tmp";

/// The socket's name in its folder.
pub const PROBE_SOCKET: &str = "s";

/// Whether a socket can be bound at `path` where `sun_path` has `size` bytes.
pub fn fits_sun_path(path: &Path, size: usize) -> bool {
    path.as_os_str().len() < size
}

/// The probe's socket folder under `tmp_root`, named by a random tag. Pure.
pub fn probe_socket_dir_in(tmp_root: &Path, tag: u64) -> PathBuf {
    tmp_root.join(format!("rwp-{tag:016x}"))
}

/// The probe's socket folder on this platform.
pub fn probe_socket_dir(tag: u64) -> PathBuf {
    let root = if cfg!(target_os = "macos") {
        TMP_ROOT_MACOS
    } else {
        TMP_ROOT_LINUX
    };
    probe_socket_dir_in(Path::new(root), tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path the probe binds fits `sun_path` on both platforms, with
    /// the longest tag, wherever `$TMPDIR` points.
    #[test]
    fn the_probes_socket_path_fits_sun_path_on_both_platforms() {
        for (root, size, want) in [
            (
                TMP_ROOT_MACOS,
                SUN_PATH_MACOS,
                "/private/tmp/rwp-ffffffffffffffff/s",
            ),
            (
                TMP_ROOT_LINUX,
                SUN_PATH_LINUX,
                "/tmp/rwp-ffffffffffffffff/s",
            ),
        ] {
            let longest = probe_socket_dir_in(Path::new(root), u64::MAX).join(PROBE_SOCKET);
            assert_eq!(longest, PathBuf::from(want));
            assert!(fits_sun_path(&longest, size), "{want}");
        }
        let here = probe_socket_dir(u64::MAX).join(PROBE_SOCKET);
        assert!(fits_sun_path(&here, SUN_PATH));
        // The boundary, exactly: 103 bytes fit macOS, 104 do not; 107 and
        // 108 on Linux.
        let of = |n: usize| PathBuf::from(format!("/{}", "a".repeat(n - 1)));
        assert!(fits_sun_path(&of(103), SUN_PATH_MACOS));
        assert!(!fits_sun_path(&of(104), SUN_PATH_MACOS));
        assert!(fits_sun_path(&of(107), SUN_PATH_LINUX));
        assert!(!fits_sun_path(&of(108), SUN_PATH_LINUX));
        // The macOS layout this replaces (under $TMPDIR) did not fit there.
        let old = PathBuf::from(
            "/private/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/reachweaver-probe-0123456789abcdef/outside/s.sock",
        );
        assert!(
            !fits_sun_path(&old, SUN_PATH_MACOS),
            "{}",
            old.as_os_str().len()
        );
    }

    /// The real length of the path the kernel is given, on this system:
    /// binding a socket there works.
    #[test]
    fn a_socket_binds_at_the_probes_path() {
        let dir = probe_socket_dir(crate::sandbox::random_u64());
        std::fs::create_dir(&dir).unwrap();
        let sock = dir.join(PROBE_SOCKET);
        let bound = std::os::unix::net::UnixListener::bind(&sock);
        let _ = std::fs::remove_file(&sock);
        let _ = std::fs::remove_dir(&dir);
        bound.unwrap();
    }
}

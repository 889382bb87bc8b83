//! Attempts on the run's own temp folder: filling it, leaving a chain no
//! recursive removal survives, executing from it.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::errno::{cstr, io, os_err};
use super::Tried;

pub(super) fn write_tmpdir() -> Tried {
    let dir = std::env::var("TMPDIR").map_err(|_| "no TMPDIR")?;
    let p = Path::new(&dir).join("probe-file");
    std::fs::write(&p, b"probe").map_err(io)?;
    std::fs::read(&p).map_err(io)?;
    std::fs::remove_file(&p).map_err(io)?;
    Ok("wrote, read and removed a file in TMPDIR".into())
}

pub(super) fn tmpdir_path() -> Tried {
    tmpdir().map(|p| p.display().to_string())
}

pub(super) fn tmpdir() -> Result<PathBuf, String> {
    std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .ok_or_else(|| "no TMPDIR".to_string())
}

/// `mkdir d && cd d`, `depth` times below `$TMPDIR/MARKER`, relative paths
/// only, then leave a file at the bottom and exit without cleaning up.
pub(super) fn deep_tmpdir(depth: &str, marker: &str) -> Tried {
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
pub(super) fn fill_size(mib: &str) -> Tried {
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
pub(super) fn fill_inodes(count: &str) -> Tried {
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

/// Copy `prog` into `$TMPDIR` with `mode`.
pub(super) fn copy_to_tmpdir(prog: &str, name: &str, mode: u32) -> Result<PathBuf, String> {
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

pub(super) fn status_outcome(what: &str, r: std::io::Result<std::process::ExitStatus>) -> Tried {
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
pub(super) fn exec_tmpdir(prog: &str) -> Tried {
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
pub(super) fn exec_loader(prog: &str) -> Tried {
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
pub(super) fn mmap_exec_tmpdir() -> Tried {
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
    // SAFETY: unmapping the page mmap just returned, which nothing refers to.
    unsafe { libc::munmap(m, 4096) };
    Ok("mapped a TMPDIR file executable".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loader_is_found_for_this_executable() {
        let ld = loader().expect("a dynamic loader");
        assert!(ld.is_absolute(), "{}", ld.display());
    }
}

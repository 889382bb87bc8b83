//! The escape attempts themselves, as `__probe-attempt NAME ARGS...`: the
//! same code runs once outside the sandbox (the positive control) and once
//! inside it. Each prints one JSON line, `{"ok":true,"result":"..."}` when
//! the attempt did what it tried, `{"ok":false,"result":"EPERM"}` (the exact
//! errno, or the observed value) when it was stopped.
//!
//! A name prefixed with `userns:` first enters a bare user+network+mount
//! namespace where the attempt's uid is 0 with every capability: the
//! control for attempts that need privilege (raw sockets, mounts,
//! `setuid(0)`), which an unprivileged owner doesn't have on the host.

use std::ffi::CString;
use std::io::{Read, Write};
use std::path::Path;

use serde_json::json;

use super::errno::{arg, check, cstr, io, os_err};

/// An attempt's outcome: `Ok(what happened)` or `Err(what stopped it)`.
type Outcome = Result<String, String>;

/// Entry point of `__probe-attempt`.
pub(crate) fn run(name: &str, args: &[String]) -> u8 {
    if name == "serve-one-call" {
        return super::serve_one_call(args);
    }
    let (name, userns) = match name.strip_prefix("userns:") {
        Some(n) => (n, true),
        None => (name, false),
    };
    let outcome = if userns {
        enter_bare_userns().and_then(|()| attempt(name, args))
    } else {
        attempt(name, args)
    };
    let line = match outcome {
        Ok(r) => json!({"ok": true, "result": r}),
        Err(r) => json!({"ok": false, "result": r}),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    0
}

/// Become uid 0 with every capability in fresh user, network and mount
/// namespaces (the privileged positive control).
fn enter_bare_userns() -> Result<(), String> {
    // SAFETY: plain id getters and unshare.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    check(
        unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::CLONE_NEWNS) } as _,
    )
    .map_err(|e| format!("control: unshare {e}"))?;
    let w = |p: &str, t: String| std::fs::write(p, t).map_err(|e| format!("control: {p}: {e}"));
    w("/proc/self/setgroups", "deny".into())?;
    w("/proc/self/uid_map", format!("0 {uid} 1\n"))?;
    w("/proc/self/gid_map", format!("0 {gid} 1\n"))?;
    Ok(())
}

fn attempt(name: &str, args: &[String]) -> Outcome {
    match name {
        "tcp-connect" => tcp_connect(arg(args, 0)?),
        "udp-send" => udp_send(arg(args, 0)?),
        "dns-lookup" => dns_lookup(arg(args, 0)?),
        "socket" => socket(arg(args, 0)?),
        "mptcp-connect" => mptcp_connect(arg(args, 0)?),
        "unix-connect" => std::os::unix::net::UnixStream::connect(arg(args, 0)?)
            .map(|_| "connected".to_string())
            .map_err(io),
        "abstract-connect" => abstract_connect(arg(args, 0)?),
        "socketpair" => socketpair(arg(args, 0)?),
        "io-uring-setup" => io_uring_setup(),
        "x32-syscall" => x32_syscall(),
        "unshare-userns" => {
            // SAFETY: unshare takes flags only.
            check(unsafe { libc::unshare(libc::CLONE_NEWUSER) } as _)
                .map(|_| "new user namespace".into())
        }
        "clone-newuser" => raw_clone((libc::CLONE_NEWUSER | libc::SIGCHLD) as u64),
        "clone3" => clone3(),
        "mount-tmpfs" => mount_tmpfs(arg(args, 0)?),
        "read" => {
            let mut s = String::new();
            std::fs::File::open(arg(args, 0)?)
                .and_then(|mut f| f.read_to_string(&mut s))
                .map(|n| format!("read {n} bytes"))
                .map_err(io)
        }
        "list" => std::fs::read_dir(arg(args, 0)?)
            .map(|d| format!("{} entries", d.count()))
            .map_err(io),
        // The numeric entries of a folder (a proc's processes), listed.
        "list-pids" => std::fs::read_dir(arg(args, 0)?)
            .map(|d| {
                let pids: Vec<String> = d
                    .flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
                    .collect();
                format!("pids {}", pids.join(","))
            })
            .map_err(io),
        "create" => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(arg(args, 0)?)
            .and_then(|mut f| f.write_all(b"probe"))
            .map(|()| "created".into())
            .map_err(io),
        "write" => std::fs::OpenOptions::new()
            .append(true)
            .open(arg(args, 0)?)
            .and_then(|mut f| f.write_all(b"probe"))
            .map(|()| "written".into())
            .map_err(io),
        "truncate" => {
            let p = cstr(arg(args, 0)?)?;
            // SAFETY: truncate on a C string we own.
            check(unsafe { libc::truncate(p.as_ptr(), 0) } as _).map(|_| "truncated".into())
        }
        "rename" => std::fs::rename(arg(args, 0)?, arg(args, 1)?)
            .map(|()| "renamed".into())
            .map_err(io),
        "unlink" => std::fs::remove_file(arg(args, 0)?)
            .map(|()| "unlinked".into())
            .map_err(io),
        "mkdir" => std::fs::create_dir(arg(args, 0)?)
            .map(|()| "created".into())
            .map_err(io),
        "link" => std::fs::hard_link(arg(args, 0)?, arg(args, 1)?)
            .map(|()| "linked".into())
            .map_err(io),
        "mknod" => {
            let p = cstr(arg(args, 0)?)?;
            // SAFETY: mknod of a FIFO on a C string we own.
            check(unsafe { libc::mknod(p.as_ptr(), libc::S_IFIFO | 0o600, 0) } as _)
                .map(|_| "fifo created".into())
        }
        "chmod" => {
            let p = cstr(arg(args, 0)?)?;
            // SAFETY: chmod on a C string we own.
            check(unsafe { libc::chmod(p.as_ptr(), 0o640) } as _).map(|_| "mode changed".into())
        }
        "chown" => {
            let p = cstr(arg(args, 0)?)?;
            // SAFETY: chown to our own ids, on a C string we own.
            check(unsafe { libc::chown(p.as_ptr(), libc::getuid(), libc::getgid()) } as _)
                .map(|_| "owner set".into())
        }
        "utime" => {
            let p = cstr(arg(args, 0)?)?;
            // SAFETY: utimensat with "now" for both times.
            check(unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), std::ptr::null(), 0) } as _)
                .map(|_| "times changed".into())
        }
        "setxattr" => {
            let p = cstr(arg(args, 0)?)?;
            let key = cstr("user.reachweaver-probe")?;
            // SAFETY: setxattr with buffers we own.
            check(
                unsafe { libc::setxattr(p.as_ptr(), key.as_ptr(), b"x".as_ptr().cast(), 1, 0) }
                    as _,
            )
            .map(|_| "attribute set".into())
        }
        "exec" => std::process::Command::new(arg(args, 0)?)
            .stdin(std::process::Stdio::null())
            .status()
            .map(|s| format!("ran: {s}"))
            .map_err(io),
        "kill" => {
            let pid: i32 = arg(args, 0)?.parse().map_err(|_| "bad pid")?;
            // SAFETY: signal 0 only checks whether the signal could be sent.
            check(unsafe { libc::kill(pid, 0) } as _).map(|_| "signal deliverable".into())
        }
        "ptrace" => {
            let pid: i32 = arg(args, 0)?.parse().map_err(|_| "bad pid")?;
            // SAFETY: PTRACE_SEIZE doesn't stop the tracee; exiting detaches.
            check(unsafe {
                libc::ptrace(
                    libc::PTRACE_SEIZE,
                    pid,
                    std::ptr::null_mut::<libc::c_void>(),
                    std::ptr::null_mut::<libc::c_void>(),
                )
            })
            .map(|_| "attached".into())
        }
        "tiocsti" => tiocsti(),
        "setuid-0" => {
            // SAFETY: setuid takes an integer.
            check(unsafe { libc::setuid(0) } as _).map(|_| "uid 0".into())
        }
        "no-new-privs-off" => {
            // SAFETY: integer-only prctl query.
            let v = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
            if v == 0 {
                Ok("NoNewPrivs=0".into())
            } else {
                Err(format!("NoNewPrivs={v}"))
            }
        }
        "seccomp-off" => {
            // SAFETY: integer-only prctl query.
            let v = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
            if v == 0 {
                Ok("Seccomp=0".into())
            } else {
                Err(format!("Seccomp={v}"))
            }
        }
        "caps-held" => {
            let h = crate::sandbox::linux::caps::held(63);
            let text = format!(
                "CapEff={:x} CapPrm={:x} CapInh={:x} CapBnd={:x} CapAmb={:x}",
                h.effective, h.permitted, h.inheritable, h.bounding, h.ambient
            );
            // "sets": the bounding set is not part of the promise here.
            let bounding = if arg(args, 0)? == "sets" {
                0
            } else {
                h.bounding
            };
            if h.effective | h.permitted | h.inheritable | bounding | h.ambient == 0 {
                if bounding == 0 && h.bounding != 0 {
                    return Err(format!(
                        "CapEff=0 CapPrm=0 CapInh=0 (bounding set {:x} kept, not promised) CapAmb=0",
                        h.bounding
                    ));
                }
                Err(text)
            } else {
                Ok(text)
            }
        }
        "fork-bomb" => fork_bomb(arg(args, 0)?.parse().map_err(|_| "bad count")?),
        "memory-bomb" => memory_bomb(arg(args, 0)?.parse().map_err(|_| "bad size")?),
        "stdout-flood" => stdout_flood(),
        "env" => {
            let present: Vec<&String> = args
                .iter()
                .filter(|n| std::env::var_os(n).is_some())
                .collect();
            if present.is_empty() {
                Err("absent".into())
            } else {
                Ok(format!(
                    "present: {}",
                    present
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ))
            }
        }
        "sleep-marker" => {
            std::thread::sleep(std::time::Duration::from_secs(60));
            Ok("slept".into())
        }
        "daemon" => daemon(args),
        "write-tmpdir" => {
            let dir = std::env::var("TMPDIR").map_err(|_| "no TMPDIR")?;
            let p = Path::new(&dir).join("probe-file");
            std::fs::write(&p, b"probe").map_err(io)?;
            std::fs::read(&p).map_err(io)?;
            std::fs::remove_file(&p).map_err(io)?;
            Ok("wrote, read and removed a file in TMPDIR".into())
        }
        "fork" => {
            let out = std::process::Command::new(std::env::current_exe().map_err(io)?)
                .args(["__probe-attempt", "env", "TMPDIR"])
                .output()
                .map_err(io)?;
            if out.status.success() {
                Ok("started a child".into())
            } else {
                Err(format!("child: {}", out.status))
            }
        }
        other => super::host_attempts::attempt(other, args)
            .unwrap_or_else(|| Err(format!("unknown attempt {other}"))),
    }
}

fn tcp_connect(addr: &str) -> Outcome {
    let a: std::net::SocketAddr = addr.parse().map_err(|_| "bad address")?;
    std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(3))
        .map(|_| "connected".into())
        .map_err(io)
}

fn udp_send(addr: &str) -> Outcome {
    let a: std::net::SocketAddr = addr.parse().map_err(|_| "bad address")?;
    let s = std::net::UdpSocket::bind("127.0.0.1:0").map_err(io)?;
    s.send_to(b"reachweaver-probe", a)
        .map(|n| format!("sent {n} bytes"))
        .map_err(io)
}

/// `getaddrinfo`, reporting the resolver's own error code.
fn dns_lookup(name: &str) -> Outcome {
    let host = cstr(name)?;
    let mut res: *mut libc::addrinfo = std::ptr::null_mut();
    // SAFETY: getaddrinfo with a C string we own; the result is freed below.
    let r =
        unsafe { libc::getaddrinfo(host.as_ptr(), std::ptr::null(), std::ptr::null(), &mut res) };
    if r == 0 {
        // SAFETY: freeing what getaddrinfo returned.
        unsafe { libc::freeaddrinfo(res) };
        return Ok(format!("{name} resolved"));
    }
    let code = match r {
        libc::EAI_AGAIN => "EAI_AGAIN".to_string(),
        libc::EAI_FAIL => "EAI_FAIL".to_string(),
        libc::EAI_NONAME => "EAI_NONAME".to_string(),
        libc::EAI_NODATA => "EAI_NODATA".to_string(),
        libc::EAI_SYSTEM => format!("EAI_SYSTEM({})", os_err()),
        other => format!("EAI({other})"),
    };
    Err(code)
}

fn socket(kind: &str) -> Outcome {
    let (family, ty, proto) = match kind {
        "raw" => (libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
        "packet" => (libc::AF_PACKET, libc::SOCK_RAW, 0),
        "netlink" => (libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE),
        "vsock" => (libc::AF_VSOCK, libc::SOCK_STREAM, 0),
        "unix" => (libc::AF_UNIX, libc::SOCK_STREAM, 0),
        other => return Err(format!("unknown socket kind {other}")),
    };
    // SAFETY: socket takes integers; the descriptor is closed at once.
    let fd = check(unsafe { libc::socket(family, ty | libc::SOCK_CLOEXEC, proto) } as _)?;
    unsafe { libc::close(fd as i32) };
    Ok(format!("{kind} socket created"))
}

fn mptcp_connect(addr: &str) -> Outcome {
    let a: std::net::SocketAddrV4 = addr.parse().map_err(|_| "bad address")?;
    // SAFETY: socket/connect/close on a descriptor we own, with a sockaddr we built.
    unsafe {
        let fd =
            check(libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 262) as _)?
                as i32;
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: a.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*a.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        let r = libc::connect(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        );
        let e = os_err();
        libc::close(fd);
        if r == 0 {
            Ok("connected".into())
        } else {
            Err(e)
        }
    }
}

fn abstract_connect(name: &str) -> Outcome {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).map_err(io)?;
    std::os::unix::net::UnixStream::connect_addr(&addr)
        .map(|_| "connected".into())
        .map_err(io)
}

fn socketpair(kind: &str) -> Outcome {
    let ty = match kind {
        "dgram" => libc::SOCK_DGRAM,
        "seqpacket" => libc::SOCK_SEQPACKET,
        "stream" => libc::SOCK_STREAM,
        other => return Err(format!("unknown type {other}")),
    };
    let mut fds = [0i32; 2];
    // SAFETY: socketpair fills the array we own; both ends are closed.
    check(
        unsafe { libc::socketpair(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) }
            as _,
    )?;
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    Ok(format!("{kind} pair created"))
}

fn io_uring_setup() -> Outcome {
    let mut params = [0u8; 120];
    // SAFETY: io_uring_setup writes into a zeroed params block we own.
    let fd = check(unsafe { libc::syscall(libc::SYS_io_uring_setup, 4u32, params.as_mut_ptr()) })?;
    unsafe { libc::close(fd as i32) };
    Ok("ring created".into())
}

fn x32_syscall() -> Outcome {
    // getpid through the x32 entry point.
    // SAFETY: getpid takes no arguments.
    check(unsafe { libc::syscall(0x4000_0000 | libc::SYS_getpid) })
        .map(|pid| format!("x32 getpid = {pid}"))
}

/// A raw clone (like fork) with extra flags; the child exits at once.
fn raw_clone(flags: u64) -> Outcome {
    // SAFETY: without CLONE_VM the child has its own copy of memory and
    // only calls _exit.
    let pid =
        check(unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) })?;
    if pid == 0 {
        unsafe { libc::_exit(0) };
    }
    reap(pid as i32);
    Ok("child in a new namespace".into())
}

fn clone3() -> Outcome {
    #[repr(C)]
    #[derive(Default)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
    }
    let args = CloneArgs {
        exit_signal: libc::SIGCHLD as u64,
        ..CloneArgs::default()
    };
    // SAFETY: clone3 without CLONE_VM behaves like fork; the child exits.
    let pid = check(unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    })?;
    if pid == 0 {
        unsafe { libc::_exit(0) };
    }
    reap(pid as i32);
    Ok("clone3 child".into())
}

fn reap(pid: i32) {
    let mut st = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
}

fn mount_tmpfs(dir: &str) -> Outcome {
    let target = cstr(dir)?;
    let fstype = cstr("tmpfs")?;
    // SAFETY: mount with C strings we own; unmounted right away.
    check(unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    } as _)?;
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    Ok("mounted".into())
}

/// Make the terminal on stdin ours, then push a byte into its input.
fn tiocsti() -> Outcome {
    // SAFETY: session and terminal ioctls on stdin; failures are reported.
    unsafe {
        libc::setsid();
        libc::ioctl(0, libc::TIOCSCTTY, 0);
        let c: u8 = b'#';
        check(libc::ioctl(0, libc::TIOCSTI, &c as *const u8) as _)?;
        // Stay in the session a moment: ending it hangs the terminal up and
        // flushes the queue before the probe can see the byte.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Ok("byte injected".into())
    }
}

fn fork_bomb(n: usize) -> Outcome {
    let mut kids = Vec::new();
    let mut stopped = None;
    for _ in 0..n {
        // SAFETY: the child only sleeps until it is killed.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            stopped = Some(os_err());
            break;
        }
        if pid == 0 {
            loop {
                unsafe { libc::pause() };
            }
        }
        kids.push(pid);
    }
    let count = kids.len();
    for pid in kids {
        // SAFETY: killing and reaping our own children.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        reap(pid);
    }
    match stopped {
        None => Ok(format!("{count} processes")),
        Some(e) => Err(format!("{e} after {count} processes")),
    }
}

fn memory_bomb(gib: usize) -> Outcome {
    let chunk = 1usize << 30;
    let mut maps = Vec::new();
    let mut stopped = None;
    for _ in 0..gib {
        // SAFETY: anonymous mapping, never touched, unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                chunk,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            stopped = Some(os_err());
            break;
        }
        maps.push(p);
    }
    let count = maps.len();
    for p in maps {
        // SAFETY: unmapping what we mapped.
        unsafe { libc::munmap(p, chunk) };
    }
    match stopped {
        None => Ok(format!("{count} GiB mapped")),
        Some(e) => Err(format!("{e} after {count} GiB")),
    }
}

fn stdout_flood() -> Outcome {
    let block = vec![b'x'; 1 << 20];
    let mut out = std::io::stdout().lock();
    loop {
        if let Err(e) = out.write_all(&block) {
            return Err(io(e));
        }
    }
}

/// Leave a detached grandchild (new session, parent gone) that carries the
/// marker in its command line, then return.
fn daemon(args: &[String]) -> Outcome {
    let marker = arg(args, 0)?;
    let exe = std::env::current_exe().map_err(io)?;
    let exe_c = cstr(&exe.to_string_lossy())?;
    let argv_c: Vec<CString> = [
        exe.to_string_lossy().as_ref(),
        "__probe-attempt",
        "sleep-marker",
        marker,
    ]
    .iter()
    .map(|s| cstr(s))
    .collect::<Result<_, _>>()?;
    // SAFETY: single-threaded; the children only call setsid/fork/execv/_exit.
    unsafe {
        let pid = check(libc::fork() as _)? as i32;
        if pid == 0 {
            libc::setsid();
            if libc::fork() == 0 {
                let mut argv: Vec<*const libc::c_char> =
                    argv_c.iter().map(|a| a.as_ptr()).collect();
                argv.push(std::ptr::null());
                let null = cstr("/dev/null").unwrap_or_default();
                let fd = libc::open(null.as_ptr(), libc::O_RDWR);
                libc::dup2(fd, 1);
                libc::dup2(fd, 2);
                libc::execv(exe_c.as_ptr(), argv.as_ptr());
            }
            libc::_exit(0);
        }
        reap(pid);
    }
    Ok("daemon started".into())
}

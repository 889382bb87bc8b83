//! The macOS escape attempts, run as `__probe-attempt NAME ARGS...`: once
//! outside the sandbox (the positive control) and once inside it. Each
//! prints the probe's one report line (see `probe/runner.rs`) saying what
//! happened; the probe shows that text as the line's detail.

use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::sandbox::probe::report_line::{print_report, Tried};
use crate::sandbox::probe::table::attempt_table;

fn done(ok: bool, what: String) -> Tried {
    if ok {
        Ok(what)
    } else {
        Err(what)
    }
}

fn io<T>(r: std::io::Result<T>, what: &str) -> Tried {
    match r {
        Ok(_) => Ok(format!("{what}: succeeded")),
        Err(e) => Err(format!("{what}: {e}")),
    }
}

extern "C" {
    static bootstrap_port: libc::mach_port_t;
    fn bootstrap_look_up(
        bp: libc::mach_port_t,
        service_name: *const libc::c_char,
        sp: *mut libc::mach_port_t,
    ) -> libc::c_int;
}

/// Look a Mach service up: how a process reaches the keychain (securityd),
/// Launch Services (what `open` asks) and the Apple Event manager.
fn mach_lookup(name: &str) -> std::io::Result<()> {
    let c = std::ffi::CString::new(name).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    let mut port: libc::mach_port_t = 0;
    // SAFETY: a valid C string and out pointer; bootstrap_port is set by libSystem.
    let kr = unsafe { bootstrap_look_up(bootstrap_port, c.as_ptr(), &mut port) };
    if kr == 0 {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("bootstrap_look_up: {kr}")))
    }
}

#[link(name = "IOKit", kind = "framework")]
extern "C" {
    fn IOServiceMatching(name: *const libc::c_char) -> *mut libc::c_void;
    fn IOServiceGetMatchingService(
        main_port: libc::mach_port_t,
        matching: *mut libc::c_void,
    ) -> u32;
    fn IORegistryEntryCreateCFProperty(
        entry: u32,
        key: *const libc::c_void,
        allocator: *const libc::c_void,
        options: u32,
    ) -> *const libc::c_void;
    fn IOObjectRelease(object: u32) -> libc::c_int;
}

#[link(name = "CoreFoundation", kind = "framework")]
extern "C" {
    fn CFStringCreateWithCString(
        allocator: *const libc::c_void,
        text: *const libc::c_char,
        encoding: u32,
    ) -> *const libc::c_void;
    fn CFRelease(object: *const libc::c_void);
}

const CF_STRING_ENCODING_UTF8: u32 = 0x0800_0100;

/// Read an IOKit property of the platform device (`IOPlatformUUID`, the
/// machine's hardware identifier): what `ioreg` shows and what the profile
/// denies with `iokit-get-properties`.
fn iokit_property(name: &str) -> std::io::Result<()> {
    let key = std::ffi::CString::new(name).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    // SAFETY: C strings outlive the calls; every object made here is
    // released here; a null answer is checked before use.
    unsafe {
        let matching = IOServiceMatching(c"IOPlatformExpertDevice".as_ptr());
        if matching.is_null() {
            return Err(std::io::Error::other("IOServiceMatching failed"));
        }
        // Consumes `matching`; 0 is kIOMainPortDefault.
        let service = IOServiceGetMatchingService(0, matching);
        if service == 0 {
            return Err(std::io::Error::other("no platform device found"));
        }
        let cf_key =
            CFStringCreateWithCString(std::ptr::null(), key.as_ptr(), CF_STRING_ENCODING_UTF8);
        if cf_key.is_null() {
            IOObjectRelease(service);
            return Err(std::io::Error::other("CFStringCreateWithCString failed"));
        }
        let value = IORegistryEntryCreateCFProperty(service, cf_key, std::ptr::null(), 0);
        CFRelease(cf_key);
        IOObjectRelease(service);
        if value.is_null() {
            return Err(std::io::Error::other(format!("{name}: no answer")));
        }
        CFRelease(value);
        Ok(())
    }
}

/// `sysctl kern.procargs2` for a pid: its argv and environment.
fn procargs(pid: i32) -> std::io::Result<usize> {
    let mut mib = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid];
    let mut buf = vec![0u8; 1 << 16];
    let mut len = buf.len();
    // SAFETY: valid mib and buffer of `len` bytes.
    let r = unsafe {
        libc::sysctl(
            mib.as_mut_ptr(),
            3,
            buf.as_mut_ptr().cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if r == 0 {
        Ok(len)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn sysctl_by_name(name: &str) -> std::io::Result<usize> {
    let c = std::ffi::CString::new(name).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    let mut buf = [0u8; 256];
    let mut len = buf.len();
    // SAFETY: a valid C string and buffer of `len` bytes.
    let r = unsafe {
        libc::sysctlbyname(
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if r == 0 {
        Ok(len)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn proc_path(pid: i32) -> std::io::Result<()> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: a buffer of the given size.
    let n = unsafe { libc::proc_pidpath(pid, buf.as_mut_ptr().cast(), buf.len() as u32) };
    if n > 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map(String::as_str).unwrap_or("")
}

attempt_table! {
    run -> Tried;
    Tcp = "tcp" => |args| {
        let a0 = arg(args, 0);
        io(std::net::TcpStream::connect(a0), "connect tcp")
    },
    Udp = "udp" => |args| {
        let a0 = arg(args, 0);
        io(
            UdpSocket::bind("127.0.0.1:0").and_then(|s| s.send_to(b"probe", a0)),
            "send udp",
        )
    },
    Unix = "unix" => |args| {
        let a0 = arg(args, 0);
        io(std::os::unix::net::UnixStream::connect(a0), "connect unix")
    },
    Socket = "socket" => |args| {
        let _ = args;
        {
            // SAFETY: creating (and closing) a socket.
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
            if fd >= 0 {
                // SAFETY: closing the socket just made.
                unsafe { libc::close(fd) };
            }
            io(
                if fd >= 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                },
                "socket(AF_INET)",
            )
        }
    },
    Read = "read" => |args| {
        let a0 = arg(args, 0);
        io(std::fs::read(a0), &format!("read {a0}"))
    },
    List = "list" => |args| {
        let a0 = arg(args, 0);
        io(std::fs::read_dir(a0), &format!("list {a0}"))
    },
    Write = "write" => |args| {
        let a0 = arg(args, 0);
        io(std::fs::write(a0, b"probe"), &format!("write {a0}"))
    },
    WriteTmpdir = "write-tmpdir" => |args| {
        let _ = args;
        {
            let dir = std::env::var_os("TMPDIR")
                .map(PathBuf::from)
                .unwrap_or_default();
            io(
                std::fs::write(dir.join("probe"), b"x"),
                "write $TMPDIR/probe",
            )
        }
    },
    Hardlink = "hardlink" => |args| {
        let a0 = arg(args, 0);
        {
            // Link an outside file into the writable temp folder, then
            // read it through the link.
            let link = std::env::var_os("TMPDIR")
                .map(PathBuf::from)
                .unwrap_or_default()
                .join("hardlink");
            io(
                std::fs::hard_link(a0, &link).and_then(|()| std::fs::read(&link)),
                &format!("link {a0} and read it"),
            )
        }
    },
    ExecWritten = "exec-written" => |args| {
        let _ = args;
        {
            // Write a script where the run may write, then run it.
            use std::os::unix::fs::PermissionsExt;
            let script = std::env::var_os("TMPDIR")
                .map(PathBuf::from)
                .unwrap_or_default()
                .join("probe.sh");
            let r = std::fs::write(&script, b"#!/bin/sh\nexit 0\n")
                .and_then(|()| {
                    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700))
                })
                .and_then(|()| Command::new(&script).status())
                .and_then(|s| {
                    if s.success() {
                        Ok(())
                    } else {
                        Err(std::io::Error::other(format!("{s}")))
                    }
                });
            io(r, "run a script written in a writable folder")
        }
    },
    Procargs = "procargs" => |args| {
        let a0 = arg(args, 0);
        {
            let pid: i32 = a0.parse().unwrap_or(0);
            io(
                procargs(pid),
                &format!("sysctl kern.procargs2 of pid {pid}"),
            )
        }
    },
    Procinfo = "procinfo" => |args| {
        let a0 = arg(args, 0);
        {
            let pid: i32 = a0.parse().unwrap_or(0);
            io(proc_path(pid), &format!("proc_pidpath of pid {pid}"))
        }
    },
    Signal = "signal" => |args| {
        let a0 = arg(args, 0);
        {
            let pid: i32 = a0.parse().unwrap_or(0);
            // SAFETY: signal 0 sends nothing; it only asks for permission.
            let r = unsafe { libc::kill(pid, 0) };
            io(
                if r == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                },
                &format!("kill({pid}, 0)"),
            )
        }
    },
    Sysctl = "sysctl" => |args| {
        let a0 = arg(args, 0);
        io(sysctl_by_name(a0), &format!("sysctl {a0}"))
    },
    Iokit = "iokit" => |args| {
        let a0 = arg(args, 0);
        io(iokit_property(a0), &format!("IOKit property {a0}"))
    },
    ChmodX = "chmod-x" => |args| {
        let a0 = arg(args, 0);
        {
            use std::os::unix::fs::PermissionsExt;
            io(
                std::fs::set_permissions(a0, std::fs::Permissions::from_mode(0o755)),
                &format!("chmod 755 {a0}"),
            )
        }
    },
    Mach = "mach" => |args| {
        let a0 = arg(args, 0);
        io(mach_lookup(a0), &format!("look up {a0}"))
    },
    Exec = "exec" => |args| {
        let a0 = arg(args, 0);
        io(
            Command::new(a0)
                .args(&args[1.min(args.len())..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .and_then(|s| {
                    if s.success() {
                        Ok(())
                    } else {
                        Err(std::io::Error::other(format!("{s}")))
                    }
                }),
            &format!("run {a0}"),
        )
    },
    Env = "env" => |args| {
        let a0 = arg(args, 0);
        {
            let seen = std::env::var_os(a0).is_some();
            done(
                seen,
                format!(
                    "environment variable {a0} {}",
                    if seen { "visible" } else { "absent" }
                ),
            )
        }
    },
}

/// Entry point of `__probe-attempt` on macOS.
pub fn attempt(name: &str, args: &[String]) -> u8 {
    print_report(match Attempt::from_word(name) {
        Some(a) => a.run(args),
        None => Err(format!("unknown attempt {name}")),
    })
}

//! The seccomp layer: an allow-list of the system calls backends need.
//! Every call not listed fails with `ENOSYS`, so whatever a future kernel
//! adds (`file_setattr`, `listmount`, ...) stays refused until it is listed.
//!
//! The program is assembled by hand from one table, [`allow_list`], which
//! gives each listed system call a verdict: allow, refuse with an errno, or
//! let the low 32 bits of some arguments decide (`ioctl` requests, `fcntl`
//! commands, `clone` flags, `socketpair` types, `open` modes, `fallocate`
//! modes, `renameat2` flags). One table
//! read top to bottom and a short emitter are easier to audit than two
//! stacked seccompiler filters whose answers the kernel merges by action
//! precedence and installation order; the emitter is tested by running the
//! real program on crafted `seccomp_data` (the `bpf_eval` test module).
//!
//! The program:
//!
//! 1. kills the process for a foreign audit architecture or an x32 number
//!    (the same kernel code under other numbers, which a table keyed on
//!    numbers would misjudge);
//! 2. walks the table, one `jeq nr` per entry followed by that entry's
//!    verdict, so no jump spans more than one entry (classic BPF jumps reach
//!    255 instructions);
//! 3. answers `ENOSYS` to every number it didn't find.
//!
//! A run with a supervisor gets the same table with every errno verdict
//! (the unlisted calls' included) handed to the supervisor instead
//! ([`watched_list`]), which answers the errno this program gives and
//! records the call; [`errno_of`] runs this program for it.
//!
//! Entries that only look at the number cost nothing after the first call:
//! the kernel caches an "always allowed" answer per number. The entries
//! that read arguments come first, as they run the program on every call.
//!
//! Refusals keep `EPERM` where a family was refused that way before and the
//! probe checks it (sockets, namespaces, `mount`, tracing, io_uring,
//! metadata changes, terminal injection, whiteouts). Everything else
//! unlisted reads as "this kernel doesn't have it", which libraries already
//! handle (glibc falls back from `clone3` to `clone`). An `ioctl` request
//! not listed answers `ENOTTY`, the "not that kind of file" answer callers
//! expect, and a `fallocate` mode other than 0 `EOPNOTSUPP`, the "not on
//! this file system" answer.

use seccompiler::{sock_filter, BpfProgram};

/// System calls added since Linux 5.1 share one number on every
/// architecture; these are named here rather than taken from `libc`, whose
/// tables lag behind.
mod nr {
    pub(super) const PIDFD_SEND_SIGNAL: i64 = 424;
    pub(super) const IO_URING_SETUP: i64 = 425;
    pub(super) const IO_URING_ENTER: i64 = 426;
    pub(super) const IO_URING_REGISTER: i64 = 427;
    pub(super) const PIDFD_OPEN: i64 = 434;
    pub(super) const CLOSE_RANGE: i64 = 436;
    #[cfg(test)]
    pub const OPENAT2: i64 = 437;
    pub(super) const FACCESSAT2: i64 = 439;
    pub(super) const EPOLL_PWAIT2: i64 = 441;
    pub(super) const FUTEX_WAITV: i64 = 449;
    pub(super) const FCHMODAT2: i64 = 452;
    pub(super) const MAP_SHADOW_STACK: i64 = 453;
    pub(super) const SETXATTRAT: i64 = 463;
    pub(super) const REMOVEXATTRAT: i64 = 466;
}

/// Ioctl request numbers as the filter compares them: the kernel reads the
/// request as an `unsigned int` (the `libc` type of these constants differs
/// between C libraries, hence the casts).
#[allow(clippy::unnecessary_cast)]
pub mod request {
    pub const TCGETS: u32 = libc::TCGETS as u32;
    pub const TCGETS2: u32 = libc::TCGETS2 as u32;
    pub const TIOCGWINSZ: u32 = libc::TIOCGWINSZ as u32;
    pub const TIOCGPGRP: u32 = libc::TIOCGPGRP as u32;
    pub const TIOCGSID: u32 = libc::TIOCGSID as u32;
    pub const FIONREAD: u32 = libc::FIONREAD as u32;
    pub const FIONBIO: u32 = libc::FIONBIO as u32;
    pub const FIOCLEX: u32 = libc::FIOCLEX as u32;
    pub const FIONCLEX: u32 = libc::FIONCLEX as u32;
    pub const TIOCSTI: u32 = libc::TIOCSTI as u32;
    pub const TIOCLINUX: u32 = libc::TIOCLINUX as u32;
}

/// `fcntl` commands refused: a lease and a directory notification report
/// what other processes do to a file or folder.
const F_SETLEASE: u32 = 1024;
const F_NOTIFY: u32 = 1026;

/// `renameat2`'s flag that leaves a whiteout (a 0:0 character device) where
/// the source was: a device made past Landlock's refusal to make devices.
const RENAME_WHITEOUT: u32 = libc::RENAME_WHITEOUT;

/// `open` flags that create a file (`O_TMPFILE` includes `O_DIRECTORY`,
/// so its own bit is tested).
const O_CREAT: u32 = libc::O_CREAT as u32;
const O_TMPFILE: u32 = (libc::O_TMPFILE & !libc::O_DIRECTORY) as u32;

const CLONE_NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;

/// The socket type is the low four bits of `socketpair`'s second argument;
/// the bits above are `SOCK_CLOEXEC` and `SOCK_NONBLOCK`.
const SOCK_TYPE_MASK: u32 = 0xf;

/// x32 system calls are the x86_64 numbers with this bit set. They reach
/// the same kernel code under different numbers, so a filter keyed on
/// numbers must refuse them outright.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The audit architecture this filter is built for.
pub fn audit_arch() -> Result<u32, SeccompBuildError> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(AUDIT_ARCH_X86_64),
        "aarch64" => Ok(AUDIT_ARCH_AARCH64),
        other => Err(SeccompBuildError(format!("no seccomp filter for {other}"))),
    }
}

pub const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
pub const AUDIT_ARCH_AARCH64: u32 = 183 | 0x8000_0000 | 0x4000_0000;

#[derive(Debug)]
pub struct SeccompBuildError(pub String);

impl std::fmt::Display for SeccompBuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the filter answers for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterAnswer {
    Allow,
    Errno(i32),
    /// Handed to the supervisor holding the filter's listener
    /// (`SECCOMP_RET_USER_NOTIF`); without one the kernel answers `ENOSYS`.
    Notify,
}

const EPERM: FilterAnswer = FilterAnswer::Errno(libc::EPERM);

/// What `fallocate` answers for any mode but 0: the "this file system
/// can't do that" answer, which callers of `FALLOC_FL_PUNCH_HOLE` and the
/// like already handle by falling back (writing zeros, or nothing).
const FALLOCATE_REFUSED: FilterAnswer = FilterAnswer::Errno(libc::EOPNOTSUPP);

/// `(low 32 bits of argument arg) & mask == value`.
#[derive(Debug, Clone, Copy)]
pub struct Test {
    arg: u8,
    mask: u32,
    value: u32,
}

fn arg_is(arg: u8, value: u32) -> Test {
    Test {
        arg,
        mask: u32::MAX,
        value,
    }
}

fn arg_masked(arg: u8, mask: u32, value: u32) -> Test {
    Test { arg, mask, value }
}

/// One or more tests that must all hold for the answer to apply.
#[derive(Debug, Clone)]
pub struct Case {
    tests: Vec<Test>,
    answer: FilterAnswer,
}

fn case(tests: Vec<Test>, answer: FilterAnswer) -> Case {
    Case { tests, answer }
}

/// A listed call's verdict.
#[derive(Debug, Clone)]
pub enum Decision {
    Always(FilterAnswer),
    /// The first case whose tests all hold decides, else `otherwise`.
    Cases {
        cases: Vec<Case>,
        otherwise: FilterAnswer,
    },
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub nr: i64,
    pub verdict: Decision,
}

fn always(list: &mut Vec<Entry>, answer: FilterAnswer, nrs: &[i64]) {
    list.extend(nrs.iter().map(|&nr| Entry {
        nr,
        verdict: Decision::Always(answer),
    }));
}

fn by_args(list: &mut Vec<Entry>, nr: i64, cases: Vec<Case>, otherwise: FilterAnswer) {
    list.push(Entry {
        nr,
        verdict: Decision::Cases { cases, otherwise },
    });
}

/// The table. How it was derived: every program below ran under
/// `strace -f -qq -o TRACE` and the calls, `ioctl` requests, `fcntl`
/// commands and `clone` flags in the traces were collected (Linux 6.18,
/// Debian 12: glibc 2.36, gcc 12.2, dash 0.5.12, bash 5.2.15):
///
/// - the reference backend: `reachweaver-reference --home=W describe
///   --format=json`, then `init` and some twenty read-only and writing
///   commands (version, context, doctor, settings, list, log-summary, ...)
///   in a copy `W` of `examples/workspace`;
/// - CPython 3.11.7 and 3.11.2 on a script using asyncio (event loop,
///   `create_subprocess_exec`, `run_in_executor`), sqlite3 (a read-only
///   open and a query), `subprocess.run`, json, threading, hashlib, an ssl
///   context, lzma/bz2/gzip, tempfile writes and folders, shutil, a
///   `multiprocessing` fork pool, `os.posix_spawn`, mmap, `setitimer`,
///   `select`, pwd, uuid and ctypes;
/// - a C program (threads, malloc, fork, stdio, a file written and removed)
///   linked dynamically and with `gcc -static`;
/// - `/bin/sh` (dash) and bash running a script with pipes, command
///   substitution, a background job, `ls -la`, `cat`, `wc` and a trap;
/// - the integration tests (`sandbox_run`, `sandbox_python_backend`,
///   `sandbox_probe`, `tools_call`, `sandbox_seccomp`) under this filter,
///   as root and as nobody; the runs above were repeated under
///   `sandbox run` with `strace -f` to check that no call the programs
///   rely on met this filter's `ENOSYS`.
///
/// Beyond the obvious (files, memory, signals, threads), they needed:
/// `socketpair` and `sendto`/`recvfrom`/`getsockname` (asyncio's self-pipe),
/// `sysinfo` (glibc's `sysconf` for memory sizes; bash, CPython),
/// `close_range` and `vfork` (subprocess), `clone3` answered `ENOSYS` (glibc
/// then uses `clone` for threads and `posix_spawn`), `getxattr` and `statfs`
/// (`ls -l`), `link` (multiprocessing's named semaphores), `setitimer`,
/// `pselect6`, `restart_syscall`. Some calls they make must merely fail:
/// `socket` for glibc's nscd lookup (`EPERM`, then it reads the files),
/// and SQLite's `fchown` of its journal when run as root (refused, ignored).
/// Everything else listed is the same family as something measured (the
/// `*at` and legacy spellings, vectored I/O, the rest of a timer API) or
/// what newer runtimes use (`rseq`, `map_shadow_stack` for glibc's
/// shadow-stack threads, `pidfd_open` for CPython 3.12's child watcher,
/// `futex_waitv`).
///
/// Not listed, on purpose: `memfd_create` (memory outside `RLIMIT_AS`, and
/// code run from memory), System V shared memory, semaphores and message
/// queues and POSIX message queues (the same), `connect`/`bind`/`listen`/
/// `accept` (no socket to use them on), `userfaultfd`, `perf_event_open`,
/// `bpf`, key rings, `kexec_*`, modules, `process_vm_*`, `pidfd_getfd`,
/// `kcmp`, `open_by_handle_at`/`name_to_handle_at`, `inotify_*` and
/// `fanotify_*` (the root, the home and the runtime are the host's inodes,
/// shared by every run: a watch on them shows which files the host or a
/// concurrent run opens, and no backend measured uses one), `personality`, `modify_ldt`, `acct`, `swapon`, `reboot`, clock setting,
/// `chroot`, `quotactl`, `sync`/`syncfs`, `landlock_*`, `seccomp`, every
/// mount call but `mount` itself, `listmount`/`statmount`,
/// `file_getattr`/`file_setattr`, and the `*xattrat` readers.
///
/// One call depends on the layers beside the filter ([`Beside`]):
/// `truncate(2)`, by path.
pub fn allow_list(beside: Beside) -> Vec<Entry> {
    let mut l = Vec::new();

    // Argument checks first: these run the program on every call.

    // ioctl: terminal queries, the descriptor flags and the byte count
    // waiting. Everything else (FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR,
    // EXT4_IOC_SETVERSION, FICLONE, ...) answers ENOTTY; terminal input
    // injection and the Linux console keep their EPERM.
    let mut ioctl = vec![
        case(vec![arg_is(1, request::TIOCSTI)], EPERM),
        case(vec![arg_is(1, request::TIOCLINUX)], EPERM),
    ];
    for r in [
        request::TCGETS,
        request::TCGETS2,
        request::TIOCGWINSZ,
        request::TIOCGPGRP,
        request::TIOCGSID,
        request::FIONREAD,
        request::FIONBIO,
        request::FIOCLEX,
        request::FIONCLEX,
    ] {
        ioctl.push(case(vec![arg_is(1, r)], FilterAnswer::Allow));
    }
    by_args(
        &mut l,
        libc::SYS_ioctl,
        ioctl,
        FilterAnswer::Errno(libc::ENOTTY),
    );

    // fcntl: everything but leases and directory notifications.
    by_args(
        &mut l,
        libc::SYS_fcntl,
        vec![
            case(vec![arg_is(1, F_SETLEASE)], EPERM),
            case(vec![arg_is(1, F_NOTIFY)], EPERM),
        ],
        FilterAnswer::Allow,
    );

    // clone: fork, vfork and threads, never a new namespace. The legacy
    // call reads only the low 32 bits of its flags. clone3 passes its flags
    // in memory the filter can't read, so it stays unlisted (ENOSYS).
    by_args(
        &mut l,
        libc::SYS_clone,
        vec![case(
            vec![arg_masked(0, CLONE_NAMESPACE_FLAGS, 0)],
            FilterAnswer::Allow,
        )],
        EPERM,
    );

    // socketpair: only AF_UNIX + SOCK_STREAM (with CLOEXEC/NONBLOCK), which
    // asyncio and subprocess plumbing use.
    by_args(
        &mut l,
        libc::SYS_socketpair,
        vec![case(
            vec![
                arg_is(0, libc::AF_UNIX as u32),
                arg_masked(1, SOCK_TYPE_MASK, libc::SOCK_STREAM as u32),
            ],
            FilterAnswer::Allow,
        )],
        EPERM,
    );

    // fallocate: mode 0 only, which allocates and grows the file, so the
    // file-size limit bounds it. FALLOC_FL_KEEP_SIZE reserves blocks past
    // the end without changing the size, which RLIMIT_FSIZE never sees: a
    // draft run could hold any amount of the host's disk in the database
    // file, invisible to `ls -l` and kept after the run. Punching and
    // zeroing ranges are refused with it; callers fall back on
    // EOPNOTSUPP.
    by_args(
        &mut l,
        libc::SYS_fallocate,
        vec![case(vec![arg_is(1, 0)], FilterAnswer::Allow)],
        FALLOCATE_REFUSED,
    );

    // renameat2: RENAME_NOREPLACE and RENAME_EXCHANGE stay (Landlock and
    // the mount layer judge both names as for a plain rename);
    // RENAME_WHITEOUT leaves a character device where the source was,
    // which nothing but an overlay file system's own code needs. The
    // legacy rename and renameat have no flags.
    by_args(
        &mut l,
        libc::SYS_renameat2,
        vec![case(
            vec![arg_masked(4, RENAME_WHITEOUT, RENAME_WHITEOUT)],
            EPERM,
        )],
        FilterAnswer::Allow,
    );

    // Creating a file with an execute bit: refused, so nothing a run
    // writes (the draft's database folder is on the host) can become a
    // program; a mode of 0644/0666, what every runtime uses for data, is
    // fine. The mode is the call's own argument (before the umask), so the
    // run's umask doesn't matter. `openat2` carries its mode in memory the
    // filter can't read, so it stays unlisted (glibc doesn't use it).
    let exec_bits = |flags_arg: u8, mode_arg: u8| {
        let mut cases = Vec::new();
        for create in [O_CREAT, O_TMPFILE] {
            for bit in [0o100, 0o010, 0o001] {
                cases.push(case(
                    vec![
                        arg_masked(flags_arg, create, create),
                        arg_masked(mode_arg, bit, bit),
                    ],
                    EPERM,
                ));
            }
        }
        cases
    };
    by_args(
        &mut l,
        libc::SYS_openat,
        exec_bits(2, 3),
        FilterAnswer::Allow,
    );
    #[cfg(target_arch = "x86_64")]
    {
        by_args(&mut l, libc::SYS_open, exec_bits(1, 2), FilterAnswer::Allow);
        let creat = [0o100, 0o010, 0o001]
            .into_iter()
            .map(|bit| case(vec![arg_masked(1, bit, bit)], EPERM))
            .collect();
        by_args(&mut l, libc::SYS_creat, creat, FilterAnswer::Allow);
    }

    // Refused with EPERM, as before: no sockets but socketpair, no new
    // namespaces or mounts, no tracing, no io_uring, and none of the
    // metadata changes Landlock doesn't mediate (mode, owner, times,
    // extended attributes).
    always(
        &mut l,
        EPERM,
        &[
            libc::SYS_socket,
            libc::SYS_unshare,
            libc::SYS_setns,
            libc::SYS_mount,
            libc::SYS_ptrace,
            nr::IO_URING_SETUP,
            nr::IO_URING_ENTER,
            nr::IO_URING_REGISTER,
            libc::SYS_fchmod,
            libc::SYS_fchmodat,
            nr::FCHMODAT2,
            libc::SYS_fchown,
            libc::SYS_fchownat,
            libc::SYS_utimensat,
            libc::SYS_setxattr,
            libc::SYS_lsetxattr,
            libc::SYS_fsetxattr,
            nr::SETXATTRAT,
            libc::SYS_removexattr,
            libc::SYS_lremovexattr,
            libc::SYS_fremovexattr,
            nr::REMOVEXATTRAT,
            // Files are made with open; mknod's mode is a second way to
            // ask for execute bits (a regular file named like a database
            // companion), and pipes or devices are nothing a backend makes.
            libc::SYS_mknodat,
        ],
    );
    always(&mut l, EPERM, legacy_refused());

    // Reading and writing descriptors.
    always(
        &mut l,
        FilterAnswer::Allow,
        &[
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_pread64,
            libc::SYS_pwrite64,
            libc::SYS_readv,
            libc::SYS_writev,
            libc::SYS_preadv,
            libc::SYS_pwritev,
            libc::SYS_preadv2,
            libc::SYS_pwritev2,
            libc::SYS_lseek,
            libc::SYS_sendfile,
            libc::SYS_copy_file_range,
            libc::SYS_splice,
            libc::SYS_tee,
            libc::SYS_close,
            nr::CLOSE_RANGE,
            libc::SYS_dup,
            libc::SYS_dup3,
            libc::SYS_pipe2,
            libc::SYS_flock,
            libc::SYS_fsync,
            libc::SYS_fdatasync,
            libc::SYS_ftruncate,
            libc::SYS_fadvise64,
            libc::SYS_readahead,
        ],
    );

    // Paths: opening, looking, and changing the tree. What may be read or
    // created where is held by Landlock and the run's mounts; these calls
    // only name files.
    always(
        &mut l,
        FilterAnswer::Allow,
        &[
            libc::SYS_newfstatat,
            libc::SYS_fstat,
            libc::SYS_statx,
            libc::SYS_statfs,
            libc::SYS_fstatfs,
            libc::SYS_faccessat,
            nr::FACCESSAT2,
            libc::SYS_readlinkat,
            libc::SYS_getdents64,
            libc::SYS_getcwd,
            libc::SYS_chdir,
            libc::SYS_fchdir,
            libc::SYS_getxattr,
            libc::SYS_lgetxattr,
            libc::SYS_fgetxattr,
            libc::SYS_listxattr,
            libc::SYS_llistxattr,
            libc::SYS_flistxattr,
            libc::SYS_mkdirat,
            libc::SYS_unlinkat,
            libc::SYS_linkat,
            libc::SYS_symlinkat,
        ],
    );
    // Landlock judges `truncate(2)` by path only from ABI 3; below it a
    // read-only run could empty any file its user owns that it may name
    // (the mount layer's read-only binds answer EROFS first, where there
    // is one). Refused here then, with Landlock's own answer;
    // `ftruncate` needs a descriptor open for writing, which Landlock
    // judges on every ABI.
    always(
        &mut l,
        if beside.landlock_truncates {
            FilterAnswer::Allow
        } else {
            FilterAnswer::Errno(libc::EACCES)
        },
        &[libc::SYS_truncate],
    );

    // Memory. Mappings count against RLIMIT_AS.
    always(
        &mut l,
        FilterAnswer::Allow,
        &[
            libc::SYS_brk,
            libc::SYS_mmap,
            libc::SYS_munmap,
            libc::SYS_mremap,
            libc::SYS_mprotect,
            libc::SYS_madvise,
            libc::SYS_msync,
            libc::SYS_mincore,
            libc::SYS_membarrier,
            nr::MAP_SHADOW_STACK,
        ],
    );

    // Processes and threads: what glibc's start-up, pthreads, fork, exec,
    // posix_spawn and wait use. Signals reach only the run's own PID
    // namespace (and Landlock scopes them).
    always(
        &mut l,
        FilterAnswer::Allow,
        &[
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_exit,
            libc::SYS_exit_group,
            libc::SYS_wait4,
            libc::SYS_waitid,
            libc::SYS_set_tid_address,
            libc::SYS_set_robust_list,
            libc::SYS_rseq,
            libc::SYS_futex,
            nr::FUTEX_WAITV,
            libc::SYS_getpid,
            libc::SYS_umask,
            libc::SYS_getppid,
            libc::SYS_gettid,
            libc::SYS_getpgid,
            libc::SYS_setpgid,
            libc::SYS_getsid,
            libc::SYS_setsid,
            libc::SYS_kill,
            libc::SYS_tkill,
            libc::SYS_tgkill,
            nr::PIDFD_OPEN,
            nr::PIDFD_SEND_SIGNAL,
            libc::SYS_prctl,
            libc::SYS_prlimit64,
            libc::SYS_getrusage,
            libc::SYS_times,
            libc::SYS_sched_yield,
            libc::SYS_sched_getaffinity,
            libc::SYS_sched_setaffinity,
            libc::SYS_sched_getparam,
            libc::SYS_sched_getscheduler,
            libc::SYS_sched_get_priority_max,
            libc::SYS_sched_get_priority_min,
            libc::SYS_getpriority,
            libc::SYS_setpriority,
            libc::SYS_getcpu,
            libc::SYS_capget,
        ],
    );

    // Identity. The setters are the kernel's to refuse: the run holds no
    // capability, and uid 0 isn't mapped (setuid(0) fails with EINVAL).
    always(
        &mut l,
        FilterAnswer::Allow,
        &[
            libc::SYS_getuid,
            libc::SYS_geteuid,
            libc::SYS_getgid,
            libc::SYS_getegid,
            libc::SYS_getresuid,
            libc::SYS_getresgid,
            libc::SYS_getgroups,
            libc::SYS_setuid,
            libc::SYS_setgid,
            libc::SYS_setreuid,
            libc::SYS_setregid,
            libc::SYS_setresuid,
            libc::SYS_setresgid,
            libc::SYS_setgroups,
        ],
    );

    // Signals.
    always(
        &mut l,
        FilterAnswer::Allow,
        &[
            libc::SYS_rt_sigaction,
            libc::SYS_rt_sigprocmask,
            libc::SYS_rt_sigreturn,
            libc::SYS_rt_sigsuspend,
            libc::SYS_rt_sigpending,
            libc::SYS_rt_sigtimedwait,
            libc::SYS_rt_sigqueueinfo,
            libc::SYS_rt_tgsigqueueinfo,
            libc::SYS_sigaltstack,
            libc::SYS_signalfd4,
            libc::SYS_restart_syscall,
        ],
    );

    // Time, timers and waiting for descriptors.
    always(
        &mut l,
        FilterAnswer::Allow,
        &[
            libc::SYS_clock_gettime,
            libc::SYS_clock_getres,
            libc::SYS_clock_nanosleep,
            libc::SYS_nanosleep,
            libc::SYS_gettimeofday,
            libc::SYS_getitimer,
            libc::SYS_setitimer,
            libc::SYS_timer_create,
            libc::SYS_timer_settime,
            libc::SYS_timer_gettime,
            libc::SYS_timer_getoverrun,
            libc::SYS_timer_delete,
            libc::SYS_timerfd_create,
            libc::SYS_timerfd_settime,
            libc::SYS_timerfd_gettime,
            libc::SYS_ppoll,
            libc::SYS_pselect6,
            libc::SYS_epoll_create1,
            libc::SYS_epoll_ctl,
            libc::SYS_epoll_pwait,
            nr::EPOLL_PWAIT2,
            libc::SYS_eventfd2,
        ],
    );

    // The system as the run sees it, and randomness.
    always(
        &mut l,
        FilterAnswer::Allow,
        &[libc::SYS_uname, libc::SYS_sysinfo, libc::SYS_getrandom],
    );

    // Using the socketpairs above (no other socket can exist in the run).
    always(
        &mut l,
        FilterAnswer::Allow,
        &[
            libc::SYS_sendmsg,
            libc::SYS_recvmsg,
            libc::SYS_sendto,
            libc::SYS_recvfrom,
            libc::SYS_sendmmsg,
            libc::SYS_recvmmsg,
            libc::SYS_shutdown,
            libc::SYS_getsockname,
            libc::SYS_getpeername,
            libc::SYS_getsockopt,
            libc::SYS_setsockopt,
        ],
    );

    always(&mut l, FilterAnswer::Allow, legacy_allowed());
    l
}

/// The older spellings x86_64 keeps (newer architectures have only the
/// `*at` and `p*` forms above).
#[cfg(target_arch = "x86_64")]
fn legacy_allowed() -> &'static [i64] {
    &[
        libc::SYS_stat,
        libc::SYS_lstat,
        libc::SYS_access,
        libc::SYS_readlink,
        libc::SYS_getdents,
        libc::SYS_mkdir,
        libc::SYS_rmdir,
        libc::SYS_unlink,
        libc::SYS_rename,
        libc::SYS_renameat,
        libc::SYS_link,
        libc::SYS_symlink,
        libc::SYS_pipe,
        libc::SYS_dup2,
        libc::SYS_fork,
        libc::SYS_vfork,
        libc::SYS_getpgrp,
        libc::SYS_arch_prctl,
        libc::SYS_poll,
        libc::SYS_select,
        libc::SYS_epoll_create,
        libc::SYS_epoll_wait,
        libc::SYS_eventfd,
        libc::SYS_signalfd,
        libc::SYS_pause,
        libc::SYS_alarm,
        libc::SYS_time,
        libc::SYS_getrlimit,
        libc::SYS_setrlimit,
    ]
}

#[cfg(not(target_arch = "x86_64"))]
fn legacy_allowed() -> &'static [i64] {
    &[]
}

#[cfg(target_arch = "x86_64")]
fn legacy_refused() -> &'static [i64] {
    &[
        libc::SYS_mknod,
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_utime,
        libc::SYS_utimes,
        libc::SYS_futimesat,
    ]
}

#[cfg(not(target_arch = "x86_64"))]
fn legacy_refused() -> &'static [i64] {
    &[]
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_ALU_AND_K: u16 = 0x54;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_DATA_NR: u32 = 0;
const SECCOMP_DATA_ARCH: u32 = 4;
const SECCOMP_DATA_ARGS: u32 = 16;
/// The most instructions the kernel takes in one program.
const BPF_MAXINSNS: usize = 4096;

/// Where the low 32 bits of a 64-bit argument sit in `seccomp_data`.
fn arg_low_offset(arg: u8) -> u32 {
    let base = SECCOMP_DATA_ARGS + 8 * u32::from(arg);
    if cfg!(target_endian = "little") {
        base
    } else {
        base + 4
    }
}

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

fn ret(answer: FilterAnswer) -> sock_filter {
    stmt(
        BPF_RET_K,
        match answer {
            FilterAnswer::Allow => libc::SECCOMP_RET_ALLOW,
            FilterAnswer::Errno(e) => libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA),
            FilterAnswer::Notify => libc::SECCOMP_RET_USER_NOTIF,
        },
    )
}

fn short_jump(len: usize) -> Result<u8, SeccompBuildError> {
    u8::try_from(len).map_err(|_| SeccompBuildError(format!("a jump over {len} instructions")))
}

/// The instructions of one verdict. Every path ends in a return, so the
/// accumulator it clobbers is never read after it.
fn verdict_code(verdict: &Decision) -> Result<Vec<sock_filter>, SeccompBuildError> {
    let (cases, otherwise) = match verdict {
        Decision::Always(a) => return Ok(vec![ret(*a)]),
        Decision::Cases { cases, otherwise } => (cases, *otherwise),
    };
    let mut code = Vec::new();
    for c in cases {
        // Load, mask and compare per test; a failed test jumps past this
        // case's return to the next case.
        let per_test = |t: &Test| if t.mask == u32::MAX { 2 } else { 3 };
        let len: usize = c.tests.iter().map(per_test).sum::<usize>() + 1;
        let start = code.len();
        for t in &c.tests {
            code.push(stmt(BPF_LD_W_ABS, arg_low_offset(t.arg)));
            if t.mask != u32::MAX {
                code.push(stmt(BPF_ALU_AND_K, t.mask));
            }
            let rest = len - (code.len() - start) - 1;
            code.push(jump(BPF_JEQ_K, t.value & t.mask, 0, short_jump(rest)?));
        }
        code.push(ret(c.answer));
    }
    code.push(ret(otherwise));
    Ok(code)
}

/// The head of the program: a foreign architecture or an x32 number kills
/// the process.
pub fn build_prefix(arch: u32) -> Vec<sock_filter> {
    let kill = libc::SECCOMP_RET_KILL_PROCESS;
    vec![
        stmt(BPF_LD_W_ABS, SECCOMP_DATA_ARCH),
        jump(BPF_JEQ_K, arch, 1, 0),
        stmt(BPF_RET_K, kill),
        stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR),
        jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(BPF_RET_K, kill),
    ]
}

/// The program for a table: the prefix, one block per entry, `ENOSYS`.
pub fn assemble(arch: u32, table: &[Entry]) -> Result<BpfProgram, SeccompBuildError> {
    assemble_with(arch, table, FilterAnswer::Errno(libc::ENOSYS))
}

/// [`assemble`] with `unlisted` answering the calls the table doesn't list.
fn assemble_with(
    arch: u32,
    table: &[Entry],
    unlisted: FilterAnswer,
) -> Result<BpfProgram, SeccompBuildError> {
    let mut seen = std::collections::BTreeSet::new();
    let mut program = build_prefix(arch);
    for e in table {
        let nr = u32::try_from(e.nr)
            .ok()
            .filter(|&n| n < X32_SYSCALL_BIT)
            .ok_or_else(|| SeccompBuildError(format!("system call number {}", e.nr)))?;
        if !seen.insert(nr) {
            return Err(SeccompBuildError(format!(
                "system call {nr} is listed twice"
            )));
        }
        let body = verdict_code(&e.verdict)?;
        program.push(jump(BPF_JEQ_K, nr, 0, short_jump(body.len())?));
        program.extend(body);
    }
    program.push(ret(unlisted));
    if program.len() > BPF_MAXINSNS {
        return Err(SeccompBuildError(format!(
            "{} instructions, more than the kernel takes",
            program.len()
        )));
    }
    Ok(program)
}

/// What the filter must know of the layers applied beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Beside {
    /// Landlock judges `truncate(2)` by path (ABI 3 and later).
    pub landlock_truncates: bool,
}

impl Beside {
    pub fn of(layers: &crate::sandbox::policy::Layers) -> Beside {
        Beside {
            landlock_truncates: layers.landlock_truncates(),
        }
    }
}

/// The whole filter program for this architecture.
pub fn build_program(beside: Beside) -> Result<BpfProgram, SeccompBuildError> {
    assemble(audit_arch()?, &allow_list(beside))
}

/// The `sendmsg` flags only the run's init uses, once, to pass the
/// listener to the server: the one call of the network family the watched
/// filter lets through unseen. The seal closes it before the backend runs.
pub const HANDOVER_FLAGS: u32 =
    (libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | libc::MSG_EOR | libc::MSG_CONFIRM) as u32;

/// The network calls handed to the supervisor: each names a destination
/// (in memory the filter can't read) or sets up a socket to receive.
pub const WATCHED: [i64; 6] = [
    libc::SYS_connect,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_sendto,
    libc::SYS_sendmsg,
    libc::SYS_sendmmsg,
];

/// [`allow_list`] for a run with a supervisor: internet sockets may be
/// made (the run's network namespace is empty), and every call in
/// [`WATCHED`] goes to the supervisor, which refuses or, on a local socket,
/// lets it go on. Two holes for the run's init, closed by [`seal_list`]:
/// the listener's handover (`sendmsg` with [`HANDOVER_FLAGS`]) and
/// installing the seal itself (`seccomp` with no flags).
///
/// Every refusal with an errno goes to the supervisor too
/// ([`notify_refusals`]), which answers the errno [`build_program`] gives
/// for the same call and arguments and records the call by name.
pub fn watched_list(beside: Beside) -> Vec<Entry> {
    let mut l = watched_answers(beside);
    notify_refusals(&mut l);
    l
}

/// Each `Errno` verdict of `table` turned into `Notify`; allows stay.
pub fn notify_refusals(table: &mut [Entry]) {
    let notify = |a: &mut FilterAnswer| {
        if matches!(a, FilterAnswer::Errno(_)) {
            *a = FilterAnswer::Notify;
        }
    };
    for e in table {
        match &mut e.verdict {
            Decision::Always(a) => notify(a),
            Decision::Cases { cases, otherwise } => {
                cases.iter_mut().for_each(|c| notify(&mut c.answer));
                notify(otherwise);
            }
        }
    }
}

/// The watched table before its refusals are handed over: what a run
/// with a supervisor is answered, errnos included.
fn watched_answers(beside: Beside) -> Vec<Entry> {
    let mut l: Vec<Entry> = allow_list(beside)
        .into_iter()
        .filter(|e| e.nr != libc::SYS_socket && !WATCHED.contains(&e.nr))
        .collect();
    by_args(
        &mut l,
        libc::SYS_socket,
        vec![
            case(vec![arg_is(0, libc::AF_INET as u32)], FilterAnswer::Allow),
            case(vec![arg_is(0, libc::AF_INET6 as u32)], FilterAnswer::Allow),
        ],
        EPERM,
    );
    by_args(
        &mut l,
        libc::SYS_sendmsg,
        vec![case(vec![arg_is(2, HANDOVER_FLAGS)], FilterAnswer::Allow)],
        FilterAnswer::Notify,
    );
    for nr in WATCHED.into_iter().filter(|&nr| nr != libc::SYS_sendmsg) {
        l.push(Entry {
            nr,
            verdict: Decision::Always(FilterAnswer::Notify),
        });
    }
    by_args(
        &mut l,
        libc::SYS_seccomp,
        vec![case(
            vec![arg_is(0, libc::SECCOMP_SET_MODE_FILTER), arg_is(1, 0)],
            FilterAnswer::Allow,
        )],
        FilterAnswer::Errno(libc::ENOSYS),
    );
    l
}

/// The seal, installed by init over the watched filter once the listener
/// is handed over: the two holes answer as if they were never there. An
/// errno here outranks the first filter's allow.
pub fn seal_list() -> Vec<Entry> {
    let mut l = Vec::new();
    by_args(
        &mut l,
        libc::SYS_sendmsg,
        vec![case(vec![arg_is(2, HANDOVER_FLAGS)], EPERM)],
        FilterAnswer::Allow,
    );
    always(
        &mut l,
        FilterAnswer::Errno(libc::ENOSYS),
        &[libc::SYS_seccomp],
    );
    l
}

/// The seal's program: like [`assemble`], but what it doesn't list is
/// allowed (the first filter judges it).
pub fn build_seal() -> Result<BpfProgram, SeccompBuildError> {
    let mut program = assemble(audit_arch()?, &seal_list())?;
    if let Some(last) = program.last_mut() {
        *last = ret(FilterAnswer::Allow);
    }
    Ok(program)
}

/// The watched program and its seal, built once per zygote.
#[derive(Debug, Clone)]
pub struct Watched {
    pub filter: BpfProgram,
    pub seal: BpfProgram,
}

pub fn build_watched(beside: Beside) -> Result<Watched, SeccompBuildError> {
    Ok(Watched {
        filter: assemble_with(audit_arch()?, &watched_list(beside), FilterAnswer::Notify)?,
        seal: build_seal()?,
    })
}

fn install(program: &[sock_filter], flags: libc::c_ulong) -> std::io::Result<i64> {
    // seccompiler's `sock_filter` has the kernel's layout, as libc's does.
    let prog = libc::sock_fprog {
        len: u16::try_from(program.len())
            .map_err(|_| std::io::Error::from_raw_os_error(libc::E2BIG))?,
        filter: program.as_ptr().cast_mut().cast::<libc::sock_filter>(),
    };
    // SAFETY: `prog` points at `program`, which outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            std::ptr::addr_of!(prog),
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Install `program` asking for a listener; its descriptor.
pub fn apply_with_listener(program: &[sock_filter]) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let fd = install(program, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER)?;
    let fd = i32::try_from(fd).map_err(|_| std::io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just made this descriptor for us alone.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Install the seal (no flags: the watched filter's hole takes exactly this).
pub fn apply_seal(program: &[sock_filter]) -> std::io::Result<()> {
    install(program, 0).map(|_| ())
}

/// Install the filter on the calling thread (the helper is single-threaded,
/// and children inherit it). Requires no_new_privs, set by the caps layer.
pub fn apply(program: &BpfProgram) -> Result<(), super::step_error::StepError> {
    use super::step_error::{LayerStep, StepError};
    seccompiler::apply_filter(program)
        .map_err(|e| StepError::caused(LayerStep::SeccompLoad, format!("seccomp: {e}"), &e))
}

/// What `program` answers the call `data` describes, when that is an
/// errno: how the supervisor gives a refused call of a watched run exactly
/// the errno the plain filter would have. `None` for any other answer (or
/// a program the interpreter can't run).
pub fn errno_of(program: &[sock_filter], data: &[u8]) -> Option<i32> {
    let r = bpf_eval::eval(program, data)?;
    (r & libc::SECCOMP_RET_ACTION_FULL == libc::SECCOMP_RET_ERRNO)
        .then_some((r & libc::SECCOMP_RET_DATA) as i32)
}

pub mod bpf_eval {
    //! A classic-BPF interpreter for the instructions seccomp programs use:
    //! tests ask the real program what it decides, and the supervisor asks
    //! the plain program what a call handed to it would have been answered.
    //! Pure, and bounded: classic BPF only jumps forward.

    use seccompiler::sock_filter;

    /// Size of `struct seccomp_data`.
    pub const DATA_LEN: usize = 64;

    /// `struct seccomp_data`, laid out as the kernel hands it to the filter
    /// (native byte order): number, architecture, instruction pointer,
    /// arguments.
    pub fn seccomp_data(nr: i32, arch: u32, ip: u64, args: [u64; 6]) -> [u8; DATA_LEN] {
        let mut d = [0u8; DATA_LEN];
        d[0..4].copy_from_slice(&nr.to_ne_bytes());
        d[4..8].copy_from_slice(&arch.to_ne_bytes());
        d[8..16].copy_from_slice(&ip.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            d[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        d
    }

    /// [`seccomp_data`] for a test's call.
    #[cfg(test)]
    pub fn data(nr: i64, arch: u32, args: [u64; 6]) -> Vec<u8> {
        seccomp_data(nr as i32, arch, 0, args).to_vec()
    }

    /// The program's return value; `None` for an opcode seccomp programs
    /// here don't use, a load or jump out of bounds, or falling off the end.
    pub fn eval(program: &[sock_filter], data: &[u8]) -> Option<u32> {
        let mut a: u32 = 0;
        let mut pc = 0usize;
        loop {
            let ins = program.get(pc)?;
            pc += 1;
            match ins.code {
                0x20 => {
                    let off = usize::try_from(ins.k).ok()?;
                    let w = data.get(off..off.checked_add(4)?)?;
                    a = u32::from_ne_bytes([w[0], w[1], w[2], w[3]]);
                }
                0x54 => a &= ins.k,
                0x05 => pc = pc.checked_add(usize::try_from(ins.k).ok()?)?,
                0x15 | 0x25 | 0x35 | 0x45 => {
                    let taken = match ins.code {
                        0x15 => a == ins.k,
                        0x25 => a > ins.k,
                        0x35 => a >= ins.k,
                        _ => a & ins.k != 0,
                    };
                    pc += usize::from(if taken { ins.jt } else { ins.jf });
                }
                0x06 => return Some(ins.k),
                _ => return None,
            }
        }
    }

    /// [`eval`] for tests, where a program it can't run is a failure.
    #[cfg(test)]
    pub fn run(program: &[sock_filter], data: &[u8]) -> u32 {
        eval(program, data).expect("the interpreter ran the program")
    }
}

#[cfg(test)]
pub mod in_child {
    //! Runs one test of this binary again, alone in a process of its own:
    //! a seccomp filter or a Landlock ruleset can't be lifted once applied,
    //! so a test that applies one must not do it in the test runner.
    //!
    //! The test checks `arg()`: when it is set, it is the copy, confines
    //! itself and `report`s what it saw; otherwise it sets up, calls `run`
    //! and compares the reports with what it expects.

    use std::fmt::Display;
    use std::io;

    const VAR: &str = "REACHWEAVER_TEST_CHILD";

    /// How long a copy may take before it counts as hung.
    const HANG: std::time::Duration = std::time::Duration::from_secs(60);

    /// The argument `run` gave, in the copy; `None` in the test runner.
    pub fn arg() -> Option<String> {
        std::env::var(VAR).ok()
    }

    /// One observation of the copy. On stderr, which the test harness
    /// leaves alone (it writes its progress on stdout, on the same line).
    pub fn report(line: impl Display) {
        eprintln!("report: {line}");
    }

    /// An outcome as the reports spell it: `ok` or the errno's name.
    pub fn outcome<T>(r: io::Result<T>) -> String {
        match r {
            Ok(_) => "ok".into(),
            Err(e) => match e.raw_os_error() {
                Some(libc::EACCES) => "EACCES".into(),
                Some(libc::EPERM) => "EPERM".into(),
                Some(libc::ENOSYS) => "ENOSYS".into(),
                Some(libc::EINVAL) => "EINVAL".into(),
                Some(n) => format!("errno {n}"),
                None => e.to_string(),
            },
        }
    }

    /// A raw call's result (-1 and errno on failure) as an outcome.
    pub fn raw(rc: i64) -> String {
        outcome(if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc)
        })
    }

    /// Runs the test `function` of `module` (its `module_path!()`) alone in
    /// a copy of this binary with `arg`, and returns the copy's reports.
    /// The copy must pass and run exactly that one test.
    pub fn run(module: &str, function: &str, arg: &str) -> Vec<String> {
        let module = module.split_once("::").map_or(module, |(_, m)| m);
        let name = format!("{module}::{function}");
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([name.as_str(), "--exact", "--test-threads=1", "--nocapture"])
            .env(VAR, arg)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as libc::pid_t;
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(child.wait_with_output()));
        // A filter that refuses what the harness itself needs (a futex
        // wake, a thread's exit) leaves the copy waiting forever; it is
        // stopped, and the test fails, after far longer than a copy takes
        // (well under a second).
        let out = match finished.recv_timeout(HANG) {
            Ok(out) => out.unwrap(),
            Err(_) => {
                // SAFETY: the copy is not reaped until the thread above
                // waits on it, so the pid is still the copy's.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                let out = finished.recv().unwrap().unwrap();
                panic!(
                    "the copy did not finish in {HANG:?}: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stdout}{stderr}");
        assert!(
            stdout.contains(" 1 passed;"),
            "the copy ran no test: {stdout}{stderr}"
        );
        stderr
            .lines()
            .filter_map(|l| l.strip_prefix("report: "))
            .map(String::from)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::bpf_eval::{data, run};
    use super::*;

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;
    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    const ENOTTY: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOTTY as u32;

    /// A filter beside Landlock ABI 3 or later.
    const NEWEST: Beside = Beside {
        landlock_truncates: true,
    };

    fn decide(nr: i64, args: [u64; 6]) -> u32 {
        let program = build_program(NEWEST).unwrap();
        run(&program, &data(nr, audit_arch().unwrap(), args))
    }

    fn ioctl(request: u64) -> u32 {
        decide(libc::SYS_ioctl, [1, request, 0, 0, 0, 0])
    }

    #[test]
    fn the_program_fits_and_lists_each_call_once() {
        let program = build_program(NEWEST).unwrap();
        assert!(program.len() < 1024, "{} instructions", program.len());
        let table = allow_list(NEWEST);
        let mut twice = table.clone();
        twice.push(table[table.len() - 1].clone());
        assert!(assemble(AUDIT_ARCH_X86_64, &twice).is_err());
    }

    #[test]
    fn truncate_by_path_is_refused_only_where_landlock_cannot_judge_it() {
        let arch = audit_arch().unwrap();
        let path = [0x1000, 0, 0, 0, 0, 0];
        let eacces = libc::SECCOMP_RET_ERRNO | libc::EACCES as u32;
        // A watched run's refusal goes to its supervisor, which answers the
        // plain program's errno.
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        for (landlock_truncates, plain_answer, watched_answer) in
            [(true, ALLOW, ALLOW), (false, eacces, notify)]
        {
            let beside = Beside { landlock_truncates };
            let plain = build_program(beside).unwrap();
            let watched = build_watched(beside).unwrap().filter;
            for (program, truncate) in [(&plain, plain_answer), (&watched, watched_answer)] {
                let d = |nr| run(program, &data(nr, arch, path));
                assert_eq!(d(libc::SYS_truncate), truncate, "{beside:?}");
                // A descriptor open for writing is Landlock's to judge on
                // every ABI.
                assert_eq!(d(libc::SYS_ftruncate), ALLOW, "{beside:?}");
            }
        }
    }

    #[test]
    fn ordinary_calls_are_allowed() {
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_openat,
            libc::SYS_close,
            libc::SYS_mmap,
            libc::SYS_execve,
            libc::SYS_wait4,
            libc::SYS_getpid,
            libc::SYS_exit_group,
            libc::SYS_futex,
            libc::SYS_rseq,
            libc::SYS_set_robust_list,
            libc::SYS_prlimit64,
            libc::SYS_getrandom,
            libc::SYS_rt_sigaction,
            libc::SYS_newfstatat,
            libc::SYS_statx,
            libc::SYS_getdents64,
            libc::SYS_pipe2,
            libc::SYS_kill,
            libc::SYS_setuid,
            nr::CLOSE_RANGE,
            nr::FACCESSAT2,
        ] {
            assert_eq!(decide(nr, [0; 6]), ALLOW, "syscall {nr}");
        }
    }

    /// A read-only run's init is under this filter before its request
    /// comes: taking the request (the descriptors come with `recvmsg`),
    /// moving them into place, entering the run's cgroup, changing folder,
    /// forking and executing the backend, waiting, emptying its namespace
    /// and reporting all happen afterwards, so each of those calls, with
    /// the arguments the init gives, must pass.
    #[test]
    fn an_armed_inits_own_work_is_allowed() {
        let fork_flags =
            (libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD) as u64;
        let mut calls: Vec<(i64, [u64; 6])> = vec![
            (
                libc::SYS_recvmsg,
                [
                    3,
                    0,
                    (libc::MSG_CMSG_CLOEXEC | libc::MSG_WAITALL) as u64,
                    0,
                    0,
                    0,
                ],
            ),
            (libc::SYS_read, [3, 0, 4, 0, 0, 0]),
            (
                libc::SYS_fcntl,
                [3, libc::F_DUPFD_CLOEXEC as u64, 6, 0, 0, 0],
            ),
            (libc::SYS_fcntl, [3, libc::F_SETFD as u64, 1, 0, 0, 0]),
            (libc::SYS_dup3, [9, 0, 0, 0, 0, 0]),
            (nr::CLOSE_RANGE, [6, u32::MAX as u64, 0, 0, 0, 0]),
            (libc::SYS_close, [5, 0, 0, 0, 0, 0]),
            (libc::SYS_write, [5, 0, 1, 0, 0, 0]),
            (libc::SYS_chdir, [0; 6]),
            (libc::SYS_clone, [fork_flags, 0, 0, 0, 0, 0]),
            (libc::SYS_execve, [0; 6]),
            // `--pin`: the backend's descriptor looked at, then executed.
            (libc::SYS_pread64, [6, 0, 2, 0, 0, 0]),
            (libc::SYS_fcntl, [6, libc::F_SETFD as u64, 0, 0, 0, 0]),
            (
                libc::SYS_execveat,
                [6, 0, 0, 0, libc::AT_EMPTY_PATH as u64, 0],
            ),
            (libc::SYS_wait4, [u64::MAX, 0, 0, 0, 0, 0]),
            (libc::SYS_waitid, [0; 6]),
            (libc::SYS_kill, [u64::MAX, libc::SIGKILL as u64, 0, 0, 0, 0]),
            (libc::SYS_kill, [u64::MAX, 0, 0, 0, 0, 0]),
            (libc::SYS_rt_sigprocmask, [0; 6]),
            (
                libc::SYS_rt_sigaction,
                [libc::SIGPIPE as u64, 0, 0, 0, 0, 0],
            ),
            (libc::SYS_mmap, [0; 6]),
            (libc::SYS_munmap, [0; 6]),
            (libc::SYS_brk, [0; 6]),
            (libc::SYS_getpid, [0; 6]),
            (libc::SYS_exit_group, [0; 6]),
        ];
        #[cfg(target_arch = "x86_64")]
        calls.push((libc::SYS_dup2, [9, 0, 0, 0, 0, 0]));
        for (nr, args) in calls {
            assert_eq!(decide(nr, args), ALLOW, "syscall {nr} {args:?}");
        }
    }

    #[test]
    fn unlisted_and_future_calls_answer_enosys() {
        for nr in [
            469, // file_setattr
            468, // file_getattr
            457, // statmount
            458, // listmount
            470,
            1000,
            0x3fff_ffff,
            libc::SYS_memfd_create,
            libc::SYS_memfd_secret,
            libc::SYS_userfaultfd,
            libc::SYS_perf_event_open,
            libc::SYS_bpf,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_kexec_load,
            libc::SYS_kexec_file_load,
            libc::SYS_init_module,
            libc::SYS_finit_module,
            libc::SYS_delete_module,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_pidfd_getfd,
            libc::SYS_open_by_handle_at,
            libc::SYS_name_to_handle_at,
            libc::SYS_fanotify_init,
            libc::SYS_fanotify_mark,
            libc::SYS_inotify_init1,
            libc::SYS_inotify_add_watch,
            libc::SYS_inotify_rm_watch,
            libc::SYS_personality,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_move_mount,
            libc::SYS_open_tree,
            libc::SYS_fsopen,
            libc::SYS_fsconfig,
            libc::SYS_fsmount,
            libc::SYS_fspick,
            libc::SYS_mount_setattr,
            libc::SYS_shmget,
            libc::SYS_connect,
            libc::SYS_bind,
            libc::SYS_acct,
            libc::SYS_reboot,
            libc::SYS_swapon,
            libc::SYS_settimeofday,
            libc::SYS_chroot,
            libc::SYS_seccomp,
            libc::SYS_clone3,
        ] {
            assert_eq!(decide(nr, [0; 6]), ENOSYS, "syscall {nr}");
        }
        #[cfg(target_arch = "x86_64")]
        for nr in [libc::SYS_modify_ldt, libc::SYS_inotify_init] {
            assert_eq!(decide(nr, [0; 6]), ENOSYS, "syscall {nr}");
        }
    }

    #[test]
    fn wrong_architecture_kills() {
        let program = build_program(NEWEST).unwrap();
        let other = if audit_arch().unwrap() == AUDIT_ARCH_X86_64 {
            AUDIT_ARCH_AARCH64
        } else {
            AUDIT_ARCH_X86_64
        };
        assert_eq!(run(&program, &data(libc::SYS_read, other, [0; 6])), KILL);
        // i386 on an x86_64 kernel.
        assert_eq!(run(&program, &data(3, 3 | 0x4000_0000, [0; 6])), KILL);
    }

    #[test]
    fn x32_numbers_kill() {
        let x32_getpid = (X32_SYSCALL_BIT as i64) | 39;
        assert_eq!(decide(x32_getpid, [0; 6]), KILL);
        assert_eq!(
            decide((X32_SYSCALL_BIT as i64) | 41, [2, 1, 0, 0, 0, 0]),
            KILL
        );
        assert_eq!(decide(0x7fff_ffff, [0; 6]), KILL);
    }

    #[test]
    fn every_socket_family_is_refused() {
        for family in [
            libc::AF_UNIX,
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_NETLINK,
            libc::AF_PACKET,
            libc::AF_VSOCK,
        ] {
            for ty in [libc::SOCK_STREAM, libc::SOCK_DGRAM, libc::SOCK_RAW] {
                assert_eq!(
                    decide(libc::SYS_socket, [family as u64, ty as u64, 0, 0, 0, 0]),
                    EPERM
                );
            }
        }
    }

    #[test]
    fn socketpair_allows_only_unix_stream() {
        let unix = libc::AF_UNIX as u64;
        let stream = libc::SOCK_STREAM as u64;
        let flags = (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u64;
        assert_eq!(
            decide(libc::SYS_socketpair, [unix, stream, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(
            decide(libc::SYS_socketpair, [unix, stream | flags, 0, 0, 0, 0]),
            ALLOW
        );
        for ty in [
            libc::SOCK_DGRAM,
            libc::SOCK_SEQPACKET,
            libc::SOCK_RAW,
            libc::SOCK_RDM,
            0,
            6,
            10,
            15,
        ] {
            let ty = ty as u64;
            assert_eq!(
                decide(libc::SYS_socketpair, [unix, ty, 0, 0, 0, 0]),
                EPERM,
                "type {ty}"
            );
            assert_eq!(
                decide(libc::SYS_socketpair, [unix, ty | flags, 0, 0, 0, 0]),
                EPERM
            );
        }
        assert_eq!(
            decide(
                libc::SYS_socketpair,
                [libc::AF_INET as u64, stream, 0, 0, 0, 0]
            ),
            EPERM
        );
        // Only the low 32 bits of an int argument count, as for the kernel.
        assert_eq!(
            decide(
                libc::SYS_socketpair,
                [unix | 0xffff_ffff_0000_0000, stream, 0, 0, 0, 0]
            ),
            ALLOW
        );
    }

    #[test]
    fn clone_with_namespace_flags_is_refused() {
        let thread = (libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM
            | libc::CLONE_SETTLS
            | libc::CLONE_PARENT_SETTID
            | libc::CLONE_CHILD_CLEARTID) as u64;
        let vfork = (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as u64;
        let fork = (libc::CLONE_CHILD_CLEARTID | libc::CLONE_CHILD_SETTID | libc::SIGCHLD) as u64;
        for flags in [thread, vfork, fork, libc::SIGCHLD as u64] {
            assert_eq!(decide(libc::SYS_clone, [flags, 0, 0, 0, 0, 0]), ALLOW);
        }
        for flag in [
            libc::CLONE_NEWNS,
            libc::CLONE_NEWCGROUP,
            libc::CLONE_NEWUTS,
            libc::CLONE_NEWIPC,
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWPID,
            libc::CLONE_NEWNET,
        ] {
            let f = flag as u64 | libc::SIGCHLD as u64;
            assert_eq!(
                decide(libc::SYS_clone, [f, 0, 0, 0, 0, 0]),
                EPERM,
                "flag {flag:#x}"
            );
            assert_eq!(decide(libc::SYS_clone, [f | thread, 0, 0, 0, 0, 0]), EPERM);
        }
    }

    #[test]
    fn clone3_answers_enosys() {
        assert_eq!(decide(libc::SYS_clone3, [0; 6]), ENOSYS);
    }

    #[test]
    fn ioctl_allows_only_the_listed_requests() {
        for r in [
            request::TCGETS,
            request::TCGETS2,
            request::TIOCGWINSZ,
            request::TIOCGPGRP,
            request::TIOCGSID,
            request::FIONREAD,
            request::FIONBIO,
            request::FIOCLEX,
            request::FIONCLEX,
        ] {
            assert_eq!(ioctl(r.into()), ALLOW, "request {r:#x}");
        }
        // The kernel reads the request as 32 bits, and so does the filter.
        assert_eq!(ioctl(u64::from(request::TCGETS) | (1 << 40)), ALLOW);
        for r in [
            0x4008_6602u64, // FS_IOC_SETFLAGS
            0x4004_6602,    // FS_IOC32_SETFLAGS
            0x401c_5820,    // FS_IOC_FSSETXATTR
            0x4008_6604,    // EXT4_IOC_SETVERSION
            0x4004_9409,    // FICLONE
            u64::from(libc::TCSETS as u32),
            u64::from(libc::TIOCSCTTY as u32),
            0,
            u64::from(u32::MAX),
        ] {
            assert_eq!(ioctl(r), ENOTTY, "request {r:#x}");
        }
    }

    #[test]
    fn tiocsti_and_tioclinux_are_refused_with_eperm() {
        assert_eq!(ioctl(request::TIOCSTI.into()), EPERM);
        assert_eq!(ioctl(request::TIOCLINUX.into()), EPERM);
        assert_eq!(ioctl(u64::from(request::TIOCSTI) | (1 << 40)), EPERM);
    }

    #[test]
    fn fcntl_refuses_leases_and_notifications_only() {
        let fcntl = |cmd: u64| decide(libc::SYS_fcntl, [1, cmd, 0, 0, 0, 0]);
        assert_eq!(fcntl(F_SETLEASE.into()), EPERM);
        assert_eq!(fcntl(F_NOTIFY.into()), EPERM);
        assert_eq!(fcntl(u64::from(F_SETLEASE) | (1 << 32)), EPERM);
        for cmd in [
            libc::F_GETFL,
            libc::F_SETFL,
            libc::F_GETFD,
            libc::F_SETFD,
            libc::F_DUPFD,
            libc::F_DUPFD_CLOEXEC,
            libc::F_SETLK,
            libc::F_SETLKW,
            libc::F_GETLK,
            libc::F_OFD_SETLK,
            1025, // F_GETLEASE
        ] {
            assert_eq!(fcntl(cmd as u64), ALLOW, "command {cmd}");
        }
    }

    #[test]
    fn memfd_create_is_refused_whatever_the_flags() {
        for flags in [0u64, 1, 2, 4, 8, 0x10, 0xffff_ffff] {
            assert_eq!(
                decide(libc::SYS_memfd_create, [0, flags, 0, 0, 0, 0]),
                ENOSYS
            );
        }
    }

    #[test]
    fn files_are_never_created_executable() {
        let openat = |flags: u64, mode: u64| decide(libc::SYS_openat, [0, 0, flags, mode, 0, 0]);
        let creat = libc::O_CREAT as u64 | libc::O_WRONLY as u64;
        let tmpfile = libc::O_TMPFILE as u64 | libc::O_RDWR as u64;
        for mode in [0o644, 0o666, 0o600, 0o400, 0o7000 & 0o6000] {
            assert_eq!(openat(creat, mode), ALLOW, "mode {mode:o}");
            assert_eq!(openat(tmpfile, mode), ALLOW, "tmpfile mode {mode:o}");
        }
        for mode in [0o755, 0o700, 0o644 | 0o010, 0o001, 0o777] {
            assert_eq!(openat(creat, mode), EPERM, "mode {mode:o}");
            assert_eq!(openat(tmpfile, mode), EPERM, "tmpfile mode {mode:o}");
        }
        // Without O_CREAT the mode argument is garbage and means nothing.
        assert_eq!(openat(libc::O_RDONLY as u64, 0o777), ALLOW);
        assert_eq!(decide(libc::SYS_umask, [0, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(decide(nr::OPENAT2, [0; 6]), ENOSYS);
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(decide(libc::SYS_open, [0, creat, 0o755, 0, 0, 0]), EPERM);
            assert_eq!(decide(libc::SYS_open, [0, creat, 0o644, 0, 0, 0]), ALLOW);
            assert_eq!(decide(libc::SYS_creat, [0, 0o700, 0, 0, 0, 0]), EPERM);
            assert_eq!(decide(libc::SYS_creat, [0, 0o600, 0, 0, 0, 0]), ALLOW);
        }
    }

    #[test]
    fn mknod_is_refused_whatever_the_kind_and_mode() {
        let reg_exec = u64::from(libc::S_IFREG) | 0o755;
        let fifo = u64::from(libc::S_IFIFO) | 0o600;
        let reg = u64::from(libc::S_IFREG) | 0o600;
        for mode in [reg_exec, fifo, reg] {
            assert_eq!(
                decide(libc::SYS_mknodat, [0, 0, mode, 0, 0, 0]),
                EPERM,
                "{mode:o}"
            );
            #[cfg(target_arch = "x86_64")]
            assert_eq!(
                decide(libc::SYS_mknod, [0, mode, 0, 0, 0, 0]),
                EPERM,
                "{mode:o}"
            );
        }
    }

    #[test]
    fn fallocate_allows_only_mode_0() {
        const EOPNOTSUPP: u32 = libc::SECCOMP_RET_ERRNO | libc::EOPNOTSUPP as u32;
        let fallocate = |mode: u64| decide(libc::SYS_fallocate, [3, mode, 0, 100 << 30, 0, 0]);
        assert_eq!(fallocate(0), ALLOW);
        let keep = libc::FALLOC_FL_KEEP_SIZE as u64;
        let punch = libc::FALLOC_FL_PUNCH_HOLE as u64;
        for mode in [
            keep,
            punch | keep,
            punch,
            libc::FALLOC_FL_ZERO_RANGE as u64,
            libc::FALLOC_FL_ZERO_RANGE as u64 | keep,
            libc::FALLOC_FL_COLLAPSE_RANGE as u64,
            libc::FALLOC_FL_INSERT_RANGE as u64,
            libc::FALLOC_FL_UNSHARE_RANGE as u64,
            0x80, // FALLOC_FL_WRITE_ZEROES (Linux 6.17)
            0x8000_0000,
            u64::from(u32::MAX),
        ] {
            assert_eq!(fallocate(mode), EOPNOTSUPP, "mode {mode:#x}");
        }
        // The kernel reads the mode as an int, and so does the filter.
        assert_eq!(fallocate(1 << 32), ALLOW);
        assert_eq!(fallocate((1 << 32) | keep), EOPNOTSUPP);
    }

    #[test]
    fn renameat2_refuses_only_whiteouts() {
        let renameat2 = |flags: u64| decide(libc::SYS_renameat2, [3, 0, 3, 0, flags, 0]);
        let noreplace = u64::from(libc::RENAME_NOREPLACE);
        let exchange = u64::from(libc::RENAME_EXCHANGE);
        let whiteout = u64::from(libc::RENAME_WHITEOUT);
        for flags in [0, noreplace, exchange, 8, 1 << 32] {
            assert_eq!(renameat2(flags), ALLOW, "flags {flags:#x}");
        }
        for flags in [
            whiteout,
            whiteout | noreplace,
            whiteout | exchange,
            (1 << 32) | whiteout,
            u64::from(u32::MAX),
        ] {
            assert_eq!(renameat2(flags), EPERM, "flags {flags:#x}");
        }
        // The flagless spellings stay.
        #[cfg(target_arch = "x86_64")]
        for nr in [libc::SYS_rename, libc::SYS_renameat] {
            assert_eq!(decide(nr, [0; 6]), ALLOW, "syscall {nr}");
        }
    }

    #[test]
    fn the_refused_families_keep_eperm() {
        for nr in [
            libc::SYS_socket,
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
            libc::SYS_ptrace,
            libc::SYS_mount,
            libc::SYS_unshare,
            libc::SYS_setns,
            libc::SYS_fchmod,
            libc::SYS_fchmodat,
            nr::FCHMODAT2,
            libc::SYS_fchown,
            libc::SYS_fchownat,
            libc::SYS_utimensat,
            libc::SYS_setxattr,
            libc::SYS_lsetxattr,
            libc::SYS_fsetxattr,
            nr::SETXATTRAT,
            libc::SYS_removexattr,
            libc::SYS_lremovexattr,
            libc::SYS_fremovexattr,
            nr::REMOVEXATTRAT,
        ] {
            assert_eq!(decide(nr, [0; 6]), EPERM, "syscall {nr}");
        }
        for &nr in legacy_refused() {
            assert_eq!(decide(nr, [0; 6]), EPERM, "syscall {nr}");
        }
    }

    #[test]
    fn reading_metadata_and_extended_attributes_stays_allowed() {
        for nr in [
            libc::SYS_getxattr,
            libc::SYS_lgetxattr,
            libc::SYS_fgetxattr,
            libc::SYS_listxattr,
            libc::SYS_newfstatat,
            libc::SYS_statx,
        ] {
            assert_eq!(decide(nr, [0; 6]), ALLOW, "syscall {nr}");
        }
    }

    #[test]
    fn a_case_needs_every_test_to_hold() {
        // Two tests in one case, then a second case: each failed test must
        // land on the next case, not inside this one.
        let table = [Entry {
            nr: 7,
            verdict: Decision::Cases {
                cases: vec![
                    case(
                        vec![arg_is(0, 1), arg_masked(1, 0xf0, 0x20)],
                        FilterAnswer::Errno(11),
                    ),
                    case(vec![arg_is(2, 3)], FilterAnswer::Allow),
                ],
                otherwise: FilterAnswer::Errno(22),
            },
        }];
        let p = assemble(AUDIT_ARCH_X86_64, &table).unwrap();
        let d = |args: [u64; 6]| run(&p, &data(7, AUDIT_ARCH_X86_64, args));
        let err = |e: u32| libc::SECCOMP_RET_ERRNO | e;
        assert_eq!(d([1, 0x2f, 0, 0, 0, 0]), err(11));
        assert_eq!(d([1, 0x1f, 3, 0, 0, 0]), ALLOW);
        assert_eq!(d([2, 0x2f, 3, 0, 0, 0]), ALLOW);
        assert_eq!(d([2, 0x2f, 4, 0, 0, 0]), err(22));
        assert_eq!(d([1, 0x10, 0, 0, 0, 0]), err(22));
        assert_eq!(run(&p, &data(8, AUDIT_ARCH_X86_64, [0; 6])), ENOSYS);
    }

    #[test]
    fn the_watched_program_hands_the_network_calls_over_and_keeps_the_rest() {
        const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
        let w = build_watched(NEWEST).unwrap();
        let arch = audit_arch().unwrap();
        let d = |nr: i64, args: [u64; 6]| run(&w.filter, &data(nr, arch, args));
        for nr in [
            libc::SYS_connect,
            libc::SYS_bind,
            libc::SYS_listen,
            libc::SYS_sendto,
            libc::SYS_sendmmsg,
        ] {
            assert_eq!(d(nr, [3, 0, 0, 0, 0, 0]), NOTIFY, "syscall {nr}");
        }
        // Internet sockets may be made; every other family is refused (by
        // the supervisor, with the plain program's EPERM).
        for family in [libc::AF_INET, libc::AF_INET6] {
            assert_eq!(d(libc::SYS_socket, [family as u64, 1, 0, 0, 0, 0]), ALLOW);
        }
        for family in [
            libc::AF_UNIX,
            libc::AF_NETLINK,
            libc::AF_PACKET,
            libc::AF_INET + 1,
        ] {
            assert_eq!(d(libc::SYS_socket, [family as u64, 1, 0, 0, 0, 0]), NOTIFY);
            let plain = build_program(NEWEST).unwrap();
            let call = data(libc::SYS_socket, arch, [family as u64, 1, 0, 0, 0, 0]);
            assert_eq!(errno_of(&plain, &call), Some(libc::EPERM));
        }
        // sendmsg: only the handover's exact flags pass unseen.
        let h = u64::from(HANDOVER_FLAGS);
        assert_eq!(d(libc::SYS_sendmsg, [4, 0, h, 0, 0, 0]), ALLOW);
        for bit in 0..32 {
            let flags = h ^ (1 << bit);
            assert_eq!(
                d(libc::SYS_sendmsg, [4, 0, flags, 0, 0, 0]),
                NOTIFY,
                "{flags:#x}"
            );
        }
        assert_eq!(d(libc::SYS_sendmsg, [4, 0, 0, 0, 0, 0]), NOTIFY);
        // seccomp: a plain filter (the seal) only, never a listener of the run's own.
        let filter = u64::from(libc::SECCOMP_SET_MODE_FILTER);
        assert_eq!(d(libc::SYS_seccomp, [filter, 0, 0, 0, 0, 0]), ALLOW);
        let listener = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
        assert_eq!(d(libc::SYS_seccomp, [filter, listener, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(d(libc::SYS_seccomp, [0, 0, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(d(libc::SYS_seccomp, [filter + 1, 0, 0, 0, 0, 0]), NOTIFY);
        // Everything else: allowed where the plain program allows, handed
        // over where it refuses with an errno, killed where it kills.
        for nr in 0..500 {
            if WATCHED.contains(&nr) || [libc::SYS_socket, libc::SYS_seccomp].contains(&nr) {
                continue;
            }
            for args in [[0; 6], [1, 0x5401, 0o100, 0o755, 1, 0]] {
                let plain = decide(nr, args);
                let want = if plain & libc::SECCOMP_RET_ACTION_FULL == libc::SECCOMP_RET_ERRNO {
                    NOTIFY
                } else {
                    plain
                };
                assert_eq!(d(nr, args), want, "syscall {nr} {args:?}");
            }
        }
        // A foreign architecture and x32 numbers are still killed outright.
        let foreign = AUDIT_ARCH_AARCH64 ^ arch ^ AUDIT_ARCH_X86_64;
        assert_eq!(
            run(&w.filter, &data(libc::SYS_getpid, foreign, [0; 6])),
            KILL
        );
        assert_eq!(d(i64::from(X32_SYSCALL_BIT) + 39, [0; 6]), KILL);
    }

    /// What the supervisor answers a call handed over: the plain
    /// program's errno for the same number and arguments.
    fn errno(nr: i64, args: [u64; 6]) -> Option<i32> {
        let plain = build_program(NEWEST).unwrap();
        errno_of(&plain, &data(nr, audit_arch().unwrap(), args))
    }

    #[test]
    fn a_refused_calls_errno_is_the_plain_programs() {
        assert_eq!(errno(libc::SYS_ptrace, [0; 6]), Some(libc::EPERM));
        assert_eq!(errno(libc::SYS_mount, [0; 6]), Some(libc::EPERM));
        assert_eq!(
            errno(nr::IO_URING_SETUP, [8, 0, 0, 0, 0, 0]),
            Some(libc::EPERM)
        );
        assert_eq!(errno(libc::SYS_clone3, [0; 6]), Some(libc::ENOSYS));
        assert_eq!(errno(libc::SYS_memfd_create, [0; 6]), Some(libc::ENOSYS));
        // An ioctl request not listed, and the two listed refusals.
        let fs_ioc_getflags = 0x8008_6601;
        assert_eq!(
            errno(libc::SYS_ioctl, [3, fs_ioc_getflags, 0, 0, 0, 0]),
            Some(libc::ENOTTY)
        );
        let tiocsti = u64::from(request::TIOCSTI);
        assert_eq!(
            errno(libc::SYS_ioctl, [0, tiocsti, 0, 0, 0, 0]),
            Some(libc::EPERM)
        );
        // A fallocate mode other than 0; mode 0 is allowed, no errno.
        let keep_size = libc::FALLOC_FL_KEEP_SIZE as u64;
        assert_eq!(
            errno(libc::SYS_fallocate, [3, keep_size, 0, 4096, 0, 0]),
            Some(libc::EOPNOTSUPP)
        );
        assert_eq!(errno(libc::SYS_fallocate, [3, 0, 0, 4096, 0, 0]), None);
        assert_eq!(errno(libc::SYS_getpid, [0; 6]), None);
        // A killed call has no errno either.
        let x32 = i64::from(X32_SYSCALL_BIT) + 39;
        assert_eq!(errno(x32, [0; 6]), None);
    }

    fn answers(d: &Decision) -> Vec<FilterAnswer> {
        match d {
            Decision::Always(a) => vec![*a],
            Decision::Cases { cases, otherwise } => cases
                .iter()
                .map(|c| c.answer)
                .chain(std::iter::once(*otherwise))
                .collect(),
        }
    }

    #[test]
    fn every_errno_of_the_watched_answers_and_only_those_are_handed_over() {
        let before = watched_answers(NEWEST);
        let mut table = before.clone();
        notify_refusals(&mut table);
        let mut handed = 0;
        for (was, now) in before.iter().zip(&table) {
            assert_eq!(was.nr, now.nr);
            for (a, b) in answers(&was.verdict).into_iter().zip(answers(&now.verdict)) {
                let want = match a {
                    FilterAnswer::Errno(_) => FilterAnswer::Notify,
                    other => other,
                };
                assert_eq!(b, want, "syscall {}", was.nr);
                handed += usize::from(a != b);
            }
        }
        assert!(handed > 40, "{handed} verdicts handed over");
        // The plain table's allows are there too: socketpair, openat, ioctl.
        assert!(table.iter().any(|e| e.nr == libc::SYS_openat));
    }

    /// Between installing the watched filter and handing its listener over,
    /// nobody reads the listener: init must make no call that is handed
    /// over then, or it waits forever. Its calls on that path (the spare's
    /// announce, the draft run's handover: a send with the handover's
    /// flags, the listener's close, the seal, and the memory and process
    /// calls Rust makes around them) are allowed as they are.
    #[test]
    fn inits_calls_before_the_handover_are_never_handed_over() {
        let w = build_watched(NEWEST).unwrap();
        let arch = audit_arch().unwrap();
        let h = u64::from(HANDOVER_FLAGS);
        let filter = u64::from(libc::SECCOMP_SET_MODE_FILTER);
        for (nr, args) in [
            (libc::SYS_sendmsg, [4, 0, h, 0, 0, 0]),
            (libc::SYS_close, [5, 0, 0, 0, 0, 0]),
            (libc::SYS_seccomp, [filter, 0, 0x7fff_0000, 0, 0, 0]),
            (
                libc::SYS_recvmsg,
                [3, 0, libc::MSG_CMSG_CLOEXEC as u64, 0, 0, 0],
            ),
            (libc::SYS_write, [2, 0, 10, 0, 0, 0]),
            (libc::SYS_mmap, [0; 6]),
            (libc::SYS_munmap, [0; 6]),
            (libc::SYS_brk, [0; 6]),
            (libc::SYS_rt_sigprocmask, [0; 6]),
            (libc::SYS_getpid, [0; 6]),
            (libc::SYS_exit_group, [0; 6]),
        ] {
            assert_eq!(
                run(&w.filter, &data(nr, arch, args)),
                ALLOW,
                "syscall {nr} {args:?}"
            );
        }
    }

    #[test]
    fn the_seal_closes_exactly_the_two_holes() {
        let w = build_watched(NEWEST).unwrap();
        let arch = audit_arch().unwrap();
        let d = |nr: i64, args: [u64; 6]| run(&w.seal, &data(nr, arch, args));
        let h = u64::from(HANDOVER_FLAGS);
        assert_eq!(d(libc::SYS_sendmsg, [4, 0, h, 0, 0, 0]), EPERM);
        assert_eq!(d(libc::SYS_sendmsg, [4, 0, h ^ 1, 0, 0, 0]), ALLOW);
        assert_eq!(d(libc::SYS_seccomp, [1, 0, 0, 0, 0, 0]), ENOSYS);
        for nr in [
            libc::SYS_getpid,
            libc::SYS_connect,
            libc::SYS_sendto,
            libc::SYS_memfd_create,
        ] {
            assert_eq!(d(nr, [0; 6]), ALLOW, "syscall {nr}");
        }
        assert_eq!(
            run(
                &w.seal,
                &data(
                    libc::SYS_getpid,
                    AUDIT_ARCH_AARCH64 ^ arch ^ AUDIT_ARCH_X86_64,
                    [0; 6]
                )
            ),
            KILL
        );
    }

    #[test]
    fn the_filters_constants_are_the_kernels_values() {
        // AUDIT_ARCH_*: the ELF machine with the 64-bit and little-endian bits.
        assert_eq!(AUDIT_ARCH_X86_64, 0xC000_003E);
        assert_eq!(AUDIT_ARCH_AARCH64, 0xC000_00B7);
        let here = match std::env::consts::ARCH {
            "x86_64" => AUDIT_ARCH_X86_64,
            "aarch64" => AUDIT_ARCH_AARCH64,
            other => panic!("no filter for {other}"),
        };
        assert_eq!(audit_arch().unwrap(), here);
        // O_TMPFILE's own bit, without the O_DIRECTORY it includes.
        assert_eq!(O_TMPFILE, 0o20_000_000);
        assert_eq!(O_TMPFILE & libc::O_DIRECTORY as u32, 0);
        // Every namespace clone(2) and unshare(2) can make, and nothing else.
        assert_eq!(CLONE_NAMESPACE_FLAGS, 0x7E02_0000);
    }

    /// The older x86_64 spellings are answered like their newer forms:
    /// these by name, so an empty list would not pass unnoticed.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_legacy_x86_64_calls_are_answered_by_name() {
        for nr in [
            libc::SYS_stat,
            libc::SYS_open,
            libc::SYS_getdents,
            libc::SYS_fork,
            libc::SYS_pipe,
            libc::SYS_poll,
            libc::SYS_getrlimit,
            libc::SYS_setrlimit,
        ] {
            assert_eq!(decide(nr, [0; 6]), ALLOW, "syscall {nr}");
        }
        for nr in [
            libc::SYS_mknod,
            libc::SYS_chmod,
            libc::SYS_chown,
            libc::SYS_utimes,
        ] {
            assert_eq!(decide(nr, [0; 6]), EPERM, "syscall {nr}");
        }
    }

    #[test]
    fn a_build_error_shows_its_reason() {
        let e = SeccompBuildError("a jump over 300 instructions".into());
        assert_eq!(e.to_string(), "a jump over 300 instructions");
    }

    #[test]
    fn assemble_takes_numbers_below_the_x32_bit_and_programs_up_to_the_kernels_limit() {
        let arch = audit_arch().unwrap();
        let allow = |nrs: std::ops::Range<i64>| -> Vec<Entry> {
            nrs.map(|nr| Entry {
                nr,
                verdict: Decision::Always(FilterAnswer::Allow),
            })
            .collect()
        };
        let top = i64::from(X32_SYSCALL_BIT);
        assert!(assemble(arch, &allow(top - 1..top)).is_ok());
        let e = assemble(arch, &allow(top..top + 1)).unwrap_err();
        assert_eq!(e.to_string(), format!("system call number {top}"));
        assert!(assemble(arch, &allow(-1..0)).is_err());
        // The prefix, two instructions per entry, and the final ENOSYS.
        let room = (BPF_MAXINSNS - build_prefix(arch).len() - 1) / 2;
        let fits = assemble(arch, &allow(0..room as i64)).unwrap();
        assert!(fits.len() <= BPF_MAXINSNS && fits.len() + 2 > BPF_MAXINSNS);
        let e = assemble(arch, &allow(0..room as i64 + 1)).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("instructions, more than the kernel takes"),
            "{e}"
        );
    }

    /// A table whose program is exactly the kernel's limit long: entries
    /// that always allow (two instructions each) around one `getppid`
    /// entry of five (its number, one test, the case's return and the
    /// default), as many as make up `BPF_MAXINSNS` after the prefix and the
    /// final return. `getppid` with a first argument of 1 is refused.
    fn table_of_the_kernels_limit(arch: u32) -> Vec<Entry> {
        let rest = BPF_MAXINSNS - build_prefix(arch).len() - 1;
        // The one odd entry makes up an odd remainder; an even one takes a
        // second, so the count works whatever the prefix's length.
        let odd = if rest % 2 == 1 { 1 } else { 2 };
        let mut table: Vec<Entry> = (0..)
            .filter(|&nr| nr != libc::SYS_getppid && nr != libc::SYS_getsid)
            .take((rest - 5 * odd) / 2)
            .map(|nr| Entry {
                nr,
                verdict: Decision::Always(FilterAnswer::Allow),
            })
            .collect();
        for nr in [libc::SYS_getppid, libc::SYS_getsid].into_iter().take(odd) {
            by_args(
                &mut table,
                nr,
                vec![case(vec![arg_is(0, 1)], FilterAnswer::Errno(libc::EPERM))],
                FilterAnswer::Allow,
            );
        }
        table
    }

    #[test]
    fn a_program_of_exactly_the_kernels_limit_is_assembled_and_one_more_is_not() {
        let arch = audit_arch().unwrap();
        let mut table = table_of_the_kernels_limit(arch);
        let program = assemble(arch, &table).unwrap();
        assert_eq!(program.len(), BPF_MAXINSNS);
        table.push(Entry {
            nr: 5000,
            verdict: Decision::Always(FilterAnswer::Allow),
        });
        let e = assemble(arch, &table).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{} instructions, more than the kernel takes",
                BPF_MAXINSNS + 2
            )
        );
    }

    fn shown(r: Result<(), crate::sandbox::linux::step_error::StepError>) -> String {
        r.err().map_or_else(|| "ok".into(), String::from)
    }

    /// What the filtered test below checks: a call of each kind the
    /// table answers, made for real. `dir` is a folder to create files in.
    fn calls_report(dir: &std::path::Path) {
        use super::in_child::{raw, report};
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: getpid and getppid take no pointer.
        report(format!("getpid {}", raw(unsafe { libc::getpid() }.into())));
        // SAFETY: socket takes no pointer; a descriptor it opens is closed.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        report(format!("socket inet {}", raw(fd.into())));
        let mut pair = [-1; 2];
        // SAFETY: `pair` has room for the two descriptors.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            )
        };
        report(format!("socketpair unix stream {}", raw(rc.into())));
        // SAFETY: a valid C string; a descriptor it opens is closed.
        let memfd =
            unsafe { libc::syscall(libc::SYS_memfd_create, c"probe".as_ptr(), libc::MFD_CLOEXEC) };
        report(format!("memfd_create {}", raw(memfd)));
        let mut opened = vec![fd, pair[0], pair[1], memfd as i32];
        for (name, mode) in [("data", 0o644), ("program", 0o755)] {
            let mut path = dir.join(name).as_os_str().as_bytes().to_vec();
            path.push(0);
            // SAFETY: a NUL-terminated path.
            let f = unsafe {
                libc::open(
                    path.as_ptr().cast(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    mode as libc::c_uint,
                )
            };
            report(format!("create {mode:o} {}", raw(f.into())));
            opened.push(f);
        }
        for fd in opened.into_iter().filter(|&fd| fd >= 0) {
            // SAFETY: closing descriptors this function opened.
            unsafe { libc::close(fd) };
        }
    }

    #[test]
    fn apply_makes_the_kernel_answer_as_the_table_says() {
        if let Some(arg) = super::in_child::arg() {
            let (mode, dir) = arg.split_once(' ').unwrap();
            if mode == "filter" {
                let program = build_program(NEWEST).unwrap();
                super::in_child::report(format!("apply {}", shown(apply(&program))));
            }
            calls_report(std::path::Path::new(dir));
            return;
        }
        let name = "apply_makes_the_kernel_answer_as_the_table_says";
        // The same calls without the filter all succeed, so each refusal
        // below is the filter's.
        let dir = tempfile::tempdir().unwrap();
        let control = super::in_child::run(
            module_path!(),
            name,
            &format!("control {}", dir.path().display()),
        );
        assert_eq!(
            control,
            [
                "getpid ok",
                "socket inet ok",
                "socketpair unix stream ok",
                "memfd_create ok",
                "create 644 ok",
                "create 755 ok",
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        let filtered = super::in_child::run(
            module_path!(),
            name,
            &format!("filter {}", dir.path().display()),
        );
        assert_eq!(
            filtered,
            [
                "apply ok",
                "getpid ok",
                "socket inet EPERM",
                "socketpair unix stream ok",
                "memfd_create ENOSYS",
                "create 644 ok",
                "create 755 EPERM",
            ]
        );
        assert!(dir.path().join("data").exists());
        assert!(!dir.path().join("program").exists());
    }

    /// `BPF_MAXINSNS` is the kernel's: it loads a program of exactly that
    /// many instructions, and refuses one more.
    #[test]
    fn the_kernel_loads_a_program_of_exactly_the_limit() {
        if super::in_child::arg().is_some() {
            use super::in_child::{raw, report};
            let arch = audit_arch().unwrap();
            let fits = assemble(arch, &table_of_the_kernels_limit(arch)).unwrap();
            let mut over = fits.clone();
            over.insert(0, stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR));
            let refused = apply(&over).unwrap_err();
            report(format!(
                "{} instructions refused: {}",
                over.len(),
                refused.detail.contains("os error 22")
            ));
            report(format!(
                "{} instructions {}",
                fits.len(),
                shown(apply(&fits))
            ));
            // The argument is ignored by the kernel and read by the filter.
            report(format!(
                "getppid(1) {}",
                // SAFETY: getppid takes no pointer; the filter reads the argument.
                raw(unsafe { libc::syscall(libc::SYS_getppid, 1) })
            ));
            report(format!(
                "getppid(0) {}",
                // SAFETY: getppid takes no pointer.
                raw(unsafe { libc::syscall(libc::SYS_getppid, 0) })
            ));
            return;
        }
        let reports = super::in_child::run(
            module_path!(),
            "the_kernel_loads_a_program_of_exactly_the_limit",
            "limit",
        );
        assert_eq!(
            reports,
            [
                "4097 instructions refused: true",
                "4096 instructions ok",
                "getppid(1) EPERM",
                "getppid(0) ok",
            ]
        );
    }
}

//! The seccomp layer: a deny list over the system calls that reach kernel
//! surface a read-only backend never needs (sockets, io_uring, tracing, key
//! rings, BPF, mounts, namespaces, modules, terminal injection, and the
//! metadata changes Landlock does not mediate).
//!
//! It is a deny list with a default of "allow" on purpose: an allow list
//! would have to track every system call of every interpreter and libc the
//! owner's backend may use, and would break them in ways nobody can debug
//! from a tool result. The file and network promises are held by other
//! layers as well; this one narrows the kernel attack surface and gives
//! every blocked call a plain `EPERM`.
//!
//! [`build_program`] is pure and unit-tested by running the BPF program on
//! crafted `seccomp_data`; [`apply`] only installs it.

use std::collections::BTreeMap;

use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};

/// Numbers of system calls newer than the `libc` crate's tables on some
/// architectures. Calls added since Linux 5.1 share one number everywhere.
mod nr {
    pub const FCHMODAT2: i64 = 452;
    pub const SETXATTRAT: i64 = 463;
    pub const REMOVEXATTRAT: i64 = 466;
}

/// Ioctl request numbers as the filter compares them (the `libc` type of
/// these constants differs between C libraries, hence the casts).
#[allow(clippy::unnecessary_cast)]
mod request {
    pub const TIOCSTI: u64 = libc::TIOCSTI as u64;
    pub const TIOCLINUX: u64 = libc::TIOCLINUX as u64;
    #[cfg(test)]
    pub const TCGETS: u64 = libc::TCGETS as u64;
    #[cfg(test)]
    pub const FIONREAD: u64 = libc::FIONREAD as u64;
}

const CLONE_NAMESPACE_FLAGS: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u64;

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

fn cond(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, SeccompBuildError> {
    SeccompCondition::new(arg, len, op, value).map_err(|e| SeccompBuildError(e.to_string()))
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, SeccompBuildError> {
    SeccompRule::new(conds).map_err(|e| SeccompBuildError(e.to_string()))
}

/// System calls refused whatever their arguments.
fn unconditional() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_socket,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fsconfig,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
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
        libc::SYS_open_by_handle_at,
    ];
    v.extend(legacy_unconditional());
    v
}

/// The path-based spellings that only older architectures still have.
#[cfg(target_arch = "x86_64")]
fn legacy_unconditional() -> Vec<i64> {
    vec![
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_utime,
        libc::SYS_utimes,
        libc::SYS_futimesat,
    ]
}

#[cfg(not(target_arch = "x86_64"))]
fn legacy_unconditional() -> Vec<i64> {
    Vec::new()
}

/// The seccompiler rule table: syscall number to the argument patterns that
/// are refused (an empty list refuses every call).
pub fn build_rules() -> Result<BTreeMap<i64, Vec<SeccompRule>>, SeccompBuildError> {
    use SeccompCmpArgLen::Dword;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for n in unconditional() {
        rules.insert(n, Vec::new());
    }

    // socketpair: only AF_UNIX + SOCK_STREAM (with CLOEXEC/NONBLOCK) stays,
    // which asyncio and subprocess plumbing use. The socket type is the low
    // four bits; any other bit pattern there is another type.
    let ty = |mask: u64, value: u64| cond(1, Dword, SeccompCmpOp::MaskedEq(mask), value);
    rules.insert(
        libc::SYS_socketpair,
        vec![
            rule(vec![cond(
                0,
                Dword,
                SeccompCmpOp::Ne,
                libc::AF_UNIX as u64,
            )?])?,
            rule(vec![ty(0xf, 0)?])?,
            rule(vec![ty(0x2, 0x2)?])?,
            rule(vec![ty(0x4, 0x4)?])?,
            rule(vec![ty(0x8, 0x8)?])?,
        ],
    );

    // clone: plain fork and threads stay; any namespace flag is refused.
    // clone3 passes its flags in memory the filter cannot read, so it is
    // refused with ENOSYS in the prefix, which makes libc fall back to clone.
    let mut clone_rules = Vec::new();
    for bit in 0..64 {
        let flag = 1u64 << bit;
        if CLONE_NAMESPACE_FLAGS & flag != 0 {
            clone_rules.push(rule(vec![cond(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )?])?);
        }
    }
    rules.insert(libc::SYS_clone, clone_rules);

    // Terminal input injection and the Linux console ioctl.
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, Dword, SeccompCmpOp::Eq, request::TIOCSTI)?])?,
            rule(vec![cond(1, Dword, SeccompCmpOp::Eq, request::TIOCLINUX)?])?,
        ],
    );
    Ok(rules)
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_DATA_NR: u32 = 0;
const SECCOMP_DATA_ARCH: u32 = 4;

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

/// The hand-written head of the program: wrong architecture and x32
/// numbers kill the process (seccompiler's table would let an unknown
/// number through to "allow"), and clone3 answers ENOSYS.
pub fn build_prefix(arch: u32) -> Vec<sock_filter> {
    let kill = libc::SECCOMP_RET_KILL_PROCESS;
    vec![
        stmt(BPF_LD_W_ABS, SECCOMP_DATA_ARCH),
        jump(BPF_JEQ_K, arch, 1, 0),
        stmt(BPF_RET_K, kill),
        stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR),
        jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(BPF_RET_K, kill),
        jump(BPF_JEQ_K, libc::SYS_clone3 as u32, 0, 1),
        stmt(BPF_RET_K, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
    ]
}

/// The whole filter program for this architecture.
pub fn build_program() -> Result<BpfProgram, SeccompBuildError> {
    let arch = audit_arch()?;
    let target = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| SeccompBuildError(e.to_string()))?;
    let filter = SeccompFilter::new(
        build_rules()?,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        target,
    )
    .map_err(|e| SeccompBuildError(e.to_string()))?;
    let body: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| SeccompBuildError(e.to_string()))?;
    let mut program = build_prefix(arch);
    program.extend(body);
    Ok(program)
}

/// Install the filter on the calling thread (the helper is single-threaded,
/// and children inherit it). Requires no_new_privs, set by the caps layer.
pub fn apply(program: &BpfProgram) -> Result<(), String> {
    seccompiler::apply_filter(program).map_err(|e| format!("seccomp: {e}"))
}

#[cfg(test)]
pub mod bpf_eval {
    //! A classic-BPF interpreter for the instructions seccomp programs use,
    //! so tests can ask the real program what it decides.

    use seccompiler::sock_filter;

    /// `struct seccomp_data`, laid out as the kernel hands it to the filter
    /// (little-endian 64-bit arguments).
    pub fn data(nr: i64, arch: u32, args: [u64; 6]) -> Vec<u8> {
        let mut d = Vec::with_capacity(64);
        d.extend_from_slice(&(nr as i32).to_le_bytes());
        d.extend_from_slice(&arch.to_le_bytes());
        d.extend_from_slice(&0u64.to_le_bytes());
        for a in args {
            d.extend_from_slice(&a.to_le_bytes());
        }
        d
    }

    pub fn run(program: &[sock_filter], data: &[u8]) -> u32 {
        let mut a: u32 = 0;
        let mut pc = 0usize;
        loop {
            let ins = &program[pc];
            pc += 1;
            match ins.code {
                0x20 => {
                    let off = ins.k as usize;
                    a = u32::from_le_bytes(data[off..off + 4].try_into().unwrap());
                }
                0x54 => a &= ins.k,
                0x05 => pc += ins.k as usize,
                0x15 | 0x25 | 0x35 | 0x45 => {
                    let taken = match ins.code {
                        0x15 => a == ins.k,
                        0x25 => a > ins.k,
                        0x35 => a >= ins.k,
                        _ => a & ins.k != 0,
                    };
                    pc += if taken { ins.jt } else { ins.jf } as usize;
                }
                0x06 => return ins.k,
                other => panic!("unexpected BPF opcode {other:#x} at {}", pc - 1),
            }
        }
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

    fn decide(nr: i64, args: [u64; 6]) -> u32 {
        let program = build_program().unwrap();
        run(&program, &data(nr, audit_arch().unwrap(), args))
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
        ] {
            assert_eq!(decide(nr, [0; 6]), ALLOW, "syscall {nr}");
        }
    }

    #[test]
    fn wrong_architecture_kills() {
        let program = build_program().unwrap();
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
        // Only the low 32 bits of an int argument count.
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
        assert_eq!(decide(libc::SYS_clone, [thread, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(
            decide(libc::SYS_clone, [libc::SIGCHLD as u64, 0, 0, 0, 0, 0]),
            ALLOW
        );
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
        }
    }

    #[test]
    fn clone3_answers_enosys() {
        assert_eq!(decide(libc::SYS_clone3, [0; 6]), ENOSYS);
    }

    #[test]
    fn tiocsti_and_tioclinux_are_refused_other_ioctls_pass() {
        assert_eq!(
            decide(libc::SYS_ioctl, [0, request::TIOCSTI, 0, 0, 0, 0]),
            EPERM
        );
        assert_eq!(
            decide(libc::SYS_ioctl, [0, request::TIOCLINUX, 0, 0, 0, 0]),
            EPERM
        );
        // The kernel reads the request as 32 bits: high garbage doesn't hide it.
        assert_eq!(
            decide(
                libc::SYS_ioctl,
                [0, request::TIOCSTI | (1 << 40), 0, 0, 0, 0]
            ),
            EPERM
        );
        assert_eq!(
            decide(libc::SYS_ioctl, [0, request::TCGETS, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(
            decide(libc::SYS_ioctl, [0, request::FIONREAD, 0, 0, 0, 0]),
            ALLOW
        );
    }

    #[test]
    fn the_listed_kernel_surfaces_are_refused() {
        for nr in [
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_bpf,
            libc::SYS_perf_event_open,
            libc::SYS_userfaultfd,
            libc::SYS_mount,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_move_mount,
            libc::SYS_open_tree,
            libc::SYS_fsopen,
            libc::SYS_fsmount,
            libc::SYS_fsconfig,
            libc::SYS_fspick,
            libc::SYS_mount_setattr,
            libc::SYS_unshare,
            libc::SYS_setns,
            libc::SYS_kexec_load,
            libc::SYS_kexec_file_load,
            libc::SYS_init_module,
            libc::SYS_finit_module,
            libc::SYS_delete_module,
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
        for nr in legacy_unconditional() {
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
}

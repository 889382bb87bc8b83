//! Server → zygote → spare (or server → re-executed helper): one run's
//! policy, encoded once by the server, and on the zygote's stream socket a
//! length, those bytes, and the run's [`RunFds`] with the length. The bytes
//! encoded are the bytes sent and the bytes the run's attestation hashes.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use serde::Deserialize;

use super::status::{Failure, RunStep};
use super::{RunFds, MAX_REQUEST, PASSED};
use crate::sandbox::policy::Policy;
use crate::sandbox::{RunKind, SandboxError};

/// A policy or configuration the server could not encode: the run (or
/// the zygote) is not started.
#[derive(Debug)]
pub(crate) struct EncodeError {
    what: &'static str,
    error: serde_json::Error,
}

impl From<EncodeError> for SandboxError {
    fn from(e: EncodeError) -> SandboxError {
        SandboxError::LayerFailed(format!("{}: {}", e.what, e.error))
    }
}

pub(super) fn to_json<T: serde::Serialize>(
    what: &'static str,
    value: &T,
) -> Result<Vec<u8>, EncodeError> {
    serde_json::to_vec(value).map_err(|error| EncodeError { what, error })
}

/// One run's policy as it travels: made once per run, sent as is, and
/// hashed as is for the run's attestation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EncodedPolicy(Vec<u8>);

impl EncodedPolicy {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The same bytes as the re-executed helper's environment variable.
    pub(crate) fn to_env(&self) -> std::ffi::OsString {
        use std::os::unix::ffi::OsStringExt;
        std::ffi::OsString::from_vec(self.0.clone())
    }
}

pub(crate) fn encode_policy(policy: &Policy) -> Result<EncodedPolicy, EncodeError> {
    to_json("policy", policy).map(EncodedPolicy)
}

/// The policy a helper or init received.
pub(crate) fn decode_policy(bytes: &[u8]) -> Result<Policy, Failure> {
    serde_json::from_slice(bytes)
        .map_err(|e| Failure::layer(RunStep::Request, format!("policy: {e}")))
}

/// One request as received; `fds` is `None` unless it brought exactly
/// one descriptor per field, or one more: then that last one is `exe`.
pub(crate) struct Request {
    pub(crate) policy: Vec<u8>,
    pub(crate) fds: Option<RunFds<OwnedFd>>,
    /// The backend's file, opened and hashed by the server (`--pin`): the
    /// run executes it instead of the policy's path.
    pub(crate) exe: Option<OwnedFd>,
}

/// The descriptors of a request, split into the run's and the backend's.
fn split(mut fds: Vec<OwnedFd>) -> (Option<RunFds<OwnedFd>>, Option<OwnedFd>) {
    let exe = if fds.len() == PASSED + 1 {
        fds.pop()
    } else {
        None
    };
    (RunFds::from_vec(fds), exe)
}

/// The one field of a request the zygote reads: which kind of spare serves it.
#[derive(Deserialize)]
struct RequestKind {
    kind: RunKind,
}

impl Request {
    /// Which kind of run the policy asks for.
    pub(crate) fn kind(&self) -> Result<RunKind, String> {
        serde_json::from_slice::<RequestKind>(&self.policy)
            .map(|k| k.kind)
            .map_err(|e| format!("policy: {e}"))
    }
}

/// Read one request. `None` at end of file or on anything malformed.
pub(crate) fn read(fd: RawFd) -> Option<Request> {
    let mut len = [0u8; 4];
    let mut cmsg = nix::cmsg_space!([RawFd; PASSED + 1]);
    let (n, fds) = loop {
        let mut iov = [IoSliceMut::new(&mut len)];
        match recvmsg::<()>(
            fd,
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_WAITALL,
        ) {
            Ok(msg) => {
                let mut fds: Vec<OwnedFd> = Vec::new();
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::ScmRights(list) = c {
                            // SAFETY: the kernel just gave us these descriptors.
                            fds.extend(
                                list.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }),
                            );
                        }
                    }
                }
                break (msg.bytes, fds);
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
        }
    };
    if n != len.len() {
        return None;
    }
    let size = u32::from_le_bytes(len) as usize;
    if size > MAX_REQUEST {
        return None;
    }
    let mut body = vec![0u8; size];
    let mut got = 0;
    while got < size {
        // SAFETY: reading into a buffer we own.
        let r = unsafe { libc::read(fd, body[got..].as_mut_ptr().cast(), size - got) };
        if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if r <= 0 {
            return None;
        }
        got += r as usize;
    }
    let (fds, exe) = split(fds);
    Some(Request {
        policy: body,
        fds,
        exe,
    })
}

/// Send a request (length, policy, descriptors, and the backend's
/// descriptor last when the run is to execute it).
pub(crate) fn send(
    fd: &OwnedFd,
    policy: &[u8],
    fds: &RunFds<RawFd>,
    exe: Option<RawFd>,
) -> std::io::Result<()> {
    let mut list = fds.into_array().to_vec();
    list.extend(exe);
    let fds = list;
    let len = (policy.len() as u32).to_le_bytes();
    let iov = [IoSlice::new(&len), IoSlice::new(policy)];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    let mut sent = loop {
        match sendmsg::<()>(fd.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None) {
            Ok(n) => break n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    // A stream socket may take a long message in parts; the descriptors
    // went with the first one.
    let total = len.len() + policy.len();
    while sent < total {
        let rest = if sent < len.len() {
            &len[sent..]
        } else {
            &policy[sent - len.len()..]
        };
        // SAFETY: sending from a buffer we own.
        let n = unsafe {
            libc::send(
                fd.as_raw_fd(),
                rest.as_ptr().cast(),
                rest.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        sent += n as usize;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};

    fn stream_pair() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
        socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap()
    }

    #[test]
    fn a_request_round_trips_with_its_descriptors_and_kind() {
        let (a, b) = stream_pair();
        let f = std::fs::File::open("/dev/null").unwrap();
        let fds = RunFds::from_array([f.as_raw_fd(); PASSED]);
        send(&a, br#"{"kind":"Draft"}"#, &fds, None).unwrap();
        let got = read(b.as_raw_fd()).unwrap();
        assert!(got.fds.is_some());
        assert!(got.exe.is_none());
        assert_eq!(got.kind(), Ok(RunKind::Draft));
        send(&a, b"{}", &fds, None).unwrap();
        assert!(read(b.as_raw_fd()).unwrap().kind().is_err());
        drop(a);
        assert!(read(b.as_raw_fd()).is_none());
    }

    fn identity(fd: &impl AsRawFd) -> (u64, u64) {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        (m.dev(), m.ino())
    }

    #[test]
    fn the_backends_descriptor_travels_last_and_only_as_one_more() {
        let (a, b) = stream_pair();
        let null = std::fs::File::open("/dev/null").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let exe_path = dir.path().join("backend");
        std::fs::write(&exe_path, "#!/bin/sh\n").unwrap();
        let exe = std::fs::File::open(&exe_path).unwrap();
        let fds = RunFds::from_array([null.as_raw_fd(); PASSED]);
        send(&a, b"{}", &fds, Some(exe.as_raw_fd())).unwrap();
        let got = read(b.as_raw_fd()).unwrap();
        let run = got.fds.unwrap();
        assert_eq!(identity(&run.cgroup_procs), identity(&null));
        assert_eq!(identity(&got.exe.unwrap()), identity(&exe));
        // Anything but one per field, or one more, is no request's list.
        let nulls = |n: usize| -> Vec<OwnedFd> {
            (0..n)
                .map(|_| OwnedFd::from(std::fs::File::open("/dev/null").unwrap()))
                .collect()
        };
        let (run, exe) = split(nulls(PASSED));
        assert!(run.is_some() && exe.is_none());
        let (run, exe) = split(nulls(PASSED + 1));
        assert!(run.is_some() && exe.is_some());
        let (run, exe) = split(nulls(PASSED - 1));
        assert!(run.is_none() && exe.is_none());
        let (run, exe) = split(nulls(PASSED + 2));
        assert!(run.is_none() && exe.is_none());
        drop(a);
        assert!(read(b.as_raw_fd()).is_none());
    }

    #[test]
    fn a_policy_decodes_from_exactly_the_bytes_encoded() {
        let p = Policy {
            program: "/bin/b".into(),
            argv: vec!["b".into(), "x".into()],
            env: vec![("LANG".into(), "C".into())],
            cwd: "/".into(),
            read_exec: vec![],
            read: vec![],
            read_write: vec!["/tmp/run".into()],
            tmpdir: "/tmp/run".into(),
            write_files: vec![],
            mounts: None,
            kind: RunKind::ReadOnly,
            layers: Default::default(),
            rlimits: Default::default(),
            parent_pid: 1,
        };
        let sent = encode_policy(&p).unwrap();
        assert_eq!(sent.as_bytes(), serde_json::to_vec(&p).unwrap());
        assert_eq!(decode_policy(sent.as_bytes()).unwrap(), p);
        assert!(decode_policy(b"{}").is_err());
    }
}

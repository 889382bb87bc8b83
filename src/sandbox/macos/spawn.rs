//! Starting a run under sandbox-exec (macOS only; the argv comes from the
//! pure builder in `profile.rs`, the exec chain from `discover` at start).

use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::sandbox::policy::{self, Layers};
use crate::sandbox::SandboxMode;
use crate::sandbox::{
    Layer, LayerStatus, RunKind, SandboxError, SandboxOptions, SandboxedChild, StatusReport,
};

use super::{ExecChain, RunProfile};

pub struct State {
    chain: ExecChain,
}

/// Whether runs started from now on have their denials read from the
/// unified log. Set once by `sandbox run` when it was asked for a report:
/// a `log stream` per run and the grace after it are too dear for every
/// tool call.
static WATCH_LOG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Read the denials of every run started from now on from the unified log.
pub fn watch_unified_log() {
    WATCH_LOG.store(true, std::sync::atomic::Ordering::Relaxed);
}

fn available() -> Result<(), String> {
    if Path::new(super::SANDBOX_EXEC).exists() {
        Ok(())
    } else {
        Err(format!("{} is missing", super::SANDBOX_EXEC))
    }
}

/// The user's home from the password database when `HOME` is unset, so a
/// missing variable can't widen what counts as "outside the home".
fn home_dir() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        return Some(PathBuf::from(h));
    }
    // SAFETY: getpwuid returns a pointer into static storage or null; the
    // directory is copied out at once.
    unsafe {
        let pw = libc::getpwuid(libc::getuid());
        if pw.is_null() || (*pw).pw_dir.is_null() {
            return None;
        }
        use std::os::unix::ffi::OsStrExt;
        let dir = std::ffi::CStr::from_ptr((*pw).pw_dir);
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes())))
    }
}

/// What the trial run starts: a program that does nothing, linked like
/// any other (dyld, libSystem), so a profile that stops the loader stops it.
pub(super) const TRIAL_PROGRAM: &str = "/usr/bin/true";

impl State {
    /// The sandbox for `opts`, after one trial run of [`TRIAL_PROGRAM`]
    /// under the generated profile: a profile this macOS refuses or whose
    /// runs die before `main` stops the start, in either mode, since every
    /// run would fail the same way and there is no other layer to fall
    /// back to.
    pub fn detect(opts: &SandboxOptions) -> Result<State, SandboxError> {
        let state = State::prepare(opts)?;
        if available().is_ok() {
            state.trial_run(opts).map_err(|e| {
                SandboxError::Unavailable(format!(
                    "a trial run of {TRIAL_PROGRAM} under the generated sandbox profile failed: {e}"
                ))
            })?;
        }
        Ok(state)
    }

    /// One run of [`TRIAL_PROGRAM`] under this sandbox's profile, in the
    /// root: `Err` says why it failed.
    pub(super) fn trial_run(&self, opts: &SandboxOptions) -> Result<(), String> {
        let argv = [TRIAL_PROGRAM.to_string()];
        let mut child = self
            .spawn(opts, RunKind::ReadOnly, &argv, &opts.root, None)
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        let mut err = Vec::new();
        {
            use std::io::Read;
            if let Some(mut o) = child.stdout.take() {
                let _ = o.read_to_end(&mut out);
            }
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_end(&mut err);
            }
        }
        let status = child.wait().map_err(|e| e.to_string())?;
        if status.success() {
            return Ok(());
        }
        use std::os::unix::process::ExitStatusExt;
        let ended = match (status.code(), status.signal()) {
            (Some(c), _) => super::Ended::Code(c),
            (None, Some(s)) => super::Ended::Signal(s),
            (None, None) => return Err(format!("it ended with {status}")),
        };
        Err(super::died_at_start(ended, &out, &err).unwrap_or_else(|| {
            let said = String::from_utf8_lossy(&err);
            let said = said.trim();
            if said.is_empty() {
                format!("it ended with {status}")
            } else {
                format!(
                    "it ended with {status}: {}",
                    said.chars().take(300).collect::<String>()
                )
            }
        }))
    }

    /// The sandbox for `opts` without the trial run.
    pub(super) fn prepare(opts: &SandboxOptions) -> Result<State, SandboxError> {
        if let Err(e) = available() {
            if opts.mode == SandboxMode::Require {
                return Err(SandboxError::Unavailable(e));
            }
        }
        let home = home_dir();
        let path_env = std::env::var("PATH").ok();
        // An exec chain that can't be known (an `env` line naming a program
        // not on PATH) stops the start, whatever the mode: the run would
        // otherwise start whatever `env` finds inside the sandbox.
        let chain = super::discover(&opts.backend, home.as_deref(), path_env.as_deref())
            .map_err(|e| SandboxError::Unavailable(e.to_string()))?;
        Ok(State { chain })
    }

    pub fn layers_line(&self) -> String {
        "sandbox-exec (deny-by-default profile, no network)".to_string()
    }

    pub fn without(&mut self, _layer: Layer) {}

    /// The promises are assessed on Linux only, where they rest on several
    /// layers; here the one profile holds what it holds.
    pub fn promises_line(&self, _drafts: bool) -> String {
        String::new()
    }

    pub fn drafts_refused(&self) -> Option<String> {
        None
    }

    pub fn spawn(
        &self,
        opts: &SandboxOptions,
        kind: RunKind,
        argv: &[String],
        cwd: &Path,
        stdin: Option<OwnedFd>,
    ) -> Result<SandboxedChild, SandboxError> {
        let tmpdir = crate::sandbox::make_private_tmpdir().map_err(SandboxError::Io)?;
        let guard = crate::sandbox::TmpGuard(Some(tmpdir.clone()));
        let server_env: Vec<(String, String)> = std::env::vars().collect();
        let p = policy::build(&policy::BuildInput {
            opts,
            kind,
            // The exec chain found at start carries the runtime; the
            // Linux-shaped system folders are not granted here (the base
            // profile names Apple's own).
            runtime: &opts.allow_read,
            env: &server_env,
            layers: Layers::default(),
            tmpdir: &tmpdir,
            argv,
            cwd,
            parent_pid: std::process::id(),
        });
        let tag = super::RunTag(crate::sandbox::random_u64());
        let full = super::build_argv(&RunProfile {
            policy: &p,
            chain: &self.chain,
            backend: &opts.backend,
            db: opts.db.as_deref(),
            draft: kind == RunKind::Draft,
            tag,
        });
        let mut cmd = Command::new(&full[0]);
        cmd.args(&full[1..])
            .env_clear()
            .envs(p.env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        match stdin {
            Some(fd) => cmd.stdin(Stdio::from(fd)),
            None => cmd.stdin(Stdio::null()),
        };
        let mut sweep = InheritedFds::prepare().map_err(SandboxError::Io)?;
        // SAFETY: the closure only makes system calls (getpid, proc_pidinfo
        // into a buffer allocated before the fork, fcntl); it allocates
        // nothing and takes no lock.
        unsafe {
            cmd.pre_exec(move || {
                sweep.mark_all_cloexec();
                Ok(())
            });
        }
        // The database's folder as it was, so that what a draft leaves
        // under a companion's name that is not a plain file, and any
        // execute bit on one, is undone once it ends (as on Linux).
        // The folder is held open from here and checked against its pin
        // from start; the plan is pure and built for its pins alone.
        let sweep = match kind {
            RunKind::Draft => policy::mount_plan(opts, &opts.allow_read, kind)
                .draft
                .map(|d| crate::sandbox::draft::DraftSweep::before(&d))
                .transpose()?,
            _ => None,
        };
        // Started before the run, so its first refusals are not missed.
        let log = WATCH_LOG
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| super::unified_log::LogWatch::start(&tag.to_string()));
        let mut child = cmd.spawn().map_err(SandboxError::Io)?;
        // What confined the run: the profile and argv sandbox-exec received.
        let attestation = crate::sandbox::layers::Attestation::new(
            [Layer::SandboxExec].into_iter().collect(),
            full.join("\0").as_bytes(),
        );
        Ok(SandboxedChild {
            attestation: Some(attestation),
            after: sweep.map(|s| {
                Box::new(move || {
                    s.after();
                }) as Box<dyn FnOnce() + Send>
            }),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            child: child.into(),
            log,
            tmpdir: guard.release(),
            done: false,
        })
    }
}

/// Descriptors the server inherited without close-on-exec (from the MCP
/// client, a terminal, a parent's pipes) must not reach the backend, as on
/// Linux: between fork and exec, every descriptor above stderr is marked
/// close-on-exec. macOS has no `closefrom`, so the child asks the kernel
/// for its list of open descriptors (`PROC_PIDLISTFDS`) into a buffer made
/// here, before the fork, where allocating is allowed; if the list may be
/// cut short it tries every number up to the real limit instead, however
/// high the soft limit was raised.
struct InheritedFds {
    list: Vec<libc::proc_fdinfo>,
    limit: libc::c_int,
}

impl InheritedFds {
    fn prepare() -> std::io::Result<InheritedFds> {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a valid out-parameter.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let per_proc = maxfilesperproc()?;
        let limit = super::fd_sweep_limit(lim.rlim_cur, per_proc);
        // SAFETY: a null buffer asks for the size only.
        let bytes = unsafe {
            libc::proc_pidinfo(
                libc::getpid(),
                libc::PROC_PIDLISTFDS,
                0,
                std::ptr::null_mut(),
                0,
            )
        };
        let open_now = usize::try_from(bytes).unwrap_or(0) / size_of::<libc::proc_fdinfo>();
        // Room for descriptors other threads open before the fork.
        let capacity = open_now + 256;
        Ok(InheritedFds {
            list: vec![
                libc::proc_fdinfo {
                    proc_fd: 0,
                    proc_fdtype: 0,
                };
                capacity
            ],
            limit,
        })
    }

    /// In the child, between fork and exec: async-signal-safe.
    fn mark_all_cloexec(&mut self) {
        let entry = size_of::<libc::proc_fdinfo>();
        let bytes = libc::c_int::try_from(self.list.len() * entry).unwrap_or(libc::c_int::MAX);
        // SAFETY: the buffer holds `bytes` bytes and outlives the call.
        let got = unsafe {
            libc::proc_pidinfo(
                libc::getpid(),
                libc::PROC_PIDLISTFDS,
                0,
                self.list.as_mut_ptr().cast(),
                bytes,
            )
        };
        match super::listed_fd_count(got, entry, self.list.len()) {
            Some(n) => {
                for e in &self.list[..n] {
                    mark_cloexec(e.proc_fd);
                }
            }
            None => {
                for fd in 3..self.limit {
                    mark_cloexec(fd);
                }
            }
        }
    }
}

fn mark_cloexec(fd: libc::c_int) {
    if fd <= 2 {
        return;
    }
    // SAFETY: fcntl on a number that may not be open only fails.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
            libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
        }
    }
}

/// `kern.maxfilesperproc`: no descriptor number reaches it.
fn maxfilesperproc() -> std::io::Result<u64> {
    let mut mib = [libc::CTL_KERN, libc::KERN_MAXFILESPERPROC];
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>();
    // SAFETY: a valid mib and an int-sized out-parameter.
    let r = unsafe {
        libc::sysctl(
            mib.as_mut_ptr(),
            2,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    u64::try_from(value).map_err(|_| std::io::Error::other("kern.maxfilesperproc is negative"))
}

impl crate::sandbox::Platform for State {
    fn detect(opts: &SandboxOptions) -> Result<State, SandboxError> {
        State::detect(opts)
    }

    fn layers_line(&self) -> String {
        State::layers_line(self)
    }

    fn promises_line(&self, _opts: &SandboxOptions, drafts: bool) -> String {
        State::promises_line(self, drafts)
    }

    fn drafts_refused(&self, _opts: &SandboxOptions) -> Option<String> {
        State::drafts_refused(self)
    }

    /// sandbox-exec is started as the run itself: there is no helper whose
    /// word a run waits for.
    fn bound_waits(&self, _call_timeout: Option<std::time::Duration>) {}

    fn spawn(
        &self,
        opts: &SandboxOptions,
        kind: RunKind,
        argv: &[String],
        cwd: &Path,
        stdin: Option<OwnedFd>,
        // sandbox-exec runs the backend by its path (docs/PINS.md).
        _exe: Option<BorrowedFd<'_>>,
    ) -> Result<SandboxedChild, SandboxError> {
        State::spawn(self, opts, kind, argv, cwd, stdin)
    }

    fn helper_main(_arg: &str) -> anyhow::Result<u8> {
        anyhow::bail!("the sandbox helper is not used on macOS")
    }

    fn status() -> StatusReport {
        super::probe::status(layer_status(), trial_in_scratch_root)
    }

    fn probe(json: bool, without: Option<Layer>, junit: Option<&Path>) -> anyhow::Result<u8> {
        if without.is_some() {
            anyhow::bail!("--without switches off Linux layers; macOS has one layer, sandbox-exec");
        }
        if junit.is_some() {
            anyhow::bail!("--junit is written by the Linux probe; on macOS use --json");
        }
        super::probe::run(json)
    }

    fn probe_attempt(name: &str, args: &[String]) -> u8 {
        super::probe::attempt(name, args)
    }
}

/// Kept for the status report's layer list.
pub(super) fn layer_status() -> LayerStatus {
    let a = available();
    LayerStatus {
        layer: Layer::SandboxExec,
        available: a.is_ok(),
        detail: a.err().unwrap_or_else(|| "deny-by-default profile".into()),
    }
}

/// A sandbox like a server's, with a throwaway root and `/usr/bin/true` as
/// its backend, and one run of it under the real generated profile: what
/// `status` reports is what a tool call would meet (a profile this release
/// refuses, a loader the profile stops before `main`, a sandbox that can't
/// be applied inside another one).
fn trial_in_scratch_root() -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    let root = std::env::temp_dir().join(format!(
        "reachweaver-trial-{:016x}",
        crate::sandbox::random_u64()
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&root)
        .map_err(|e| format!("a folder for the trial: {e}"))?;
    let dir = crate::sandbox::tmpdir::TmpGuard(Some(root.clone()));
    let root = std::fs::canonicalize(&root).map_err(|e| e.to_string())?;
    let opts = SandboxOptions {
        mode: SandboxMode::BestEffort,
        backend: PathBuf::from(TRIAL_PROGRAM),
        root,
        ..SandboxOptions::default()
    };
    let state = State::prepare(&opts).map_err(|e| e.to_string())?;
    let result = state.trial_run(&opts);
    // The scratch root goes once the trial is over, whatever it found.
    drop(dir);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set in a copy of this test binary that runs the test below alone:
    /// it raises its descriptor limit, which holds for the whole process.
    const FD_SWEEP_CHILD: &str = "REACHWEAVER_TEST_FD_SWEEP";

    /// A descriptor without close-on-exec at the highest number this
    /// process may use (above 65536 wherever the limits allow) does not
    /// reach a program started through the sweep. The limit is raised in a
    /// process of its own (this test binary again, running only this
    /// test), so no test running beside it sees a changed limit.
    #[test]
    fn inherited_descriptors_never_reach_the_child() {
        if std::env::var_os(FD_SWEEP_CHILD).is_some() {
            sweep_at_the_raised_limit();
            return;
        }
        let module = module_path!()
            .split_once("::")
            .map_or(module_path!(), |(_, m)| m);
        let name = format!("{module}::inherited_descriptors_never_reach_the_child");
        let out = Command::new(std::env::current_exe().unwrap())
            .args([name.as_str(), "--exact", "--test-threads=1", "--nocapture"])
            .env(FD_SWEEP_CHILD, "1")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        assert!(text.contains(" 1 passed;"), "the copy ran no test: {text}");
    }

    fn sweep_at_the_raised_limit() {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: valid out-parameter; raising the soft limit to the hard
        // one affects only this copy of the test binary.
        unsafe {
            assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
            let want = lim.rlim_max.min(maxfilesperproc().unwrap());
            lim.rlim_cur = want;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        }
        let limit = super::super::fd_sweep_limit(lim.rlim_cur, maxfilesperproc().unwrap());
        let file = std::fs::File::open("/dev/null").unwrap();
        use std::os::fd::AsRawFd;
        // F_DUPFD takes the lowest free number from the one asked, so no
        // descriptor of a test running beside this one is replaced; the
        // copies have no close-on-exec.
        // SAFETY: duplicating a descriptor this test owns.
        let high = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD, limit - 1) };
        assert_eq!(high, limit - 1, "{}", std::io::Error::last_os_error());
        // SAFETY: as above.
        let low = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD, 40) };
        assert!(low >= 40);
        let check = format!("test ! -e /dev/fd/{high} && test ! -e /dev/fd/{low}");
        let run = |sweep: Option<InheritedFds>| {
            let mut cmd = Command::new("/bin/sh");
            cmd.args(["-c", &check]);
            if let Some(mut sweep) = sweep {
                // SAFETY: as in spawn.
                unsafe {
                    cmd.pre_exec(move || {
                        sweep.mark_all_cloexec();
                        Ok(())
                    });
                }
            }
            cmd.status().unwrap().success()
        };
        // Without the sweep the child sees them (so the check can fail)...
        assert!(
            !run(None),
            "the descriptors were not inherited to begin with"
        );
        // ...with it, by the kernel's list and by the full sweep alike.
        assert!(run(Some(InheritedFds::prepare().unwrap())));
        let mut full = InheritedFds::prepare().unwrap();
        full.list.truncate(1);
        assert!(run(Some(full)));
        // SAFETY: closing the copies made above.
        unsafe {
            libc::close(high);
            libc::close(low);
        }
    }
}

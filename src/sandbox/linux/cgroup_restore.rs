//! Leaving a delegated cgroup as the server found it.
//!
//! Runs need the `memory` and `pids` controllers handed down from the
//! server's own cgroup, and a cgroup that hands controllers down may hold
//! no process: so while it serves, the server sits in a leaf of its own
//! (`reachweaver-server`) and its cgroup is an inner node. Left that way, the
//! cgroup takes no process again (the kernel refuses with EBUSY), so
//! whoever started the server there can't start another one. systemd
//! removes a unit's cgroup when the unit stops; a cgroup delegated by hand,
//! a container's or a CI runner's keeps what the server left.
//!
//! So the server undoes its set-up as it exits (an `atexit` handler, which
//! `std::process::exit` and a return from `main` both run), and a small
//! keeper process, started with the set-up in a leaf of its own
//! (`reachweaver-keeper`), undoes it when the server dies without exiting
//! (SIGKILL): the server's end of a pipe closing without a word tells it so.
//! What neither could remove (a leaf whose last process was still on its
//! way out) is removed at the next start. Only the server's own named
//! children are ever touched, and only empty ones removed; no process the
//! server did not start is moved, and runs' cgroups (the server's own runs)
//! are the only ones killed.
//!
//! The steps are planned as plain data ([`exit_plan`], [`keeper_plan`],
//! [`leftovers`]) and carried out by [`apply`].

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The leaf the server moves into.
pub const SERVER_LEAF: &str = "reachweaver-server";
/// The leaf the keeper lives in.
pub const KEEPER_LEAF: &str = "reachweaver-keeper";
/// `__sandbox-helper cgroup-keeper:<the server's cgroup folder>`.
pub const KEEPER_PREFIX: &str = "cgroup-keeper:";
/// What the server writes to the keeper on a clean exit: nothing to do.
const STAND_DOWN: u8 = b'x';

/// A child of the server's cgroup the server makes itself. Pure.
pub fn ours(name: &str) -> bool {
    name == SERVER_LEAF
        || name == KEEPER_LEAF
        || name
            .strip_prefix("run-")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn is_run(name: &str) -> bool {
    ours(name) && name.starts_with("run-")
}

/// One step of undoing the set-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Write a value to a control file.
    Write(PathBuf, String),
    /// Remove a cgroup once it is empty (waited for briefly); one still in
    /// use stays.
    Rmdir(PathBuf),
    /// Wait for the keeper to end, after telling it it has nothing to do.
    StandDownKeeper,
}

/// The server's cgroup's children, by name, sorted.
fn children(own: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(own)
        .map(|it| {
            it.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs' cgroups first: whatever is left in one is killed (cgroup.kill,
/// Linux 5.14; without it the run's own parent-death signals end it) and
/// the cgroup removed.
fn runs(own: &Path, children: &[String]) -> Vec<Step> {
    let mut v = Vec::new();
    for c in children.iter().filter(|c| is_run(c)) {
        let dir = own.join(c);
        v.push(Step::Write(dir.join("cgroup.kill"), "1".into()));
        v.push(Step::Rmdir(dir));
    }
    v
}

fn hand_back_controllers(own: &Path) -> Step {
    Step::Write(own.join("cgroup.subtree_control"), "-memory -pids".into())
}

/// On a clean exit, in the server: the runs' cgroups go, the controllers
/// are taken back, the server moves back into its cgroup (it may, with no
/// controller handed down), the keeper is stood down, and both leaves go.
/// What is left in the server's leaf then is the server's own (the
/// sandbox's helper, which its parent-death signal would kill a moment
/// later anyway): it is killed now, so that the cgroup holds nothing of
/// this server's once it has exited, and the next start finds itself alone
/// there. Pure.
pub fn exit_plan(own: &Path, children: &[String], server_pid: u32) -> Vec<Step> {
    let mut v = runs(own, children);
    v.push(hand_back_controllers(own));
    v.push(Step::Write(
        own.join("cgroup.procs"),
        server_pid.to_string(),
    ));
    v.push(Step::StandDownKeeper);
    v.push(Step::Rmdir(own.join(KEEPER_LEAF)));
    v.push(Step::Write(
        own.join(SERVER_LEAF).join("cgroup.kill"),
        "1".into(),
    ));
    v.push(Step::Rmdir(own.join(SERVER_LEAF)));
    v
}

/// In the keeper, once the server died without exiting: the runs' cgroups
/// and the server's leaf go first, and taking the controllers back is the
/// last step, because only then may a new server be started in the cgroup,
/// and nothing of this one's must be touched after that. The keeper's own
/// leaf goes at the next start. Pure.
pub fn keeper_plan(own: &Path, children: &[String]) -> Vec<Step> {
    let mut v = runs(own, children);
    v.push(Step::Rmdir(own.join(SERVER_LEAF)));
    v.push(hand_back_controllers(own));
    v
}

/// At start, in a cgroup the server is alone in: what an earlier server
/// left (its leaves, its runs' cgroups), each removed only if empty. Pure.
pub fn leftovers(own: &Path, children: &[String]) -> Vec<Step> {
    children
        .iter()
        .filter(|c| ours(c))
        .map(|c| Step::Rmdir(own.join(c)))
        .collect()
}

/// Remove the empty leftovers of an earlier server in `own`.
pub fn remove_leftovers(own: &Path) {
    apply(&leftovers(own, &children(own)), None, 1);
}

/// Carry the steps out, each as far as it goes: undoing is best effort,
/// and one step failing must not keep the next from being tried. `rmdir`
/// is tried `tries` times, 10 ms apart, while the cgroup is busy.
fn apply(steps: &[Step], mut keeper: Option<&mut Keeper>, tries: u32) {
    for s in steps {
        match s {
            Step::Write(p, v) => {
                let _ = std::fs::OpenOptions::new()
                    .write(true)
                    .open(p)
                    .and_then(|mut f| f.write_all(v.as_bytes()));
            }
            Step::Rmdir(p) => {
                for i in 0..tries {
                    match std::fs::remove_dir(p) {
                        Ok(()) => break,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                        Err(_) if i + 1 < tries => {
                            std::thread::sleep(std::time::Duration::from_millis(10))
                        }
                        Err(_) => {}
                    }
                }
            }
            Step::StandDownKeeper => {
                if let Some(k) = keeper.as_deref_mut() {
                    k.stand_down();
                }
            }
        }
    }
}

/// The keeper as the server holds it.
#[derive(Debug)]
pub struct Keeper {
    child: std::process::Child,
    /// The write end of its pipe: closed without a word, the server died.
    tell: Option<OwnedFd>,
}

impl Keeper {
    /// Start the keeper for the cgroup `own` (it starts in the server's
    /// cgroup; the set-up moves it into its leaf). It has its own process
    /// group, so a terminal's Ctrl-C reaches the server but not it.
    pub fn start(own: &Path) -> std::io::Result<Keeper> {
        use std::os::unix::process::CommandExt;
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the array we own; both ends are close-on-exec,
        // so no run inherits the write end.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fresh descriptors nobody else owns.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let mut arg = std::ffi::OsString::from(KEEPER_PREFIX);
        arg.push(own.as_os_str());
        let child = std::process::Command::new("/proc/self/exe")
            .arg("__sandbox-helper")
            .arg(arg)
            .stdin(std::process::Stdio::from(read))
            .stdout(std::process::Stdio::null())
            .process_group(0)
            .spawn()?;
        Ok(Keeper {
            child,
            tell: Some(write),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Tell it there is nothing to undo, and wait for it to end.
    fn stand_down(&mut self) {
        if let Some(fd) = self.tell.take() {
            let _ = std::fs::File::from(fd).write_all(&[STAND_DOWN]);
        }
        let _ = self.child.wait();
    }
}

/// What the exit handler undoes: one entry per delegated set-up this
/// process made, undone last first.
struct AtExit {
    own: PathBuf,
    keeper: Option<Keeper>,
    /// The process that made the set-up: a forked child that exits through
    /// the C library must not undo its parent's.
    pid: u32,
}

static AT_EXIT: Mutex<Vec<AtExit>> = Mutex::new(Vec::new());

/// A folder this process made for its runs, and how it is removed.
struct Made {
    dir: PathBuf,
    remove: fn(&Path),
    /// The process that made it, as for [`AtExit`].
    pid: u32,
}

static MADE: Mutex<Vec<Made>> = Mutex::new(Vec::new());

extern "C" fn undo_at_exit() {
    undo_for(std::process::id());
}

/// What the exit handler does, for the process `pid`: only what `pid`
/// made is undone or removed, last first.
fn undo_for(pid: u32) {
    let mut list = match AT_EXIT.lock() {
        Ok(l) => l,
        Err(e) => e.into_inner(),
    };
    while let Some(mut e) = list.pop() {
        if e.pid != pid {
            continue;
        }
        let steps = exit_plan(&e.own, &children(&e.own), pid);
        apply(&steps, e.keeper.as_mut(), 20);
    }
    drop(list);
    let mut made = match MADE.lock() {
        Ok(l) => l,
        Err(e) => e.into_inner(),
    };
    made.retain(|m| {
        if m.pid == pid {
            (m.remove)(&m.dir);
        }
        m.pid != pid
    });
}

fn register_handler() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    // SAFETY: registering a handler that only touches this module's state
    // and the cgroup files.
    REGISTERED.call_once(|| unsafe {
        libc::atexit(undo_at_exit);
    });
}

/// Remove `dir`, a cgroup this process made at the hierarchy's root for
/// its runs, with `remove` when this process exits: the owner's value that
/// would remove it is never dropped when the server leaves by
/// `std::process::exit`.
pub fn remove_on_exit(dir: &Path, remove: fn(&Path)) {
    register_handler();
    let mut made = match MADE.lock() {
        Ok(l) => l,
        Err(e) => e.into_inner(),
    };
    made.push(Made {
        dir: dir.to_path_buf(),
        remove,
        pid: std::process::id(),
    });
}

/// Undo the set-up in `own` when this process exits. Registers the handler
/// with the C library once.
pub fn undo_on_exit(own: &Path, keeper: Option<Keeper>) {
    let mut list = match AT_EXIT.lock() {
        Ok(l) => l,
        Err(e) => e.into_inner(),
    };
    register_handler();
    list.push(AtExit {
        own: own.to_path_buf(),
        keeper,
        pid: std::process::id(),
    });
}

/// Undo the set-up now, as the keeper would (a set-up that failed half
/// way), standing the keeper down first so it doesn't undo it again.
pub fn undo_now(own: &Path, keeper: Option<Keeper>) {
    if let Some(mut k) = keeper {
        k.stand_down();
    }
    apply(&keeper_plan(own, &children(own)), None, 20);
}

/// The keeper's life: wait on stdin for the server's word or its death;
/// on its death undo the set-up in `own`.
pub fn keeper_main(own: &Path) -> anyhow::Result<u8> {
    let mut stdin = std::io::stdin().lock();
    let mut byte = [0u8; 1];
    loop {
        match stdin.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => return Ok(0),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    // The server is gone; its helper and runs follow it (parent-death
    // signals), so removals are waited for a little longer.
    apply(&keeper_plan(own, &children(own)), None, 200);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    static REMOVED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

    fn note_removed(dir: &Path) {
        REMOVED.lock().unwrap().push(dir.to_path_buf());
    }

    #[test]
    fn a_folder_made_for_the_runs_is_removed_at_exit_by_its_maker_only() {
        let mine = PathBuf::from("/sys/fs/cgroup/reachweaver-mcp.1.test-mine");
        let theirs = PathBuf::from("/sys/fs/cgroup/reachweaver-mcp.2.test-theirs");
        remove_on_exit(&mine, note_removed);
        // As a forked child of this process would have it: made by another.
        MADE.lock().unwrap().push(Made {
            dir: theirs.clone(),
            remove: note_removed,
            pid: std::process::id() + 1,
        });
        undo_for(std::process::id());
        let removed = REMOVED.lock().unwrap().clone();
        assert!(removed.contains(&mine), "{removed:?}");
        assert!(!removed.contains(&theirs), "{removed:?}");
        // Removed once: a second exit handler run removes nothing again.
        undo_for(std::process::id());
        let again = REMOVED
            .lock()
            .unwrap()
            .iter()
            .filter(|d| **d == mine)
            .count();
        assert_eq!(again, 1);
        let kept = MADE.lock().unwrap().iter().any(|m| m.dir == theirs);
        assert!(kept, "the other process's folder was dropped from the list");
    }

    #[test]
    fn only_the_servers_own_children_are_ours() {
        for n in [
            "reachweaver-server",
            "reachweaver-keeper",
            "run-0",
            "run-12",
        ] {
            assert!(ours(n), "{n}");
        }
        for n in [
            "run-",
            "run-1a",
            "run--1",
            "reachweaver-server2",
            "reachweaver-mcp.12.ab",
            "init",
            "system.slice",
            "Run-1",
        ] {
            assert!(!ours(n), "{n}");
        }
    }

    #[test]
    fn a_clean_exit_hands_back_the_controllers_before_moving_back() {
        let own = Path::new("/sys/fs/cgroup/d");
        let kids = names(&["init", "reachweaver-keeper", "reachweaver-server", "run-3"]);
        assert_eq!(
            exit_plan(own, &kids, 42),
            [
                Step::Write(own.join("run-3/cgroup.kill"), "1".into()),
                Step::Rmdir(own.join("run-3")),
                Step::Write(own.join("cgroup.subtree_control"), "-memory -pids".into()),
                Step::Write(own.join("cgroup.procs"), "42".into()),
                Step::StandDownKeeper,
                Step::Rmdir(own.join("reachweaver-keeper")),
                Step::Write(own.join("reachweaver-server/cgroup.kill"), "1".into()),
                Step::Rmdir(own.join("reachweaver-server")),
            ]
        );
    }

    #[test]
    fn the_keeper_hands_back_the_controllers_last_and_kills_only_runs() {
        let own = Path::new("/sys/fs/cgroup/d");
        let kids = names(&["other", "reachweaver-server", "run-0", "run-1"]);
        let plan = keeper_plan(own, &kids);
        assert_eq!(
            plan.last(),
            Some(&Step::Write(
                own.join("cgroup.subtree_control"),
                "-memory -pids".into()
            ))
        );
        let kills: Vec<&Step> = plan
            .iter()
            .filter(|s| matches!(s, Step::Write(p, _) if p.ends_with("cgroup.kill")))
            .collect();
        assert_eq!(
            kills,
            [
                &Step::Write(own.join("run-0/cgroup.kill"), "1".into()),
                &Step::Write(own.join("run-1/cgroup.kill"), "1".into()),
            ]
        );
        // Nothing the server did not make is touched, and no process moved.
        for s in &plan {
            match s {
                Step::Write(p, _) | Step::Rmdir(p) => {
                    assert!(!p.starts_with(own.join("other")), "{s:?}")
                }
                Step::StandDownKeeper => panic!("{s:?}"),
            }
            assert!(
                !matches!(s, Step::Write(p, _) if p.ends_with("cgroup.procs")),
                "{s:?}"
            );
        }
    }

    #[test]
    fn leftovers_are_the_servers_own_children_only() {
        let own = Path::new("/sys/fs/cgroup/d");
        let kids = names(&[
            "a",
            "reachweaver-keeper",
            "reachweaver-server",
            "run-7",
            "run-x",
        ]);
        assert_eq!(
            leftovers(own, &kids),
            [
                Step::Rmdir(own.join("reachweaver-keeper")),
                Step::Rmdir(own.join("reachweaver-server")),
                Step::Rmdir(own.join("run-7")),
            ]
        );
        assert!(leftovers(own, &names(&["a", "b"])).is_empty());
    }
}

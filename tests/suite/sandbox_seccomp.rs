//! The seccomp allow-list, end to end: a C program (linked dynamically and
//! statically) does what backends need and tries what the list leaves out,
//! under `sandbox run` as the current user and as an unprivileged one, and
//! reports each answer. The same program outside the sandbox is the
//! control: there the refused calls work.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::sandbox::{output_within, text, Who, World};

const PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

static void say(const char *what, long r) {
    printf("%s %s\n", what, r < 0 ? strerrorname_np(errno) : "ok");
}

static void *thread_main(void *arg) { return arg; }

int main(int argc, char **argv) {
    const char *file = argv[1];
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { perror(file); return 2; }
    setvbuf(stdout, NULL, _IONBF, 0);

    /* What backends need. */
    pthread_t t;
    say("thread", pthread_create(&t, NULL, thread_main, NULL) == 0 ? pthread_join(t, NULL) : -1);
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    say("fork", pid < 0 ? -1 : waitpid(pid, NULL, 0));
    int p[2];
    say("pipe2", pipe2(p, O_CLOEXEC));
    say("socketpair-stream", socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p));
    say("eventfd", eventfd(0, EFD_CLOEXEC));
    say("timerfd", timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC));
    say("epoll", epoll_create1(EPOLL_CLOEXEC));
    say("flock", flock(fd, LOCK_SH));
    say("fcntl-F_GETFL", fcntl(fd, F_GETFL));
    int n = 0;
    say("ioctl-FIONREAD", ioctl(fd, FIONREAD, &n));
    char made[4096];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(made, sizeof made, "%s/seccomp-check-%d-0644", tmp, (int)getpid());
    int c = open(made, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    say("open-creat-0644", c);
    if (c >= 0) { close(c); unlink(made); }
    char space[4096], moved[4096];
    snprintf(space, sizeof space, "%s/seccomp-check-%d-space", tmp, (int)getpid());
    snprintf(moved, sizeof moved, "%s/seccomp-check-%d-moved", tmp, (int)getpid());
    int s = open(space, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    say("fallocate-0", s < 0 ? -1 : fallocate(s, 0, 0, 4096));
    say("renameat2-noreplace",
        syscall(SYS_renameat2, AT_FDCWD, space, AT_FDCWD, moved, RENAME_NOREPLACE));
    rename(moved, space);

    /* What the list leaves out or refuses. */
    int in = inotify_init1(IN_CLOEXEC);
    say("inotify", in < 0 ? -1 : inotify_add_watch(in, file, IN_MODIFY));
    say("fallocate-keep-size", s < 0 ? -1 : fallocate(s, FALLOC_FL_KEEP_SIZE, 0, 1 << 20));
    say("fallocate-punch-hole",
        s < 0 ? -1 : fallocate(s, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096));
    say("renameat2-whiteout",
        syscall(SYS_renameat2, AT_FDCWD, space, AT_FDCWD, moved, RENAME_WHITEOUT));
    unlink(moved);
    unlink(space);
    if (s >= 0) close(s);
    say("socketpair-dgram", socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, p));
    snprintf(made, sizeof made, "%s/seccomp-check-%d-0755", tmp, (int)getpid());
    c = open(made, O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
    say("open-creat-0755", c);
    if (c >= 0) { close(c); unlink(made); }
    snprintf(made, sizeof made, "%s/seccomp-check-%d-creat", tmp, (int)getpid());
    c = creat(made, 0700);
    say("creat-0700", c);
    if (c >= 0) { close(c); unlink(made); }
    int flags = 0;
    say("ioctl-FS_IOC_SETFLAGS", ioctl(fd, FS_IOC_SETFLAGS, &flags));
    struct fsxattr fx;
    memset(&fx, 0, sizeof fx);
    say("ioctl-FS_IOC_FSSETXATTR", ioctl(fd, FS_IOC_FSSETXATTR, &fx));
    long version = 0;
    say("ioctl-EXT4_IOC_SETVERSION", ioctl(fd, _IOW('f', 4, long), &version));
    say("fcntl-F_SETLEASE", fcntl(fd, F_SETLEASE, F_RDLCK));
    say("memfd_create", syscall(SYS_memfd_create, "x", 0));
    say("file_setattr", syscall(469, AT_FDCWD, file, NULL, 0, 0));
    say("statmount", syscall(457, NULL, NULL, 0, 0));
    say("listmount", syscall(458, NULL, NULL, 0, 0));
    say("personality", syscall(SYS_personality, 0xffffffffUL));
    say("userfaultfd", syscall(SYS_userfaultfd, 0));
    say("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL));
    say("chmod", chmod(file, 0644));
    return 0;
}
"#;

const INSIDE: &str = "thread ok
fork ok
pipe2 ok
socketpair-stream ok
eventfd ok
timerfd ok
epoll ok
flock ok
fcntl-F_GETFL ok
ioctl-FIONREAD ok
open-creat-0644 ok
fallocate-0 ok
renameat2-noreplace ok
inotify ENOSYS
fallocate-keep-size EOPNOTSUPP
fallocate-punch-hole EOPNOTSUPP
renameat2-whiteout EPERM
socketpair-dgram EPERM
open-creat-0755 EPERM
creat-0700 EPERM
ioctl-FS_IOC_SETFLAGS ENOTTY
ioctl-FS_IOC_FSSETXATTR ENOTTY
ioctl-EXT4_IOC_SETVERSION ENOTTY
fcntl-F_SETLEASE EPERM
memfd_create ENOSYS
file_setattr ENOSYS
statmount ENOSYS
listmount ENOSYS
personality ENOSYS
userfaultfd ENOSYS
io_uring_setup EPERM
chmod EPERM
";

fn compile(w: &World, extra: &[&str], name: &str) -> PathBuf {
    let src = w.path().join("seccomp-check.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = w.folder("cbin").join(name);
    let status = std::process::Command::new("cc")
        .args(["-O1", "-pthread"])
        .args(extra)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("a C compiler (cc) is required by this test");
    assert!(
        status.success(),
        "cc {extra:?} failed (a static build needs libc.a: libc6-dev)"
    );
    exe
}

fn answers(out: &str) -> Vec<(&str, &str)> {
    out.lines().filter_map(|l| l.split_once(' ')).collect()
}

fn check(w: &World, exe: &Path) {
    let root = w.folder("root");
    let file = root.join("file.txt");
    std::fs::write(&file, "x\n").unwrap();

    // The control: outside the sandbox the refused calls work, so the
    // program can tell them apart.
    let host = std::process::Command::new(exe).arg(&file).output().unwrap();
    let host_out = text(&host.stdout);
    assert!(host.status.success(), "{host_out}{}", text(&host.stderr));
    let host_answers = answers(&host_out);
    for name in [
        "thread",
        "inotify",
        "fallocate-keep-size",
        "fallocate-punch-hole",
        "renameat2-whiteout",
        "socketpair-dgram",
        "open-creat-0755",
        "creat-0700",
        "memfd_create",
        "chmod",
    ] {
        assert!(
            host_answers.contains(&(name, "ok")),
            "control: {name} should work outside the sandbox:\n{host_out}"
        );
    }

    for who in [Who::Me, Who::Unprivileged] {
        let mut cmd = w.cmd(who, &root);
        cmd.args(["sandbox", "run", "--"]).arg(exe).arg(&file);
        let out = output_within(cmd, Duration::from_secs(30));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{who:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        assert_eq!(
            text(&out.stdout),
            INSIDE,
            "{who:?} (outside the sandbox:\n{host_out})"
        );
    }
}

#[test]
fn the_allow_list_holds_for_a_dynamic_c_program() {
    let w = World::new();
    let exe = compile(&w, &[], "dynamic");
    check(&w, &exe);
}

#[test]
fn the_allow_list_holds_for_a_static_c_program() {
    let w = World::new();
    let exe = compile(&w, &["-static"], "static");
    check(&w, &exe);
}

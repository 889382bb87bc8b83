//! `sandbox run`: ordinary programs work under the read-only tool policy
//! (Python with asyncio, sqlite3 and subprocess; a compiled C program), the
//! exit status and both output streams pass through, and what is outside
//! the policy is refused.

use std::path::Path;
use std::time::Duration;

use crate::support::sandbox::{output_within, text, Who, World};

const PYTHON: &str = "/usr/bin/python3";

const PY_SCRIPT: &str = r#"
import asyncio, os, sqlite3, subprocess, sys, tempfile

async def child():
    p = await asyncio.create_subprocess_exec(
        "/bin/echo", "from-asyncio-child", stdout=asyncio.subprocess.PIPE)
    out, _ = await p.communicate()
    return out.decode().strip()

async def gathered():
    async def tick(i):
        await asyncio.sleep(0.01)
        return i
    return sum(await asyncio.gather(*(tick(i) for i in range(10))))

print(asyncio.run(child()))
print("gather", asyncio.run(gathered()))
db = os.path.join(os.environ["TMPDIR"], "probe.db")
con = sqlite3.connect(db)
con.execute("create table t(x integer)")
con.executemany("insert into t values (?)", [(i,) for i in range(100)])
con.commit()
print("sqlite", con.execute("select sum(x) from t").fetchone()[0])
ro = sqlite3.connect("file:" + db + "?mode=ro", uri=True)
print("sqlite-ro", ro.execute("select count(*) from t").fetchone()[0])
print("subprocess", subprocess.run(["/bin/sh", "-c", "echo $((6*7))"],
      capture_output=True, text=True, check=True).stdout.strip())
with tempfile.TemporaryDirectory() as d:
    open(os.path.join(d, "f"), "w").write("x")
    print("tempfile", os.listdir(d))
print("root-file", open("data.txt").read().strip())
try:
    open("data.txt", "a")
    print("root-write ALLOWED")
except OSError as e:
    # EROFS from the read-only bind (EACCES from Landlock without one).
    print("root-write refused" if e.errno in (13, 30) else f"root-write {e}")
print("stderr works", file=sys.stderr)
sys.exit(7)
"#;

fn python_works(who: Who) {
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is required by this test (install python3)"
    );
    let w = World::new();
    let root = w.folder("root");
    std::fs::write(root.join("data.txt"), "inside the root\n").unwrap();
    let mut cmd = w.cmd(who, &root);
    cmd.args(["sandbox", "run", "--", PYTHON, "-c", PY_SCRIPT]);
    let out = output_within(cmd, Duration::from_secs(60));
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(7),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&out.stderr)
    );
    assert_eq!(
        stdout,
        "from-asyncio-child\ngather 45\nsqlite 4950\nsqlite-ro 100\nsubprocess 42\n\
         tempfile ['f']\nroot-file inside the root\nroot-write refused\n"
    );
    assert_eq!(text(&out.stderr), "stderr works\n");
}

#[test]
fn python_asyncio_sqlite_and_subprocess_work() {
    python_works(Who::Me);
}

#[test]
fn python_works_for_an_unprivileged_user() {
    python_works(Who::Unprivileged);
}

const C_PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
int main(int argc, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s/c-out.txt", getenv("TMPDIR"));
    FILE *f = fopen(path, "w");
    if (!f) { perror("fopen"); return 10; }
    fprintf(f, "%s\n", argv[1]);
    fclose(f);
    f = fopen(path, "r");
    char buf[64] = {0};
    fgets(buf, sizeof buf, f);
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) _exit(3);
    int st; waitpid(pid, &st, 0);
    /* An internet socket may be made (the network namespace is empty);
       reaching anything with it may not. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(443);
    a.sin_addr.s_addr = htonl(0xC0000201);
    int c = s < 0 ? -1 : connect(s, (struct sockaddr *)&a, sizeof a);
    printf("read back %s", buf);
    printf("child exit %d\n", WEXITSTATUS(st));
    printf("connect %s\n", c < 0 ? strerror(errno) : "ALLOWED");
    return 0;
}
"#;

fn compile_c(w: &World) -> std::path::PathBuf {
    let src = w.path().join("prog.c");
    std::fs::write(&src, C_PROGRAM).unwrap();
    let exe = w.folder("cbin").join("prog");
    let status = std::process::Command::new("cc")
        .arg("-O1")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("a C compiler (cc) is required by this test");
    assert!(status.success(), "cc failed");
    exe
}

#[test]
fn a_compiled_c_program_works() {
    let w = World::new();
    let exe = compile_c(&w);
    for who in [Who::Me, Who::Unprivileged] {
        let root = w.folder("croot");
        let mut cmd = w.cmd(who, &root);
        cmd.args(["sandbox", "run", "--"]).arg(&exe).arg("hello-c");
        let out = output_within(cmd, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout),
            "read back hello-c\nchild exit 3\nconnect Network is unreachable\n",
            "{who:?}"
        );
    }
}

#[test]
fn exit_codes_and_signals_pass_through() {
    let w = World::new();
    let root = w.folder("root");
    let run = |script: &str| {
        let mut cmd = w.cmd(Who::Me, &root);
        cmd.args(["sandbox", "run", "--", "/bin/sh", "-c", script]);
        output_within(cmd, Duration::from_secs(30))
    };
    assert_eq!(run("exit 0").status.code(), Some(0));
    assert_eq!(run("exit 1").status.code(), Some(1));
    assert_eq!(run("exit 42").status.code(), Some(42));
    // A signal death is reported the way a shell does: 128 + the signal.
    assert_eq!(run("kill -SEGV $$").status.code(), Some(139));
    assert_eq!(run("kill -KILL $$").status.code(), Some(137));
}

#[test]
fn the_environment_is_built_not_inherited() {
    let w = World::new();
    let root = w.folder("root");
    let mut cmd = w.cmd(Who::Me, &root);
    cmd.args(["sandbox", "run", "--", "/usr/bin/env"])
        .env("LD_PRELOAD", "libc.so.6")
        .env("PYTHONPATH", "/tmp/evil")
        .env("BASH_ENV", "/tmp/evil.sh")
        .env("REACHWEAVER_API_TOKEN", "secret-0123456789")
        .env("REACHWEAVER_MODE", "visible")
        .env("LC_ALL", "C")
        .env("SOME_OTHER_VARIABLE", "dropped");
    let out = output_within(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let env = text(&out.stdout);
    let names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('=').map(|(n, _)| n))
        .collect();
    for gone in [
        "LD_PRELOAD",
        "PYTHONPATH",
        "BASH_ENV",
        "REACHWEAVER_API_TOKEN",
        "SOME_OTHER_VARIABLE",
    ] {
        assert!(!names.contains(&gone), "{gone} leaked:\n{env}");
    }
    for kept in ["REACHWEAVER_MODE", "LC_ALL", "TMPDIR", "PATH"] {
        assert!(names.contains(&kept), "{kept} missing:\n{env}");
    }
    assert!(!env.contains("secret-0123456789"));
}

#[test]
fn reads_outside_the_root_and_the_network_are_refused() {
    let w = World::new();
    let root = w.folder("root");
    let outside = w.folder("outside");
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    let mut cmd = w.cmd(Who::Me, &root);
    cmd.args(["sandbox", "run", "--", PYTHON, "-c"])
        .arg(format!(
            "import socket\n\
         for f in [{:?}, '/etc/passwd', '/proc/1/cmdline']:\n\
         \x20   try: open(f).read(); print(f, 'READ')\n\
         \x20   except OSError as e: print(f, e.errno)\n\
         try: socket.create_connection(('127.0.0.1', 1), timeout=2); print('net CONNECTED')\n\
         except OSError as e: print('net', e.errno)\n",
            outside.join("secret.txt").display().to_string()
        ));
    let out = output_within(cmd, Duration::from_secs(30));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    // Not there at all in the run's minimal root (ENOENT), and Landlock
    // refuses the run's own /proc (EACCES).
    assert!(lines[0].ends_with(" 2"), "{stdout}");
    assert_eq!(lines[1], "/etc/passwd 2");
    assert_eq!(lines[2], "/proc/1/cmdline 13");
    // The socket is made; its connect is refused as the empty network
    // namespace would refuse it (ENETUNREACH), by the run's supervisor.
    assert_eq!(lines[3], "net 101");
}

#[test]
fn a_root_of_slash_is_refused() {
    let w = World::new();
    let mut cmd = w.cmd(Who::Me, w.path());
    cmd.args(["sandbox", "run", "--root", "/", "--", "/bin/true"]);
    let out = output_within(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--root /: refused: / would open every file"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn guarded_folders_are_refused_as_root_and_allow_read() {
    let w = World::new();
    for args in [
        &["--root", "/tmp"][..],
        &["--root", "/proc/self"],
        &["--root", "/etc"],
        &["--allow-read", "/dev"],
        &["--allow-read", "/run"],
        &["--allow-read", "/sys/kernel"],
    ] {
        let mut cmd = w.cmd(Who::Me, w.path());
        cmd.args(["sandbox", "run"])
            .args(args)
            .args(["--", "/bin/true"]);
        let out = output_within(cmd, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("{} {}: refused: ", args[0], args[1])),
            "{args:?}: {err}"
        );
    }
}

/// A run here reproduces a tool run, so it hides the same files: protected
/// names under the root (and `--protect` ones) are empty in the run, while
/// an ordinary file beside them reads in full.
#[test]
fn protected_files_are_hidden_as_in_a_tool_run() {
    let w = World::new();
    let root = w.folder("root");
    std::fs::write(root.join(".env"), "TOKEN=HIDDENMARKER1\n").unwrap();
    std::fs::create_dir_all(root.join(".aws")).unwrap();
    std::fs::write(root.join(".aws/credentials"), "HIDDENMARKER2\n").unwrap();
    std::fs::write(root.join("private.txt"), "HIDDENMARKER3\n").unwrap();
    std::fs::write(root.join("notes.txt"), "plain42\n").unwrap();
    // A masked file reads empty; inside a masked folder nothing is there.
    let read_all = "for f in .env .aws/credentials private.txt notes.txt; do \
                    if [ -e \"$f\" ]; then printf '%s:%s\\n' \"$f\" \"$(cat \"$f\")\"; \
                    else echo \"$f:absent\"; fi; done";
    let run = |extra: &[&str]| {
        let mut cmd = w.cmd(Who::Me, &root);
        cmd.args(["sandbox", "run"])
            .args(extra)
            .args(["--", "/bin/sh", "-c", read_all]);
        let out = output_within(cmd, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    // The positive control: outside any sandbox every file reads in full.
    assert!(std::fs::read_to_string(root.join(".env"))
        .unwrap()
        .contains("HIDDENMARKER1"));
    assert_eq!(
        run(&[]),
        ".env:\n.aws/credentials:absent\nprivate.txt:HIDDENMARKER3\nnotes.txt:plain42\n"
    );
    assert_eq!(
        run(&["--protect", "private.txt"]),
        ".env:\n.aws/credentials:absent\nprivate.txt:\nnotes.txt:plain42\n"
    );
}

#!/usr/bin/env bash
# Runs inside a guest booted by ci/kernels.sh (never on the host: it changes
# sysctls and the cgroup hierarchy of the machine it runs on).
#
# usage: guest.sh OUT SERVER BACKEND REPO
#
# For each shape (who runs the server, in which cgroup, with which
# sysctls) it runs `sandbox status` (text and --json), a piped MCP
# session with a read-only call and a draft call, a read-only run's
# truncate(2) of a file under the root, a call past its memory bound (on
# the shapes in MEMORY_SHAPES), and `sandbox probe --json`
# on the shapes listed in PROBE_SHAPES. It only collects: every command's
# output, exit code and wall time go to OUT/<shape>/; ci/kernels/report.py
# judges them on the host. OUT/done holds this script's own exit code.

set -euo pipefail

OUT=$1 SERVER=$2 BACKEND=$3 REPO=$4
PROBE_SHAPES=${PROBE_SHAPES:-"root-own user-delegated"}
# Where a call that passes its memory bound is run: shapes with the cgroup
# layer only (elsewhere its two 4 GiB processes would exhaust the guest).
MEMORY_SHAPES=${MEMORY_SHAPES:-"root-own user-delegated"}
CG=/sys/fs/cgroup
NOBODY=65534
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LANG=C.UTF-8

trap 'echo "$?" >"$OUT/done"' EXIT

log() { printf '[guest %s] %s\n' "$(date +%T)" "$*"; }
now() { date +%s.%N; }

# ---------------------------------------------------------------------------
# The machine as booted, before anything is changed.
{
    echo "kernel=$(uname -r)"
    echo "cmdline=$(cat /proc/cmdline)"
    echo "lsm=$(cat /sys/kernel/security/lsm 2>/dev/null || echo '?')"
    echo "cgroup_mount=$(stat -f -c %T "$CG")"
    echo "cgroup_controllers=$(cat "$CG/cgroup.controllers" 2>/dev/null || echo '?')"
    echo "cgroup_subtree_control_at_boot=$(cat "$CG/cgroup.subtree_control" 2>/dev/null || echo '?')"
    for s in user/max_user_namespaces kernel/unprivileged_userns_clone kernel/pid_max \
        kernel/apparmor_restrict_unprivileged_userns kernel/yama/ptrace_scope; do
        echo "sysctl.$s=$(cat "/proc/sys/$s" 2>/dev/null || echo absent)"
    done
    echo "root_mount=$(awk '$2 == "/" {print $3 " " $4}' /proc/mounts | tail -n 1)"
    echo "nproc=$(nproc)"
    echo "memory_kib=$(awk '/MemTotal/ {print $2}' /proc/meminfo)"
} >"$OUT/machine.txt"
log "machine: $(tr '\n' ' ' <"$OUT/machine.txt" | head -c 600)"

# A writable place of the guest's own: the root is the host's, read-only.
mkdir -p /mnt
mount -t tmpfs -o mode=0755,size=512m kernels-work /mnt
# A cgroup shared with another process, as a login session's is.
mkdir -p "$CG/kt-shared"
sleep infinity &
SHARER=$!
echo "$SHARER" >"$CG/kt-shared/cgroup.procs"

# new_cgroup KIND: prints a fresh cgroup for one server start.
#   own: root's, the server alone in it; delegated: owned by uid 65534 as
#   systemd's Delegate=yes leaves it; shared: the one above.
new_cgroup() {
    case "$1" in
        shared)
            echo "$CG/kt-shared"
            return
            ;;
    esac
    local d
    d=$(mktemp -d "$CG/kt-$1-XXXXXX")
    if [ "$1" = delegated ]; then
        chown "$NOBODY:$NOBODY" "$d" "$d/cgroup.procs" "$d/cgroup.subtree_control" "$d/cgroup.threads"
    fi
    echo "$d"
}

# in_context CGROUP UID CMD...: CMD moved into CGROUP first, then as UID,
# killed after LIMIT seconds (default 900) by a timeout outside the cgroup.
in_context() {
    local cg=$1 uid=$2
    shift 2
    local as=()
    if [ "$uid" != 0 ]; then
        as=(setpriv "--reuid=$uid" "--regid=$uid" --clear-groups
            env HOME=/nonexistent USER=nobody LOGNAME=nobody)
    fi
    # shellcheck disable=SC2016 # the inner shell expands them
    timeout -k 10 "${LIMIT:-900}" \
        bash -c 'echo "$$" >"$1/cgroup.procs" || exit 125; shift; exec "$@"' bash "$cg" "${as[@]}" "$@"
}

# The binaries and a workspace on a file system of the guest's own: on the
# host's 9p root every lookup makes a new inode, which no Landlock rule on a
# file survives (a real disk keeps its inodes).
mkdir -p /mnt/bin
cp "$SERVER" "$BACKEND" "$REPO/tests/fixtures/hog-backend" /mnt/bin/
SERVER=/mnt/bin/$(basename "$SERVER")
BACKEND=/mnt/bin/$(basename "$BACKEND")
HOG=/mnt/bin/hog-backend
chmod 0755 /mnt/bin /mnt/bin/*
TEMPLATE=/mnt/ws-template
cp -R "$REPO/examples/workspace" "$TEMPLATE"
# The database alone in its folder, so a draft's promise can be held
# without the mount layer too.
rm -f "$TEMPLATE"/data/* "$TEMPLATE"/data/.keep
"$BACKEND" --home="$TEMPLATE" init --format=json >/dev/null

make_workspace() { # make_workspace DIR UID
    local ws=$1 uid=$2
    rm -rf "$ws"
    cp -a "$TEMPLATE" "$ws"
    if [ "$uid" != 0 ]; then
        chown -R "$uid:$uid" "$ws"
    fi
}

# step DIR NAME CMD...: run CMD, keep stdout, stderr, exit code and time.
step() {
    local dir=$1 name=$2
    shift 2
    local t0 rc=0
    t0=$(now)
    "$@" >"$dir/$name.out" 2>"$dir/$name.err" </dev/null || rc=$?
    echo "$rc" >"$dir/$name.rc"
    # The servers' own folders at the hierarchy's root once this step is over.
    find "$CG" -mindepth 1 -maxdepth 1 -type d -name 'reachweaver-mcp.*' -printf '%f\n' | sort >"$dir/$name.cgroups"
    awk -v a="$t0" -v b="$(now)" -v n="$name" 'BEGIN { printf "%s\t%.1f\n", n, b - a }' >>"$dir/times.tsv"
    log "  $name: exit $rc ($(tail -n 1 "$dir/times.tsv" | cut -f2 | cut -d. -f1) s)"
}

session_requests() {
    printf '%s\n' \
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"kernels","version":"1"}}}' \
        '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"campaign_check","arguments":{"campaign":"campaigns/spring-launch.yaml"}}}' \
        '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"draft","arguments":{"campaign":"campaigns/spring-launch.yaml","channel":"mastodon","text":"A calm note about our spring release."}}}' \
        '{"jsonrpc":"2.0","id":4,"method":"tools/list"}'
}

# session CGROUP UID WS: the piped session, stdout is the answers.
session() {
    local cg=$1 uid=$2 ws=$3
    session_requests | in_context "$cg" "$uid" "$SERVER" \
        --backend="$BACKEND" --home="$ws" --db="$ws/data/reachweaver.db" mcp-serve --allow-drafts
}

# memory_session CGROUP UID WS: one call whose run passes its memory bound.
memory_session() {
    local cg=$1 uid=$2 ws=$3
    printf '%s\n' \
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"kernels","version":"1"}}}' \
        '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hog","arguments":{}}}' |
        in_context "$cg" "$uid" "$SERVER" --backend="$HOG" --home="$ws" mcp-serve --call-timeout 600
}

# serve_empty CGROUP UID WS: a server start with nothing to do.
serve_empty() {
    local cg=$1 uid=$2 ws=$3
    in_context "$cg" "$uid" "$SERVER" --backend="$BACKEND" --home="$ws" mcp-serve </dev/null
}

# cgroup_state CGROUP: its child cgroups, what it hands down, its processes.
cgroup_state() {
    echo "entries: $(cd "$1" && find . -mindepth 1 -type d -printf '%P ')"
    echo "subtree_control: $(cat "$1/cgroup.subtree_control")"
    echo "procs: $(tr '\n' ' ' <"$1/cgroup.procs")"
}

# until_true MAX CMD...: poll CMD every 0.1 s, at most MAX times; prints
# how many polls it took (MAX when it never held).
until_true() {
    local max=$1 n=0
    shift
    until "$@" || [ "$n" -ge "$max" ]; do
        sleep 0.1
        n=$((n + 1))
    done
    echo "$n"
}

# killed_start DIR CGROUP UID WS: a server started in CGROUP, killed with
# SIGKILL once its set-up is done; waits (bounded) for its keeper to hand
# the controllers back.
killed_start() {
    local dir=$1 cg=$2 uid=$3 ws=$4 leaf="$2/reachweaver-server" pid="" p pp n
    # Its stdin held open by a pipe nobody writes to, so it keeps serving.
    local fifo="/mnt/reuse-killed-$$.fifo"
    mkfifo "$fifo"
    in_context "$cg" "$uid" "$SERVER" --backend="$BACKEND" --home="$ws" mcp-serve \
        <"$fifo" >"$dir/reuse-killed.out" 2>"$dir/reuse-killed.err" &
    local job=$!
    exec 8>"$fifo"
    # Serving: its set-up is done, and no helper of its trial run (whose
    # parent may be outside the leaf) is still in the leaf beside it.
    n=$(until_true 900 grep -q '^reachweaver-mcp: serving' "$dir/reuse-killed.err")
    echo "set up after $n polls" >"$dir/reuse-killed.txt"
    # The server is the process in its leaf whose parent is not.
    for p in $(cat "$leaf/cgroup.procs" 2>/dev/null); do
        pp=$(awk '/^PPid:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
        grep -qx "$pp" "$leaf/cgroup.procs" || pid=$p
    done
    echo "server pid: ${pid:-none}" >>"$dir/reuse-killed.txt"
    # A failed kill is recorded (report.py fails on it), not fatal here.
    [ -z "$pid" ] || kill -9 "$pid" 2>>"$dir/reuse-killed.txt" || echo "kill failed" >>"$dir/reuse-killed.txt"
    # Closed before waiting: a server never set up then ends at end of input.
    exec 8>&-
    wait "$job" || echo "exit $?" >>"$dir/reuse-killed.txt"
    n=$(until_true 300 test -z "$(cat "$cg/cgroup.subtree_control")")
    echo "controllers handed back after $n polls" >>"$dir/reuse-killed.txt"
}

set_sysctl() { # set_sysctl NAME VALUE (NAME as under /proc/sys; absent ones are noted)
    if [ -e "/proc/sys/$1" ]; then
        echo "$2" >"/proc/sys/$1"
        log "  sysctl $1 = $(cat "/proc/sys/$1")"
    else
        log "  sysctl $1: absent on this kernel"
    fi
}

SAVED_MAX_USERNS=$(cat /proc/sys/user/max_user_namespaces)
SAVED_UNPRIV=$(cat /proc/sys/kernel/unprivileged_userns_clone 2>/dev/null || echo absent)

no_userns() { # no_userns on|off
    if [ "$1" = on ]; then
        set_sysctl user/max_user_namespaces 0
        set_sysctl kernel/unprivileged_userns_clone 0
    else
        set_sysctl user/max_user_namespaces "$SAVED_MAX_USERNS"
        [ "$SAVED_UNPRIV" = absent ] || set_sysctl kernel/unprivileged_userns_clone "$SAVED_UNPRIV"
    fi
}

# shape NAME UID CGROUP_KIND USERNS(on|off)
shape() {
    local name=$1 uid=$2 kind=$3 userns=$4
    local dir="$OUT/$name" ws="/mnt/ws-$name"
    mkdir -p "$dir"
    : >"$dir/times.tsv"
    printf 'uid=%s\ncgroup=%s\nuserns=%s\n' "$uid" "$kind" "$userns" >"$dir/shape.txt"
    log "shape $name (uid $uid, cgroup $kind, user namespaces $userns)"
    [ "$userns" = on ] || no_userns on
    make_workspace "$ws" "$uid"
    step "$dir" status-json in_context "$(new_cgroup "$kind")" "$uid" "$SERVER" sandbox status --json
    local scg
    scg=$(new_cgroup "$kind")
    step "$dir" session session "$scg" "$uid" "$ws"
    # Each run's cgroup is gone once its call is over (for a shared cgroup
    # the server's own folders at the root are listed by step).
    cgroup_state "$scg" >"$dir/session-cgroup.txt"
    # A read-only run's truncate(2) of a file under the root, by path:
    # before Landlock ABI 3 Landlock doesn't judge it (the mount layer's
    # read-only bind or seccomp must refuse it). The file is the run's
    # user's own, so only the sandbox stands in the way.
    printf 'untouched\n' >"$ws/truncate-victim.txt"
    [ "$uid" = 0 ] || chown "$uid:$uid" "$ws/truncate-victim.txt"
    step "$dir" truncate in_context "$(new_cgroup "$kind")" "$uid" "$SERVER" sandbox run \
        --root "$ws" --allow-read "$(dirname "$SERVER")" -- \
        "$SERVER" __probe-attempt truncate "$ws/truncate-victim.txt"
    cp "$ws/truncate-victim.txt" "$dir/truncate-victim.after"
    if [ "$kind" = delegated ]; then
        # Three server starts in one delegated cgroup: the first ends
        # cleanly, the second is killed with SIGKILL, the third must start
        # and leave the cgroup as the first found it.
        local again
        again=$(new_cgroup delegated)
        step "$dir" reuse-first serve_empty "$again" "$uid" "$ws"
        cgroup_state "$again" >"$dir/reuse-after-first.txt"
        killed_start "$dir" "$again" "$uid" "$ws"
        cgroup_state "$again" >"$dir/reuse-after-kill.txt"
        step "$dir" reuse-third serve_empty "$again" "$uid" "$ws"
        cgroup_state "$again" >"$dir/reuse-after-third.txt"
    fi
    case " $MEMORY_SHAPES " in
        *" $name "*)
            local mcg
            mcg=$(new_cgroup "$kind")
            step "$dir" memory memory_session "$mcg" "$uid" "$ws"
            cgroup_state "$mcg" >"$dir/memory-cgroup.txt"
            ;;
    esac
    case " $PROBE_SHAPES " in
        *" $name "*)
            LIMIT=1500 step "$dir" probe in_context "$(new_cgroup "$kind")" "$uid" "$SERVER" sandbox probe --json
            ;;
    esac
    [ "$userns" = on ] || no_userns off
}

# First with the hierarchy as booted (no controller handed down from the
# root), then with memory and pids handed down, as systemd does.
shape root-shared-bare 0 shared on
echo "+memory +pids" >"$CG/cgroup.subtree_control"
echo "cgroup_subtree_control_now=$(cat "$CG/cgroup.subtree_control")" >>"$OUT/machine.txt"
shape root-own 0 own on
shape root-shared 0 shared on
shape user-delegated "$NOBODY" delegated on
shape user-plain "$NOBODY" shared on
shape root-nouserns 0 own off
shape user-nouserns "$NOBODY" shared off

# What a cgroup limited as a run's is charged for the buffers behind pipes
# and unix sockets, which no process's RLIMIT_AS counts.
mkdir -p "$OUT/buffers"
: >"$OUT/buffers/times.tsv"
BUFCG=$(new_cgroup own)
echo $((4 << 30)) >"$BUFCG/memory.max"
echo 0 >"$BUFCG/memory.swap.max" 2>/dev/null || true
step "$OUT/buffers" measure in_context "$BUFCG" 0 python3 "$REPO/ci/kernels/sockbuf.py" "$BUFCG"
rmdir "$BUFCG" 2>/dev/null || true

# Root in a container: a private cgroup namespace rooted at a cgroup that
# holds another process, the cgroup file system mounted afresh in it. The
# server must refuse with a recipe (it never moves a process it did not
# start); the recipe, taken from its refusal and run as printed, must give
# the next start its cgroups.
in_container() { # in_container CGROUP SCRIPT
    in_context "$1" 0 unshare --cgroup --mount --propagation private \
        sh -c 'umount -l /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec sh -c "$1"' sh "$2"
}
CONT=$CG/kt-container
mkdir -p "$CONT" "$OUT/root-container"
sleep infinity &
CONT_SHARER=$!
echo "$CONT_SHARER" >"$CONT/cgroup.procs"
: >"$OUT/root-container/times.tsv"
step "$OUT/root-container" status-before in_container "$CONT" "exec $SERVER sandbox status --json"
python3 -c 'import json, sys
layers = json.load(open(sys.argv[1]))["layers"]
detail = next(la["detail"] for la in layers if la["name"] == "cgroup")
print(detail.split("before starting the server: ", 1)[1])' "$OUT/root-container/status-before.out" \
    >"$OUT/root-container/recipe.txt" 2>"$OUT/root-container/recipe.err" || true
# Traced (set -x), so a step of the recipe that fails is named in its log.
step "$OUT/root-container" status-after in_container "$CONT" \
    "for p in \$(cat /sys/fs/cgroup/cgroup.procs); do echo \"in the root cgroup: \$p \$(cat /proc/\$p/comm)\"; done >&2; set -x;
$(cat "$OUT/root-container/recipe.txt") && exec $SERVER sandbox status --json"
kill "$CONT_SHARER" 2>/dev/null || true

# The AppArmor profile the server prints (its ABI picked from this
# userspace's parser and this kernel's features), compiled, then loaded into
# the kernel (AppArmor is enabled in these kernels) and looked for among the
# kernel's profiles.
mkdir -p "$OUT/apparmor"
"$SERVER" sandbox apparmor-profile >"$OUT/apparmor/profile" 2>"$OUT/apparmor/profile.err" || true
step "$OUT/apparmor" parse apparmor_parser --skip-kernel-load --skip-cache -Q "$OUT/apparmor/profile"
apparmor_parser --version 2>&1 | head -n 1 >"$OUT/apparmor/parser-version" || true
mountpoint -q /sys/kernel/security || mount -t securityfs securityfs /sys/kernel/security || true
ls /sys/kernel/security/apparmor/features/namespaces/ >"$OUT/apparmor/features-namespaces" 2>&1 || true
step "$OUT/apparmor" load apparmor_parser -r --skip-cache "$OUT/apparmor/profile"
cat /sys/kernel/security/apparmor/profiles >"$OUT/apparmor/profiles" 2>&1 || true

# What the cgroup layer left behind in the hierarchy.
find "$CG" -mindepth 1 -maxdepth 3 -type d -name '*' | sed "s|^$CG/||" | sort >"$OUT/cgroups-left.txt"
kill "$SHARER" 2>/dev/null || true
log "done"

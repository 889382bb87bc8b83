#!/usr/bin/env bash
# The sandbox on the kernels owners run: boots Debian's own kernels under
# qemu with this machine's userspace (read-only) and runs the release
# binaries in every shape a server meets there.
#
# usage: bash ci/kernels.sh        (as root; docs/CI.md, "Kernel matrix")
#
#   1. installs what it needs from the package registries: qemu (Debian
#      12's 7.2, qemu-utils pinned to the same version), kmod and busybox
#      for the guest's initramfs, jq, setpriv, apparmor_parser; virtme-ng
#      1.42 in a venv under target/kernels/venv; the newest build of each
#      kernel series (KERNEL_SERIES, default "6.1 6.12": Debian 12's own
#      and Debian's 6.12 for Debian 12), downloaded into target/kernels/debs,
#      checked against the archive's SHA256 and unpacked with dpkg-deb -x
#      into target/kernels/x, never installed on this machine;
#   2. builds the release binaries (server and reference backend), or
#      takes them from KERNELS_BIN=DIR (ci/test.sh passes its debug build);
#   3. boots each kernel once (KVM when it works here, TCG otherwise: the
#      log says which) and runs ci/kernels/guest.sh inside, which collects
#      `sandbox status`, a piped MCP session (a read-only call and a draft)
#      and `sandbox probe` per shape into target/kernels/out/<kernel>/;
#      Before the guests, `sandbox status --json` runs on this machine's
#      own kernel, as root and as uid 65534 (the host's row of the table);
#   4. ci/kernels/report.py judges them against the expectations it
#      states, writes target/kernels/results.json and prints a table;
#      ci/kernels/table.py writes docs/KERNELS.md from it (ci/test.sh
#      compares the two).
# The last line is "N passed, M failed"; the exit code is non-zero if any
# check failed. KERNEL_ACCEL=tcg|kvm skips the KVM trial.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WORK="$ROOT/target/kernels"
VENV="$WORK/venv"
VIRTME_NG_VERSION=1.42
KERNEL_SERIES=${KERNEL_SERIES:-"6.1 6.12"}
GUEST_MEMORY=${GUEST_MEMORY:-6G}
GUEST_CPUS=${GUEST_CPUS:-2}
GUEST_TIMEOUT=${GUEST_TIMEOUT:-2400}
START_ALL=$(date +%s)
VM_PID=""

say() { printf '\n==> %s\n' "$*"; }
die() {
    echo "kernels: FAIL: $*" >&2
    echo
    echo "0 passed, 1 failed"
    exit 1
}

# shellcheck disable=SC2317 # called from the traps below
stop_vm() {
    if [ -n "$VM_PID" ] && kill -0 "$VM_PID" 2>/dev/null; then
        kill "$VM_PID" 2>/dev/null || true
        wait "$VM_PID" 2>/dev/null || true
    fi
    VM_PID=""
}
trap stop_vm EXIT
trap 'stop_vm; exit 130' INT
trap 'stop_vm; exit 143' TERM

[ "$(id -u)" = 0 ] || die "needs root (it installs packages, and the guests run as root)"

# ---------------------------------------------------------------------------
say "1. install"
APT_UPDATED=""
apt_update_once() {
    if [ -z "$APT_UPDATED" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        APT_UPDATED=1
    fi
}
apt_install() {
    apt_update_once
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

if ! command -v qemu-system-x86_64 >/dev/null; then
    apt_update_once
    qemu_version=$(apt-cache policy qemu-system-x86 | awk '/Candidate:/ {print $2}')
    if [ -z "$qemu_version" ] || [ "$qemu_version" = "(none)" ]; then
        die "no qemu-system-x86 in the package lists"
    fi
    # qemu-system-x86 wants qemu-system-common of its own version, which a
    # newer qemu-utils (a backport) breaks: that one is pinned to match.
    qemu_pkgs=("qemu-system-x86=$qemu_version")
    utils_installed=$(dpkg-query -W -f '${Status} ${Version}' qemu-utils 2>/dev/null || true)
    case "$utils_installed" in
        "install ok installed $qemu_version") ;;
        "install ok installed "*) qemu_pkgs+=("qemu-utils=$qemu_version") ;;
    esac
    echo "installing ${qemu_pkgs[*]}"
    apt_install --allow-downgrades "${qemu_pkgs[@]}"
fi
need=()
command -v depmod >/dev/null || need+=(kmod)
command -v busybox >/dev/null || need+=(busybox-static)
command -v jq >/dev/null || need+=(jq)
command -v setpriv >/dev/null || need+=(util-linux)
command -v apparmor_parser >/dev/null || [ -x /usr/sbin/apparmor_parser ] || need+=(apparmor)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]}"
    apt_install "${need[@]}"
fi
echo "qemu: $(qemu-system-x86_64 --version | head -n 1)"
for p in qemu-system-x86 qemu-utils kmod busybox-static apparmor; do
    printf '  %-16s %s\n' "$p" "$(dpkg-query -W -f '${Version}' "$p" 2>/dev/null || echo '-')"
done

if [ "$("$VENV/bin/vng" --version 2>/dev/null)" != "virtme-ng $VIRTME_NG_VERSION" ]; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "virtme-ng==$VIRTME_NG_VERSION"
fi
echo "$("$VENV/bin/vng" --version) in $VENV"

# The newest build of a series the archive offers: PACKAGE VERSION.
newest_kernel() {
    local pattern
    case "$1" in
        6.1) pattern='^linux-image-6\.1\.0-[0-9]+-amd64$' ;;
        6.12) pattern='^linux-image-6\.12\.[0-9]+\+deb12-amd64$' ;;
        *) die "unknown kernel series $1 (known: 6.1, 6.12)" ;;
    esac
    local pkg
    pkg=$(apt-cache search --names-only "$pattern" | cut -d' ' -f1 | sort -V | tail -n 1)
    [ -n "$pkg" ] || die "the package lists offer no kernel of series $1"
    echo "$pkg $(apt-cache policy "$pkg" | awk '/Candidate:/ {print $2}')"
}

apt_update_once
mkdir -p "$WORK/debs" "$WORK/x"
KERNELS=()
keep_debs=() keep_dirs=()
for series in $KERNEL_SERIES; do
    read -r pkg version < <(newest_kernel "$series")
    deb_name="${pkg}_${version//:/%3a}_amd64.deb"
    want_sha=$(apt-cache show "$pkg=$version" | awk '/^SHA256:/ {print $2; exit}')
    [ -n "$want_sha" ] || die "no SHA256 for $pkg $version in the package lists"
    if [ ! -f "$WORK/debs/$deb_name" ] || [ "$(sha256sum "$WORK/debs/$deb_name" | cut -d' ' -f1)" != "$want_sha" ]; then
        rm -f "$WORK/debs/$deb_name"
        # apt's download sandbox user cannot write under target/: fetch into a folder it can.
        dl=$(mktemp -d)
        chmod 0755 "$dl"
        (cd "$dl" && chown _apt "$dl" 2>/dev/null; apt-get download -qq "$pkg=$version")
        mv "$dl/$deb_name" "$WORK/debs/$deb_name"
        rm -rf "$dl"
    fi
    got_sha=$(sha256sum "$WORK/debs/$deb_name" | cut -d' ' -f1)
    [ "$got_sha" = "$want_sha" ] || die "$deb_name: SHA256 $got_sha, the archive says $want_sha"
    dir="$WORK/x/${pkg}_$version"
    if [ ! -f "$dir/.unpacked" ]; then
        rm -rf "$dir"
        mkdir -p "$dir"
        dpkg-deb -x "$WORK/debs/$deb_name" "$dir"
        touch "$dir/.unpacked"
    fi
    kimg=$(find "$dir/boot" -name 'vmlinuz-*' | head -n 1)
    [ -n "$kimg" ] || die "$deb_name holds no vmlinuz"
    echo "kernel $series: $pkg $version sha256 $got_sha"
    KERNELS+=("$series|$pkg|$version|$got_sha|$kimg")
    keep_debs+=("$deb_name")
    keep_dirs+=("${pkg}_$version")
done
# Debian keeps only the current build of a series: older ones go from the cache.
for f in "$WORK"/debs/*.deb; do
    [ -e "$f" ] || continue
    case " ${keep_debs[*]} " in *" $(basename "$f") "*) ;; *) rm -f "$f" ;; esac
done
for d in "$WORK"/x/*/; do
    [ -e "$d" ] || continue
    case " ${keep_dirs[*]} " in *" $(basename "$d") "*) ;; *) rm -rf "$d" ;; esac
done

# ---------------------------------------------------------------------------
# KERNELS_BIN=DIR runs the server and reference backend already built in
# DIR (ci/test.sh passes its own debug build) instead of a release build.
if [ -n "${KERNELS_BIN:-}" ]; then
    say "2. binaries from $KERNELS_BIN"
    SERVER="$KERNELS_BIN/reachweaver-mcp"
    BACKEND="$KERNELS_BIN/reachweaver-reference"
    [ -x "$SERVER" ] && [ -x "$BACKEND" ] || die "KERNELS_BIN=$KERNELS_BIN holds no reachweaver-mcp and reachweaver-reference"
else
    say "2. release build"
    cargo build --release --quiet
    cargo build --release --quiet -p reachweaver-reference
    SERVER="$ROOT/target/release/reachweaver-mcp"
    BACKEND="$ROOT/target/release/reachweaver-reference"
fi
"$SERVER" --version

# ---------------------------------------------------------------------------
say "3. boot each kernel"
# KVM only when a guest really runs under it (a nested /dev/kvm may open
# and still fail at the first instruction it cannot emulate).
kvm_works() {
    local kimg=$1 log pid i
    [ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
    log=$(mktemp)
    qemu-system-x86_64 -accel kvm -cpu host -m 256 -nodefaults -display none -no-reboot \
        -serial "file:$log" -kernel "$kimg" -append "console=ttyS0 panic=-1" >>"$log" 2>&1 &
    pid=$!
    for i in $(seq 1 30); do
        if grep -q 'Kernel panic' "$log"; then break; fi
        if grep -qE 'emulation failure|KVM internal error|entry failed' "$log" || ! kill -0 "$pid" 2>/dev/null; then
            i=fail
            break
        fi
        sleep 1
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -f "$log"
    [ "$i" != fail ] && [ "$i" != 30 ]
}
first_kimg=${KERNELS[0]##*|}
case "${KERNEL_ACCEL:-auto}" in
    kvm) ACCEL=kvm ;;
    tcg) ACCEL=tcg ;;
    *) if kvm_works "$first_kimg"; then ACCEL=kvm; else ACCEL=tcg; fi ;;
esac
accel_args=()
if [ "$ACCEL" = kvm ]; then
    echo "accelerator: KVM (a trial guest ran under it)"
else
    echo "accelerator: TCG (no usable KVM here: /dev/kvm $( [ -e /dev/kvm ] && echo 'is there but a trial guest failed under it' || echo 'is missing'))"
    accel_args=(--disable-kvm)
fi

# Only this run's guests are judged.
rm -rf "$WORK/out" "$WORK/results.json"

# The host kernel natively, as root and as uid 65534 (from a copy of the
# server that user can reach), for the host's own row of the table.
HOST_OUT="$WORK/out/host"
mkdir -p "$HOST_OUT"
uname -r >"$HOST_OUT/kernel"
host_bin=$(mktemp -d)
chmod 0755 "$host_bin"
cp "$SERVER" "$host_bin/"
chmod 0755 "$host_bin/$(basename "$SERVER")"
host_status() { # host_status NAME [setpriv args...]
    local name=$1 rc=0
    shift
    (cd / && "$@" "$host_bin/$(basename "$SERVER")" sandbox status --json) \
        >"$HOST_OUT/$name.json" 2>"$HOST_OUT/$name.err" </dev/null || rc=$?
    echo "$rc" >"$HOST_OUT/$name.rc"
    echo "host $(cat "$HOST_OUT/kernel") as $name: sandbox status --json exit $rc"
}
host_status root env
host_status user setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent
rm -rf "$host_bin"
for entry in "${KERNELS[@]}"; do
    IFS='|' read -r series pkg version sha kimg <<<"$entry"
    out="$WORK/out/$series"
    mkdir -p "$out"
    printf '{"series": "%s", "package": "%s", "version": "%s", "sha256": "%s", "accel": "%s", "launched": %s}\n' \
        "$series" "$pkg" "$version" "$sha" "$ACCEL" "$(date +%s.%N)" >"$out/kernel.json"
    # A guest that dies before its script starts (a kernel oops while
    # booting under TCG's emulation was seen once) is booted once more; its
    # console is kept and the retry is in the results. A guest that got as
    # far as its script is never booted again.
    for boot in 1 2; do
        echo "booting $pkg $version ($ACCEL, ${GUEST_CPUS} CPUs, $GUEST_MEMORY)"
        t0=$(date +%s)
        PATH="$VENV/bin:$PATH" timeout -k 20 "$GUEST_TIMEOUT" "$VENV/bin/vng" --run "$kimg" "${accel_args[@]}" \
            --verbose --memory "$GUEST_MEMORY" --cpus "$GUEST_CPUS" --rwdir "$out" \
            --exec "$(printf '%q ' bash "$ROOT/ci/kernels/guest.sh" "$out" "$SERVER" "$BACKEND" "$ROOT")" \
            </dev/null >"$out/console.log" 2>&1 &
        VM_PID=$!
        rc=0
        wait "$VM_PID" || rc=$?
        VM_PID=""
        echo "guest of $series ended (vng exit $rc) after $(($(date +%s) - t0)) s; console: $out/console.log"
        grep -E '^\[guest ' "$out/console.log" | sed 's/^/    /' || true
        [ "$boot" = 1 ] && [ ! -e "$out/machine.txt" ] || break
        mv "$out/console.log" "$out/console-boot1.log"
        why=$(grep -m 1 -E 'Oops|Kernel panic|BUG:' "$out/console-boot1.log" || echo "no oops in its console")
        echo "$why" >"$out/boot-retried.txt"
        echo "guest of $series died before its script started ($why): booting it once more"
    done
done

# ---------------------------------------------------------------------------
say "4. results"
# It prints the total wall time and, last, "N passed, M failed".
exec python3 "$ROOT/ci/kernels/report.py" "$WORK" "$START_ALL"

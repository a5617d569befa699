#!/bin/bash
#
# vm-run.sh: run a shell script inside a throw-away qemu VM that has a real Soft-RoCE
# (rdma_rxe) device, so hoprelay's verbs code can be tested on a machine with no RDMA
# card and no RDMA in its kernel.
#
#   tests/rxe/vm-run.sh [--timeout SECONDS] [--cache DIR] [--share DIR] [--env NAME=VALUE]...
#                       -- GUEST_SCRIPT [ARGS...]
#
# How (details in README.md next to this file):
#   * The guest kernel is Debian 12's current linux-image-<abi>-amd64, fetched with
#     `apt-get download` and unpacked with `dpkg-deb -x` into the cache dir: nothing is
#     installed on the host. A tiny busybox initramfs is built next to it.
#   * qemu runs it under TCG (software emulation: KVM guests hang on this machine), with
#     the host's / shared read-only over 9p. The guest chroots into it, so the guest
#     script runs the host's binaries and libraries (build/, perftest, rdma-core...).
#   * In the guest: tmpfs /tmp, /var/tmp, /run, /dev/shm; a veth pair with 192.0.2.1 and
#     rxe0 on top; /dev/infiniband; `ulimit -l unlimited`. Env for the script: RXE_DEV,
#     RXE_IP, RXE_NETDEV, RXE_GID_INDEX, SHARE.
#   * --share DIR is mounted read-write in the guest at the same path, exported as SHARE.
#   * The guest script gets no host environment except HOPRELAY_*, RXE_* and --env vars.
#
# Exit status: the guest script's own status; 124 if the VM ran out of time; 125 if the
# harness or the VM failed (missing tools, kernel download, boot or setup failure); 2 for
# usage errors; 128+N if vm-run.sh itself was killed by signal N.
set -euo pipefail

readonly PROG=vm-run
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
readonly HERE

# Tunables that are not part of the documented interface, for odd machines.
VM_MEM=${RXE_VM_MEM:-2G}
VM_SMP=${RXE_VM_SMP:-2}
KILL_GRACE=10 # seconds between qemu's SIGTERM and SIGKILL on timeout

msg() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
    msg "error: $*"
    exit 125
}
usage() {
    cat <<EOF
usage: $0 [--timeout SECONDS] [--cache DIR] [--share DIR] [--env NAME=VALUE]...
          -- GUEST_SCRIPT [ARGS...]

Runs GUEST_SCRIPT (a host path) as root inside a qemu VM with a Soft-RoCE device,
chrooted into the host's root filesystem (read-only).
  --timeout SECONDS  wall-clock limit for the VM, boot included (default 300)
  --cache DIR        where the Debian kernel and the initramfs are kept between runs
                     (default \$HOPRELAY_RXE_CACHE, else \$XDG_CACHE_HOME/hoprelay-rxe,
                     else /var/cache/hoprelay-rxe as root, else ~/.cache/hoprelay-rxe)
  --share DIR        host dir mounted read-write in the guest at the same path and
                     exported as \$SHARE (default: a fresh temporary dir, removed if
                     the script leaves it empty)
  --env NAME=VALUE   set a variable for the guest script (repeatable); host variables
                     named HOPRELAY_* and RXE_* are passed on automatically
Guest env: RXE_DEV=rxe0 RXE_IP=192.0.2.1 RXE_NETDEV RXE_GID_INDEX SHARE
Exit: the script's status, 124 timeout, 125 harness/VM failure, 2 usage.
EOF
}
usage_error() {
    msg "$*"
    msg "usage: $0 [--timeout S] [--cache DIR] [--share DIR] [--env NAME=VALUE]... -- GUEST_SCRIPT [ARGS...] (see --help)"
    exit 2
}

# --- arguments ------------------------------------------------------------------------
timeout_s=300
cache=
share=
guest_env=()
while (($#)); do
    case $1 in
        --timeout) (($# >= 2)) || usage_error "--timeout needs a value"; timeout_s=$2; shift 2 ;;
        --timeout=*) timeout_s=${1#*=}; shift ;;
        --cache) (($# >= 2)) || usage_error "--cache needs a value"; cache=$2; shift 2 ;;
        --cache=*) cache=${1#*=}; shift ;;
        --share) (($# >= 2)) || usage_error "--share needs a value"; share=$2; shift 2 ;;
        --share=*) share=${1#*=}; shift ;;
        --env) (($# >= 2)) || usage_error "--env needs NAME=VALUE"; guest_env+=("$2"); shift 2 ;;
        --env=*) guest_env+=("${1#*=}"); shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; break ;;
        -*) usage_error "unknown option: $1" ;;
        *) break ;; # tolerate a missing --
    esac
done
(($# >= 1)) || usage_error "missing GUEST_SCRIPT"
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || usage_error "--timeout must be a positive integer, got '$timeout_s'"
guest_script=$1
shift
guest_args=("$@")
[[ -f $guest_script && -r $guest_script ]] || die "guest script '$guest_script' is not a readable file"
guest_script=$(realpath -e -- "$guest_script")
# The guest does not inherit the host's environment (it starts from a fresh kernel);
# forward HOPRELAY_* and RXE_* variables automatically, plus any --env NAME=VALUE.
while read -r name; do
    if [[ $name == HOPRELAY_* || $name == RXE_* ]]; then guest_env=("$name=${!name}" "${guest_env[@]}"); fi
done < <(compgen -e)
for kv in "${guest_env[@]}"; do
    [[ $kv =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || usage_error "--env wants NAME=VALUE, got '$kv'"
done

if [[ -z $cache ]]; then
    if [[ -n ${HOPRELAY_RXE_CACHE:-} ]]; then
        cache=$HOPRELAY_RXE_CACHE
    elif [[ -n ${XDG_CACHE_HOME:-} ]]; then
        cache=$XDG_CACHE_HOME/hoprelay-rxe
    elif [[ $(id -u) -eq 0 ]]; then
        cache=/var/cache/hoprelay-rxe
    else
        cache=${HOME:?}/.cache/hoprelay-rxe
    fi
fi

# --- host prerequisites ---------------------------------------------------------------
# The VM runs the host's own userspace, so the RDMA tools must be installed on the host
# even though the host kernel cannot use them.
need() { # need COMMAND DEBIAN-PACKAGE
    command -v "$1" >/dev/null 2>&1 ||
        die "'$1' not found; install Debian package '$2' (scripts/install-deps.sh does it)"
}
need qemu-system-x86_64 qemu-system-x86
need apt-get apt
need apt-cache apt
need dpkg-deb dpkg
need depmod kmod
need modprobe kmod
need ip iproute2
need rdma iproute2
need ibv_devices ibverbs-utils
need timeout coreutils
need flock util-linux
need realpath coreutils
need sha256sum coreutils
[[ -e /etc/libibverbs.d/rxe.driver ]] ||
    die "the rxe verbs provider is missing; install Debian package 'ibverbs-providers'"
# The initramfs needs a *static* busybox: it runs before any library is reachable.
busybox=$(command -v busybox || true)
[[ -n $busybox ]] || die "'busybox' not found; install Debian package 'busybox-static'"
busybox=$(realpath -e "$busybox")
if LC_ALL=C ldd "$busybox" >/dev/null 2>&1; then
    die "$busybox is dynamically linked; install Debian package 'busybox-static'"
fi
for f in initramfs-init.sh guest-init.sh; do
    [[ -r $HERE/$f ]] || die "$HERE/$f is missing (it belongs next to vm-run.sh)"
done

# --- guest kernel and initramfs (cached: guest-kernel.sh) -----------------------------
# shellcheck source=guest-kernel.sh
source "$HERE/guest-kernel.sh"
guest_kernel "$cache"
# Only what it takes to mount the host's root over 9p.
guest_initramfs "$HERE/initramfs-init.sh" virtio_pci 9pnet_virtio 9p
# Cache ready: let other runs prepare theirs while this VM runs.
guest_cache_done

# --- per-run control dir and share ----------------------------------------------------
# The control dir is private to this run (its own 9p share, mounted at /run/vm-run in
# the guest): config in, exit status out. The user's share stays untouched by us.
ctl=$(mktemp -d "${TMPDIR:-/tmp}/vm-run-ctl.XXXXXX")
made_share=
# shellcheck disable=SC2317  # only ever invoked by the EXIT trap
cleanup() {
    rm -rf "$ctl"
    # A default (temporary) share is removed if the script left nothing in it,
    # otherwise kept and reported so its logs can be read.
    if [[ -n $made_share ]]; then
        rmdir "$share" 2>/dev/null || msg "guest output kept in $share"
    fi
}
trap cleanup EXIT
if [[ -z $share ]]; then
    share=$(mktemp -d "${TMPDIR:-/tmp}/vm-run-share.XXXXXX")
    made_share=1
fi
[[ -d $share ]] || die "share dir '$share' does not exist"
share=$(realpath -e "$share")

cp "$HERE/guest-init.sh" "$ctl/guest-init.sh"
cp -p "$guest_script" "$ctl/script"
{
    printf 'VM_KVER=%q\n' "$kver"
    printf 'VM_SHARE=%q\n' "$share"
    printf 'VM_PWD=%q\n' "$PWD"
    printf 'VM_SCRIPT=%q\n' "$guest_script"
    printf 'VM_ARGS=('
    ((${#guest_args[@]} == 0)) || printf ' %q' "${guest_args[@]}"
    printf ' )\n'
    printf 'VM_ENV=('
    ((${#guest_env[@]} == 0)) || printf ' %q' "${guest_env[@]}"
    printf ' )\n'
} >"$ctl/config"

# qemu option values use ',' as separator; a literal comma in a path must be doubled.
qpath() { printf '%s' "${1//,/,,}"; }
virtfs() { # virtfs TAG PATH [ro]
    local o
    o="local,path=$(qpath "$2"),mount_tag=$1,security_model=none,multidevs=remap"
    [[ ${3:-} != ro ]] || o+=",readonly=on"
    printf '%s' "$o"
}

# shellcheck disable=SC2054  # commas inside qemu option values are intended
qemu=(
    qemu-system-x86_64
    -nodefaults -no-user-config -display none
    # KVM exists here but a KVM guest hangs at boot (no working nested virtualisation).
    -accel 'tcg,thread=multi'
    # "max" = every CPU feature TCG can emulate, so host binaries built for this CPU
    # (SSE4/AVX2 code paths, -march=native) still run in the guest.
    -cpu max
    -smp "$VM_SMP" -m "$VM_MEM"
    # No network to the outside: rxe runs over a veth pair inside the guest.
    -nic none
    # poweroff/panic must end qemu, never restart the guest.
    -no-reboot
    -kernel "$vmlinuz" -initrd "$initrd"
    -append "console=ttyS0 quiet loglevel=3 panic=-1"
    # Serial console on our stdout. signal=off: a ^C reaches this script, not the guest.
    -chardev stdio,id=console,signal=off -serial chardev:console
    -virtfs "$(virtfs hostroot / ro)"
    -virtfs "$(virtfs kmod "$kmods" ro)"
    -virtfs "$(virtfs vmctl "$ctl")"
    -virtfs "$(virtfs vmshare "$share")"
)

# --- run ------------------------------------------------------------------------------
# timeout(1) puts qemu in its own process group, so a terminal ^C would not reach it:
# run it in the background and forward INT/TERM/HUP ourselves (timeout passes them on
# to qemu). stdin is /dev/null so qemu never touches the terminal's settings.
start=$SECONDS
timeout --kill-after="$KILL_GRACE" "$timeout_s" "${qemu[@]}" </dev/null &
qpid=$!
caught=
for sig in INT TERM HUP; do
    # shellcheck disable=SC2064  # expand $sig now, on purpose
    trap "caught=$sig; kill -TERM $qpid 2>/dev/null || true" "$sig"
done
qrc=0
wait "$qpid" || qrc=$?
# A trapped signal interrupts `wait`; keep waiting until qemu is really gone.
while kill -0 "$qpid" 2>/dev/null; do
    qrc=0
    wait "$qpid" || qrc=$?
done
trap - INT TERM HUP
elapsed=$((SECONDS - start))

if [[ -n $caught ]]; then
    msg "interrupted by SIG$caught"
    case $caught in INT) exit 130 ;; TERM) exit 143 ;; HUP) exit 129 ;; esac
fi
if [[ -s $ctl/setup-error ]]; then
    msg "error: guest setup failed: $(<"$ctl/setup-error")"
    exit 125
fi
if [[ -s $ctl/exit-code ]]; then
    rc=$(<"$ctl/exit-code")
    [[ $rc =~ ^[0-9]+$ ]] || die "guest reported a bad exit code '$rc'"
    if ((qrc == 124 || qrc == 137)); then
        msg "warning: guest script finished (status $rc) but the VM did not power off within ${timeout_s}s"
    fi
    msg "guest script exited with status $rc after ${elapsed}s"
    exit "$rc"
fi
if ((qrc == 124 || qrc == 137)); then
    msg "timed out after ${timeout_s}s (guest script did not finish)"
    exit 124
fi
die "the VM stopped (qemu status $qrc) without reporting the guest script's exit status; see the console output above"

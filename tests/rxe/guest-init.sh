#!/bin/bash
#
# Second stage of the Soft-RoCE VM (see vm-run.sh). Runs inside the guest, chrooted
# into the host's root filesystem (read-only 9p), with the host's own bash and tools.
# It finishes the guest setup (scratch filesystems, kernel modules, veth + rxe0), then
# runs the user's guest script and writes its exit status to the control directory,
# where vm-run.sh on the host picks it up after power-off.
#
# vm-run.sh copies this file into the control directory; it is not run from the repo.
set -Eeuo pipefail

CTL=/run/vm-run
# shellcheck source=/dev/null  # written by vm-run.sh: VM_KVER VM_SHARE VM_PWD VM_SCRIPT VM_ARGS
source "$CTL/config"

RXE_DEV=rxe0
RXE_NETDEV=rxe-veth0  # the veth end that carries the address and the rxe device
RXE_PEER=rxe-veth1    # the other end only exists so that the pair has carrier
RXE_IP=192.0.2.1      # TEST-NET-1: the VM has no NIC, so nothing can leave it anyway
KMOD_ROOT=/run/kmod   # modprobe -d root for the guest kernel's modules

# Any failing setup command lands here: record why (the host turns it into exit 125 with
# this message) and return, so the initramfs powers the VM off instead of hanging.
setup_failed() {
    local msg="setup failed at line $1: $2"
    echo "vm-run(guest): $msg" >&2
    # The console only shows kernel messages up to KERN_CRIT (loglevel=3); the cause is
    # often a KERN_ERR line, so show the tail of the kernel log.
    dmesg 2>/dev/null | tail -n 15 | sed 's/^/vm-run(guest): dmesg: /' >&2 || true
    printf '%s\n' "$msg" >"$CTL/setup-error" || true
    exit 1
}
trap 'setup_failed "$LINENO" "$BASH_COMMAND"' ERR

# The serial console would otherwise turn every \n into \r\n on the host's stdout.
stty -F /dev/console -onlcr 2>/dev/null || true

# --- scratch filesystems ------------------------------------------------------------
# Everything from the host is read-only; give the guest the usual writable places.
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /var/tmp
mkdir -p /dev/shm /dev/pts
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mkdir -p /tmp/home
export HOME=/tmp/home

# --- the guest kernel's modules -----------------------------------------------------
# The host root holds modules for the *host* kernel, if any (this host has no
# /lib/modules at all, and the read-only root cannot get one). The guest kernel's tree,
# extracted from Debian's linux-image .deb by vm-run.sh, arrives as its own 9p share,
# mounted below /run/kmod; `modprobe -d /run/kmod` finds it. MODPROBE_OPTIONS (read by
# kmod's modprobe) makes that the default for plain `modprobe` in the guest script too.
# The kernel's own request_module() calls run /sbin/modprobe in the initramfs, where
# initramfs-init.sh put a wrapper that forwards them here with the same -d.
mkdir -p "$KMOD_ROOT/lib/modules/$VM_KVER"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro,cache=loose kmod "$KMOD_ROOT/lib/modules/$VM_KVER"
export MODPROBE_OPTIONS="-d $KMOD_ROOT"
# crc32_generic must be loaded by hand before rdma_rxe: rxe asks the crypto API for
# "crc32", and without it `rdma link add` fails with "No such file or directory".
modprobe -a crc32_generic rdma_rxe ib_uverbs rdma_ucm veth

# --- network + Soft-RoCE device -----------------------------------------------------
# One rxe device on one address for every process: two rxe devices on two local IPs do
# not talk (the packets go through lo, which rxe ignores), and rxe cannot live in other
# network namespaces on this kernel. Processes are told apart by port.
ip link set lo up
ip link add "$RXE_NETDEV" type veth peer name "$RXE_PEER"
# No IPv6 on the pair: keeps the GID table down to the MAC-derived default GID plus the
# IPv4 ones, and avoids IPv6 DAD delaying the link.
sysctl -qw "net.ipv6.conf.$RXE_NETDEV.disable_ipv6=1" "net.ipv6.conf.$RXE_PEER.disable_ipv6=1" 2>/dev/null || true
ip addr add "$RXE_IP/24" dev "$RXE_NETDEV"
ip link set "$RXE_NETDEV" up
ip link set "$RXE_PEER" up
rdma link add "$RXE_DEV" type rxe netdev "$RXE_NETDEV"

# Wait (bounded) for the port to become ACTIVE and for the RoCE v2 GID of RXE_IP to show
# up; its index is what verbs code must pass as sgid_index when it does not use rdma_cm.
port=/sys/class/infiniband/$RXE_DEV/ports/1
want_gid=0000:0000:0000:0000:0000:ffff:$(printf '%02x%02x:%02x%02x' ${RXE_IP//./ })
RXE_GID_INDEX=
for _ in $(seq 100); do
    if grep -q ACTIVE "$port/state" 2>/dev/null; then
        for g in "$port"/gids/*; do
            i=${g##*/}
            if [[ $(<"$g") == "$want_gid" ]] &&
                [[ $(<"$port/gid_attrs/types/$i") == "RoCE v2" ]] 2>/dev/null; then
                RXE_GID_INDEX=$i
                break
            fi
        done
    fi
    [[ -n $RXE_GID_INDEX ]] && break
    sleep 0.1
done
[[ -n $RXE_GID_INDEX ]] || setup_failed "$LINENO" "no ACTIVE port / RoCE v2 GID for $RXE_IP on $RXE_DEV"
[[ -c /dev/infiniband/uverbs0 ]] || setup_failed "$LINENO" "/dev/infiniband/uverbs0 missing"
grep -qw "$RXE_DEV" <<<"$(ibv_devices)" || setup_failed "$LINENO" "ibv_devices does not list $RXE_DEV"

# RDMA memory registration pins pages; the default 8 MiB memlock limit is far too low.
ulimit -l unlimited

# --- the writable share ---------------------------------------------------------------
# Mounted at the same path as on the host, so paths printed or passed around match. If
# that path is hidden by a guest tmpfs (e.g. a mktemp dir under /tmp), recreate it there.
mkdir -p "$VM_SHARE"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 vmshare "$VM_SHARE"

# Variables passed on from the host (HOPRELAY_*, RXE_*, --env), except the ones that
# describe this VM: a host's RXE_IP must not override the guest's.
for kv in "${VM_ENV[@]}"; do
    case ${kv%%=*} in
        RXE_DEV | RXE_IP | RXE_NETDEV | RXE_GID_INDEX | SHARE) ;;
        *) export "${kv?}" ;;
    esac
done
export RXE_DEV RXE_IP RXE_NETDEV RXE_GID_INDEX SHARE=$VM_SHARE
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
trap - ERR
set +e

# The script is run from its host path when the guest can see it there, so it can find
# files next to itself; a script under the host's /tmp is hidden by the guest's tmpfs,
# so then the copy vm-run.sh put in the control directory is used.
script=$VM_SCRIPT
[[ -r $script ]] || script=$CTL/script
cd "$VM_PWD" 2>/dev/null || cd /
echo "vm-run(guest): $RXE_DEV up on $RXE_NETDEV $RXE_IP (RoCE v2 GID index $RXE_GID_INDEX), SHARE=$SHARE"
if [[ -x $script ]]; then
    "$script" "${VM_ARGS[@]}" </dev/null
else
    bash "$script" "${VM_ARGS[@]}" </dev/null
fi
rc=$?

# Write-then-rename so the host never reads a half-written file.
echo "$rc" >"$CTL/exit-code.tmp" && mv "$CTL/exit-code.tmp" "$CTL/exit-code"
sync
exit 0

#!/bin/sh
# shellcheck shell=sh
#
# PID 1 of a cluster guest's initramfs (tests/cluster/cluster.sh), under busybox sh. Builds
# the guest's root and hands over to systemd, as a host's own initramfs would:
#   lower layer  the host's root, read-only over 9p (tag hostroot): the same Debian 12
#                userspace, systemd and libraries as the machine that runs the test;
#   upper layer  the guest's own disk (/dev/vda, ext4, made by cluster.sh): what the guest
#                changes (an installed package, an enabled unit, /var/lib/hoprelay) survives
#                a crash and a reboot of the guest, as on a real host.
# Then it writes what makes this guest itself (hostname, machine-id, its two units, from the
# per-guest control share, tag ctl) and runs `switch_root` to /lib/systemd/systemd.
# Any failure powers the VM off (qemu runs with -no-reboot), so the host sees it exit.

PATH=/bin:/sbin
export PATH
/bin/busybox --install -s /bin
mkdir -p /sbin /proc /sys /dev
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys

die() {
    echo "cluster(initramfs): FATAL: $*"
    sync
    poweroff -f
    sleep 5
    exit 1
}

while read -r mod; do
    [ -n "$mod" ] || continue
    insmod "/lib/modules/$mod" || die "insmod $mod failed"
done </modules.list

P9=trans=virtio,version=9p2000.L,msize=512000
mkdir -p /lower /disk /newroot
i=0
until mount -t 9p -o "$P9,ro,cache=loose" hostroot /lower 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -lt 100 ] || die "cannot mount the host root (9p tag hostroot)"
    sleep 0.1
done
i=0
until [ -b /dev/vda ]; do
    i=$((i + 1))
    [ "$i" -lt 100 ] || die "no disk /dev/vda"
    sleep 0.1
done
mount -t ext4 /dev/vda /disk || die "cannot mount the guest's disk /dev/vda"
mkdir -p /disk/upper /disk/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/disk/upper,workdir=/disk/work /newroot ||
    die "cannot mount the overlay root"

# The per-guest control share, at a path of the guest's own (under /run, which systemd keeps
# when it is a mount already).
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /newroot/run || die "cannot mount /run"
mkdir -p /newroot/run/cluster
mount -t 9p -o "$P9" ctl /newroot/run/cluster || die "cannot mount the control share (tag ctl)"
# The guest kernel's modules where every modprobe looks: udev, systemd's modprobe@ units and
# the kernel's own request_module() all find them as on an installed host.
kver=$(uname -r)
mkdir -p "/newroot/lib/modules/$kver"
mount -t 9p -o "$P9,ro,cache=loose" kmod "/newroot/lib/modules/$kver" ||
    die "cannot mount the kernel modules (tag kmod)"

# The guest's own scratch and logs: not the host's /tmp and journal seen through the lower
# layer (systemd-tmpfiles would clean the host's /tmp into whiteouts at boot, file by file).
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /newroot/tmp || die "cannot mount /tmp"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /newroot/var/tmp || die "cannot mount /var/tmp"
mkdir -p /disk/log /newroot/var/log
mount --bind /disk/log /newroot/var/log || die "cannot mount /var/log"

ctl=/newroot/run/cluster
name=$(cat "$ctl/hostname") || die "no hostname in the control share"
echo "$name" >/newroot/etc/hostname
# One machine-id per guest, kept on its disk (journald and systemd key on it).
[ -s /disk/machine-id ] || tr -d '-' </proc/sys/kernel/random/uuid >/disk/machine-id
cp /disk/machine-id /newroot/etc/machine-id
# Nothing of the machine running the test: no fstab entries for its disks, and none of the
# services it has enabled (a database, its own Prometheus, timers) start in the guests.
: >/newroot/etc/fstab
# man-db's index is rebuilt after every package installed, which takes minutes under TCG;
# Debian's switch for that is this file.
rm -f /newroot/var/lib/man-db/auto-update
# Nor its container markers: a guest is a VM (systemd would detect "docker" and skip units).
rm -f /newroot/.dockerenv /newroot/run/.containerenv
# Only at the first boot: later, what is enabled there is the guest's own (hoprelayd@NODE).
if [ ! -e /disk/.first-boot-done ]; then
    for wants in multi-user.target.wants timers.target.wants getty.target.wants \
        sysinit.target.wants; do
        rm -f /newroot/etc/systemd/system/$wants/* 2>/dev/null
    done
    touch /disk/.first-boot-done
fi
# The guest's own units: network and RDMA device setup (before network-online.target, as a
# host's network configuration is), and the agent that runs the test's commands.
units=/newroot/etc/systemd/system
mkdir -p "$units/network-online.target.wants" "$units/multi-user.target.wants"
cp "$ctl/cluster-net.service" "$ctl/cluster-agent.service" "$units/" || die "no units"
ln -sf ../cluster-net.service "$units/network-online.target.wants/cluster-net.service"
ln -sf ../cluster-agent.service "$units/multi-user.target.wants/cluster-agent.service"

exec switch_root /newroot /lib/systemd/systemd

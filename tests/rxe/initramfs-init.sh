#!/bin/sh
# shellcheck shell=sh
#
# PID 1 of the throw-away Soft-RoCE VM started by vm-run.sh. Runs from the tiny
# initramfs under busybox sh (not bash: the host's bash is only reachable after the
# host root filesystem is mounted). Its only job is to reach the host's root over 9p,
# chroot into it and hand over to guest-init.sh, which runs with the host's bash and
# tools. Whatever happens, it ends with `poweroff -f`: qemu runs with -no-reboot, so
# power-off (or a panic, booted with panic=-1) makes qemu exit instead of hanging.
#
# vm-run.sh packs this file as /init, together with /bin/busybox (static) and the few
# kernel modules needed for 9p, listed in load order in /modules.list.

PATH=/bin:/sbin
export PATH
# The archive holds only /bin/busybox and the /bin/sh link; create the other applets.
/bin/busybox --install -s /bin
mkdir -p /sbin /proc /sys /dev

# The kernel starts /init without a console when the initramfs has no /dev/console
# node (building one would need mknod, i.e. root, on the host). Mount devtmpfs first
# and reopen stdio on the console so every message below reaches the serial port.
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys

halt_vm() {
    sync
    poweroff -f
    # poweroff -f does not return; if it somehow does, exiting PID 1 panics the
    # kernel, and panic=-1 + -no-reboot turn that into a qemu exit too.
    sleep 5
    exit 1
}

die() {
    # The host notices the missing exit-code file and reports a VM failure (125).
    echo "vm-run(initramfs): FATAL: $*"
    halt_vm
}

# The module list comes from `modprobe --show-depends` on the host, so it is already in
# dependency order (9p needs netfs/fscache/9pnet, 9pnet_virtio needs virtio...).
while read -r mod; do
    [ -n "$mod" ] || continue
    insmod "/lib/modules/$mod" || die "insmod $mod failed"
done </modules.list

P9OPTS=trans=virtio,version=9p2000.L,msize=512000

# virtio-pci probing is normally synchronous with the insmod above, but don't rely on
# it: retry for up to ~10 s, then give up loudly rather than hang.
mkdir -p /newroot
i=0
# cache=loose: the host root is read-only for the guest and nobody edits the binaries
# under test during a run, so letting the guest cache pages and metadata is safe, and
# it makes exec/dlopen of host binaries much faster under TCG.
until mount -t 9p -o "$P9OPTS,ro,cache=loose" hostroot /newroot 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -lt 100 ] || die "cannot mount the host root (9p tag hostroot)"
    sleep 0.1
done

# /run is a fresh tmpfs in the guest; the harness's private control directory (config,
# guest-init.sh, the exit code going back to the host) is mounted inside it.
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /newroot/run || die "cannot mount /run"
mkdir -p /newroot/run/vm-run
mount -t 9p -o "$P9OPTS" vmctl /newroot/run/vm-run || die "cannot mount the control dir (9p tag vmctl)"
mount -t proc proc /newroot/proc || die "cannot mount /proc"
mount -t sysfs sysfs /newroot/sys || die "cannot mount /sys"
mount -t devtmpfs devtmpfs /newroot/dev || die "cannot mount /dev"

# Kernel-initiated module loads (request_module(), e.g. `ip link add type dummy`) run
# /sbin/modprobe as seen from the kernel's own root, which is this initramfs, not the
# chroot (measured). Forward them into the chroot, to the host's kmod modprobe pointed at
# the guest kernel's modules (mounted there by guest-init.sh). Written at boot, not at
# build time, so the cached archive needs no special files.
rm -f /sbin/modprobe
cat >/sbin/modprobe <<'EOF'
#!/bin/sh
exec /bin/busybox chroot /newroot /sbin/modprobe -d /run/kmod "$@"
EOF
chmod 0755 /sbin/modprobe

[ -x /newroot/bin/bash ] || die "host root has no /bin/bash"
chroot /newroot /bin/bash /run/vm-run/guest-init.sh
echo "vm-run(initramfs): guest-init.sh exited with status $?" >/newroot/run/vm-run/init-status 2>/dev/null

halt_vm

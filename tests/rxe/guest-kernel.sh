# Sourced by vm-run.sh and tests/cluster/cluster.sh: the guest kernel (Debian's current
# linux-image-amd64, fetched with `apt-get download` and unpacked into a cache, never installed
# on the host) and a busybox initramfs around a given /init, both cached.
#
# The caller defines msg and die (die exits), and sets busybox (a static busybox).
#   guest_kernel CACHE                 sets kdir kver vmlinuz kmods; holds the cache lock
#   guest_initramfs INIT MODULE...     sets initrd: INIT as /init, MODULE... and what they
#                                      need, in load order in /modules.list
#   guest_cache_done                   lets other runs use the cache
# shellcheck shell=bash

guest_kernel() {
    cache=$1
    mkdir -p "$cache" 2>/dev/null || die "cannot create cache dir '$cache' (use --cache DIR)"
    cache=$(realpath -e "$cache")
    [[ -w $cache ]] || die "cache dir '$cache' is not writable (use --cache DIR)"

    # Serialise cache preparation between concurrent runs (bounded: never wait forever).
    exec {lockfd}>"$cache/.lock"
    flock -w 900 "$lockfd" || die "timed out waiting for the cache lock $cache/.lock"

    # A kernel dir is usable once its .ready file (written last) names the kernel release
    # and the image and modules.dep are really there; anything less is fetched again.
    kernel_ok() { # kernel_ok DIR -> sets kver
        [[ -s $1/.ready ]] || return 1
        kver=$(<"$1/.ready")
        [[ -r $1/boot/vmlinuz-$kver && -s $1/lib/modules/$kver/modules.dep ]]
    }

    # Which kernel: whatever Debian's linux-image-amd64 metapackage currently points at,
    # e.g. linux-image-6.1.0-56-amd64. Each package+version gets its own directory.
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
        awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }') || true
    kpkg_ver=
    if [[ -n $kpkg ]]; then
        kpkg_ver=$(apt-cache policy "$kpkg" 2>/dev/null | awk '$1 == "Candidate:" { print $2; exit }') || true
    fi
    if [[ -n $kpkg && -n $kpkg_ver && $kpkg_ver != "(none)" ]]; then
        kdir=$cache/${kpkg}_${kpkg_ver}
    else
        # No apt lists (e.g. a fresh container before `apt-get update`): fall back to the
        # newest usable kernel already in the cache, if any.
        kdir=
        while read -r d; do
            if kernel_ok "$d"; then kdir=$d; break; fi
        done < <(find "$cache" -mindepth 1 -maxdepth 1 -type d -name 'linux-image-*' -printf '%T@ %p\n' | sort -rn | cut -d' ' -f2-)
        [[ -n $kdir ]] || die "apt cannot resolve linux-image-amd64 and no kernel is cached in $cache; run 'apt-get update' first"
        msg "warning: apt cannot resolve linux-image-amd64; using cached $(basename "$kdir")"
    fi

    if ! kernel_ok "$kdir"; then
        msg "preparing guest kernel $(basename "$kdir") in $cache (once per kernel version)"
        rm -rf "$kdir"
        work=$(mktemp -d "$cache/.prep.XXXXXX")
        # If anything below fails, do not leave half an unpacked tree behind.
        trap 'rm -rf "$work"' EXIT
        # apt drops privileges to _apt for downloads, which cannot write into our private
        # mktemp dir; as root, tell apt to stay root instead of warning about it.
        apt_opts=(-q)
        [[ $(id -u) -ne 0 ]] || apt_opts+=(-o APT::Sandbox::User=root)
        (cd "$work" && timeout 900 apt-get "${apt_opts[@]}" download "$kpkg=$kpkg_ver") >&2 ||
            die "apt-get download $kpkg=$kpkg_ver failed (network? apt sources?)"
        debs=("$work"/*.deb)
        [[ -f ${debs[0]} ]] || die "apt-get download produced no .deb"
        dpkg-deb -x "${debs[0]}" "$work/root" || die "dpkg-deb -x ${debs[0]} failed"
        rm -f "${debs[@]}"
        # Debian 12 ships /lib/modules; later releases use /usr/lib/modules. Normalise to
        # lib/modules so that `modprobe -d KDIR` and the guest side need no special case.
        if [[ ! -d $work/root/lib/modules && -d $work/root/usr/lib/modules ]]; then
            mkdir -p "$work/root/lib"
            mv "$work/root/usr/lib/modules" "$work/root/lib/modules"
        fi
        kv=$(find "$work/root/lib/modules" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | head -n1)
        [[ -n $kv && -f $work/root/boot/vmlinuz-$kv ]] || die "unexpected layout in ${debs[0]}"
        # The .deb ships no modules.dep (its postinst would run depmod); modprobe needs it.
        depmod -b "$work/root" "$kv" || die "depmod on the extracted kernel failed"
        printf '%s\n' "$kv" >"$work/root/.ready"
        mv "$work/root" "$kdir"
        rm -rf "$work"
        trap - EXIT
        # A new kernel ABI replaces the old one: drop older kernels (400 MB each) that have
        # not been touched for a day, so a long-lived machine does not fill up.
        find "$cache" -mindepth 1 -maxdepth 1 -type d -name 'linux-image-*' ! -path "$kdir" -mmin +1440 \
            -exec rm -rf {} + 2>/dev/null || true
    fi
    kernel_ok "$kdir" || die "kernel in $kdir is incomplete; delete that directory and retry"
    vmlinuz=$kdir/boot/vmlinuz-$kver
    kmods=$kdir/lib/modules/$kver

}

guest_initramfs() {
    local init=$1
    shift
    # modprobe --show-depends gives the modules in load order; a fixed list would break on
    # the next kernel ABI.
    local modlist ihash stage
    modlist=$(modprobe -d "$kdir" -S "$kver" --show-depends -a "$@" |
        awk '$1 == "insmod" && !seen[$2]++ { print $2 }') ||
        die "cannot resolve the modules $* of kernel $kver"
    [[ -n $modlist ]] || die "no modules found for $* in kernel $kver"
    # Named after a hash of everything that goes in, so edits to initramfs-init.sh, a new
    # busybox or a new kernel rebuild it automatically.
    ihash=$({
        sha256sum "$init" "$busybox"
        printf '%s\n' "$modlist"
    } | sha256sum | cut -c1-16)
    initrd=$kdir/initramfs-$ihash.cpio
    if [[ ! -s $initrd ]]; then
        stage=$(mktemp -d "$cache/.initrd.XXXXXX")
        trap 'rm -rf "$stage"' EXIT
        mkdir -p "$stage"/{bin,lib/modules,proc,sys,dev,newroot}
        cp "$busybox" "$stage/bin/busybox"
        ln -s busybox "$stage/bin/sh"
        install -m 0755 "$init" "$stage/init"
        : >"$stage/modules.list"
        while read -r ko; do
            cp "$ko" "$stage/lib/modules/"
            basename "$ko" >>"$stage/modules.list"
        done <<<"$modlist"
        # busybox cpio so the host needs no cpio package; -R 0:0 so a non-root build
        # still yields root-owned files. Uncompressed: it is small and boots faster.
        (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | "$busybox" cpio -o -H newc -R 0:0 >"$initrd.tmp" 2>/dev/null) ||
            die "building the initramfs failed"
        mv "$initrd.tmp" "$initrd"
        rm -rf "$stage"
        trap - EXIT
        # Drop initramfs images of earlier harness versions (not the ones a concurrent run
        # might be booting right now).
        find "$kdir" -maxdepth 1 -name 'initramfs-*.cpio' ! -path "$initrd" -mmin +1440 -delete 2>/dev/null || true
    fi
}

guest_cache_done() {
    exec {lockfd}>&-
}

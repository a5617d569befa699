#!/bin/bash
# cluster-net.service in a guest: the address from the control share on the guest's NIC,
# and rxe0 on top of it (tests/cluster/README.md).
set -euo pipefail
CTL=/run/cluster
ip=$(<"$CTL/ip")
# crc32_generic first: rxe asks the crypto API for "crc32" (softroce-notes.md).
modprobe -a crc32_generic rdma_rxe ib_uverbs rdma_ucm sch_netem
# The NIC as udev leaves it (a rename racing with this script broke a reboot); the kernel
# command line keeps the name eth0 anyway (net.ifnames=0).
udevadm settle -t 60 || true
nic=
for d in /sys/class/net/*; do
    [[ -e $d/device ]] && { nic=${d##*/}; break; }
done
[[ -n $nic ]] || { echo "cluster-net: no NIC" >&2; exit 1; }
echo "$nic" >"$CTL/nic"
ip link set lo up
sysctl -qw "net.ipv6.conf.$nic.disable_ipv6=1"
ip addr replace "$ip/24" dev "$nic"
ip link set "$nic" up
rdma link show rxe0 >/dev/null 2>&1 || rdma link add rxe0 type rxe netdev "$nic"
port=/sys/class/infiniband/rxe0/ports/1
for _ in $(seq 300); do
    grep -q ACTIVE "$port/state" 2>/dev/null && break
    sleep 0.1
done
grep -q ACTIVE "$port/state" || { echo "cluster-net: rxe0 not ACTIVE" >&2; exit 1; }
echo "cluster-net: $nic $ip, rxe0 ACTIVE"

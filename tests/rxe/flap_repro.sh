#!/bin/bash
# Reproduces the Soft-RoCE limitation in docs/guarantees.md ("a netdev flap on Soft-RoCE"). Not
# part of the suite: run it by hand, inside the VM, with
#   HOPRELAY_BUILD=$PWD/build tests/rxe/vm-run.sh --timeout 200 --share "$PWD/build" -- \
#     tests/rxe/flap_repro.sh
# Steps: a -> b over verbs carries a paced stream; the netdev under rxe0 goes down for 2 s and
# up; then rping between two processes started after the flap; then every process is killed
# and rping tried again; then the rxe device is re-created and rping tried a last time.
# Seen on Debian 12 (6.1): both rpings after the flap time out, the one after re-creating works.
set -u
B=${HOPRELAY_BUILD:?}
W=/tmp/flap
mkdir -p "$W" && cd "$W" || exit 1
ulimit -l unlimited
cat >t.toml <<T
[pipeline]
name = "flap"
transport = "verbs"
slot_size = "4KiB"
slots = 32
[nodes.a]
listen = "$RXE_IP:7201"
downstream = ["b"]
[nodes.b]
listen = "$RXE_IP:7202"
stage = { plugin = "verify-sink", report = "$W/b.json" }
T
rping_once() { # rping_once PORT -> "ok" or "timed out"
  timeout 10 rping -s -a "$RXE_IP" -p "$1" -C 1 >/dev/null 2>&1 &
  sleep 0.5
  if timeout 8 rping -c -a "$RXE_IP" -p "$1" -C 1 >/dev/null 2>&1; then echo ok; else echo "timed out"; fi
  wait
}
for n in b a; do "$B/daemon/hoprelayd" --topology t.toml --node $n 2>$n.log & done
sleep 1
timeout 30 "$B/client/hoprelay" send --topology t.toml --to a --count 20000 --size 200 \
  --rate 2000 --connect-timeout 20 >send.out 2>&1 &
sleep 2
ip link set "$RXE_NETDEV" down
sleep 2
ip link set "$RXE_NETDEV" up
sleep 2
echo "flap-repro: rping after the flap, traffic was flowing: $(rping_once 7301)"
pkill -9 hoprelayd
pkill -9 -f "hoprelay send"
sleep 2
echo "flap-repro: rping with every process that used rxe0 killed: $(rping_once 7302)"
rdma link delete "$RXE_DEV" && rdma link add "$RXE_DEV" type rxe netdev "$RXE_NETDEV"
sleep 2
echo "flap-repro: rping after re-creating $RXE_DEV: $(rping_once 7303)"
wait 2>/dev/null

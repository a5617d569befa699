#!/bin/bash
# The cluster suite (ctest: cluster.suite; tests/cluster/README.md): every node on a host of
# its own. Four qemu guests (a, b, c1, c2), each with its own kernel, NIC, address, disk and
# Soft-RoCE device, systemd as PID 1, on a bridge inside a network namespace this script
# creates and removes. Each guest installs the project's Debian package, gets the one topology
# file at /etc/hoprelay/topology.toml and starts its node with `systemctl enable --now
# hoprelayd@NODE`, as docs/operations.md tells an operator to. A Prometheus server on the
# bridge scrapes every node with the shipped alert rules. The scenarios check verify-sink's
# exact counts at both sinks.
#
#   cluster.sh BUILD_DIR [SCENARIO...]     (default: all, in order)
#
# Exit 0 when every scenario passed; 77 (ctest: skipped) without qemu unless CI=true.
set -uo pipefail
# shellcheck disable=SC2317  # the scenarios and cleanup are called by name or by trap
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)
BUILD=$(cd "${1:?usage: cluster.sh BUILD_DIR [SCENARIO...]}" && pwd -P) ||
  { echo "cluster: error: no build directory $1" >&2; exit 125; }
shift
PROG=cluster
msg() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
  msg "error: $*"
  exit 125
}

if ! command -v qemu-system-x86_64 >/dev/null; then
  [[ ${CI:-} != true ]] || die "qemu-system-x86_64 missing; scripts/install-deps.sh installs it"
  echo "cluster: qemu-system-x86_64 not installed: skipping the cluster suite"
  exit 77
fi
for tool in ip mkfs.ext4 cpack prometheus python3 busybox flock timeout; do
  command -v "$tool" >/dev/null || die "'$tool' not found; scripts/install-deps.sh installs it"
done
[[ $(id -u) == 0 ]] || die "needs root (network namespace, tap devices)"

HOSTS=(a b c1 c2)
declare -A IP=([a]=198.51.100.1 [b]=198.51.100.2 [c1]=198.51.100.3 [c2]=198.51.100.4)
declare -A MAC=([a]=52:54:00:c1:00:01 [b]=52:54:00:c1:00:02 [c1]=52:54:00:c1:00:03
  [c2]=52:54:00:c1:00:04)
BRIDGE_IP=198.51.100.254 # TEST-NET-2: never routed; it only exists inside the namespace
NS=hoprelay-cluster-$$
W=$BUILD/${CLUSTER_DIR:-cluster} # CLUSTER_DIR: beside another run's files (ctest cluster.upgrade)
BOOT_TIMEOUT=${CLUSTER_BOOT_TIMEOUT:-300}
GUEST_MEM=${CLUSTER_GUEST_MEM:-768M}
declare -A QPID=()
PROM_PID=
failures=0
passes=0
failed=()

# --- cleanup: every qemu, Prometheus and the namespace, whatever happened ----------------
cleanup() {
  for h in "${!QPID[@]}"; do kill -9 "${QPID[$h]}" 2>/dev/null; done
  [[ -z $PROM_PID ]] || kill "$PROM_PID" 2>/dev/null
  wait 2>/dev/null
  ip netns del "$NS" 2>/dev/null
}

# --- the guest kernel and the cluster's initramfs (cached beside the Soft-RoCE suite's) -----
busybox=$(realpath -e "$(command -v busybox)")
cache=${HOPRELAY_RXE_CACHE:-/var/cache/hoprelay-rxe}
# shellcheck source=../rxe/guest-kernel.sh
source "$REPO/tests/rxe/guest-kernel.sh"
guest_kernel "$cache"
guest_initramfs "$HERE/initramfs-init.sh" virtio_pci 9pnet_virtio 9p overlay virtio_net \
  virtio_blk ext4
guest_cache_done
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rm -rf "$W"
mkdir -p "$W/pkg"
# --- the package, as an operator gets it -------------------------------------------------
# In the build directory (cpack's own paths point there), under the lock the package test
# takes too: ctest may run both at once.
(
  cd "$BUILD" && flock -w 600 9 && rm -f ./*.deb && cpack -G DEB && cp ./*.deb "$W/pkg/"
) 9>"$BUILD/.cpack.lock" >"$W/cpack.log" 2>&1 || {
  cat "$W/cpack.log"
  die "cpack -G DEB failed"
}

# --- the segment: a bridge in a namespace of our own, one tap per guest ------------------
ip netns add "$NS" || die "cannot create network namespace $NS"
ip -n "$NS" link set lo up
ip -n "$NS" link add br0 type bridge
ip -n "$NS" addr add "$BRIDGE_IP/24" dev br0
ip -n "$NS" link set br0 up
for h in "${HOSTS[@]}"; do
  ip -n "$NS" tuntap add dev "tap-$h" mode tap
  ip -n "$NS" link set "tap-$h" master br0
  ip -n "$NS" link set "tap-$h" up
done

# --- guests --------------------------------------------------------------------------------
# boot HOST: starts its qemu in the background (the disk is made on the first boot only).
boot() {
  local h=$1 d=$W/$1
  mkdir -p "$d/ctl/cmd"
  if [[ ! -f $d/disk.img ]]; then
    truncate -s 2G "$d/disk.img"
    mkfs.ext4 -q -F "$d/disk.img" || die "mkfs.ext4 for $h"
  fi
  echo "$h" >"$d/ctl/hostname"
  echo "${IP[$h]}" >"$d/ctl/ip"
  cp "$HERE"/cluster-net.service "$HERE"/cluster-agent.service "$HERE"/guest-net.sh \
    "$HERE"/agent.sh "$d/ctl/"
  rm -f "$d/ctl/ready"
  # shellcheck disable=SC2054  # commas inside qemu option values are intended
  ip netns exec "$NS" nice -n "${CLUSTER_NICE:-0}" qemu-system-x86_64 \
    -nodefaults -no-user-config -display none -accel tcg,thread=multi -cpu max \
    -smp 1 -m "$GUEST_MEM" -no-reboot \
    -kernel "$vmlinuz" -initrd "$initrd" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 net.ifnames=0 systemd.show_status=0 systemd.unit=multi-user.target" \
    -chardev "file,id=console,path=$d/console.log" -serial chardev:console \
    -monitor "unix:$d/monitor.sock,server=on,wait=off" \
    -netdev "tap,id=n0,ifname=tap-$h,script=no,downscript=no" \
    -device "virtio-net-pci,netdev=n0,mac=${MAC[$h]}" \
    -drive "file=$d/disk.img,if=virtio,format=raw" \
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
    -virtfs "local,path=$kmods,mount_tag=kmod,security_model=none,readonly=on,multidevs=remap" \
    -virtfs "local,path=$d/ctl,mount_tag=ctl,security_model=none,multidevs=remap" \
    </dev/null >>"$d/qemu.log" 2>&1 &
  QPID[$h]=$!
}

# wait_ready HOST...: until each guest's agent runs (its boot id in ctl/ready).
wait_ready() {
  local h deadline=$((SECONDS + BOOT_TIMEOUT))
  for h in "$@"; do
    until [[ -s $W/$h/ctl/ready ]]; do
      if ((SECONDS > deadline)) || ! kill -0 "${QPID[$h]}" 2>/dev/null; then
        msg "guest $h did not come up; its console:"
        tail -n 30 "$W/$h/console.log" >&2
        return 1
      fi
      sleep 1
    done
  done
}

# crash HOST: the guest's qemu killed with SIGKILL: a host that loses its power.
crash() {
  kill -9 "${QPID[$1]}" 2>/dev/null
  wait "${QPID[$1]}" 2>/dev/null
  unset "QPID[$1]"
}

# monitor HOST COMMAND: one qemu monitor command (e.g. "set_link n0 off": a cable pulled).
monitor() {
  python3 - "$W/$1/monitor.sock" "$2" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(5)
s.recv(4096)  # the banner
s.sendall((sys.argv[2] + "\n").encode())
time.sleep(0.3)
PY
}

# gexec HOST TIMEOUT COMMAND: runs COMMAND (bash) in the guest through its agent; prints
# its output, returns its status (124 on timeout).
gstart() { # gstart HOST COMMAND -> id in $GID (unique: the agent never runs an id twice)
  GID=$(date +%s%N)
  local f=$W/$1/ctl/cmd/$GID
  printf '%s\n' "$2" >"$f.tmp" && mv "$f.tmp" "$f.sh"
}
gwait() { # gwait HOST ID TIMEOUT
  local f=$W/$1/ctl/cmd/$2 deadline=$((SECONDS + $3))
  until [[ -s $f.rc ]]; do
    ((SECONDS < deadline)) || {
      cat "$f.out" 2>/dev/null
      return 124
    }
    sleep 0.3
  done
  cat "$f.out"
  return "$(<"$f.rc")"
}
gexec() {
  gstart "$1" "$3"
  gwait "$1" "$GID" "$2"
}
# gwait_all TIMEOUT WHAT HOST=ID...: each host's command (started with gstart) done; for the
# first that failed, "WHAT on HOST: its output" on stderr, and 1.
gwait_all() {
  local timeout=$1 what=$2 started out
  shift 2
  for started in "$@"; do
    out=$(gwait "${started%%=*}" "${started#*=}" "$timeout") || {
      echo "$what on ${started%%=*}: $out" >&2
      return 1
    }
  done
}

journals() { # the nodes' journals, when a scenario failed
  local h
  for h in "${HOSTS[@]}"; do
    echo "--- $h: journalctl -u hoprelayd@* (last 25 lines)"
    gexec "$h" 20 "journalctl -u 'hoprelayd@*' -n 25 --no-pager -o short-precise" 2>&1 | tail -n 25
  done
}
pass() {
  echo "cluster: PASS: $*"
  passes=$((passes + 1))
}
fail() {
  echo "cluster: FAIL: $*"
  failures=$((failures + 1))
  local what="$*"
  failed+=("${what:0:600}")
  journals
}

# --- the topology: one file, the same on every host --------------------------------------
# topology NAME TRANSPORT SINK [B_STAGE]: the pipeline a -> b -> {c1, c2}; SINK is the sinks'
# stage table, with @ for the sink's name; B_STAGE, a stage table for b (none by default).
# b runs its two downstream links on threads of their own (link_threads = 2), so every
# scenario also holds them to the faults of separate hosts: connections from b's own address
# (speak_for), queue pairs in b's protection domain over verbs, replay after a host crash.
topology() {
  cat <<T
[pipeline]
name = "$1"
transport = "$2"
slot_size = "64KiB"
slots = 64

[nodes.a]
listen = "${IP[a]}:7000"
metrics = "${IP[a]}:9102"
downstream = ["b"]

[nodes.b]
listen = "${IP[b]}:7000"
metrics = "${IP[b]}:9102"
downstream = ["c1", "c2"]
link_threads = 2
${4:+stage = $4}

[nodes.c1]
listen = "${IP[c1]}:7000"
metrics = "${IP[c1]}:9102"
stage = ${3//@/c1}

[nodes.c2]
listen = "${IP[c2]}:7000"
metrics = "${IP[c2]}:9102"
stage = ${3//@/c2}
T
}
# verify-sink at both sinks, reports named after TAG: each scenario's counts start at 0.
verify_sinks() { echo "{ plugin = \"verify-sink\", report = \"$1-@.json\" }"; }

# deploy TRANSPORT TAG: the topology to every host's /etc/hoprelay/topology.toml, then each
# node (re)started, on all hosts at once (a node that starts before its downstream retries).
deploy() {
  local h started=()
  topology cluster "$1" "$(verify_sinks "$2")" >"$W/topology.toml"
  for h in "${HOSTS[@]}"; do
    cp "$W/topology.toml" "$W/$h/ctl/topology.toml"
    # sync: a host-crash scenario may kill the guest seconds later, before ext4 wrote the new
    # file (seen once: b booted with an empty topology.toml, its unit failing with exit 78).
    # Enabled once only: `systemctl enable` reloads systemd, about 20 s under TCG.
    gstart "$h" "install -m 0644 /run/cluster/topology.toml /etc/hoprelay/topology.toml &&
      { systemctl is-enabled -q hoprelayd@$h || systemctl enable hoprelayd@$h 2>&1; } && sync &&
      systemctl restart --no-block hoprelayd@$h &&
      for i in \$(seq 240); do systemctl is-active -q hoprelayd@$h && exit 0; sleep 0.5; done
      systemctl status hoprelayd@$h --no-pager; exit 1"
    started+=("$h=$GID")
  done
  gwait_all 200 "hoprelayd did not become active" "${started[@]}"
}

# report HOST TAG KEY: a number from the sink's verify-sink report.
report() {
  gexec "$1" 30 "cat /var/lib/hoprelay/$2-$1.json" 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$3" 2>/dev/null
}

# exact TAG N: both sinks report N received, 0 duplicates, 0 missing, 0 corrupt (waiting up
# to 120 s for the last ones). Prints the reason when not.
exact() {
  local tag=$1 n=$2 h deadline=$((SECONDS + 120)) got
  for h in c1 c2; do
    while :; do
      got=$(report "$h" "$tag" received)
      [[ $got == "$n" ]] && break
      ((SECONDS < deadline)) || {
        echo "$h received ${got:-nothing}, expected $n"
        return 1
      }
      sleep 2
    done
    for key in duplicates missing corrupt; do
      got=$(report "$h" "$tag" "$key")
      [[ $got == 0 ]] || {
        echo "$h: $key = $got"
        return 1
      }
    done
  done
}

# --- Prometheus on the bridge, with the shipped alert rules ----------------------------------
start_prometheus() {
  mkdir -p "$W/prometheus"
  cp "$REPO/docs/hoprelay-alerts.yml" "$W/prometheus/"
  {
    echo "global: {scrape_interval: 2s, evaluation_interval: 2s}"
    echo "rule_files: [$W/prometheus/hoprelay-alerts.yml]"
    echo "scrape_configs:"
    echo "  - job_name: hoprelay"
    echo "    static_configs:"
    for h in "${HOSTS[@]}"; do
      echo "      - targets: ['${IP[$h]}:9102']"
      echo "        labels: {node: '$h'}"
    done
  } >"$W/prometheus/prometheus.yml"
  ip netns exec "$NS" prometheus --config.file="$W/prometheus/prometheus.yml" \
    --storage.tsdb.path="$W/prometheus/data" --web.listen-address="$BRIDGE_IP:9090" \
    >"$W/prometheus/log" 2>&1 &
  PROM_PID=$!
}
# promql QUERY: the instant vector as "labels value" lines, through Prometheus's HTTP API.
promql() {
  ip netns exec "$NS" python3 - "$BRIDGE_IP" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = "http://%s:9090/api/v1/query?query=%s" % (sys.argv[1], urllib.parse.quote(sys.argv[2]))
for r in json.load(urllib.request.urlopen(url, timeout=10))["data"]["result"]:
    print(r["metric"].get("node", ""), r["value"][1])
PY
}

# prom_wait QUERY LINE...: until the query's result, sorted, is exactly LINE... (PROM_WAIT
# seconds, 30 by default).
prom_wait() {
  local query=$1 want got deadline=$((SECONDS + ${PROM_WAIT:-30}))
  shift
  want=$(printf '%s\n' "$@")
  while :; do
    got=$(promql "$query" | sort)
    [[ $got == "$want" ]] && return 0
    ((SECONDS < deadline)) || {
      echo "$query gave '$(echo "$got" | tr '\n' ' ')', expected '$*'"
      return 1
    }
    sleep 2
  done
}

# scrape HOST SAMPLE: one sample's value (SAMPLE as the exposition writes it, e.g.
# 'hoprelay_messages_replayed_total{peer="b"}') from the node's own /metrics, read now rather
# than at Prometheus's next scrape; nothing when the node or the sample is not there.
scrape() {
  ip netns exec "$NS" python3 - "${IP[$1]}" "$2" <<'PY' 2>/dev/null
import sys, urllib.request
body = urllib.request.urlopen("http://%s:9102/metrics" % sys.argv[1], timeout=10).read().decode()
for line in body.splitlines():
    if line.startswith(sys.argv[2] + " "):
        print(line.rsplit(" ", 1)[1])
PY
}

# since HOST EPOCH: the node's journal lines since EPOCH (seconds, the host's clock).
since() {
  gexec "$1" 30 "journalctl -u 'hoprelayd@*' --since @$2 --no-pager -o short-precise"
}

# dpkg_install new|old HOST: the command that installs those packages on HOST (put into its
# control share now).
dpkg_install() {
  mkdir -p "$W/$2/ctl/pkg-$1"
  if [[ $1 == new ]]; then
    cp "$W"/pkg/hoprelay_*_amd64.deb "$W/$2/ctl/pkg-new/hoprelay.deb"
    cp "$W"/pkg/libhoprelay1_*_amd64.deb "$W/$2/ctl/pkg-new/libhoprelay1.deb"
  else
    cp "$OLD"/deb/hoprelay.deb "$OLD"/deb/libhoprelay1.deb "$W/$2/ctl/pkg-old/"
  fi
  echo "dpkg -i /run/cluster/pkg-$1/hoprelay.deb /run/cluster/pkg-$1/libhoprelay1.deb 2>&1"
}
# install_packages new|old HOST...: this release's packages (hoprelay, libhoprelay1), or the
# previous release's (scripts/previous-release.sh), installed with `dpkg -i` on every HOST at
# once, through the guest's control share (the build directory may be under /tmp, which is
# the guest's own). A node that runs is restarted on the installed binary by the package's
# postinst (queued, not waited for: docs/operations.md, "Upgrading").
install_packages() {
  local which=$1 h started=()
  shift
  for h in "$@"; do
    gstart "$h" "$(dpkg_install "$which" "$h")"
    started+=("$h=$GID")
  done
  gwait_all 600 "dpkg -i of the $which package failed" "${started[@]}"
}

# --- scenarios -----------------------------------------------------------------------------
COUNT=${CLUSTER_COUNT:-2000}

# 1. a -> b -> {c1, c2} broadcast, the producer on a's host, over TRANSPORT.
broadcast_scenario() {
  local transport=$1 tag=bc-$1 out
  deploy "$transport" "$tag" || { fail "broadcast/$transport: the nodes did not start"; return; }
  if ! out=$(gexec a 300 "hoprelay send --topology /etc/hoprelay/topology.toml --to a \
      --count $COUNT --size 1000 --connect-timeout 30"); then
    fail "broadcast/$transport: hoprelay send failed: $out"
    return
  fi
  if ! out=$(exact "$tag" "$COUNT"); then
    fail "broadcast/$transport: $out"
    return
  fi
  # The same seen through Prometheus: each sink's counter of what came from b, and how.
  local opcode=tcp
  [[ $transport == tcp ]] || opcode='send|write'
  if ! out=$(prom_wait "sum by (node) (hoprelay_messages_received_total{peer=\"b\",opcode=~\"$opcode\"})" \
    "c1 $COUNT" "c2 $COUNT"); then
    fail "broadcast/$transport: Prometheus: $out"
    return
  fi
  local rdma=
  if [[ $transport == verbs ]]; then
    # The RDMA device metrics of every host: port ACTIVE, and the packets the relay and the
    # sinks received counted by their own rxe (at least one per message).
    if ! out=$(prom_wait 'hoprelay_rdma_port_active{device="rxe0",port="1"}' "a 1" "b 1" "c1 1" "c2 1") ||
      ! out=$(prom_wait "count by (node) (hoprelay_rdma_hw_counter_total{device=\"rxe0\",counter=\"rcvd_pkts\",node=~\"b|c1|c2\"} >= $COUNT)" "b 1" "c1 1" "c2 1"); then
      fail "broadcast/$transport: RDMA device metrics: $out"
      return
    fi
    rdma="; every rxe0 port ACTIVE, rcvd_pkts >= $COUNT at b, c1 and c2"
  fi
  pass "broadcast over $transport: a -> b -> {c1, c2}, $COUNT messages each: 0 missing, 0 duplicates, 0 corrupt; Prometheus: $COUNT received from b by opcode $opcode at each sink$rdma"
}

# traffic TRANSPORT TAG RATE: the nodes deployed over TRANSPORT and `hoprelay send` started on
# a's host at RATE messages a second (its agent command id in $SEND), returning once about a
# third has reached c1: what happens next happens under traffic.
traffic() {
  local transport=$1
  shift
  deploy "$transport" "$1" || return 1
  gstart a "hoprelay send --topology /etc/hoprelay/topology.toml --to a --count $COUNT \
    --size 1000 --rate $2 --connect-timeout 30"
  SEND=$GID
  local deadline=$((SECONDS + 120))
  until (($(report c1 "$1" received || echo 0) >= COUNT / 3)); do
    ((SECONDS < deadline)) || break
    sleep 1
  done
}

# after_traffic NAME TAG WHAT: the send's end and both sinks' exact counts, as one result.
after_traffic() {
  local out
  if ! out=$(gwait a "$SEND" 400); then
    fail "$1: hoprelay send failed: $out"
  elif out=$(exact "$2" "$COUNT"); then
    pass "$1: $3; $COUNT each at c1 and c2, exactly once"
  else
    fail "$1: $out"
  fi
}

# 0. docs/operations.md, "From package to a pipeline of four hosts", step for step on the
#    freshly installed hosts (step 1, the package, and step 2, its installation, are done for
#    every scenario): one topology file in /etc/hoprelay with the mode and group the guide
#    gives, `hoprelay validate --node` on each host, `systemctl enable --now` downstream first,
#    the unit's status line, Prometheus (started with the suite), a file fed to the head with
#    `hoprelay send --file`, `hoprelay status`, a reload on every host, then `systemctl stop`
#    head first. Both sinks' file-sink records hold the file, byte for byte.
walkthrough() {
  local h out
  topology prod auto '{ plugin = "file-sink", path = "/var/lib/hoprelay/@.records" }' \
    >"$W/topology.toml"
  # Step 3: the same file on every host, checked there.
  for h in "${HOSTS[@]}"; do
    cp "$W/topology.toml" "$W/$h/ctl/topology.toml"
    out=$(gexec "$h" 60 "install -m 0640 -g hoprelay /run/cluster/topology.toml /etc/hoprelay/topology.toml &&
      hoprelay validate --node $h /etc/hoprelay/topology.toml 2>&1") || {
      fail "walkthrough: step 3 on $h: $out"
      return
    }
  done
  # Step 4: one node per host, downstream first; `enable --now` returns once the node is ready.
  for h in c1 c2 b a; do
    out=$(gexec "$h" 240 "systemctl enable --now hoprelayd@$h 2>&1") || {
      fail "walkthrough: step 4, systemctl enable --now hoprelayd@$h: $out"
      return
    }
  done
  if ! out=$(gexec b 30 "systemctl status hoprelayd@b --no-pager | grep -F 'Status: \"running: verbs, listening on ${IP[b]}:7000, forwarding to c1, c2\"'"); then
    fail "walkthrough: step 4, systemctl status hoprelayd@b: $(gexec b 30 "systemctl status hoprelayd@b --no-pager" | head -6)"
    return
  fi
  # Step 6: a file fed to the head, and the one-screen view.
  head -c 6000000 /dev/urandom >"$W/a/ctl/data.bin"
  out=$(gexec a 600 "hoprelay send --topology /etc/hoprelay/topology.toml --to a \
      --file /run/cluster/data.bin --size 60000 2>&1") || {
    fail "walkthrough: step 6, hoprelay send: $out"
    return
  }
  if ! out=$(gexec a 60 "hoprelay status --topology /etc/hoprelay/topology.toml 2>&1") ||
    [[ $(grep -cE '^ *(a|b|c1|c2) +up' <<<"$out") != 4 ]]; then
    fail "walkthrough: step 6, hoprelay status does not show four nodes up: $out"
    return
  fi
  # transport = "auto" chose verbs (every host has rxe0): Prometheus sees each host's port
  # ACTIVE and the relay's and the sinks' own rxe counting the packets they received.
  if ! out=$(prom_wait 'hoprelay_rdma_port_active{device="rxe0",port="1"}' "a 1" "b 1" "c1 1" "c2 1") ||
    ! out=$(prom_wait 'count by (node) (hoprelay_rdma_hw_counter_total{device="rxe0",counter="rcvd_pkts",node=~"b|c1|c2"} >= 100)' "b 1" "c1 1" "c2 1"); then
    fail "walkthrough: step 5, the RDMA device metrics through Prometheus: $out"
    return
  fi
  local want got
  want=$(sha256sum <"$W/a/ctl/data.bin" | cut -d' ' -f1)
  for h in c1 c2; do
    got=$(gexec "$h" 60 "python3 -c '
import hashlib, struct, sys
h = hashlib.sha256()
with open(\"/var/lib/hoprelay/$h.records\", \"rb\") as f:
    while (n := f.read(4)):
        h.update(f.read(struct.unpack(\"<I\", n)[0]))
print(h.hexdigest())'")
    [[ $got == "$want" ]] || {
      fail "walkthrough: $h's file-sink records do not hold data.bin (sha256 $got, want $want)"
      return
    }
    # The pipeline's data is not for every user: the unit's StateDirectoryMode and file-sink.
    got=$(gexec "$h" 30 "stat -c '%a %U:%G' /var/lib/hoprelay /var/lib/hoprelay/$h.records" | tr '\n' ' ')
    [[ $got == "750 hoprelay:hoprelay 640 hoprelay:hoprelay " ]] || {
      fail "walkthrough: on $h, /var/lib/hoprelay and $h.records are '$got', want 750 and 640 hoprelay:hoprelay"
      return
    }
  done
  # Step 7: the topology changed on every host and reloaded; then stopped, head first.
  sed -i 's/^slots = 64$/slots = 64\n\n# reloaded/' "$W/topology.toml"
  for h in "${HOSTS[@]}"; do
    cp "$W/topology.toml" "$W/$h/ctl/topology.toml"
    out=$(gexec "$h" 60 "install -m 0640 -g hoprelay /run/cluster/topology.toml /etc/hoprelay/topology.toml &&
      systemctl reload hoprelayd@$h 2>&1 && systemctl status hoprelayd@$h --no-pager | grep -F '(topology reloaded)'") || {
      fail "walkthrough: step 7, reload on $h: $out"
      return
    }
  done
  for h in a b c1 c2; do
    out=$(gexec "$h" 60 "systemctl stop hoprelayd@$h 2>&1; systemctl show -p Result --value hoprelayd@$h") || true
    [[ $out == success ]] || {
      fail "walkthrough: step 7, systemctl stop hoprelayd@$h: result '$out'"
      return
    }
  done
  pass "walkthrough (docs/operations.md, step for step): validate on each host, enable --now downstream first, status line, a 6 MB file fed to a arrives byte for byte in c1's and c2's file-sink records, hoprelay status shows 4 nodes up, reload on every host, stop head first: every unit's result success"
}

# 2. The relay's host crashes under traffic (its qemu killed) and boots again: a's link to it
#    fails (no transport acknowledgement for 10 s: verbs' send watchdog, TCP's user timeout),
#    its enabled unit starts at boot, a replays, both sinks get everything exactly once. Over
#    verbs the host stays down until Prometheus's node-down alert fires, and the alert resolves
#    once it is back; over TCP it boots again at once (the alert does not depend on the
#    transport, and a minute of waiting is enough once).
host_crash_scenario() {
  local transport=$1 name="host crash over $1" out t0 timeouts alert=
  traffic "$transport" "crash-$transport" 100 || { fail "$name: the nodes did not start"; return; }
  t0=$(date +%s)
  crash b
  if [[ $transport == verbs ]]; then
    # 1 minute of failed scrapes (the rule's `for`).
    if ! out=$(PROM_WAIT=150 prom_wait 'ALERTS{alertname="HoprelayNodeDown",alertstate="firing"}' "b 1"); then
      fail "$name: HoprelayNodeDown did not fire for b: $out"
      boot b
      wait_ready b
      return
    fi
    alert="HoprelayNodeDown fired and resolved, "
  fi
  boot b
  wait_ready b || { fail "$name: b did not boot again"; return; }
  # Nobody starts it: systemd does, at boot, because it is enabled (ready once its links
  # to c1 and c2 are up again).
  if ! out=$(gexec b 240 "for i in \$(seq 400); do systemctl is-active -q hoprelayd@b && exit 0; sleep 0.5; done; systemctl status hoprelayd@b --no-pager; exit 1"); then
    echo "$out"
    fail "$name: hoprelayd@b did not start at boot"
    return
  fi
  # a noticed the dead host by itself, before b's reboot could reset anything: the link
  # failed on the 10 s bound, not on TCP's 15 minutes of retransmissions or a reset.
  if ! grep -q "outbound link to b down: no transport acknowledgement" <<<"$(since a "$t0")"; then
    fail "$name: a did not fail its link to b's dead host (no 'no transport acknowledgement' in its journal)"
    return
  fi
  if [[ -n $alert ]] && ! out=$(prom_wait 'absent(ALERTS{alertname="HoprelayNodeDown"})' " 1"); then
    fail "$name: HoprelayNodeDown did not resolve: $out"
    return
  fi
  timeouts=
  if [[ $transport == verbs ]]; then
    timeouts=$(scrape a 'hoprelay_rdma_connect_timeouts_total{peer="b"}')
    timeouts=", ${timeouts:-0} connect timeouts to b counted on a"
  fi
  after_traffic "$name" "crash-$transport" \
    "b's guest killed and booted again under traffic: a failed its link (no transport acknowledgement for 10 s), ${alert}hoprelayd@b started at boot$timeouts"
}

# 3. A cable pulled for 10 s under traffic (b's NIC, qemu's set_link), then plugged in again.
cable_pull_scenario() {
  local transport=$1
  traffic "$transport" "cable-$transport" 100 || {
    fail "cable pull over $transport: the nodes did not start"
    return
  }
  monitor b "set_link n0 off"
  sleep 10
  monitor b "set_link n0 on"
  after_traffic "cable pull over $transport" "cable-$transport" "b's link down for 10 s under traffic"
}

# 4. A slow, lossy link: c1 delays what it sends by 5 ms and loses 1 % of it (tc netem in its
#    guest: the ACKs and credits to b). Everything arrives; the rate is reported.
netem_scenario() {
  local transport=$1 tag=netem-$1 out t0 t1
  deploy "$transport" "$tag" || { fail "netem over $transport: the nodes did not start"; return; }
  if ! out=$(gexec c1 30 "tc qdisc replace dev eth0 root netem delay 5ms loss 1% 2>&1"); then
    fail "netem over $transport: tc in c1: $out"
    return
  fi
  t0=$(date +%s%N)
  out=$(gexec a 600 "hoprelay send --topology /etc/hoprelay/topology.toml --to a \
      --count $COUNT --size 1000 --connect-timeout 30") || {
    gexec c1 30 "tc qdisc del dev eth0 root" >/dev/null
    fail "netem over $transport: hoprelay send failed: $out"
    return
  }
  out=$(exact "$tag" "$COUNT")
  local ok=$?
  t1=$(date +%s%N)
  gexec c1 30 "tc qdisc del dev eth0 root" >/dev/null
  ((ok == 0)) || { fail "netem over $transport: $out"; return; }
  pass "netem over $transport: 5 ms delay and 1 % loss on c1's link: $COUNT each at c1 and c2, exactly once, in $(((t1 - t0) / 1000000)) ms ($((COUNT * 1000000000 / (t1 - t0))) messages/s under TCG)"
}

# 5-7. What an operator does with systemctl, under one stream: a reload with a changed stage
#    (applied, shown by `systemctl status`), the watchdog killing a frozen daemon (SIGSTOP) and
#    systemd restarting it, and `systemctl stop` draining (a replays nothing afterwards).
systemd_scenario() {
  local transport=$1 tag=ops-$1 out h pid t0 before after
  traffic "$transport" "$tag" 40 || { fail "systemd over $transport: the nodes did not start"; return; }
  # 5. The same file, with a stage at b, to every host; every node reloaded.
  topology cluster "$transport" "$(verify_sinks "$tag")" '{ plugin = "passthrough" }' >"$W/topology.toml"
  for h in "${HOSTS[@]}"; do
    cp "$W/topology.toml" "$W/$h/ctl/topology.toml"
    out=$(gexec "$h" 60 "install -m 0644 /run/cluster/topology.toml /etc/hoprelay/topology.toml &&
      sync && systemctl reload hoprelayd@$h 2>&1") || { fail "systemd over $transport: reload on $h: $out"; return; }
  done
  if ! out=$(gexec b 30 "systemctl status hoprelayd@b --no-pager | grep 'Status: \"running: .*(topology reloaded)\"'"); then
    fail "systemd over $transport: systemctl status of b does not show the reload: $(gexec b 30 "systemctl status hoprelayd@b --no-pager" | head -5)"
    return
  fi
  local deadline=$((SECONDS + 60))
  until [[ $(scrape b 'hoprelay_config_reloads_total{result="success"}') == 1 &&
    $(scrape b 'hoprelay_stage_messages_total{stage="passthrough",verdict="forward"}') -gt 0 ]] 2>/dev/null; do
    ((SECONDS < deadline)) || { fail "systemd over $transport: b's new stage did not take messages after the reload"; return; }
    sleep 1
  done
  # 6. A frozen daemon: systemd's watchdog (WatchdogSec=10) aborts it and restarts it.
  t0=$(date +%s)
  local restarts
  restarts=$(gexec b 30 "systemctl show -p NRestarts --value hoprelayd@b")
  pid=$(gexec b 30 "systemctl show -p MainPID --value hoprelayd@b")
  gexec b 30 "kill -STOP $pid" >/dev/null
  if ! out=$(gexec b 120 "for i in \$(seq 200); do
      [ \"\$(systemctl show -p NRestarts --value hoprelayd@b)\" -gt $restarts ] && systemctl is-active -q hoprelayd@b && exit 0
      sleep 0.5; done; systemctl status hoprelayd@b --no-pager; exit 1"); then
    fail "systemd over $transport: the watchdog did not restart the frozen hoprelayd@b: $out"
    return
  fi
  if ! grep -q "Watchdog timeout" <<<"$(gexec b 30 "journalctl -u hoprelayd@b --since @$t0 --no-pager")"; then
    fail "systemd over $transport: hoprelayd@b restarted, but not by its watchdog"
    return
  fi
  # 7. A planned stop drains: b acknowledges everything it took before it closes its links, so
  #    a has nothing to replay to it.
  sleep 5
  before=$(scrape a 'hoprelay_messages_replayed_total{peer="b"}')
  out=$(gexec b 60 "systemctl stop hoprelayd@b 2>&1") || { fail "systemd over $transport: stop: $out"; return; }
  sleep 3
  after=$(scrape a 'hoprelay_messages_replayed_total{peer="b"}')
  if [[ -z $before || $before != "$after" ]]; then
    fail "systemd over $transport: a replayed $((${after:-0} - ${before:-0})) messages to b after systemctl stop (before: '$before', after: '$after'): the stop did not drain"
    return
  fi
  out=$(gexec b 30 "systemctl start --no-block hoprelayd@b 2>&1") || { fail "systemd over $transport: start: $out"; return; }
  after_traffic "systemd over $transport" "$tag" \
    "under one stream: systemctl reload with a new stage at b (applied, in systemctl status), b frozen with SIGSTOP and restarted by its watchdog, systemctl stop of b drained (a replayed 0 to it)"
}

# 9. b's RDMA device removed under traffic and added back 3 s later (`rdma link delete rxe0`, as
#    a driver reset or a reconfiguration does). rxe cannot take the device from its users, so the
#    removal completes only once hoprelayd@b has let go of it: its node goes at once, the
#    process waits for the device, and once it is back exits (69) for systemd to start it on
#    it, once; a replays what b had not acknowledged.
device_removal_scenario() {
  local transport=$1 name="device removal at b over $1" out t0 restarts journal
  traffic "$transport" "devrm-$transport" 100 || { fail "$name: the nodes did not start"; return; }
  restarts=$(gexec b 30 "systemctl show -p NRestarts --value hoprelayd@b")
  t0=$(date +%s)
  if ! out=$(gexec b 60 "rdma link delete rxe0 && systemctl is-active -q hoprelayd@b && sleep 3 &&
      rdma link add rxe0 type rxe netdev \$(cat /run/cluster/nic) 2>&1"); then
    fail "$name: rdma link delete / add on b: ${out:-no answer within 60 s (the removal waits for a process)}"
    return
  fi
  if ! out=$(gexec b 120 "for i in \$(seq 200); do
      [ \"\$(systemctl show -p NRestarts --value hoprelayd@b)\" -gt $restarts ] && systemctl is-active -q hoprelayd@b && exit 0
      sleep 0.5; done; systemctl status hoprelayd@b --no-pager; exit 1"); then
    fail "$name: systemd did not run hoprelayd@b again: $out"
    return
  fi
  journal=$(since b "$t0")
  if ! grep -q "the node has let go of it" <<<"$journal" ||
    ! grep -q "RDMA device rxe0 serves ${IP[b]}:7000: exiting" <<<"$journal"; then
    fail "$name: hoprelayd@b did not say that it let go of the device and exited once it was back"
    return
  fi
  after_traffic "$name" "devrm-$transport" \
    "rdma link delete rxe0 on b under traffic completed while hoprelayd@b ran (its node gone, waiting for the device), the device added back 3 s later, hoprelayd@b exited 69 and was started again by systemd ($(($(gexec b 30 "systemctl show -p NRestarts --value hoprelayd@b") - restarts)) restart)"
}

# 10-11. A rolling upgrade (docs/operations.md, "Upgrading host by host"): every host first
#    gets the previous release's packages (the release at 97db411, wire protocol 6, built from
#    the repository's history by scripts/previous-release.sh) and runs its node on them; then,
#    under one stream from that release's `hoprelay send` (and its libhoprelay), `dpkg -i` of
#    this release's packages host by host in the ORDER given, each host waited for until the
#    package's postinst has restarted its node on the new binary and it is `active` (its
#    downstream links up) before the next. Each upgraded node next to a host still on the old
#    release (on a, also the old producer) must log a link of wire protocol 6; the stream
#    must outlast the last upgrade; every send exits 0 and both sinks count every message once.
upgrade() { # upgrade TRANSPORT ORDER-NAME HOST...
  local transport=$1 name="rolling upgrade, $2, over $1" tag=upg-$2-$1 h n pid t0 out took=()
  shift 2
  local batch=${CLUSTER_UPGRADE_BATCH:-600} rate=${CLUSTER_UPGRADE_RATE:-30}
  local -A old=([a]=1 [b]=1 [c1]=1 [c2]=1)
  local -A next_to=([a]="b" [b]="a c1 c2" [c1]="b" [c2]="b")
  out=$(install_packages old "${HOSTS[@]}" 2>&1) || { fail "$name: $out"; return; }
  for h in "${HOSTS[@]}"; do
    out=$(gexec "$h" 30 "hoprelayd --version")
    grep -qx "wire protocol: 6" <<<"$out" || { fail "$name: $h does not run the old release: $out"; return; }
  done
  deploy "$transport" "$tag" || { fail "$name: the old nodes did not start"; return; }
  # The stream: the old release's `hoprelay send` and libhoprelay (copied aside, as an
  # application keeps running on the library it loaded), batch after batch of BATCH messages at
  # RATE a second until told to stop after the last upgrade, so that it spans every upgrade
  # however long they take (30-65 s each under TCG) and ends soon after. Each batch is a
  # producer of its own, each must exit 0. Prints the number of batches.
  rm -f "$W/a/ctl/stream.stop"
  gstart a "mkdir -p /var/tmp/old-producer &&
    cp /usr/bin/hoprelay /usr/lib/x86_64-linux-gnu/libhoprelay.so.1 /var/tmp/old-producer/ || exit 1
    n=0
    while [ ! -e /run/cluster/stream.stop ]; do
      LD_LIBRARY_PATH=/var/tmp/old-producer /var/tmp/old-producer/hoprelay send \
        --topology /etc/hoprelay/topology.toml --to a --count $batch --size 1000 --rate $rate \
        --connect-timeout 60 2>&1 || { echo \"batch \$((n + 1)) failed\"; exit 1; }
      n=\$((n + 1))
    done
    echo \"batches: \$n\""
  local stream=$GID deadline=$((SECONDS + 120))
  until (($(report c1 "$tag" received || echo 0) >= rate * 5)); do
    ((SECONDS < deadline)) || { fail "$name: nothing reached c1"; return; }
    sleep 1
  done
  for h in "$@"; do
    t0=$(date +%s)
    pid=$(gexec "$h" 30 "systemctl show -p MainPID --value hoprelayd@$h")
    out=$(gexec "$h" 300 "$(dpkg_install new "$h")") ||
      { fail "$name: dpkg -i on $h: $out"; return; }
    # The postinst queued the node's restart (try-restart, --no-block): a new process, active.
    out=$(gexec "$h" 200 "for i in \$(seq 360); do p=\$(systemctl show -p MainPID --value hoprelayd@$h)
        [ \"\$p\" != $pid ] && [ \"\$p\" != 0 ] && systemctl is-active -q hoprelayd@$h && exit 0
        sleep 0.5; done; systemctl status hoprelayd@$h --no-pager; exit 1") ||
      { fail "$name: hoprelayd@$h did not run again after dpkg -i: $out"; return; }
    old[$h]=0
    out=$(gexec "$h" 30 "hoprelayd --version")
    grep -q "^wire protocol: .* (speaks 6 to" <<<"$out" || { fail "$name: $h after dpkg -i: $out"; return; }
    # Next to an old host (a: also next to the old producer), a link that speaks version 6.
    local beside=0
    [[ $h != a ]] || beside=1
    for n in ${next_to[$h]}; do ((old[$n])) && beside=1; done
    if ((beside)); then
      local deadline=$((SECONDS + 60))
      # (Not `since ... | grep -q`: under pipefail, a journal longer than the pipe's buffer
      # gets SIGPIPE once grep has its match, and the wait would go on to its deadline.)
      until grep -q "wire protocol 6: the peer's release is older" <<<"$(since "$h" "$t0")"; do
        ((SECONDS < deadline)) || { fail "$name: $h, next to a host of the old release, logged no link of wire protocol 6"; return; }
        sleep 2
      done
    fi
    took+=("$h $(($(date +%s) - t0)) s")
  done
  [[ ! -s $W/a/ctl/cmd/$stream.rc ]] || { fail "$name: the stream ended early: $(gwait a "$stream" 1)"; return; }
  touch "$W/a/ctl/stream.stop"
  out=$(gwait a "$stream" 300) || { fail "$name: hoprelay send failed: $(tail -n 5 <<<"$out")"; return; }
  local batches
  batches=$(sed -n 's/^batches: //p' <<<"$out")
  out=$(exact "$tag" $((batches * batch))) || { fail "$name: $out"; return; }
  pass "$name: every host from the release at 97db411 (wire 6) to this one by dpkg -i, in the order $* ($(IFS=,; echo "${took[*]}")), under one stream from the old hoprelay send and libhoprelay ($batches batches of $batch at $rate a second, each exiting 0), each upgraded node next to an old host logging wire protocol 6; $((batches * batch)) each at c1 and c2, exactly once"
}
upgrade_leaves_first_scenario() { upgrade "$1" leaves-first c1 c2 b a; }
upgrade_head_first_scenario() { upgrade "$1" head-first a b c1 c2; }

# 8. Through Prometheus: every node up, and what the sinks received as a rate's increase.
prometheus_view() {
  local deadline=$((SECONDS + 60)) up
  while :; do
    up=$(promql 'up{job="hoprelay"} == 1' | wc -l)
    ((up == 4)) && break
    ((SECONDS < deadline)) || {
      fail "prometheus: $up of 4 nodes up: $(promql 'up{job="hoprelay"}' | tr '\n' ' ')"
      return
    }
    sleep 2
  done
  pass "prometheus: scrapes all 4 hosts across the bridge (up == 1 for a, b, c1, c2)"
}

# --- run -----------------------------------------------------------------------------------
scenarios=("$@")
# Every scenario but the walkthrough and Prometheus's view runs over either transport:
# NAME-verbs or NAME-tcp (NAME alone is verbs). The default set, sized for CI's time, covers each
# fault once: the walkthrough is verbs (transport = "auto" on hosts with rxe0). A host crash over
# TCP is host-crash-tcp, by hand (CI proves TCP's dead-peer bound on loopback: faults_test.cpp).
((${#scenarios[@]})) || scenarios=(walkthrough broadcast-tcp prometheus systemd-tcp host-crash
  cable-pull netem device-removal)
# Every scenario needs nodes running: Prometheus's view needs one before it.
[[ ${scenarios[0]} != prometheus ]] || scenarios=(broadcast-tcp "${scenarios[@]}")
for s in "${scenarios[@]}"; do
  case $s in
    walkthrough | prometheus) ;;
    broadcast | broadcast-tcp | broadcast-verbs | systemd | systemd-tcp | systemd-verbs | \
      host-crash | host-crash-tcp | host-crash-verbs | cable-pull | cable-pull-tcp | \
      cable-pull-verbs | netem | netem-tcp | netem-verbs | device-removal | device-removal-verbs | \
      upgrade-leaves-first | upgrade-leaves-first-tcp | upgrade-leaves-first-verbs | \
      upgrade-head-first | upgrade-head-first-tcp | upgrade-head-first-verbs) ;;
    *) die "unknown scenario $s (walkthrough, prometheus, device-removal, or broadcast, systemd, host-crash, cable-pull, netem, upgrade-leaves-first, upgrade-head-first with -tcp or -verbs)" ;;
  esac
done
# The rolling upgrades start from the previous release's packages (built once, cached).
OLD=
if [[ " ${scenarios[*]}" == *" upgrade-"* ]]; then
  OLD=$("$REPO/scripts/previous-release.sh") || die "no packages of the previous release"
fi
t0=$SECONDS
for h in "${HOSTS[@]}"; do boot "$h"; done
start_prometheus
wait_ready "${HOSTS[@]}" || die "the guests did not boot"
echo "cluster: 4 guests up after $((SECONDS - t0)) s"
# Installed from the package files as docs/operations.md tells an operator to, with dpkg
# rather than apt: every dependency is there already (the guests run this machine's
# userspace), and apt's resolver costs a minute per guest under TCG. The package's own
# maintainer scripts (the hoprelay user, systemd's daemon-reload) run in each guest.
# (The rolling upgrades install the previous release's first: alone, they skip this.)
if [[ ${scenarios[0]} != upgrade-* ]]; then
  install_packages new "${HOSTS[@]}" || die "the package did not install"
  echo "cluster: package installed on every host after $((SECONDS - t0)) s"
fi
for s in "${scenarios[@]}"; do
  t1=$SECONDS
  case $s in
    walkthrough) walkthrough ;;
    prometheus) prometheus_view ;;
    *-tcp) scenario=${s%-tcp} transport=tcp ;;
    *) scenario=${s%-verbs} transport=verbs ;;
  esac
  [[ $s == walkthrough || $s == prometheus ]] || "${scenario//-/_}_scenario" "$transport"
  echo "cluster: $s took $((SECONDS - t1)) s"
done
echo "cluster: $passes passed, $failures failed in $((SECONDS - t0)) s"
# Each failure again, short, after the journals it printed: a CI log cut to its end keeps them.
for f in "${failed[@]}"; do echo "cluster: failed: $f"; done
if [[ -n ${CLUSTER_HOLD:-} ]]; then
  echo "cluster: held up (namespace $NS, files in $W): press Enter to power off"
  read -r _ </dev/tty || true
fi
exit $((failures > 0))

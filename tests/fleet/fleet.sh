#!/usr/bin/env bash
# A fleet on one machine (tests/fleet/README.md): N emulated hosts, each a network namespace
# with one NIC (a veth into a bridge that lives in a namespace of its own), an address from the
# benchmarking range 198.18.0.0/15, and both directions of its NIC shaped to RATE with tbf (its
# egress in its namespace, its ingress on the bridge's side). Traffic never leaves the
# namespaces this script makes; every namespace's name starts with FLEET-.
#
#   fleet.sh up FLEET N RATE          make it (RATE as tc writes it: 200mbit, 1gbit)
#   fleet.sh hosts FLEET [PORT]       the hosts file for `hoprelay plan`: one address a line
#   fleet.sh exec FLEET I CMD...      run CMD on host I (in its namespace)
#   fleet.sh kill FLEET I [SIGNAL]    signal every process of host I (default KILL)
#   fleet.sh lose FLEET I             host I vanishes as in a power loss: its NIC goes first
#                                     (nothing more leaves it: no reset, no FIN), then its
#                                     processes and its namespace; for good
#   fleet.sh throttle FLEET I RATE    change host I's NIC rate (both directions)
#   fleet.sh sent FLEET               bytes each host has sent since up: "I BYTES RATE"
#   fleet.sh down FLEET               kill every process of the fleet and remove it
#
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN for namespaces), iproute2 and the tbf qdisc.
# `up` removes whatever it made when it fails; `down` may be run any number of times.
set -euo pipefail

die() {
  echo "fleet.sh: $*" >&2
  exit 1
}

ns_host() { echo "$1-h$2"; }
ns_bridge() { echo "$1-br"; }
# Host I's address: 198.18.(I / 250).(I % 250 + 1).
address() { echo "198.18.$(($1 / 250)).$(($1 % 250 + 1))"; }
# The fleet's N, which `up` keeps as the bridge's alias (a host lost does not renumber the
# others); 0 when there is no such fleet.
count_of() {
  local alias
  alias=$(ip -n "$(ns_bridge "$1")" -o link show br0 2>/dev/null | sed -n 's/.* alias hosts=\([0-9]*\).*/\1/p')
  echo "${alias:-0}"
}
# The namespaces, one name a line. Read whole by grep (a here-string, not a pipe: under
# pipefail, `grep -q` leaving at its first match fails a writer that has more to write).
namespaces() { ip netns list | awk '{print $1}'; }
lost() { ! grep -qx "$(ns_host "$1" "$2")" <<<"$(namespaces)"; } # FLEET I

# tbf's bucket: 10 ms at RATE, at least 128 KiB (a GSO segment of 64 KiB must fit, or tbf
# drops it for good).
burst_for() {
  local rate=$1 n unit bits
  n=${rate%%[a-zA-Z]*}
  unit=${rate#"$n"}
  case ${unit,,} in
    kbit) bits=$((n * 1000)) ;;
    mbit) bits=$((n * 1000000)) ;;
    gbit) bits=$((n * 1000000000)) ;;
    *) die "rate '$rate': write it as NUMBER followed by kbit, mbit or gbit (e.g. 200mbit)" ;;
  esac
  local bytes=$((bits / 8 / 100))
  ((bytes < 131072)) && bytes=131072
  echo "$bytes"
}

shape() { # shape NS DEV RATE [add|change]
  local burst
  burst=$(burst_for "$3")
  tc -n "$1" qdisc "${4:-add}" dev "$2" root tbf rate "$3" burst "$burst" latency 100ms
}

# A NIC of RATE is RATE each way: host I's egress is shaped in its namespace, what the bridge
# sends it (its ingress, e.g. a swarm's many peers at once) on the bridge's end of its veth.
shape_host() { # shape_host FLEET I RATE [add|change]
  shape "$(ns_host "$1" "$2")" eth0 "$3" "${4:-add}" && shape "$(ns_bridge "$1")" "v$2" "$3" "${4:-add}"
}

check_name() {
  [[ $1 =~ ^[a-z][a-z0-9]{0,9}$ ]] ||
    die "fleet name '$1': 1 to 10 lower-case letters and digits, starting with a letter"
}

up() {
  local fleet=$1 n=$2 rate=$3 i
  check_name "$fleet"
  if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 1 || n > 500)); then
    die "N '$n': from 1 to 500 hosts (the address range holds 500)"
  fi
  [[ $(id -u) == 0 ]] || die "needs root (network namespaces, CAP_NET_ADMIN): run it with sudo"
  command -v tc >/dev/null || die "tc missing: apt-get install iproute2"
  burst_for "$rate" >/dev/null
  if grep -q "^$fleet-" <<<"$(namespaces)"; then
    die "a fleet named $fleet exists already: 'fleet.sh down $fleet', or choose another name"
  fi
  # Whatever stops it from here on (a failed command, die) removes what it made.
  trap 'down "$fleet" >/dev/null 2>&1 || true' EXIT
  local br
  br=$(ns_bridge "$fleet")
  ip netns add "$br"
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 up
  ip -n "$br" link set br0 alias "hosts=$n"
  for ((i = 0; i < n; i++)); do
    local h
    h=$(ns_host "$fleet" "$i")
    ip netns add "$h"
    # Both ends made where they live: no name is ever taken in the caller's namespace.
    ip link add "v$i" netns "$br" type veth peer name eth0 netns "$h"
    ip -n "$br" link set "v$i" master br0 up
    ip -n "$h" link set lo up
    ip -n "$h" addr add "$(address "$i")/15" dev eth0
    ip -n "$h" link set eth0 up
    if ! shape_host "$fleet" "$i" "$rate" 2>/tmp/fleet-tc.$$; then
      local why
      why=$(cat /tmp/fleet-tc.$$)
      rm -f /tmp/fleet-tc.$$
      die "tc could not shape host $i to $rate: $why (is the tbf qdisc, sch_tbf, available?)"
    fi
    rm -f /tmp/fleet-tc.$$
  done
  trap - EXIT
  echo "fleet $fleet: $n hosts at $rate each, $(address 0) .. $(address $((n - 1)))"
}

hosts() {
  local fleet=$1 port=${2:-7001} n i
  n=$(count_of "$fleet")
  ((n > 0)) || die "no fleet named $fleet: 'fleet.sh up $fleet N RATE' first"
  for ((i = 0; i < n; i++)); do echo "$(address "$i"):$port"; done
}

host_ns() {
  local h
  h=$(ns_host "$1" "$2")
  if ! grep -qx "$h" <<<"$(namespaces)"; then
    (($2 < $(count_of "$1"))) && die "host $2 of fleet $1 is gone (fleet.sh lose)"
    die "fleet $1 has no host $2"
  fi
  echo "$h"
}

sent() {
  local fleet=$1 n i
  n=$(count_of "$fleet")
  for ((i = 0; i < n; i++)); do
    if lost "$fleet" "$i"; then
      echo "$i 0 lost"
      continue
    fi
    tc -n "$(ns_host "$fleet" "$i")" -s qdisc show dev eth0 |
      awk -v i="$i" '/qdisc tbf/ {r = $0; sub(/.* rate /, "", r); sub(/ .*/, "", r)}
                     /Sent/ {print i, $2, r; exit}'
  done
}

kill_host() { # kill_host NS SIGNAL
  local pids
  pids=$(ip netns pids "$1" 2>/dev/null || true)
  # shellcheck disable=SC2086  # one word per pid
  [[ -z $pids ]] || kill "-$2" $pids 2>/dev/null || true
}

# lose FLEET I: the cable first, so that what the kernel sends for the dying processes (resets,
# FINs) reaches no one: its peers learn of it only from silence, as after a power loss.
lose() {
  local ns
  ns=$(host_ns "$1" "$2")
  ip -n "$ns" link del eth0 # the veth pair: the bridge's end goes with it
  kill_host "$ns" KILL
  gone "$ns"
}

# gone NS: remove a namespace whose processes were killed.
gone() {
  # A process that has not died yet keeps its namespace alive: wait for it, briefly.
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    [[ -z $(ip netns pids "$1" 2>/dev/null) ]] && break
    sleep 0.1
  done
  ip netns del "$1" 2>/dev/null || true
}

down() {
  local fleet=$1 ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^$fleet-" || true); do kill_host "$ns" KILL; done
  for ns in $(ip netns list | awk '{print $1}' | grep "^$fleet-" || true); do gone "$ns"; done
}

cmd=${1:-}
[[ -n $cmd ]] || die "usage: fleet.sh up|hosts|exec|kill|lose|throttle|sent|down FLEET ... (tests/fleet/README.md)"
shift
case $cmd in
  up)
    (($# == 3)) || die "usage: fleet.sh up FLEET N RATE"
    up "$@"
    ;;
  hosts) hosts "$@" ;;
  exec)
    (($# >= 3)) || die "usage: fleet.sh exec FLEET I CMD..."
    ns=$(host_ns "$1" "$2")
    shift 2
    exec ip netns exec "$ns" "$@"
    ;;
  kill)
    (($# >= 2)) || die "usage: fleet.sh kill FLEET I [SIGNAL]"
    kill_host "$(host_ns "$1" "$2")" "${3:-KILL}"
    ;;
  lose)
    (($# == 2)) || die "usage: fleet.sh lose FLEET I"
    lose "$@"
    ;;
  throttle)
    (($# == 3)) || die "usage: fleet.sh throttle FLEET I RATE"
    host_ns "$1" "$2" >/dev/null
    shape_host "$1" "$2" "$3" change
    ;;
  sent) sent "$@" ;;
  down)
    (($# == 1)) || die "usage: fleet.sh down FLEET"
    down "$1"
    ;;
  *) die "unknown command '$cmd': up, hosts, exec, kill, lose, throttle, sent or down" ;;
esac

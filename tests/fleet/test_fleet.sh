#!/usr/bin/env bash
# ctest fleet.suite (tests/fleet/README.md): a fleet of FLEET_HOSTS hosts (default 16), each
# behind a NIC shaped to FLEET_RATE (default 200mbit), runs a topology that `hoprelay plan`
# wrote from the fleet's hosts file, in each shape of FLEET_SHAPES (default "chain tree:2"):
# hoprelayd on host 0 (the head), `hoprelay recv` on every other host (a relay keeps what it
# relays), and `hoprelay send` of FLEET_MIB MiB (default 32, random) on host 0. Every host's
# copy must be byte-equal (SHA-256), also host FLEET_KILL's (default 5), whose relay consumer is
# killed with SIGKILL half-way through the chain and started again with its --state-dir; the
# shaping must hold (host 0's NIC carried every byte it had to send, and no faster than its
# rate allows); it prints the time over the physical limit S/R and what each host sent.
# A shape SHAPE+lost (default last: tree:2+lost) runs with on_peer_down = "bypass", and host
# FLEET_LOSE (default 1, a relay) is lost for good a third into the stream as in a power loss
# (`fleet.sh lose`: its NIC, then its processes and namespace): its upstream learns of it only
# from silence (peer_dead_after = "2s"), stands in for it, and every other host's copy must
# still be byte-equal. A lost
# host is gone for the rest of the run, so such a shape comes last.
#   tests/fleet/test_fleet.sh BUILD_DIR
# Exit 77 (skipped) without root or network namespaces.
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
hosts_n=${FLEET_HOSTS:-16}
rate=${FLEET_RATE:-200mbit}
mib=${FLEET_MIB:-32}
shapes=${FLEET_SHAPES:-chain tree:2 tree:2+lost}
kill_at=${FLEET_KILL:-5}
lose=${FLEET_LOSE:-1}
fleet=hrf$$
hoprelay=$build/client/hoprelay
hoprelayd=$build/daemon/hoprelayd

if [[ $(id -u) != 0 ]] || ! ip netns add "$fleet-probe" 2>/dev/null; then
  echo "fleet.suite: skipped: needs root and network namespaces (ip netns add)"
  exit 77
fi
ip netns del "$fleet-probe"

work=$(mktemp -d /tmp/hoprelay-fleet.XXXXXX)
cleanup() {
  "$here/fleet.sh" down "$fleet" || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log; do
    [[ -s $f ]] && { echo "--- $f"; tail -n 20 "$f"; }
  done
  exit 1
}

"$here/fleet.sh" up "$fleet" "$hosts_n" "$rate"
"$here/fleet.sh" hosts "$fleet" >"$work/hosts.txt"
bytes=$((mib << 20))
head -c "$bytes" /dev/urandom >"$work/in.bin"
want=$(sha256sum <"$work/in.bin" | cut -d' ' -f1)
rate_bits=$(awk -v r="$rate" 'BEGIN { n = r + 0; u = tolower(substr(r, length(n "") + 1));
  m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : 1e9; printf "%.0f", n * m }')
limit=$(awk -v b="$bytes" -v r="$rate_bits" 'BEGIN { printf "%.3f", b * 8 / r }')

read -r -a shapes <<<"$shapes"
for ((s = 0; s + 1 < ${#shapes[@]}; s++)); do
  [[ ${shapes[s]} != *+lost ]] || fail "FLEET_SHAPES: ${shapes[s]} loses a host for good: put it last"
done
lost=-1 # the host lost, once it is
for shape in "${shapes[@]}"; do
  echo "== $shape: $hosts_n hosts at $rate, $mib MiB from host 0; the limit S/R is $limit s"
  topo=$work/topology.toml
  "$hoprelay" plan --hosts "$work/hosts.txt" --shape "${shape%+lost}" --name fleet >"$topo" ||
    fail "hoprelay plan --shape ${shape%+lost}"
  if [[ $shape == *+lost ]]; then
    ((lose > 0 && lose < hosts_n)) || fail "FLEET_LOSE=$lose: a host from 1 to $((hosts_n - 1))"
    grep -q "^\[nodes\.h$lose\]" <<<"$(awk '/^\[nodes\./ {n = $0} /^downstream = / {print n}' "$topo")" ||
      fail "$shape: host $lose is no relay in this shape: nothing to bypass (FLEET_LOSE)"
    sed -i 's/^\[pipeline\]$/&\non_peer_down = "bypass"\npeer_down_timeout = "500ms"\npeer_dead_after = "2s"/' "$topo"
  fi
  # Node i is h<i>: the head h0 is a daemon, every other host a consumer that keeps a copy
  # (and relays it, where the plan gives it downstream peers).
  keepers=()
  for ((i = 1; i < hosts_n; i++)); do keepers+=("h$i"); done
  fanout=$(awk '/^\[nodes\.h0\]/ {on = 1; next} /^\[/ {on = 0}
                on && /^downstream = / {print gsub(/"/, "") / 2}' "$topo")
  "$here/fleet.sh" sent "$fleet" >"$work/sent.before"
  "$here/fleet.sh" exec "$fleet" 0 "$hoprelayd" --topology "$topo" --node h0 \
    --log-level warn >"$work/h0.log" 2>&1 &
  disown $! # killed at the end of the shape: no "Killed" line from this shell
  # start_recv NODE: its consumer, in the background; its pid in recv_pid[NODE]. The one of
  # host $kill_at in the chain keeps a durable position (it is killed below).
  declare -A recv_pid=()
  start_recv() {
    local extra=()
    [[ $shape == chain && $1 == "h$kill_at" ]] && extra=(--state-dir "$work/state-$1")
    "$here/fleet.sh" exec "$fleet" "${1#h}" "$hoprelay" recv --topology "$topo" --node "$1" \
      --output "$work/$1.out" --timeout 120 "${extra[@]}" >>"$work/$1.log" 2>&1 &
    recv_pid[$1]=$!
  }
  rm -rf "$work"/state-*
  for n in "${keepers[@]}"; do
    rm -f "$work/$n.out" "$work/$n.log"
    start_recv "$n"
  done
  start=$(date +%s.%N)
  "$here/fleet.sh" exec "$fleet" 0 "$hoprelay" send --topology "$topo" --to h0 \
    --file "$work/in.bin" --connect-timeout 30 --close-timeout 0 >"$work/send.log" 2>&1 &
  send_pid=$!
  if [[ $shape == chain ]] && ((kill_at < hosts_n)); then
    # Half-way through, host $kill_at's relay consumer dies and comes back.
    victim=h$kill_at
    for _ in $(seq 600); do
      (($(stat -c %s "$work/$victim.out" 2>/dev/null || echo 0) >= bytes / 2)) && break
      sleep 0.02
    done
    got=$(stat -c %s "$work/$victim.out" 2>/dev/null || echo 0)
    "$here/fleet.sh" kill "$fleet" "$kill_at" KILL
    wait "${recv_pid[$victim]}" 2>/dev/null || true
    ((got < bytes)) || fail "chain: $victim had all $bytes bytes before it could be killed"
    echo "chain: $victim's consumer killed with SIGKILL at $got bytes; started again"
    start_recv "$victim"
  fi
  if [[ $shape == *+lost ]]; then
    # A third of the way through, host $lose vanishes for good.
    for _ in $(seq 600); do
      (($(stat -c %s "$work/h$lose.out" 2>/dev/null || echo 0) >= bytes / 3)) && break
      sleep 0.02
    done
    got=$(stat -c %s "$work/h$lose.out" 2>/dev/null || echo 0)
    "$here/fleet.sh" lose "$fleet" "$lose"
    lost=$lose
    wait "${recv_pid[h$lose]}" 2>/dev/null || true
    ((got < bytes)) || fail "$shape: h$lose had all $bytes bytes before it could be lost"
    echo "$shape: host $lose lost (NIC, processes, namespace) at $got bytes of its copy"
  fi
  wait "$send_pid" || fail "$shape: hoprelay send: $(cat "$work/send.log")"
  for n in "${keepers[@]}"; do
    [[ $n == "h$lost" ]] && continue
    wait "${recv_pid[$n]}" || fail "$shape: hoprelay recv of $n failed: $(tail -n 3 "$work/$n.log")"
  done
  elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3f", e - s }')
  for n in "${keepers[@]}"; do
    [[ $n == "h$lost" ]] && continue
    got=$(sha256sum <"$work/$n.out" | cut -d' ' -f1)
    [[ $got == "$want" ]] || fail "$shape: $n's copy differs ($(stat -c %s "$work/$n.out") bytes)"
  done
  # The shaping held: host 0's NIC carried its fan-out's copies of every byte (the data did
  # cross the shaped links), and the time is at least what its rate allows for them.
  "$here/fleet.sh" sent "$fleet" >"$work/sent.after"
  # What each host sent during this shape's run: "I BYTES RATE".
  awk 'NR == FNR {b[$1] = $2; next} {print $1, $2 - b[$1], $3}' "$work/sent.before" \
    "$work/sent.after" >"$work/sent"
  sent0=$(awk '$1 == 0 {print $2}' "$work/sent")
  ((sent0 >= fanout * bytes)) ||
    fail "$shape: host 0 sent $sent0 bytes, less than $fanout x $bytes: not through its NIC?"
  awk -v e="$elapsed" -v l="$limit" -v f="$fanout" 'BEGIN { exit !(e >= 0.95 * f * l) }' ||
    fail "$shape: $elapsed s for $fanout copies at $rate: faster than the shaping allows"
  if ((lost > 0)); then
    # It was silence, not a reset, that failed the link, and the head stood in for the host.
    grep -q "no transport acknowledgement from the peer for 2 s" "$work/h0.log" ||
      fail "$shape: the head did not fail its link to h$lost on the dead-peer bound"
    grep -q "downstream h$lost down for 500ms: standing in for it" "$work/h0.log" ||
      fail "$shape: the head did not stand in for h$lost"
    echo "$shape: the head failed its link to h$lost on the dead-peer bound and stood in for it"
  fi
  echo "$shape: every host's copy byte-equal ($((${#keepers[@]} - (lost > 0))) and the source) in $elapsed s," \
    "$(awk -v e="$elapsed" -v l="$limit" 'BEGIN { printf "%.2f", e / l }') x S/R"
  awk -v e="$elapsed" '$3 == "lost" { printf "  host %s lost\n", $1; next }
    { printf "  host %s sent %.1f MiB (%.0f Mbit/s over the run; shaped to %s)\n",
      $1, $2 / 1048576, $2 * 8 / e / 1e6, $3 }' "$work/sent"
  for ((i = 0; i < hosts_n; i++)); do
    ((i == lost)) || "$here/fleet.sh" kill "$fleet" "$i" KILL
  done
  wait 2>/dev/null || true
done
echo "fleet.suite: ok"

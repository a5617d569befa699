#!/usr/bin/env bash
# ctest fleet.suite (tests/fleet/README.md): a fleet of FLEET_HOSTS hosts (default 16), each
# behind a NIC shaped to FLEET_RATE (default 200mbit), runs a topology that `hoprelay plan`
# wrote from the fleet's hosts file, in each shape of FLEET_SHAPES (default "chain tree:2"):
# hoprelayd on every relay, `hoprelay recv` on every leaf, and `hoprelay send` of FLEET_MIB MiB
# (default 32, random) on host 0. Every leaf's copy must be byte-equal (SHA-256); the shaping
# must hold (host 0's NIC carried every byte it had to send, and no faster than its rate
# allows); it prints the time over the physical limit S/R and what each host sent.
#   tests/fleet/test_fleet.sh BUILD_DIR
# Exit 77 (skipped) without root or network namespaces.
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
hosts_n=${FLEET_HOSTS:-16}
rate=${FLEET_RATE:-200mbit}
mib=${FLEET_MIB:-32}
shapes=${FLEET_SHAPES:-chain tree:2}
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

for shape in $shapes; do
  echo "== $shape: $hosts_n hosts at $rate, $mib MiB from host 0; the limit S/R is $limit s"
  topo=$work/topology.toml
  "$hoprelay" plan --hosts "$work/hosts.txt" --shape "$shape" --name fleet >"$topo" ||
    fail "hoprelay plan --shape $shape"
  # Node i is h<i>; a node with a downstream line is a relay, the others leaves.
  mapfile -t relays < <(awk '/^\[nodes\./ {n = $0; gsub(/^\[nodes\.|\]$/, "", n)}
                             /^downstream = / {print n}' "$topo")
  leaves=()
  for ((i = 0; i < hosts_n; i++)); do
    [[ " ${relays[*]} " == *" h$i "* ]] || leaves+=("h$i")
  done
  fanout=$(awk '/^\[nodes\.h0\]/ {on = 1; next} /^\[/ {on = 0}
                on && /^downstream = / {print gsub(/"/, "") / 2}' "$topo")
  "$here/fleet.sh" sent "$fleet" >"$work/sent.before"
  for n in "${relays[@]}"; do
    "$here/fleet.sh" exec "$fleet" "${n#h}" "$hoprelayd" --topology "$topo" --node "$n" \
      --log-level warn >"$work/$n.log" 2>&1 &
    disown $! # killed at the end of the shape: no "Killed" line from this shell
  done
  recv_pids=()
  for n in "${leaves[@]}"; do
    rm -f "$work/$n.out"
    "$here/fleet.sh" exec "$fleet" "${n#h}" "$hoprelay" recv --topology "$topo" --node "$n" \
      --output "$work/$n.out" --timeout 120 >"$work/$n.log" 2>&1 &
    recv_pids+=($!)
  done
  start=$(date +%s.%N)
  "$here/fleet.sh" exec "$fleet" 0 "$hoprelay" send --topology "$topo" --to h0 \
    --file "$work/in.bin" --connect-timeout 30 >"$work/send.log" 2>&1 ||
    fail "$shape: hoprelay send: $(cat "$work/send.log")"
  for p in "${recv_pids[@]}"; do wait "$p" || fail "$shape: a hoprelay recv failed"; done
  elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3f", e - s }')
  for n in "${leaves[@]}"; do
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
  echo "$shape: ${#leaves[@]} leaves byte-equal in $elapsed s," \
    "$(awk -v e="$elapsed" -v l="$limit" 'BEGIN { printf "%.2f", e / l }') x S/R"
  awk -v e="$elapsed" '{ printf "  host %s sent %.1f MiB (%.0f Mbit/s over the run; shaped to %s)\n",
    $1, $2 / 1048576, $2 * 8 / e / 1e6, $3 }' "$work/sent"
  for ((i = 0; i < hosts_n; i++)); do "$here/fleet.sh" kill "$fleet" "$i" KILL; done
  wait 2>/dev/null || true
done
echo "fleet.suite: ok"

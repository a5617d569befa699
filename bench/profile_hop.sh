#!/usr/bin/env bash
# Where a relay hop's time goes (docs/performance.md, "Where a hop's time goes"): the chain of
# bench/run.sh, hoprelay send -> a -> b -> c over TCP on loopback, carries SIZE-byte messages as
# fast as it can, and `perf record` samples the middle relay b alone (cpu-clock, kernel call
# graphs) for SECONDS while it does. bench/profile_hop_report.py puts each sample in a bucket by
# what b was doing (reading its inbound socket, writing its outbound one, waiting in epoll, its
# own code, copies) and prints the table, with b's CPU seconds per GB carried over the same
# window (from /proc, and b's metrics for the bytes), and the same for the reference measured in
# the same run: socat as the relay, read() and write() and nothing else.
#   bench/profile_hop.sh [--smoke] BUILD_DIR
# SIZES (default "65536 1048576"), SECONDS_PER_SIZE (default 5; --smoke: one size of 64 KiB, 1 s, and
# only a check that every number is there). Writes BUILD_DIR/bench/profile-hop/: perf.SIZE.data,
# samples.SIZE.txt (perf script), profile.txt (the table). Needs perf (Debian linux-perf) and
# permission to sample another process (root, or kernel.perf_event_paranoid <= 1); exit 77 without.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
bench_args "$@"

die() {
  echo "profile_hop.sh: $*" >&2
  exit 1
}
for b in "$hoprelayd" "$hoprelay"; do [[ -x $b ]] || die "$b is missing: build it first"; done
command -v socat >/dev/null || die "socat is missing (the reference relay): apt-get install socat"
if ! command -v perf >/dev/null || ! perf record -e cpu-clock -o /dev/null -- true >/dev/null 2>&1; then
  # ctest's bench.profile_hop_smoke counts 77 as skipped.
  echo "profile_hop.sh: perf cannot sample here: apt-get install linux-perf, and run as root" \
    "(or sysctl kernel.perf_event_paranoid=1)" >&2
  exit 77
fi

if ((smoke)); then
  read -r -a sizes <<<"65536"
  secs=1
  out=$build/bench/profile-hop-smoke
else
  read -r -a sizes <<<"${SIZES:-65536 1048576}"
  secs=${SECONDS_PER_SIZE:-5}
  out=$build/bench/profile-hop
fi
rm -rf "$out"
mkdir -p "$out"
bench_start

# metric PORT NAME: the sum of a counter over its labels.
metric() {
  curl -sf "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 ~ "^"n"({|$)" { s += $NF } END { printf "%.0f\n", s }'
}

rows=()
for size in "${sizes[@]}"; do
  topo=$out/chain-$size.toml
  read -r -a ports <<<"$(free_ports 4)"
  cat >"$topo" <<T
[pipeline]
name = "profile"
transport = "tcp"
slot_size = $(slot_size_for "$size")
slots = $(slots_for "$size")

[nodes.a]
listen = "127.0.0.1:${ports[0]}"
downstream = ["b"]
stage = { plugin = "passthrough" }

[nodes.b]
listen = "127.0.0.1:${ports[1]}"
metrics = "127.0.0.1:${ports[3]}"
downstream = ["c"]
stage = { plugin = "passthrough" }

[nodes.c]
listen = "127.0.0.1:${ports[2]}"
stage = { plugin = "verify-sink", report = "$out/c-$size.json" }
T
  declare -A pid=()
  for n in c b a; do
    "$hoprelayd" --topology "$topo" --node "$n" --log-level warn >"$out/$n-$size.log" 2>&1 &
    pid[$n]=$!
    pids+=("$!")
  done
  for _ in $(seq 100); do
    metric "${ports[3]}" hoprelay_link_up >/dev/null 2>&1 && break
    sleep 0.1
  done
  # More than the window takes: the producer is stopped once the profile is taken.
  "$hoprelay" send --topology "$topo" --to a --size "$size" --count 100000000 --connect-timeout 10 \
    >"$out/send-$size.log" 2>&1 &
  sender=$!
  for _ in $(seq 100); do
    (($(metric "${ports[3]}" hoprelay_forwarded_bytes_total) > 0)) && break
    sleep 0.1
  done
  sleep 1 # past the links' first credits: the steady state
  bytes0=$(metric "${ports[3]}" hoprelay_forwarded_bytes_total)
  ticks0=$(cpu_ticks "${pid[b]}")
  perf record -e cpu-clock -g -p "${pid[b]}" -o "$out/perf.$size.data" -- sleep "$secs" \
    >"$out/perf-record-$size.log" 2>&1
  ticks1=$(cpu_ticks "${pid[b]}")
  bytes1=$(metric "${ports[3]}" hoprelay_forwarded_bytes_total)
  kill -KILL "$sender" 2>/dev/null || true
  wait "$sender" 2>/dev/null || true
  for n in a b c; do kill -KILL "${pid[$n]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
  perf script -i "$out/perf.$size.data" -F comm,tid,ip,sym,dso >"$out/samples.$size.txt" 2>/dev/null
  cpu=$(awk -v t=$((ticks1 - ticks0)) -v h="$clk_tck" 'BEGIN { printf "%.3f", t / h }')
  rows+=("$size $((bytes1 - bytes0)) $cpu $out/samples.$size.txt")
done

# The reference, in the same run: socat relaying one byte stream with read() and write() of
# 256 KiB and nothing else (no framing, no acknowledgements, no slots): what a relay in user
# space costs at the least. Its bytes are what it wrote (/proc/PID/io).
read -r -a ports <<<"$(free_ports 2)"
socat -u -b 262144 "TCP-LISTEN:${ports[1]},bind=127.0.0.1,reuseaddr" OPEN:/dev/null &
pids+=("$!")
socat -u -b 262144 "TCP-LISTEN:${ports[0]},bind=127.0.0.1,reuseaddr" "TCP:127.0.0.1:${ports[1]}" &
relay=$!
pids+=("$relay")
for _ in $(seq 100); do
  grep -q ":${ports[0]} " <<<"$(ss -Hltn)" && grep -q ":${ports[1]} " <<<"$(ss -Hltn)" && break
  sleep 0.05
done
socat -u -b 262144 OPEN:/dev/zero "TCP:127.0.0.1:${ports[0]}" &
pids+=("$!")
sleep 1
written() { awk '$1 == "wchar:" {print $2}' "/proc/$relay/io"; }
bytes0=$(written)
ticks0=$(cpu_ticks "$relay")
perf record -e cpu-clock -g -p "$relay" -o "$out/perf.socat.data" -- sleep "$secs" \
  >"$out/perf-record-socat.log" 2>&1
ticks1=$(cpu_ticks "$relay")
bytes1=$(written)
stop_pids
wait 2>/dev/null || true
pids=()
perf script -i "$out/perf.socat.data" -F comm,tid,ip,sym,dso >"$out/samples.socat.txt" 2>/dev/null
cpu=$(awk -v t=$((ticks1 - ticks0)) -v h="$clk_tck" 'BEGIN { printf "%.3f", t / h }')
rows+=("socat $((bytes1 - bytes0)) $cpu $out/samples.socat.txt")

python3 -B "$here/profile_hop_report.py" --seconds "$secs" --smoke "$smoke" "${rows[@]}" |
  tee "$out/profile.txt"
echo "took $(($(date +%s) - started)) s; load average before $load_before, after" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/profile.txt"

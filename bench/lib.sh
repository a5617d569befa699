# Shell functions the benchmarks share (bench/run.sh, bench/tree.sh, bench/profile_hop.sh and
# others); sourced, not run.
# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables set here are the callers'

# bench_args "$@": [--smoke] BUILD_DIR; sets smoke (0 or 1), build (an absolute path) and the
# paths of the programs in it, hoprelayd and hoprelay, or prints the usage and exits.
bench_args() {
  smoke=0
  if [[ "${1:-}" == "--smoke" ]]; then smoke=1; shift; fi
  if [[ $# -ne 1 ]]; then
    echo "usage: $0 [--smoke] BUILD_DIR" >&2
    exit 2
  fi
  build=$(cd "$1" && pwd)
  hoprelayd=$build/daemon/hoprelayd
  hoprelay=$build/client/hoprelay
}

# bench_start: clk_tck, started and load_before; the daemons whose PIDs are in `pids` get
# SIGTERM when the script exits, however it exits.
bench_start() {
  clk_tck=$(getconf CLK_TCK)
  started=$(date +%s)
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  pids=()
  trap stop_pids EXIT
}
stop_pids() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
}

free_ports() { # N free loopback ports, below the kernel's ephemeral range when it leaves room
  # (so that no connect() is given one as its source port before its daemon binds it)
  python3 - "$1" <<'EOF'
import random, socket, sys
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
socks = []
while len(socks) < int(sys.argv[1]):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randrange(max(10000, low - 20000), low) if low > 11000 else 0))
        socks.append(s)
    except OSError:
        s.close()
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

wait_up() { # LOG PEER...: until the node's log says it listens and its links to PEERs are up
  local log=$1 i p ok
  shift
  for ((i = 0; i < 400; i++)); do
    if grep -qs "listening on" "$log"; then
      ok=1
      for p in "$@"; do grep -q "outbound link up: $p " "$log" || ok=0; done
      ((ok)) && return 0
    fi
    sleep 0.05
  done
  return 1
}

cpu_ticks() { # PID...: utime + stime, in clock ticks, summed
  local total=0 p f
  for p in "$@"; do
    # Fields after the ")" of the command name: state is field 3, utime 14, stime 15.
    read -r -a f <<<"$(sed 's/.*) //' "/proc/$p/stat")"
    total=$((total + f[11] + f[12]))
  done
  echo "$total"
}

busy_ticks() { # CPU time the whole machine spent busy, in clock ticks (/proc/stat)
  awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat
}

# Per-size slot geometry, as an operator would size a pipeline for its messages: a message up
# to 256 KiB fits one slot, a larger one travels as chunks of 256 KiB slots (cut-through:
# relays forward each chunk as it arrives); about 4 MiB in flight per link, with at least 64
# slots and at most the protocol's 4096, and always enough slots for one whole message (a
# message must fit every ring: docs/topology.md). Slots are credits: small messages need many
# (with 64 slots, 64-byte messages ran 7 times slower), while large ones run better with few
# (64 KiB chain: 64 slots 12 Gb/s, 1024 slots 9.5 Gb/s: cache).
chunk_max=$((256 << 10))
slot_size_for() { # SIZE: the slot size for messages of SIZE bytes
  local s=$(($1 > 256 ? $1 : 256))
  echo $((s > chunk_max ? chunk_max : s))
}
slots_for() { # SIZE: the number of slots
  local size n whole
  size=$(slot_size_for "$1")
  n=$(((4 << 20) / size))
  n=$((n < 64 ? 64 : (n > 4096 ? 4096 : n)))
  whole=$((($1 + size - 1) / size))
  echo $((n < whole ? whole : n))
}

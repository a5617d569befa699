#!/usr/bin/env bash
# Throughput benchmark over the TCP transport on loopback (docs/performance.md).
#
#   bench/run.sh [--smoke] BUILD_DIR
#
# Measures, for every message size, in this one run:
#   hop1   hoprelay send -> x (a leaf node, passthrough)
#   chain  hoprelay send -> a -> b -> c (passthrough on every node)
#   zmq    ZeroMQ PUSH -> proxy -> proxy -> PULL (bench/zmq_chain.cpp)
#   tcp    raw TCP one-hop stream with length prefixes (bench/tcp_stream.cpp), the ceiling
# and prints a table with the ratios chain/zmq and hop1/tcp, writes BUILD_DIR/bench/out/
# results.json and throughput.svg. Each count is sized from a short pilot run to take about
# TARGET_SECONDS (default 1.5). SIZES (default "64 4096 65536") overrides the sizes.
# --smoke: one small size, small fixed counts, and only checks that every measurement produced
# a number (it asserts nothing about performance).
set -euo pipefail

smoke=0
if [[ "${1:-}" == "--smoke" ]]; then smoke=1; shift; fi
if [[ $# -ne 1 ]]; then
  echo "usage: $0 [--smoke] BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
hoprelayd=$build/daemon/hoprelayd
hoprelay=$build/client/hoprelay
zmq_chain=$build/bench/zmq_chain
tcp_stream=$build/bench/tcp_stream
for b in "$hoprelayd" "$hoprelay" "$zmq_chain" "$tcp_stream"; do
  [[ -x $b ]] || { echo "run.sh: $b is missing: build it first" >&2; exit 1; }
done

if ((smoke)); then
  sizes=(4096)
  target=0
else
  read -r -a sizes <<<"${SIZES:-64 4096 65536}"
  target=${TARGET_SECONDS:-1.5}
fi
out=$build/bench/out
if ((smoke)); then out=$build/bench/out-smoke; fi
work=$out/run
rm -rf "$work"
mkdir -p "$work"
results=$out/results.tsv   # system size count seconds daemon_cpu_s
: >"$results"
clk_tck=$(getconf CLK_TCK)

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

free_ports() {  # N free loopback ports
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

wait_metrics() {  # PORT: wait until the node's metrics endpoint answers
  python3 - "$1" <<'EOF'
import sys, time, urllib.request
deadline = time.time() + 10
while time.time() < deadline:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=1).read()
        sys.exit(0)
    except Exception:
        time.sleep(0.05)
sys.exit(1)
EOF
}

# write_topology FILE NODE:DOWNSTREAM... ; sets the ports in node_port / node_metrics
declare -A node_port node_metrics
write_topology() {
  local file=$1; shift
  local ports
  read -r -a ports <<<"$(free_ports $(($# * 2)))"
  {
    printf '[pipeline]\nname = "bench"\ntransport = "tcp"\nslot_size = "64KiB"\nslots = 64\n\n'
    local i=0 spec name down
    for spec in "$@"; do
      name=${spec%%:*}
      down=${spec#*:}
      node_port[$name]=${ports[i]}
      node_metrics[$name]=${ports[i + 1]}
      i=$((i + 2))
      printf '[nodes.%s]\nlisten = "127.0.0.1:%s"\nmetrics = "127.0.0.1:%s"\n' \
        "$name" "${node_port[$name]}" "${node_metrics[$name]}"
      [[ -n $down ]] && printf 'downstream = ["%s"]\n' "$down"
      printf 'stage = { plugin = "passthrough" }\n\n'
    done
  } >"$file"
}

declare -A daemon_pid
start_daemons() {  # TOPOLOGY NODE... (downstream first)
  local topo=$1; shift
  local n
  for n in "$@"; do
    "$hoprelayd" --topology "$topo" --node "$n" --log-level warn >"$work/$n.log" 2>&1 &
    daemon_pid[$n]=$!
    pids+=("$!")
  done
  for n in "$@"; do
    wait_metrics "${node_metrics[$n]}" || { echo "run.sh: node $n did not come up:" >&2; cat "$work/$n.log" >&2; exit 1; }
  done
}

cpu_ticks() {  # PID...: utime + stime, in clock ticks, summed
  local total=0 p f
  for p in "$@"; do
    # Fields after the ")" of the command name: state is field 3, utime 14, stime 15.
    read -r -a f <<<"$(sed 's/.*) //' "/proc/$p/stat")"
    total=$((total + f[11] + f[12]))
  done
  echo "$total"
}

declare -A peak_rss
stop_daemons() {  # NODE... (head first, so each drains into a running downstream)
  local n p
  for n in "$@"; do
    p=${daemon_pid[$n]}
    peak_rss[$n]=$(awk '/^VmHWM:/ {print $2}' "/proc/$p/status")
    kill -TERM "$p"
    wait "$p" || { echo "run.sh: node $n exited with $?:" >&2; cat "$work/$n.log" >&2; exit 1; }
  done
}

# One measurement: measure SYSTEM SIZE COUNT -> prints "COUNT SECONDS DAEMON_CPU_S"
# (the daemons of the current topology are in cur_pids).
cur_pids=()
cur_head=
cur_topo=
measure() {
  local system=$1 size=$2 count=$3 line before after
  case $system in
    hop1 | chain)
      before=$(cpu_ticks "${cur_pids[@]}")
      line=$("$hoprelay" send --topology "$cur_topo" --to "$cur_head" --count "$count" \
        --size "$size" --connect-timeout 10 --log-level error)
      after=$(cpu_ticks "${cur_pids[@]}")
      # sent N messages, B bytes in T s: R msg/s, G Gb/s (origin O)
      python3 - "$line" "$before" "$after" "$clk_tck" <<'EOF'
import re, sys
m = re.match(r"sent (\d+) messages, (\d+) bytes in ([\d.]+) s: ([\d.]+) msg/s", sys.argv[1])
if not m:
    sys.exit(f"run.sh: cannot parse hoprelay send's output: {sys.argv[1]!r}")
n, rate = int(m.group(1)), float(m.group(4))
cpu = (int(sys.argv[3]) - int(sys.argv[2])) / int(sys.argv[4])
print(n, n / rate if rate > 0 else float(m.group(3)), cpu)
EOF
      ;;
    zmq) line=$("$zmq_chain" "$size" "$count"); echo "$line" | awk '{print $3, $4, "nan"}' ;;
    tcp) line=$("$tcp_stream" "$size" "$count"); echo "$line" | awk '{print $3, $4, "nan"}' ;;
  esac
}

# Pilot, then the measured run with the count that takes about $target seconds.
bench_size() {
  local system=$1 size=$2 count r m
  if ((smoke)); then
    count=2000
  else
    # Pilots of growing counts until one takes 0.2 s, so start-up costs do not skew the rate.
    count=$(python3 -c "print(max(2000, min(200000, (32 << 20) // $size)))")
    while :; do
      printf '  %-6s %6s B  pilot   %9s msgs ...\n' "$system" "$size" "$count"
      m=$(measure "$system" "$size" "$count")
      read -r -a r <<<"$m"
      python3 -c "import sys; sys.exit(float(sys.argv[1]) < 0.2)" "${r[1]}" && break
      count=$((count * 4))
    done
    count=$(python3 -c "print(max(1000, int($target * ${r[0]} / ${r[1]})))")
  fi
  printf '  %-6s %6s B  measure %9s msgs ...' "$system" "$size" "$count"
  m=$(measure "$system" "$size" "$count")
  read -r -a r <<<"$m"
  python3 -c "import sys; c,s=int(sys.argv[1]),float(sys.argv[2]); print(f' {s:.3f} s, {c/s:,.0f} msg/s, {c*$size*8/s/1e9:.3f} Gb/s')" "${r[0]}" "${r[1]}"
  echo "$system $size ${r[0]} ${r[1]} ${r[2]}" >>"$results"
}

echo "bench: sizes ${sizes[*]} bytes, ~${target} s per measurement, on $(nproc) cores; logs in $work"

# hoprelay, one hop: the producer feeds a leaf.
cur_topo=$work/hop1.toml
write_topology "$cur_topo" "x:"
start_daemons "$cur_topo" x
cur_pids=("${daemon_pid[x]}")
cur_head=x
for s in "${sizes[@]}"; do bench_size hop1 "$s"; done
stop_daemons x
rss_hop1_x=${peak_rss[x]}

# hoprelay, chain a -> b -> c.
cur_topo=$work/chain.toml
write_topology "$cur_topo" "a:b" "b:c" "c:"
start_daemons "$cur_topo" c b a
cur_pids=("${daemon_pid[a]}" "${daemon_pid[b]}" "${daemon_pid[c]}")
cur_head=a
for s in "${sizes[@]}"; do bench_size chain "$s"; done
stop_daemons a b c
pids=()

for s in "${sizes[@]}"; do bench_size zmq "$s"; done
for s in "${sizes[@]}"; do bench_size tcp "$s"; done

# Table, results.json, and the SVG plot.
python3 - "$results" "$out" "$smoke" "$rss_hop1_x" "${peak_rss[a]}" "${peak_rss[b]}" "${peak_rss[c]}" <<'EOF'
import json, math, sys
results, out, smoke = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
rss = {"hop1.x": int(sys.argv[4]), "chain.a": int(sys.argv[5]), "chain.b": int(sys.argv[6]),
       "chain.c": int(sys.argv[7])}
systems = ["hop1", "chain", "zmq", "tcp"]
labels = {"hop1": "hoprelay one hop", "chain": "hoprelay chain a->b->c",
          "zmq": "ZeroMQ chain push->proxy->proxy->pull", "tcp": "raw TCP one hop"}
data = {}
bad = []
for line in open(results):
    system, size, count, seconds, cpu = line.split()
    size, count, seconds, cpu = int(size), int(count), float(seconds), float(cpu)
    ok = count > 0 and math.isfinite(seconds) and seconds > 0
    if not ok:
        bad.append(line.strip())
        continue
    rate = count / seconds
    entry = {"count": count, "seconds": round(seconds, 6), "msgs_per_s": round(rate, 1),
             "gbit_per_s": round(rate * size * 8 / 1e9, 4)}
    if math.isfinite(cpu):
        entry["daemon_cpu_s"] = round(cpu, 3)
        entry["daemon_cpu_s_per_gb"] = round(cpu / (count * size / 1e9), 3)
    data.setdefault(size, {})[system] = entry
sizes = sorted(data)
missing = [f"{s} {sy}" for s in sizes for sy in systems if sy not in data[s]]
if bad or missing or not sizes:
    sys.exit(f"run.sh: measurements without a number: {bad + missing}")

def ratio(s, a, b):
    return data[s][a]["msgs_per_s"] / data[s][b]["msgs_per_s"]

print()
hdr = f"{'size':>7} | " + " | ".join(f"{sy:>19}" for sy in systems) + " | chain/zmq | hop1/tcp"
print(hdr)
print(f"{'':>7} | " + " | ".join(f"{'msg/s':>10} {'Gb/s':>8}" for _ in systems) + " |           |")
print("-" * len(hdr))
for s in sizes:
    cells = " | ".join(f"{data[s][sy]['msgs_per_s']:>10,.0f} {data[s][sy]['gbit_per_s']:>8.3f}"
                       for sy in systems)
    print(f"{s:>7} | {cells} | {ratio(s, 'chain', 'zmq'):>8.2f}x | {ratio(s, 'hop1', 'tcp'):>7.2f}x")
print()
print("daemon CPU seconds per GB of payload (all daemons of the topology, utime+stime):")
for s in sizes:
    print(f"  {s:>7} B: one hop {data[s]['hop1'].get('daemon_cpu_s_per_gb', float('nan')):.2f}, "
          f"chain {data[s]['chain'].get('daemon_cpu_s_per_gb', float('nan')):.2f}")
print("peak RSS (VmHWM) of each daemon: " + ", ".join(f"{k} {v / 1024:.1f} MiB" for k, v in rss.items()))

for s in sizes:
    data[s]["ratios"] = {"chain_over_zmq": round(ratio(s, "chain", "zmq"), 3),
                         "hop1_over_tcp": round(ratio(s, "hop1", "tcp"), 3)}
doc = {"smoke": smoke, "systems": labels, "peak_rss_kib": rss,
       "sizes": {str(s): data[s] for s in sizes}}
with open(f"{out}/results.json", "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")

# Throughput (Gb/s) against size (log2 axis), one line per system, by hand.
W, H, L, R, T, B = 720, 420, 70, 250, 30, 50
pw, ph = W - L - R, H - T - B
ymax = max(data[s][sy]["gbit_per_s"] for s in sizes for sy in systems) * 1.1 or 1
lx = [math.log2(s) for s in sizes]
x0, x1 = (min(lx) - 0.5, max(lx) + 0.5)
X = lambda v: L + (math.log2(v) - x0) / (x1 - x0) * pw
Y = lambda v: T + ph - v / ymax * ph
colors = {"hop1": "#1f77b4", "chain": "#d62728", "zmq": "#2ca02c", "tcp": "#7f7f7f"}
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{L}" y="18" font-size="14">hoprelay over TCP on loopback: throughput vs message size</text>',
       f'<line x1="{L}" y1="{T + ph}" x2="{L + pw}" y2="{T + ph}" stroke="black"/>',
       f'<line x1="{L}" y1="{T}" x2="{L}" y2="{T + ph}" stroke="black"/>',
       f'<text x="{L + pw / 2}" y="{H - 10}" text-anchor="middle">message size (bytes, log scale)</text>',
       f'<text x="15" y="{T + ph / 2}" transform="rotate(-90 15 {T + ph / 2})" text-anchor="middle">Gb/s (payload)</text>']
for i in range(6):
    v = ymax * i / 5
    svg.append(f'<line x1="{L}" y1="{Y(v):.1f}" x2="{L + pw}" y2="{Y(v):.1f}" stroke="#ddd"/>')
    svg.append(f'<text x="{L - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:.1f}</text>')
for s in sizes:
    svg.append(f'<text x="{X(s):.1f}" y="{T + ph + 16}" text-anchor="middle">{s}</text>')
for k, sy in enumerate(systems):
    pts = " ".join(f"{X(s):.1f},{Y(data[s][sy]['gbit_per_s']):.1f}" for s in sizes)
    svg.append(f'<polyline points="{pts}" fill="none" stroke="{colors[sy]}" stroke-width="2"/>')
    for s in sizes:
        svg.append(f'<circle cx="{X(s):.1f}" cy="{Y(data[s][sy]["gbit_per_s"]):.1f}" r="3" fill="{colors[sy]}"/>')
    ly = T + 10 + 20 * k
    svg.append(f'<line x1="{L + pw + 15}" y1="{ly}" x2="{L + pw + 35}" y2="{ly}" stroke="{colors[sy]}" stroke-width="2"/>')
    svg.append(f'<text x="{L + pw + 40}" y="{ly + 4}" font-size="11">{labels[sy]}</text>')
svg.append("</svg>")
with open(f"{out}/throughput.svg", "w") as f:
    f.write("\n".join(svg) + "\n")
print(f"\nwrote {out}/results.json and {out}/throughput.svg")
EOF

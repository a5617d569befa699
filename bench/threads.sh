#!/usr/bin/env bash
# What `threads = N` buys a relay with a CPU-bound stage (issue 17, docs/performance.md
# "Threads"): one producer, one relay compressing with `zstd` (level 3), one leaf, over TCP on
# loopback, with the relay's `threads` = 1, 2 (THREADS overrides: "1 2 4").
#
#   bench/threads.sh [--smoke] BUILD_DIR
#
# `hoprelay send --file` sends TEXT_MIB (default 512) MiB of generated log-like text, which
# zstd shrinks about 4 times, in messages of SIZE bytes (default 65536; slots of 128 KiB, 64
# per link) into the relay a, which compresses each and forwards it to the leaf b. A run is
# timed from the start of `hoprelay send` to its exit, which comes once b acknowledged the last
# message. Each setting runs REPS times (default 3), interleaved (1, 2, 1, 2, ...) so that a
# change in the machine's load hits every setting alike; the table gives the median, its ratio
# to threads = 1 in this same run, the relay's CPU seconds per GiB of input (utime + stime of
# all its threads) and the share of the CPUs other processes used meanwhile.
# The reference, in the same run: how far this machine itself scales two compressions at once.
# Debian's `zstd` command (level 3, one thread) compresses the same input alone, then twice at
# once (two processes); the ratio of the two throughputs is the ceiling for threads = 2 here
# (two "cores" of a virtual machine may share a physical core, caches or memory bandwidth).
# Writes BUILD_DIR/bench/threads/results.json.
# --smoke: 16 MiB, one run per setting, and only a check that every number is there (it
# asserts nothing about performance); writes to BUILD_DIR/bench/threads-smoke/.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
bench_args "$@"
for b in "$hoprelayd" "$hoprelay"; do
  [[ -x $b ]] || { echo "threads.sh: $b is missing: build it first" >&2; exit 1; }
done
command -v zstd >/dev/null || {
  echo "threads.sh: the zstd command is missing (Debian's zstd; scripts/install-deps.sh)" >&2
  exit 1
}

size=${SIZE:-65536}
read -r -a settings <<<"${THREADS:-1 2}"
if ((smoke)); then
  text_mib=16
  reps=1
  out=$build/bench/threads-smoke
else
  text_mib=${TEXT_MIB:-512}
  reps=${REPS:-3}
  out=$build/bench/threads
fi
work=$out/run
rm -rf "$work"
mkdir -p "$work"
bench_start

# The input: 16 MiB of distinct lines (seeded: every run compresses the same bytes), repeated.
# Each message is compressed on its own, so the repetition saves zstd nothing.
python3 - "$work/unit.txt" <<'EOF'
import random, sys
rng = random.Random(17)
words = ["record", "value", "status", "ok", "error", "node", "relay", "message", "payload",
         "sequence", "origin", "chunk", "credit", "latency", "host", "link", "ack", "replay"]
with open(sys.argv[1], "w") as f:
    n = i = 0
    while n < 16 << 20:
        line = "%d %s v=%d\n" % (i, " ".join(rng.choice(words) for _ in range(8)),
                                  rng.randrange(100000))
        f.write(line)
        n += len(line)
        i += 1
EOF
input=$work/input.txt
for ((i = 0; i < text_mib / 16; i++)); do cat "$work/unit.txt"; done >"$input"
bytes=$(stat -c %s "$input")

results=$work/results.tsv
: >"$results"
run_one() { # THREADS REP
  local t=$1 rep=$2 ports topo
  read -r -a ports <<<"$(free_ports 2)"
  topo=$work/t$t-$rep.toml
  cat >"$topo" <<EOF
[pipeline]
name = "threads$t"
transport = "tcp"
slot_size = "128KiB"
slots = 64

[nodes.a]
listen = "127.0.0.1:${ports[0]}"
downstream = ["b"]
threads = $t
stage = { plugin = "zstd", mode = "compress", level = 3 }

[nodes.b]
listen = "127.0.0.1:${ports[1]}"
stage = { plugin = "passthrough" }
EOF
  "$hoprelayd" --topology "$topo" --node b >"$work/b-$t-$rep.log" 2>&1 &
  local pb=$!
  pids+=("$pb")
  "$hoprelayd" --topology "$topo" --node a >"$work/a-$t-$rep.log" 2>&1 &
  local pa=$!
  pids+=("$pa")
  if ! { wait_up "$work/b-$t-$rep.log" && wait_up "$work/a-$t-$rep.log" b; }; then
    echo "threads.sh: the nodes did not come up:" >&2
    cat "$work/a-$t-$rep.log" "$work/b-$t-$rep.log" >&2
    exit 1
  fi
  local cpu0 busy0 t0 t1 cpu1 busy1
  cpu0=$(cpu_ticks "$pa")
  busy0=$(busy_ticks)
  t0=$(date +%s.%N)
  "$hoprelay" send --topology "$topo" --to a --file "$input" --size "$size" \
    >"$work/send-$t-$rep.log" 2>&1 || {
    echo "threads.sh: hoprelay send failed:" >&2
    cat "$work/send-$t-$rep.log" >&2
    exit 1
  }
  t1=$(date +%s.%N)
  cpu1=$(cpu_ticks "$pa")
  busy1=$(busy_ticks)
  # The others: the machine's busy time minus the three processes of the run (the producer's
  # CPU is not known after it exits: counted among the others, so this is an upper bound).
  local pb_cpu
  pb_cpu=$(cpu_ticks "$pb")
  kill -TERM "$pa" "$pb"
  wait "$pa" "$pb" || true
  pids=()
  echo "$t $rep $t0 $t1 $((cpu1 - cpu0)) $((busy1 - busy0)) $pb_cpu" >>"$results"
  printf '  threads = %s, run %s: %.0f MiB/s\n' "$t" "$rep" \
    "$(awk -v b="$bytes" -v a="$t0" -v z="$t1" 'BEGIN {print b / 1048576 / (z - a)}')" >&2
}

# The reference: `zstd -3` of the input alone (copies = 1), then two at once (copies = 2).
reference() { # REP
  local copies t0 t1 i zp
  for copies in 1 2; do
    zp=()
    t0=$(date +%s.%N)
    for ((i = 0; i < copies; i++)); do
      zstd -q -3 --single-thread -c "$input" >/dev/null &
      zp+=("$!")
    done
    wait "${zp[@]}"
    t1=$(date +%s.%N)
    echo "zstd$copies $1 $t0 $t1 0 0 0" >>"$results"
    printf '  zstd command, %s at once, run %s: %.0f MiB/s\n' "$copies" "$1" \
      "$(awk -v b="$((bytes * copies))" -v a="$t0" -v z="$t1" 'BEGIN {print b / 1048576 / (z - a)}')" >&2
  done
}

echo "threads.sh: $((bytes >> 20)) MiB in messages of $size bytes, zstd level 3 at the relay," \
  "threads ${settings[*]}, $reps runs each" >&2
for ((rep = 1; rep <= reps; rep++)); do
  for t in "${settings[@]}"; do run_one "$t" "$rep"; done
  reference "$rep"
done

python3 - "$results" "$bytes" "$clk_tck" "$(nproc)" "$out/results.json" "$smoke" <<'EOF'
import json, statistics, sys
path, total, hz, ncpu, out, smoke = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6] == "1"
runs = {}
ref = {1: [], 2: []}
for line in open(path):
    t, rep, t0, t1, cpu, busy, _ = line.split()
    wall = float(t1) - float(t0)
    if t.startswith("zstd"):
        copies = int(t[4:])
        ref[copies].append(copies * total / 1048576 / wall)
        continue
    runs.setdefault(int(t), []).append({
        "mib_s": total / 1048576 / wall,
        "relay_cpu_s_per_gib": int(cpu) / hz / (total / 2**30),
        "busy_share": min(1.0, int(busy) / hz / (wall * ncpu)),
    })
base = statistics.median(r["mib_s"] for r in runs[min(runs)])
table = []
print("threads | MiB/s of input (median) | x threads = %d | relay CPU s/GiB | machine busy" % min(runs))
for t in sorted(runs):
    med = statistics.median(r["mib_s"] for r in runs[t])
    row = {"threads": t, "mib_s": med, "ratio": med / base,
           "relay_cpu_s_per_gib": statistics.median(r["relay_cpu_s_per_gib"] for r in runs[t]),
           "busy_share": statistics.median(r["busy_share"] for r in runs[t]),
           "runs": [r["mib_s"] for r in runs[t]]}
    table.append(row)
    print("%7d | %23.0f | %14.2f | %15.2f | %11.0f%%" % (t, med, row["ratio"], row["relay_cpu_s_per_gib"], 100 * row["busy_share"]))
one, two = statistics.median(ref[1]), statistics.median(ref[2])
ceiling = two / one
print("reference: the zstd command, level 3: %.0f MiB/s alone, %.0f MiB/s as two at once: x%.2f,"
      " this machine's ceiling for two compressions" % (one, two, ceiling))
for row in table:
    if row["threads"] > 1:
        print("threads = %d: x%.2f of threads = 1, %.0f%% of the ceiling" % (row["threads"], row["ratio"], 100 * row["ratio"] / ceiling))
json.dump({"bytes": total, "rows": table,
           "reference": {"zstd_alone_mib_s": one, "zstd_two_at_once_mib_s": two, "ceiling": ceiling}},
          open(out, "w"), indent=2)
if smoke:
    ok = all(r["mib_s"] > 0 and r["relay_cpu_s_per_gib"] > 0 for r in table) and one > 0 and two > 0
    print("smoke: every number is there" if ok else "smoke: a number is missing")
    sys.exit(0 if ok else 1)
EOF

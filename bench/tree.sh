#!/usr/bin/env bash
# What growing a tree costs (issue 17, docs/performance.md "Trees"): the same broadcast into
# complete binary trees of 1, 2, 4, 8, 16 and 32 leaves, over TCP on loopback, one hoprelayd per
# node on this one machine.
#
#   bench/tree.sh [--smoke] BUILD_DIR
#
# For L leaves the tree is n0 -> n1, n2 -> n3 .. n6 -> ...: 2L - 1 nodes and log2(L) levels
# below the head (L = 1 is the chain n0 -> n1). Every relay broadcasts to its two children with
# `passthrough`; the leaves consume with `passthrough`. `hoprelay send` sends COUNT messages of
# SIZE bytes (defaults 200000 and 4096, the same for every tree) into n0 after a warm-up of
# COUNT / 10, and times from the first post to the last acknowledgement, which comes only once
# every leaf has the message. Per tree it records the throughput (messages/s into the tree,
# MB/s at each leaf and in all), the CPU time (utime + stime from /proc/PID/stat) of every node
# during the measured run and its peak RSS (VmHWM) at the end, and the share of the CPUs other
# processes used meanwhile. Slots: SLOTS (default 256) of SIZE bytes per link, no metrics
# endpoints. Writes BUILD_DIR/bench/tree/results.json and tree.svg, prints the tables
# (bench/tree_report.py). LEAVES="1 2 4" picks other trees (powers of two up to 256).
# --smoke: trees of 1 and 4 leaves, 2000 messages, and only a check that every number is there
# (it asserts nothing about performance); writes to BUILD_DIR/bench/tree-smoke/.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
bench_args "$@"
for b in "$hoprelayd" "$hoprelay"; do
  [[ -x $b ]] || { echo "tree.sh: $b is missing: build it first" >&2; exit 1; }
done

size=${SIZE:-4096}
slots=${SLOTS:-256}
if ((smoke)); then
  leaves_list=(1 4)
  count=2000
  out=$build/bench/tree-smoke
else
  read -r -a leaves_list <<<"${LEAVES:-1 2 4 8 16 32}"
  count=${COUNT:-200000}
  out=$build/bench/tree
fi
for l in "${leaves_list[@]}"; do
  if ! [[ $l =~ ^[0-9]+$ ]] || ((l < 1 || l > 256 || (l & (l - 1)) != 0)); then
    echo "tree.sh: $l leaves: give powers of two from 1 to 256" >&2
    exit 2
  fi
done
work=$out/run
rm -rf "$work"
mkdir -p "$work"
results=$out/results.tsv # read by bench/tree_report.py
: >"$results"
bench_start

# tree_nodes L: the node count of the tree with L leaves (a chain of two for one leaf).
tree_nodes() { echo $(($1 == 1 ? 2 : 2 * $1 - 1)); }

# children I N: the downstream indices of node I in a tree of N nodes.
children() {
  local i=$1 n=$2 c
  for c in $((2 * i + 1)) $((2 * i + 2)); do
    ((c < n)) && printf '%s ' "$c"
  done
  # The chain n0 -> n1: n0's second child would be n2, which it does not have.
  return 0
}

# depth I: the level of node I (the head is 0).
depth() {
  local i=$1 d=0
  while ((i > 0)); do
    i=$(((i - 1) / 2))
    d=$((d + 1))
  done
  echo "$d"
}

write_tree() { # FILE N
  local file=$1 n=$2 ports i c down
  read -r -a ports <<<"$(free_ports "$n")"
  {
    printf '[pipeline]\nname = "tree"\ntransport = "tcp"\nslot_size = %s\nslots = %s\n' \
      "$size" "$slots"
    for ((i = 0; i < n; i++)); do
      down=''
      for c in $(children "$i" "$n"); do down+="${down:+, }\"n$c\""; done
      printf '\n[nodes.n%s]\nlisten = "127.0.0.1:%s"\n' "$i" "${ports[i]}"
      [[ -n $down ]] && printf 'downstream = [%s]\nroute = "broadcast"\n' "$down"
      printf 'stage = { plugin = "passthrough" }\n'
    done
  } >"$file"
}

origin=1
send() { # TOPOLOGY COUNT OUT: one run of hoprelay send into n0, its own origin each time
  origin=$((origin + 1))
  "$hoprelay" send --topology "$1" --to n0 --count "$2" --size "$size" --origin "$origin" \
    --connect-timeout 20 --log-level error >"$3" 2>&1
}
send_failed() { # OUT
  echo "tree.sh: hoprelay send failed:" >&2
  cat "$1" >&2
  exit 1
}

for leaves in "${leaves_list[@]}"; do
  n=$(tree_nodes "$leaves")
  topo=$work/tree-$leaves.toml
  write_tree "$topo" "$n"
  node_pid=()
  for ((i = n - 1; i >= 0; i--)); do
    "$hoprelayd" --topology "$topo" --node "n$i" --log-level info >"$work/tree-$leaves-n$i.log" 2>&1 &
    node_pid[i]=$!
    pids+=("$!")
  done
  for ((i = 0; i < n; i++)); do
    # shellcheck disable=SC2046 # the children's names, one word each
    wait_up "$work/tree-$leaves-n$i.log" $(for c in $(children "$i" "$n"); do echo "n$c"; done) || {
      echo "tree.sh: node n$i of the $leaves-leaf tree did not come up:" >&2
      cat "$work/tree-$leaves-n$i.log" >&2
      exit 1
    }
  done
  printf '%2d leaves, %2d nodes ...' "$leaves" "$n" >&2
  send "$topo" $((count / 10 > 0 ? count / 10 : 1)) "$work/warmup-$leaves.out" ||
    send_failed "$work/warmup-$leaves.out"

  declare -a before=()
  for ((i = 0; i < n; i++)); do before[i]=$(cpu_ticks "${node_pid[i]}"); done
  busy0=$(busy_ticks)
  wall0=$EPOCHREALTIME
  TIMEFORMAT='%3U %3S'
  { time send "$topo" "$count" "$work/send-$leaves.out"; } 2>"$work/time-$leaves.txt" ||
    send_failed "$work/send-$leaves.out"
  wall1=$EPOCHREALTIME
  busy1=$(busy_ticks)
  producer_cpu=$(awk 'END {print $1 + $2}' "$work/time-$leaves.txt")
  # "sent N messages, B bytes in T s: R msg/s, ...": T has 3 decimals, R none; take whichever
  # is more precise (as bench/run.sh does).
  seconds=$(awk '$1 == "sent" {print ($9 >= 1000 ? $2 / $9 : $7)}' "$work/send-$leaves.out")
  [[ -n $seconds ]] || { echo "tree.sh: no result in $work/send-$leaves.out" >&2; exit 1; }

  own=0
  for ((i = 0; i < n; i++)); do
    ticks=$(($(cpu_ticks "${node_pid[i]}") - before[i]))
    own=$((own + ticks))
    role=relay
    ((i == 0)) && role="head"
    [[ -z $(children "$i" "$n") ]] && role=leaf
    echo "node $leaves n$i $(depth "$i") $role $(awk -v t="$ticks" -v hz="$clk_tck" \
      'BEGIN {print t / hz}') $(awk '/^VmHWM:/ {print $2}' "/proc/${node_pid[i]}/status")" \
      >>"$results"
  done
  others=$(awk -v b="$((busy1 - busy0))" -v hz="$clk_tck" -v own="$own" -v p="$producer_cpu" \
    -v n="$(nproc)" -v w0="$wall0" -v w1="$wall1" \
    'BEGIN {o = ((b - own) / hz - p) / ((w1 - w0) * n); print (o < 0 ? 0 : (o > 1 ? 1 : o))}')
  echo "tree $leaves $n $(depth $((n - 1))) $count $size $seconds $producer_cpu $others" \
    >>"$results"
  awk -v c="$count" -v s="$seconds" -v b="$size" -v l="$leaves" -v o="$others" \
    'BEGIN {printf " %.0f msg/s into the tree, %.1f MB/s at each leaf, %.1f MB/s in all " \
      "(others used %.0f %% of the CPUs)\n", c / s, c * b / s / 1e6, l * c * b / s / 1e6,
      100 * o}' >&2

  for ((i = 0; i < n; i++)); do kill -TERM "${node_pid[i]}"; done
  for ((i = 0; i < n; i++)); do
    wait "${node_pid[i]}" || {
      echo "tree.sh: node n$i exited with $?:" >&2
      cat "$work/tree-$leaves-n$i.log" >&2
      exit 1
    }
  done
  pids=()
done

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "took $(($(date +%s) - started)) s; load average before $load_before, after $load_after" >&2
python3 -B "$here/tree_report.py" --results "$results" --out "$out" \
  --meta "cores=$(nproc)" "load_before=$load_before" "load_after=$load_after" \
  "slots=$slots" "seconds=$(($(date +%s) - started))"

#!/usr/bin/env bash
# Benchmark of hoprelay over the TCP transport on loopback, with its references in the same run
# (issue #6, docs/performance.md).
#
#   bench/run.sh [--smoke] BUILD_DIR
#
# For every message size it measures
#   hop1    hoprelay send -> x                 (one hoprelayd)
#   chain   hoprelay send -> a -> b -> c       (three hoprelayd)
#   chaintls  the chain with tls on every link, the producer's too (docs/security.md): TLS 1.3,
#           certificates made by openssl here; kernel TLS where the kernel has the tls module
#           (the report says which), else OpenSSL in user space
#   chainbusy  the chain with b on poll = "busy", pinned (cpu = N) to the last CPU this process
#           may use (one spinner only: the machine may have just 2 cores); latency only
#   fanout  hoprelay send -> a -> {l1, l2}     (broadcast: every message reaches both leaves)
#   fanoutlt  the fan-out with a's downstream links on two threads (link_threads = 2)
#   fanouthead  the fan-out with head a run by the producer (hoprelay send --run-head): no
#           hoprelayd for a (docs/client.md, "A producer that runs its head")
#   zmq     ZeroMQ PUSH -> proxy -> proxy -> PULL (bench/zmq_chain.cpp)
#   tcp     raw TCP one-hop stream with length prefixes (bench/tcp_stream.cpp), the ceiling
#   mpi_chain_ALG, mpi_fanout_ALG  Open MPI's MPI_Bcast (bench/mpi_bcast.c) over its TCP BTL on
#           loopback, from rank 0 to 3 ranks (as chain's a, b, c) and to 2 (as fanout's l1,
#           l2), with each ALG of mpi_algs below; skipped, with a warning and a line in the
#           report, when bench/mpi_bcast was not built (CMake found no MPI)
# throughput (msg/s, Gb/s) and CPU seconds per GB (every process involved) of each but
# chainbusy, peak RSS (VmHWM) of every hoprelayd, and the latency p50/p99 of hop1, chain,
# chainbusy and zmq at a fixed offered load: LAT_RATE msg/s (default 1000), lowered to LAT_GBPS
# Gb/s of payload (default 1) for large messages. The latency of a hoprelay message runs from
# `hoprelay send --stamp` writing the time into it to the `bench-latency` stage
# (bench/latency_stage.c) at the leaf; of a ZeroMQ message, from the producer to the sink of
# zmq_chain.
#
# Prints a progress line per step to stderr, then the tables (bench/report.py) to stdout, and
# writes BUILD_DIR/bench/out/results.json and bench.svg. Throughput counts are sized from pilot
# runs to take about TARGET_SECONDS (default 5), latency runs about LAT_SECONDS (default 3,
# at least 50 messages): about 4 minutes in all on 2 cores. SIZES (default "64 4096 65536
# 1048576 16777216", each from 24 to 16777216) overrides the sizes. Each size gets its own
# daemons: slot_size = size between 256 B and 256 KiB (larger messages go as chunks), slots =
# 4 MiB / slot_size between 64 and 4096, and at least one whole message.
# FILL: what `hoprelay send` writes into each generated message of the throughput runs:
# header (default, `--fill header`: its 24-byte header, as every reference writes a sequence
# number only) or pattern (every byte, as verify-sink checks: the generator's cost included).
# MPI_SEGMENT (bytes) fixes the segment size of the segmented MPI_Bcast algorithms (default: a
# quarter of the message, between 16 KiB and 1 MiB).
# --smoke: the smallest and the largest size (64 B, 16 MiB), small fixed counts, and only a
# check that every measurement produced a number (it asserts nothing about performance);
# writes to BUILD_DIR/bench/out-smoke/.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
bench_args "$@"
zmq_chain=$build/bench/zmq_chain
tcp_stream=$build/bench/tcp_stream
latency_stage=$build/bench/bench_latency_stage.so
for b in "$hoprelayd" "$hoprelay" "$zmq_chain" "$tcp_stream" "$latency_stage"; do
  [[ -e $b ]] || { echo "run.sh: $b is missing: build it first" >&2; exit 1; }
done


# The MPI_Bcast reference is optional at build time (bench/CMakeLists.txt), so its absence is
# announced here and in the report rather than passed over.
mpi_bcast=$build/bench/mpi_bcast
mpi_missing=''
if [[ ! -x $mpi_bcast ]]; then
  mpi_missing="$mpi_bcast was not built: CMake found no MPI (install openmpi-bin and"
  mpi_missing+=" libopenmpi-dev, e.g. scripts/install-deps.sh --build-only, and configure again)"
elif ! command -v mpirun >/dev/null; then
  mpi_missing="mpirun is not on PATH (install openmpi-bin)"
fi
if [[ -n $mpi_missing ]]; then
  echo "run.sh: WARNING: the MPI_Bcast reference will NOT be measured: $mpi_missing" >&2
fi

fill=${FILL:-header}
[[ $fill == header || $fill == pattern ]] || {
  echo "run.sh: FILL=$fill: header or pattern" >&2
  exit 2
}
lat_rate=${LAT_RATE:-1000}
lat_gbps=${LAT_GBPS:-1}
if ((smoke)); then
  sizes=(64 16777216)
  target=0
  lat_seconds=0.1
  lat_min=10
  out=$build/bench/out-smoke
else
  read -r -a sizes <<<"${SIZES:-64 4096 65536 1048576 16777216}"
  target=${TARGET_SECONDS:-5}
  lat_seconds=${LAT_SECONDS:-3}
  lat_min=50
  out=$build/bench/out
fi
for s in "${sizes[@]}"; do
  if ! [[ $s =~ ^[0-9]+$ ]] || ((s < 24 || s > 16777216)); then
    echo "run.sh: size $s is outside 24 .. 16777216 (hoprelay send's pattern header, and the" \
      "largest slot_size)" >&2
    exit 2
  fi
done
work=$out/run
rm -rf "$work"
mkdir -p "$work/lat"
results=$out/results.tsv # one record per line, read by bench/report.py
: >"$results"
bench_start

# Open MPI's MPI_Bcast algorithms, NAME:NUMBER (coll_tuned_bcast_algorithm; `ompi_info --param
# coll tuned --level 9` lists them): Open MPI's own choice (no algorithm forced), the chain (with
# chain_fanout 1 a single chain, rank 0 -> 1 -> 2 -> 3, whole messages), the pipeline (that
# chain, in segments) and the binary tree (in segments; for 2 receivers it is the fan-out).
mpi_algs=(default:0 chain:2 pipeline:3 bintree:5)
mpi_segment_for() { # SIZE: the segment size of the segmented algorithms
  local s=$(($1 / 4))
  echo "${MPI_SEGMENT:-$((s < 16384 ? 16384 : (s > 1048576 ? 1048576 : s)))}"
}
# Its best configuration on a machine of 2 cores: the ob1 PML over the TCP BTL only (not UCX nor
# shared memory), every socket, the runtime's too, on loopback; more ranks than cores, unbound,
# and ranks that wait in MPI yield the CPU (they poll: without yield, 64 B ran half as fast).
mpi_args=(--oversubscribe --bind-to none --mca pml ob1 --mca btl "tcp,self"
  --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo --mca mpi_yield_when_idle 1
  --mca coll_tuned_bcast_algorithm_chain_fanout 1)
if ((EUID == 0)); then mpi_args+=(--allow-run-as-root); fi
mpi_steps=0
[[ -n $mpi_missing ]] || mpi_steps=$((2 * ${#mpi_algs[@]}))

# 10 steps per size: hop1, chain, fanout, fanouthead, zmq, tcp throughput; hop1, chain, chainbusy, zmq
# latency; and the MPI_Bcast runs.
steps=$((${#sizes[@]} * (10 + mpi_steps)))
step=0
progress() { # WHAT...: starts a progress line on stderr; `done_line` ends it
  step=$((step + 1))
  printf '[%2d/%d] %s ...' "$step" "$steps" "$*" >&2
}
done_line() { printf ' %s\n' "$*" >&2; }

# Origins: throughput runs count up from 1; latency runs from lat_origin_base, and only those
# are recorded by the bench-latency stage. Every run has its own origin, so a node never
# takes a run's messages for replays of an earlier one (per-origin deduplication).
next_origin=1
lat_origin_base=4000000000

# More keys for a node's table (chainbusy: poll and cpu), by node name; empty for the others.
declare -A node_extra=()
# Top-level keys before [pipeline] (chaintls: tls, every node's and the producer's).
preamble=''
# chaintls's certificates: one CA, and one certificate naming every node of the chain and the
# producer (each host would have its own; one file serves all here).
make_certificates() {
  local d=$work/tls
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/ca.key" \
    -out "$d/ca.pem" -days 2 -subj /CN=bench-ca 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/node.key" \
    -out "$d/node.csr" -subj /CN=bench 2>/dev/null
  printf 'subjectAltName = DNS:a, DNS:b, DNS:c, DNS:producer\n' >"$d/node.ext"
  openssl x509 -req -in "$d/node.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
    -out "$d/node.pem" -days 2 -extfile "$d/node.ext" 2>/dev/null
  printf 'tls = { cert = "%s", key = "%s", ca = "%s" }\n' "$d/node.pem" "$d/node.key" "$d/ca.pem"
}
# The last CPU this process may run on: where chainbusy pins its spinning relay.
busy_cpu=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')

# write_topology FILE SIZE NODE:DOWN1,DOWN2... (downstream first). No metrics endpoints: the
# HTTP server would add 1.5 s to every daemon's exit, and nothing here scrapes it.
write_topology() {
  local file=$1 size=$2
  shift 2
  local ports
  read -r -a ports <<<"$(free_ports $#)"
  {
    printf '%s[pipeline]\nname = "bench"\ntransport = "tcp"\nslot_size = %s\nslots = %s\n\n' \
      "$preamble" \
      "$(slot_size_for "$size")" "$(slots_for "$size")"
    local i=0 spec name down
    for spec in "$@"; do
      name=${spec%%:*}
      down=${spec#*:}
      printf '[nodes.%s]\nlisten = "127.0.0.1:%s"\n%s' "$name" "${ports[i]}" \
        "${node_extra[$name]:-}"
      i=$((i + 1))
      if [[ -n $down ]]; then
        printf 'downstream = ["%s"]\nroute = "broadcast"\n' "${down//,/\", \"}"
        printf 'stage = { plugin = "passthrough" }\n\n'
      else
        printf 'stage = { plugin = "%s", dir = "%s", min_origin = %s }\n\n' \
          "$latency_stage" "$work/lat" "$lat_origin_base"
      fi
    done
  } >"$file"
}

declare -A daemon_pid
cur_topo='' cur_head='' cur_leaf='' cur_name=''
cur_nodes=()
cur_pids=()
# 1: the producer runs the head (send --run-head), so start_topology starts no hoprelayd for it.
head_in_send=0
start_topology() { # NAME SIZE NODE:DOWN... (downstream first; the last is the head)
  cur_name=$1
  local size=$2
  shift 2
  cur_topo=$work/$cur_name-$size.toml
  write_topology "$cur_topo" "$size" "$@"
  cur_nodes=()
  cur_pids=()
  cur_head=${*: -1}
  cur_head=${cur_head%%:*}
  ((head_in_send)) && set -- "${@:1:$#-1}"
  local spec n down log
  for spec in "$@"; do
    n=${spec%%:*}
    "$hoprelayd" --topology "$cur_topo" --node "$n" --log-level info \
      >"$work/$cur_name-$size-$n.log" 2>&1 &
    daemon_pid[$n]=$!
    pids+=("$!")
    cur_nodes+=("$n")
    cur_pids+=("$!")
  done
  cur_leaf=${cur_nodes[0]}
  for spec in "$@"; do
    n=${spec%%:*}
    down=${spec#*:}
    log=$work/$cur_name-$size-$n.log
    # shellcheck disable=SC2086 # the downstream names, split at the commas
    wait_up "$log" ${down//,/ } || {
      echo "run.sh: node $n did not come up:" >&2
      cat "$log" >&2
      exit 1
    }
  done
  echo "slots $cur_name $size $(slots_for "$size") $(slot_size_for "$size")" >>"$results"
}

stop_topology() { # SIZE: every message is acknowledged by now, so the order does not matter
  local size=$1 n p
  for n in "${cur_nodes[@]}"; do
    p=${daemon_pid[$n]}
    echo "rss $cur_name $size $n $(awk '/^VmHWM:/ {print $2}' "/proc/$p/status")" >>"$results"
    kill -TERM "$p"
  done
  for n in "${cur_nodes[@]}"; do
    p=${daemon_pid[$n]}
    wait "$p" || {
      echo "run.sh: node $n exited with $?:" >&2
      cat "$work/$cur_name-$size-$n.log" >&2
      exit 1
    }
  done
  pids=()
}

# timed OUT CMD...: runs CMD with its stdout in OUT; sets t_cpu to its user + system seconds,
# wall0/wall1 and busy0/busy1 to the time and the machine's busy ticks around it.
t_cpu=0
timed() {
  local out=$1 t TIMEFORMAT='%3U %3S'
  shift
  busy0=$(busy_ticks)
  wall0=$EPOCHREALTIME
  if ! t=$({ time "$@" >"$out" 2>"$out.err"; } 2>&1); then
    echo "run.sh: failed: $*" >&2
    cat "$out.err" >&2
    exit 1
  fi
  wall1=$EPOCHREALTIME
  busy1=$(busy_ticks)
  t_cpu=$(awk '{print $1 + $2}' <<<"$t")
}

# measure SYSTEM SIZE COUNT: one throughput run; sets m_count, m_seconds and m_cpu (CPU
# seconds of every process involved: the daemons of the current topology and the producer,
# or the whole reference program), and m_others: the share of the machine's CPUs that other
# processes used meanwhile (the noise of this shared machine).
m_count=0 m_seconds=0 m_cpu=0 m_others=0
busy0=0 busy1=0 wall0=0 wall1=0
measure() {
  local system=$1 size=$2 count=$3 before after
  case $system in
    hop1 | chain | chaintls | fanout | fanoutlt | fanouthead)
      local run_head=()
      [[ $system == fanouthead ]] && run_head=(--run-head)
      before=$(cpu_ticks "${cur_pids[@]}")
      timed "$work/send.out" "$hoprelay" send --topology "$cur_topo" --to "$cur_head" \
        --count "$count" --size "$size" --origin "$next_origin" --connect-timeout 10 \
        --log-level error --fill "$fill" "${run_head[@]}"
      next_origin=$((next_origin + 1))
      after=$(cpu_ticks "${cur_pids[@]}")
      # "sent N messages, B bytes in T s: R msg/s, G Gb/s (origin O)": T has 3 decimals, R
      # none; take whichever is more precise.
      read -r m_count m_seconds <<<"$(awk '$1 == "sent" {print $2, ($9 >= 1000 ? $2 / $9 : $7)}' \
        "$work/send.out")"
      m_cpu=$(awk -v a="$after" -v b="$before" -v hz="$clk_tck" -v p="$t_cpu" \
        'BEGIN {print (a - b) / hz + p}')
      ;;
    mpi_*)
      # mpi_SHAPE_ALG; the program times itself (pilots included) and reports the CPU of its
      # ranks and the others' share, so `count` is --count N or --target SECONDS.
      local shape=${system#mpi_} alg n ranks=4
      alg=${shape#*_}
      shape=${shape%%_*}
      [[ $shape == fanout ]] && ranks=3
      for n in "${mpi_algs[@]}"; do [[ ${n%%:*} == "$alg" ]] && alg=${n#*:}; done
      local forced=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_bcast_algorithm "$alg")
      local count_args
      read -r -a count_args <<<"$count"
      # Algorithm 0 is Open MPI's decision: dynamic rules off, so none of ours apply.
      ((alg == 0)) && forced=(--mca coll_tuned_use_dynamic_rules 0)
      timed "$work/mpi.out" mpirun "${mpi_args[@]}" "${forced[@]}" -np "$ranks" \
        --mca coll_tuned_bcast_algorithm_segmentsize "$(mpi_segment_for "$size")" \
        "$mpi_bcast" "${count_args[@]}" "$size"
      read -r m_count m_seconds m_cpu m_others <<<"$(awk -v s="$size" \
        '$1 == "mpi_bcast" && $2 == s {print $3, $4, $5, $6}' "$work/mpi.out")"
      ;;
    zmq | tcp)
      local prog=$zmq_chain
      [[ $system == tcp ]] && prog=$tcp_stream
      timed "$work/$system.out" "$prog" "$size" "$count"
      read -r _ _ m_count m_seconds _ <"$work/$system.out" || true
      m_cpu=$t_cpu
      if [[ $system == zmq ]]; then
        echo "rss zmq $size process $(awk '{print $5}' "$work/zmq.out")" >>"$results"
      fi
      ;;
  esac
  [[ -n $m_count && -n $m_seconds ]] || {
    echo "run.sh: $system $size: no result in:" >&2
    cat "$work"/*.out >&2
    exit 1
  }
  [[ $system == mpi_* ]] && return # it measured its own share of the others
  m_others=$(awk -v b="$((busy1 - busy0))" -v hz="$clk_tck" -v own="$m_cpu" -v n="$(nproc)" \
    -v w0="$wall0" -v w1="$wall1" \
    'BEGIN {o = (b / hz - own) / ((w1 - w0) * n); print (o < 0 ? 0 : (o > 1 ? 1 : o))}')
}

# throughput SYSTEM SIZE: pilots, then the measured run of about $target seconds.
throughput() {
  local system=$1 size=$2 count
  progress "$(printf '%-6s %8s B  throughput' "$system" "$size")"
  # 32 MiB worth of messages, 4 to 200,000: the smoke test's count and the first pilot's.
  count=$((32 * 1024 * 1024 / size))
  count=$((count < 4 ? 4 : (count > 200000 ? 200000 : count)))
  if ((smoke)); then
    count=$((count > 2000 ? 2000 : count))
  else
    # Pilots of growing counts until one takes 0.2 s, so start-up costs do not skew the rate.
    while :; do
      measure "$system" "$size" "$count"
      awk -v s="$m_seconds" 'BEGIN {exit !(s >= 0.2)}' && break
      count=$((count * 4))
    done
    count=$(awk -v t="$target" -v c="$m_count" -v s="$m_seconds" \
      'BEGIN {n = int(t * c / s); print (n < 4 ? 4 : n)}')
  fi
  measure "$system" "$size" "$count"
  # Warm-up (page faults of fresh slots, connections) makes small pilots look slow: measure
  # again, up to twice, when the run took less than half the target.
  local _
  for _ in 1 2; do
    awk -v s="$m_seconds" -v t="$target" 'BEGIN {exit !(s < t / 2)}' || break
    count=$(awk -v t="$target" -v c="$m_count" -v s="$m_seconds" 'BEGIN {print int(t * c / s) + 1}')
    measure "$system" "$size" "$count"
  done
  record_throughput "$system" "$size"
}

# mpi_throughput SYSTEM SIZE: as throughput, with mpi_bcast's own pilots (one mpirun).
mpi_throughput() {
  local system=$1 size=$2 count
  progress "$(printf '%-18s %8s B  throughput' "$system" "$size")"
  if ((smoke)); then
    count=$((32 * 1024 * 1024 / size))
    count="--count $((count < 4 ? 4 : (count > 2000 ? 2000 : count)))"
  else
    count="--target $target"
  fi
  measure "$system" "$size" "$count"
  record_throughput "$system" "$size"
}

record_throughput() { # SYSTEM SIZE: the result of the last `measure`, to the results and stderr
  local system=$1 size=$2
  echo "tput $system $size $m_count $m_seconds $m_cpu $m_others" >>"$results"
  done_line "$(awk -v c="$m_count" -v s="$m_seconds" -v b="$size" -v cpu="$m_cpu" \
    -v o="$m_others" 'BEGIN {printf "%.0f msg/s, %.3f Gb/s, %.2f CPU s/GB (%d msgs in %.2f s; " \
      "others used %.0f %% of the CPUs)", c / s, c * b * 8 / s / 1e9, cpu / (c * b / 1e9), c, s,
      100 * o}')"
}

# latency SYSTEM SIZE: COUNT stamped messages at the offered load; the histogram file goes
# into the results (hoprelay's is complete once its daemons have stopped: see stop_topology).
latency() {
  local system=$1 size=$2 rate count file
  rate=$(awk -v r="$lat_rate" -v g="$lat_gbps" -v b="$size" \
    'BEGIN {m = g * 1e9 / (8 * b); printf "%.4g", (m < r ? m : r)}')
  count=$(awk -v r="$rate" -v t="$lat_seconds" -v m="$lat_min" \
    'BEGIN {n = int(r * t + 0.5); print (n < m ? m : n)}')
  progress "$(printf '%-6s %8s B  latency at %s msg/s' "$system" "$size" "$rate")"
  if [[ $system == zmq ]]; then
    file=$work/lat/zmq-$size.lat
    "$zmq_chain" "$size" "$count" --rate "$rate" --latency "$file" >"$work/zmq-lat.out"
  else
    local origin=$((lat_origin_base + next_origin))
    next_origin=$((next_origin + 1))
    file=$work/lat/$cur_leaf-$origin.lat
    "$hoprelay" send --topology "$cur_topo" --to "$cur_head" --count "$count" --size "$size" \
      --rate "$rate" --stamp --origin "$origin" --connect-timeout 10 --log-level error \
      >"$work/send-lat.out"
  fi
  echo "lat $system $size $rate $count ${file#"$out"/}" >>"$results"
  done_line "$count msgs"
}

echo "bench: sizes ${sizes[*]} bytes, ~${target} s per throughput run, latency at" \
  "min($lat_rate msg/s, $lat_gbps Gb/s), $(nproc) cores, load $load_before; logs in $work" >&2
echo "bench: chainbusy pins its busy-polling relay b to CPU $busy_cpu" >&2
tls_preamble=$(make_certificates)$'\n'
# Whether the links ran kernel TLS: the kernel needs the tls module (a ULP it lists).
ktls=no
grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp 2>/dev/null && ktls=yes
echo "bench: chaintls with kernel TLS: $ktls" >&2

for size in "${sizes[@]}"; do
  start_topology hop1 "$size" "x:"
  throughput hop1 "$size"
  latency hop1 "$size"
  stop_topology "$size"

  start_topology chain "$size" "c:" "b:c" "a:b"
  throughput chain "$size"
  latency chain "$size"
  stop_topology "$size"

  preamble=$tls_preamble
  start_topology chaintls "$size" "c:" "b:c" "a:b"
  preamble=''
  throughput chaintls "$size"
  stop_topology "$size"

  # b busy-polls on a CPU of its own (as far as pinning goes: other processes may still run
  # there); a stays event-driven, so `hoprelay send` (which uses the head's poll) does not spin.
  node_extra[b]=$'poll = "busy"\n'"cpu = $busy_cpu"$'\n'
  start_topology chainbusy "$size" "c:" "b:c" "a:b"
  node_extra=()
  latency chainbusy "$size"
  stop_topology "$size"

  start_topology fanout "$size" "l1:" "l2:" "a:l1,l2"
  throughput fanout "$size"
  stop_topology "$size"

  # The fan-out with a's two downstream links on threads of their own (link_threads = 2).
  node_extra[a]=$'link_threads = 2\n'
  start_topology fanoutlt "$size" "l1:" "l2:" "a:l1,l2"
  node_extra=()
  throughput fanoutlt "$size"
  stop_topology "$size"

  head_in_send=1
  start_topology fanouthead "$size" "l1:" "l2:" "a:l1,l2"
  head_in_send=0
  throughput fanouthead "$size"
  stop_topology "$size"

  throughput zmq "$size"
  latency zmq "$size"
  throughput tcp "$size"

  if [[ -z $mpi_missing ]]; then
    for shape in chain fanout; do
      for alg in "${mpi_algs[@]}"; do mpi_throughput "mpi_${shape}_${alg%%:*}" "$size"; done
    done
  fi
done

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "took $(($(date +%s) - started)) s; load average before $load_before, after $load_after" >&2
python3 "$here/report.py" --results "$results" --out "$out" --smoke "$smoke" \
  --meta "cores=$(nproc)" "load_before=$load_before" "load_after=$load_after" \
  "target_seconds=$target" "fill=$fill" "lat_rate=$lat_rate" "lat_gbps=$lat_gbps" \
  "lat_seconds=$lat_seconds" "seconds=$(($(date +%s) - started))" \
  "mpi=$([[ -n $mpi_missing ]] || mpirun --version | sed -n '1s/.*(\(.*\)) /\1 /p')" \
  "mpi_missing=$mpi_missing" "ktls=$ktls" \
  "mpi_algs=${mpi_algs[*]}" "mpi_args=${mpi_args[*]}"

#!/usr/bin/env bash
# The client library's benchmark (docs/performance.md, "Applications at both ends"), every
# figure beside its reference measured in the same run, on loopback over TCP:
#   stream   `cat FILE | hoprelay send --stdin` -> a -> b -> `hoprelay recv --output OUT`
#            against `cat FILE | nc` -> `nc -l > OUT`: the same bytes through a plain TCP pipe
#            (netcat-openbsd), and against one hop (-> a -> recv)
#   producer `hoprelay send --count N --size S` into one leaf daemon, the library producer,
#            with zero copy (reserve/commit) and with --copy (send); with OLD_BUILD=DIR (a build
#            of the commit before libhoprelay, e.g. 3797db0) the former `hoprelay send` and
#            its daemons too, at the same sizes
#
#   bench/client.sh BUILD_DIR        (STREAM_MIB=1024 SIZES="64 4096 65536" RUNS=3)
# Wall-clock throughput, the best of RUNS. Reports; asserts nothing about speed.
set -euo pipefail
build=$(cd "${1:?usage: bench/client.sh BUILD_DIR}" && pwd)
mib=${STREAM_MIB:-1024}
sizes=${SIZES:-64 4096 65536}
runs=${RUNS:-3}
command -v nc >/dev/null || { echo "client.sh: nc (netcat-openbsd) is not installed" >&2; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
gbps() { python3 -c "import sys; b,t0,t1=map(float,sys.argv[1:]); print(f'{b*8/(t1-t0)/1e9:.3f}')" "$@"; }
best() { tr ' ' '\n' | sort -g | tail -1; }
median() { tr ' ' '\n' | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
ratio() { python3 -c "import sys; a,b=map(float,sys.argv[1:]); print(f'{a/b:.2f}' if b else 'n/a')" "$1" "$2"; }

topology() { # topology DIR SLOT_SIZE: nodes a -> b -> c and a lone leaf x
  local p
  p=$(port)
  cat >"$1/t.toml" <<T
[pipeline]
name = "bench"
transport = "tcp"
slot_size = "$2"
slots = 64
[nodes.a]
listen = "127.0.0.1:$p"
downstream = ["b"]
[nodes.b]
listen = "127.0.0.1:$(port)"
downstream = ["c"]
[nodes.c]
listen = "127.0.0.1:$(port)"
[nodes.x]
listen = "127.0.0.1:$(port)"
[nodes.h]
listen = "127.0.0.1:$(port)"
downstream = ["y"]
[nodes.y]
listen = "127.0.0.1:$(port)"
T
}
start() { # start BUILD NODE...
  local b=$1
  shift
  for n in "$@"; do
    "$b/daemon/hoprelayd" --topology "$work/t.toml" --node "$n" 2>>"$work/$n.log" &
    pids+=($!)
  done
  sleep 0.5
}
stop() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}

echo "== stream of $mib MiB (best of $runs, Gb/s, wall clock from the first byte read to the last written)"
head -c "${mib}M" /dev/urandom >"$work/in"
topology "$work" 64KiB
hop2=() hop1=() pipe=()
for _ in $(seq "$runs"); do
  start "$build" b a
  "$build/client/hoprelay" recv --topology "$work/t.toml" --node c --output "$work/out" 2>/dev/null &
  r=$!
  sleep 0.5
  t0=$(now)
  "$build/client/hoprelay" send --topology "$work/t.toml" --to a --stdin <"$work/in" >/dev/null
  wait $r
  t1=$(now)
  cmp -s "$work/in" "$work/out" || { echo "stream differs" >&2; exit 1; }
  hop2+=("$(gbps $((mib << 20)) "$t0" "$t1")")
  stop
  start "$build" h
  "$build/client/hoprelay" recv --topology "$work/t.toml" --node y --output "$work/out" 2>/dev/null &
  r=$!
  sleep 0.5
  t0=$(now)
  "$build/client/hoprelay" send --topology "$work/t.toml" --to h --stdin <"$work/in" >/dev/null
  wait $r
  t1=$(now)
  hop1+=("$(gbps $((mib << 20)) "$t0" "$t1")")
  stop
  p=$(port)
  nc -l 127.0.0.1 "$p" >"$work/out" &
  r=$!
  sleep 0.3
  t0=$(now)
  cat "$work/in" | nc -N 127.0.0.1 "$p"
  wait $r
  t1=$(now)
  cmp -s "$work/in" "$work/out" || { echo "nc pipe differs" >&2; exit 1; }
  pipe+=("$(gbps $((mib << 20)) "$t0" "$t1")")
done
rm -f "$work/out"
b2=$(echo "${hop2[@]}" | best) b1=$(echo "${hop1[@]}" | best) bp=$(echo "${pipe[@]}" | best)
printf '  %-44s %8s Gb/s\n' "cat | nc -> nc -l > file (plain TCP pipe)" "$bp"
printf '  %-44s %8s Gb/s  %sx the pipe\n' "send --stdin -> a -> recv > file (one relay)" "$b1" "$(ratio "$b1" "$bp")"
printf '  %-44s %8s Gb/s  %sx the pipe\n' "send --stdin -> a -> b -> recv > file" "$b2" "$(ratio "$b2" "$bp")"

echo "== producer into one leaf daemon (best of $runs; msg/s; slots of the message's size, 4 MiB in flight)"
printf '  %8s | %12s | %12s | %12s | %s\n' size "zero copy" "copy" "before" "zero copy / before"
for size in $sizes; do
  count=$((size <= 64 ? 3000000 : (size <= 4096 ? 500000 : 50000)))
  # bench/run.sh's geometry: slot_size = the size (256 B to 256 KiB), about 4 MiB in flight.
  slot=$((size < 256 ? 256 : (size > 262144 ? 262144 : size)))
  slots=$(((4 << 20) / slot))
  slots=$((slots < 64 ? 64 : (slots > 4096 ? 4096 : slots)))
  sed -i "s/^slot_size = .*/slot_size = $slot/; s/^slots = .*/slots = $slots/" "$work/t.toml"
  zc=() cp=() old=()
  for _ in $(seq "$runs"); do
    start "$build" x
    zc+=("$("$build/client/hoprelay" send --topology "$work/t.toml" --to x --count $count --size "$size" |
      grep -o '[0-9]* msg/s' | cut -d' ' -f1)")
    cp+=("$("$build/client/hoprelay" send --topology "$work/t.toml" --to x --count $count --size "$size" --copy |
      grep -o '[0-9]* msg/s' | cut -d' ' -f1)")
    stop
    if [[ -n ${OLD_BUILD:-} ]]; then
      start "$OLD_BUILD" x
      old+=("$("$OLD_BUILD/client/hoprelay" send --topology "$work/t.toml" --to x --count $count --size "$size" |
        grep -o '[0-9]* msg/s' | cut -d' ' -f1)")
      stop
    fi
  done
  z=$(echo "${zc[@]}" | best) c=$(echo "${cp[@]}" | best) o=$(echo "${old[@]:-}" | best)
  printf '  %8s | %12s | %12s | %12s | %s\n' "$size B" "$z" "$c" "${o:--}" \
    "$([[ -n $o ]] && ratio "$z" "$o" || echo -)"
done

# Outcomes (wire version 4) must cost delivered messages nothing: the same 64-byte run through
# two relays, this build against OLD_BUILD, alternating, in the same run.
if [[ -n ${OLD_BUILD:-} ]]; then
  echo "== 64 B through a -> b -> c (best of $runs; msg/s): this build against OLD_BUILD"
  sed -i "s/^slot_size = .*/slot_size = 256/; s/^slots = .*/slots = 4096/" "$work/t.toml"
  new=() old=()
  for _ in $(seq "$runs"); do
    for which in new old; do
      b=$build
      [[ $which == old ]] && b=$OLD_BUILD
      start "$b" c b a
      r=$("$b/client/hoprelay" send --topology "$work/t.toml" --to a --count 3000000 --size 64 |
        grep -o '[0-9]* msg/s' | cut -d' ' -f1)
      stop
      if [[ $which == new ]]; then new+=("$r"); else old+=("$r"); fi
    done
  done
  n=$(echo "${new[@]}" | best) o=$(echo "${old[@]}" | best)
  nm=$(echo "${new[@]}" | median) om=$(echo "${old[@]}" | median)
  printf '  best: this build %s msg/s, OLD_BUILD %s msg/s: %sx\n' "$n" "$o" "$(ratio "$n" "$o")"
  printf '  median: this build %s msg/s, OLD_BUILD %s msg/s: %sx\n' "$nm" "$om" \
    "$(ratio "$nm" "$om")"
  printf '  runs: %s / %s\n' "${new[*]}" "${old[*]}"
fi

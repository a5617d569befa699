#!/usr/bin/env bash
# The main job: installs what is missing, builds, then on this host
#  1. streams a file (FILE=, default a generated file of STREAM_MIB MiB, 1024) with
#     `hoprelay send --stdin` through a -> b -> c of config/examples/stream.toml, c being
#     `hoprelay recv` (an application consuming the leaf), and compares SHA-256 at both ends;
#  2. runs the a -> b -> c demo pipeline of config/examples/demo.toml, pushes COUNT messages of
#     SIZE bytes through it and prints what arrived at the sink.
# Exits non-zero on any difference, loss, duplicate or corruption.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
COUNT=${COUNT:-200000}
SIZE=${SIZE:-4096}

./scripts/install-deps.sh --build-only
./scripts/build.sh

RUN="$ROOT/build/demo"
rm -rf "$RUN" && mkdir -p "$RUN" && cd "$RUN"
HOPRELAY="$ROOT/build/client/hoprelay"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
wait_metrics() { # wait_metrics PORT...
  for port in "$@"; do
    for _ in $(seq 100); do
      curl -sf "http://127.0.0.1:$port/metrics" >/dev/null 2>&1 && break
      sleep 0.1
    done
  done
}

# --- 1. a file, streamed by applications at both ends -------------------------------------
STREAM="$ROOT/config/examples/stream.toml"
"$HOPRELAY" validate "$STREAM"
input=${FILE:-$RUN/stream.in}
if [[ -z ${FILE:-} ]]; then
  echo "== generating $input (${STREAM_MIB:-1024} MiB of random bytes; FILE= streams another)"
  head -c "${STREAM_MIB:-1024}M" /dev/urandom >"$input"
fi
for node in b a; do
  "$ROOT/build/daemon/hoprelayd" --topology "$STREAM" --node "$node" 2>"stream-$node.log" &
  pids+=($!)
done
"$HOPRELAY" recv --topology "$STREAM" --node c --output stream.out --timeout 60 2>stream-recv.log &
recv_pid=$!
wait_metrics 9111 9112 9113
echo "== streaming $input: hoprelay send --stdin -> a -> b -> hoprelay recv (c)"
"$HOPRELAY" send --topology "$STREAM" --to a --stdin --size 65532 <"$input"
wait "$recv_pid" || { cat stream-recv.log; echo "hoprelay recv failed"; exit 1; }
cat stream-recv.log
cleanup
for p in "${pids[@]}"; do wait "$p" || echo "a stream daemon exited with $?"; done
pids=()
sum_in=$(sha256sum <"$input" | cut -c1-64)
sum_out=$(sha256sum <stream.out | cut -c1-64)
echo "sha256 sent     $sum_in"
echo "sha256 received $sum_out"
[[ $sum_in == "$sum_out" ]] || { echo "the stream arrived different"; exit 1; }
rm -f stream.out "$RUN/stream.in"

# --- 2. the counted run -------------------------------------------------------------------
TOPOLOGY="$ROOT/config/examples/demo.toml"
"$HOPRELAY" validate "$TOPOLOGY"
for node in c b a; do
  "$ROOT/build/daemon/hoprelayd" --topology "$TOPOLOGY" --node "$node" 2>"$node.log" &
  pids+=($!)
done
wait_metrics 9101 9102 9103  # up when each node serves its metrics

echo "== sending $COUNT messages of $SIZE bytes into a"
# Exit 3: every message settled, some dropped on the way; send names where and why.
sent=0
"$ROOT/build/client/hoprelay" send --topology "$TOPOLOGY" --to a --count "$COUNT" --size "$SIZE" ||
  sent=$?
[[ $sent == 0 || $sent == 3 ]] || exit "$sent"

# The producer returns once a acknowledged everything, and a acknowledges a message only once
# c has it; the report is rewritten every second.
for _ in $(seq 50); do
  grep -q "\"received\": $COUNT," c-report.json 2>/dev/null && break
  sleep 0.2
done
cleanup
for p in "${pids[@]}"; do wait "$p" || echo "a daemon exited with $?"; done
trap - EXIT

echo "== what arrived at c ($RUN/c-report.json)"
cat c-report.json
python3 - "$COUNT" c-report.json <<'PY'
import json, sys
want = int(sys.argv[1]); r = json.load(open(sys.argv[2]))
lost = want - r["received"]
print(f"arrived {r['received']} of {want}: lost {lost}, duplicates {r['duplicates']}, "
      f"corrupt {r['corrupt']}")
sys.exit(0 if lost == 0 and r["duplicates"] == 0 and r["corrupt"] == 0 else 1)
PY
[[ $sent == 0 ]] || { echo "hoprelay send reported drops (where and why: above)"; exit 1; }

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

# Set-up and build: one line each; their output goes to a log, shown only when they fail.
mkdir -p build
SETUP_LOG="$ROOT/build/demo-setup.log"
quietly() { # quietly WHAT CMD...: runs CMD with its output in $SETUP_LOG
  echo "== $1"
  if ! "${@:2}" >"$SETUP_LOG" 2>&1; then
    cat "$SETUP_LOG"
    echo "demo: $1 failed (output above, also in $SETUP_LOG)"
    exit 1
  fi
}
quietly "installing missing Debian packages (scripts/install-deps.sh --build-only)" \
  ./scripts/install-deps.sh --build-only
# Only what the demo runs: the daemon and the CLI (with libhoprelay), not the tests or benchmarks.
quietly "building hoprelayd and hoprelay into build/" \
  env TARGETS="hoprelayd hoprelay" ./scripts/build.sh

RUN="$ROOT/build/demo"
rm -rf "$RUN" && mkdir -p "$RUN" && cd "$RUN"
HOPRELAY="$ROOT/build/client/hoprelay"
pids=()
declare -A node_of log_of  # pid -> the node it runs and its log, to say which one failed
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
# A stray hoprelayd of an earlier run still holding a demo node's ports would carry the traffic
# in place of the demo's own node, which would exit 69 while the demo reported success.
refuse_taken_ports() { # refuse_taken_ports TOPOLOGY PORT...
  for port in "${@:2}"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "demo: port $port of $1 is taken, by a stray hoprelayd from an earlier run or another"
      echo "      process; running hoprelayd processes:"
      pgrep -a hoprelayd | sed 's/^/        /' || echo "        (none: see ss -ltnp 'sport = :$port')"
      echo "      stop it (kill PID) and run the demo again"
      exit 1
    fi
  done
}
start_node() { # start_node TOPOLOGY NODE LOG
  "$ROOT/build/daemon/hoprelayd" --topology "$1" --node "$2" 2>"$3" &
  pids+=($!)
  node_of[$!]=$2
  log_of[$!]=$RUN/$3
}
# Every daemon still running (after its metrics came up), or which one exited, with what.
check_nodes() {
  for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null && continue
    local code=0
    wait "$p" || code=$?
    echo "demo: hoprelayd ${node_of[$p]} exited with $code; the end of ${log_of[$p]}:"
    tail -5 "${log_of[$p]}"
    exit 1
  done
}
# SIGTERM to every daemon; each must drain and exit 0.
stop_nodes() {
  cleanup
  local failed=0
  for p in "${pids[@]}"; do
    local code=0
    wait "$p" || code=$?
    if ((code)); then
      echo "demo: hoprelayd ${node_of[$p]} exited with $code (log: ${log_of[$p]})"
      failed=1
    fi
  done
  pids=()
  return $failed
}

# --- 1. a file, streamed by applications at both ends -------------------------------------
STREAM="$ROOT/config/examples/stream.toml"
"$HOPRELAY" validate "$STREAM"
input=${FILE:-$RUN/stream.in}
if [[ -z ${FILE:-} ]]; then
  echo "== generating $input (${STREAM_MIB:-1024} MiB of random bytes; FILE= streams another)"
  head -c "${STREAM_MIB:-1024}M" /dev/urandom >"$input"
fi
refuse_taken_ports "$STREAM" 7011 7012 7013 9111 9112 9113
for node in b a; do start_node "$STREAM" "$node" "stream-$node.log"; done
"$HOPRELAY" recv --topology "$STREAM" --node c --output stream.out --timeout 60 2>stream-recv.log &
recv_pid=$!
wait_metrics 9111 9112 9113
check_nodes
echo "== streaming $input: hoprelay send --stdin -> a -> b -> hoprelay recv (c)"
"$HOPRELAY" send --topology "$STREAM" --to a --stdin --size 65532 <"$input"
wait "$recv_pid" || { cat stream-recv.log; echo "hoprelay recv failed"; exit 1; }
cat stream-recv.log
stop_nodes || exit 1
sum_in=$(sha256sum <"$input" | cut -c1-64)
sum_out=$(sha256sum <stream.out | cut -c1-64)
echo "sha256 sent     $sum_in"
echo "sha256 received $sum_out"
[[ $sum_in == "$sum_out" ]] || { echo "the stream arrived different"; exit 1; }
rm -f stream.out "$RUN/stream.in"

# --- 2. the counted run -------------------------------------------------------------------
TOPOLOGY="$ROOT/config/examples/demo.toml"
"$HOPRELAY" validate "$TOPOLOGY"
refuse_taken_ports "$TOPOLOGY" 7001 7002 7003 9101 9102 9103
for node in c b a; do start_node "$TOPOLOGY" "$node" "$node.log"; done
wait_metrics 9101 9102 9103  # up when each node serves its metrics
check_nodes

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
stop_nodes || exit 1
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

#!/usr/bin/env bash
# The main job: installs what is missing, builds, runs the a -> b -> c demo pipeline of
# config/examples/demo.toml on this host, pushes COUNT messages of SIZE bytes through it and
# prints what arrived at the sink. Exits non-zero on any loss, duplicate or corruption.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
COUNT=${COUNT:-200000}
SIZE=${SIZE:-4096}

./scripts/install-deps.sh --build-only
./scripts/build.sh

RUN="$ROOT/build/demo"
rm -rf "$RUN" && mkdir -p "$RUN" && cd "$RUN"
TOPOLOGY="$ROOT/config/examples/demo.toml"
"$ROOT/build/client/hoprelay" validate "$TOPOLOGY"

pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for node in c b a; do
  "$ROOT/build/daemon/hoprelayd" --topology "$TOPOLOGY" --node "$node" 2>"$node.log" &
  pids+=($!)
done
# Up when each node serves its metrics.
for port in 9101 9102 9103; do
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/metrics" >/dev/null 2>&1 && break
    sleep 0.1
  done
done

echo "== sending $COUNT messages of $SIZE bytes into a"
"$ROOT/build/client/hoprelay" send --topology "$TOPOLOGY" --to a --count "$COUNT" --size "$SIZE"

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

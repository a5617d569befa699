#!/usr/bin/env bash
# ctest client.durable_recipe: the durable consumer of docs/client.md ("A durable consumer that
# batches"), as a reader would run it. Takes the section's C block as written, builds it against
# this tree's header and library, and runs it as node solo (a head and a leaf) with a state
# directory while `hoprelay send --file --framing lines` streams 200,000 lines of 0 to 120 bytes
# into it at 40,000 a second; the consumer is killed with SIGKILL three times mid-stream and
# once near the end of the stream, and started again each time. The output must end byte-equal to the input (nothing lost, nothing twice), the
# consumer exit 0 at the end mark, and the producer exit 0.
#   tests/client/durable_recipe.sh SOURCE_DIR LIBHOPRELAY_SO HOPRELAY_BIN
set -euo pipefail
src=$1
lib=$2
hoprelay=$3
work=$(mktemp -d /tmp/hoprelay-durable.XXXXXX)
consumer_pid=
send_pid=
cleanup() {
  [[ -n $consumer_pid ]] && kill -9 "$consumer_pid" 2>/dev/null
  [[ -n $send_pid ]] && kill -9 "$send_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log; do [[ -e $f ]] && { echo "--- $f"; tail -n 5 "$f"; }; done
  exit 1
}

awk '
  /^### A durable consumer that batches/ {on = 1; next}
  on && !inside && /^#/ {exit}
  on && /^```c$/ {inside = 1; next}
  on && inside && /^```$/ {exit}
  inside {print}' "$src/docs/client.md" >"$work/durable.c"
[[ -s $work/durable.c ]] || fail "docs/client.md's durable consumer has no C block"
libdir=$(dirname "$lib")
cc -std=c99 -Wall -Werror "$work/durable.c" -I"$src/client/include" -L"$libdir" -lhoprelay \
  "-Wl,-rpath,$libdir" -o "$work/durable" || fail "the durable consumer does not build"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf '[pipeline]\nname = "durable-recipe"\ntransport = "tcp"\n[nodes.solo]\nlisten = "127.0.0.1:%s"\n' \
  "$port" >"$work/t.toml"
python3 - "$work/in.txt" <<'PY'
import random, sys
rng = random.Random(7)
with open(sys.argv[1], "w") as f:
    for i in range(200000):
        f.write("%d %s\n" % (i, "x" * rng.randint(0, 112)) if i % 50 else "\n")
PY

start_consumer() {
  "$work/durable" "$work/t.toml" solo "$work/state" "$work/out.txt" >>"$work/consumer.log" 2>&1 &
  consumer_pid=$!
}
start_consumer
"$hoprelay" send --topology "$work/t.toml" --to solo --file "$work/in.txt" --framing lines \
  --origin 9 --rate 40000 --connect-timeout 30 >"$work/send.log" 2>&1 &
send_pid=$!
for at in 1.2 1.2 1.2; do
  sleep "$at"
  kill -0 "$send_pid" 2>/dev/null || fail "the stream ended before the consumer was killed"
  kill -9 "$consumer_pid"
  wait "$consumer_pid" 2>/dev/null || true
  start_consumer
done
# Once more at the end of the stream: when the output holds 95 % of the input (the last
# 10,000 lines, a quarter of a second at this rate), with a batch of it not yet committed.
size=$(stat -c %s "$work/in.txt")
until (($(stat -c %s "$work/out.txt" 2>/dev/null || echo 0) * 100 >= size * 95)); do
  kill -0 "$consumer_pid" 2>/dev/null || fail "the consumer ended before 95 % of the output"
  sleep 0.01
done
kill -9 "$consumer_pid" 2>/dev/null || fail "the consumer ended before the kill at the end of the stream"
wait "$consumer_pid" 2>/dev/null || true
start_consumer
wait "$send_pid" || fail "hoprelay send exited with $?"
send_pid=
for _ in $(seq 200); do
  kill -0 "$consumer_pid" 2>/dev/null || break
  sleep 0.05
done
wait "$consumer_pid" || fail "the consumer exited with $?"
consumer_pid=
cmp "$work/in.txt" "$work/out.txt" || fail "the output differs from the input"
echo "client.durable_recipe: 200000 lines, the consumer killed 3 times mid-stream and once at the end: the output is byte-equal"

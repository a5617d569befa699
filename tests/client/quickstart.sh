#!/usr/bin/env bash
# ctest client.quickstart: the quick start of docs/client.md, as a reader would run it. Takes
# its three code blocks (t.toml, producer.c, consumer.cpp) from the doc as they are written,
# builds the programs against this tree's headers and library with the plain compilers, runs
# the consumer, then the producer, and checks that the consumer printed "hello" and ended with
# the stream. Only the port changes (7001 may be taken on a machine running tests at once).
#   tests/client/quickstart.sh SOURCE_DIR LIBHOPRELAY_SO
set -euo pipefail
src=$1
lib=$2
work=$(mktemp -d /tmp/hoprelay-quickstart.XXXXXX)
consumer_pid=
cleanup() {
  [[ -n $consumer_pid ]] && kill "$consumer_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

# The blocks between "## Quick start" and the next "## ": the first ```toml, ```c and ```cpp.
awk -v dir="$work" '
  /^## Quick start/ {on = 1; next}
  on && /^## / {exit}
  on && /^```(toml|c|cpp)$/ {lang = substr($0, 4); n[lang]++; next}
  on && /^```$/ {lang = ""; next}
  on && lang != "" && n[lang] == 1 {
    file = (lang == "toml") ? "t.toml" : (lang == "c") ? "producer.c" : "consumer.cpp"
    print > (dir "/" file)
  }' "$src/docs/client.md"
for f in t.toml producer.c consumer.cpp; do
  [[ -s $work/$f ]] || fail "docs/client.md's quick start has no $f block"
done
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -i "s/127.0.0.1:7001/127.0.0.1:$port/" "$work/t.toml"
grep -q "127.0.0.1:$port" "$work/t.toml" || fail "the quick start's t.toml does not listen on 127.0.0.1:7001"

# As `pkg-config --cflags --libs hoprelay` would give them for an installed library.
libdir=$(dirname "$lib")
flags=(-I"$src/client/include" -L"$libdir" -lhoprelay "-Wl,-rpath,$libdir")
cc -Wall -Werror "$work/producer.c" "${flags[@]}" -o "$work/producer" ||
  fail "the quick start's producer.c does not build"
c++ -std=c++20 -Wall -Werror "$work/consumer.cpp" "${flags[@]}" -o "$work/consumer" ||
  fail "the quick start's consumer.cpp does not build"

cd "$work"
./consumer >consumer.out 2>&1 &
consumer_pid=$!
./producer >producer.out 2>&1 || fail "producer: $(cat producer.out)"
for _ in $(seq 200); do
  kill -0 "$consumer_pid" 2>/dev/null || break
  sleep 0.05
done
wait "$consumer_pid" || fail "consumer exited with $?: $(cat consumer.out)"
consumer_pid=
[[ $(cat consumer.out) == hello ]] || fail "consumer printed: $(cat consumer.out)"
echo "client.quickstart: the quick start builds, and the consumer printed hello"

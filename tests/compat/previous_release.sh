#!/usr/bin/env bash
# ctest compat.previous_release: this release and the last one without wire negotiation (the
# release at 97db411, wire protocol 6) on the links of one pipeline, as a fleet upgraded host
# by host runs (docs/protocol.md, "Versioning"; docs/operations.md, "Upgrading host by host").
#
# The previous release is built from the repository's history once and cached
# (scripts/previous-release.sh).
# Then, over TCP on loopback, two chains of three nodes, 20,000 messages of 1,000 bytes each:
#   1. new `hoprelay send` -> old a -> new b -> old c   (a new producer into an old head)
#   2. old `hoprelay send` -> new a -> old b -> new c   (an old producer into a new head)
#   3. all of this release (its links speak 7: none says wire protocol 6)
#   4. a head of this release spooling for a branch that is down: a new producer is told
#      where its messages wait, an old producer that they were delivered
# Each: send exits 0, the leaf's verify-sink counts 20,000 received, 0 duplicates, 0 missing,
# 0 corrupt, 0 reordered, and each new node logs that a link speaks wire protocol 6.
#   tests/compat/previous_release.sh SOURCE_DIR HOPRELAYD HOPRELAY   (KEEP=1: keep the logs)
set -euo pipefail
src=$1
new_daemon=$2
new_cli=$3
commit=97db411 # the last release that speaks only wire protocol 6
count=20000
work=$(mktemp -d /tmp/hoprelay-compat.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  if [[ -n ${KEEP:-} ]]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*/*.log; do
    [[ -f $f ]] && { echo "--- $f"; tail -n 20 "$f"; }
  done
  exit 1
}

# ---- the previous release, built once (scripts/previous-release.sh) ------------------------
old=$("$src/scripts/previous-release.sh") || fail "no build of the release at $commit"
grep -qx "wire protocol: 6" <<<"$("$old/hoprelayd" --version)" ||
  fail "$old/hoprelayd is not a release of wire protocol 6: $("$old/hoprelayd" --version)"

# The old CLI with the old library: an old producer is libhoprelay of that release.
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$old" "$old/hoprelay" >"$work/old-hoprelay"
chmod +x "$work/old-hoprelay"
# (ldd's whole output first: grep -q stops reading at the match, and under pipefail the
# SIGPIPE that ldd may then get would fail the check.)
grep -q "libhoprelay.so.1 => $old/" <<<"$(LD_LIBRARY_PATH=$old ldd "$old/hoprelay")" ||
  fail "the old hoprelay does not load the old libhoprelay"

port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# chain NAME PRODUCER DAEMON_A DAEMON_B DAEMON_C [NODE...]: each NODE (a new one beside an old
# one) logs a link of wire protocol 6; with none, no node does.
chain() {
  local name=$1 producer=$2 da=$3 db=$4 dc=$5
  shift 5
  local dir=$work/$name
  mkdir -p "$dir"
  cat >"$dir/t.toml" <<TOML
[pipeline]
name = "compat-$name"
transport = "tcp"
slot_size = "4KiB"
slots = 32

[nodes.a]
listen = "127.0.0.1:$(port)"
downstream = ["b"]
stage = { plugin = "passthrough" }

[nodes.b]
listen = "127.0.0.1:$(port)"
downstream = ["c"]
stage = { plugin = "passthrough" }

[nodes.c]
listen = "127.0.0.1:$(port)"
stage = { plugin = "verify-sink", report = "$dir/c.json" }
TOML
  local node daemon started=()
  for node in c b a; do
    case $node in a) daemon=$da ;; b) daemon=$db ;; c) daemon=$dc ;; esac
    "$daemon" --topology "$dir/t.toml" --node "$node" >"$dir/$node.log" 2>&1 &
    pids+=($!)
    started+=("$node:$!")
  done
  "$producer" send --topology "$dir/t.toml" --to a --count "$count" --size 1000 --origin 5 \
    --connect-timeout 30 >"$dir/send.log" 2>&1 || fail "$name: hoprelay send exited with $?: $(cat "$dir/send.log")"
  local entry
  for entry in "${started[@]}"; do  # a planned stop: each drains, c writes its report
    kill -TERM "${entry#*:}"
    wait "${entry#*:}" || fail "$name: node ${entry%%:*} exited with $?"
  done
  local key want got
  for key in received:$count duplicates:0 missing:0 corrupt:0 reordered:0; do
    want=${key#*:}
    got=$(grep -Eo "^  \"${key%%:*}\": [0-9]+" "$dir/c.json" | grep -Eo '[0-9]+$' || echo none)
    [[ $got == "$want" ]] || fail "$name: the leaf's ${key%%:*} is $got, not $want"
  done
  for node in "$@"; do
    grep -q "wire protocol 6: the peer's release is older" "$dir/$node.log" ||
      fail "$name: new node $node did not log a link of wire protocol 6"
  done
  if (($# == 0)) && grep -q "wire protocol 6" "$dir"/*.log; then
    fail "$name: a link between two nodes of this release speaks wire protocol 6"
  fi
  echo "compat.previous_release: $name: $count messages exactly once, in order"
}

chain new-producer-old-head "$new_cli" "$old/hoprelayd" "$new_daemon" "$old/hoprelayd" b
chain old-producer-new-head "$work/old-hoprelay" "$new_daemon" "$old/hoprelayd" "$new_daemon" a c
chain this-release-only "$new_cli" "$new_daemon" "$new_daemon" "$new_daemon"

# 4. A head of this release that spools for a branch that is down (spool_dir): its outcomes
# tell this release's producer where the messages wait; to the old producer (which reads its
# own copy of the file, without the key its release does not know) they say delivered, as its
# release understands them (feature kFeatureSpooledOutcome is not on its link).
spool_dir=$work/spool
mkdir -p "$spool_dir"
spool_port_a=$(port) spool_port_b=$(port) spool_port_c=$(port)
for copy in new old; do
  {
    printf '[pipeline]\nname = "compat-spool"\ntransport = "tcp"\nslot_size = "4KiB"\nslots = 32\n'
    printf '\n[nodes.a]\nlisten = "127.0.0.1:%s"\ndownstream = ["b", "c"]\n' "$spool_port_a"
    [[ $copy == new ]] && printf 'spool_dir = "%s"\n' "$spool_dir"
    printf '\n[nodes.b]\nlisten = "127.0.0.1:%s"\n' "$spool_port_b"
    printf 'stage = { plugin = "verify-sink", report = "%s/b.json" }\n' "$spool_dir"
    printf '\n[nodes.c]\nlisten = "127.0.0.1:%s"\n' "$spool_port_c"
  } >"$work/spool-$copy.toml"
done
"$new_daemon" --topology "$work/spool-new.toml" --node b >"$work/spool-b.log" 2>&1 &
spool_b=$!
pids+=("$spool_b")
"$new_daemon" --topology "$work/spool-new.toml" --node a >"$work/spool-a.log" 2>&1 &
spool_a=$!
pids+=("$spool_a")
"$work/old-hoprelay" send --topology "$work/spool-old.toml" --to a --count 2000 --size 100 \
  --origin 21 --connect-timeout 30 >"$work/spool-old-send.log" 2>&1 ||
  fail "spool: the old hoprelay send exited with $?: $(cat "$work/spool-old-send.log")"
grep -q "spooled" "$work/spool-old-send.log" &&
  fail "spool: the old producer was told of a spool: $(cat "$work/spool-old-send.log")"
"$new_cli" send --topology "$work/spool-new.toml" --to a --count 2000 --size 100 --origin 22 \
  --connect-timeout 30 >"$work/spool-new-send.log" 2>&1 ||
  fail "spool: hoprelay send exited with $?: $(cat "$work/spool-new-send.log")"
grep -qx "2000 delivered, of which 2000 still spooled at a for c" "$work/spool-new-send.log" ||
  fail "spool: this release's producer was not told where its messages wait: $(cat "$work/spool-new-send.log")"
kill -TERM "$spool_a" "$spool_b"
wait "$spool_a" "$spool_b" || true
grep -q '^  "received": 4000,' "$spool_dir/b.json" ||
  fail "spool: b got $(grep '"received"' "$spool_dir/b.json" | head -1), not 4000"
echo "compat.previous_release: a spooling head: this release's producer told 'spooled at a for c', the old one 'delivered', 4000 at b"
echo "compat.previous_release: ok: release $commit (wire 6) and this one (wire 6 to 7) on every link of two chains"

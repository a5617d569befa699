#!/usr/bin/env bash
# How close a link capped by `rate_limit` gets to its cap (issue 44, docs/topology.md "Capping
# what a distribution takes"; docs/performance.md "Capping a distribution"), against the kernel's
# own shaper doing the same in the same run. Two emulated hosts (tests/fleet/fleet.sh), NICs of
# RATE (default 1gbit); host 0 runs a head, host 1 a leaf; MIB MiB (default 64) of 64 KiB
# messages go from host 0 to host 1 three times:
#   line      no limit: what the link itself gives (RATE, less TCP/IP);
#   limit     rate_limit = LIMIT (default 100Mbit) on the head;
#   tc        no limit, host 0's NIC shaped to LIMIT with tbf instead: the reference.
# Each is timed by `hoprelay send` (its "sent ... in S s" line), and printed as Mbit/s of
# payload and as the ratio limit / LIMIT and limit / tc. The leaf's verify-sink checks every
# message once.
#   bench/rate_limit.sh [--smoke] BUILD_DIR      (root: namespaces; --smoke: 4 MiB)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
bench_args "$@"
fleet_sh=$here/../tests/fleet/fleet.sh
if [[ $(id -u) != 0 ]] || ! ip netns add "hrl$$-probe" 2>/dev/null; then
  # ctest's bench.rate_limit_smoke counts 77 as skipped.
  echo "rate_limit.sh: needs root and network namespaces (ip netns add): run it with sudo" >&2
  exit 77
fi
ip netns del "hrl$$-probe"
rate=${RATE:-1gbit}
limit=${LIMIT:-100Mbit}
mib=${MIB:-64}
((smoke)) && mib=4
fleet=rl$$
work=$(mktemp -d /tmp/hoprelay-ratelimit.XXXXXX)
cleanup() {
  "$fleet_sh" down "$fleet" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
"$fleet_sh" up "$fleet" 2 "$rate" >/dev/null
mapfile -t hosts < <("$fleet_sh" hosts "$fleet")
count=$((mib * 16)) # 64 KiB messages

run() { # run NAME EXTRA_HEAD_KEYS: prints Mbit/s of payload
  local name=$1 extra=$2 dir=$work/$1
  mkdir -p "$dir"
  cat >"$dir/t.toml" <<TOML
[pipeline]
name = "rl-$name"
transport = "tcp"
slot_size = "64KiB"
slots = 64

[nodes.a]
listen = "${hosts[0]}"
downstream = ["b"]
$extra

[nodes.b]
listen = "${hosts[1]}"
stage = { plugin = "verify-sink", report = "$dir/b.json" }
TOML
  "$fleet_sh" exec "$fleet" 1 "$hoprelayd" --topology "$dir/t.toml" --node b >"$dir/b.log" 2>&1 &
  local b=$!
  "$fleet_sh" exec "$fleet" 0 "$hoprelayd" --topology "$dir/t.toml" --node a >"$dir/a.log" 2>&1 &
  local a=$!
  "$fleet_sh" exec "$fleet" 0 "$hoprelay" send --topology "$dir/t.toml" --to a --count "$count" \
    --size 65536 --connect-timeout 30 >"$dir/send.log" 2>&1 || {
    cat "$dir/send.log" >&2
    exit 1
  }
  kill -TERM "$a" "$b"
  wait "$a" "$b" || true
  if ! { grep -q "^  \"received\": $count," "$dir/b.json" &&
    grep -q '^  "missing": 0,' "$dir/b.json" && grep -q '^  "duplicates": 0,' "$dir/b.json"; }; then
    echo "rate_limit.sh: $name: the leaf did not get every message once: $(head -5 "$dir/b.json")" >&2
    exit 1
  fi
  # "sent N messages, BYTES bytes in SECONDS s: ..."
  awk '/^sent / {for (i = 1; i <= NF; ++i) if ($i == "in") print $4 * 8 / $(i + 1) / 1e6}' \
    "$dir/send.log"
}

line=$(run line "")
limited=$(run limit "rate_limit = \"$limit\"")
"$fleet_sh" throttle "$fleet" 0 "${limit,,}" >/dev/null
shaped=$(run tc "")
want=$(python3 -c "import sys; print(int(sys.argv[1][:-4]) * {'k': 1e-3, 'M': 1, 'G': 1e3}[sys.argv[1][-4]])" "$limit")
printf 'rate_limit: %s MiB of 64 KiB messages, host NICs at %s\n' "$mib" "$rate"
printf '  line (no limit)      %8.1f Mbit/s\n' "$line"
printf '  rate_limit = %-8s %8.1f Mbit/s  (%.3f of the limit)\n' "$limit" "$limited" \
  "$(python3 -c "print($limited / $want)")"
printf '  tc tbf at %-10s %8.1f Mbit/s  (rate_limit / tc: %.3f)\n' "$limit" "$shaped" \
  "$(python3 -c "print($limited / $shaped)")"

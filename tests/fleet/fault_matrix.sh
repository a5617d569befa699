#!/usr/bin/env bash
# The fault matrix (issue 59): faults as operators meet them, on the hosts of a namespace fleet
# (tests/fleet/README.md), each cell on a fleet of its own, and what every other host got.
#
#   tests/fleet/fault_matrix.sh BUILD_DIR [CELL...]
#   MATRIX_KEEP=1: each cell's directory (logs, copies) is kept beside the work directory.
#
# A CELL is FAULT:ROLE:STAGE; without any, every cell of MATRIX_FAULTS x MATRIX_ROLES x
# MATRIX_STAGES. The fleet: MATRIX_HOSTS (8) hosts at MATRIX_RATE (100mbit), a `tree:2` that
# `hoprelay plan` writes, with on_peer_down = "bypass", peer_down_timeout = "500ms",
# peer_dead_after = "2s" and spool_dir on every node; MATRIX_MIB (16) MiB of random bytes from
# `hoprelay send --file` at the head h0. The role's host: `relay` is h1 (h3, h4 and h7 below it),
# `leaf` h6. Faults, a third into the stream unless said:
#   kill       its processes killed with SIGKILL, started again 2 s later (as systemd does)
#   power      the host lost for good as in a power loss: its NIC first (fleet.sh lose)
#   freeze     its processes stopped with SIGSTOP for 10 s (a GC pause, a hung disk, a paused VM)
#   slow       its NIC at a quarter of the rate from the start
#   spoolfull  frozen for 10 s while its upstream's spool_dir is a 2 MiB tmpfs
#   sinkfull   its copy written to a 2 MiB tmpfs
# Stages: `copy`, every host but the head a `hoprelay recv` that keeps a copy of the file
# (a relay's relays it; it waits for a second stream, so that its node, its spools and its
# metrics stay for send's --wait-all to watch); `sink`, every host a hoprelayd whose stage is file-sink, the copy its
# records file. A cell passes when every live host has a copy byte-equal to the input (copy)
# or to what file-sink writes of it (sink) within 60 s of the send's end; its line says the
# time until every host but the fault's own had its copy and until every live host had, each
# over the no-fault run's, what `send --wait-all 60` said last and its exit code, and which
# copies are not whole.
# It prints a Markdown table (docs/guarantees.md keeps the last run's) and exits 1 when a cell
# fails. Needs root (exit 77 without), like fleet.suite.
set -uo pipefail
build=$(cd "${1:?usage: fault_matrix.sh BUILD_DIR [FAULT:ROLE:STAGE...]}" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
hosts_n=${MATRIX_HOSTS:-8}
rate=${MATRIX_RATE:-100mbit}
mib=${MATRIX_MIB:-16}
hoprelay=$build/client/hoprelay
hoprelayd=$build/daemon/hoprelayd
declare -A role_host=([relay]=1 [leaf]=6)

if [[ $(id -u) != 0 ]] || ! ip netns add "fm$$-probe" 2>/dev/null; then
  echo "fault_matrix: skipped: needs root and network namespaces (ip netns add)"
  exit 77
fi
ip netns del "fm$$-probe"

cells=("$@")
if ((${#cells[@]} == 0)); then
  for f in ${MATRIX_FAULTS:-kill power freeze slow spoolfull sinkfull}; do
    for r in ${MATRIX_ROLES:-relay leaf}; do
      for s in ${MATRIX_STAGES:-copy sink}; do cells+=("$f:$r:$s"); done
    done
  done
fi

work=$(mktemp -d /tmp/hoprelay-matrix.XXXXXX)
fleet=fm$$
cleanup() {
  "$here/fleet.sh" down "$fleet" >/dev/null 2>&1 || true
  for m in "$work"/disk-*; do [[ -d $m ]] && umount "$m" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

bytes=$((mib << 20))
head -c "$bytes" /dev/urandom >"$work/in.bin"
want=$(sha256sum <"$work/in.bin" | cut -d' ' -f1)
# What file-sink writes for it: each 64 KiB message (the plan's slot_size, send's default size
# for --file) after its length, 4 bytes in host order.
python3 -c 'import struct, sys
d = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "wb") as o:
    for i in range(0, len(d), 65536):
        o.write(struct.pack("=I", len(d[i:i + 65536])) + d[i:i + 65536])' "$work/in.bin" "$work/reference.records"
quarter_rate() { awk -v r="$rate" 'BEGIN { n = r + 0; printf "%d%s", n / 4, substr(r, length(n "") + 1) }'; }

# topology STAGE VICTIM SPOOL_OF_UPSTREAM: the plan, with the keys above, metrics on port 9100
# of each host, and the stage (sink: file-sink into $work/copy-hI, or the tmpfs for sinkfull).
topology() {
  local stage=$1 victim=$2 small_spool=$3 out=$work/topology.toml upstream=
  "$hoprelay" plan --hosts "$work/hosts.txt" --shape tree:2 --name matrix >"$out.plan" || return 1
  upstream=$(awk -v v="h$victim" '/^\[nodes\./ {n = substr($1, 8, length($1) - 8)}
    /^downstream = / && index($0, "\"" v "\"") {print n}' "$out.plan")
  awk -v stage="$stage" -v work="$work" -v up="$upstream" -v small="$small_spool" '
    /^\[pipeline\]$/ {print; print "on_peer_down = \"bypass\"\npeer_down_timeout = \"500ms\"";
                      print "peer_dead_after = \"2s\"\nspool_dir = \"" work "/spool\""; next}
    /^\[nodes\./ {node = substr($1, 8, length($1) - 8); print; next}
    /^listen = / {print; split($3, a, ":"); gsub(/"/, "", a[1]);
                  print "metrics = \"" a[1] ":9100\""
                  if (stage == "sink" && node != "h0") {
                    path = work "/copy-" node
                    print "stage = { plugin = \"file-sink\", path = \"" path "/records\", state_dir = \"" path "/state\" }"
                  }
                  if (small != "" && node == up) print "spool_dir = \"" small "\""
                  next}
    {print}' "$out.plan" >"$out"
  echo "$upstream"
}

# copy_ok STAGE I: host I's copy is whole.
copy_of() { [[ $1 == copy ]] && echo "$work/copy-h$2/out" || echo "$work/copy-h$2/records"; }
copy_ok() {
  local f want_size
  f=$(copy_of "$1" "$2")
  [[ -f $f ]] || return 1
  want_size=$bytes
  [[ $1 == copy ]] || want_size=$(stat -c %s "$work/reference.records")
  # The size first: a hash of every copy ten times a second would take the CPU the hosts need.
  (($(stat -c %s "$f") == want_size)) || return 1
  if [[ $1 == copy ]]; then
    [[ $(sha256sum <"$f" | cut -d' ' -f1) == "$want" ]]
  else
    cmp -s "$f" "$work/reference.records"
  fi
}

start_host() { # start_host STAGE I
  local i=$2
  if [[ $1 == copy ]]; then
    "$here/fleet.sh" exec "$fleet" "$i" "$hoprelay" recv --topology "$work/topology.toml" \
      --node "h$i" --output "$(copy_of copy "$i")" --state-dir "$work/state-h$i" \
      --streams 2 --timeout 120 >>"$work/h$i.log" 2>&1 &
  else
    "$here/fleet.sh" exec "$fleet" "$i" "$hoprelayd" --topology "$work/topology.toml" \
      --node "h$i" --log-level warn >>"$work/h$i.log" 2>&1 &
  fi
  disown $!
}

# poll_copies STAGE VICTIM T0, in the background: until every live host's copy is whole, or 60 s
# after the longest fault would have ended (90 s from T0), writes "T_OTHERS T_ALL NOT_WHOLE" to
# $work/poll: when every host but VICTIM had its copy, when every live one had, and the hosts
# whose copy is not whole at the end. A host lost with its host (power) is not live: $work/lost.
poll_copies() {
  local stage=$1 victim=$2 deadline=$((SECONDS + 90)) t_others='' whole=" " differing i lost
  while ((SECONDS < deadline)); do
    lost=$(cat "$work/lost" 2>/dev/null)
    differing=
    for ((i = 1; i < hosts_n; i++)); do
      [[ $i == "$lost" || $whole == *" $i "* ]] && continue
      if copy_ok "$stage" "$i"; then whole+="$i "; else differing+="h$i "; fi
    done
    if [[ -z $t_others && ($differing == "" || $differing == "h$victim ") ]]; then
      t_others=$(date +%s.%N)
    fi
    [[ -z $differing ]] && break
    sleep 0.2
  done
  local t_all
  t_all=$(date +%s.%N)
  echo "${t_others:-$t_all} $t_all ${differing:-}" >"$work/poll"
}

# run_cell FAULT ROLE STAGE: prints "SECONDS|SEND_EXIT|SEND_LAST|DIFFERING" (DIFFERING: the
# live hosts whose copy is not whole, or "none"; "lost:hI" for the fault's own host when it
# has no copy by design).
run_cell() {
  local fault=$1 role=$2 stage=$3 victim=${role_host[$2]} small='' upstream i t0 rc=0
  rm -rf "$work"/copy-h* "$work"/state-h* "$work"/spool "$work"/*.log "$work/topology.toml" \
    "$work/lost" "$work/poll"
  "$here/fleet.sh" up "$fleet" "$hosts_n" "$rate" >/dev/null || return 1
  "$here/fleet.sh" hosts "$fleet" >"$work/hosts.txt"
  for ((i = 1; i < hosts_n; i++)); do mkdir -p "$work/copy-h$i"; done
  if [[ $fault == spoolfull ]]; then
    small=$work/disk-spool
    mkdir -p "$small" && mount -t tmpfs -o size=2m tmpfs "$small"
  fi
  if [[ $fault == sinkfull ]]; then
    mount -t tmpfs -o size=2m tmpfs "$work/copy-h$victim"
  fi
  upstream=$(topology "$stage" "$victim" "$small") || return 1
  [[ $fault == slow ]] && "$here/fleet.sh" throttle "$fleet" "$victim" "$(quarter_rate)" >/dev/null
  "$here/fleet.sh" exec "$fleet" 0 "$hoprelayd" --topology "$work/topology.toml" --node h0 \
    --log-level warn >"$work/h0.log" 2>&1 &
  disown $!
  for ((i = 1; i < hosts_n; i++)); do start_host "$stage" "$i"; done
  sleep 1
  t0=$(date +%s.%N)
  "$here/fleet.sh" exec "$fleet" 0 "$hoprelay" send --topology "$work/topology.toml" --to h0 \
    --file "$work/in.bin" --connect-timeout 30 --close-timeout 0 --wait-all 60 \
    >"$work/send.log" 2>&1 &
  local send_pid=$! lost=''
  # The copies are watched from the start, beside the fault (poll_copies).
  poll_copies "$stage" "$victim" "$t0" &
  local poll_pid=$!
  case $fault in
    kill | power | freeze | spoolfull)
      local f
      f=$(copy_of "$stage" "$victim")
      for _ in $(seq 1500); do
        (($(stat -c %s "$f" 2>/dev/null || echo 0) >= bytes / 3)) && break
        sleep 0.02
      done
      ;;
  esac
  case $fault in
    kill)
      "$here/fleet.sh" kill "$fleet" "$victim" KILL >/dev/null
      sleep 2
      start_host "$stage" "$victim"
      ;;
    power)
      "$here/fleet.sh" lose "$fleet" "$victim" >/dev/null
      lost=$victim
      echo "$victim" >"$work/lost"
      ;;
    freeze | spoolfull)
      "$here/fleet.sh" kill "$fleet" "$victim" STOP >/dev/null
      sleep 10
      "$here/fleet.sh" kill "$fleet" "$victim" CONT >/dev/null
      ;;
  esac
  wait "$send_pid"
  rc=$?
  wait "$poll_pid"
  local t_others t1 differing
  read -r t_others t1 differing <"$work/poll"
  differing=${differing% }
  [[ -z $differing ]] && differing=none
  [[ -n $lost ]] && differing+=" (h$lost lost with its host)"
  # What send said last about the hosts (--wait-all), else its last line.
  local last
  last=$(grep -E "every host has|not every host" "$work/send.log" | tail -n 1)
  [[ -n $last ]] || last=$(tail -n 1 "$work/send.log")
  last=$(cut -c1-200 <<<"$last")
  [[ -n ${MATRIX_KEEP:-} ]] && cp -r "$work" "$work.$fault-$role-$stage"
  "$here/fleet.sh" down "$fleet" >/dev/null 2>&1
  for m in "$work"/disk-* "$work/copy-h$victim"; do mountpoint -q "$m" && umount "$m"; done
  awk -v a="$t0" -v b="$t1" -v o="$t_others" 'BEGIN { printf "%.2f|%.2f", o - a, b - a }'
  echo "|$rc|$last|$differing"
}

declare -A base
results=()
failed=0
for stage in $(printf '%s\n' "${cells[@]}" | cut -d: -f3 | sort -u); do
  # The no-fault run of the stage: its time, and for sink its copy as the reference.
  out=$(run_cell none relay "$stage")
  IFS='|' read -r _ secs rc last differing <<<"$out"
  if [[ $differing != none ]]; then
    echo "fault_matrix: the no-fault run of stage $stage failed: $out"
    exit 1
  fi
  base[$stage]=$secs
  echo "fault_matrix: $stage without a fault: ${secs} s, every copy whole"
done
for cell in "${cells[@]}"; do
  IFS=: read -r fault role stage <<<"$cell"
  out=$(run_cell "$fault" "$role" "$stage")
  IFS='|' read -r others secs rc last differing <<<"$out"
  ratio=$(awk -v s="$others" -v b="${base[$stage]}" 'BEGIN { printf "%.2f", s / b }')
  all=$(awk -v s="$secs" -v b="${base[$stage]}" 'BEGIN { printf "%.2f", s / b }')
  verdict=pass
  [[ $differing == none* ]] || { verdict=FAIL; failed=1; }
  results+=("| $fault | $role | $stage | $ratio | $all | $verdict: not whole: $differing; send exit $rc: \`$last\` |")
  echo "fault_matrix: $cell: $verdict, the others in $others s (${ratio} x), all in $secs s (${all} x), send exit $rc, not whole: $differing"
done
echo
echo "| Fault | Role | Stage | Others' time over no fault | Every host's | Outcome |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${results[@]}"
exit "$failed"

#!/usr/bin/env bash
# One file to every host of an emulated fleet (issue 41, docs/performance.md "A fleet"): how long
# until the last host has all of it, over the physical limit S/R (every byte leaves the source
# once through a NIC of rate R), for hoprelay's planned shapes and for the tools a user would
# pick instead, in the same run on the same fleet (tests/fleet/fleet.sh).
#
#   bench/fleet.sh [--smoke] BUILD_DIR
#
# For every N of HOSTS (default "4 8 16 32"), a fleet of N hosts whose NICs are shaped to RATE
# each way (default 200mbit), and MIB MiB of random bytes (default 128) on host 0, sent by each system of
# SYSTEMS (default all of them):
#   chain, tree:2, tree:4, racks:4   hoprelay: `hoprelay plan` writes the topology from the
#       fleet's hosts file (racks of 8 hosts, labelled in it); hoprelayd runs the head on host 0,
#       `hoprelay recv` every other host (a relay keeps what it relays), `hoprelay send --file`
#       puts the file in at host 0. Timed once every link is up, from the send until the last
#       host's output holds the whole file.
#   uftp      reliable multicast (Debian uftp): uftpd on every other host, then uftp on host 0
#       at 95 % of R (its own rate limit; at R it overruns the shaper). Timed from the sender's
#       start (its announce and registration, about 2 s, are part of what a user waits for)
#       until the last host's uftpd has moved the whole file out of its temporary directory.
#   torrent   a BitTorrent swarm (opentracker, mktorrent, aria2c): tracker and seeder on host 0,
#       aria2c on every other host (no DHT, local peer discovery or peer exchange; pieces of
#       1 MiB; every leecher seeds on). Timed from the leechers' start to the last one's
#       "download complete" hook.
#   (Each host's finish is seen by polling, every 0.1 s.)
#   mpi       MPI_Bcast of Open MPI (bench/mpi_file_bcast.c, one rank a host, TCP BTL on eth0,
#       mpirun's launch agent bench/fleet_agent.sh runs each host's orted in its namespace; the
#       algorithm Open MPI's tuned component picks). Timed by rank 0 between two barriers: from
#       every rank ready to every rank's copy written; its CPU is the ranks' own over that time.
#   mpi:pipeline  the same, with Open MPI's own pipelined chain (coll_tuned_bcast_algorithm 3,
#       segments of 512 KiB): MPI's counterpart of hoprelay's chain.
#   naive     host 0 copies the file to each host in turn over TCP (nc), the baseline.
# Every host's copy is checked with SHA-256; a system that fails or times out is recorded as
# failed, with why, and the run goes on. Per system and N it records the time, the time over
# S/R, the CPU seconds of all its processes on all hosts while it was timed (a cgroup v1 cpuacct
# group per run: kernel work on their behalf, as veth and bridge forwarding, included), and
# what each host's NIC carried (the busiest host's rate over the run must stay within R: the
# shaping held).
# Every host's copy is written to memory, under COPIES (default /dev/shm), as if each host
# had a disk of its own: on this machine's one disk, 31 hosts' writes made its writeback pace
# every system from about halfway. A spool (SLOW) stays on the disk, under OUT.
# Writes BUILD_DIR/bench/fleet/results.json (or OUT/), fleet.svg and the table
# (bench/fleet_report.py).
# LOSE=relay: host 1, a relay in every shape `plan` writes, is lost a third of S/R into each
#   run: its processes killed with SIGKILL (its kernel resets their connections: a host that
#   goes silent instead adds the 10 s dead-peer timeout, docs/guarantees.md). hoprelay runs
#   with on_peer_down = "bypass" and peer_down_timeout = "500ms" (docs/topology.md, "Bypassing a
#   relay that is down"); the time is until the last *live* host has the file, and only live
#   hosts' copies are checked. Results are labelled SYSTEM+lost; the default SYSTEMS are then
#   chain tree:2 uftp torrent (MPI_Bcast has no way around a lost rank).
# SLOW=leaf: the last host of the hosts file, a leaf in every shape `plan` writes, has a NIC of
#   R/4 each way. hoprelay runs with spool_dir (docs/topology.md, "Spooling a slow or down
#   branch"): the slow host's upstream spools for it. The time is until the last of the *other*
#   hosts has the file; the slow host's own time is recorded beside it, and its copy checked
#   too. Results are labelled SYSTEM+slow; the default SYSTEMS are chain tree:2 uftp torrent.
#   SPOOL=off: hoprelay without spool_dir, to see what the spool saves.
#   SPOOL_AFTER=DURATION: the topology's spool_after (default 1s, at least 200ms): how long the
#   slow host paces everyone before its upstream spools.
# --smoke: 4 hosts, 4 MiB, every system once, and only a check that every number is there.
# Needs root (network namespaces; exit 77 without) and the packages of scripts/install-deps.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
bench_args "$@"
fleet_sh=$here/../tests/fleet/fleet.sh
agent=$here/fleet_agent.sh
mpi_prog=$build/bench/mpi_file_bcast

die() {
  echo "fleet.sh: $*" >&2
  exit 1
}
if [[ $(id -u) != 0 ]] || ! ip netns add "hrb$$-probe" 2>/dev/null; then
  # ctest's bench.fleet_smoke counts 77 as skipped.
  echo "fleet.sh: needs root and network namespaces (ip netns add): run it with sudo" >&2
  exit 77
fi
ip netns del "hrb$$-probe"
for b in "$hoprelayd" "$hoprelay"; do [[ -x $b ]] || die "$b is missing: build it first"; done

rate=${RATE:-200mbit}
if ((smoke)); then
  sizes=(4)
  mib=4
  out=$build/bench/fleet-smoke
else
  read -r -a sizes <<<"${HOSTS:-4 8 16 32}"
  mib=${MIB:-128}
  out=${OUT:-$build/bench/fleet}
fi
case ${LOSE:-} in
  '') lost=-1 all_systems="chain tree:2 tree:4 racks:4 uftp torrent mpi mpi:pipeline naive" ;;
  relay) lost=1 all_systems="chain tree:2 uftp torrent" ;;
  *) die "LOSE='$LOSE': relay (host 1 lost a third into each run), or unset" ;;
esac
case ${SLOW:-} in
  '') slow_host=0 ;;
  leaf)
    ((lost < 0)) || die "LOSE and SLOW: one of them a run"
    slow_host=1 all_systems="chain tree:2 uftp torrent"
    ;;
  *) die "SLOW='$SLOW': leaf (the last host at a quarter of RATE), or unset" ;;
esac
read -r -a systems <<<"${SYSTEMS:-$all_systems}"
rack_size=8
work=$out/run
rm -rf "$work"
mkdir -p "$work"
# Every host's copy goes to memory (the header says why); COPIES: the directory they go under
# (a directory of this run's is made in it, and removed).
copies=${COPIES:-/dev/shm}/hoprelay-fleet-$$
chmod 755 "$work" # opentracker reads its whitelist as user nobody
results=$out/results.tsv # read by bench/fleet_report.py
: >"$results"
bench_start

bytes=$((mib << 20))
rate_bits=$(awk -v r="$rate" 'BEGIN { n = r + 0; u = tolower(substr(r, length(n "") + 1));
  m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : 0; printf "%.0f", n * m }')
((rate_bits > 0)) || die "RATE '$rate': write it as NUMBER followed by kbit, mbit or gbit"
limit=$(awk -v b="$bytes" -v r="$rate_bits" 'BEGIN { printf "%.3f", b * 8 / r }')
# A system that takes longer than this has stalled.
deadline=$(awk -v l="$limit" 'BEGIN { t = 40 * l; print int(t < 60 ? 60 : t) }')
head -c "$bytes" /dev/urandom >"$work/in.bin"
want=$(sha256sum <"$work/in.bin" | cut -d' ' -f1)

fleet=hrb$$
cleanup() {
  "$fleet_sh" down "$fleet" >/dev/null 2>&1 || true
  [[ -n ${cg:-} && -d $cg ]] && rmdir "$cg" 2>/dev/null
  # An interrupted run leaves no copies behind either.
  rm -rf "$copies" "$work/in.bin" "${whitelist_dir:-}"
  return 0
}
trap cleanup EXIT
trap 'exit 143' TERM INT # so that EXIT's clean-up runs when the run is stopped
most=0
for h in "${sizes[@]}"; do ((h <= most)) || most=$h; done
need=$((bytes * (most + 1) * 11 / 10 / 1024)) # KiB: a copy a host, and 10 %
mkdir "$copies" || die "cannot create $copies (COPIES: a directory to make it in)"
room=$(df --output=avail -k "$copies" | tail -n 1)
((room >= need)) || die "$copies has $((room >> 10)) MiB free, the copies of" \
  "$most hosts need $((need >> 10)) MiB: set COPIES to a directory with room (on a disk" \
  "that every host shares, its writeback paces the run)"

# CPU time of each system: every process it starts joins a cpuacct cgroup of its own (this
# script stays out of it, so its polling is not counted).
cg_root=/sys/fs/cgroup/cpuacct
cg=
cpu_note=
if [[ -w $cg_root ]] && mkdir "$cg_root/hoprelay-fleet-$$" 2>/dev/null; then
  rmdir "$cg_root/hoprelay-fleet-$$"
else
  cpu_note="no writable cgroup v1 cpuacct hierarchy at $cg_root: CPU not measured"
  echo "fleet.sh: $cpu_note" >&2
fi
cpu_usage() { [[ -n $cg ]] && cat "$cg/cpuacct.usage" || echo 0; } # nanoseconds

on() { # on I CMD...: run CMD on host I, inside the system's cgroup
  # The cgroup is joined before `ip netns exec`, which mounts a /sys of the host's own.
  # shellcheck disable=SC2016 # expanded by that shell: $0 is the cgroup, $@ the command
  sh -c '[ -z "$0" ] || echo $$ >"$0/cgroup.procs"; exec "$@"' "$cg" "$fleet_sh" exec "$fleet" "$@"
}

kill_all() {
  local i
  for ((i = 0; i < n; i++)); do "$fleet_sh" kill "$fleet" "$i" KILL; done
  wait 2>/dev/null || true
}

# With LOSE: host $lost is lost a third of S/R from now (call it when the timing starts).
lose_later() {
  ((lost >= 0)) || return 0
  local after
  after=$(awk -v l="$limit" 'BEGIN { printf "%.3f", l / 3 }')
  (sleep "$after" && "$fleet_sh" kill "$fleet" "$lost" KILL) &
}
live() { ((${1} != lost)); } # I: host I is not the one lost
slow=-1                       # with SLOW, the slow host of the fleet being measured
# The hosts whose finish is timed: the live ones but the slow one.
timed_hosts() {
  local i
  for ((i = 1; i < n; i++)); do live "$i" && ((i != slow)) && echo "$i"; done
}

# finished I...: every host I has the whole file: the system's done_file (its "@" the host's
# number) holds done_size bytes (0: it exists); stamps each host's time in $dir/hI.t when it
# is first seen done. One stat for all, so that polling 63 hosts costs one process.
finished() {
  local i f size left=0
  local -A has=()
  local files=()
  for i in "$@"; do
    [[ -e $dir/h$i.t ]] && continue
    f=${done_file//@/$i}
    files+=("$f")
  done
  ((${#files[@]})) || return 0
  while read -r size f; do has[$f]=$size; done < <(stat -c '%s %n' -- "${files[@]}" 2>/dev/null)
  for i in "$@"; do
    [[ -e $dir/h$i.t ]] && continue
    f=${done_file//@/$i}
    if [[ ${has[$f]:-} == "$done_size" ]]; then
      echo "$EPOCHREALTIME" >"$dir/h$i.t"
    else
      left=1
    fi
  done
  ((!left))
}
# since T0 I...: seconds from T0 to the last of the hosts' finishes.
since() {
  local t0=$1 i
  shift
  for i in "$@"; do cat "$dir/h$i.t"; done |
    awk -v a="$t0" '$1 > m {m = $1} END {printf "%.3f", m - a}'
}
# timed T0: sets elapsed (the timed hosts) and slow_elapsed (the slow one) once they finished.
timed() {
  local t0=$1 hosts
  mapfile -t hosts < <(timed_hosts)
  poll=0.1 wait_for "$deadline" finished "${hosts[@]}" || { why="not every host finished"; return 1; }
  elapsed=$(since "$t0" "${hosts[@]}")
  ((slow > 0)) || return 0
  poll=0.1 wait_for "$deadline" finished "$slow" || { why="the slow host did not finish"; return 1; }
  slow_elapsed=$(since "$t0" "$slow")
}

# wait_for SECONDS CMD...: until CMD succeeds; fails after SECONDS.
wait_for() {
  local until
  until=$(awk -v s="$1" -v t="$EPOCHREALTIME" 'BEGIN { printf "%.3f", t + s }')
  shift
  until "$@"; do
    awk -v u="$until" -v t="$EPOCHREALTIME" 'BEGIN { exit !(t > u) }' && return 1
    sleep "${poll:-0.02}"
  done
}

address() { # I: host I's address, from the hosts file
  awk -v i=$(($1 + 1)) 'NR == i {sub(/:.*/, "", $1); print $1}' "$work/hosts.txt"
}

# ---- hoprelay -------------------------------------------------------------------------------
# established I: TCP connections host I has up.
established() { ip netns exec "$fleet-h$1" ss -Htn state established | wc -l; }
# links_up TOPOLOGY: every host has one connection per downstream peer and one from upstream.
links_up() {
  local i want_links
  for ((i = 0; i < n; i++)); do
    want_links=$(awk -v node="h$i" '$0 == "[nodes." node "]" {on = 1; next} /^\[/ {on = 0}
      on && /^downstream = / {print gsub(/"/, "") / 2; exit}' "$1")
    want_links=$((${want_links:-0} + (i > 0)))
    (($(established "$i") >= want_links)) || return 1
  done
}
# listens I PATTERN [udp]: host I has a socket bound to a local address matching PATTERN.
listens() {
  local flags=-Hltn
  [[ ${3:-} == udp ]] && flags=-Hlun
  grep -Eq "$2" <<<"$(ip netns exec "$fleet-h$1" ss "$flags" | awk '{print $4 " "}')"
}
all_exited() {
  local p
  for p in "$@"; do kill -0 "$p" 2>/dev/null && return 1; done
  return 0
}
run_hoprelay() { # SHAPE: sets elapsed and cpu_ns, or why
  local shape=$1 topo=$work/$sys.toml i recv=()
  "$hoprelay" plan --hosts "$work/hosts.txt" --shape "$shape" --name fleet >"$topo" \
    2>"$work/$sys.plan.log" || { why="hoprelay plan: $(cat "$work/$sys.plan.log")"; return 1; }
  # What the run adds to the plan's [pipeline] table, read in by sed (a path is not a pattern).
  local keys=()
  ((lost < 0)) || keys+=('on_peer_down = "bypass"' 'peer_down_timeout = "500ms"')
  ((slow < 0)) || [[ ${SPOOL:-on} == off ]] || keys+=("spool_dir = \"$dir/spool\"")
  [[ -z ${SPOOL_AFTER:-} ]] || keys+=("spool_after = \"$SPOOL_AFTER\"")
  if ((${#keys[@]})); then
    printf '%s\n' "${keys[@]}" >"$topo.keys"
    sed -i "/^\\[pipeline\\]\$/r $topo.keys" "$topo"
  fi
  done_file=$cdir/h@.out done_size=$bytes
  for ((i = 1; i < n; i++)); do
    on "$i" "$hoprelay" recv --topology "$topo" --node "h$i" --output "$cdir/h$i.out" \
      --timeout "$deadline" >"$dir/h$i.log" 2>&1 &
    recv+=("$!")
  done
  on 0 "$hoprelayd" --topology "$topo" --node h0 --log-level warn >"$dir/h0.log" 2>&1 &
  wait_for 30 links_up "$topo" || { why="links not up after 30 s"; return 1; }
  local cpu0 t0
  cpu0=$(cpu_usage)
  t0=$EPOCHREALTIME
  lose_later
  on 0 "$hoprelay" send --topology "$topo" --to h0 --file "$work/in.bin" --connect-timeout 30 \
    --close-timeout 0 >"$dir/send.log" 2>&1 &
  local send=$!
  timed "$t0" || return 1
  cpu_ns=$(($(cpu_usage) - cpu0))
  wait "$send" || { why="hoprelay send: $(tail -n 2 "$dir/send.log")"; return 1; }
  wait_for "$deadline" all_exited "${recv[@]}" || { why="a consumer still waits"; return 1; }
  for ((i = 1; i < n; i++)); do
    live "$i" || continue
    wait "${recv[i - 1]}" || { why="host $i's consumer failed"; return 1; }
  done
}

# ---- uftp -----------------------------------------------------------------------------------
run_uftp() {
  command -v uftp >/dev/null || { why="uftp missing: apt-get install uftp"; return 1; }
  local i kbps
  kbps=$((rate_bits * 95 / 100 / 1000))
  for ((i = 0; i < n; i++)); do
    ip -n "$fleet-h$i" route replace 224.0.0.0/4 dev eth0
  done
  # -T: a file is received under hI.tmp and moved into hI once whole (seen as that host's finish).
  for ((i = 1; i < n; i++)); do
    mkdir -p "$cdir/h$i" "$cdir/h$i.tmp"
    on "$i" uftpd -d -I eth0 -M 230.4.4.1 -D "$cdir/h$i" -T "$cdir/h$i.tmp" \
      >"$dir/uftpd$i.log" 2>&1 &
  done
  done_file=$cdir/h@/in.bin done_size=$bytes
  for ((i = 1; i < n; i++)); do
    wait_for 10 listens "$i" ':1044 ' udp || { why="uftpd on host $i did not start"; return 1; }
  done
  local cpu0 t0
  cpu0=$(cpu_usage)
  t0=$EPOCHREALTIME
  lose_later
  # From the file's directory with a relative name: receivers refuse an absolute path that is
  # not under their -D. With a receiver lost, uftp reports it failed: the live hosts' copies
  # are what counts.
  (cd "$work" && on 0 uftp -R "$kbps" -I eth0 -M 230.4.4.1 -P 230.5.5.1 in.bin) \
    >"$dir/uftp.log" 2>&1 &
  local send=$!
  timed "$t0" || return 1
  cpu_ns=$(($(cpu_usage) - cpu0))
  wait "$send" || ((lost >= 0)) || { why="uftp: $(tail -n 2 "$dir/uftp.log")"; return 1; }
  for ((i = 1; i < n; i++)); do mv "$cdir/h$i/in.bin" "$cdir/h$i.out" 2>/dev/null || true; done
}

# ---- BitTorrent -----------------------------------------------------------------------------
info_hash() { # TORRENT: SHA-1 of its bencoded info dictionary, hex
  python3 - "$1" <<'EOF'
import hashlib, sys
d = open(sys.argv[1], "rb").read()
def end(i):  # the index just past the bencoded value at i
    c = d[i:i + 1]
    if c == b"i":
        return d.index(b"e", i) + 1
    if c in (b"l", b"d"):
        i += 1
        while d[i:i + 1] != b"e":
            i = end(i)
        return i + 1
    colon = d.index(b":", i)
    return colon + 1 + int(d[i:colon])
i = 1
while d[i:i + 1] != b"e":
    key_end = end(i)
    value_end = end(key_end)
    if d[d.index(b":", i) + 1:key_end] == b"info":
        print(hashlib.sha1(d[key_end:value_end]).hexdigest())
        break
    i = value_end
EOF
}
run_torrent() {
  local tool
  for tool in opentracker mktorrent aria2c; do
    command -v "$tool" >/dev/null ||
      { why="$tool missing: apt-get install opentracker mktorrent aria2"; return 1; }
  done
  local tracker=198.18.0.1:6969 i
  mkdir -p "$dir/seed"
  ln "$work/in.bin" "$dir/seed/in.bin"
  mktorrent -l 20 -a "http://$tracker/announce" -o "$dir/in.torrent" "$dir/seed/in.bin" \
    >"$dir/mktorrent.log" 2>&1 || { why="mktorrent: $(tail -n 1 "$dir/mktorrent.log")"; return 1; }
  # Debian's opentracker serves only the torrents of its whitelist, read as user nobody: in a
  # directory of its own under /tmp, since every directory above the run's must be one nobody
  # may enter (a clone in a mktemp -d directory, mode 700, made every announce "not authorized").
  [[ -z ${whitelist_dir:-} ]] || rm -rf "$whitelist_dir" # the last run's
  whitelist_dir=$(mktemp -d /tmp/hoprelay-tracker.XXXXXX)
  chmod 755 "$whitelist_dir"
  info_hash "$dir/in.torrent" >"$whitelist_dir/whitelist"
  chmod 644 "$whitelist_dir/whitelist"
  on 0 opentracker -i "${tracker%:*}" -p "${tracker#*:}" -w "$whitelist_dir/whitelist" \
    >"$dir/tracker.log" 2>&1 &
  local common=(--enable-dht=false --enable-dht6=false --bt-enable-lpd=false
    --enable-peer-exchange=false --seed-ratio=0.0 --seed-time=600 --file-allocation=none
    --summary-interval=0 --console-log-level=warn)
  # aria2c's hook gets GID FILE_COUNT PATH; PATH is $cdir/hI/in.bin, the mark $cdir/hI.done.
  # shellcheck disable=SC2016 # the hook's own shell expands it
  printf '#!/bin/sh\nd=$(dirname "$3")\ntouch "$d/../$(basename "$d").done"\n' >"$dir/done.sh"
  chmod +x "$dir/done.sh"
  on 0 aria2c "${common[@]}" --check-integrity=true -d "$dir/seed" "$dir/in.torrent" \
    >"$dir/seed.log" 2>&1 &
  # The seeder listens for peers once it has checked its copy.
  wait_for 30 listens 0 ':68[89][0-9] |:69[0-9][0-9] ' ||
    { why="the seeder did not start"; return 1; }
  local cpu0 t0
  done_file=$cdir/h@.done done_size=0
  cpu0=$(cpu_usage)
  t0=$EPOCHREALTIME
  lose_later
  for ((i = 1; i < n; i++)); do
    on "$i" aria2c "${common[@]}" --on-bt-download-complete="$dir/done.sh" -d "$cdir/h$i" \
      "$dir/in.torrent" >"$dir/aria2c$i.log" 2>&1 &
  done
  timed "$t0" || return 1
  cpu_ns=$(($(cpu_usage) - cpu0))
  for ((i = 1; i < n; i++)); do mv "$cdir/h$i/in.bin" "$cdir/h$i.out" 2>/dev/null || true; done
}

# ---- MPI_Bcast ------------------------------------------------------------------------------
run_mpi() { # [ALGORITHM]: default, or pipeline
  local tuned=()
  [[ ${1:-} == pipeline ]] && tuned=(--mca coll_tuned_use_dynamic_rules 1
    --mca coll_tuned_bcast_algorithm 3 --mca coll_tuned_bcast_algorithm_segmentsize 524288)
  command -v mpirun >/dev/null || { why="mpirun missing: apt-get install openmpi-bin"; return 1; }
  [[ -x $mpi_prog ]] || { why="$mpi_prog missing (needs libopenmpi-dev at build time)"; return 1; }
  local i hostlist=
  for ((i = 0; i < n; i++)); do hostlist+="${hostlist:+,}$(address "$i"):1"; done
  # rtc_hwloc_vmhole none: each host's orted would otherwise map the topology into the same
  # shared memory as the others on this one machine, and some crash in hwloc (seen 1 in 2).
  # mpi_yield_when_idle: a rank waiting for data spins in Open MPI's progress loop; on real
  # hosts it has cores of its own, here N ranks share 2 cores and would starve each other.
  # Session directories per host (bench/fleet_agent.sh), mpirun's own as host 0's.
  local mpi_tmp=$dir/mpi-tmp
  mkdir -p "$mpi_tmp/h0"
  FLEET_NAME=$fleet FLEET_MPI_TMP=$mpi_tmp TMPDIR=$mpi_tmp/h0 on 0 timeout "$deadline" \
    mpirun --allow-run-as-root -np "$n" \
    --host "$hostlist" --mca rtc_hwloc_vmhole none --mca mpi_yield_when_idle 1 \
    --mca plm_rsh_agent "$agent" \
    --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
    "${tuned[@]}" "$mpi_prog" "$work/in.bin" "$cdir" >"$dir/mpirun.log" 2>&1 ||
    { why="mpirun: $(tail -n 2 "$dir/mpirun.log" | tr '\n' ' ')"; return 1; }
  elapsed=$(awk '$1 == "mpi_file_bcast" {print $3}' "$dir/mpirun.log")
  [[ -n $elapsed ]] || { why="no time in $dir/mpirun.log"; return 1; }
  # The ranks' own CPU over the timed part (mpi_file_bcast.c), not the cgroup's, which holds
  # the start-up of mpirun and every orted too.
  cpu_ns=$(awk '$1 == "mpi_file_bcast" {printf "%.0f", $4 * 1e9}' "$dir/mpirun.log")
}

# ---- naive ----------------------------------------------------------------------------------
run_naive() {
  local i
  for ((i = 1; i < n; i++)); do
    # shellcheck disable=SC2016 # that shell expands $0, the output file
    on "$i" sh -c 'exec nc -l -p 9100 >"$0"' "$cdir/h$i.out" 2>"$dir/nc$i.log" &
    nc+=("$!")
  done
  for ((i = 1; i < n; i++)); do
    wait_for 10 listens "$i" ':9100 ' || { why="nc on host $i did not listen"; return 1; }
  done
  local cpu0 t0
  cpu0=$(cpu_usage)
  t0=$EPOCHREALTIME
  for ((i = 1; i < n; i++)); do
    on 0 nc -N "$(address "$i")" 9100 \
      <"$work/in.bin" 2>>"$dir/nc0.log" || { why="nc to host $i failed"; return 1; }
  done
  wait_for 30 all_exited "${nc[@]}" || { why="a receiving nc did not finish"; return 1; }
  elapsed=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
  cpu_ns=$(($(cpu_usage) - cpu0))
}

# ---- the run --------------------------------------------------------------------------------
measure() { # SYSTEM
  sys=$1
  dir=$work/$n-${sys/:/} cdir=$copies/$n-${sys/:/}
  mkdir -p "$dir" "$cdir"
  elapsed='' slow_elapsed=- cpu_ns=0 why=''
  rm -f "$dir"/h*.t
  if [[ -z $cpu_note ]]; then
    cg=$cg_root/hoprelay-fleet-$$-$n-${sys/:/}
    mkdir "$cg"
  fi
  "$fleet_sh" sent "$fleet" >"$dir/sent.before"
  local ok=1 i label=$sys
  ((lost < 0)) || label=$sys+lost
  ((slow < 0)) || label=$sys+slow
  case $sys in
    chain | tree:* | racks:*) run_hoprelay "$sys" || ok=0 ;;
    uftp) run_uftp || ok=0 ;;
    torrent) run_torrent || ok=0 ;;
    mpi) run_mpi || ok=0 ;;
    mpi:pipeline) run_mpi pipeline || ok=0 ;;
    naive) run_naive || ok=0 ;;
    *) die "unknown system '$sys': chain, tree:K, racks:K, uftp, torrent, mpi, mpi:pipeline" \
      "or naive" ;;
  esac
  kill_all
  "$fleet_sh" sent "$fleet" >"$dir/sent.after"
  if ((ok)); then
    for ((i = 1; i < n; i++)); do
      live "$i" || continue
      if [[ $(sha256sum <"$cdir/h$i.out" 2>/dev/null | cut -d' ' -f1) != "$want" ]]; then
        ok=0
        why="host $i's copy differs or is missing"
        break
      fi
    done
  fi
  # The copies go once checked: 31 hosts x 128 MiB for each of 9 systems and 4 fleets would
  # be 60 GiB.
  rm -rf "$cdir" "$dir/seed"
  # What each NIC carried during the run: host 0's bytes and the busiest host's rate.
  local sent0 top
  sent0=$(awk 'NR == FNR {b[$1] = $2; next} $1 == 0 {printf "%.0f", $2 - b[$1]}' \
    "$dir/sent.before" "$dir/sent.after")
  # Over the whole run: with SLOW, the counters hold what went to the slow host after the
  # others had finished too.
  top=$(awk -v e="${elapsed:-0}" -v s="$slow_elapsed" 'NR == FNR {b[$1] = $2; next}
    {d = $2 - b[$1]; if (d > m) m = d}
    END {if (s + 0 > e) e = s + 0; printf "%.1f", (e > 0 ? m * 8 / e / 1e6 : 0)}' \
    "$dir/sent.before" "$dir/sent.after")
  [[ -n $cg ]] && { rmdir "$cg" 2>/dev/null || true; cg=; }
  local cpu_s
  cpu_s=$([[ -z $cpu_note ]] && awk -v c="$cpu_ns" 'BEGIN { printf "%.2f", c / 1e9 }' || echo -)
  if ((ok)); then
    echo "run $label $n $rate_bits $bytes $elapsed $cpu_s $sent0 $top $slow_elapsed" >>"$results"
    printf '  %-12s %7.2f s  %5.2f x S/R  CPU %6s s  busiest NIC %s Mbit/s%s\n' "$label" "$elapsed" \
      "$(awk -v e="$elapsed" -v l="$limit" 'BEGIN { print e / l }')" "$cpu_s" "$top" \
      "$( ((slow < 0)) || awk -v e="$slow_elapsed" -v l="$limit" \
        'BEGIN { printf "  the slow host %.2f x S/R", e / l }')" >&2
  else
    echo "failed $label $n ${why//[$'\n\t']/ }" >>"$results"
    printf '  %-12s failed: %s (logs in %s)\n' "$label" "$why" "$dir" >&2
  fi
}

for n in "${sizes[@]}"; do
  # Every other host's copy is on this one disk while a system runs.
  need_kib=$(((n - 1) * (bytes >> 10) + (64 << 10)))
  have_kib=$(df -Pk "$work" | awk 'NR == 2 {print $4}')
  ((have_kib >= need_kib)) ||
    die "$n hosts need $((need_kib >> 20)) GiB free under $work for their copies;" \
      "$((have_kib >> 20)) GiB are: free some, or give MIB or HOSTS smaller"
  "$fleet_sh" up "$fleet" "$n" "$rate" >&2
  if ((slow_host)); then
    slow=$((n - 1))
    "$fleet_sh" throttle "$fleet" "$slow" "$((rate_bits / 4000))kbit"
    echo "host $slow at a quarter of $rate" >&2
  fi
  # The hosts file for plan: address:port, a rack label (racks of $rack_size hosts), h<i>.
  "$fleet_sh" hosts "$fleet" |
    awk -v k="$rack_size" '{print $1, "rack" int((NR - 1) / k), "h" NR - 1}' >"$work/hosts.txt"
  echo "$n hosts at $rate, $mib MiB from host 0; the limit S/R is $limit s" >&2
  for s in "${systems[@]}"; do measure "$s"; done
  "$fleet_sh" down "$fleet"
done

rm -f "$work/in.bin"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "took $(($(date +%s) - started)) s; load average before $load_before, after $load_after" >&2
python3 -B "$here/fleet_report.py" --results "$results" --out "$out" --smoke "$smoke" \
  --meta "cores=$(nproc)" "load_before=$load_before" "load_after=$load_after" "rate=$rate" \
  "mib=$mib" "rack_size=$rack_size" "seconds=$(($(date +%s) - started))" \
  ${cpu_note:+"cpu_note=$cpu_note"}

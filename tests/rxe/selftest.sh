#!/bin/bash
#
# Guest script for vm-run.sh that proves the Soft-RoCE device really moves data:
#   tests/rxe/vm-run.sh -- tests/rxe/selftest.sh
# Runs perftest (ib_write_bw, ib_send_bw; with GID-based and rdma_cm connection setup)
# and rping between a server and a client on the one rxe device / one IP, prints the
# bandwidth lines and writes them to $SHARE/selftest-report.txt. Exit 0 only if all
# of them succeed.
set -euo pipefail

: "${RXE_DEV:?run me through vm-run.sh}" "${RXE_IP:?}" "${SHARE:?}"
GID_INDEX=${RXE_GID_INDEX:-1}
STEP_TIMEOUT=60 # per tool, so one hang fails fast with a clear message
SIZE=65536
report=$SHARE/selftest-report.txt
logs=$SHARE/selftest-logs
mkdir -p "$logs"
: >"$report"

# vm-run.sh already sets this; RDMA memory registration pins memory, so make sure.
ulimit -l unlimited
[[ $(ulimit -l) == unlimited ]] || { echo "selftest: cannot raise memlock limit" >&2; exit 1; }

# No server may outlive the script (it would only waste the remaining VM time).
trap 'jobs -p | xargs -r kill 2>/dev/null || true' EXIT

say() { echo "selftest: $*"; }
fail() {
    echo "selftest: FAIL: $*" >&2
    exit 1
}

# Wait until something listens on PORT: perftest's out-of-band TCP socket shows up in
# `ss`, an rdma_cm listener (perftest -R, rping) as a LISTEN cm_id in `rdma resource`.
# A client started before that fails to connect, so never start it blindly.
wait_listen() { # wait_listen PORT SERVER_PID
    local port=$1 pid=$2 _
    for _ in $(seq 200); do
        kill -0 "$pid" 2>/dev/null || return 1
        if grep -q . <<<"$(ss -Hltn "sport = :$port")" ||
            grep -q "state LISTEN.*:$port\b" <<<"$(rdma resource show cm_id 2>/dev/null)"; then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# perftest PORT TOOL [FLAGS...]: server and client on the same device and IP.
perftest() {
    local port=$1 tool=$2
    shift 2
    local name="$tool $*"
    local common=(-d "$RXE_DEV" -D 2 -s "$SIZE" -F --report_gbits -p "$port" "$@")
    say "$name (server and client on $RXE_DEV $RXE_IP, port $port)"
    timeout "$STEP_TIMEOUT" "$tool" "${common[@]}" >"$logs/$tool-$port.server" 2>&1 &
    local spid=$!
    wait_listen "$port" "$spid" || { cat "$logs/$tool-$port.server" >&2; fail "$name: server did not start"; }
    if ! timeout "$STEP_TIMEOUT" "$tool" "${common[@]}" "$RXE_IP" >"$logs/$tool-$port.client" 2>&1; then
        cat "$logs/$tool-$port.client" >&2
        fail "$name: client failed"
    fi
    wait "$spid" || { cat "$logs/$tool-$port.server" >&2; fail "$name: server failed"; }
    # Result line: "#bytes #iterations BW-peak[Gb/s] BW-average[Gb/s] MsgRate[Mpps]".
    local line
    line=$(awk -v s="$SIZE" '$1 == s && NF >= 5' "$logs/$tool-$port.client" | tail -n1)
    [[ -n $line ]] || { cat "$logs/$tool-$port.client" >&2; fail "$name: no result line"; }
    # shellcheck disable=SC2086  # split the result line into its columns
    set -- $line
    printf '%-28s %6s B  avg %s Gb/s  (%s iterations, %s Mpps)\n' "$name" "$1" "$4" "$2" "$5" | tee -a "$report"
}

say "$(ibv_devices | grep -w "$RXE_DEV" | xargs)"
ibv_devinfo -d "$RXE_DEV" | grep -E 'state|active_mtu|link_layer' | sed 's/^[[:space:]]*/selftest:   /'

# perftest picks the IPv4 RoCE v2 GID by itself on rxe; -x makes it explicit.
perftest 18515 ib_write_bw -x "$GID_INDEX"
perftest 18516 ib_send_bw -x "$GID_INDEX"
# Same over rdma_cm (librdmacm resolves 192.0.2.1 to rxe0 and picks the GID itself).
perftest 18517 ib_write_bw -R

# rping: librdmacm connect, SEND, RDMA READ and WRITE, with data verification (-V).
say "rping (server and client on $RXE_DEV $RXE_IP, port 7174)"
timeout "$STEP_TIMEOUT" rping -s -a "$RXE_IP" -p 7174 -C 3 -V >"$logs/rping.server" 2>&1 &
spid=$!
wait_listen 7174 "$spid" || { cat "$logs/rping.server" >&2; fail "rping: server did not start"; }
if ! timeout "$STEP_TIMEOUT" rping -c -a "$RXE_IP" -p 7174 -C 3 -v -V >"$logs/rping.client" 2>&1; then
    cat "$logs/rping.client" >&2
    fail "rping: client failed"
fi
wait "$spid" || { cat "$logs/rping.server" >&2; fail "rping: server failed"; }
n=$(grep -c 'ping data:' "$logs/rping.client" || true)
((n == 3)) || { cat "$logs/rping.client" >&2; fail "rping: expected 3 pings, got $n"; }
echo "rping -C 3 -V                 3/3 pings verified" | tee -a "$report"

say "PASS (report in $report)"

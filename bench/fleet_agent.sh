#!/usr/bin/env bash
# mpirun's launch agent for bench/fleet.sh (its plm_rsh_agent, in place of ssh): runs a command
# "on host ADDRESS" of the fleet FLEET_NAME, i.e. inside that host's network namespace.
#   FLEET_NAME=NAME fleet_agent.sh ADDRESS COMMAND...
# Open MPI hands over the command as ssh would, as words for the remote shell to join and run.
set -euo pipefail
[[ -n ${FLEET_NAME:-} ]] || { echo "fleet_agent.sh: FLEET_NAME is not set" >&2; exit 1; }
# Host i's address is 198.18.(i / 250).(i % 250 + 1) (tests/fleet/fleet.sh).
IFS=. read -r a b c d <<<"$1"
[[ $a.$b == 198.18 && $c =~ ^[0-9]+$ && $d =~ ^[0-9]+$ ]] ||
  { echo "fleet_agent.sh: $1 is no address of a fleet host" >&2; exit 1; }
shift
host=$((c * 250 + d - 1))
# Each host's orted keeps its session directory apart (TMPDIR, below FLEET_MPI_TMP): on one
# machine they would all share /tmp/ompi.HOSTNAME.UID, and one's clean-up removed the directory
# another was creating ("A call to mkdir was unable to create the desired directory").
tmp=${FLEET_MPI_TMP:-/tmp/$FLEET_NAME-mpi}/h$host
mkdir -p "$tmp"
exec ip netns exec "$FLEET_NAME-h$host" env TMPDIR="$tmp" sh -c "$*"

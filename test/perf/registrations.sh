#!/bin/bash
# What registrations cost lease renewals: two leasehold servers side by
# side, each with 10,000 leases renewed every 10 s by their holders
# (1,000 renewals/s, `leasehold bench storm` without events); on one of
# them the leases are registrations of one service (`leasehold bench
# registrations`), so the server keeps their endpoints in EndpointSlices.
# The rounds alternate which server goes first; the registrations'
# slices' summed generation before and after tells how many slice writes
# the renewals caused.
#
#   test/perf/registrations.sh [rounds]   # default 3; ~1 minute a round
set -euo pipefail

ROUNDS=${1:-3}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/test/perf/serve.sh"
OUT=${OUT:-/tmp/leasehold-registrations}
LEASES=${LEASES:-10000} DURATION=${DURATION:-30s}
mkdir -p "$OUT"
LH=$OUT/leasehold
build_leasehold "$LH"

declare -A KCS PIDS_OF DIRS
for sys in plain registered; do
  DIRS[$sys]=$(mktemp -d /tmp/leasehold-perf-data.XXXX)
  serve_leasehold "$LH" "${DIRS[$sys]}"
  KCS[$sys]=${DIRS[$sys]}/admin.kubeconfig PIDS_OF[$sys]=$SERVE_PID
  "$LH" bench fill --kubeconfig "${KCS[$sys]}" --leases "$LEASES" --clients 32 >"$OUT/fill-$sys.log" 2>&1
done
trap 'kill ${PIDS_OF[plain]} ${PIDS_OF[registered]} 2>/dev/null; rm -rf ${DIRS[plain]} ${DIRS[registered]}' EXIT
"$LH" bench registrations --kubeconfig "${KCS[registered]}" --leases "$LEASES" | tee "$OUT/registrations-before.log"

storm() { # sys round
  "$LH" bench storm --kubeconfig "${KCS[$1]}" --server-pid "${PIDS_OF[$1]}" --leases "$LEASES" --renew-interval 10s \
    --clients 16 --events-per-second 0 --duration "$DURATION" >"$OUT/storm-$1-$2.log" 2>&1
  echo "== $1, round $2"
  grep -E 'renew|server' "$OUT/storm-$1-$2.log" | sed 's/^/   /'
}
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then storm plain "$r"; storm registered "$r"; else storm registered "$r"; storm plain "$r"; fi
done
"$LH" bench registrations --kubeconfig "${KCS[registered]}" --leases "$LEASES" | tee "$OUT/registrations-after.log"

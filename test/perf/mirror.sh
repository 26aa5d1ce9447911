#!/bin/bash
# What mirroring Endpoints into EndpointSlices costs lease renewals: two
# leasehold servers side by side, both with the same 1,000 leases, one
# also with 10,000 Endpoints of 10 addresses each, all mirrored. The
# renewal benchmark then runs against each in turn, alternating which
# goes first as the machine's speed drifts; the mirroring benchmark's own
# figures (time to mirror, heap per mirrored Endpoints, a burst of 1,000
# updates) come first.
#
#   test/perf/mirror.sh [rounds]      # default 5; about 30 s a round
#
# Results go to $OUT (default /tmp/leasehold-mirror), and a summary to
# stdout.
set -euo pipefail

ROUNDS=${1:-5}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/test/perf/serve.sh"
OUT=${OUT:-/tmp/leasehold-mirror}
ENDPOINTS=${ENDPOINTS:-10000} ADDRESSES=${ADDRESSES:-10} RENEW=${RENEW:-10s}
mkdir -p "$OUT"
LH=$OUT/leasehold
build_leasehold "$LH"

declare -A KCS PIDS_OF DIRS
for sys in plain mirrored; do
  DIRS[$sys]=$(mktemp -d /tmp/leasehold-perf-data.XXXX)
  serve_leasehold "$LH" "${DIRS[$sys]}"
  KCS[$sys]=${DIRS[$sys]}/admin.kubeconfig PIDS_OF[$sys]=$SERVE_PID
done
trap 'kill ${PIDS_OF[plain]} ${PIDS_OF[mirrored]} 2>/dev/null; rm -rf ${DIRS[plain]} ${DIRS[mirrored]}' EXIT

for sys in plain mirrored; do
  "$LH" bench fill --kubeconfig "${KCS[$sys]}" --leases 1000 --clients 32 >"$OUT/fill-$sys.log" 2>&1
done
"$LH" bench mirror --kubeconfig "${KCS[mirrored]}" --server-pid "${PIDS_OF[mirrored]}" --namespace mirror \
  --endpoints "$ENDPOINTS" --addresses "$ADDRESSES" --burst 1000 | tee "$OUT/mirror.log"
sleep 5

renew() { # sys round
  "$LH" bench renew --kubeconfig "${KCS[$1]}" --server-pid "${PIDS_OF[$1]}" --leases 1000 --clients 32 --duration "$RENEW" >"$OUT/renew-$1-$2.log" 2>&1
  echo "== $1, round $2"
  grep -E 'renews/s|per' "$OUT/renew-$1-$2.log" | sed 's/^/   /'
}
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then renew plain "$r"; renew mirrored "$r"; else renew mirrored "$r"; renew plain "$r"; fi
done

#!/bin/bash
# An event storm, builds side by side: each binary serves a fresh data
# directory in turn, rounds alternating the order, while `leasehold
# bench storm` creates 200 events/s (each with a reason of its own, so
# none is aggregated) and 200 holders renew their leases every 2 s.
# Reports each run's renewal and event latencies and the server's CPU
# and peak RSS: whether memory stays bounded under the storm.
#
#   test/perf/storm.sh [rounds] [binary...]   # default 1 round of a build of the work tree
#
# Environment: DURATION (3m), RATE (200 events/s), OUT (/tmp/leasehold-storm).
# The load generator is the first binary.
set -euo pipefail
ROUNDS=${1:-1}
shift || true
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/test/perf/serve.sh"
OUT=${OUT:-/tmp/leasehold-storm}
DURATION=${DURATION:-3m} RATE=${RATE:-200}
mkdir -p "$OUT"
if [ $# -eq 0 ]; then
  build_leasehold "$OUT/leasehold"
  set -- "$OUT/leasehold"
fi
BENCH=$1

run() { # binary round
  local bin=$1 dir
  dir=$(mktemp -d "$OUT/data.XXXX")
  serve_leasehold "$bin" "$dir"
  local kc=$dir/admin.kubeconfig
  "$BENCH" bench fill --kubeconfig "$kc" --leases 200 --clients 16 >/dev/null 2>&1
  echo "== round $2: $bin"
  "$BENCH" bench storm --kubeconfig "$kc" --server-pid "$SERVE_PID" --data-dir "$dir" \
    --leases 200 --events-per-second "$RATE" --duration "$DURATION" 2>"$dir.err" | sed 's/^/   /'
  kill "$SERVE_PID"
  wait "$SERVE_PID" 2>/dev/null || true
  rm -rf "$dir" "$dir.err"
}

alternate "$ROUNDS" "$@"

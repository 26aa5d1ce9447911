#!/bin/bash
# Allocations per lease renewal, exactly: the server's own counters
# (go_memstats_alloc_bytes_total and go_memstats_mallocs_total on
# /metrics) read before and after `leasehold bench renew` (1,000 leases,
# 32 clients, 10 s), divided by the writes the store committed meanwhile.
# Unlike CPU time, which drifts with the machine by 10-15% between runs,
# these repeat to within ~1%, so a change of a few allocations shows.
# Background work (the store's flushes, the controllers) is included.
#
#   test/perf/allocs.sh [binary...]    # default: a build of the work tree
#
# Each binary serves a fresh data directory; the load generator is the
# first binary.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/test/perf/serve.sh"
OUT=${OUT:-/tmp/leasehold-allocs}
mkdir -p "$OUT"
if [ $# -eq 0 ]; then
  build_leasehold "$OUT/leasehold"
  set -- "$OUT/leasehold"
fi
BENCH=$1

counters() { # pki port
  curl -sk --cert "$1/admin.crt" --key "$1/admin.key" "https://127.0.0.1:$2/metrics" |
    awk '/^(go_memstats_alloc_bytes_total|go_memstats_mallocs_total|leasehold_storage_commit_batch_writes_sum) / {print $1, $2}'
}

for bin in "$@"; do
  dir=$(mktemp -d "$OUT/data.XXXX")
  serve_leasehold "$bin" "$dir"
  pid=$SERVE_PID port=$SERVE_PORT
  kc=$dir/admin.kubeconfig
  "$BENCH" bench fill --kubeconfig "$kc" --leases 1000 --clients 32 >/dev/null 2>&1
  counters "$dir/pki" "$port" >"$dir/before"
  "$BENCH" bench renew --kubeconfig "$kc" --server-pid "$pid" --leases 1000 --clients 32 --duration 10s 2>/dev/null | grep server: >"$dir/cpu" || true
  counters "$dir/pki" "$port" >"$dir/after"
  join "$dir/before" "$dir/after" | awk -v bin="$bin" '{d[$1] = $3 - $2}
    END {n = d["leasehold_storage_commit_batch_writes_sum"]
         printf "%s: %d renewals, %.0f bytes and %.1f allocations a renewal\n", bin, n,
           d["go_memstats_alloc_bytes_total"] / n, d["go_memstats_mallocs_total"] / n}'
  sed 's/^/  /' "$dir/cpu"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
done

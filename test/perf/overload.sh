#!/bin/bash
# Overload where the storage engine is the limit: leasehold's data
# directory on a slow disk (test/perf/slowdisk: FUSE, BANDWIDTH bytes/s
# shared by the WAL, flushes and compactions, FSYNC per fsync), and
# `leasehold bench overload` offering merge patches at multiples of the rate
# that disk sustains, as a token user outside system:masters, each run on a
# fresh server for DURATION.
#
#   test/perf/overload.sh [multiple ...]     # default: 0.5 1 2 10 20
#
# Environment: BANDWIDTH (65536), FSYNC (2ms), DURATION (60s), INFLIGHT
# (--max-mutating-requests-inflight; the server's default when unset),
# OUT (/tmp/leasehold-overload). Needs root and FUSE.
set -euo pipefail
MULTIPLES=${*:-0.5 1 2 10 20}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/test/perf/serve.sh"
OUT=${OUT:-/tmp/leasehold-overload}
BANDWIDTH=${BANDWIDTH:-65536}
FSYNC=${FSYNC:-2ms}
DURATION=${DURATION:-60s}
mkdir -p "$OUT/back" "$OUT/disk"
(cd "$REPO" && go build -o "$OUT/slowdisk" ./test/perf/slowdisk && go build -o "$OUT/kubectl" ./test/kubectl)
build_leasehold "$OUT/leasehold"
LH=$OUT/leasehold KC=$OUT/kubectl
echo "bench-token,bench,uid-bench" >"$OUT/tokens.csv"

server=""
"$OUT/slowdisk" --backing "$OUT/back" --mount "$OUT/disk" --bandwidth "$BANDWIDTH" --fsync "$FSYNC" &
disk=$!
# A server still running keeps the mount busy: stop it first.
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  kill "$disk" 2>/dev/null || true
  wait "$disk" 2>/dev/null || true
}
trap cleanup EXIT
until mountpoint -q "$OUT/disk"; do
  [ -e "/proc/$disk" ] || exit 1
  sleep 0.1
done

start() {
  local dir=$OUT/disk/data
  rm -rf "$dir"
  local extra=()
  [ -n "${INFLIGHT:-}" ] && extra=(--max-mutating-requests-inflight "$INFLIGHT")
  "$LH" serve --data-dir "$dir" --listen 127.0.0.1:7643 --log-level warn --token-auth-file "$OUT/tokens.csv" "${extra[@]}" >"$OUT/server.log" 2>&1 &
  server=$!
  for _ in $(seq 150); do
    [ -f "$dir/admin.kubeconfig" ] && curl -sk https://127.0.0.1:7643/readyz 2>/dev/null | grep -q ok && break
    [ -e "/proc/$server" ] || { cat "$OUT/server.log" >&2; exit 1; }
    sleep 0.2
  done
  "$KC" --kubeconfig "$dir/admin.kubeconfig" create role bench --verb=get,update,patch --resource=leases.coordination.k8s.io >/dev/null
  "$KC" --kubeconfig "$dir/admin.kubeconfig" create rolebinding bench --role=bench --user=bench >/dev/null
  "$LH" bench fill --kubeconfig "$dir/admin.kubeconfig" --leases 1000 --clients 32 | tail -1
}
stop() {
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=""
}

# The rate the disk sustains: what is admitted when twice too much is
# offered for 20 s.
start
"$LH" bench overload --kubeconfig "$OUT/disk/data/admin.kubeconfig" --token bench-token --rate 2000 --duration 20s | tee "$OUT/sustained.log" | grep 'admitted'
stop
sustained=$(grep -o 'admitted (2xx) [0-9]*' "$OUT/sustained.log" | grep -o '[0-9]*$')
echo "== the disk sustains about $sustained patches/s"

for m in $MULTIPLES; do
  rate=$(python3 -c "print(round($m * $sustained))")
  start
  echo "== ${m}× ($rate/s offered for $DURATION)"
  "$LH" bench overload --kubeconfig "$OUT/disk/data/admin.kubeconfig" --token bench-token --rate "$rate" --duration "$DURATION" --server-pid "$server" | tee "$OUT/x$m.log" | grep -v '^overload: *[0-9]*s:'
  stop
done

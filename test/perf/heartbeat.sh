#!/bin/bash
# Node heartbeats at fleet scale: the largest number of nodes a server
# sustains on one core, each renewing its Lease in kube-node-lease every
# 10 s as the kubelet does (`leasehold bench heartbeat`, protobuf: one PUT
# of the Lease last returned; after a 10 s warm-up, sustained = every due
# renewal made, none failed, p99 from when due under 100 ms).
#
# The server (leasehold on its embedded store; kube-apiserver 1.36.3 with
# its etcd 3.6.16, both) runs on CPU $SERVER_CPU alone, the generator on
# $GEN_CPU: this script pins itself to the server's CPU before starting a
# server (its processes inherit it, and Go sizes GOMAXPROCS from it), and
# runs the generator under taskset. Each system is started fresh, then
# driven at each node count in turn, smallest first, until one is not
# sustained (the leases of the smaller counts are reused).
#
#   test/perf/heartbeat.sh [nodes...]    # default 10000 20000 30000 40000 50000
#
# Environment: SYSTEMS ("leasehold kas"), BIN (a leasehold binary to run,
# server and generator, instead of a build of the work tree), DURATION (60s
# measured: six periods),
# SERVER_CPU (0), GEN_CPU (1), OUT (/tmp/leasehold-heartbeat), PEERS_KIT
# and PEERS_DIR as test/perf/compare.sh.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/test/perf/serve.sh"
peers_kit
OUT=${OUT:-/tmp/leasehold-heartbeat}
SYSTEMS=${SYSTEMS:-leasehold kas}
DURATION=${DURATION:-60s}
SERVER_CPU=${SERVER_CPU:-0} GEN_CPU=${GEN_CPU:-1}
NODES=("$@")
[ ${#NODES[@]} -gt 0 ] || NODES=(10000 20000 30000 40000 50000)
mkdir -p "$OUT"
LH=$OUT/leasehold
if [ -n "${BIN:-}" ]; then
  cp "$BIN" "$LH"
else
  build_leasehold "$LH"
fi

taskset -p -c "$SERVER_CPU" $$ >/dev/null
trap '[ -n "$LHPID" ] && stop_leasehold; "$KIT/stop.sh" >/dev/null 2>&1 || true' EXIT

for sys in $SYSTEMS; do
  "start_$sys"
  for n in "${NODES[@]}"; do
    log=$OUT/$sys-$n.log
    taskset -c "$GEN_CPU" "$LH" bench heartbeat --kubeconfig "$KC" --server-pid "$PIDS" \
      --nodes "$n" --duration "$DURATION" >"$log" 2>"$OUT/$sys-$n.err" || { cat "$OUT/$sys-$n.err" >&2; break; }
    made=$(sed -n 's/.*connections: \([0-9]* of [0-9]*\) due renewals made (\([^)]*\)), \([0-9]*\) failed.*p99=\([^ ]*\).*/\1 (\2), \3 failed, p99 \4/p' "$log")
    server=$(sed -n 's/^server: \([0-9.]*\) cores.*; \(.*\) per renewal), peak RSS \(.*\)/\1 cores, \2 a renewal, peak RSS \3/p' "$log")
    gen=$(sed -n 's/^generator: \(.*\) of its own CPU a renewal/\1/p' "$log")
    verdict=$(sed -n 's/^sustained: \([a-z]*\).*/\1/p' "$log")
    printf '%-10s %6d nodes: %s; server %s; generator %s a renewal; sustained: %s\n' "$sys" "$n" "$made" "$server" "$gen" "$verdict"
    [ "$verdict" = yes ] || break
  done
  "stop_$sys"
done

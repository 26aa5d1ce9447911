#!/bin/bash
# Watch fan-out against its floor, side by side in one run: `leasehold
# bench fanout` (500 watchers of one Endpoints of 1,000 addresses, 2
# updates/s, JSON then protobuf) against leasehold, against
# test/perf/floor (the same HTTPS and HTTP/2 server, leasehold's
# h2server, doing nothing but encoding each PUT once per format and
# writing it to every watcher), and against the floor on net/http's
# HTTP/2 server; each started fresh, rounds alternating the order.
# Server CPU per event delivered is the figure: what leasehold spends
# above the floor is what its API machinery costs, the floor what the
# transport does on this machine.
#
#   test/perf/fanout-floor.sh [rounds]    # default 3; ~3 minutes a round
#
# BASE=BINARY adds another leasehold build as "base"; SYSTEMS picks and
# orders the systems (default "leasehold floor floor-go").
set -euo pipefail

ROUNDS=${1:-3}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/test/perf/serve.sh"
OUT=${OUT:-/tmp/leasehold-fanout-floor}
WATCHERS=${WATCHERS:-500} DURATION=${DURATION:-30s}
mkdir -p "$OUT"
LH=$OUT/leasehold
(cd "$REPO" && go build -o "$LH.new" ./cmd/leasehold && go build -o "$OUT/floor" ./test/perf/floor) && cp "$LH.new" "$LH" && rm "$LH.new"
SYSTEMS=${SYSTEMS:-leasehold floor floor-go${BASE:+ base}}
if [ -n "${BASE:-}" ]; then cp "$BASE" "$OUT/leasehold-base"; fi

start_leasehold() { LHDIR=$(mktemp -d /tmp/leasehold-perf-data.XXXX); serve_leasehold "$LH" "$LHDIR"; PID=$SERVE_PID KC=$LHDIR/admin.kubeconfig; }
stop_leasehold() { kill "$PID"; wait "$PID" 2>/dev/null || true; rm -rf "$LHDIR"; }
start_base() { local lh=$LH; LH=$OUT/leasehold-base; start_leasehold; LH=$lh; }
stop_base() { stop_leasehold; }
# The floors serve with a leasehold data directory's certificates: a
# leasehold started and stopped for them, its kubeconfig pointed at
# the floor.
start_floor() {
  start_leasehold && stop_leasehold_keep
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$OUT/floor" --pki "$LHDIR/pki" --listen "127.0.0.1:$port" "$@" >"$LHDIR/floor.log" 2>&1 &
  PID=$!
  sed -i "s#server: https://127.0.0.1:[0-9]*#server: https://127.0.0.1:$port#" "$KC"
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0; sleep 0.1; done
  cat "$LHDIR/floor.log" >&2; exit 1
}
stop_leasehold_keep() { kill "$PID"; wait "$PID" 2>/dev/null || true; }
stop_floor() { stop_leasehold; }
start_floor-go() { start_floor --net-http-h2; }
stop_floor-go() { stop_leasehold; }

run() { # system round
  local sys=$1 log=$OUT/$1-$2.log
  "start_$sys"
  {
    "$LH" bench fanout --kubeconfig "$KC" --server-pid "$PID" --watchers "$WATCHERS" --addresses 1000 --rate 2 --duration "$DURATION"
    "$LH" bench fanout --kubeconfig "$KC" --server-pid "$PID" --watchers "$WATCHERS" --addresses 1000 --rate 2 --duration "$DURATION" --protobuf
  } >"$log" 2>"$log.err"
  "stop_$sys"
  echo "== $sys, round $2"
  grep -E 'per event|delivery' "$log" | sed 's/^/   /'
}

read -r -a order <<<"$SYSTEMS"
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 0 ]; then
    for ((i = ${#order[@]} - 1; i >= 0; i--)); do run "${order[$i]}" "$r"; done
  else
    for sys in "${order[@]}"; do run "$sys" "$r"; done
  fi
done

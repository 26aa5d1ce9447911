#!/bin/bash
# leasehold against its floor, side by side in one run: test/perf/floor
# (the same HTTPS and HTTP/2 server, leasehold's h2server, doing nothing
# but what the benchmark must: writing each event encoded once per
# format to every watcher, or a list's bytes as leasehold served them)
# and the floor on net/http's HTTP/2 server; each started fresh, rounds
# alternating the order. Server CPU per operation is the figure: what
# leasehold spends above the floor is its API machinery's, the floor is
# what the transport costs on this machine.
#
#   test/perf/floor.sh [rounds]    # default 3; ~5 minutes a round
#
# PHASES (default "fanout list"): fanout is `leasehold bench fanout`, 500
# watchers of one Endpoints of 1,000 addresses, 2 updates/s, JSON then
# protobuf; list is `leasehold bench list` of 20,000 leases (the floors
# answer every list whole, so their paginated figure means nothing).
# BASE=BINARY adds another leasehold build as "base"; SYSTEMS picks and
# orders the systems (default "leasehold floor floor-go").
set -euo pipefail

ROUNDS=${1:-3}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/test/perf/serve.sh"
OUT=${OUT:-/tmp/leasehold-floor}
WATCHERS=${WATCHERS:-500} DURATION=${DURATION:-30s} LEASES=${LEASES:-20000}
PHASES=${PHASES:-fanout list}
mkdir -p "$OUT"
LH=$OUT/leasehold
(cd "$REPO" && go build -o "$OUT/floor" ./test/perf/floor)
build_leasehold "$LH"
SYSTEMS=${SYSTEMS:-leasehold floor floor-go${BASE:+ base}}
if [ -n "${BASE:-}" ]; then cp "$BASE" "$OUT/leasehold-base"; fi

start_leasehold() { LHDIR=$(mktemp -d /tmp/leasehold-perf-data.XXXX); serve_leasehold "$LH" "$LHDIR"; PID=$SERVE_PID KC=$LHDIR/admin.kubeconfig; }
stop_leasehold() { kill "$PID"; wait "$PID" 2>/dev/null || true; rm -rf "$LHDIR"; }
start_base() { local lh=$LH; LH=$OUT/leasehold-base; start_leasehold; LH=$lh; }
stop_base() { stop_leasehold; }
fill() { "$LH" bench fill --kubeconfig "$KC" --server-pid "$PID" --leases "$LEASES" --clients 64 >/dev/null; }

# The floors serve with a leasehold data directory's certificates (a
# leasehold started and stopped for them, its kubeconfig pointed at the
# floor) and the list bodies captured below.
start_floor() {
  start_leasehold
  kill "$PID"; wait "$PID" 2>/dev/null || true
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$OUT/floor" --pki "$LHDIR/pki" --listen "127.0.0.1:$port" ${LISTS[@]+"${LISTS[@]}"} "$@" >"$LHDIR/floor.log" 2>&1 &
  PID=$!
  sed -i "s#server: https://127.0.0.1:[0-9]*#server: https://127.0.0.1:$port#" "$KC"
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0; sleep 0.1; done
  cat "$LHDIR/floor.log" >&2
  exit 1
}
stop_floor() { stop_leasehold; }
start_floor-go() { start_floor --net-http-h2; }
stop_floor-go() { stop_leasehold; }

LISTS=() # the floor's --lists, once captured
# The list bodies the floors serve: a filled leasehold's own (a user
# agent other than curl's, which gets its JSON indented).
capture_lists() {
  mkdir -p "$OUT/lists"
  start_leasehold
  fill
  local key crt url
  key=$LHDIR/client.key crt=$LHDIR/client.crt
  grep client-certificate-data "$KC" | awk '{print $2}' | base64 -d >"$crt"
  grep client-key-data "$KC" | awk '{print $2}' | base64 -d >"$key"
  url=https://127.0.0.1:$SERVE_PORT/apis/coordination.k8s.io/v1/namespaces/default/leases
  curl -sfk -A floor.sh --cert "$crt" --key "$key" -H "Accept: application/json" "$url" -o "$OUT/lists/list.json"
  curl -sfk -A floor.sh --cert "$crt" --key "$key" -H "Accept: application/vnd.kubernetes.protobuf" "$url" -o "$OUT/lists/list.pb"
  stop_leasehold
  LISTS=(--lists "$OUT/lists")
}

run() { # system round
  local sys=$1 log=$OUT/$1-$2.log
  "start_$sys"
  {
    for phase in $PHASES; do
      case $phase in
      fanout)
        "$LH" bench fanout --kubeconfig "$KC" --server-pid "$PID" --watchers "$WATCHERS" --addresses 1000 --rate 2 --duration "$DURATION"
        "$LH" bench fanout --kubeconfig "$KC" --server-pid "$PID" --watchers "$WATCHERS" --addresses 1000 --rate 2 --duration "$DURATION" --protobuf
        ;;
      list)
        case $sys in leasehold | base) fill ;; esac
        "$LH" bench list --kubeconfig "$KC" --server-pid "$PID" --rounds 10
        ;;
      *) echo "unknown phase $phase" >&2; exit 1 ;;
      esac
    done
  } >"$log" 2>"$log.err"
  "stop_$sys"
  echo "== $sys, round $2"
  grep -E 'per event|delivery|^list' "$log" | sed 's/^/   /'
}

case " $PHASES " in *" list "*) capture_lists ;; esac
read -r -a order <<<"$SYSTEMS"
alternate "$ROUNDS" "${order[@]}"

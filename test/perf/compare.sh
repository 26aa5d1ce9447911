#!/bin/bash
# Side by side: leasehold and kube-apiserver + etcd under the same load
# (leasehold bench, client-go and raw HTTP clients), each started fresh
# every round, the rounds alternating which goes first as the machine's
# speed drifts. Server CPU is read from /proc for the server processes
# only (kube-apiserver's and etcd's summed), as is memory.
#
#   test/perf/compare.sh [rounds]     # default 3; about 8 minutes a round
#   PHASES=renew test/perf/compare.sh 10   # renewals only: ~2 minutes a round
#
# PHASES picks the benchmarks run after the fill (default "list renew
# fanout"): renewals alone make more rounds, closer in time, of the
# figure that moves most with the machine's drift.
#
# BASE=BINARY adds another leasehold build as the system "base" (a
# change's before and after in one run); SYSTEMS picks the systems run
# ("leasehold kas", and "base" when BASE is set), in that order in odd
# rounds and the reverse in even ones.
#
# kube-apiserver and etcd come from the peers kit (PEERS_KIT, default
# ../shared/peers: its build.sh builds both into ~/.cache/leasehold-peers);
# nothing it builds belongs in this repository. Results go to
# $OUT (default /tmp/leasehold-compare), one log per system and round,
# and a summary on stdout.
set -euo pipefail

ROUNDS=${1:-3}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/test/perf/serve.sh"
peers_kit
PEERS_BIN=$PEERS_DIR/bin
OUT=${OUT:-/tmp/leasehold-compare}
LEASES=${LEASES:-20000} RENEW=${RENEW:-20s} FANOUT=${FANOUT:-30s} WATCHERS=${WATCHERS:-500}
PHASES=${PHASES:-list renew fanout}
mkdir -p "$OUT"
LH=$OUT/leasehold
# Built aside and copied, as the peers' binaries, built long before, are
# mapped (build_leasehold).
build_leasehold "$LH"
SYSTEMS=${SYSTEMS:-leasehold kas${BASE:+ base}}
if [ -n "${BASE:-}" ]; then cp "$BASE" "$OUT/leasehold-base"; fi
start_base() { local lh=$LH; LH=$OUT/leasehold-base; start_leasehold; LH=$lh; }
stop_base() { stop_leasehold; }

rss() { # pids...: their summed RSS in MiB
  local sum=0
  for p in "$@"; do sum=$((sum + $(awk '/^VmRSS:/ {print $2}' /proc/$p/status))); done
  echo "$((sum / 1024))"
}


run() { # system round
  local sys=$1 log=$OUT/$1-$2.log
  "start_$sys"
  local b=("$LH" bench)
  local k=(--kubeconfig "$KC" --server-pid "$PIDS")
  sleep 10 # settle: idle memory
  {
    echo "idle RSS $(rss ${PIDS//,/ }) MiB"
    "${b[@]}" fill "${k[@]}" --leases "$LEASES" --clients 64
    for phase in $PHASES; do
      case $phase in
      list) "${b[@]}" list "${k[@]}" --rounds 10 ;;
      renew) "${b[@]}" renew "${k[@]}" --leases 1000 --clients 32 --duration "$RENEW" ;;
      fanout)
        "${b[@]}" fanout "${k[@]}" --watchers "$WATCHERS" --addresses 1000 --rate 2 --duration "$FANOUT"
        "${b[@]}" fanout "${k[@]}" --watchers "$WATCHERS" --addresses 1000 --rate 2 --duration "$FANOUT" --protobuf
        ;;
      *) echo "unknown phase $phase" >&2; exit 1 ;;
      esac
    done
    echo "loaded RSS $(rss ${PIDS//,/ }) MiB"
  } >"$log" 2>"$log.err"
  "stop_$sys"
  echo "== $sys, round $2"
  grep -E 'RSS|per|renews/s|creates/s|delivery' "$log" | sed 's/^/   /'
}

read -r -a order <<<"$SYSTEMS"
alternate "$ROUNDS" "${order[@]}"

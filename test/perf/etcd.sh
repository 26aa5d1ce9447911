#!/bin/bash
# What a renewal costs once leasehold runs on etcd, side by side in one
# run (renewals as client-go's leader election makes them, a consistent
# GET and a PUT, 32 clients, 1,000 leases; READ=0: the PUT alone, as a
# holder that keeps the lease it wrote), through:
#
#   embedded   leasehold on its embedded store
#   etcd       leasehold on etcd (the peers kit's etcd 3.6.16, a prefix of its own)
#   etcd3      three leasehold replicas on that etcd (another prefix, shared
#              credentials), the clients spread over them
#   kas        kube-apiserver 1.36.3 on that same etcd
#   floor      no API server: test/perf/etcdfloor's bare compare-and-swap
#              transaction a renewal, of a stored Lease's size (what etcd
#              cannot be asked less for a renewal);
#   floor-probe  the same with a revision read before each (what a
#              consistent GET adds) and a watch of the keys (what a watch
#              cache adds): what one API server must ask of etcd, paced at
#              the rate the etcd system last reached (etcd's cost a
#              transaction falls as its rate rises: larger batches);
#   floor3     the same with three watches, one a replica's watch cache,
#              at etcd3's rate.
#              The floors' "server" column is the bare client's own CPU:
#              what the etcd client library alone costs a server on etcd.
#
# Every server runs for the whole script, idle but for its own run; each
# round runs them all, the order alternating. CPU comes from /proc: the
# server's processes (the three replicas summed) and etcd's, around each
# run, divided by the renewals done.
#
#   test/perf/etcd.sh [rounds]     # default 3; about 2.5 minutes a round
#
# Environment: READ (1), RENEW (20s), OUT (/tmp/leasehold-etcd), SYSTEMS (all of
# the above), PEERS_KIT, PEERS_DIR as test/perf/compare.sh. BASE=BINARY
# adds "etcd-base": that leasehold binary on etcd, to compare a change.
set -euo pipefail

ROUNDS=${1:-3}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/test/perf/serve.sh"
peers_kit
OUT=${OUT:-/tmp/leasehold-etcd}
RENEW=${RENEW:-20s}
READ=${READ:-1}
read_flag=()
[ "$READ" = 1 ] && read_flag=(--read)
SYSTEMS=${SYSTEMS:-embedded etcd etcd3 kas floor floor-probe floor3}
ETCD_URL=http://127.0.0.1:23790
mkdir -p "$OUT"
LH=$OUT/leasehold
(cd "$REPO" && go build -o "$OUT/etcdfloor" ./test/perf/etcdfloor)
build_leasehold "$LH"

DIRS=() SERVERS=()
cleanup() {
  for p in "${SERVERS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$KIT/stop.sh" >/dev/null 2>&1 || true
  rm -rf "$PEERS_DIR/etcd-data" "${DIRS[@]}"
}
trap cleanup EXIT

ticks() { # pids...: their summed user+system CPU, in clock ticks
  local sum=0 p
  for p in "$@"; do sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  echo "$sum"
}

start_kas # etcd and kube-apiserver, on an empty etcd
ETCD=$ETCD_PID
KAS=$KAS_PID KAS_KC=$KC

lh() { # name [serve flags...]: start a leasehold; sets SERVE_PID, DIR
  DIR=$OUT/$1
  rm -rf "$DIR"
  mkdir -p -m 700 "$DIR"
  DIRS+=("$DIR")
  shift
  serve_leasehold "$LH" "$DIR" "$@"
  SERVERS+=("$SERVE_PID")
}
lh embedded
EMB=$SERVE_PID EMB_KC=$DIR/admin.kubeconfig
lh etcd --storage etcd --etcd-servers "$ETCD_URL" --etcd-prefix /leasehold-etcd
ONE=$SERVE_PID ONE_KC=$DIR/admin.kubeconfig
if [ -n "${BASE:-}" ]; then
  cp "$BASE" "$OUT/leasehold-base"
  LH=$OUT/leasehold-base lh etcd-base --storage etcd --etcd-servers "$ETCD_URL" --etcd-prefix /leasehold-etcd-base
  BASEPID=$SERVE_PID BASE_KC=$DIR/admin.kubeconfig
  SYSTEMS="$SYSTEMS etcd-base"
fi
lh r0 --storage etcd --etcd-servers "$ETCD_URL" --etcd-prefix /leasehold-etcd3
R=("$SERVE_PID") RKC=("$DIR/admin.kubeconfig")
for r in r1 r2; do
  mkdir -p -m 700 "$OUT/$r/pki"
  cp -p "$OUT/r0/pki/"{ca.crt,ca.key,admin.crt,admin.key} "$OUT/$r/pki/"
  lh "$r" --storage etcd --etcd-servers "$ETCD_URL" --etcd-prefix /leasehold-etcd3
  R+=("$SERVE_PID") RKC+=("$DIR/admin.kubeconfig")
done
THREE_KC=$(IFS=,; echo "${RKC[*]}")

for kc in "$EMB_KC" "$ONE_KC" "${RKC[0]}" "$KAS_KC" ${BASE_KC:-}; do
  "$LH" bench fill --kubeconfig "$kc" --leases 1000 --clients 32 >"$OUT/fill.log" 2>&1
done

run() { # system round: one run, its line on stdout
  local sys=$1 log=$OUT/$1-$2.log pids kc
  case $sys in
  embedded) pids=$EMB kc=$EMB_KC ;;
  etcd) pids=$ONE kc=$ONE_KC ;;
  etcd3) pids="${R[*]}" kc=$THREE_KC ;;
  etcd-base) pids=$BASEPID kc=$BASE_KC ;;
  kas) pids=$KAS kc=$KAS_KC ;;
  floor*) pids="" ;;
  esac
  local s0 e0 s1 e1 n
  s0=$(ticks $pids) e0=$(ticks "$ETCD")
  case $sys in
  floor) "$OUT/etcdfloor" --endpoints "$ETCD_URL" --duration "$RENEW" --rate "${RATE[etcd]:-0}" >"$log" 2>&1 ;;
  floor-probe) "$OUT/etcdfloor" --endpoints "$ETCD_URL" --duration "$RENEW" --probe --watchers 1 --rate "${RATE[etcd]:-0}" >"$log" 2>&1 ;;
  floor3) "$OUT/etcdfloor" --endpoints "$ETCD_URL" --duration "$RENEW" --probe --watchers 3 --rate "${RATE[etcd3]:-0}" >"$log" 2>&1 ;;
  *) "$LH" bench renew --kubeconfig "$kc" --leases 1000 --clients 32 --duration "$RENEW" "${read_flag[@]}" >"$log" 2>&1 ;;
  esac
  s1=$(ticks $pids) e1=$(ticks "$ETCD")
  case $sys in
  floor*) n=$(sed -n 's/^etcdfloor: \([0-9]*\) transactions.*/\1/p' "$log") ;;
  *) n=$(awk -v d="${RENEW%s}" '/^renew: [0-9]+ clients/ {for (i = 1; i <= NF; i++) if ($(i+1) == "renews/s;") printf "%d", $i * d}' "$log") ;;
  esac
  RATE[$sys]=$((n / ${RENEW%s}))
  local hz=100 server etcd p99
  server=$(( (s1 - s0) * 1000000 / hz / n ))
  case $sys in floor*) server=$(sed -n 's/.*client CPU \([0-9]*\) µs.*/\1/p' "$log") ;; esac
  etcd=$(( (e1 - e0) * 1000000 / hz / n ))
  [ "$sys" = embedded ] && etcd=0
  p99=$(grep -o 'p99=[^ ]*' "$log" | head -1 || true)
  printf '%-12s round %s: %6d renewals (%4d/s), server %5d µs, etcd %4d µs, total %5d µs a renewal; %s\n' \
    "$sys" "$2" "$n" "$((n / ${RENEW%s}))" "$server" "$etcd" "$((server + etcd))" "${p99:-}"
}

declare -A RATE # renewals a second each system last reached
read -ra systems <<<"$SYSTEMS"
alternate "$ROUNDS" "${systems[@]}"

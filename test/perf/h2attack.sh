#!/bin/bash
# Side by side under HTTP/2 attacks (test/perf/h2attack): leasehold, and
# kube-apiserver + etcd from the peers kit, each started fresh for every
# attack (a Go server's RSS does not come back down within a run, so one
# attack's peak would be the next one's "before"), the order alternating
# from one attack to the next.
#
#   test/perf/h2attack.sh [attack ...]     # default: all; ~3 minutes an attack
#
# Environment: SYSTEMS ("leasehold kas"), DURATION (30s), CONNS (4),
# RSS_LIMIT_MIB (4096: an attack
# is stopped once the server passes it), OUT (/tmp/leasehold-h2attack),
# PEERS_KIT (../shared/peers; its build.sh builds kube-apiserver and etcd
# into ~/.cache/leasehold-peers). One log per system and attack in $OUT,
# and the rows side by side on stdout.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/test/perf/serve.sh"
peers_kit
OUT=${OUT:-/tmp/leasehold-h2attack}
DURATION=${DURATION:-30s} CONNS=${CONNS:-4} RSS_LIMIT_MIB=${RSS_LIMIT_MIB:-4096}
mkdir -p "$OUT"
LH=$OUT/leasehold
(cd "$REPO" && go build -o "$OUT/h2attack" ./test/perf/h2attack)
build_leasehold "$LH"
ATTACKS=${*:-$("$OUT/h2attack" --list)}


cleanup() {
  [ -n "$LHPID" ] && stop_leasehold
  "$KIT/stop.sh" >/dev/null 2>&1 || true
}
trap cleanup EXIT

run() { # system attack
  local sys=$1 attack=$2
  "start_$sys"
  "$OUT/h2attack" --kubeconfig "$KC" --server-pid "$PIDS" --attacks "$attack" \
    --duration "$DURATION" --conns "$CONNS" --rss-limit-mib "$RSS_LIMIT_MIB" >"$OUT/$sys-$attack.log" 2>"$OUT/$sys-$attack.err" || true
  "stop_$sys"
}

read -ra systems <<<"${SYSTEMS:-leasehold kas}"
i=0
for a in $ATTACKS; do
  if [ $((i % 2)) = 0 ]; then
    for sys in "${systems[@]}"; do run "$sys" "$a"; done
  else
    for ((j = ${#systems[@]} - 1; j >= 0; j--)); do run "${systems[j]}" "$a"; done
  fi
  i=$((i + 1))
  echo "== $a"
  for sys in "${systems[@]}"; do
    { grep -E "^(attack|$a) " "$OUT/$sys-$a.log" || tail -3 "$OUT/$sys-$a.err"; grep -E "^# ([0-9]+ connections|$a:)" "$OUT/$sys-$a.log" || true; } | sed "s/^/   $sys: /"
  done
done

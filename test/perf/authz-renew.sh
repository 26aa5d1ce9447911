#!/bin/bash
# The cost of authorization and of the audit log on lease renewals:
# `leasehold bench renew` (1000 leases, 32 clients, 20 s) as a token user
# outside system:masters, bound to get and update on leases, against a
# fresh server per run in three configurations, alternating their order
# from round to round as the machine's speed drifts:
#   allow  --authorization-mode=AlwaysAllow
#   rbac   the default (RBAC)
#   audit  RBAC and an audit log at Metadata for everything (both stages)
#
#   test/perf/authz-renew.sh [rounds]     # default 3; about 2 minutes a round
#
# Results (server CPU per renewal, latencies) go to stdout and $OUT
# (default /tmp/leasehold-authz).
set -euo pipefail
ROUNDS=${1:-3}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/test/perf/serve.sh"
OUT=${OUT:-/tmp/leasehold-authz}
mkdir -p "$OUT"
LH=$OUT/leasehold
build_leasehold "$LH"
echo "bench-token,bench,uid-bench" >"$OUT/tokens.csv"
printf 'apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n' >"$OUT/audit-policy.yaml"

run() { # config round
  local cfg=$1 round=$2 dir pid extra=()
  dir=$(mktemp -d "$OUT/data.XXXX")
  case $cfg in
    allow) extra=(--authorization-mode=AlwaysAllow) ;;
    audit) extra=(--audit-log-path "$dir/audit.log" --audit-policy-file "$OUT/audit-policy.yaml") ;;
  esac
  serve_leasehold "$LH" "$dir" --token-auth-file "$OUT/tokens.csv" "${extra[@]}"
  pid=$SERVE_PID
  local kc=$dir/admin.kubeconfig bkc=$dir/bench.kubeconfig
  kubectl --kubeconfig "$kc" create role lease-holder --verb=get,update --resource=leases.coordination.k8s.io >/dev/null
  kubectl --kubeconfig "$kc" create rolebinding lease-holder --role=lease-holder --user=bench >/dev/null
  cp "$kc" "$bkc"
  kubectl --kubeconfig "$bkc" config set-credentials bench --token=bench-token >/dev/null
  kubectl --kubeconfig "$bkc" config set-context "$(kubectl --kubeconfig "$kc" config current-context)" --user=bench >/dev/null
  # The authorizer reads the cache: wait until the binding is seen.
  until kubectl --kubeconfig "$bkc" auth can-i update leases >/dev/null 2>&1; do sleep 0.2; done
  "$LH" bench fill --kubeconfig "$kc" --leases 1000 --clients 32 >/dev/null
  echo "== $cfg, round $round"
  "$LH" bench renew --kubeconfig "$bkc" --leases 1000 --clients 32 --duration 20s --server-pid "$pid" 2>/dev/null | tee "$OUT/$cfg-$round.log" | grep -E 'renews/s;|server:'
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
}
for r in $(seq "$ROUNDS"); do
  case $((r % 3)) in
    1) order="allow rbac audit" ;;
    2) order="rbac audit allow" ;;
    0) order="audit allow rbac" ;;
  esac
  for c in $order; do run "$c" "$r"; done
done

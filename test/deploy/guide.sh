#!/usr/bin/env bash
# guide.sh runs the deployment guide (docs/deployment.md), sections 1 to 6,
# as a reader would: it takes each command block marked <!-- guide:NAME -->
# from docs/deployment.md, in order and as written, runs it in one bash
# shell from the repository root, and after each block checks what the
# guide says happens (check_NAME below). The teardown is the guide's too.
#
# It runs in a network namespace of its own when it can (root, or user
# namespaces), so that the guide's fixed ports clash with nothing else on
# the machine; it needs go, curl, haproxy and socat (Debian: apt install
# haproxy socat curl), and builds kubectl from ./test/kubectl.
#
#   test/deploy/guide.sh            # under a minute once built
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

if [ -z "${GUIDE_NETNS:-}" ]; then
  # Build what the guide builds before leaving the network: modules may
  # have to be fetched.
  echo "--- building leasehold, etcd and kubectl"
  go build -o /dev/null ./cmd/leasehold ./test/etcd
  WORK=$(mktemp -d /tmp/leasehold-guide.XXXXXX)
  mkdir -p "$WORK/bin"
  go build -o "$WORK/bin/kubectl" ./test/kubectl
  export WORK
  if unshare --net true 2>/dev/null; then
    exec unshare --net env GUIDE_NETNS=1 "$0" "$@"
  fi
  echo "guide.sh: no network namespace of our own (needs root or user namespaces): using the machine's loopback" >&2
  GUIDE_NETNS=none
fi
if [ "$GUIDE_NETNS" = 1 ]; then
  ip link set lo up
fi

for tool in go curl haproxy socat; do
  if ! command -v $tool >/dev/null; then
    echo "guide.sh: $tool is not installed (Debian: apt install haproxy socat curl)" >&2
    exit 1
  fi
done
export PATH="$WORK/bin:$PATH"

D=$REPO/cluster
for f in "$D"/*.pid; do
  if [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && [ "$GUIDE_NETNS" = none ]; then
    echo "guide.sh: $f names a running process: the guide is running already; stop it first (section 6)" >&2
    exit 1
  fi
done
rm -rf "$D" "$WORK/blocks"
mkdir -p "$WORK/blocks"

# The blocks: <!-- guide:NAME --> then a ```sh fence.
awk -v dir="$WORK/blocks" '
  /^<!-- guide:[a-z-]+ -->$/ { name = $0; sub(/^<!-- guide:/, "", name); sub(/ -->$/, "", name); want = 1; next }
  want && /^```sh$/ { n++; file = sprintf("%s/%02d-%s.sh", dir, n, name); inblock = 1; want = 0; next }
  inblock && /^```$/ { inblock = 0; close(file); next }
  inblock { print > file }
' docs/deployment.md
expected="etcd leader replicas haproxy rotation clients fail-replica fail-follower fail-leader fail-quorum teardown"
got=$(ls "$WORK/blocks" | sed 's/^[0-9]*-//; s/\.sh$//' | tr '\n' ' ' | sed 's/ $//')
if [ "$got" != "$expected" ]; then
  echo "guide.sh: the guide blocks of docs/deployment.md are: $got" >&2
  echo "guide.sh: expected:                                $expected" >&2
  exit 1
fi

cat > "$WORK/checks.sh" <<'CHECKS'
# Checks, run in the guide's shell after each block: $OUT is the block's
# output. fail ends the run; note records a measurement for the summary.
fail() { echo "CHECK FAILED ($BLOCK): $*" >&2; exit 1; }
note() { echo "$*" >> "$WORK/summary"; echo "  measured: $*"; }
alive() { kill -0 "$(cat "$D/$1.pid")" 2>/dev/null; }
# seconds of bash's `time` output "real 0m9.123s" (the first in $OUT)
real_seconds() { grep -m1 '^real' "$OUT" | sed -E 's/real[[:space:]]+([0-9]+)m([0-9.]+)s/\1 \2/' | awk '{print $1*60+$2}'; }
cacurl() { curl -s --cacert "$D/r0/pki/ca.crt" --cert "$D/r0/pki/admin.crt" --key "$D/r0/pki/admin.key" "$@"; }
rotation() { echo 'show stat' | socat stdio "unix-connect:$D/haproxy.sock" | cut -d, -f2,18,37 | grep '^r' | sort; }
wait_for() { # seconds, description, command...
  local t=$1 what=$2; shift 2
  local end=$((SECONDS + t))
  until "$@"; do
    [ $SECONDS -lt $end ] || fail "not within ${t}s: $what"
    sleep 0.2
  done
}
in_rotation() { [ "$(rotation | grep -c ',UP,')" = "$1" ]; }

check_etcd() {
  for m in e0 e1 e2; do alive $m || fail "etcd $m is not running"; done
  for p in 2379 22379 32379; do
    curl -sf http://127.0.0.1:$p/health | grep -q '"health":"true"' || fail "etcd on $p unhealthy"
  done
}
check_leader() { grep -Eq '^e[012]$' "$OUT" || fail "no leader printed"; }
check_replicas() {
  for r in r0 r1 r2; do
    alive $r || fail "replica $r is not running"
    grep -q 'leasehold is serving' "$D/$r.log" || fail "$r does not serve"
  done
  for p in 6441 6442 6443; do
    [ "$(cacurl -o /dev/null -w '%{http_code}' https://127.0.0.1:$p/readyz)" = 200 ] || fail "replica on $p not ready"
  done
  for r in r1 r2; do cmp -s "$D/r0/pki/ca.crt" "$D/$r/pki/ca.crt" || fail "$r has another CA"; done
  # The modes section 2 states.
  [ "$(stat -c %a "$D/r1/pki/ca.key") $(stat -c %a "$D/r1/pki/admin.key")" = "600 600" ] || fail "keys not 0600"
  [ "$(stat -c %a "$D/r0/pki/ca.crt") $(stat -c %a "$D/r0/pki/admin.crt")" = "644 644" ] || fail "certificates not 0644"
}
check_haproxy() {
  alive haproxy || fail "haproxy is not running"
  wait_for 10 "all three replicas in rotation" in_rotation 3
}
check_rotation() {
  [ "$(grep -c ',UP,L7OK$' "$OUT")" = 3 ] || fail "rotation output: $(cat "$OUT")"
}
check_clients() {
  grep -q '^namespace/demo created' "$OUT" || fail "no namespace"
  grep -q '^lease.coordination.k8s.io/my-lease created' "$OUT" || fail "no lease"
  grep -Eq '^my-lease +alice ' "$OUT" || fail "lease not read from r1"
  grep -q 'replicas/r[012]' "$D/haproxy.log" || fail "haproxy logs nothing"
}
check_fail_replica() {
  local status
  status=$(sed -n 's/^kubectl get -w ended with status //p' "$OUT")
  [ "$status" = 0 ] || fail "kubectl get -w ended with status '$status', the guide says 0"
  ! grep -q '^error' "$OUT" || fail "kubectl get -w said something: the guide says it ends silently"
  note "kubectl get -w on a killed replica: ended with status $status, silently"
  grep -q '^r1,DOWN,' "$OUT" || fail "r1 not out of rotation"
  [ "$(grep -c ',UP,' "$OUT")" = 2 ] || fail "r0 and r2 not in rotation"
  grep -Eq '^my-lease +alice ' "$OUT" || fail "no answer through the load balancer with r1 down"
  grep -q 'Server replicas/r1 is DOWN' "$D/haproxy.log" || fail "haproxy did not log r1 going down"
  alive r1 || fail "r1 not restarted"
  wait_for 10 "r1 back in rotation" in_rotation 3
}
check_fail_follower() {
  grep -q 'lease.coordination.k8s.io/my-lease annotated' "$OUT" || fail "write failed"
  local s; s=$(real_seconds)
  note "write with an etcd follower killed: ${s}s"
  awk -v s="$s" 'BEGIN { exit !(s < 3) }' || fail "write took ${s}s with a follower down"
  wait_for 30 "etcd healthy again" bash -c 'for p in 2379 22379 32379; do curl -sf http://127.0.0.1:$p/health >/dev/null || exit 1; done'
}
check_fail_leader() {
  local line s
  line=$(grep -m1 ' after .* s$' "$OUT")
  s=$(echo "$line" | awk '{print $3}')
  note "write sent 0.2 s after the etcd leader was killed: $line"
  [ "${line%% *}" = 500 ] || fail "write after the leader's death: $line, the guide says 500"
  awk -v s="$s" 'BEGIN { exit !(s > 6.8 && s < 8) }' || fail "500 after ${s}s; the guide says 7 s"
  # etcd adds "possibly due to previous leader failure" only when the
  # member has not heard from the new leader yet when the 7 s run out.
  grep -q 'etcdserver: request timed out' "$D"/r*.log || fail "no replica logged etcd's request timeout"
  [ "$(grep -Ec '^e[012]$' "$OUT")" = 1 ] || fail "no new leader"
  wait_for 30 "etcd healthy again" bash -c 'for p in 2379 22379 32379; do curl -sf http://127.0.0.1:$p/health >/dev/null || exit 1; done'
}
check_fail_quorum() {
  local lines
  lines=$(grep ' after .* s$' "$OUT")
  note "writes without quorum: $(echo $lines)"
  [ "$(echo "$lines" | grep -c '^500 after')" = 2 ] || fail "writes without quorum: $lines, the guide says 500"
  echo "$lines" | awk '{ if ($3 < 6.8 || $3 > 10.5) exit 1 }' || fail "writes without quorum: $lines; the guide says 7 to 10 s"
  grep -q '"name": "my-lease"' "$OUT" || fail "cached read did not answer"
  grep -q 'readyz check failed' "$OUT" || fail "readyz did not fail"
  [ "$(grep -c ',DOWN,' "$OUT")" = 3 ] || fail "not every replica out of rotation: $(grep '^r' "$OUT")"
  grep -q '^closed by the load balancer$' "$OUT" || fail "the load balancer answered with no replica in rotation"
  grep -q 'backend replicas has no server available' "$D/haproxy.log" || fail "haproxy did not log that it had no replica left"
  wait_for 15 "all three replicas back in rotation" in_rotation 3
}
check_teardown() {
  for f in "$D"/*.pid; do
    ! kill -0 "$(cat "$f")" 2>/dev/null || fail "$(basename "$f" .pid) still running"
  done
}
CHECKS

: > "$WORK/summary"
cat > "$WORK/run.sh" <<RUN
# The guide's shell: every block sourced in turn, then its check.
cd "$REPO"
WORK="$WORK"
source "$WORK/checks.sh"
cleanup() {
  # Whatever the guide left running when a check failed.
  for f in "\$D"/*.pid; do [ -f "\$f" ] && kill -9 "\$(cat "\$f")" 2>/dev/null; done
  return 0
}
trap cleanup EXIT
RUN
for block in "$WORK"/blocks/*.sh; do
  name=$(basename "$block" .sh); name=${name#*-}
  cat >> "$WORK/run.sh" <<RUN
BLOCK=$name; OUT="$WORK/$name.out"
echo "=== guide block: $name"
sed 's/^/    /' "$block"
source "$block" > "\$OUT" 2>&1 < /dev/null
sed 's/^/  | /' "\$OUT"
check_${name//-/_}
echo "  ok"
RUN
done

start=$SECONDS
if ! timeout 900 bash "$WORK/run.sh"; then
  echo "--- guide.sh FAILED; logs in $D:" >&2
  for f in "$D"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }; done
  exit 1
fi
echo "--- measurements"
cat "$WORK/summary"
echo "--- the deployment guide (docs/deployment.md) ran from top to bottom in $((SECONDS - start)) s"
echo "guide: 1 passed, 0 failed"
rm -rf "$WORK" "$D"

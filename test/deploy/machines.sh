#!/usr/bin/env bash
# machines.sh follows section 7 of the deployment guide, docs/deployment.md,
# on three machines: three containers booting systemd (systemd-nspawn, each
# this machine's root under its own tmpfs overlay) at 10.0.0.1, .2 and .3 on a bridge in a
# network namespace of this script's own, so no packet leaves it. Each
# block marked <!-- machines:NAME --> runs as written on the machines the
# text says, as root, with three stand-ins: sudo runs its command,
# `ssh HOST CMD` runs CMD on that container, and `apt install etcd-server`
# installs Debian's etcd-server package fetched beforehand (the containers
# have no network to a mirror). HAProxy, as section 3 configures it for
# the three addresses, runs in the namespace as the load balancer. Then it
# checks the cluster through the load balancer, stops a member and a
# replica and starts them again, and tears everything down with the
# guide's commands.
#
# It needs root, systemd-nspawn (Debian's systemd-container), haproxy,
# socat, overlayfs and apt access for one `apt-get download etcd-server`;
# run by hand:
#
#   test/deploy/machines.sh         # about 2 minutes once the package is built
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

if [ -z "${MACHINES_NETNS:-}" ]; then
  for tool in systemd-nspawn nsenter dpkg-deb go haproxy socat apt-get; do
    command -v $tool >/dev/null || { echo "machines.sh: $tool is not installed (Debian: apt install systemd-container haproxy socat)" >&2; exit 1; }
  done
  [ "$(id -u)" = 0 ] || { echo "machines.sh: needs root" >&2; exit 1; }
  WORK=$(mktemp -d /tmp/leasehold-machines.XXXXXX)
  export WORK
  echo "--- building the package and kubectl; fetching etcd-server"
  go run -C tools/deb . -out "$WORK/pkg" >/dev/null
  go build -o "$WORK/kubectl" ./test/kubectl
  (cd "$WORK/pkg" && apt-get download -q etcd-server >/dev/null)
  ls "$WORK/pkg"
  exec unshare --net env MACHINES_NETNS=1 "$0" "$@"
fi

NSPAWN=()
cleanup() {
  set +e
  for p in "${NSPAWN[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${NSPAWN[@]}"; do wait "$p" 2>/dev/null; done
  [ -f "$WORK/haproxy.pid" ] && kill "$(cat "$WORK/haproxy.pid")" 2>/dev/null
  for n in 1 2 3; do
    umount "$WORK/m$n/root" 2>/dev/null
    umount "$WORK/m$n/t" 2>/dev/null
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

ip link set lo up
ip link add lhbr0 type bridge
ip addr add 10.0.0.254/24 dev lhbr0
ip link set lhbr0 up

echo "--- booting three machines"
INIT=()
for n in 1 2 3; do
  m=$WORK/m$n
  mkdir -p "$m/t" "$m/root"
  mount -t tmpfs tmpfs "$m/t"
  mkdir -p "$m/t/upper" "$m/t/work"
  mount -t overlay overlay -o "lowerdir=/,upperdir=$m/t/upper,workdir=$m/t/work" "$m/root"
  rm -f "$m/root/etc/machine-id"
  systemd-machine-id-setup --root="$m/root" >/dev/null 2>&1
  rm -rf "$m/root/var/lib/leasehold" "$m/root/etc/leasehold" "$m/root/var/lib/etcd" "$m/root/etc/default/etcd"
  echo "m$n" > "$m/root/etc/hostname"
  mkdir -p "$m/root/opt/leasehold-test"
  cp "$WORK"/pkg/*.deb "$m/root/opt/leasehold-test/"
  cp "$WORK/kubectl" "$m/root/usr/local/bin/kubectl"
  systemd-nspawn -q -D "$m/root" -b --register=no --keep-unit -M "m$n" --network-bridge=lhbr0 \
    --console=pipe --link-journal=no </dev/null >"$m/boot.log" 2>&1 &
  NSPAWN+=($!)
done
for i in 0 1 2; do
  for _ in $(seq 100); do
    pid=$(pgrep -P "${NSPAWN[$i]}" | head -1 || true)
    [ -n "$pid" ] && break
    sleep 0.1
  done
  [ -n "$pid" ] || { cat "$WORK/m$((i+1))/boot.log"; exit 1; }
  INIT+=("$pid")
done
on() { # machine number, command...: run as root on that machine
  local n=$1; shift
  nsenter -t "${INIT[$((n-1))]}" -a "$@"
}
fail() { echo "CHECK FAILED: $*" >&2; for n in 1 2 3; do on $n journalctl --no-pager -n 15 -u etcd -u 'leasehold*' >&2; done; exit 1; }
for n in 1 2 3; do
  for _ in $(seq 150); do
    case $(on $n systemctl is-system-running 2>/dev/null || true) in running|degraded) break;; esac
    sleep 0.2
  done
  on $n ip addr add 10.0.0.$n/24 dev host0
  on $n ip link set host0 up
done
for n in 1 2 3; do
  for _ in $(seq 50); do on 1 ping -c1 -W1 10.0.0.$n >/dev/null 2>&1 && break; sleep 0.2; done
done
echo "  m1, m2, m3 up at 10.0.0.1-3"

# The guide's blocks.
mkdir -p "$WORK/blocks"
awk -v dir="$WORK/blocks" '
  /^<!-- machines:[a-z-]+ -->$/ { name = $0; sub(/^<!-- machines:/, "", name); sub(/ -->$/, "", name); want = 1; next }
  want && /^```sh$/ { file = dir "/" name ".sh"; inblock = 1; want = 0; next }
  inblock && /^```$/ { inblock = 0; close(file); next }
  inblock { print > file }
' docs/deployment.md
for b in etcd replica first copy others teardown; do
  [ -f "$WORK/blocks/$b.sh" ] || { echo "machines.sh: docs/deployment.md has no <!-- machines:$b --> block" >&2; exit 1; }
done

# The stand-ins, then the block with this machine's N and ADDR.
cat > "$WORK/standins.sh" <<'EOF'
set -e
sudo() { "$@"; }
apt() {
  if [ "$1 $2" = "install etcd-server" ]; then command apt-get install -y -q ./etcd-server_*.deb; return; fi
  command apt "$@" -y -q
}
EOF
# The copy block runs from 10.0.0.1 to the others: here, outside the
# containers, which sees all three: sudo is machine 1, ssh the others.
echo "INIT1=${INIT[0]}; INIT2=${INIT[1]}; INIT3=${INIT[2]}" > "$WORK/standins-copy.sh"
cat >> "$WORK/standins-copy.sh" <<'EOF'
set -e
sudo() { nsenter -t "$INIT1" -a "$@"; }
ssh() {
  local host=$1; shift
  local var=INIT${host##*.}
  nsenter -t "${!var}" -a bash -c 'sudo() { "$@"; }; '"$*"
}
EOF
run_block() { # machine, block
  local n=$1 b=$2
  echo "=== guide section 7, block $b, on 10.0.0.$n"
  sed 's/^/    /' "$WORK/blocks/$b.sh"
  { cat "$WORK/standins.sh"
    echo "cd /opt/leasehold-test; N=$n; ADDR=10.0.0.$n"
    sed "s/^N=1; ADDR=10.0.0.1 /N=$n; ADDR=10.0.0.$n /" "$WORK/blocks/$b.sh"
  } > "$WORK/m$n/root/opt/leasehold-test/$b.sh"
  on "$n" bash /opt/leasehold-test/$b.sh 2>&1 | sed 's/^/  | /'
  return "${PIPESTATUS[0]}"
}
run_copy() {
  echo "=== guide section 7, block copy, on 10.0.0.1"
  sed 's/^/    /' "$WORK/blocks/copy.sh"
  cat "$WORK/standins-copy.sh" "$WORK/blocks/copy.sh" > "$WORK/copy-run.sh"
  bash "$WORK/copy-run.sh" 2>&1 | sed 's/^/  | /'
  return "${PIPESTATUS[0]}"
}

for n in 1 2 3; do run_block $n etcd || fail "etcd block on $n"; done
for _ in $(seq 100); do
  ok=0; for n in 1 2 3; do curl -sf http://10.0.0.$n:2379/health | grep -q '"health":"true"' && ok=$((ok+1)); done
  [ $ok = 3 ] && break; sleep 0.3
done
[ $ok = 3 ] || fail "etcd not healthy on all three"
echo "  ok: etcd healthy on all three: $(curl -s http://10.0.0.1:2379/health)"

for n in 1 2 3; do run_block $n replica || fail "replica block on $n"; done
run_block 1 first || fail "first block"
run_copy || fail "copy block"
for n in 2 3; do run_block $n others || fail "others block on $n"; done
for n in 1 2 3; do
  [ "$(on $n systemctl show -p ActiveState --value leasehold@r$n)" = active ] || fail "leasehold@r$n not active"
  echo "  leasehold@r$n: $(on $n systemctl show -p StatusText --value leasehold@r$n)"
  [ "$(on $n stat -c '%U %a' /var/lib/leasehold/r$n/pki/ca.key)" = "leasehold 600" ] || fail "r$n ca.key: $(on $n stat -c '%U %a' /var/lib/leasehold/r$n/pki/ca.key)"
done
on 1 cat /var/lib/leasehold/r1/pki/ca.crt > "$WORK/ca.crt"
for n in 2 3; do on $n cat /var/lib/leasehold/r$n/pki/ca.crt | cmp -s - "$WORK/ca.crt" || fail "r$n has another CA"; done
echo "  ok: three replicas serving, one CA"

echo "--- the load balancer (section 3's HAProxy, the three machines' addresses)"
on 1 cat /var/lib/leasehold/r1/pki/admin.crt /var/lib/leasehold/r1/pki/admin.key > "$WORK/check.pem"
cat > "$WORK/haproxy.cfg" <<END
global
  log stdout format short local0 info
  stats socket $WORK/haproxy.sock mode 600 level admin
defaults
  mode tcp
  log global
  timeout connect 2s
  timeout client 1h
  timeout server 1h
frontend leasehold
  bind 10.0.0.254:6443
  default_backend replicas
backend replicas
  balance roundrobin
  option redispatch
  retries 2
  option httpchk GET /readyz
  http-check expect status 200
  default-server check check-ssl verify required ca-file $WORK/ca.crt crt $WORK/check.pem inter 1s fall 2 rise 2
  server r1 10.0.0.1:6443
  server r2 10.0.0.2:6443
  server r3 10.0.0.3:6443
END
haproxy -f "$WORK/haproxy.cfg" >> "$WORK/haproxy.log" 2>&1 &
echo $! > "$WORK/haproxy.pid"
rotation() { echo 'show stat' | socat stdio "unix-connect:$WORK/haproxy.sock" 2>/dev/null | cut -d, -f2,18 | grep '^r' | sort | tr '\n' ' '; }
for _ in $(seq 50); do [ "$(rotation)" = "r1,UP r2,UP r3,UP " ] && break; sleep 0.2; done
[ "$(rotation)" = "r1,UP r2,UP r3,UP " ] || fail "rotation: $(rotation)"
echo "  rotation: $(rotation)"

echo "--- clients through the load balancer"
on 1 cat /var/lib/leasehold/r1/admin.kubeconfig > "$WORK/lb.kubeconfig"
export KUBECONFIG=$WORK/lb.kubeconfig
K="$WORK/kubectl --server https://10.0.0.254:6443 --tls-server-name localhost"
$K create namespace demo | sed 's/^/  | /'
$K -n demo create -f - <<END | sed 's/^/  | /'
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: my-lease
spec:
  holderIdentity: alice
  leaseDurationSeconds: 15
END
for n in 1 2 3; do
  $WORK/kubectl --server https://10.0.0.$n:6443 -n demo get lease my-lease -o name | grep -q my-lease || fail "r$n does not see the lease"
done
echo "  ok: written through the load balancer, read from each replica"

echo "--- a member down: systemctl stop etcd on 10.0.0.3"
on 3 systemctl stop etcd
$K -n demo annotate lease my-lease member=down --overwrite | sed 's/^/  | /'
on 3 systemctl start etcd
echo "--- a replica down: systemctl stop leasehold@r2 (graceful)"
on 2 systemctl stop leasehold@r2
[ "$(on 2 systemctl show -p Result --value leasehold@r2)" = success ] || fail "r2 stop"
for _ in $(seq 30); do [ "$(rotation)" = "r1,UP r2,DOWN r3,UP " ] && break; sleep 0.2; done
echo "  rotation: $(rotation)"
[ "$(rotation)" = "r1,UP r2,DOWN r3,UP " ] || fail "r2 not out of rotation"
$K -n demo annotate lease my-lease replica=down --overwrite | sed 's/^/  | /'
on 2 systemctl start leasehold@r2
for _ in $(seq 30); do [ "$(rotation)" = "r1,UP r2,UP r3,UP " ] && break; sleep 0.2; done
[ "$(rotation)" = "r1,UP r2,UP r3,UP " ] || fail "r2 not back: $(rotation)"
echo "  ok: writes went on; r2 back in rotation"

for n in 1 2 3; do run_block $n teardown || fail "teardown on $n"; done
for n in 1 2 3; do
  on $n test -e /var/lib/leasehold && fail "10.0.0.$n: /var/lib/leasehold left after purge"
  on $n systemctl is-active -q etcd && fail "10.0.0.$n: etcd still running"
  echo "  10.0.0.$n: /var/lib/etcd $(on $n test -e /var/lib/etcd && echo kept || echo deleted) by purge"
done
echo "machines: 1 passed, 0 failed"

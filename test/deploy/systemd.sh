#!/usr/bin/env bash
# systemd.sh installs the Debian package in a container that boots systemd
# and runs its units for real: the embedded-store leasehold.service and a
# replica, leasehold@r1.service, on an etcd started beside it. It checks
# what docs/install.md ("Building and installing") and section 7 of
# docs/deployment.md say: Type=notify (active only once serving, with the
# status line), the service user and the data directory's modes, the
# hardening (a read-only system, no capabilities), Restart=on-failure, a
# graceful stop, and remove and purge.
#
# The container is this machine's own root file system under an overlay
# (changes go to a tmpfs and vanish), booted by systemd-nspawn with a
# private network. It needs root, systemd-nspawn (Debian's
# systemd-container package) and overlayfs; run by hand:
#
#   test/deploy/systemd.sh          # about 1 minute after the package is built
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

for tool in systemd-nspawn nsenter dpkg-deb go; do
  command -v $tool >/dev/null || { echo "systemd.sh: $tool is not installed (Debian: apt install systemd-container)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "systemd.sh: needs root (mounts and systemd-nspawn)" >&2; exit 1; }
[ -x /lib/systemd/systemd ] || { echo "systemd.sh: this machine has no systemd to boot (Debian: apt install systemd)" >&2; exit 1; }

WORK=$(mktemp -d /tmp/leasehold-systemd.XXXXXX)
NSPAWN=
cleanup() {
  set +e
  [ -n "$NSPAWN" ] && kill "$NSPAWN" 2>/dev/null && wait "$NSPAWN" 2>/dev/null
  umount "$WORK/root" 2>/dev/null
  umount "$WORK/t" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "--- building the package"
DEB=$(go run -C tools/deb . -out "$WORK")
echo "$DEB"
go build -o "$WORK/etcd" ./test/etcd
go build -o "$WORK/kubectl" ./test/kubectl

echo "--- booting a container"
mkdir -p "$WORK/t" "$WORK/root"
mount -t tmpfs tmpfs "$WORK/t"
mkdir -p "$WORK/t/upper" "$WORK/t/work"
mount -t overlay overlay -o "lowerdir=/,upperdir=$WORK/t/upper,workdir=$WORK/t/work" "$WORK/root"
# A machine of its own: another machine id, no leasehold from before.
rm -f "$WORK/root/etc/machine-id"
systemd-machine-id-setup --root="$WORK/root" >/dev/null
rm -rf "$WORK/root/var/lib/leasehold" "$WORK/root/etc/leasehold"
mkdir -p "$WORK/root/opt/leasehold-test"; cp "$DEB" "$WORK/root/opt/leasehold-test/leasehold.deb"
cp "$WORK/etcd" "$WORK/root/usr/local/bin/etcd-for-test"
cp "$WORK/kubectl" "$WORK/root/usr/local/bin/kubectl"
systemd-nspawn -q -D "$WORK/root" -b --register=no --keep-unit -M leasehold-test \
  --private-network --console=pipe --link-journal=no </dev/null >"$WORK/boot.log" 2>&1 &
NSPAWN=$!
INIT=
for _ in $(seq 100); do
  INIT=$(pgrep -P "$NSPAWN" | head -1 || true)
  [ -n "$INIT" ] && break
  sleep 0.1
done
[ -n "$INIT" ] || { cat "$WORK/boot.log"; echo "systemd.sh: the container did not start" >&2; exit 1; }
in_ct() { nsenter -t "$INIT" -a "$@"; }
ct() { in_ct sh -c "$*"; }
fail() { echo "CHECK FAILED: $*" >&2; ct 'journalctl --no-pager -n 40 -u "leasehold*"' >&2 || true; exit 1; }
show() { in_ct systemctl show -p "$2" --value "$1"; }
for _ in $(seq 100); do
  state=$(in_ct systemctl is-system-running 2>/dev/null || true)
  case $state in running|degraded) break;; esac
  sleep 0.2
done
echo "  systemd $(in_ct systemctl is-system-running) in the container"

echo "--- dpkg -i"
ct 'dpkg -i /opt/leasehold-test/leasehold.deb' | sed 's/^/  | /'
[ "$(ct 'stat -c "%U:%G %a" /var/lib/leasehold')" = "leasehold:leasehold 700" ] || fail "/var/lib/leasehold: $(ct 'stat -c "%U:%G %a" /var/lib/leasehold')"
[ "$(ct 'stat -c "%U:%G %a" /etc/leasehold /etc/leasehold/config.yaml' | tr '\n' ' ')" = "root:leasehold 750 root:leasehold 640 " ] || fail "/etc/leasehold modes"
ct 'getent passwd leasehold' | grep -q ':/var/lib/leasehold:/usr/sbin/nologin$' || fail "no system user"
[ "$(show leasehold.service UnitFileState)" = disabled ] || fail "leasehold.service enabled by the installation"
[ "$(show leasehold.service ActiveState)" = inactive ] || fail "leasehold.service started by the installation"
echo "  ok: user, modes, nothing started"

echo "--- systemctl enable --now leasehold (Type=notify)"
ct 'systemctl enable --now leasehold' 2>&1 | sed 's/^/  | /'
# systemctl start returns once READY=1 arrived: it serves now.
[ "$(show leasehold.service ActiveState)" = active ] || fail "not active"
status=$(show leasehold.service StatusText)
echo "  status: $status"
[[ "$status" == "serving on https://127.0.0.1:6443" ]] || fail "StatusText '$status'"
ct 'kubectl --kubeconfig /var/lib/leasehold/default/admin.kubeconfig get ns' | sed 's/^/  | /'
ct 'kubectl --kubeconfig /var/lib/leasehold/default/admin.kubeconfig get ns default' >/dev/null || fail "kubectl"
pid=$(show leasehold.service MainPID)
[ "$(ct "stat -c %U /proc/$pid")" = leasehold ] || fail "not running as leasehold"
[ "$(ct "grep ^CapEff /proc/$pid/status" | awk '{print $2}')" = 0000000000000000 ] || fail "has capabilities"
[ "$(ct "grep ^NoNewPrivs /proc/$pid/status" | awk '{print $2}')" = 1 ] || fail "NoNewPrivs not set"
# ProtectSystem=strict: the service's view of /etc and /usr is read-only;
# its data directory is writable.
ct "nsenter -t $pid -m sh -c 'touch /etc/leasehold/x' 2>/dev/null" && fail "/etc writable for the service"
ct "nsenter -t $pid -m sh -c 'touch /var/lib/leasehold/default/x && rm /var/lib/leasehold/default/x'" || fail "data directory not writable"
ct 'stat -c "%U %a" /var/lib/leasehold/default/admin.kubeconfig' | grep -qx 'leasehold 600' || fail "admin.kubeconfig mode"
ct 'journalctl --no-pager -u leasehold -o cat' | grep -q '^level=INFO msg="leasehold is serving' || fail "journal: no serving line without time"
echo "  ok: serving as leasehold, no capabilities, read-only system, logs in the journal"

echo "--- Restart=on-failure"
ct "kill -9 $pid"
for _ in $(seq 50); do
  [ "$(show leasehold.service ActiveState)" = active ] && [ "$(show leasehold.service MainPID)" != "$pid" ] && break
  sleep 0.2
done
[ "$(show leasehold.service NRestarts)" = 1 ] || fail "NRestarts $(show leasehold.service NRestarts)"
[ "$(show leasehold.service ActiveState)" = active ] || fail "not restarted"
echo "  ok: restarted after SIGKILL"

echo "--- systemctl stop: graceful"
t0=$(date +%s.%N)
ct 'systemctl stop leasehold'
t1=$(date +%s.%N)
[ "$(show leasehold.service Result)" = success ] || fail "stop: result $(show leasehold.service Result)"
ct 'journalctl --no-pager -u leasehold -o cat' | grep -q 'msg="shutting down"' || fail "no graceful shutdown in the journal"
echo "  ok: stopped in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s, exit status 0"

echo "--- leasehold@r1 on etcd"
ct 'systemd-run -q --unit etcd-for-test /usr/local/bin/etcd-for-test --data-dir /var/tmp/etcd-for-test --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379'
for _ in $(seq 50); do ct 'curl -sf http://127.0.0.1:2379/health' >/dev/null 2>&1 && break; sleep 0.2; done
ct "sed -e 's|/var/lib/leasehold/r0|/var/lib/leasehold/r1|' -e 's|listen: 10.0.0.1:6443|listen: 127.0.0.1:6441|' \
  -e 's|http://10.0.0.[23]:2379|http://127.0.0.1:2379|; s|http://10.0.0.1:2379|http://127.0.0.1:2379|' \
  /usr/share/leasehold/replica.yaml | install -o root -g leasehold -m 0640 /dev/stdin /etc/leasehold/r1.yaml"
ct 'systemctl enable --now leasehold@r1' 2>&1 | sed 's/^/  | /'
[ "$(show leasehold@r1.service ActiveState)" = active ] || fail "leasehold@r1 not active"
echo "  status: $(show leasehold@r1.service StatusText)"
ct 'kubectl --kubeconfig /var/lib/leasehold/r1/admin.kubeconfig create namespace on-etcd' | sed 's/^/  | /'
ct 'systemctl stop etcd-for-test'
echo "  ok"

echo "--- dpkg -r, then --purge"
ct 'systemctl start leasehold'
ct 'dpkg -r leasehold' | sed 's/^/  | /'
for u in leasehold.service leasehold@r1.service; do
  [ "$(show $u ActiveState)" = inactive ] || fail "$u still $(show $u ActiveState) after dpkg -r"
done
ct 'test -d /var/lib/leasehold/default' || fail "dpkg -r deleted the data"
ct 'dpkg --purge leasehold' | sed 's/^/  | /'
ct 'test -e /var/lib/leasehold' && fail "purge left /var/lib/leasehold"
ct 'test -e /etc/leasehold/r1.yaml' || fail "purge deleted the administrator's r1.yaml"
echo "  ok: stopped on remove, data gone on purge, the administrator's files kept"
echo "systemd: 1 passed, 0 failed"

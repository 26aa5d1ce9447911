# Sourced by the perf scripts.
#
# serve_leasehold BIN DIR [serve flags...] starts BIN serve with its data
# in DIR (its log in DIR/log) on a free loopback port, and returns once
# it answers /readyz, with SERVE_PID and SERVE_PORT set. It exits the
# script when the server dies or is not ready within 30 s.
serve_leasehold() {
  local bin=$1 dir=$2
  shift 2
  SERVE_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$bin" serve --data-dir "$dir" --listen "127.0.0.1:$SERVE_PORT" --log-level warn "$@" >"$dir/log" 2>&1 &
  SERVE_PID=$!
  for _ in $(seq 150); do
    [ -f "$dir/admin.kubeconfig" ] && curl -sk "https://127.0.0.1:$SERVE_PORT/readyz" 2>/dev/null | grep -q ok && return 0
    [ -e "/proc/$SERVE_PID" ] || { cat "$dir/log" >&2; exit 1; }
    sleep 0.2
  done
  echo "leasehold in $dir: not ready after 30 s" >&2
  exit 1
}

# build_leasehold DEST builds ./cmd/leasehold of the repository $REPO and
# puts a copy at DEST: a binary the Go linker has just written (through a
# shared mapping) is mapped by its process in larger pieces than a copy of
# it, ~19 MiB more RSS for the same pages used. Then it syncs: the build's
# ~200 MB of dirty pages written back now, not during the first round.
# Build anything else first.
build_leasehold() {
  (cd "$REPO" && go build -o "$1.new" ./cmd/leasehold) && cp "$1.new" "$1" && rm "$1.new"
  sync
}

# peers_kit sets KIT (the peers kit: $PEERS_KIT, default ../shared/peers
# beside the repository $REPO) and PEERS_DIR (where its build.sh put
# kube-apiserver and etcd), and exits the script when they are not built.
peers_kit() {
  KIT=$(cd "${PEERS_KIT:-$REPO/../shared/peers}" && pwd)
  PEERS_DIR=${PEERS_DIR:-$HOME/.cache/leasehold-peers}
  export PEERS_DIR
  [ -x "$PEERS_DIR/bin/kube-apiserver" ] || { echo "no $PEERS_DIR/bin/kube-apiserver: run $KIT/build.sh first" >&2; exit 1; }
}

# start_SYSTEM starts a fresh server for the side-by-side scripts, and
# sets KC (its kubeconfig) and PIDS (comma-separated); stop_SYSTEM ends
# it. leasehold is the binary $LH; kube-apiserver and etcd are the peers
# kit's ($KIT, $PEERS_DIR; the kit's log in $OUT/kas-start.log).
LHPID=""
start_leasehold() {
  LHDIR=$(mktemp -d /tmp/leasehold-perf-data.XXXX)
  serve_leasehold "$LH" "$LHDIR"
  LHPID=$SERVE_PID
  KC=$LHDIR/admin.kubeconfig PIDS=$LHPID
}
stop_leasehold() { kill "$LHPID"; wait "$LHPID" 2>/dev/null || true; LHPID=""; rm -rf "$LHDIR"; }

start_kas() {
  # A fresh etcd and kube-apiserver: the kit's, on an empty etcd.
  # The kit's start.sh can take a process it just forked for dead (its
  # /proc/PID/exe is still bash's on a loaded machine): try again.
  local try
  for try in 1 2 3; do
    "$KIT/stop.sh" >/dev/null
    rm -rf "$PEERS_DIR/etcd-data"
    "$KIT/start.sh" >"$OUT/kas-start.log" && break
    [ "$try" = 3 ] && { cat "$OUT/kas-start.log" >&2; exit 1; }
    sleep 2
  done
  # shellcheck disable=SC1091
  source "$PEERS_DIR/kas.env"
  KC=$PEERS_DIR/admin.kubeconfig PIDS=$KAS_PID,$ETCD_PID
}
stop_kas() { "$KIT/stop.sh" >/dev/null; rm -rf "$PEERS_DIR/etcd-data"; }

# alternate ROUNDS SYSTEM... calls `run SYSTEM ROUND` for each system in
# each round: in the order given in odd rounds, reversed in even ones,
# as the machine's speed drifts.
alternate() {
  local rounds=$1 r i sys
  shift
  local order=("$@")
  for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 0 ]; then
      for ((i = ${#order[@]} - 1; i >= 0; i--)); do run "${order[$i]}" "$r"; done
    else
      for sys in "${order[@]}"; do run "$sys" "$r"; done
    fi
  done
}

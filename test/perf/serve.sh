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

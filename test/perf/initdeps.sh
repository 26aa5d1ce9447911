#!/bin/bash
# What client-go's scheme of every API group costs leasehold's idle RSS.
# Builds two programs that only initialise packages, then report their
# RSS after a collection and 2 s of rest (as test/perf/initrss does):
#
#   all       every package outside the standard library that
#             leasehold's own packages import (and so all they import)
#   noscheme  the same without those that bring
#             k8s.io/client-go/kubernetes/scheme: client-go's typed
#             clients and what uses them (the event recorder, leader
#             election, component-helpers' RBAC reconciliation), and
#             so without the API groups only the scheme imports
#
# The difference is what leasehold would save by writing its own event
# recorder, leader election and RBAC reconciliation instead of standing
# on client-go's and component-helpers'.
#
#   test/perf/initdeps.sh [rounds]    # default 3, the two alternating
set -euo pipefail
ROUNDS=${1:-3}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/leasehold-initdeps}
mkdir -p "$OUT"
# Inside the module, for its go.mod; the go tool's patterns skip names
# starting with an underscore.
WORK=$(mktemp -d "$REPO/_initdeps.XXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$REPO"

# The packages outside the standard library that leasehold's own
# packages in the binary import: blank-imported, they link and initialise
# what the binary does but for leasehold's code.
go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{end}}' ./cmd/leasehold |
  awk '$1 ~ /^github.com\/leasehold\/leasehold/ {for (i = 2; i <= NF; i++) print $i}' |
  grep -v -e '^github.com/leasehold/leasehold' -e '^vendor/' | grep '\.' | sort -u >"$WORK/all.txt"
# Those whose dependencies include the scheme, the scheme itself.
go list -deps -f '{{.ImportPath}}{{range .Deps}} {{.}}{{end}}' ./cmd/leasehold |
  awk '{for (i = 1; i <= NF; i++) if ($i == "k8s.io/client-go/kubernetes/scheme") {print $1; next}}' >"$WORK/scheme.txt"
grep -v -x -F -f "$WORK/scheme.txt" "$WORK/all.txt" >"$WORK/noscheme.txt"

for v in all noscheme; do
  mkdir -p "$WORK/$v"
  {
    echo 'package main'
    echo 'import ('
    echo '"fmt"; "os"; "runtime"; "strings"; "time"'
    sed 's/.*/_ "&"/' "$WORK/$v.txt"
    echo ')'
    cat <<'EOF'
func main() {
	runtime.GC()
	time.Sleep(2 * time.Second)
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "RssAnon") || strings.HasPrefix(l, "RssFile") {
			fmt.Print(strings.Join(strings.Fields(l), " "), "  ")
		}
	}
	fmt.Println()
}
EOF
  } >"$WORK/$v/main.go"
  # Copied after the build, as compare.sh does with leasehold: a binary
  # the linker has just written is mapped in larger pieces.
  go build -o "$OUT/$v.new" "./$(basename "$WORK")/$v" && cp "$OUT/$v.new" "$OUT/$v" && rm "$OUT/$v.new"
  if [ "$v" = noscheme ] && go list -deps "./$(basename "$WORK")/$v" | grep -q -x 'k8s.io/client-go/kubernetes/scheme'; then
    echo "noscheme still links the scheme" >&2
    exit 1
  fi
done
sync
echo "imported: all $(wc -l <"$WORK/all.txt"), noscheme $(wc -l <"$WORK/noscheme.txt"); left out: $(grep -x -F -f "$WORK/scheme.txt" "$WORK/all.txt" | tr '\n' ' ')"
echo "binaries: all $(($(stat -c %s "$OUT/all") / 1048576)) MiB, noscheme $(($(stat -c %s "$OUT/noscheme") / 1048576)) MiB"
for r in $(seq "$ROUNDS"); do
  order="all noscheme"
  [ $((r % 2)) = 0 ] && order="noscheme all"
  for v in $order; do echo "round $r $v: $("$OUT/$v")"; done
done

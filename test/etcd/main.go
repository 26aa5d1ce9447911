// Command etcd is the etcd server, built from the go.etcd.io/etcd/server/v3
// module at the version in go.mod (the same as the client), so that tests
// need nothing installed but Go: internal/testkit/etcdtest builds it with go build.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }

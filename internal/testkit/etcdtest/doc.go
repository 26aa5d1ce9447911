// Package etcdtest starts real etcd server processes for tests: a single
// member or a cluster of several, on free loopback ports, with data in a
// temporary directory and fsync on, as in production. Only tests import it.
//
// # The etcd binary
//
// Binary finds the server to run, in this order:
//
//  1. $LEASEHOLD_ETCD_BINARY, when set;
//  2. a binary built with "go build" from test/etcd, a three-line main of
//     the go.etcd.io/etcd/server/v3 module at the version go.mod pins (the
//     same version as the client), so a fresh machine needs nothing but the
//     Go module proxy. It is built at most once per test binary, into the
//     user cache directory (leasehold/etcd-VERSION-GOVERSION), under a file
//     lock so that test binaries running in parallel build it once; go
//     build leaves an up-to-date binary alone, so later runs take a fraction
//     of a second;
//  3. "etcd" on $PATH (for example Debian's etcd-server package), if the
//     build fails.
//
// Config.TLS serves clients over TLS with client certificates required
// (a CA and certificates generated for the cluster, named in Cluster.TLS),
// for tests of the --etcd-cafile/--etcd-certfile/--etcd-keyfile path.
//
// # Readiness and faults
//
// Start waits until every member answers GET /health with "true" (which
// needs a leader and a working quorum read), polling with a deadline, and
// fails early with the member's log if a process exits. Members can be
// killed (SIGKILL), stopped (SIGTERM), restarted on their data directory,
// and the leader found, for fault tests. Each cluster gets a random
// --initial-cluster-token so that clusters of tests running in parallel
// never join each other, and a start that loses a port to another process
// is retried on fresh ports.
//
// # Processes
//
// On Linux every member is started with PR_SET_PDEATHSIG, from a goroutine
// locked to its OS thread for the life of the process, so that a test
// binary that dies (a panic, a timeout, SIGKILL) takes its etcd processes
// with it. Start stops its cluster in t.Cleanup and, when the test failed,
// logs the end of each member's log.
//
// Shared starts one single-member etcd for the whole test binary, for
// packages that start many servers and separate them by key prefix. It is
// never stopped explicitly: it dies with the test process, and its data
// directory is removed by a later test binary when it finds the owner gone.
package etcdtest

// Package lock runs a command only while holding a coordination.k8s.io/v1
// Lease (Run, behind `leasehold lock`), and campaigns for or watches a
// Lease's leadership (Elect, behind `leasehold elect`). Both are clients of
// the Lease API and work against any Kubernetes API server.
//
// The election itself is client-go's leaderelection.LeaderElector with
// ReleaseOnCancel; this package adds what a supervisor of a child process
// needs, through the resourcelock.Interface the elector is given
// (fencedLock, fenced.go):
//
//   - A fencing token: the lease's spec.leaseTransitions as written by the
//     acquiring update. client-go adds one to it only when the holder
//     identity changes, so every Run uses an identity of its own
//     (NewIdentity), and fencedLock makes sure that every acquisition
//     writes a value larger than any this process has seen (also when
//     client-go takes over its own identity's record, and when the lease
//     was deleted and is created again). With every writer of the lease
//     following these rules and the server's updates being compare-and-swap
//     on resourceVersion, the tokens of successive acquisitions strictly
//     increase. docs/lock.md ("The fencing token") states the guarantee
//     and what breaks it.
//   - Loss detection at once: a read that shows another holder, or no
//     lease, while this process leads.
//   - No release while the command may still run: client-go releases the
//     lease also when renewing failed past the renew deadline, while the
//     command still runs; fencedLock refuses that release (the lease then
//     expires as if the process had died), and refuses to clear a record
//     that names another holder.
//   - The time of the last successful renewal, from which the supervisor
//     computes when other clients may first see the lease expired; the
//     command's process group is killed before then.
//
// # Concurrency
//
// Run's supervisor is one goroutine (the caller's) selecting on the
// command's exit, the elector's callbacks, fencedLock's loss channel,
// signals and timers. The elector runs in one goroutine owned by the
// supervisor, which always waits for it (and so for the release) before
// returning. The command is started and waited for in a goroutine of its
// own that holds its OS thread (see child.go and dieWithParent). fencedLock's
// mutex guards its state; it is never held during a request.
//
// # The command's process group
//
// On Linux, with Config.Guard, the command runs in the process group of a
// guard: the leasehold binary run again as a small process that waits on a
// pipe only Run holds open, and kills its whole group with SIGKILL when
// the pipe ends, which the kernel does when Run's process dies, of
// SIGKILL too (guard_linux.go). Descendants that leave the group (setsid,
// setpgid) are not covered; a cgroup would be needed for those. Elsewhere
// only the command's own signals are managed, and a killed leasehold lock
// leaves its command running.
package lock

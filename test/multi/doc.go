// Package multi runs several leasehold replicas on one real three-member
// etcd cluster and breaks things while clients use them: it kills an etcd
// follower, the etcd leader, a replica in-process, and a real replica
// process with SIGKILL, and restarts each.
//
// # Deployment
//
// Each test starts its own etcd cluster (internal/testkit/etcdtest, real etcd
// processes on loopback ports) and three replicas, each with its own data
// directory and listen address, all sharing one CA and the admin client
// certificate: the first replica generates them, and the others' pki
// directories get copies of ca.{crt,key} and admin.{crt,key} before they
// start. So every replica's serving certificate chains to the same CA, and
// one admin.kubeconfig works against every replica with only its server
// URL changed, which is how the clients here are built. Compaction is off,
// so etcd keeps the whole history the checks read back.
//
// # Load
//
// While the faults happen:
//
//   - Leader elections: several Leases, each contended by client-go
//     leaderelection candidates spread over the replicas, with different
//     lease durations. Every Lease call of every candidate is timed.
//   - A renew load: writers own leases and update them with their last
//     resourceVersion, as holders do, each write carrying a sequence number.
//   - A linearizability workload: clients on every replica issue Get,
//     resourceVersion compare-and-swap Update and unconditional merge Patch
//     on a few leases, each as one HTTP request (no client retries), and
//     record call and return times and outcomes.
//   - An informer on every replica, and one through a TCP load balancer in
//     front of all of them.
//   - Meters: a direct etcd writer measuring etcd's own outages, and a
//     stall detector measuring when the test process itself did not run on
//     time (under -race on a loaded machine, for seconds).
//
// # Checks
//
//   - No acknowledged write lost: every acknowledged renew is in etcd's
//     history at the resourceVersion it was acknowledged with, each lease's
//     writes are stored in the order they were sent, and each lease ends at
//     its last acknowledged write or at a later one that was sent.
//   - Never two leaders, from the Lease history: a new holder's acquireTime
//     is at least the lease duration after the expired record could first
//     be observed. client-go compares records as JSON with times to the
//     second, so a follower's clock for the lease starts when the
//     renewTime's second last changed, which can be up to a second before
//     the last renewal.
//   - Never two leaders, from the candidates' OnStartedLeading and
//     OnStoppedLeading: terms do not overlap, unless the old leader's own
//     client broke client-go's assumptions (its process stalled past its
//     renew deadline, or its last renewal took longer than client-go's
//     margin), which client-go cannot prevent and the test reports.
//   - Each failover within its bound: client-go followers poll every
//     retryPeriod*[1, 1+JitterFactor] after their previous attempt ended
//     and count the lease duration from when they observed the last
//     renewal, so a new leader acquires at most leaseDuration +
//     2*(1+JitterFactor)*retryPeriod after the old leader's last renewTime,
//     plus the latencies of the calls in that chain, plus one poll and call
//     for each of the new leader's calls that failed meanwhile, plus the
//     time the test process stalled (see failoverBound).
//   - Linearizability: the recorded history, checked with porcupine against
//     a register per lease with resourceVersion compare-and-swap; an outcome
//     the client cannot know (a timeout, a 5xx, a cut connection) may or may
//     not have taken effect, at any time after its call. The same history
//     with one read made stale must be rejected.
//   - Informers stay in sync: after the load stops, every informer's store
//     equals a fresh list, and no informer saw a lease's resourceVersion
//     go backwards. (A killed replica's informer is dropped, since
//     client-go backs off reconnecting to a dead server, and a new one
//     started when the replica is back.)
//   - Every replica's consistent list equals etcd's final state.
//   - Watches agree across replicas: watchers on every replica see the same
//     events in the same order, revisions strictly increasing, exactly the
//     writes etcd's history holds.
//
// # Coordinated leader election
//
// TestCoordinatedLeaderElection runs the scenarios of
// internal/testkit/electiontest with client-go candidates
// spread over three replicas, kills the replica running the election
// controller between them, and checks from the replicas' logs that the
// controller ran in one replica at a time and made every write there.
//
// # leasehold lock
//
// TestLockReplicaLoss runs `leasehold lock` processes through balancers in
// front of three replica processes and SIGKILLs the replica under a
// long-running holder: commands never overlap, and fencing tokens strictly
// increase.
package multi

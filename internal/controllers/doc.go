// Package controllers runs the logic that acts on stored objects over
// time, beside the registry: finishing the deletion of namespaces,
// coordinated leader election, and the next kinds' lifecycles (an event's
// time to live, RBAC role aggregation). Each controller lives in its
// own sub-package and uses the registry's verbs and watches as any client
// would; it never reaches into the watch cache or the store.
//
// A Runner starts the controllers. One marked Singleton acts in one
// replica at a time: with several replicas on etcd it runs only while its
// replica holds the Lease kube-system/leasehold-NAME, elected with
// client-go's leaderelection over the registry (lock.go), as
// kube-controller-manager's controllers are; on the embedded engine, where
// one server owns the store, it simply runs. A singleton stops before its
// replica releases the Lease, so that it never runs in two replicas at
// once (client-go itself releases first, then cancels the leader's
// context).
package controllers

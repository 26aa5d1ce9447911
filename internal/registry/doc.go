// Package registry implements the API verbs once for every kind: create,
// get, list, watch, update, patch (JSON patch, merge patch, strategic
// merge patch, server-side apply), delete and deletecollection, with
// kube-apiserver's generic object rules (uid, creationTimestamp,
// resourceVersion, generation, generateName, managedFields, finalizers,
// preconditions, dryRun). Each kind's particulars come from its
// resources.Kind description; the admission chain runs on every write.
//
// The registry owns reads and watches end to end: it serves them from one
// watch cache per kind (internal/watchcache), which it fills from the
// store, and hands out objects with their encoding memos (codec.Cached)
// and watch events already filtered and, through a codec.WatchEncoder,
// encoded. Writes go to storage.Interface.
//
// Objects cross its API in two versions: what a client sent (create and
// update bodies) is of the request's version; everything the registry
// returns is of the kind's storage version, and the codec converts it to
// the request's when it encodes the answer.
//
// Errors are Kubernetes API errors (k8s.io/apimachinery/pkg/api/errors),
// ready to be written as a Status.
//
// Files: registry.go (the kinds, their caches and keys), read.go (get,
// list, selectors, continue tokens), watch.go, write.go (create, update
// and the retry loop of every write), patch.go, delete.go,
// fieldmanager.go (managedFields and apply), reader.go (what admission
// reads), errors.go (storage errors as API errors).
package registry

// Package registry implements the API verbs once for every resource:
// create, get, list, update, delete and deletecollection (and, later,
// patch and watch), with kube-apiserver's generic object rules (uid,
// creationTimestamp, resourceVersion, generation, generateName,
// finalizers, preconditions, dryRun). Each resource's particulars come from
// its resources.Resource description.
//
// Writes go to storage.Interface; reads are served from the watch cache.
// Errors are Kubernetes API errors (k8s.io/apimachinery/pkg/api/errors),
// ready to be written as a Status.
package registry

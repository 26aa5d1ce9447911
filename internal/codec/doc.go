// Package codec turns API objects into bytes and back: content negotiation
// (Accept and Content-Type, as kube-apiserver negotiates them), the JSON,
// YAML and protobuf wire formats, and the storage encoding.
//
// Objects are the versioned k8s.io/api types; leasehold serves one version
// per resource, so there is no conversion, only serialisation.
package codec

// Package audit writes kube-apiserver's audit log: one audit.k8s.io/v1
// Event per line, as JSON, for the requests an audit policy
// (kube-apiserver's --audit-policy-file format) selects, at its levels
// (None, Metadata, Request, RequestResponse) and stages (RequestReceived,
// ResponseStarted for watches, ResponseComplete, Panic), in a file
// rotated by size (--audit-log-path, --audit-log-maxsize,
// --audit-log-maxbackup, --audit-log-maxage).
//
// It takes only types, their codec and their validation from
// k8s.io/apiserver (pkg/apis/audit and its v1, install and validation
// packages, which need nothing but k8s.io/api and apimachinery), not its
// audit machinery (pkg/audit and the endpoint filters, which bring
// apiserver's request context, metrics and handler chain): the policy
// file is read and validated exactly as kube-apiserver reads it, and the
// events are its Go type, while the rule matching, the event's life along
// the request and the writing are ours (policy.go, record.go, sink.go).
//
// Writing never holds up a request. Each event is encoded (encode.go,
// byte for byte what kube-apiserver's JSON encoder writes) in the
// request's goroutine and appended to a bounded buffer; one goroutine
// writes the buffer to the file. When the file is not written fast enough
// (a slow or full disk) and the buffer is full, new events are dropped,
// never the request, and a log line every 10 s counts what was dropped;
// events a failed write loses are counted too.
package audit

package httpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/audit"
	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources"
)

// The audit log's view of a request (package audit): the chain begins
// the record after authentication (serveAuthenticated) and writes its
// last stage when the handler is done; auditWriter catches the status
// code; the handlers add the request's object as they decode it and the
// response's as they write it. Each is a no-op when the request is not
// audited.

// auditWriter records the status code of the response once, as
// kube-apiserver's auditResponseWriter does.
type auditWriter struct {
	http.ResponseWriter
	rec *audit.Record
}

func (a *auditWriter) WriteHeader(code int) {
	a.rec.ResponseStarted(code)
	a.ResponseWriter.WriteHeader(code)
}

func (a *auditWriter) Write(b []byte) (int, error) {
	a.rec.ResponseStarted(http.StatusOK)
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (Flush and the
// deadlines of watches).
func (a *auditWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// Hijack fakes the switch of protocols, as kube-apiserver does, when the
// connection is taken over.
func (a *auditWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	a.rec.ResponseStarted(http.StatusSwitchingProtocols)
	return http.NewResponseController(a.ResponseWriter).Hijack()
}

// auditRequestObject records a decoded request body of res: its metadata
// in the object reference, and, at level Request, its JSON.
func (s *Server) auditRequestObject(req *http.Request, obj resources.Object) {
	rec := audit.RecordFrom(req.Context())
	if rec == nil {
		return
	}
	rec.RequestObject(obj, func() ([]byte, error) {
		if rec.OmitManagedFields() && len(obj.GetManagedFields()) > 0 {
			c := obj.DeepCopyObject().(resources.Object)
			c.SetManagedFields(nil)
			obj = c
		}
		return s.encodeJSON(obj)
	})
}

// auditDeleteOptions records a delete's options at level Request. As
// kube-apiserver, the apiVersion recorded is meta.k8s.io/__internal (it
// encodes the internal type).
func (s *Server) auditDeleteOptions(req *http.Request, opts *metav1.DeleteOptions) {
	rec := audit.RecordFrom(req.Context())
	if !rec.Records(auditv1.LevelRequest) {
		return
	}
	rec.RequestObject(nil, func() ([]byte, error) {
		o := *opts
		o.TypeMeta = metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "meta.k8s.io/__internal"}
		return json.Marshal(&o)
	})
}

// auditResponse records a response body: a Status's fields at every
// level, and the JSON of the object at level RequestResponse.
func (s *Server) auditResponse(req *http.Request, obj runtime.Object, encode func() ([]byte, error)) {
	rec := audit.RecordFrom(req.Context())
	if rec == nil {
		return
	}
	st, _ := obj.(*metav1.Status)
	rec.ResponseObject(st, encode)
}

// encodeJSON encodes obj in compact JSON with its apiVersion and kind.
func (s *Server) encodeJSON(obj runtime.Object) ([]byte, error) {
	var b bytes.Buffer
	err := s.codecs.Encode(&b, s.codecs.AsJSON(codec.Output{}), obj)
	return b.Bytes(), err
}

// auditPatch records a patch at level Request; an apply patch (YAML) is
// recorded as JSON, so that the event stays JSON (kube-apiserver records
// the bytes as they came, and fails to encode an event with YAML in it).
func (s *Server) auditPatch(req *http.Request, pt types.PatchType, patch []byte) {
	rec := audit.RecordFrom(req.Context())
	if !rec.Records(auditv1.LevelRequest) {
		return
	}
	if pt == types.ApplyYAMLPatchType {
		if j, err := yaml.YAMLToJSON(patch); err == nil {
			patch = j
		}
	}
	rec.RequestPatch(patch)
}

// isJSON reports whether a response's body is already what the audit log
// records: compact JSON.
func isJSON(out codec.Output) bool { return out.Info.MediaType == codec.JSON && !out.Pretty }

// auditObject is obj as the audit log records it: without managedFields
// when the policy says so.
func (s *Server) auditObject(req *http.Request, obj codec.Cached) codec.Cached {
	if !audit.RecordFrom(req.Context()).OmitManagedFields() {
		return obj
	}
	o := obj.Object()
	if len(o.GetManagedFields()) == 0 {
		return obj
	}
	c := o.DeepCopyObject().(resources.Object)
	c.SetManagedFields(nil)
	return codec.Cached{Obj: c}
}

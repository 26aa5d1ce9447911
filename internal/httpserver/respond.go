package httpserver

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/leasehold/leasehold/internal/auth"
	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

// writeObject writes obj with the given status code in the negotiated
// format.
func (s *Server) writeObject(w http.ResponseWriter, req *http.Request, out codec.Output, code int, obj runtime.Object) {
	var buf bytes.Buffer
	if err := s.codecs.Encode(&buf, out, obj); err != nil {
		s.writeError(w, req, apierrors.NewInternalError(err))
		return
	}
	s.auditResponse(req, obj, func() ([]byte, error) { return s.encodeJSON(obj) })
	setContentType(w.Header(), out.MediaType())
	writeBody(w, req, code, codec.Bytes(buf.Bytes()))
}

// writeError writes err as a Status in a format the client accepts. Errors
// that are not API errors become 500s; their detail is logged, and only
// kube-apiserver's generic wording reaches the client.
func (s *Server) writeError(w http.ResponseWriter, req *http.Request, err error) {
	status := s.errorStatus(req, err)
	out, nerr := s.codecs.Negotiate(req, codec.Target{})
	if nerr != nil {
		// The client accepts nothing we speak; answer in JSON anyway.
		out, _ = s.codecs.Negotiate(&http.Request{Header: http.Header{}, URL: req.URL}, codec.Target{})
	}
	if status.Details != nil && status.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(status.Details.RetryAfterSeconds)))
	}
	s.writeObject(w, req, out, int(status.Code), status)
}

// errorStatus returns the Status for err, as kube-apiserver's
// ErrorToAPIStatus does.
func (s *Server) errorStatus(req *http.Request, err error) *metav1.Status {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		st := status.Status()
		if st.Status == "" {
			st.Status = metav1.StatusFailure
		}
		if st.Code == 0 {
			st.Code = http.StatusInternalServerError
		}
		return &st
	}
	if errors.Is(err, context.Canceled) {
		// The client went away; the answer is never read.
		return &metav1.Status{Status: metav1.StatusFailure, Code: 499, Message: "client closed request"}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The request's deadline passed (deadline.go), in the words of
		// the filter or handler of kube-apiserver that would have seen it.
		a, _ := auth.RequestFrom(req.Context())
		st := timeoutError(a).ErrStatus
		return &st
	}
	s.log.Error("internal error", "method", req.Method, "path", req.URL.Path, "err", err)
	return &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonUnknown,
		Message: err.Error(),
	}
}

// addWarnings adds a Warning header per text, as kube-apiserver's warning
// recorder formats and caps them.
func addWarnings(w http.ResponseWriter, warnings []string) {
	for _, h := range warningHeaders(warnings) {
		w.Header().Add("Warning", h)
	}
}

// kube-apiserver's caps on Warning headers: a request can cause any number
// of warnings (one per unknown field, say), but clients and proxies limit
// header sizes.
const (
	warningTotalRunes = 4 * 1024
	warningItemRunes  = 256
)

// warningHeaders returns the Warning header values kube-apiserver's
// recorder would send for warnings, in order: each text once, none that
// cannot be a header (invalid UTF-8, control characters) nor counted;
// once the texts pass warningTotalRunes, every text so far and after is
// cut to warningItemRunes, and those arriving when the cut texts already
// fill warningTotalRunes are dropped.
func warningHeaders(warnings []string) []string {
	var texts []string
	seen := map[string]bool{}
	written, truncating := 0, false
	for _, text := range warnings {
		if text == "" || seen[text] || truncating && written >= warningTotalRunes {
			continue
		}
		seen[text] = true
		if truncating {
			text = cutRunes(text, warningItemRunes)
		}
		if _, err := utilnet.NewWarningHeader(299, "-", text); err != nil {
			continue
		}
		n := utf8.RuneCountInString(text)
		if truncating || written+n <= warningTotalRunes {
			texts = append(texts, text)
			written += n
			continue
		}
		// Over the limit: from now on cut, and cut what came before.
		truncating, written = true, 0
		texts = append(texts, text)
		for i := range texts {
			texts[i] = cutRunes(texts[i], warningItemRunes)
			written += utf8.RuneCountInString(texts[i])
		}
	}
	headers := make([]string, len(texts))
	for i, text := range texts {
		// Valid: checked whole, and cutting on a rune keeps it so.
		headers[i], _ = utilnet.NewWarningHeader(299, "-", text)
	}
	return headers
}

func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// methodNotAllowed is the 405 answer for a method a path does not serve.
func methodNotAllowed() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusMethodNotAllowed,
		Reason:  metav1.StatusReasonMethodNotAllowed,
		Message: "the server does not allow this method on the requested resource",
		Details: &metav1.StatusDetails{},
	}}
}

// notFoundPath is the 404 for a path that names nothing.
func notFoundPath() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Message: "the server could not find the requested resource",
		Details: &metav1.StatusDetails{},
	}}
}

// writeResult writes one object of res (storage version) in the
// negotiated output, transformed to a Table or PartialObjectMetadata when
// the client asked for it.
func (s *Server) writeResult(w http.ResponseWriter, req *http.Request, call *request, out codec.Output, res resources.Resource, code int, obj codec.Cached) error {
	if err := tableOptions(call, out); err != nil {
		return err
	}
	body, err := s.codecs.EncodeObject(out, res, obj)
	if err != nil {
		return err
	}
	s.auditResponse(req, nil, func() ([]byte, error) {
		if isJSON(out) {
			return body, nil
		}
		return s.codecs.EncodeObject(s.codecs.AsJSON(out), res, s.auditObject(req, obj))
	})
	setContentType(w.Header(), out.MediaType())
	writeBody(w, req, code, codec.Bytes(body))
	return nil
}

// writeList writes a list result as the kind's list, a Table or a
// PartialObjectMetadataList.
func (s *Server) writeList(w http.ResponseWriter, req *http.Request, call *request, out codec.Output, res resources.Resource, result *registry.ListResult) error {
	if err := tableOptions(call, out); err != nil {
		return err
	}
	body, err := s.codecs.EncodeList(out, res, result.Items, result.ListMeta())
	if err != nil {
		return err
	}
	s.auditResponse(req, nil, func() ([]byte, error) {
		if isJSON(out) {
			return body.AppendTo(nil), nil
		}
		items := make([]codec.Cached, len(result.Items))
		for i, o := range result.Items {
			items[i] = s.auditObject(req, o)
		}
		b, err := s.codecs.EncodeList(s.codecs.AsJSON(out), res, items, result.ListMeta())
		if err != nil {
			return nil, err
		}
		return b.AppendTo(nil), nil
	})
	setContentType(w.Header(), out.MediaType())
	writeBody(w, req, http.StatusOK, body)
	return nil
}

// tableOptions reads the request's table options into a Table output, as
// kube-apiserver does once it has the object to answer with.
func tableOptions(call *request, out codec.Output) error {
	if t := out.Transform; t != nil && t.Kind == "Table" {
		opts, err := codec.TableOptions(call.query)
		if err != nil {
			return err
		}
		t.Table = opts
	}
	return nil
}

// contentTypes are the values of the Content-Type headers of answers in
// the media types objects are served in, shared (see cacheControl).
var contentTypes = map[string][]string{
	codec.JSON:     {codec.JSON},
	codec.YAML:     {codec.YAML},
	codec.Protobuf: {codec.Protobuf},
}

// setContentType sets h's Content-Type to mediaType.
func setContentType(h http.Header, mediaType string) {
	if v, ok := contentTypes[mediaType]; ok {
		h["Content-Type"] = v
		return
	}
	h.Set("Content-Type", mediaType)
}

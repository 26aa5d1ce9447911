package httpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

func (s *Server) get(w http.ResponseWriter, req *http.Request, res resources.Resource, call *request) error {
	out, err := s.codecs.Negotiate(req, target(res, false))
	if err != nil {
		return err
	}
	var opts metav1.GetOptions
	if err := decodeParams(call.query, &opts); err != nil {
		return err
	}
	obj, err := s.reg.Get(req.Context(), res, call.namespace(), call.name(), opts.ResourceVersion)
	if err != nil {
		return err
	}
	return s.writeResult(w, req, call, out, res, http.StatusOK, obj)
}

func (s *Server) list(w http.ResponseWriter, req *http.Request, res resources.Resource, call *request) error {
	out, err := s.codecs.Negotiate(req, target(res, true))
	if err != nil {
		return err
	}
	opts, err := listOptions(call.query)
	if err != nil {
		return err
	}
	result, err := s.reg.List(req.Context(), res, call.namespace(), opts)
	if err != nil {
		return err
	}
	return s.writeList(w, req, call, out, res, result)
}

// target is what a resource's endpoints answer: transforms, and protobuf
// only for kinds whose types have it.
func target(res resources.Resource, list bool) codec.Target {
	return codec.Target{Transforms: true, List: list, NoProtobuf: !res.Protobuf()}
}

// listOptions decodes and validates list parameters as kube-apiserver
// does: 400 for what does not parse, 422 for invalid combinations.
func listOptions(query url.Values) (*metainternalversion.ListOptions, error) {
	opts := &metainternalversion.ListOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(query, metav1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if errs := metainternalversionvalidation.ValidateListOptions(opts, true); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	return opts, nil
}

// decodeParams decodes a request's query parameters into options, which
// must be zero: an empty query leaves them so.
func decodeParams(query url.Values, into runtime.Object) error {
	if len(query) == 0 {
		return nil // into keeps its zero value, as decoding nothing leaves it
	}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(query, metav1.SchemeGroupVersion, into); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	return nil
}

// decodeWriteOptions decodes a create's or an update's options (kind)
// from query into opts and validates them. Their zero value, which an
// empty query leaves, is valid (TestEmptyQueryOptions): a request
// without parameters, most writes, skips both.
func decodeWriteOptions(query url.Values, opts runtime.Object, kind string, validate func() field.ErrorList) error {
	if len(query) == 0 {
		return nil
	}
	if err := decodeParams(query, opts); err != nil {
		return err
	}
	if errs := validate(); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	return nil
}

func (s *Server) create(w http.ResponseWriter, req *http.Request, res resources.Resource, call *request) error {
	out, err := s.codecs.Negotiate(req, target(res, false))
	if err != nil {
		return err
	}
	var opts metav1.CreateOptions
	if err := decodeWriteOptions(call.query, &opts, "CreateOptions", func() field.ErrorList { return metav1validation.ValidateCreateOptions(&opts) }); err != nil {
		return err
	}
	in, err := s.decodeBody(req, res, opts.FieldValidation)
	if err != nil {
		return err
	}
	defer in.release()
	result, err := s.reg.Create(req.Context(), res, call.namespace(), in.obj, registry.WriteOptions{
		DryRun: len(opts.DryRun) > 0, Manager: managerOrUserAgent(opts.FieldManager, req.UserAgent())})
	addWarnings(w, append(in.warnings, result.Warnings...))
	if err != nil {
		return err
	}
	return s.writeResult(w, req, call, out, res, http.StatusCreated, codec.Cached{Obj: result.Object})
}

func (s *Server) update(w http.ResponseWriter, req *http.Request, res resources.Resource, call *request) error {
	out, err := s.codecs.Negotiate(req, target(res, false))
	if err != nil {
		return err
	}
	var opts metav1.UpdateOptions
	if err := decodeWriteOptions(call.query, &opts, "UpdateOptions", func() field.ErrorList { return metav1validation.ValidateUpdateOptions(&opts) }); err != nil {
		return err
	}
	in, err := s.decodeBody(req, res, opts.FieldValidation)
	if err != nil {
		return err
	}
	defer in.release()
	result, err := s.reg.Update(req.Context(), res, call.namespace(), call.name(), call.attrs.Subresource, in.obj, registry.WriteOptions{
		DryRun: len(opts.DryRun) > 0, Manager: managerOrUserAgent(opts.FieldManager, req.UserAgent()), Again: in.again})
	addWarnings(w, append(in.warnings, result.Warnings...))
	if err != nil {
		return err
	}
	return s.writeWriteResult(w, req, call, out, res, result)
}

// writeWriteResult answers an update or a patch: 201 when it created the
// object, 200 otherwise.
func (s *Server) writeWriteResult(w http.ResponseWriter, req *http.Request, call *request, out codec.Output, res resources.Resource, result registry.WriteResult) error {
	code := http.StatusOK
	if result.Created {
		code = http.StatusCreated
	}
	return s.writeResult(w, req, call, out, res, code, codec.Cached{Obj: result.Object})
}

// decoded is a create or update body, decoded.
type decoded struct {
	obj resources.Object
	// warnings are the unknown or duplicate fields of fieldValidation=Warn.
	warnings []string
	// again decodes the body once more: the object as it came, for an
	// update's retry once its first attempt has consumed obj.
	again func() (resources.Object, error)
	// buf holds the body, from bodyBuffers.
	buf *[]byte
}

// bodyBuffers recycles the buffers of create and update bodies: decoding
// copies what the object keeps, so a body is garbage once the write that
// may decode it again is done. Bodies past maxPooledBody are not kept.
var bodyBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBody = 64 << 10

// release gives the body's buffer back once nothing decodes it any more
// (after the registry's write, whose retries may).
func (d *decoded) release() {
	if d.buf != nil && cap(*d.buf) <= maxPooledBody {
		*d.buf = (*d.buf)[:0]
		bodyBuffers.Put(d.buf)
	}
	d.buf = nil
}

// decodeBody reads and decodes a create or update body: size limit, media
// type, strict or lenient decoding per fieldValidation, apiVersion and kind
// checks, and the version's defaults.
func (s *Server) decodeBody(req *http.Request, res resources.Resource, fieldValidation string) (decoded, error) {
	info, err := s.codecs.InputSerializer(req.Header.Get("Content-Type"))
	if err != nil {
		return decoded{}, err
	}
	if info.MediaType == codec.Protobuf && !res.Protobuf() {
		return decoded{}, codec.UnsupportedMediaType([]string{codec.JSON, codec.YAML})
	}
	buf := bodyBuffers.Get().(*[]byte)
	body, err := s.readBodyInto(*buf, req)
	if err != nil {
		return decoded{}, err
	}
	*buf = body
	if fieldValidation == "" {
		fieldValidation = metav1.FieldValidationWarn
	}
	strict := fieldValidation != metav1.FieldValidationIgnore
	obj, d, err := s.codecs.DecodeObject(info, strict, body, res)
	var wrong *codec.WrongKindError
	switch {
	case errors.As(err, &wrong) && wrong.Got.GroupVersion() != wrong.Want.GroupVersion():
		return decoded{}, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", wrong.Got.GroupVersion(), wrong.Want.GroupVersion()))
	case errors.As(err, &wrong):
		return decoded{}, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: the kind in the data does not match the expected kind", wrong.Got.Kind, wrong.Got.Version, wrong.Want.Kind))
	case err != nil:
		return decoded{}, err
	}
	s.auditRequestObject(req, obj)
	in := decoded{obj: obj, buf: buf, again: func() (resources.Object, error) {
		obj, _, err := s.codecs.DecodeObject(info, strict, body, res)
		return obj, err
	}}
	if len(d.Strict) > 0 {
		if fieldValidation == metav1.FieldValidationStrict {
			return decoded{}, d.StrictError(body)
		}
		for _, e := range d.Strict {
			in.warnings = append(in.warnings, e.Error())
		}
	}
	return in, nil
}

// readBody reads the request body up to the size limit (413 beyond it).
func (s *Server) readBody(req *http.Request) ([]byte, error) { return s.readBodyInto(nil, req) }

// readBodyInto is readBody into buf's array when it is large enough.
func (s *Server) readBodyInto(buf []byte, req *http.Request) ([]byte, error) {
	defer req.Body.Close()
	limit := s.cfg.MaxRequestBodyBytes
	lr := &io.LimitedReader{R: req.Body, N: limit + 1}
	data, err := readAll(buf, lr, req.ContentLength, limit)
	if err != nil {
		// The body's reads end at the request's deadline (deadline.go):
		// a client too slow to send it meets the request's 504.
		if cerr := req.Context().Err(); cerr != nil {
			return nil, cerr
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, context.DeadlineExceeded
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("reading request body: %v", err))
	}
	if lr.N <= 0 {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", limit))
	}
	return data, nil
}

// readAll is io.ReadAll of r into a buffer of the body's declared
// length (and a byte for the read that sees the end) when there is one
// within limit: one allocation rather than the doubling of a buffer, or
// none when buf has room.
func readAll(buf []byte, r io.Reader, declared, limit int64) ([]byte, error) {
	if declared <= 0 || declared > limit {
		return io.ReadAll(r)
	}
	b := buf[:0]
	if int64(cap(b)) < declared+1 {
		b = make([]byte, 0, declared+1)
	}
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			// Longer than declared: what is left, as io.ReadAll would.
			rest, err := io.ReadAll(r)
			return append(b, rest...), err
		}
	}
}

func (s *Server) delete(w http.ResponseWriter, req *http.Request, res resources.Resource, call *request) error {
	out, err := s.codecs.Negotiate(req, target(res, false))
	if err != nil {
		return err
	}
	opts, err := s.deleteOptions(req, call)
	if err != nil {
		return err
	}
	result, err := s.reg.Delete(req.Context(), res, call.namespace(), call.name(), opts)
	if err != nil {
		return err
	}
	if !result.Deleted {
		code := http.StatusOK
		if opts.OrphanDependents != nil && !*opts.OrphanDependents { //nolint:staticcheck // kube-apiserver keeps this for old clients
			code = http.StatusAccepted
		}
		return s.writeResult(w, req, call, out, res, code, codec.Cached{Obj: result.Object})
	}
	status := &metav1.Status{
		Status: metav1.StatusSuccess,
		Details: &metav1.StatusDetails{
			Name:  result.Object.GetName(),
			Group: res.Version.Group,
			Kind:  res.Kind.Names.Plural, // kube-apiserver puts the resource here
			UID:   result.Object.GetUID(),
		},
	}
	s.writeObject(w, req, out, http.StatusOK, status)
	return nil
}

// deleteOptions reads DeleteOptions from the body, or from the query when
// the body is empty, as kube-apiserver does.
func (s *Server) deleteOptions(req *http.Request, call *request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	body, err := s.readBody(req)
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		if err := decodeParams(call.query, opts); err != nil {
			return nil, err
		}
		return opts, nil
	}
	info, err := s.codecs.InputSerializer(req.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	d, err := s.codecs.Decode(info, false, body, opts)
	if err != nil {
		return nil, err
	}
	if d.Object != opts {
		return nil, apierrors.NewBadRequest("decoded object cannot be converted to DeleteOptions")
	}
	s.auditDeleteOptions(req, opts)
	return opts, nil
}

func (s *Server) deleteCollection(w http.ResponseWriter, req *http.Request, res resources.Resource, call *request) error {
	out, err := s.codecs.Negotiate(req, target(res, true))
	if err != nil {
		return err
	}
	listOpts, err := listOptions(call.query)
	if err != nil {
		return err
	}
	opts, err := s.deleteOptions(req, call)
	if err != nil {
		return err
	}
	result, err := s.reg.DeleteCollection(req.Context(), res, call.namespace(), listOpts, opts)
	if err != nil {
		return err
	}
	return s.writeList(w, req, call, out, res, result)
}

// patchTypes are the accepted patch media types, in kube-apiserver's order.
var patchTypes = []string{
	string(types.JSONPatchType),
	string(types.MergePatchType),
	string(types.StrategicMergePatchType),
	string(types.ApplyYAMLPatchType),
}

func (s *Server) patch(w http.ResponseWriter, req *http.Request, res resources.Resource, call *request) error {
	contentType := req.Header.Get("Content-Type")
	if i := strings.IndexByte(contentType, ';'); i > 0 {
		contentType = contentType[:i]
	}
	contentType = strings.TrimSpace(contentType)
	if !slices.Contains(patchTypes, contentType) {
		return codec.UnsupportedMediaType(patchTypes)
	}
	patchType := types.PatchType(contentType)
	out, err := s.codecs.Negotiate(req, target(res, false))
	if err != nil {
		return err
	}
	body, err := s.readBody(req)
	if err != nil {
		return err
	}
	s.auditPatch(req, patchType, body)
	var opts metav1.PatchOptions
	if err := decodeParams(call.query, &opts); err != nil {
		return err
	}
	if errs := metav1validation.ValidatePatchOptions(&opts, patchType); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	po := registry.PatchOptions{
		WriteOptions:    registry.WriteOptions{DryRun: len(opts.DryRun) > 0, Manager: managerOrUserAgent(opts.FieldManager, req.UserAgent())},
		Force:           opts.Force != nil && *opts.Force,
		FieldValidation: opts.FieldValidation,
	}
	if po.FieldValidation == "" {
		po.FieldValidation = metav1.FieldValidationWarn
	}
	result, err := s.reg.Patch(req.Context(), res, call.namespace(), call.name(), call.attrs.Subresource, patchType, body, po)
	addWarnings(w, result.Warnings)
	if err != nil {
		return err
	}
	return s.writeWriteResult(w, req, call, out, res, result)
}

// managerOrUserAgent names the field manager of a write: the fieldManager
// parameter, or the User-Agent up to its first "/", printable characters
// only, at most 128 bytes (apiserver/pkg/endpoints/handlers/create.go).
func managerOrUserAgent(manager, userAgent string) string {
	if manager != "" {
		return manager
	}
	prefix, _, _ := strings.Cut(userAgent, "/")
	if printableASCII(prefix) && len(prefix) <= metav1validation.FieldManagerMaxLength {
		return prefix // what the loop below would build, without a copy
	}
	var b strings.Builder
	for _, r := range prefix {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > metav1validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// printableASCII reports whether s is all printable ASCII (what
// unicode.IsPrint keeps of ASCII).
func printableASCII(s string) bool {
	for i := range len(s) {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

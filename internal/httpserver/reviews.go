package httpserver

import (
	"bytes"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/audit"
	"github.com/leasehold/leasehold/internal/auth"
	"github.com/leasehold/leasehold/internal/codec"
)

// The review endpoints: kubectl auth whoami (SelfSubjectReview) and
// kubectl auth can-i (SelfSubjectAccessReview, and
// SelfSubjectRulesReview for --list). They create nothing: each POST
// answers 201 with the review and its status, as kube-apiserver's
// pkg/registry/authentication/selfsubjectreview and
// pkg/registry/authorization/selfsubject{access,rules}review do.
var reviewKinds = map[string]schema.GroupVersionKind{
	"/apis/authentication.k8s.io/v1/selfsubjectreviews":      authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview"),
	"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews": authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview"),
	"/apis/authorization.k8s.io/v1/selfsubjectrulesreviews":  authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview"),
}

// reviewResources describe the review endpoints for discovery, as
// kube-apiserver lists them: cluster-scoped, create only, no storage.
func reviewResources() map[schema.GroupVersion][]entry {
	review := func(kind, plural string) entry {
		return entry{plural: plural, singular: plural[:len(plural)-1], kind: kind, verbs: []string{"create"}}
	}
	return map[schema.GroupVersion][]entry{
		authenticationv1.SchemeGroupVersion: {review("SelfSubjectReview", "selfsubjectreviews")},
		authorizationv1.SchemeGroupVersion: {
			review("SelfSubjectAccessReview", "selfsubjectaccessreviews"),
			review("SelfSubjectRulesReview", "selfsubjectrulesreviews"),
		},
	}
}

// newReviewCodecs returns the serializers of the review kinds.
func newReviewCodecs() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{authenticationv1.AddToScheme, authorizationv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(fmt.Sprintf("httpserver: building the review scheme: %v", err))
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnablePretty)
}

// serveReview serves the review endpoints; false means the path is not
// one.
func (s *Server) serveReview(w http.ResponseWriter, req *http.Request) bool {
	gvk, ok := reviewKinds[req.URL.Path]
	if !ok {
		return false
	}
	if req.Method != http.MethodPost {
		s.writeError(w, req, methodNotAllowed())
		return true
	}
	if err := s.createReview(w, req, gvk); err != nil {
		s.writeError(w, req, err)
	}
	return true
}

func (s *Server) createReview(w http.ResponseWriter, req *http.Request, gvk schema.GroupVersionKind) error {
	out, err := s.codecs.Negotiate(req, codec.Target{})
	if err != nil {
		return err
	}
	var opts metav1.CreateOptions
	if err := decodeWriteOptions(req.URL.Query(), &opts, "CreateOptions", func() field.ErrorList { return metav1validation.ValidateCreateOptions(&opts) }); err != nil {
		return err
	}
	in, err := s.codecs.InputSerializer(req.Header.Get("Content-Type"))
	if err != nil {
		return err
	}
	inInfo, ok := runtime.SerializerInfoForMediaType(s.reviewCodecs.SupportedMediaTypes(), in.MediaType)
	if !ok {
		return codec.UnsupportedMediaType(s.codecs.MediaTypes())
	}
	body, err := s.readBody(req)
	if err != nil {
		return err
	}
	obj, warnings, err := decodeReview(inInfo, body, gvk, opts.FieldValidation)
	if err != nil {
		return err
	}
	rec := audit.RecordFrom(req.Context())
	reviewJSON := func(o runtime.Object) func() ([]byte, error) {
		return func() ([]byte, error) { return runtime.Encode(s.reviewJSON(), o) }
	}
	meta, _ := obj.(metav1.Object)
	rec.RequestObject(meta, reviewJSON(obj))
	u, ok := auth.UserFrom(req.Context())
	if !ok {
		return apierrors.NewBadRequest("no user present on request")
	}
	result, err := s.review(obj, u)
	if err != nil {
		return err
	}
	result.GetObjectKind().SetGroupVersionKind(gvk)
	outInfo, ok := runtime.SerializerInfoForMediaType(s.reviewCodecs.SupportedMediaTypes(), out.Info.MediaType)
	if !ok {
		return apierrors.NewInternalError(fmt.Errorf("no review serializer for %s", out.Info.MediaType))
	}
	enc := outInfo.Serializer
	if out.Pretty && outInfo.PrettySerializer != nil {
		enc = outInfo.PrettySerializer
	}
	var buf bytes.Buffer
	if err := enc.Encode(result, &buf); err != nil {
		return apierrors.NewInternalError(err)
	}
	rec.ResponseObject(nil, reviewJSON(result))
	addWarnings(w, warnings)
	w.Header().Set("Content-Type", out.Info.MediaType)
	writeBody(w, req, http.StatusCreated, codec.Bytes(buf.Bytes()))
	return nil
}

// reviewJSON is the JSON encoder of the review kinds.
func (s *Server) reviewJSON() runtime.Encoder {
	info, _ := runtime.SerializerInfoForMediaType(s.reviewCodecs.SupportedMediaTypes(), codec.JSON)
	return info.Serializer
}

// decodeReview decodes a review body as kube-apiserver's create handler
// does: unknown fields per fieldValidation (Warn by default), and the
// apiVersion and kind must be the endpoint's.
func decodeReview(info runtime.SerializerInfo, body []byte, want schema.GroupVersionKind, fieldValidation string) (runtime.Object, []string, error) {
	dec := info.Serializer
	if fieldValidation != metav1.FieldValidationIgnore && info.StrictSerializer != nil {
		dec = info.StrictSerializer
	}
	obj, gvk, err := dec.Decode(body, &want, nil)
	var warnings []string
	if err != nil {
		se, strict := runtime.AsStrictDecodingError(err)
		switch {
		case !strict || obj == nil:
			return nil, nil, codec.DecodeError(err, want.Kind, gvk, body)
		case fieldValidation == metav1.FieldValidationStrict:
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, want.Kind, err))
		}
		for _, e := range se.Errors() {
			warnings = append(warnings, e.Error())
		}
	}
	if *gvk != want {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: the kind in the data does not match the expected kind", gvk.Kind, gvk.Version, want.Kind))
	}
	return obj, warnings, nil
}

// review answers one review for user u.
func (s *Server) review(obj runtime.Object, u auth.User) (runtime.Object, error) {
	switch r := obj.(type) {
	case *authenticationv1.SelfSubjectReview:
		out := &authenticationv1.SelfSubjectReview{
			ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(time.Now())},
			Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
				Username: u.Name, UID: u.UID, Groups: u.Groups,
			}},
		}
		if len(u.Extra) > 0 {
			out.Status.UserInfo.Extra = make(map[string]authenticationv1.ExtraValue, len(u.Extra))
			for k, v := range u.Extra {
				out.Status.UserInfo.Extra[k] = v
			}
		}
		return out, nil
	case *authorizationv1.SelfSubjectAccessReview:
		if errs := validateSelfSubjectAccessReview(r); len(errs) > 0 {
			return nil, apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName, Kind: "SelfSubjectAccessReview"}, "", errs)
		}
		a := accessReviewAttributes(r.Spec, u)
		r.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true}
		if s.authz != nil {
			d, reason := s.authz.Authorize(a)
			r.Status = authorizationv1.SubjectAccessReviewStatus{
				Allowed: d == auth.DecisionAllow,
				Denied:  d == auth.DecisionDeny,
				Reason:  reason,
			}
		}
		return r, nil
	case *authorizationv1.SelfSubjectRulesReview:
		if r.Spec.Namespace == "" {
			return nil, apierrors.NewBadRequest("no namespace on request")
		}
		rules := auth.Rules{
			Resource:    []auth.ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
			NonResource: []auth.NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
		}
		var rulesErr error
		if s.authz != nil {
			rules, rulesErr = s.authz.RulesFor(u, r.Spec.Namespace)
		}
		out := &authorizationv1.SelfSubjectRulesReview{}
		out.Status.ResourceRules = []authorizationv1.ResourceRule{}
		out.Status.NonResourceRules = []authorizationv1.NonResourceRule{}
		if rulesErr != nil {
			// The rules that could be resolved, and why others could not
			// (a binding to a missing role), as kube-apiserver's
			// selfsubjectrulesreview REST answers.
			out.Status.EvaluationError = rulesErr.Error()
		}
		for _, rr := range rules.Resource {
			out.Status.ResourceRules = append(out.Status.ResourceRules, authorizationv1.ResourceRule{
				Verbs: rr.Verbs, APIGroups: rr.APIGroups, Resources: rr.Resources, ResourceNames: rr.ResourceNames,
			})
		}
		for _, nr := range rules.NonResource {
			out.Status.NonResourceRules = append(out.Status.NonResourceRules, authorizationv1.NonResourceRule{Verbs: nr.Verbs, NonResourceURLs: nr.NonResourceURLs})
		}
		return out, nil
	}
	return nil, apierrors.NewInternalError(fmt.Errorf("unexpected review %T", obj))
}

// accessReviewAttributes are the attributes a SelfSubjectAccessReview asks
// about, as kube-apiserver's ResourceAttributesFrom and
// NonResourceAttributesFrom build them (an empty version matches all).
func accessReviewAttributes(spec authorizationv1.SelfSubjectAccessReviewSpec, u auth.User) auth.Attributes {
	if ra := spec.ResourceAttributes; ra != nil {
		version := ra.Version
		if version == "" {
			version = "*"
		}
		return auth.Attributes{
			User: u, Verb: ra.Verb, ResourceRequest: true,
			Namespace: ra.Namespace, APIGroup: ra.Group, APIVersion: version,
			Resource: ra.Resource, Subresource: ra.Subresource, Name: ra.Name,
		}
	}
	nra := spec.NonResourceAttributes
	return auth.Attributes{User: u, Verb: nra.Verb, Path: nra.Path}
}

// validateSelfSubjectAccessReview is kube-apiserver's
// ValidateSelfSubjectAccessReview
// (pkg/apis/authorization/validation/validation.go).
func validateSelfSubjectAccessReview(r *authorizationv1.SelfSubjectAccessReview) field.ErrorList {
	var errs field.ErrorList
	spec, specPath := r.Spec, field.NewPath("spec")
	if spec.ResourceAttributes != nil && spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(specPath.Child("nonResourceAttributes"), spec.NonResourceAttributes, `cannot be specified in combination with resourceAttributes`))
	}
	if spec.ResourceAttributes == nil && spec.NonResourceAttributes == nil {
		errs = append(errs, field.Invalid(specPath.Child("resourceAttributes"), spec.NonResourceAttributes, `exactly one of nonResourceAttributes or resourceAttributes must be specified`))
	}
	if ra := spec.ResourceAttributes; ra != nil {
		errs = append(errs, validateSelectorAttributes(ra, field.NewPath("spec.resourceAttributes"))...)
	}
	meta := r.ObjectMeta
	meta.ManagedFields = nil
	if !equality.Semantic.DeepEqual(metav1.ObjectMeta{}, meta) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), r.ObjectMeta, `must be empty`))
	}
	return errs
}

func validateSelectorAttributes(ra *authorizationv1.ResourceAttributes, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if fs := ra.FieldSelector; fs != nil {
		fp := p.Child("fieldSelector")
		if len(fs.RawSelector) > 0 && len(fs.Requirements) > 0 {
			errs = append(errs, field.Invalid(fp.Child("rawSelector"), fs.RawSelector, "may not specified at the same time as requirements"))
		}
		if len(fs.RawSelector) == 0 && len(fs.Requirements) == 0 {
			errs = append(errs, field.Required(fp.Child("requirements"), fmt.Sprintf("when %s is specified, requirements or rawSelector is required", fp)))
		}
		opts := metav1validation.FieldSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
		for i, req := range fs.Requirements {
			errs = append(errs, metav1validation.ValidateFieldSelectorRequirement(req, opts, fp.Child("requirements").Index(i))...)
		}
	}
	if ls := ra.LabelSelector; ls != nil {
		lp := p.Child("labelSelector")
		if len(ls.RawSelector) > 0 && len(ls.Requirements) > 0 {
			errs = append(errs, field.Invalid(lp.Child("rawSelector"), ls.RawSelector, "may not specified at the same time as requirements"))
		}
		if len(ls.RawSelector) == 0 && len(ls.Requirements) == 0 {
			errs = append(errs, field.Required(lp.Child("requirements"), fmt.Sprintf("when %s is specified, requirements or rawSelector is required", lp)))
		}
		opts := metav1validation.LabelSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
		for i, req := range ls.Requirements {
			errs = append(errs, metav1validation.ValidateLabelSelectorRequirement(req, opts, lp.Child("requirements").Index(i))...)
		}
	}
	return errs
}

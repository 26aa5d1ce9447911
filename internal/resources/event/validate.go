package event

import (
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/resources"
)

// Length limits of pkg/apis/core/validation/events.go.
const (
	reportingInstanceLengthLimit = 128
	actionLengthLimit            = 128
	reasonLengthLimit            = 128
	noteLengthLimit              = 1024
)

// lenient reports whether a request at version in gets only the legacy
// rules: core v1 and events.k8s.io/v1beta1 (not served) do, for
// compatibility; events.k8s.io/v1 and any other version get the strict
// ones too.
func lenient(in schema.GroupVersion) bool {
	return in == corev1.SchemeGroupVersion || in == schema.GroupVersion{Group: "events.k8s.io", Version: "v1beta1"}
}

// validateCreate is ValidateEventCreate, completed by the generic create
// checks. Core v1 names are only checked as path segments, as
// kube-apiserver's generic rules do: legacy validation checks no name.
func validateCreate(ev *corev1.Event, in schema.GroupVersion) field.ErrorList {
	errs := legacyValidate(ev)
	if !lenient(in) {
		errs = append(errs, resources.ValidateObjectMeta(ev, true, apivalidation.NameIsDNSSubdomain)...)
		errs = append(errs, validateSeries(ev)...)
		if isZero(ev.EventTime.Time) {
			errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
		}
		if ev.Type != corev1.EventTypeNormal && ev.Type != corev1.EventTypeWarning {
			errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ev.Type)))
		}
		if !isZero(ev.FirstTimestamp.Time) {
			errs = append(errs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
		}
		if !isZero(ev.LastTimestamp.Time) {
			errs = append(errs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
		}
		if ev.Count != 0 {
			errs = append(errs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
		}
		if ev.Source.Component != "" || ev.Source.Host != "" {
			errs = append(errs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
		}
	}
	return resources.ValidateCreate(ev, true, errs)
}

// validateUpdate is ValidateEventUpdate, completed by the generic update
// checks (which come first).
func validateUpdate(ev, old *corev1.Event, in schema.GroupVersion) field.ErrorList {
	meta := resources.CheckMetaUpdate(ev, old)
	errs := legacyValidate(ev)
	if !lenient(in) {
		errs = append(errs, meta.CoreErrors(ev)...)
		// Upstream compares the series with reflect, not semantically.
		if !reflect.DeepEqual(ev.Series, old.Series) {
			errs = append(errs, validateSeries(ev)...)
		}
		errs = append(errs, immutable(ev.InvolvedObject, old.InvolvedObject, internalReference(ev.InvolvedObject), field.NewPath("involvedObject"))...)
		errs = append(errs, immutable(ev.Reason, old.Reason, ev.Reason, field.NewPath("reason"))...)
		errs = append(errs, immutable(ev.Message, old.Message, ev.Message, field.NewPath("message"))...)
		errs = append(errs, immutable(ev.Source, old.Source, internalSource(ev.Source), field.NewPath("source"))...)
		errs = append(errs, immutable(ev.FirstTimestamp, old.FirstTimestamp, ev.FirstTimestamp, field.NewPath("firstTimestamp"))...)
		errs = append(errs, immutable(ev.LastTimestamp, old.LastTimestamp, ev.LastTimestamp, field.NewPath("lastTimestamp"))...)
		errs = append(errs, immutable(ev.Count, old.Count, ev.Count, field.NewPath("count"))...)
		// Upstream checks reason twice.
		errs = append(errs, immutable(ev.Reason, old.Reason, ev.Reason, field.NewPath("reason"))...)
		errs = append(errs, immutable(ev.Type, old.Type, ev.Type, field.NewPath("type"))...)
		errs = append(errs, immutable(ev.EventTime, old.EventTime, ev.EventTime, field.NewPath("eventTime"))...)
		errs = append(errs, immutable(ev.Action, old.Action, ev.Action, field.NewPath("action"))...)
		errs = append(errs, immutable(ev.Related, old.Related, internalReferencePtr(ev.Related), field.NewPath("related"))...)
		errs = append(errs, immutable(ev.ReportingController, old.ReportingController, ev.ReportingController, field.NewPath("reportingController"))...)
		errs = append(errs, immutable(ev.ReportingInstance, old.ReportingInstance, ev.ReportingInstance, field.NewPath("reportingInstance"))...)
	}
	return resources.ValidateUpdate(ev, true, meta, errs)
}

// validateSeries is validateV1EventSeries. Its paths are single segments
// named "series.count" and "series.lastObservedTime", as upstream builds
// them.
func validateSeries(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if ev.Series == nil {
		return nil
	}
	if ev.Series.Count < 2 {
		errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
	}
	if isZero(ev.Series.LastObservedTime.Time) {
		errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
	}
	return errs
}

// legacyValidate is legacyValidateEvent, the rules every version gets.
// An event without eventTime (the core v1 recorders') must agree with the
// namespace of the object it is about; one with eventTime (a "new" event)
// must name its reporting controller and instance, action and reason.
func legacyValidate(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	involvedNamespace := field.NewPath("involvedObject", "namespace")
	mismatch := func() *field.Error {
		return field.Invalid(involvedNamespace, ev.InvolvedObject.Namespace, "does not match event.namespace")
	}
	if isZero(ev.EventTime.Time) {
		if ev.InvolvedObject.Namespace == "" {
			// For compatibility with old clients, "default" goes with
			// an involved object without a namespace.
			if ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault {
				errs = append(errs, mismatch())
			}
		} else if ev.Namespace != ev.InvolvedObject.Namespace {
			errs = append(errs, mismatch())
		}
	} else {
		if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
			errs = append(errs, mismatch())
		}
		errs = append(errs, required(ev.ReportingController, field.NewPath("reportingController"))...)
		for _, msg := range validation.IsQualifiedName(ev.ReportingController) {
			errs = append(errs, field.Invalid(field.NewPath("reportingController"), ev.ReportingController, msg))
		}
		errs = append(errs, requiredWithin(ev.ReportingInstance, reportingInstanceLengthLimit, field.NewPath("reportingInstance"))...)
		errs = append(errs, requiredWithin(ev.Action, actionLengthLimit, field.NewPath("action"))...)
		errs = append(errs, requiredWithin(ev.Reason, reasonLengthLimit, field.NewPath("reason"))...)
		if len(ev.Message) > noteLengthLimit {
			errs = append(errs, tooLong(noteLengthLimit, field.NewPath("message")))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(ev.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), ev.Namespace, msg))
	}
	return errs
}

func required(value string, fldPath *field.Path) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return nil
}

// requiredWithin requires a value of at most limit bytes; upstream
// reports the excess as Invalid with an empty value, not TooLong.
func requiredWithin(value string, limit int, fldPath *field.Path) field.ErrorList {
	errs := required(value, fldPath)
	if len(value) > limit {
		errs = append(errs, tooLong(limit, fldPath))
	}
	return errs
}

func tooLong(limit int, fldPath *field.Path) *field.Error {
	return field.Invalid(fldPath, "", fmt.Sprintf("can have at most %v characters", limit))
}

// isZero compares with the zero time.Time as upstream does (==, not
// IsZero): a time decoded from "0001-01-01T00:00:00Z" is in the local
// zone and so is not zero.
func isZero(t time.Time) bool { return t == time.Time{} }

// immutable is ValidateImmutableField with the value reported given
// apart: kube-apiserver validates its internal types, and reports a
// struct value as their JSON (Go field names, no omitted fields), which
// the internal* types below reproduce.
func immutable(newVal, oldVal, reported any, fldPath *field.Path) field.ErrorList {
	if equality.Semantic.DeepEqual(oldVal, newVal) {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, reported, apivalidation.FieldImmutableErrorMsg)}
}

// internalObjectReference and internalEventSource have the fields of
// kube-apiserver's internal core.ObjectReference and core.EventSource, in
// their order and without JSON tags.
type internalObjectReference struct {
	Kind            string
	Namespace       string
	Name            string
	UID             types.UID
	APIVersion      string
	ResourceVersion string
	FieldPath       string
}

type internalEventSource struct {
	Component string
	Host      string
}

func internalReference(ref corev1.ObjectReference) internalObjectReference {
	return internalObjectReference{
		Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID,
		APIVersion: ref.APIVersion, ResourceVersion: ref.ResourceVersion, FieldPath: ref.FieldPath,
	}
}

func internalReferencePtr(ref *corev1.ObjectReference) *internalObjectReference {
	if ref == nil {
		return nil
	}
	r := internalReference(*ref)
	return &r
}

func internalSource(s corev1.EventSource) internalEventSource {
	return internalEventSource{Component: s.Component, Host: s.Host}
}

package event

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/openapi/definitions"
	"github.com/leasehold/leasehold/internal/resources"
)

// Options configures the Event description.
type Options struct {
	// TTL is how long an event lives after its last write
	// (kube-apiserver's --event-ttl); 0 means forever.
	TTL time.Duration
}

// DefaultTTL is kube-apiserver's default --event-ttl.
const DefaultTTL = time.Hour

// New returns the description of Events, served at core v1 (the storage
// version) and events.k8s.io/v1.
func New(opts Options) *resources.Kind {
	return &resources.Kind{
		Names: resources.Names{
			Kind: "Event", ListKind: "EventList",
			Plural: "events", Singular: "event",
			ShortNames: []string{"ev"},
		},
		Namespaced: true,
		KeyPath:    "events",
		Versions: []resources.Version{{
			GroupVersion: corev1.SchemeGroupVersion,
			New:          func() resources.Object { return &corev1.Event{} },
			NewList:      func() runtime.Object { return &corev1.EventList{} },
			OpenAPI:      definitions.GetOpenAPIDefinitions,
		}, {
			GroupVersion: eventsv1.SchemeGroupVersion,
			New:          func() resources.Object { return &eventsv1.Event{} },
			NewList:      func() runtime.Object { return &eventsv1.EventList{} },
			Conversion: &resources.Conversion{
				ToStorage:   func(in resources.Object) (resources.Object, error) { return toCore(in.(*eventsv1.Event)), nil },
				FromStorage: func(in resources.Object) (resources.Object, error) { return fromCore(in.(*corev1.Event)), nil },
				FieldLabels: eventsFieldLabels,
			},
			OpenAPI: definitions.GetOpenAPIDefinitions,
		}},
		Strategy: strategy{},
		Updates:  resources.UpdatePolicy{AllowCreateOnUpdate: true, AllowUnconditionalUpdate: true},
		Table:    resources.Table{Columns: columns(), Row: row},
		Fields:   resources.Fields{Labels: fieldLabels, Value: fieldValue},
		TTL:      opts.TTL,
	}
}

// strategy holds the Event write rules: kube-apiserver's event strategy
// prepares nothing and sends no warnings; validation depends on the
// version of the request.
type strategy struct {
	resources.Unprepared
	resources.NoWarnings
}

func (strategy) Validate(obj resources.Object, in schema.GroupVersion) field.ErrorList {
	return validateCreate(obj.(*corev1.Event), in)
}

func (strategy) ValidateUpdate(obj, old resources.Object, in schema.GroupVersion) field.ErrorList {
	return validateUpdate(obj.(*corev1.Event), old.(*corev1.Event), in)
}

// fieldLabels are the field selector labels of core v1 (the storage
// version), kube-apiserver's AddFieldLabelConversionsForEvent in
// pkg/apis/core/v1/conversion.go.
var fieldLabels = []string{
	"metadata.name", "metadata.namespace",
	"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
	"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
	"reason", "reportingComponent", "source", "type",
}

// eventsFieldLabels maps events.k8s.io/v1's labels to core's
// (pkg/apis/events/v1/conversion.go). "source" stays, though the version
// has no such field.
var eventsFieldLabels = map[string]string{
	"metadata.name":             "metadata.name",
	"metadata.namespace":        "metadata.namespace",
	"regarding.kind":            "involvedObject.kind",
	"regarding.namespace":       "involvedObject.namespace",
	"regarding.name":            "involvedObject.name",
	"regarding.uid":             "involvedObject.uid",
	"regarding.apiVersion":      "involvedObject.apiVersion",
	"regarding.resourceVersion": "involvedObject.resourceVersion",
	"regarding.fieldPath":       "involvedObject.fieldPath",
	"reason":                    "reason",
	"reportingController":       "reportingComponent",
	"source":                    "source",
	"type":                      "type",
}

// fieldValue is kube-apiserver's ToSelectableFields
// (pkg/registry/core/event/strategy.go): "source" is the source component,
// or the reporting controller of an event that has none.
func fieldValue(obj resources.Object, label string) string {
	ev := obj.(*corev1.Event)
	ref := &ev.InvolvedObject
	switch label {
	case "involvedObject.kind":
		return ref.Kind
	case "involvedObject.namespace":
		return ref.Namespace
	case "involvedObject.name":
		return ref.Name
	case "involvedObject.uid":
		return string(ref.UID)
	case "involvedObject.apiVersion":
		return ref.APIVersion
	case "involvedObject.resourceVersion":
		return ref.ResourceVersion
	case "involvedObject.fieldPath":
		return ref.FieldPath
	case "reason":
		return ev.Reason
	case "reportingComponent":
		return ev.ReportingController
	case "source":
		if ev.Source.Component != "" {
			return ev.Source.Component
		}
		return ev.ReportingController
	case "type":
		return ev.Type
	}
	return resources.MetadataField(obj, label)
}

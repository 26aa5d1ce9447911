package event

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	coreV1   = corev1.SchemeGroupVersion
	eventsV1 = eventsv1.SchemeGroupVersion
	when     = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
)

// legacyEvent is what client-go's tools/record posts: no eventTime.
func legacyEvent() *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "my-lease.187a1b2c3d4e5f60", Namespace: "demo"},
		InvolvedObject: corev1.ObjectReference{Kind: "Lease", Namespace: "demo", Name: "my-lease", APIVersion: "coordination.k8s.io/v1"},
		Reason:         "LeaderElection",
		Message:        "a became leader",
		Source:         corev1.EventSource{Component: "my-controller"},
		FirstTimestamp: metav1.NewTime(when),
		LastTimestamp:  metav1.NewTime(when),
		Count:          1,
		Type:           corev1.EventTypeNormal,
	}
}

// newEvent is what client-go's tools/events posts, in core's terms.
func newEvent() *corev1.Event {
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "my-lease.187a1b2c3d4e5f61", Namespace: "demo"},
		InvolvedObject:      corev1.ObjectReference{Kind: "Lease", Namespace: "demo", Name: "my-lease"},
		Reason:              "LeaderElection",
		Message:             "a became leader",
		Type:                corev1.EventTypeNormal,
		EventTime:           metav1.NewMicroTime(when),
		Action:              "Acquire",
		ReportingController: "example.com/my-controller",
		ReportingInstance:   "my-controller-a",
	}
}

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidateCreate(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     schema.GroupVersion
		change func(*corev1.Event)
		legacy bool // start from legacyEvent, else newEvent
		want   []string
	}{
		{name: "legacy event at v1", in: coreV1, legacy: true},
		{name: "legacy event in default about a cluster-scoped object", in: coreV1, legacy: true, change: func(e *corev1.Event) {
			e.Namespace, e.InvolvedObject.Namespace = "default", ""
		}},
		{name: "legacy event about an object elsewhere", in: coreV1, legacy: true, change: func(e *corev1.Event) {
			e.InvolvedObject.Namespace = "other"
		}, want: []string{`involvedObject.namespace: Invalid value: "other": does not match event.namespace`}},
		{name: "legacy event about a cluster-scoped object outside default", in: coreV1, legacy: true, change: func(e *corev1.Event) {
			e.InvolvedObject.Namespace = ""
		}, want: []string{`involvedObject.namespace: Invalid value: "": does not match event.namespace`}},
		{name: "core names are path segments only", in: coreV1, legacy: true, change: func(e *corev1.Event) {
			e.Name = "My_Event:1"
		}},
		{name: "core name with a slash", in: coreV1, legacy: true, change: func(e *corev1.Event) {
			e.Name = "a/b"
		}, want: []string{`metadata.name: Invalid value: "a/b": may not contain '/'`}},
		{name: "new event at v1", in: coreV1},
		{name: "new event at v1 without reporting fields", in: coreV1, change: func(e *corev1.Event) {
			e.ReportingController, e.ReportingInstance, e.Action, e.Reason = "", "", "", ""
		}, want: []string{
			`reportingController: Required value`,
			`reportingController: Invalid value: "": name part must be non-empty`,
			`reportingController: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			`reportingInstance: Required value`,
			`action: Required value`,
			`reason: Required value`,
		}},
		{name: "new event with long fields", in: coreV1, change: func(e *corev1.Event) {
			e.ReportingInstance = strings.Repeat("i", 129)
			e.Action = strings.Repeat("a", 129)
			e.Reason = strings.Repeat("r", 129)
			e.Message = strings.Repeat("m", 1025)
		}, want: []string{
			`reportingInstance: Invalid value: "": can have at most 128 characters`,
			`action: Invalid value: "": can have at most 128 characters`,
			`reason: Invalid value: "": can have at most 128 characters`,
			`message: Invalid value: "": can have at most 1024 characters`,
		}},
		{name: "new event about a cluster-scoped object in kube-system", in: coreV1, change: func(e *corev1.Event) {
			e.Namespace, e.InvolvedObject.Namespace = "kube-system", ""
		}},
		{name: "new event about a cluster-scoped object in demo", in: coreV1, change: func(e *corev1.Event) {
			e.InvolvedObject.Namespace = ""
		}, want: []string{`involvedObject.namespace: Invalid value: "": does not match event.namespace`}},
		{name: "new event about an object elsewhere is fine", in: coreV1, change: func(e *corev1.Event) {
			e.InvolvedObject.Namespace = "other"
		}},
		{name: "new event at events.k8s.io", in: eventsV1},
		{name: "legacy event at events.k8s.io", in: eventsV1, legacy: true, want: []string{
			`eventTime: Required value`,
			`firstTimestamp: Invalid value: "": needs to be unset`,
			`lastTimestamp: Invalid value: "": needs to be unset`,
			`count: Invalid value: "": needs to be unset`,
			`source: Invalid value: "": needs to be unset`,
		}},
		{name: "strict names at events.k8s.io", in: eventsV1, change: func(e *corev1.Event) {
			e.Name = "My_Event"
		}, want: []string{
			`metadata.name: Invalid value: "My_Event": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		}},
		{name: "type at events.k8s.io", in: eventsV1, change: func(e *corev1.Event) {
			e.Type = "Error"
		}, want: []string{`type: Invalid value: "": has invalid value: Error`}},
		{name: "short series", in: eventsV1, change: func(e *corev1.Event) {
			e.Series = &corev1.EventSeries{Count: 1}
		}, want: []string{
			`series.count: Invalid value: "": should be at least 2`,
			`series.lastObservedTime: Required value`,
		}},
		{name: "series at v1 are not checked", in: coreV1, change: func(e *corev1.Event) {
			e.Series = &corev1.EventSeries{Count: 1}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := newEvent()
			if c.legacy {
				ev = legacyEvent()
			}
			if c.change != nil {
				c.change(ev)
			}
			if diff := cmp.Diff(c.want, errorStrings(validateCreate(ev, c.in))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	stored := newEvent()
	stored.ResourceVersion = "5"
	for _, c := range []struct {
		name   string
		in     schema.GroupVersion
		change func(*corev1.Event)
		want   []string
	}{
		{name: "anything at v1", in: coreV1, change: func(e *corev1.Event) {
			e.Message, e.InvolvedObject.Name = "changed", "other"
		}},
		{name: "a new series at events.k8s.io", in: eventsV1, change: func(e *corev1.Event) {
			e.Series = &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(when.Add(time.Minute))}
		}},
		{name: "a bad series at events.k8s.io", in: eventsV1, change: func(e *corev1.Event) {
			e.Series = &corev1.EventSeries{Count: 1, LastObservedTime: metav1.NewMicroTime(when)}
		}, want: []string{`series.count: Invalid value: "": should be at least 2`}},
		{name: "immutable fields at events.k8s.io, reported as kube-apiserver's internal types", in: eventsV1, change: func(e *corev1.Event) {
			e.Message = "changed"
			e.InvolvedObject.Name = "other"
			e.Source.Component = "x"
			e.Related = &corev1.ObjectReference{Kind: "Pod", Name: "p"}
		}, want: []string{
			`involvedObject: Invalid value: {"Kind":"Lease","Namespace":"demo","Name":"other","UID":"","APIVersion":"","ResourceVersion":"","FieldPath":""}: field is immutable`,
			`message: Invalid value: "changed": field is immutable`,
			`source: Invalid value: {"Component":"x","Host":""}: field is immutable`,
			`related: Invalid value: {"Kind":"Pod","Namespace":"","Name":"p","UID":"","APIVersion":"","ResourceVersion":"","FieldPath":""}: field is immutable`,
		}},
		{name: "reason is reported twice", in: eventsV1, change: func(e *corev1.Event) {
			e.Reason = "Other"
		}, want: []string{
			`reason: Invalid value: "Other": field is immutable`,
			`reason: Invalid value: "Other": field is immutable`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := stored.DeepCopy()
			c.change(ev)
			if diff := cmp.Diff(c.want, errorStrings(validateUpdate(ev, stored, c.in))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// Conversion keeps every field, both ways.
func TestConversionRoundTrip(t *testing.T) {
	ev := legacyEvent()
	ev.Series = &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(when)}
	ev.Related = &corev1.ObjectReference{Kind: "Pod", Name: "p"}
	ev.EventTime = metav1.NewMicroTime(when)
	ev.Action, ev.ReportingController, ev.ReportingInstance = "Acquire", "c", "i"
	v1 := fromCore(ev)
	if v1.Note != ev.Message || v1.Regarding != ev.InvolvedObject || v1.DeprecatedCount != 1 || v1.DeprecatedSource != ev.Source {
		t.Errorf("fromCore: %+v", v1)
	}
	if diff := cmp.Diff(ev, toCore(v1)); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	v1.Series.Count = 9
	if ev.Series.Count != 3 {
		t.Error("the converted event shares its series with the original")
	}
}

func TestRow(t *testing.T) {
	now := when.Add(90 * time.Second)
	legacy := legacyEvent()
	legacy.Count = 4
	legacy.Source.Host = "node-1"
	legacy.InvolvedObject.FieldPath = "spec"
	fresh := newEvent()
	series := newEvent()
	series.Series = &corev1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(when.Add(60 * time.Second))}
	for _, c := range []struct {
		name string
		ev   *corev1.Event
		want []any
	}{
		{"legacy", legacy, []any{"90s", "Normal", "LeaderElection", "lease/my-lease", "spec", "my-controller, node-1", "a became leader", "90s", int64(4), legacy.Name}},
		{"events.k8s.io without series", fresh, []any{"90s", "Normal", "LeaderElection", "lease/my-lease", "", "example.com/my-controller, my-controller-a", "a became leader", "90s", int64(1), fresh.Name}},
		{"series", series, []any{"30s", "Normal", "LeaderElection", "lease/my-lease", "", "example.com/my-controller, my-controller-a", "a became leader", "90s", int64(7), series.Name}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, row(c.ev, now)); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFieldLabels(t *testing.T) {
	k := New(Options{})
	events := k.Resources()[1]
	for label, want := range map[string]string{"regarding.name": "involvedObject.name", "reportingController": "reportingComponent", "source": "source"} {
		if got, err := events.FieldLabel(label); err != nil || got != want {
			t.Errorf("events.k8s.io %s: %q, %v; want %q", label, got, err, want)
		}
	}
	if _, err := events.FieldLabel("involvedObject.name"); err == nil || err.Error() != "field label not supported: involvedObject.name" {
		t.Errorf("events.k8s.io involvedObject.name: %v", err)
	}
	if _, err := k.Storage().FieldLabel("regarding.name"); err == nil || err.Error() != "field label not supported: regarding.name" {
		t.Errorf("v1 regarding.name: %v", err)
	}
	ev := newEvent()
	if got := fieldValue(ev, "source"); got != "example.com/my-controller" {
		t.Errorf("source of an event without one: %q, want the reporting controller", got)
	}
}

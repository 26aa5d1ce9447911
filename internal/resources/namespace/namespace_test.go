package namespace_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/namespace"
)

func render(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Error())
	}
	return out
}

const (
	dnsLabelMsg   = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	namePartMsg   = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
	notStandard   = "name is neither a standard finalizer name nor is it fully qualified"
	labelValueMsg = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

var created = metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))

// stored is a namespace as kube-apiserver keeps it after create.
func stored() *corev1.Namespace {
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			Name: "team-a", UID: "u1", ResourceVersion: "10", CreationTimestamp: created,
			Labels: map[string]string{"kubernetes.io/metadata.name": "team-a", "env": "prod"},
		},
		Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
}

func TestDescription(t *testing.T) {
	r := namespace.New()
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	var subs []string
	for _, sub := range r.Subresources {
		subs = append(subs, sub.Name+" "+strings.Join(sub.Verbs, ","))
	}
	v := r.Versions[0]
	got := []any{
		v.GroupVersion.String(), r.Names.Kind, r.Names.ListKind, r.Names.Plural, r.Names.Singular, r.KeyPath, r.Names.ShortNames,
		r.Namespaced, r.Updates.AllowCreateOnUpdate, r.Updates.AllowUnconditionalUpdate, r.Fields.Labels,
		r.StorageVersionHash(), subs, r.ServedVerbs(), r.ResetFields, v.Default != nil,
	}
	want := []any{
		"v1", "Namespace", "NamespaceList", "namespaces", "namespace", "namespaces", []string{"ns"},
		false, false, true, []string{"metadata.name", "status.phase"},
		"Q3oi5N2YM8M=", []string{"finalize update", "status get,patch,update"},
		[]string{"create", "delete", "get", "list", "patch", "update", "watch"}, []string{"status"}, true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("description (-want +got):\n%s", diff)
	}
	if _, ok := v.New().(*corev1.Namespace); !ok {
		t.Errorf("New() = %T", v.New())
	}
	if _, ok := v.NewList().(*corev1.NamespaceList); !ok {
		t.Errorf("NewList() = %T", v.NewList())
	}
	ns := stored()
	ns.Status.Phase = corev1.NamespaceTerminating
	if diff := cmp.Diff(fields.Set{"metadata.name": "team-a", "status.phase": "Terminating"}, fieldSet(r, ns)); diff != "" {
		t.Errorf("Fields (-want +got):\n%s", diff)
	}
}

func TestDefault(t *testing.T) {
	cases := []struct {
		name string
		in   corev1.Namespace
		want corev1.Namespace
	}{
		{
			name: "label and phase",
			in:   corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
			want: corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"kubernetes.io/metadata.name": "a"}},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
			},
		},
		{
			name: "label overrides a client value, other labels kept",
			in: corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"kubernetes.io/metadata.name": "b", "x": "y"}},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
			},
			want: corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"kubernetes.io/metadata.name": "a", "x": "y"}},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
			},
		},
		{
			name: "no name yet",
			in:   corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "a-"}},
			want: corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "a-"},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.in.DeepCopy()
			namespace.New().Versions[0].Default(ns)
			if diff := cmp.Diff(&tc.want, ns); diff != "" {
				t.Errorf("defaulted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrepareForCreate(t *testing.T) {
	cases := []struct {
		name       string
		finalizers []corev1.FinalizerName
		want       []corev1.FinalizerName
	}{
		{name: "none", want: []corev1.FinalizerName{"kubernetes"}},
		{name: "others", finalizers: []corev1.FinalizerName{"example.com/a"}, want: []corev1.FinalizerName{"example.com/a", "kubernetes"}},
		{name: "already there", finalizers: []corev1.FinalizerName{"kubernetes", "example.com/a"}, want: []corev1.FinalizerName{"kubernetes", "example.com/a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := &corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: "team-x7k2b", GenerateName: "team-", Labels: map[string]string{"kubernetes.io/metadata.name": "spoof"}},
				Spec:       corev1.NamespaceSpec{Finalizers: tc.finalizers},
				Status: corev1.NamespaceStatus{
					Phase:      corev1.NamespaceTerminating,
					Conditions: []corev1.NamespaceCondition{{Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionTrue}},
				},
			}
			namespace.New().Strategy.PrepareForCreate(ns)
			want := &corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: "team-x7k2b", GenerateName: "team-", Labels: map[string]string{"kubernetes.io/metadata.name": "team-x7k2b"}},
				Spec:       corev1.NamespaceSpec{Finalizers: tc.want},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
			}
			if diff := cmp.Diff(want, ns); diff != "" {
				t.Errorf("prepared (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrepareForUpdate(t *testing.T) {
	deleting := metav1.NewTime(created.Add(time.Hour))
	old := stored()
	old.Status.Conditions = []corev1.NamespaceCondition{{Type: corev1.NamespaceContentRemaining, Status: corev1.ConditionTrue}}
	old.Spec.Finalizers = []corev1.FinalizerName{"kubernetes", "example.com/a"}

	// The request tries to change everything.
	request := func() *corev1.Namespace {
		ns := stored()
		ns.Labels = map[string]string{"kubernetes.io/metadata.name": "spoof", "env": "dev"}
		ns.Spec.Finalizers = []corev1.FinalizerName{"example.com/b"}
		ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}
		ns.DeletionTimestamp = &deleting
		return ns
	}
	r := namespace.New()
	cases := []struct {
		name    string
		prepare func(obj, old *corev1.Namespace)
		want    func(ns *corev1.Namespace)
	}{
		{
			name:    "main",
			prepare: func(obj, old *corev1.Namespace) { r.Strategy.PrepareForUpdate(obj, old) },
			want: func(ns *corev1.Namespace) {
				ns.Spec = *old.Spec.DeepCopy()
				ns.Status = *old.Status.DeepCopy()
			},
		},
		{
			name:    "status",
			prepare: func(obj, old *corev1.Namespace) { r.Subresource("status").Strategy.PrepareForUpdate(obj, old) },
			want:    func(ns *corev1.Namespace) { ns.Spec = *old.Spec.DeepCopy() },
		},
		{
			name:    "finalize",
			prepare: func(obj, old *corev1.Namespace) { r.Subresource("finalize").Strategy.PrepareForUpdate(obj, old) },
			want:    func(ns *corev1.Namespace) { ns.Status = *old.Status.DeepCopy() },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			oldCopy := old.DeepCopy()
			ns := request()
			tc.prepare(ns, oldCopy)
			want := request()
			want.Labels["kubernetes.io/metadata.name"] = "team-a"
			tc.want(want)
			if diff := cmp.Diff(want, ns); diff != "" {
				t.Errorf("prepared (-want +got):\n%s", diff)
			}
			// Nothing may alias the stored object.
			ns.Spec.Finalizers = append(ns.Spec.Finalizers[:0], "x/y")
			if len(ns.Status.Conditions) > 0 {
				ns.Status.Conditions[0].Reason = "changed"
			}
			if diff := cmp.Diff(old, oldCopy); diff != "" {
				t.Errorf("stored object changed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	r := namespace.New()
	long := strings.Repeat("a", 64)
	cases := []struct {
		name string
		ns   func(ns *corev1.Namespace)
		want []string
	}{
		{name: "valid", ns: func(ns *corev1.Namespace) {}},
		{
			name: "name is a DNS label",
			ns:   func(ns *corev1.Namespace) { ns.Name = "team.a" },
			want: []string{`FieldValueInvalid metadata.name: Invalid value: "team.a": must not contain dots`},
		},
		{
			name: "uppercase name",
			ns:   func(ns *corev1.Namespace) { ns.Name = "Team" },
			want: []string{`FieldValueInvalid metadata.name: Invalid value: "Team": ` + dnsLabelMsg},
		},
		{
			name: "name required",
			ns:   func(ns *corev1.Namespace) { ns.Name = "" },
			want: []string{`FieldValueRequired metadata.name: Required value: name or generateName is required`},
		},
		{
			name: "generateName is a label prefix",
			ns:   func(ns *corev1.Namespace) { ns.GenerateName = "team.x-"; ns.Name = "team.x-abcde" },
			want: []string{
				`FieldValueInvalid metadata.generateName: Invalid value: "team.x-": must not contain dots`,
				`FieldValueInvalid metadata.name: Invalid value: "team.x-abcde": must not contain dots`,
			},
		},
		{
			name: "namespace forbidden",
			ns:   func(ns *corev1.Namespace) { ns.Namespace = "default" },
			want: []string{`FieldValueForbidden metadata.namespace: Forbidden: not allowed on this type`},
		},
		{
			name: "spec finalizers: standard and qualified",
			ns: func(ns *corev1.Namespace) {
				ns.Spec.Finalizers = []corev1.FinalizerName{"kubernetes", "orphan", "example.com/x"}
			},
		},
		{
			name: "spec finalizers carry no index",
			ns: func(ns *corev1.Namespace) {
				ns.Spec.Finalizers = []corev1.FinalizerName{"kubernetes", "mine", "example.com/-x"}
			},
			want: []string{
				`FieldValueInvalid spec.finalizers: Invalid value: "mine": ` + notStandard,
				`FieldValueInvalid spec.finalizers: Invalid value: "example.com/-x": ` + namePartMsg,
			},
		},
		{
			name: "metadata finalizers use core rules",
			ns:   func(ns *corev1.Namespace) { ns.Finalizers = []string{"mine"} },
			want: []string{`FieldValueInvalid metadata.finalizers[0]: Invalid value: "mine": ` + notStandard},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := stored()
			ns.ResourceVersion, ns.UID = "", ""
			tc.ns(ns)
			if diff := cmp.Diff(tc.want, render(r.Strategy.Validate(ns, corev1.SchemeGroupVersion))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("create pipeline with a long name", func(t *testing.T) {
		// The metadata.name label carries the name, so a too-long name
		// is also a too-long label value, as in kube-apiserver.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: long}}
		r.Strategy.PrepareForCreate(ns)
		r.Versions[0].Default(ns)
		want := []string{
			`FieldValueInvalid metadata.name: Invalid value: "` + long + `": must be no more than 63 characters`,
			`FieldValueInvalid metadata.labels: Invalid value: "` + long + `": must be no more than 63 bytes`,
		}
		if diff := cmp.Diff(want, render(r.Strategy.Validate(ns, corev1.SchemeGroupVersion))); diff != "" {
			t.Errorf("errors (-want +got):\n%s", diff)
		}
	})
}

func TestValidateUpdate(t *testing.T) {
	deleting := metav1.NewTime(created.Add(time.Hour))
	immutable := `FieldValueInvalid metadata.name: Invalid value: "team-b": field is immutable`
	label := `FieldValueInvalid metadata.labels: Invalid value: "a b": ` + labelValueMsg
	notStd := `FieldValueInvalid metadata.finalizers[0]: Invalid value: "mine": ` + notStandard
	cases := []struct {
		name        string
		subresource string
		old         func(ns *corev1.Namespace)
		ns          func(ns *corev1.Namespace)
		want        []string
	}{
		{name: "labels may change", ns: func(ns *corev1.Namespace) { ns.Labels["env"] = "dev" }},
		{
			name: "name immutable",
			ns:   func(ns *corev1.Namespace) { ns.Name = "team-b" },
			want: []string{immutable, immutable},
		},
		{
			// ValidateNamespace runs on update too, so the create rules
			// report it once more.
			name: "bad label",
			ns:   func(ns *corev1.Namespace) { ns.Labels["env"] = "a b" },
			want: []string{label, label, label, label},
		},
		{
			name: "spec finalizers checked",
			ns:   func(ns *corev1.Namespace) { ns.Spec.Finalizers = []corev1.FinalizerName{"mine"} },
			want: []string{`FieldValueInvalid spec.finalizers: Invalid value: "mine": ` + notStandard},
		},
		{
			name: "metadata finalizer",
			ns:   func(ns *corev1.Namespace) { ns.Finalizers = []string{"mine"} },
			want: []string{notStd, notStd},
		},
		{name: "status: active", subresource: "status", ns: func(ns *corev1.Namespace) {}},
		{
			name: "status: terminating without deletionTimestamp", subresource: "status",
			ns:   func(ns *corev1.Namespace) { ns.Status.Phase = corev1.NamespaceTerminating },
			want: []string{"FieldValueInvalid status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"},
		},
		{
			name: "status: empty phase", subresource: "status",
			ns:   func(ns *corev1.Namespace) { ns.Status.Phase = "" },
			want: []string{"FieldValueInvalid status.Phase: Invalid value: \"\": may only be 'Active' if `deletionTimestamp` is empty"},
		},
		{
			name: "status: active while deleting", subresource: "status",
			old:  func(ns *corev1.Namespace) { ns.DeletionTimestamp = &deleting },
			ns:   func(ns *corev1.Namespace) { ns.DeletionTimestamp = &deleting },
			want: []string{"FieldValueInvalid status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty"},
		},
		{
			name: "status: terminating while deleting", subresource: "status",
			old: func(ns *corev1.Namespace) { ns.DeletionTimestamp = &deleting },
			ns: func(ns *corev1.Namespace) {
				ns.DeletionTimestamp = &deleting
				ns.Status.Phase = corev1.NamespaceTerminating
			},
		},
		{
			name: "status: metadata rules", subresource: "status",
			ns:   func(ns *corev1.Namespace) { ns.Name = "team-b" },
			want: []string{immutable, immutable},
		},
		{
			name: "finalize: remove kubernetes", subresource: "finalize",
			ns: func(ns *corev1.Namespace) { ns.Spec.Finalizers = nil },
		},
		{
			name: "finalize: finalizers indexed", subresource: "finalize",
			ns: func(ns *corev1.Namespace) {
				ns.Spec.Finalizers = []corev1.FinalizerName{"kubernetes", "mine", "example.com/-x"}
			},
			want: []string{
				`FieldValueInvalid spec.finalizers[1]: Invalid value: "mine": ` + notStandard,
				`FieldValueInvalid spec.finalizers[2]: Invalid value: "example.com/-x": ` + namePartMsg,
			},
		},
		{
			name: "finalize: resourceVersion required", subresource: "finalize",
			ns: func(ns *corev1.Namespace) { ns.ResourceVersion = "" },
			want: []string{
				`FieldValueInvalid metadata.resourceVersion: Invalid value: "": must be specified for an update`,
				`FieldValueInvalid metadata.resourceVersion: Invalid value: "": must be specified for an update`,
			},
		},
	}
	r := namespace.New()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, ns := stored(), stored()
			if tc.old != nil {
				tc.old(old)
			}
			tc.ns(ns)
			var strategy resources.UpdateStrategy = r.Strategy
			if tc.subresource != "" {
				strategy = r.Subresource(tc.subresource).Strategy
			}
			if diff := cmp.Diff(tc.want, render(strategy.ValidateUpdate(ns, old, corev1.SchemeGroupVersion))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTable(t *testing.T) {
	r := namespace.New()
	type col struct{ Name, Type, Format, Description string }
	var cols []col
	for _, c := range r.Table.Columns {
		d := c.Description
		if c.Name != "Status" {
			d = "" // from the ObjectMeta docs; checked in package resources
		}
		cols = append(cols, col{c.Name, c.Type, c.Format, d})
	}
	want := []col{{"Name", "string", "name", ""}, {"Status", "string", "", "The status of the namespace"}, {"Age", "string", "", ""}}
	if diff := cmp.Diff(want, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	now := created.Add(50 * time.Hour)
	ns := stored()
	if diff := cmp.Diff([]any{"team-a", "Active", "2d2h"}, r.Table.Row(ns, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	ns.Status.Phase = corev1.NamespaceTerminating
	ns.CreationTimestamp = metav1.Time{}
	if diff := cmp.Diff([]any{"team-a", "Terminating", "<unknown>"}, r.Table.Row(ns, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func fieldSet(r *resources.Kind, obj resources.Object) fields.Set {
	set := fields.Set{}
	for _, l := range r.Fields.Labels {
		set[l] = r.Fields.Value(obj, l)
	}
	return set
}

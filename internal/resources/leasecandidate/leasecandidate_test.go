package leasecandidate_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/leasecandidate"
)

func render(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Error())
	}
	return out
}

func newCandidate() *coordinationv1beta1.LeaseCandidate {
	return &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Name: "kcm-node-1", Namespace: "kube-system", ResourceVersion: "7"},
		Spec: coordinationv1beta1.LeaseCandidateSpec{
			LeaseName:        "kube-controller-manager",
			BinaryVersion:    "1.36.0",
			EmulationVersion: "1.35.0",
			Strategy:         coordinationv1.OldestEmulationVersion,
		},
	}
}

func TestDescription(t *testing.T) {
	k := leasecandidate.New()
	if err := k.Check(); err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, v := range k.Versions {
		versions = append(versions, v.GroupVersion.String())
	}
	got := []any{
		versions, k.Names.Kind, k.Names.ListKind, k.Names.Plural, k.Names.Singular, k.KeyPath, k.Names.ShortNames,
		k.Namespaced, k.Updates.AllowCreateOnUpdate, k.Updates.AllowUnconditionalUpdate, k.Fields.Labels,
		// base64(sha256("coordination.k8s.io/v1beta1/LeaseCandidate")[:8])
		k.StorageVersionHash(), len(k.Subresources), k.ServedVerbs(),
	}
	want := []any{
		[]string{"coordination.k8s.io/v1beta1", "coordination.k8s.io/v1alpha2"}, "LeaseCandidate", "LeaseCandidateList", "leasecandidates", "leasecandidate", "leasecandidates", []string(nil),
		true, true, false, []string{"metadata.name", "metadata.namespace", "spec.leaseName"},
		"lvME0iHWE20=", 0, resources.AllVerbs,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("description (-want +got):\n%s", diff)
	}
	set := fields.Set{}
	for _, l := range k.Fields.Labels {
		set[l] = k.Fields.Value(newCandidate(), l)
	}
	want2 := fields.Set{"metadata.name": "kcm-node-1", "metadata.namespace": "kube-system", "spec.leaseName": "kube-controller-manager"}
	if diff := cmp.Diff(want2, set); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	// v1alpha2 selects by the same labels.
	if l, err := k.Resources()[1].FieldLabel("spec.leaseName"); err != nil || l != "spec.leaseName" {
		t.Errorf("v1alpha2 FieldLabel(spec.leaseName) = %q, %v", l, err)
	}
}

func TestConversion(t *testing.T) {
	k := leasecandidate.New()
	alpha := k.Resources()[1]
	in := newCandidate()
	in.Labels = map[string]string{"a": "b"}
	in.Spec.PingTime = &metav1.MicroTime{Time: time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)}
	in.Spec.RenewTime = &metav1.MicroTime{Time: time.Date(2025, 1, 2, 3, 4, 6, 0, time.UTC)}
	out, err := alpha.FromStorage(in)
	if err != nil {
		t.Fatal(err)
	}
	a := out.(*coordinationv1alpha2.LeaseCandidate)
	if a.Spec.LeaseName != in.Spec.LeaseName || a.Spec.Strategy != in.Spec.Strategy || !a.Spec.PingTime.Equal(in.Spec.PingTime) || a.Labels["a"] != "b" {
		t.Errorf("v1alpha2 = %+v", a)
	}
	back, err := alpha.ToStorage(a)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	// Neither direction shares pointers with its input.
	a.Spec.PingTime.Time = time.Time{}
	if in.Spec.PingTime.IsZero() {
		t.Error("conversion shares pingTime")
	}
}

func TestValidate(t *testing.T) {
	k := leasecandidate.New()
	configMapKey := func(name string) string { return utilvalidation.IsConfigMapKey(name)[0] }
	cases := []struct {
		name   string
		change func(c *coordinationv1beta1.LeaseCandidate)
		want   []string
	}{
		{name: "valid", change: func(c *coordinationv1beta1.LeaseCandidate) {}},
		{
			name:   "names are ConfigMap keys: capitals and underscores",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.Name = "KCM_node.1-" },
		},
		{
			name:   "name with a colon",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.Name = "node:1" },
			want:   []string{`FieldValueInvalid metadata.name: Invalid value: "node:1": ` + configMapKey("node:1")},
		},
		{
			name:   "generateName follows the same rule",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.Name, c.GenerateName = "KCM_x1b2c", "KCM_" },
		},
		{
			name:   "namespace required",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.Namespace = "" },
			want:   []string{`FieldValueRequired metadata.namespace: Required value`},
		},
		{
			name:   "finalizers without a slash are accepted (apimachinery rules)",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.Finalizers = []string{"mine"} },
		},
		{
			name:   "empty spec",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.Spec = coordinationv1beta1.LeaseCandidateSpec{} },
			want: []string{
				`FieldValueRequired spec.leaseName: Required value`,
				`FieldValueRequired spec.binaryVersion: Required value`,
				`FieldValueRequired spec.strategy: Required value`,
			},
		},
		{
			name: "versions must be strict semver",
			change: func(c *coordinationv1beta1.LeaseCandidate) {
				c.Spec.BinaryVersion, c.Spec.EmulationVersion = "v1.36.0", "1.35"
			},
			want: []string{
				`FieldValueInvalid spec.emulationVersion: Invalid value: "1.35": must be a valid semantic version`,
				`FieldValueInvalid spec.binaryVersion: Invalid value: "v1.36.0": must be a valid semantic version`,
				`FieldValueRequired spec.emulationVersion: Required value: must be specified when ` + "`strategy`" + ` is 'OldestEmulationVersion'`,
			},
		},
		{
			name: "emulation newer than binary",
			change: func(c *coordinationv1beta1.LeaseCandidate) {
				c.Spec.BinaryVersion, c.Spec.EmulationVersion = "1.35.0", "1.36.0"
			},
			want: []string{"FieldValueInvalid spec.binaryVersion: Invalid value: \"1.35.0\": must be greater than or equal to `emulationVersion`"},
		},
		{
			name:   "pre-releases order below their release",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.Spec.BinaryVersion = "1.35.0-alpha.1" },
			want:   []string{"FieldValueInvalid spec.binaryVersion: Invalid value: \"1.35.0-alpha.1\": must be greater than or equal to `emulationVersion`"},
		},
		{
			name:   "OldestEmulationVersion needs an emulation version",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.Spec.EmulationVersion = "" },
			want:   []string{"FieldValueRequired spec.emulationVersion: Required value: must be specified when `strategy` is 'OldestEmulationVersion'"},
		},
		{
			name:   "0.0.0 counts as none",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.Spec.EmulationVersion = "0.0.0" },
			want:   []string{"FieldValueRequired spec.emulationVersion: Required value: must be specified when `strategy` is 'OldestEmulationVersion'"},
		},
		{
			name: "a third-party strategy needs no emulation version",
			change: func(c *coordinationv1beta1.LeaseCandidate) {
				c.Spec.Strategy, c.Spec.EmulationVersion = "example.com/Newest", ""
			},
		},
		{
			name:   "unknown built-in strategy, on the doubled path",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.Spec.Strategy = "Newest" },
			want:   []string{`FieldValueNotSupported spec.strategy.strategy: Unsupported value: "Newest": supported values: "OldestEmulationVersion"`},
		},
		{
			name:   "bad qualified strategy",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.Spec.Strategy = "a/b/c" },
			want:   []string{`FieldValueInvalid spec.strategy.strategy: Invalid value: "a/b/c": ` + utilvalidation.IsQualifiedName("a/b/c")[0]},
		},
		{
			name: "ping and renew times are free",
			change: func(c *coordinationv1beta1.LeaseCandidate) {
				c.Spec.PingTime = &metav1.MicroTime{Time: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
				c.Spec.RenewTime = &metav1.MicroTime{Time: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCandidate()
			c.ResourceVersion = ""
			tc.change(c)
			if diff := cmp.Diff(tc.want, render(k.Strategy.Validate(c, coordinationv1beta1.SchemeGroupVersion))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	k := leasecandidate.New()
	cases := []struct {
		name   string
		change func(c *coordinationv1beta1.LeaseCandidate)
		want   []string
	}{
		{
			name: "times, versions and strategy may change",
			change: func(c *coordinationv1beta1.LeaseCandidate) {
				c.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
				c.Spec.PingTime = &metav1.MicroTime{Time: time.Now()}
				c.Spec.BinaryVersion, c.Spec.EmulationVersion = "1.37.0", "1.36.0"
				c.Spec.Strategy = "example.com/Mine"
			},
		},
		{
			name:   "leaseName is immutable",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.Spec.LeaseName = "other" },
			want:   []string{`FieldValueInvalid spec.leaseName: Invalid value: "other": field is immutable`},
		},
		{
			name:   "spec rules apply on update",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.Spec.LeaseName, c.Spec.BinaryVersion = "", "" },
			want: []string{
				`FieldValueRequired spec.leaseName: Required value`,
				`FieldValueRequired spec.binaryVersion: Required value`,
				`FieldValueInvalid spec.leaseName: Invalid value: "": field is immutable`,
			},
		},
		{
			name:   "resourceVersion required",
			change: func(c *coordinationv1beta1.LeaseCandidate) { c.ResourceVersion = "" },
			want: []string{
				`FieldValueInvalid metadata.resourceVersion: Invalid value: "": must be specified for an update`,
				`FieldValueInvalid metadata.resourceVersion: Invalid value: "": must be specified for an update`,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, c := newCandidate(), newCandidate()
			tc.change(c)
			if diff := cmp.Diff(tc.want, render(k.Strategy.ValidateUpdate(c, old, coordinationv1beta1.SchemeGroupVersion))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTable(t *testing.T) {
	k := leasecandidate.New()
	type col struct{ Name, Type, Format string }
	var cols []col
	for _, c := range k.Table.Columns {
		cols = append(cols, col{c.Name, c.Type, c.Format})
	}
	want := []col{{"Name", "string", "name"}, {"LeaseName", "string", ""}, {"BinaryVersion", "string", ""}, {"EmulationVersion", "string", ""}, {"Age", "string", ""}}
	if diff := cmp.Diff(want, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if k.Table.Columns[1].Description == "" || k.Table.Columns[2].Description != "" {
		t.Errorf("descriptions: LeaseName %q, BinaryVersion %q; kube-apiserver documents the first only", k.Table.Columns[1].Description, k.Table.Columns[2].Description)
	}
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	c := newCandidate()
	c.CreationTimestamp = metav1.NewTime(now.Add(-90 * time.Second))
	if diff := cmp.Diff([]any{"kcm-node-1", "kube-controller-manager", "1.36.0", "1.35.0", "90s"}, k.Table.Row(c, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

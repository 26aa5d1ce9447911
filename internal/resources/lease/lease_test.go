package lease_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/lease"
)

func render(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Error())
	}
	return out
}

func ptr[T any](v T) *T { return &v }

const (
	dnsSubdomainMsg  = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	qualifiedNameMsg = "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
	namePartMsg      = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)

func newLease() *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "leader", Namespace: "kube-system", ResourceVersion: "7"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr("node-1"),
			LeaseDurationSeconds: ptr(int32(15)),
			LeaseTransitions:     ptr(int32(0)),
		},
	}
}

func TestDescription(t *testing.T) {
	r := lease.New(lease.Options{})
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	v := r.Versions[0]
	got := []any{
		v.GroupVersion.String(), r.Names.Kind, r.Names.ListKind, r.Names.Plural, r.Names.Singular, r.KeyPath, r.Names.ShortNames,
		r.Namespaced, r.Updates.AllowCreateOnUpdate, r.Updates.AllowUnconditionalUpdate, r.Fields.Labels,
		r.StorageVersionHash(), len(r.Subresources), r.ServedVerbs(), v.Default != nil, len(r.Versions),
	}
	want := []any{
		"coordination.k8s.io/v1", "Lease", "LeaseList", "leases", "lease", "leases", []string(nil),
		true, true, false, []string{"metadata.name", "metadata.namespace"},
		"gqkMMb/YqFM=", 0, resources.AllVerbs, false, 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("description (-want +got):\n%s", diff)
	}
	if _, ok := v.New().(*coordinationv1.Lease); !ok {
		t.Errorf("New() = %T", v.New())
	}
	if _, ok := v.NewList().(*coordinationv1.LeaseList); !ok {
		t.Errorf("NewList() = %T", v.NewList())
	}
	if diff := cmp.Diff(fields.Set{"metadata.name": "leader", "metadata.namespace": "kube-system"}, fieldSet(r, newLease())); diff != "" {
		t.Errorf("Fields (-want +got):\n%s", diff)
	}
}

// specCases hold the spec rules (L2-L6), which create and update share.
var specCases = []struct {
	name string
	spec func(s *coordinationv1.LeaseSpec)
	want []string
}{
	{name: "valid", spec: func(s *coordinationv1.LeaseSpec) {}},
	{name: "empty spec", spec: func(s *coordinationv1.LeaseSpec) { *s = coordinationv1.LeaseSpec{} }},
	{
		name: "any holder and times, in any order",
		spec: func(s *coordinationv1.LeaseSpec) {
			s.HolderIdentity = ptr("")
			s.AcquireTime = &metav1.MicroTime{Time: time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC)}
			s.RenewTime = &metav1.MicroTime{Time: time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)}
		},
	},
	{
		name: "zero duration",
		spec: func(s *coordinationv1.LeaseSpec) { s.LeaseDurationSeconds = ptr(int32(0)) },
		want: []string{`FieldValueInvalid spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0`},
	},
	{
		name: "negative duration and transitions",
		spec: func(s *coordinationv1.LeaseSpec) {
			s.LeaseDurationSeconds = ptr(int32(-3))
			s.LeaseTransitions = ptr(int32(-1))
		},
		want: []string{
			`FieldValueInvalid spec.leaseDurationSeconds: Invalid value: -3: must be greater than 0`,
			`FieldValueInvalid spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0`,
		},
	},
	{
		name: "known strategy",
		spec: func(s *coordinationv1.LeaseSpec) {
			s.Strategy = ptr(coordinationv1.OldestEmulationVersion)
			s.PreferredHolder = ptr("node-2")
		},
	},
	{
		name: "unknown strategy on the doubled path",
		spec: func(s *coordinationv1.LeaseSpec) { s.Strategy = ptr(coordinationv1.CoordinatedLeaseStrategy("Newest")) },
		want: []string{`FieldValueNotSupported spec.strategy.strategy: Unsupported value: "Newest": supported values: "OldestEmulationVersion"`},
	},
	{
		name: "strategy value rendered as JSON",
		spec: func(s *coordinationv1.LeaseSpec) { s.Strategy = ptr(coordinationv1.CoordinatedLeaseStrategy("a<b")) },
		want: []string{`FieldValueNotSupported spec.strategy.strategy: Unsupported value: "a\u003cb": supported values: "OldestEmulationVersion"`},
	},
	{
		name: "empty strategy with a preferred holder",
		spec: func(s *coordinationv1.LeaseSpec) {
			s.Strategy = ptr(coordinationv1.CoordinatedLeaseStrategy(""))
			s.PreferredHolder = ptr("node-2")
		},
		want: []string{
			`FieldValueNotSupported spec.strategy.strategy: Unsupported value: "": supported values: "OldestEmulationVersion"`,
			"FieldValueForbidden spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined",
		},
	},
	{
		name: "qualified custom strategy",
		spec: func(s *coordinationv1.LeaseSpec) {
			s.Strategy = ptr(coordinationv1.CoordinatedLeaseStrategy("example.com/Mine"))
		},
	},
	{
		name: "custom strategy with a bad name part",
		spec: func(s *coordinationv1.LeaseSpec) {
			s.Strategy = ptr(coordinationv1.CoordinatedLeaseStrategy("example.com/-x"))
		},
		want: []string{`FieldValueInvalid spec.strategy.strategy: Invalid value: "example.com/-x": ` + namePartMsg},
	},
	{
		name: "custom strategy with two slashes",
		spec: func(s *coordinationv1.LeaseSpec) { s.Strategy = ptr(coordinationv1.CoordinatedLeaseStrategy("a/b/c")) },
		want: []string{`FieldValueInvalid spec.strategy.strategy: Invalid value: "a/b/c": ` + qualifiedNameMsg},
	},
	{
		name: "preferred holder without strategy",
		spec: func(s *coordinationv1.LeaseSpec) { s.PreferredHolder = ptr("node-2") },
		want: []string{"FieldValueForbidden spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"},
	},
	{
		name: "empty preferred holder without strategy",
		spec: func(s *coordinationv1.LeaseSpec) { s.PreferredHolder = ptr("") },
	},
}

func TestValidate(t *testing.T) {
	r := lease.New(lease.Options{CoordinatedLeaderElection: true})
	cases := []struct {
		name  string
		lease func(l *coordinationv1.Lease)
		want  []string
	}{
		{name: "dotted name", lease: func(l *coordinationv1.Lease) { l.Name = "kube-controller-manager.example" }},
		{
			name:  "name is a DNS subdomain",
			lease: func(l *coordinationv1.Lease) { l.Name = "Leader" },
			want:  []string{`FieldValueInvalid metadata.name: Invalid value: "Leader": ` + dnsSubdomainMsg},
		},
		{
			name:  "name required",
			lease: func(l *coordinationv1.Lease) { l.Name = "" },
			want:  []string{`FieldValueRequired metadata.name: Required value: name or generateName is required`},
		},
		{
			name:  "namespace required",
			lease: func(l *coordinationv1.Lease) { l.Namespace = "" },
			want:  []string{`FieldValueRequired metadata.namespace: Required value`},
		},
		{
			// Lease uses apimachinery's metadata rules, without core's
			// legacy finalizer rule.
			name:  "finalizer without a slash",
			lease: func(l *coordinationv1.Lease) { l.Finalizers = []string{"mine"} },
		},
		{
			name: "metadata and spec errors together",
			lease: func(l *coordinationv1.Lease) {
				l.Labels = map[string]string{"-x": ""}
				l.Spec.LeaseDurationSeconds = ptr(int32(0))
			},
			want: []string{
				`FieldValueInvalid metadata.labels: Invalid value: "-x": ` + namePartMsg,
				`FieldValueInvalid spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0`,
			},
		},
	}
	for _, tc := range specCases {
		cases = append(cases, struct {
			name  string
			lease func(l *coordinationv1.Lease)
			want  []string
		}{"spec/" + tc.name, func(l *coordinationv1.Lease) { tc.spec(&l.Spec) }, tc.want})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLease()
			l.ResourceVersion = ""
			tc.lease(l)
			if diff := cmp.Diff(tc.want, render(r.Strategy.Validate(l, coordinationv1.SchemeGroupVersion))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	r := lease.New(lease.Options{CoordinatedLeaderElection: true})
	immutable := `FieldValueInvalid metadata.name: Invalid value: "other": field is immutable`
	cases := []struct {
		name  string
		lease func(l *coordinationv1.Lease)
		want  []string
	}{
		{
			name: "every spec field may change",
			lease: func(l *coordinationv1.Lease) {
				l.Spec = coordinationv1.LeaseSpec{
					HolderIdentity:       ptr("node-2"),
					LeaseDurationSeconds: ptr(int32(40)),
					LeaseTransitions:     ptr(int32(9)),
					AcquireTime:          &metav1.MicroTime{Time: time.Now()},
					RenewTime:            &metav1.MicroTime{Time: time.Now()},
				}
			},
		},
		{
			// The generic update checks and the kind's both report it.
			name:  "name immutable",
			lease: func(l *coordinationv1.Lease) { l.Name = "other" },
			want:  []string{immutable, immutable},
		},
		{
			name:  "resourceVersion required",
			lease: func(l *coordinationv1.Lease) { l.ResourceVersion = "" },
			want: []string{
				`FieldValueInvalid metadata.resourceVersion: Invalid value: "": must be specified for an update`,
				`FieldValueInvalid metadata.resourceVersion: Invalid value: "": must be specified for an update`,
			},
		},
		{
			// Only the generic create pass looks at finalizer names on
			// update.
			name:  "bad finalizer",
			lease: func(l *coordinationv1.Lease) { l.Finalizers = []string{"example.com/-x"} },
			want:  []string{`FieldValueInvalid metadata.finalizers: Invalid value: "example.com/-x": ` + namePartMsg},
		},
	}
	for _, tc := range specCases {
		cases = append(cases, struct {
			name  string
			lease func(l *coordinationv1.Lease)
			want  []string
		}{"spec/" + tc.name, func(l *coordinationv1.Lease) { tc.spec(&l.Spec) }, tc.want})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, l := newLease(), newLease()
			tc.lease(l)
			if diff := cmp.Diff(tc.want, render(r.Strategy.ValidateUpdate(l, old, coordinationv1.SchemeGroupVersion))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGatedFields(t *testing.T) {
	strategy := ptr(coordinationv1.OldestEmulationVersion)
	cases := []struct {
		name          string
		gate          bool
		old           *coordinationv1.LeaseSpec // nil: create
		strategy      *coordinationv1.CoordinatedLeaseStrategy
		holder        *string
		wantStrategy  *coordinationv1.CoordinatedLeaseStrategy
		wantPreferred *string
	}{
		{name: "create, gate off", strategy: strategy, holder: ptr("b")},
		{name: "create, gate on", gate: true, strategy: strategy, holder: ptr("b"), wantStrategy: strategy, wantPreferred: ptr("b")},
		{name: "update, gate off, old has neither", old: &coordinationv1.LeaseSpec{}, strategy: strategy, holder: ptr("b")},
		{
			name: "update, gate off, old has strategy",
			old:  &coordinationv1.LeaseSpec{Strategy: strategy}, strategy: strategy, holder: ptr("b"),
			wantStrategy: strategy,
		},
		{
			name: "update, gate off, old has preferredHolder",
			old:  &coordinationv1.LeaseSpec{PreferredHolder: ptr("a")}, strategy: strategy, holder: ptr("b"),
			wantPreferred: ptr("b"),
		},
		{
			name: "update, gate off, old has both",
			old:  &coordinationv1.LeaseSpec{Strategy: strategy, PreferredHolder: ptr("a")}, strategy: strategy, holder: ptr("b"),
			wantStrategy: strategy, wantPreferred: ptr("b"),
		},
		{
			name: "update, gate on", gate: true,
			old: &coordinationv1.LeaseSpec{}, strategy: strategy, holder: ptr("b"),
			wantStrategy: strategy, wantPreferred: ptr("b"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := lease.New(lease.Options{CoordinatedLeaderElection: tc.gate})
			l := newLease()
			l.Spec.Strategy, l.Spec.PreferredHolder = tc.strategy, tc.holder
			if tc.old == nil {
				r.Strategy.PrepareForCreate(l)
			} else {
				old := newLease()
				old.Spec = *tc.old
				r.Strategy.PrepareForUpdate(l, old)
			}
			if diff := cmp.Diff(tc.wantStrategy, l.Spec.Strategy); diff != "" {
				t.Errorf("strategy (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPreferred, l.Spec.PreferredHolder); diff != "" {
				t.Errorf("preferredHolder (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ptr("node-1"), l.Spec.HolderIdentity); diff != "" {
				t.Errorf("holderIdentity touched (-want +got):\n%s", diff)
			}
		})
	}
}

func TestColumns(t *testing.T) {
	type col struct {
		Name, Type, Format string
		Priority           int32
	}
	var got []col
	for _, c := range lease.New(lease.Options{}).Table.Columns {
		got = append(got, col{c.Name, c.Type, c.Format, c.Priority})
		if c.Description == "" {
			t.Errorf("column %s has no description", c.Name)
		}
	}
	want := []col{
		{"Name", "string", "name", 0},
		{"Holder", "string", "", 0},
		{"Age", "string", "", 0},
		{"Duration", "string", "", 1},
		{"Renewed", "string", "", 1},
		{"Transitions", "string", "", 1},
		{"Expired", "string", "", 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	holder := lease.New(lease.Options{}).Table.Columns[1].Description
	if !strings.HasPrefix(holder, "holderIdentity contains the identity of the holder of a current lease.") {
		t.Errorf("Holder description = %q", holder)
	}
}

func TestRow(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	micro := func(d time.Duration) *metav1.MicroTime { return &metav1.MicroTime{Time: now.Add(d)} }
	cases := []struct {
		name  string
		lease func(l *coordinationv1.Lease)
		want  []any
	}{
		{
			name: "live lease",
			lease: func(l *coordinationv1.Lease) {
				l.CreationTimestamp = metav1.NewTime(now.Add(-200 * time.Second))
				l.Spec.RenewTime = micro(-5 * time.Second)
				l.Spec.LeaseTransitions = ptr(int32(3))
			},
			want: []any{"leader", "node-1", "3m20s", "15s", "5s", "3", "false"},
		},
		{
			name: "expired lease",
			lease: func(l *coordinationv1.Lease) {
				l.CreationTimestamp = metav1.NewTime(now.Add(-3 * 24 * time.Hour))
				l.Spec.RenewTime = micro(-16 * time.Second)
			},
			want: []any{"leader", "node-1", "3d", "15s", "16s", "0", "true"},
		},
		{
			name:  "expires exactly now",
			lease: func(l *coordinationv1.Lease) { l.Spec.RenewTime = micro(-15 * time.Second) },
			want:  []any{"leader", "node-1", "<unknown>", "15s", "15s", "0", "true"},
		},
		{
			name:  "released lease",
			lease: func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr(""); l.Spec.RenewTime = micro(-time.Second) },
			want:  []any{"leader", "", "<unknown>", "15s", "1s", "0", "false"},
		},
		{
			// What client-go's release() writes, its second long gone:
			// released, not expired.
			name: "released by client-go",
			lease: func(l *coordinationv1.Lease) {
				l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = ptr(""), ptr(int32(1)), micro(-time.Hour)
			},
			want: []any{"leader", "", "<unknown>", "1s", "60m", "0", "false"},
		},
		{
			name:  "empty spec",
			lease: func(l *coordinationv1.Lease) { l.Spec = coordinationv1.LeaseSpec{} },
			want:  []any{"leader", "", "<unknown>", "<none>", "<none>", "<none>", "false"},
		},
		{
			name: "renewed without duration",
			lease: func(l *coordinationv1.Lease) {
				l.Spec.LeaseDurationSeconds = nil
				l.Spec.RenewTime = micro(-time.Minute)
			},
			want: []any{"leader", "node-1", "<unknown>", "<none>", "60s", "0", "true"},
		},
	}
	r := lease.New(lease.Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLease()
			tc.lease(l)
			got := r.Table.Row(l, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
			if len(got) != len(r.Table.Columns) {
				t.Errorf("row has %d cells for %d columns", len(got), len(r.Table.Columns))
			}
		})
	}
}

var _ resources.Object = &coordinationv1.Lease{}

func fieldSet(r *resources.Kind, obj resources.Object) fields.Set {
	set := fields.Set{}
	for _, l := range r.Fields.Labels {
		set[l] = r.Fields.Value(obj, l)
	}
	return set
}

package resources_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/resources"
)

// render shows each error as its cause type plus the text kube-apiserver
// puts in a 422 message.
func render(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Error())
	}
	return out
}

const (
	dnsSubdomainMsg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	labelValueMsg   = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
	namePartMsg     = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)

func valid() *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: "a", Namespace: "ns"}
}

func TestValidateObjectMeta(t *testing.T) {
	isTrue := true
	cases := []struct {
		name       string
		meta       func(m *metav1.ObjectMeta)
		namespaced bool
		want       []string
	}{
		{name: "valid", namespaced: true, meta: func(m *metav1.ObjectMeta) {}},
		{
			name: "name and generateName missing", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Name = "" },
			want: []string{`FieldValueRequired metadata.name: Required value: name or generateName is required`},
		},
		{
			name: "invalid name", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Name = "A" },
			want: []string{`FieldValueInvalid metadata.name: Invalid value: "A": ` + dnsSubdomainMsg},
		},
		{
			name: "generateName checked as a prefix", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.GenerateName = "ok-"; m.Name = "ok-x7k2b" },
		},
		{
			name: "invalid generateName", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.GenerateName = "Bad-"; m.Name = "Bad-x7k2b" },
			want: []string{
				`FieldValueInvalid metadata.generateName: Invalid value: "Bad-": ` + dnsSubdomainMsg,
				`FieldValueInvalid metadata.name: Invalid value: "Bad-x7k2b": ` + dnsSubdomainMsg,
			},
		},
		{
			name: "namespace required", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Namespace = "" },
			want: []string{`FieldValueRequired metadata.namespace: Required value`},
		},
		{
			name: "namespace must be a label", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Namespace = "a.b" },
			want: []string{`FieldValueInvalid metadata.namespace: Invalid value: "a.b": must not contain dots`},
		},
		{
			name: "namespace forbidden on cluster-scoped",
			meta: func(m *metav1.ObjectMeta) { m.Namespace = "ns" },
			want: []string{`FieldValueForbidden metadata.namespace: Forbidden: not allowed on this type`},
		},
		{
			name: "negative generation", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Generation = -1 },
			want: []string{`FieldValueInvalid metadata.generation: Invalid value: -1: must be greater than or equal to 0`},
		},
		{
			name: "label key and value", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"-x": "a b"} },
			want: []string{
				`FieldValueInvalid metadata.labels: Invalid value: "-x": ` + namePartMsg,
				`FieldValueInvalid metadata.labels: Invalid value: "a b": ` + labelValueMsg,
			},
		},
		{
			name: "label value too long", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"k": strings.Repeat("v", 64)} },
			want: []string{`FieldValueInvalid metadata.labels: Invalid value: "` + strings.Repeat("v", 64) + `": must be no more than 63 bytes`},
		},
		{
			name: "annotation keys are checked lower-cased", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{"Example.COM/Key": "v"} },
		},
		{
			name: "invalid annotation key", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{"-x": ""} },
			want: []string{`FieldValueInvalid metadata.annotations: Invalid value: "-x": ` + namePartMsg},
		},
		{
			name: "annotations at the size limit", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{"k": strings.Repeat("v", 256*1024-1)} },
		},
		{
			name: "annotations over the size limit", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{"k": strings.Repeat("v", 256*1024)} },
			want: []string{`FieldValueTooLong metadata.annotations: Too long: may not be more than 262144 bytes`},
		},
		{
			name: "invalid finalizer name", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Finalizers = []string{"example.com/-x"} },
			want: []string{`FieldValueInvalid metadata.finalizers: Invalid value: "example.com/-x": ` + namePartMsg},
		},
		{
			name: "standard finalizers without a slash", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Finalizers = []string{"kubernetes", "orphan", "example.com/x"} },
		},
		{
			name: "non-standard finalizer without a slash", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Finalizers = []string{"example.com/x", "mine"} },
			want: []string{`FieldValueInvalid metadata.finalizers[1]: Invalid value: "mine": name is neither a standard finalizer name nor is it fully qualified`},
		},
		{
			name: "orphan with foregroundDeletion", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.Finalizers = []string{"orphan", "foregroundDeletion"} },
			want: []string{`FieldValueInvalid metadata.finalizers: Invalid value: ["orphan","foregroundDeletion"]: finalizer orphan and foregroundDeletion cannot be both set`},
		},
		{
			name: "owner reference fields required", namespaced: true,
			meta: func(m *metav1.ObjectMeta) { m.OwnerReferences = []metav1.OwnerReference{{}} },
			want: []string{
				`FieldValueRequired metadata.ownerReferences[0].apiVersion: Required value: must not be empty`,
				`FieldValueRequired metadata.ownerReferences[0].kind: Required value: must not be empty`,
				`FieldValueRequired metadata.ownerReferences[0].name: Required value: must not be empty`,
				`FieldValueRequired metadata.ownerReferences[0].uid: Required value: must not be empty`,
			},
		},
		{
			name: "owner reference bad apiVersion", namespaced: true,
			meta: func(m *metav1.ObjectMeta) {
				m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "a/b/c", Kind: "K", Name: "n", UID: "u"}}
			},
			want: []string{`FieldValueInvalid metadata.ownerReferences[0].apiVersion: Invalid value: "a/b/c": must be <group>/<version> or <version>`},
		},
		{
			name: "Event cannot own", namespaced: true,
			meta: func(m *metav1.ObjectMeta) {
				m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Event", Name: "e", UID: "u"}}
			},
			want: []string{`FieldValueInvalid metadata.ownerReferences[0]: Invalid value: {"apiVersion":"v1","kind":"Event","name":"e","uid":"u"}: /v1, Kind=Event is disallowed from being an owner`},
		},
		{
			name: "two controllers", namespaced: true,
			meta: func(m *metav1.ObjectMeta) {
				m.OwnerReferences = []metav1.OwnerReference{
					{APIVersion: "v1", Kind: "A", Name: "a", UID: "1", Controller: &isTrue},
					{APIVersion: "v1", Kind: "B", Name: "b", UID: "2", Controller: &isTrue},
				}
			},
			want: []string{`FieldValueInvalid metadata.ownerReferences: Invalid value: [{"apiVersion":"v1","kind":"A","name":"a","uid":"1","controller":true},{"apiVersion":"v1","kind":"B","name":"b","uid":"2","controller":true}]: Only one reference can have Controller set to true. Found "true" in references for A/a and B/b`},
		},
		{
			name: "managedFields operation", namespaced: true,
			meta: func(m *metav1.ObjectMeta) {
				m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Operation: "Patch"}}
			},
			want: []string{`FieldValueNotSupported metadata.managedFields[0].operation: Unsupported value: "Patch": supported values: "Apply", "Update"`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := valid()
			if !tc.namespaced {
				m.Namespace = ""
			}
			tc.meta(m)
			got := render(resources.ValidateObjectMeta(m, tc.namespaced, apivalidation.NameIsDNSSubdomain))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateObjectMetaUpdate(t *testing.T) {
	created := metav1.NewTime(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
	deleting := metav1.NewTime(created.Add(time.Hour))
	grace := int64(0)
	old := func() *metav1.ObjectMeta {
		return &metav1.ObjectMeta{
			Name: "a", Namespace: "ns", UID: "u1", ResourceVersion: "5", Generation: 2,
			CreationTimestamp: created, Finalizers: []string{"example.com/f"},
		}
	}
	cases := []struct {
		name string
		old  func(m *metav1.ObjectMeta)
		new  func(m *metav1.ObjectMeta)
		want []string
	}{
		{name: "unchanged", new: func(m *metav1.ObjectMeta) {}},
		{
			name: "resourceVersion required",
			new:  func(m *metav1.ObjectMeta) { m.ResourceVersion = "" },
			want: []string{`FieldValueInvalid metadata.resourceVersion: Invalid value: "": must be specified for an update`},
		},
		{
			name: "immutable name, namespace, uid, creationTimestamp",
			new: func(m *metav1.ObjectMeta) {
				m.Name, m.Namespace, m.UID = "b", "other", "u2"
				m.CreationTimestamp = metav1.NewTime(created.Add(time.Second))
			},
			want: []string{
				`FieldValueInvalid metadata.name: Invalid value: "b": field is immutable`,
				`FieldValueInvalid metadata.namespace: Invalid value: "other": field is immutable`,
				`FieldValueInvalid metadata.uid: Invalid value: "u2": field is immutable`,
				`FieldValueInvalid metadata.creationTimestamp: Invalid value: "2024-01-02T03:04:06Z": field is immutable`,
			},
		},
		{
			name: "deletionTimestamp and grace period immutable",
			old: func(m *metav1.ObjectMeta) {
				m.DeletionTimestamp = &deleting
				m.DeletionGracePeriodSeconds = &grace
			},
			new: func(m *metav1.ObjectMeta) {},
			want: []string{
				`FieldValueInvalid metadata.deletionTimestamp: Invalid value: null: field is immutable`,
				`FieldValueInvalid metadata.deletionGracePeriodSeconds: Invalid value: null: field is immutable`,
			},
		},
		{
			name: "generation not decremented",
			new:  func(m *metav1.ObjectMeta) { m.Generation = 1 },
			want: []string{`FieldValueInvalid metadata.generation: Invalid value: 1: must not be decremented`},
		},
		{
			name: "no new finalizers while deleting",
			old:  func(m *metav1.ObjectMeta) { m.DeletionTimestamp = &deleting },
			new: func(m *metav1.ObjectMeta) {
				m.DeletionTimestamp = &deleting
				m.Finalizers = []string{"example.com/f", "example.com/g"}
			},
			want: []string{`FieldValueForbidden metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/g"}`},
		},
		{
			name: "finalizers may be removed while deleting",
			old:  func(m *metav1.ObjectMeta) { m.DeletionTimestamp = &deleting },
			new: func(m *metav1.ObjectMeta) {
				m.DeletionTimestamp = &deleting
				m.Finalizers = nil
			},
		},
		{
			// apimachinery's update rules skip finalizer names; core adds
			// only the legacy-name rule.
			name: "legacy finalizer name on update",
			new:  func(m *metav1.ObjectMeta) { m.Finalizers = []string{"example.com/-x", "mine"} },
			want: []string{`FieldValueInvalid metadata.finalizers[1]: Invalid value: "mine": name is neither a standard finalizer name nor is it fully qualified`},
		},
		{
			name: "labels checked on update",
			new:  func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"k": "a b"} },
			want: []string{`FieldValueInvalid metadata.labels: Invalid value: "a b": ` + labelValueMsg},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, n := old(), old()
			if tc.old != nil {
				tc.old(o)
			}
			tc.new(n)
			got := render(resources.CheckMetaUpdate(n, o).CoreErrors(n))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateCreate(t *testing.T) {
	kindErr := field.Invalid(field.NewPath("spec"), "x", "bad")
	cases := []struct {
		name     string
		objName  string
		kindErrs field.ErrorList
		want     []string
	}{
		{name: "kind errors returned alone", objName: "a/b", kindErrs: field.ErrorList{kindErr}, want: []string{`FieldValueInvalid spec: Invalid value: "x": bad`}},
		{name: "generic pass when kind checks passed", objName: "a/b", want: []string{`FieldValueInvalid metadata.name: Invalid value: "a/b": may not contain '/'`}},
		{name: "dot-dot", objName: "..", want: []string{`FieldValueInvalid metadata.name: Invalid value: "..": may not be '..'`}},
		{name: "clean", objName: "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &metav1.ObjectMeta{Name: tc.objName, Namespace: "ns"}
			got := render(resources.ValidateCreate(m, true, tc.kindErrs))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdateRepeatsCommonErrors(t *testing.T) {
	old := &metav1.ObjectMeta{Name: "a", Namespace: "ns", ResourceVersion: "1"}
	n := old.DeepCopy()
	n.Labels = map[string]string{"k": "a b"}
	meta := resources.CheckMetaUpdate(n, old)
	kind := meta.CoreErrors(n)
	got := render(resources.ValidateUpdate(n, true, meta, kind))
	label := `FieldValueInvalid metadata.labels: Invalid value: "a b": ` + labelValueMsg
	// Once by the generic create pass, once by the generic update pass and
	// once by the kind's own update rules, as kube-apiserver reports it.
	want := []string{label, label, label}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		t    metav1.Time
		want string
	}{
		{"zero", metav1.Time{}, "<unknown>"},
		{"seconds", metav1.NewTime(now.Add(-45 * time.Second)), "45s"},
		{"minutes and seconds", metav1.NewTime(now.Add(-200 * time.Second)), "3m20s"},
		{"hours and minutes", metav1.NewTime(now.Add(-125 * time.Minute)), "125m"},
		{"days and hours", metav1.NewTime(now.Add(-(3*24 + 4) * time.Hour)), "3d4h"},
		{"years and days", metav1.NewTime(now.Add(-(2*365 + 10) * 24 * time.Hour)), "2y10d"},
		{"slightly in the future", metav1.NewTime(now.Add(time.Second)), "0s"},
		{"in the future", metav1.NewTime(now.Add(3 * time.Second)), "<invalid>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := resources.Age(tc.t, now); got != tc.want {
				t.Errorf("Age = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestColumns(t *testing.T) {
	name, age := resources.NameColumn(), resources.AgeColumn()
	if name.Name != "Name" || name.Type != "string" || name.Format != "name" || !strings.HasPrefix(name.Description, "Name must be unique within a namespace.") {
		t.Errorf("NameColumn = %+v", name)
	}
	if age.Name != "Age" || age.Type != "string" || age.Format != "" || !strings.HasPrefix(age.Description, "CreationTimestamp is a timestamp") {
		t.Errorf("AgeColumn = %+v", age)
	}
}

// TestCheckMetaUpdate holds CheckMetaUpdate's shortcut (when no immutable
// field changed) to apimachinery's ValidateObjectMetaAccessorUpdate: the
// same errors, field for field, over generated pairs of metadata that
// change one or several fields, validly or not.
func TestCheckMetaUpdate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// A time with a monotonic reading, as time.Now gives.
	created := metav1.NewTime(time.Now())
	pick := func(vs ...string) string { return vs[rng.IntN(len(vs))] }
	grace := func() *int64 {
		if rng.IntN(3) == 0 {
			return nil
		}
		g := int64(rng.IntN(2) * 30)
		return &g
	}
	gen := func() *metav1.ObjectMeta {
		m := &metav1.ObjectMeta{
			Name: pick("a", "b"), Namespace: pick("ns", "other"), UID: types.UID(pick("u1", "u2")),
			ResourceVersion: pick("5", "5", ""), Generation: int64(rng.IntN(4) - 1),
			CreationTimestamp: created, DeletionGracePeriodSeconds: grace(),
			Finalizers: []string{pick("x/a", "x/b", "x/a", metav1.FinalizerOrphanDependents), pick("x/b", "x/b", metav1.FinalizerDeleteDependents, "bad name!")}[:rng.IntN(3)],
		}
		if rng.IntN(8) == 0 { // what the create rules refuse
			m.Name = pick("a/b", "..", "", "a%b", m.Name)
			m.Namespace = pick("Bad_NS", "", m.Namespace)
			m.GenerateName = pick("g-", "g/", "")
		}
		switch rng.IntN(5) {
		case 0: // the same instant in another zone
			m.CreationTimestamp = metav1.NewTime(created.In(time.FixedZone("x", 3600)))
		case 1: // the same instant without the monotonic reading
			m.CreationTimestamp = metav1.NewTime(created.Round(0))
		case 2:
			m.CreationTimestamp = metav1.NewTime(created.Add(time.Second))
		}
		if rng.IntN(4) == 0 {
			d := metav1.NewTime(created.Add(time.Minute * time.Duration(rng.IntN(2))))
			m.DeletionTimestamp = &d
		}
		if rng.IntN(2) == 0 {
			m.Labels = map[string]string{pick("app", "bad key!", "x/y"): pick("v", "bad value!", "")}
		}
		if rng.IntN(2) == 0 {
			m.Annotations = map[string]string{pick("note", "bad key!"): "v"}
		}
		if rng.IntN(3) == 0 {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: pick("v1", ""), Kind: "Pod", Name: pick("p", ""), UID: types.UID(pick("u", ""))}}
		}
		if rng.IntN(3) == 0 {
			m.ManagedFields = []metav1.ManagedFieldsEntry{{
				Manager:     pick("m", "m", "tab\tm", "\xffm", strings.Repeat("m", 128), strings.Repeat("m", 129)),
				Operation:   metav1.ManagedFieldsOperationType(pick("Update", "Apply", "Bad", "")),
				FieldsType:  pick("FieldsV1", "", "FieldsV2"),
				Subresource: pick("", "status", strings.Repeat("s", 256), strings.Repeat("s", 257)),
			}}
		}
		return m
	}
	shortcuts, failing, createShortcuts, createFailing := 0, 0, 0, 0
	segmentName := func(name string, prefix bool) []string {
		if prefix {
			return content.IsPathSegmentPrefix(name)
		}
		return content.IsPathSegmentName(name)
	}
	for i := range 20000 {
		old := gen()
		obj := old.DeepCopy()
		if rng.IntN(3) > 0 {
			obj = gen()
			// Mostly a few fields apart, as real updates are.
			if rng.IntN(2) == 0 {
				obj.Name, obj.Namespace, obj.UID = old.Name, old.Namespace, old.UID
			}
		}
		meta := resources.CheckMetaUpdate(obj, old)
		got := meta.Errors()
		want := apivalidation.ValidateObjectMetaAccessorUpdate(obj, old, field.NewPath("metadata"))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("case %d: %+v against %+v: (-apimachinery +ours)\n%s", i, obj, old, diff)
		}
		// ValidateUpdate: the create rules (kube-apiserver's generic
		// ones, path-segment names), then the update's.
		namespaced := rng.IntN(4) > 0
		if !namespaced && rng.IntN(2) == 0 {
			obj.Namespace, old.Namespace = "", ""
			meta = resources.CheckMetaUpdate(obj, old)
		}
		gotAll := resources.ValidateUpdate(obj, namespaced, meta, nil)
		wantAll := append(apivalidation.ValidateObjectMetaAccessor(obj, namespaced, segmentName, field.NewPath("metadata")),
			apivalidation.ValidateObjectMetaAccessorUpdate(obj, old, field.NewPath("metadata"))...)
		if diff := cmp.Diff(wantAll, gotAll); diff != "" {
			t.Fatalf("case %d (namespaced %v): %+v against %+v: (-apimachinery +ours)\n%s", i, namespaced, obj, old, diff)
		}
		if len(meta.Errors()) == 0 {
			createShortcuts++
			if len(wantAll) > 0 {
				createFailing++
			}
		}
		if obj.DeletionTimestamp == nil && old.DeletionTimestamp == nil && obj.ResourceVersion != "" &&
			obj.Name == old.Name && obj.Namespace == old.Namespace && obj.UID == old.UID && obj.Generation >= max(old.Generation, 0) {
			shortcuts++
			if len(want) > 0 {
				failing++
			}
		}
	}
	// Enough of them take the shortcut, with and without errors.
	if shortcuts < 2000 || failing < 500 {
		t.Errorf("%d cases could take the shortcut, %d of them with errors", shortcuts, failing)
	}
	if createShortcuts < 600 || createFailing < 150 || createShortcuts-createFailing < 300 {
		t.Errorf("%d updates could skip the create rules, %d of them with errors", createShortcuts, createFailing)
	}
}

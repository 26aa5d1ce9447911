package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1ac "k8s.io/client-go/applyconfigurations/coordination/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/util/proto"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

const (
	leasesPath    = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	endpointsPath = "/api/v1/namespaces/default/endpoints"
)

// managedEntry is the part of a managedFields entry the tests compare:
// time varies, apiVersion and fieldsType are checked once.
type managedEntry struct {
	Manager   string
	Operation metav1.ManagedFieldsOperationType
	Fields    string
}

// managed returns obj's managedFields ordered by operation and manager
// (the server orders them by time, which ties within a second).
func managed(t testing.TB, obj metav1.Object, apiVersion string) []managedEntry {
	t.Helper()
	var out []managedEntry
	for _, e := range obj.GetManagedFields() {
		if e.APIVersion != apiVersion || e.FieldsType != "FieldsV1" || e.FieldsV1 == nil {
			t.Errorf("managedFields entry %+v: want apiVersion %s, fieldsType FieldsV1", e, apiVersion)
			continue
		}
		out = append(out, managedEntry{Manager: e.Manager, Operation: e.Operation, Fields: string(e.FieldsV1.Raw)})
	}
	slices.SortFunc(out, func(a, b managedEntry) int {
		return strings.Compare(string(a.Operation)+a.Manager, string(b.Operation)+b.Manager)
	})
	return out
}

const leaseAPIVersion = "coordination.k8s.io/v1"

// TestPatchTypes applies each patch type through the typed clientset, in
// JSON and protobuf, and checks the stored result.
func TestPatchTypes(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for enc, c := range s.Clients(t) {
		t.Run(enc, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			leases := c.CoordinationV1().Leases("default")
			name := "patch-" + enc
			must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"a": "1"}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("alice"), LeaseDurationSeconds: ptr[int32](10),
					LeaseTransitions: ptr[int32](1)},
			}, metav1.CreateOptions{}))
			type state struct {
				Labels map[string]string
				Spec   coordinationv1.LeaseSpec
			}
			steps := []struct {
				name  string
				typ   types.PatchType
				patch string
				want  state
			}{
				{"json add", types.JSONPatchType, `[{"op":"add","path":"/metadata/labels/b","value":"2"}]`,
					state{map[string]string{"a": "1", "b": "2"}, coordinationv1.LeaseSpec{HolderIdentity: ptr("alice"), LeaseDurationSeconds: ptr[int32](10), LeaseTransitions: ptr[int32](1)}}},
				{"json test and replace", types.JSONPatchType, `[{"op":"test","path":"/spec/holderIdentity","value":"alice"},{"op":"replace","path":"/spec/holderIdentity","value":"bob"}]`,
					state{map[string]string{"a": "1", "b": "2"}, coordinationv1.LeaseSpec{HolderIdentity: ptr("bob"), LeaseDurationSeconds: ptr[int32](10), LeaseTransitions: ptr[int32](1)}}},
				{"json remove", types.JSONPatchType, `[{"op":"remove","path":"/spec/leaseTransitions"},{"op":"remove","path":"/metadata/labels/a"}]`,
					state{map[string]string{"b": "2"}, coordinationv1.LeaseSpec{HolderIdentity: ptr("bob"), LeaseDurationSeconds: ptr[int32](10)}}},
				{"json copy and move", types.JSONPatchType, `[{"op":"copy","from":"/metadata/labels/b","path":"/metadata/labels/c"},{"op":"move","from":"/metadata/labels/b","path":"/metadata/labels/d"}]`,
					state{map[string]string{"c": "2", "d": "2"}, coordinationv1.LeaseSpec{HolderIdentity: ptr("bob"), LeaseDurationSeconds: ptr[int32](10)}}},
				{"merge set", types.MergePatchType, `{"metadata":{"labels":{"e":"5"}},"spec":{"holderIdentity":"carol","leaseTransitions":0}}`,
					state{map[string]string{"c": "2", "d": "2", "e": "5"}, coordinationv1.LeaseSpec{HolderIdentity: ptr("carol"), LeaseDurationSeconds: ptr[int32](10), LeaseTransitions: ptr[int32](0)}}},
				{"merge null deletes", types.MergePatchType, `{"metadata":{"labels":{"c":null}},"spec":{"leaseDurationSeconds":null}}`,
					state{map[string]string{"d": "2", "e": "5"}, coordinationv1.LeaseSpec{HolderIdentity: ptr("carol"), LeaseTransitions: ptr[int32](0)}}},
				{"merge empty string is kept", types.MergePatchType, `{"spec":{"holderIdentity":""}}`,
					state{map[string]string{"d": "2", "e": "5"}, coordinationv1.LeaseSpec{HolderIdentity: ptr(""), LeaseTransitions: ptr[int32](0)}}},
				{"strategic set", types.StrategicMergePatchType, `{"spec":{"holderIdentity":"dave","leaseDurationSeconds":30}}`,
					state{map[string]string{"d": "2", "e": "5"}, coordinationv1.LeaseSpec{HolderIdentity: ptr("dave"), LeaseDurationSeconds: ptr[int32](30), LeaseTransitions: ptr[int32](0)}}},
				{"strategic null deletes", types.StrategicMergePatchType, `{"metadata":{"labels":{"d":null}},"spec":{"leaseTransitions":null}}`,
					state{map[string]string{"e": "5"}, coordinationv1.LeaseSpec{HolderIdentity: ptr("dave"), LeaseDurationSeconds: ptr[int32](30)}}},
				{"strategic $patch replace", types.StrategicMergePatchType, `{"spec":{"$patch":"replace","holderIdentity":"erin"}}`,
					state{map[string]string{"e": "5"}, coordinationv1.LeaseSpec{HolderIdentity: ptr("erin")}}},
			}
			for _, st := range steps {
				got, err := leases.Patch(ctx, name, st.typ, []byte(st.patch), metav1.PatchOptions{})
				if err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				stored := must[*coordinationv1.Lease](t)(leases.Get(ctx, name, metav1.GetOptions{}))
				if diff := cmp.Diff(st.want, state{stored.Labels, stored.Spec}); diff != "" {
					t.Errorf("%s: stored (-want +got):\n%s", st.name, diff)
				}
				if got.ResourceVersion != stored.ResourceVersion || !cmp.Equal(got.Spec, stored.Spec) {
					t.Errorf("%s: response %s %+v, stored %s %+v", st.name, got.ResourceVersion, got.Spec, stored.ResourceVersion, stored.Spec)
				}
			}

			// Endpoints: no merge keys anywhere, so a strategic merge patch
			// naming subsets replaces the whole list (SPEC §2.8); defaults
			// apply to the result.
			eps := c.CoreV1().Endpoints("default")
			must[*corev1.Endpoints](t)(eps.Create(ctx, &corev1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Subsets: []corev1.EndpointSubset{
					{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 80}}},
					{Addresses: []corev1.EndpointAddress{{IP: "10.0.1.1"}}, Ports: []corev1.EndpointPort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
				},
			}, metav1.CreateOptions{}))
			epSteps := []struct {
				name  string
				typ   types.PatchType
				patch string
				want  []corev1.EndpointSubset
			}{
				{"strategic replaces subsets", types.StrategicMergePatchType, `{"subsets":[{"addresses":[{"ip":"10.0.0.9"}],"ports":[{"port":9}]}]}`,
					[]corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.9"}}, Ports: []corev1.EndpointPort{{Port: 9, Protocol: corev1.ProtocolTCP}}}}},
				{"strategic replaces nested lists", types.StrategicMergePatchType, `{"subsets":[{"addresses":[{"ip":"10.0.0.9"},{"ip":"10.0.0.8","hostname":"h"}],"notReadyAddresses":[{"ip":"10.0.0.7"}],"ports":[{"name":"a","port":1},{"name":"b","port":2,"protocol":"SCTP"}]}]}`,
					[]corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.9"}, {IP: "10.0.0.8", Hostname: "h"}}, NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.7"}},
						Ports: []corev1.EndpointPort{{Name: "a", Port: 1, Protocol: corev1.ProtocolTCP}, {Name: "b", Port: 2, Protocol: corev1.ProtocolSCTP}}}}},
				{"json appends an address", types.JSONPatchType, `[{"op":"add","path":"/subsets/0/addresses/-","value":{"ip":"10.0.0.6"}}]`,
					[]corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.9"}, {IP: "10.0.0.8", Hostname: "h"}, {IP: "10.0.0.6"}}, NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.7"}},
						Ports: []corev1.EndpointPort{{Name: "a", Port: 1, Protocol: corev1.ProtocolTCP}, {Name: "b", Port: 2, Protocol: corev1.ProtocolSCTP}}}}},
				{"merge replaces subsets", types.MergePatchType, `{"subsets":[{"addresses":[{"ip":"10.0.0.5"}]}]}`,
					[]corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.5"}}}}},
				{"merge null removes subsets", types.MergePatchType, `{"subsets":null}`, nil},
			}
			for _, st := range epSteps {
				if _, err := eps.Patch(ctx, name, st.typ, []byte(st.patch), metav1.PatchOptions{}); err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				stored := must[*corev1.Endpoints](t)(eps.Get(ctx, name, metav1.GetOptions{}))
				if diff := cmp.Diff(st.want, stored.Subsets); diff != "" {
					t.Errorf("%s: stored subsets (-want +got):\n%s", st.name, diff)
				}
			}
		})
	}
}

// TestServerSideApply drives server-side apply through client-go's apply
// configurations: creation, ownership, conflicts, force, co-ownership,
// removal of fields a manager stops applying, and extraction.
func TestServerSideApply(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for enc, c := range s.Clients(t) {
		t.Run(enc, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			leases := c.CoordinationV1().Leases("default")
			name := "ssa-" + enc
			apply := func(cfg *coordinationv1ac.LeaseApplyConfiguration, manager string, force bool) (*coordinationv1.Lease, error) {
				return leases.Apply(ctx, cfg, metav1.ApplyOptions{FieldManager: manager, Force: force})
			}

			// Apply creates a missing object.
			created := must[*coordinationv1.Lease](t)(apply(coordinationv1ac.Lease(name, "default").
				WithLabels(map[string]string{"app": "x"}).
				WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("alice").WithLeaseDurationSeconds(10)), "mgr-a", false))
			if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() {
				t.Errorf("apply-created object lacks system fields: %+v", created.ObjectMeta)
			}
			want := []managedEntry{{"mgr-a", metav1.ManagedFieldsOperationApply,
				`{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:holderIdentity":{},"f:leaseDurationSeconds":{}}}`}}
			if diff := cmp.Diff(want, managed(t, created, leaseAPIVersion)); diff != "" {
				t.Errorf("managedFields after create (-want +got):\n%s", diff)
			}

			// The same apply again changes nothing.
			again := must[*coordinationv1.Lease](t)(apply(coordinationv1ac.Lease(name, "default").
				WithLabels(map[string]string{"app": "x"}).
				WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("alice").WithLeaseDurationSeconds(10)), "mgr-a", false))
			if again.ResourceVersion != created.ResourceVersion || !cmp.Equal(again.ManagedFields, created.ManagedFields) {
				t.Errorf("no-op apply: rv %s -> %s, managedFields %+v -> %+v", created.ResourceVersion, again.ResourceVersion, created.ManagedFields, again.ManagedFields)
			}

			// Another manager setting a different value conflicts.
			_, err := apply(coordinationv1ac.Lease(name, "default").WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("bob")), "mgr-b", false)
			se := wantStatus(t, err, http.StatusConflict, metav1.StatusReasonConflict)
			if got, want := se.ErrStatus.Message, `Apply failed with 1 conflict: conflict with "mgr-a": .spec.holderIdentity`; got != want {
				t.Errorf("conflict message %q, want %q", got, want)
			}
			wantCauses := []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "mgr-a"`, Field: ".spec.holderIdentity"}}
			if se.ErrStatus.Details == nil || !cmp.Equal(wantCauses, se.ErrStatus.Details.Causes) {
				t.Errorf("conflict details %+v, want causes %+v", se.ErrStatus.Details, wantCauses)
			}
			// Two conflicting fields: the plural message.
			_, err = apply(coordinationv1ac.Lease(name, "default").WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("bob").WithLeaseDurationSeconds(20)), "mgr-b", false)
			se = wantStatus(t, err, http.StatusConflict, metav1.StatusReasonConflict)
			if got, want := se.ErrStatus.Message, "Apply failed with 2 conflicts: conflicts with \"mgr-a\":\n- .spec.holderIdentity\n- .spec.leaseDurationSeconds"; got != want {
				t.Errorf("conflict message %q, want %q", got, want)
			}
			if n := len(se.ErrStatus.Details.Causes); n != 2 {
				t.Errorf("%d causes, want 2: %+v", n, se.ErrStatus.Details.Causes)
			}
			if l := must[*coordinationv1.Lease](t)(leases.Get(ctx, name, metav1.GetOptions{})); l.ResourceVersion != created.ResourceVersion {
				t.Errorf("a conflicting apply changed the object: rv %s -> %s", created.ResourceVersion, l.ResourceVersion)
			}

			// Applying the same value co-owns the field.
			co := must[*coordinationv1.Lease](t)(apply(coordinationv1ac.Lease(name, "default").WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("alice")), "mgr-b", false))
			want = []managedEntry{
				{"mgr-a", metav1.ManagedFieldsOperationApply, `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:holderIdentity":{},"f:leaseDurationSeconds":{}}}`},
				{"mgr-b", metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:holderIdentity":{}}}`},
			}
			if diff := cmp.Diff(want, managed(t, co, leaseAPIVersion)); diff != "" {
				t.Errorf("managedFields after co-owning apply (-want +got):\n%s", diff)
			}
			// mgr-a dropping a co-owned field leaves the value in place.
			dropped := must[*coordinationv1.Lease](t)(apply(coordinationv1ac.Lease(name, "default").
				WithLabels(map[string]string{"app": "x"}).
				WithSpec(coordinationv1ac.LeaseSpec().WithLeaseDurationSeconds(10)), "mgr-a", false))
			if dropped.Spec.HolderIdentity == nil || *dropped.Spec.HolderIdentity != "alice" {
				t.Errorf("holderIdentity after mgr-a stopped applying it: %v", dropped.Spec.HolderIdentity)
			}

			// Force takes ownership.
			forced := must[*coordinationv1.Lease](t)(apply(coordinationv1ac.Lease(name, "default").
				WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("bob").WithLeaseDurationSeconds(20)), "mgr-b", true))
			want = []managedEntry{
				{"mgr-a", metav1.ManagedFieldsOperationApply, `{"f:metadata":{"f:labels":{"f:app":{}}}}`},
				{"mgr-b", metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:holderIdentity":{},"f:leaseDurationSeconds":{}}}`},
			}
			if diff := cmp.Diff(want, managed(t, forced, leaseAPIVersion)); diff != "" {
				t.Errorf("managedFields after force (-want +got):\n%s", diff)
			}
			if *forced.Spec.HolderIdentity != "bob" || *forced.Spec.LeaseDurationSeconds != 20 {
				t.Errorf("spec after force: %+v", forced.Spec)
			}

			// A field its only manager stops applying is removed.
			removed := must[*coordinationv1.Lease](t)(apply(coordinationv1ac.Lease(name, "default").
				WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("bob")), "mgr-b", false))
			if removed.Spec.LeaseDurationSeconds != nil {
				t.Errorf("leaseDurationSeconds kept after its only manager dropped it: %d", *removed.Spec.LeaseDurationSeconds)
			}

			// An update (PUT) never conflicts; it takes the fields it changes,
			// and a later apply conflicts with the updater, named with its
			// apiVersion.
			removed.Spec.HolderIdentity = ptr("updater-value")
			updated := must[*coordinationv1.Lease](t)(leases.Update(ctx, removed, metav1.UpdateOptions{FieldManager: "updater"}))
			want = []managedEntry{
				{"mgr-a", metav1.ManagedFieldsOperationApply, `{"f:metadata":{"f:labels":{"f:app":{}}}}`},
				{"updater", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:holderIdentity":{}}}`},
			}
			if diff := cmp.Diff(want, managed(t, updated, leaseAPIVersion)); diff != "" {
				t.Errorf("managedFields after update (-want +got):\n%s", diff)
			}
			_, err = apply(coordinationv1ac.Lease(name, "default").WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("zed")), "mgr-b", false)
			se = wantStatus(t, err, http.StatusConflict, metav1.StatusReasonConflict)
			if got, want := se.ErrStatus.Message, `Apply failed with 1 conflict: conflict with "updater" using coordination.k8s.io/v1: .spec.holderIdentity`; got != want {
				t.Errorf("conflict with an updater: %q, want %q", got, want)
			}

			// resourceVersion in an apply is a precondition.
			_, err = apply(coordinationv1ac.Lease(name, "default").WithResourceVersion(created.ResourceVersion).
				WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("updater-value")), "mgr-c", false)
			wantStatus(t, err, http.StatusConflict, metav1.StatusReasonConflict)
			withRV := must[*coordinationv1.Lease](t)(apply(coordinationv1ac.Lease(name, "default").WithResourceVersion(updated.ResourceVersion).
				WithSpec(coordinationv1ac.LeaseSpec().WithLeaseTransitions(3)), "mgr-c", false))
			if *withRV.Spec.LeaseTransitions != 3 {
				t.Errorf("apply with the current resourceVersion: %+v", withRV.Spec)
			}

			// Extraction gives back what a manager applied, and applying the
			// extracted configuration with a change round-trips.
			extracted, err := coordinationv1ac.ExtractLease(withRV, "mgr-a")
			if err != nil {
				t.Fatal(err)
			}
			wantAC := coordinationv1ac.Lease(name, "default").WithLabels(map[string]string{"app": "x"})
			if diff := cmp.Diff(wantAC, extracted); diff != "" {
				t.Errorf("ExtractLease(mgr-a) (-want +got):\n%s", diff)
			}
			rt := must[*coordinationv1.Lease](t)(apply(extracted.WithLabels(map[string]string{"tier": "1"}), "mgr-a", false))
			if diff := cmp.Diff(map[string]string{"app": "x", "tier": "1"}, rt.Labels); diff != "" {
				t.Errorf("labels after re-applying the extracted configuration (-want +got):\n%s", diff)
			}
			extracted, err = coordinationv1ac.ExtractLease(rt, "mgr-c")
			if err != nil {
				t.Fatal(err)
			}
			wantAC = coordinationv1ac.Lease(name, "default").WithSpec(coordinationv1ac.LeaseSpec().WithLeaseTransitions(3))
			if diff := cmp.Diff(wantAC, extracted); diff != "" {
				t.Errorf("ExtractLease(mgr-c) (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServerSideApplyEndpoints applies Endpoints: subsets is an atomic
// list, so one manager owns all of it (SPEC §2.8).
func TestServerSideApplyEndpoints(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for enc, c := range s.Clients(t) {
		t.Run(enc, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			eps := c.CoreV1().Endpoints("default")
			name := "ssa-" + enc
			subset := func(ip string, port int32) *corev1ac.EndpointSubsetApplyConfiguration {
				return corev1ac.EndpointSubset().WithAddresses(corev1ac.EndpointAddress().WithIP(ip)).
					WithPorts(corev1ac.EndpointPort().WithName("http").WithPort(port))
			}
			first := must[*corev1.Endpoints](t)(eps.Apply(ctx, corev1ac.Endpoints(name, "default").
				WithSubsets(subset("10.0.0.1", 80), subset("10.0.0.2", 81)), metav1.ApplyOptions{FieldManager: "mgr-a"}))
			wantSubsets := []corev1.EndpointSubset{
				{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
				{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.2"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 81, Protocol: corev1.ProtocolTCP}}},
			}
			if diff := cmp.Diff(wantSubsets, first.Subsets); diff != "" {
				t.Errorf("applied subsets (-want +got):\n%s", diff)
			}
			want := []managedEntry{{"mgr-a", metav1.ManagedFieldsOperationApply, `{"f:subsets":{}}`}}
			if diff := cmp.Diff(want, managed(t, first, "v1")); diff != "" {
				t.Errorf("managedFields (-want +got):\n%s", diff)
			}
			// Applying the same configuration again is a no-op, although the
			// stored ports carry the defaulted protocol the configuration
			// lacks.
			again := must[*corev1.Endpoints](t)(eps.Apply(ctx, corev1ac.Endpoints(name, "default").
				WithSubsets(subset("10.0.0.1", 80), subset("10.0.0.2", 81)), metav1.ApplyOptions{FieldManager: "mgr-a"}))
			if again.ResourceVersion != first.ResourceVersion {
				t.Errorf("re-applying the same configuration wrote: rv %s -> %s", first.ResourceVersion, again.ResourceVersion)
			}

			_, err := eps.Apply(ctx, corev1ac.Endpoints(name, "default").WithSubsets(subset("10.0.0.3", 80)), metav1.ApplyOptions{FieldManager: "mgr-b"})
			se := wantStatus(t, err, http.StatusConflict, metav1.StatusReasonConflict)
			if got, want := se.ErrStatus.Message, `Apply failed with 1 conflict: conflict with "mgr-a": .subsets`; got != want {
				t.Errorf("conflict message %q, want %q", got, want)
			}

			forced := must[*corev1.Endpoints](t)(eps.Apply(ctx, corev1ac.Endpoints(name, "default").WithSubsets(subset("10.0.0.3", 80)),
				metav1.ApplyOptions{FieldManager: "mgr-b", Force: true}))
			wantSubsets = []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.3"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
			if diff := cmp.Diff(wantSubsets, forced.Subsets); diff != "" {
				t.Errorf("forced subsets (-want +got):\n%s", diff)
			}
			// mgr-a owned nothing else: its entry is gone.
			want = []managedEntry{{"mgr-b", metav1.ManagedFieldsOperationApply, `{"f:subsets":{}}`}}
			if diff := cmp.Diff(want, managed(t, forced, "v1")); diff != "" {
				t.Errorf("managedFields after force (-want +got):\n%s", diff)
			}

			extracted, err := corev1ac.ExtractEndpoints(forced, "mgr-b")
			if err != nil {
				t.Fatal(err)
			}
			wantAC := corev1ac.Endpoints(name, "default").WithSubsets(corev1ac.EndpointSubset().
				WithAddresses(corev1ac.EndpointAddress().WithIP("10.0.0.3")).
				WithPorts(corev1ac.EndpointPort().WithName("http").WithPort(80).WithProtocol(corev1.ProtocolTCP)))
			if diff := cmp.Diff(wantAC, extracted); diff != "" {
				t.Errorf("ExtractEndpoints (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExtractWithServedOpenAPI extracts an apply configuration with
// managedfields.ExtractInto, using a parser built from the server's own
// OpenAPI v3 document, and checks it against client-go's compiled-in one.
func TestExtractWithServedOpenAPI(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	c := s.Client(t)
	leases := c.CoordinationV1().Leases("default")
	l := must[*coordinationv1.Lease](t)(leases.Apply(ctx, coordinationv1ac.Lease("x", "default").
		WithAnnotations(map[string]string{"note": "n"}).
		WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("alice").WithRenewTime(metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)))),
		metav1.ApplyOptions{FieldManager: "mgr"}))
	// Another manager's fields are not extracted.
	l = must[*coordinationv1.Lease](t)(leases.Apply(ctx, coordinationv1ac.Lease("x", "default").
		WithSpec(coordinationv1ac.LeaseSpec().WithLeaseTransitions(4)), metav1.ApplyOptions{FieldManager: "other"}))

	// The served OpenAPI v3 document builds the type converter
	// server-side apply needs, and it types the stored object.
	root := openapi3.NewRoot(c.Discovery().OpenAPIV3())
	doc, err := root.GVSpec(coordinationv1.SchemeGroupVersion)
	if err != nil {
		t.Fatalf("openapi v3 for %s: %v", coordinationv1.SchemeGroupVersion, err)
	}
	tc, err := managedfields.NewTypeConverter(doc.Components.Schemas, false)
	if err != nil {
		t.Fatalf("type converter from the served OpenAPI v3: %v", err)
	}
	typed := l.DeepCopy()
	typed.APIVersion, typed.Kind = "coordination.k8s.io/v1", "Lease"
	if _, err := tc.ObjectToTyped(typed); err != nil {
		t.Errorf("the served OpenAPI v3 cannot type a stored Lease: %v", err)
	}

	// The served OpenAPI v2 document gives the parseable type for
	// managedfields.ExtractInto.
	models, err := c.Discovery().OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	pm, err := proto.NewOpenAPIData(models)
	if err != nil {
		t.Fatal(err)
	}
	gvkParser, err := managedfields.NewGVKParser(pm, false)
	if err != nil {
		t.Fatalf("GVK parser from the served OpenAPI v2: %v", err)
	}
	pt := gvkParser.Type(coordinationv1.SchemeGroupVersion.WithKind("Lease"))
	if pt == nil {
		t.Fatal("the served OpenAPI v2 has no type for coordination.k8s.io/v1 Lease")
	}
	got := &coordinationv1ac.LeaseApplyConfiguration{}
	if err := managedfields.ExtractInto(l, *pt, "mgr", got, ""); err != nil {
		t.Fatal(err)
	}
	got.WithName(l.Name).WithNamespace(l.Namespace).WithKind("Lease").WithAPIVersion("coordination.k8s.io/v1")
	want, err := coordinationv1ac.ExtractLease(l, "mgr")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ExtractInto with the served schema vs ExtractLease (-want +got):\n%s", diff)
	}
	wantAC := coordinationv1ac.Lease("x", "default").WithAnnotations(map[string]string{"note": "n"}).
		WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("alice").WithRenewTime(metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC))))
	if diff := cmp.Diff(wantAC, want, cmp.Comparer(func(a, b metav1.MicroTime) bool { return a.Equal(&b) })); diff != "" {
		t.Errorf("ExtractLease (-want +got):\n%s", diff)
	}
}

// TestManagedFieldsOnWrites checks the managedFields entries create,
// update and each patch type record, with the manager taken from the
// fieldManager parameter or the User-Agent.
func TestManagedFieldsOnWrites(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for enc, cfg := range map[string]*rest.Config{"json": s.Config, "protobuf": s.ProtoConfig()} {
		t.Run(enc, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			cfg := rest.CopyConfig(cfg)
			cfg.UserAgent = "agent-" + enc + "/1.2.3 (linux/amd64) leasehold-test"
			c, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			leases := c.CoordinationV1().Leases("default")
			name := "mf-" + enc
			agent := "agent-" + enc

			l := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"a": "1"}},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("alice")},
			}, metav1.CreateOptions{}))
			want := []managedEntry{{agent, metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{".":{},"f:a":{}}},"f:spec":{"f:holderIdentity":{}}}`}}
			if diff := cmp.Diff(want, managed(t, l, leaseAPIVersion)); diff != "" {
				t.Errorf("after create, manager from User-Agent (-want +got):\n%s", diff)
			}

			l.Spec.LeaseDurationSeconds = ptr[int32](10)
			l = must[*coordinationv1.Lease](t)(leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: "updater"}))
			want = append(want, managedEntry{"updater", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:leaseDurationSeconds":{}}}`})
			if diff := cmp.Diff(want, managed(t, l, leaseAPIVersion)); diff != "" {
				t.Errorf("after update (-want +got):\n%s", diff)
			}

			l = must[*coordinationv1.Lease](t)(leases.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"holderIdentity":"bob"}}`), metav1.PatchOptions{FieldManager: "merger"}))
			want = []managedEntry{
				{agent, metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{".":{},"f:a":{}}}}`},
				{"merger", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:holderIdentity":{}}}`},
				{"updater", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:leaseDurationSeconds":{}}}`},
			}
			if diff := cmp.Diff(want, managed(t, l, leaseAPIVersion)); diff != "" {
				t.Errorf("after merge patch (-want +got):\n%s", diff)
			}

			l = must[*coordinationv1.Lease](t)(leases.Patch(ctx, name, types.JSONPatchType, []byte(`[{"op":"add","path":"/spec/leaseTransitions","value":1}]`), metav1.PatchOptions{}))
			l = must[*coordinationv1.Lease](t)(leases.Patch(ctx, name, types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"b":"2"}}}`), metav1.PatchOptions{FieldManager: "smp"}))
			want = []managedEntry{
				{agent, metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{".":{},"f:a":{}}},"f:spec":{"f:leaseTransitions":{}}}`},
				{"merger", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:holderIdentity":{}}}`},
				{"smp", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{"f:b":{}}}}`},
				{"updater", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:leaseDurationSeconds":{}}}`},
			}
			if diff := cmp.Diff(want, managed(t, l, leaseAPIVersion)); diff != "" {
				t.Errorf("after JSON and strategic patches (-want +got):\n%s", diff)
			}

			l = must[*coordinationv1.Lease](t)(leases.Apply(ctx, coordinationv1ac.Lease(name, "default").
				WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("carol")), metav1.ApplyOptions{FieldManager: "applier", Force: true}))
			want = []managedEntry{
				{"applier", metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:holderIdentity":{}}}`},
				{agent, metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{".":{},"f:a":{}}},"f:spec":{"f:leaseTransitions":{}}}`},
				{"smp", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{"f:b":{}}}}`},
				{"updater", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:leaseDurationSeconds":{}}}`},
			}
			if diff := cmp.Diff(want, managed(t, l, leaseAPIVersion)); diff != "" {
				t.Errorf("after forced apply (-want +got):\n%s", diff)
			}
			stored := must[*coordinationv1.Lease](t)(s.Client(t).CoordinationV1().Leases("default").Get(ctx, name, metav1.GetOptions{}))
			if diff := cmp.Diff(l.ManagedFields, stored.ManagedFields); diff != "" {
				t.Errorf("stored managedFields differ from the response (-response +stored):\n%s", diff)
			}
		})
	}
}

// TestManagedFieldsLimits covers the bookkeeping rules around
// managedFields: at most ten Update entries, timestamp-only changes are
// no-ops, and clients reset managedFields with [{}] or (JSON) [].
func TestManagedFieldsLimits(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	c := s.Client(t)
	leases := c.CoordinationV1().Leases("default")

	t.Run("ancient-changes", func(t *testing.T) {
		must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "cap", Labels: map[string]string{"l0": "x"}}},
			metav1.CreateOptions{FieldManager: "m0"}))
		var l *coordinationv1.Lease
		for i := 1; i <= 11; i++ {
			l = must[*coordinationv1.Lease](t)(leases.Patch(ctx, "cap", types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{"l%d":"x"}}}`, i),
				metav1.PatchOptions{FieldManager: fmt.Sprintf("m%d", i)}))
		}
		var updates int
		var ancient bool
		owned := map[string]bool{}
		for _, e := range l.ManagedFields {
			if e.Operation == metav1.ManagedFieldsOperationUpdate {
				updates++
			}
			if e.Manager == "ancient-changes" {
				ancient = true
			}
			var fields struct {
				Metadata struct {
					Labels map[string]any `json:"f:labels"`
				} `json:"f:metadata"`
			}
			if err := json.Unmarshal(e.FieldsV1.Raw, &fields); err != nil {
				t.Fatal(err)
			}
			for k := range fields.Metadata.Labels {
				owned[k] = true
			}
		}
		if updates != 10 || !ancient {
			t.Errorf("%d Update entries (ancient-changes present: %v), want 10 with ancient-changes: %+v", updates, ancient, l.ManagedFields)
		}
		for i := 0; i <= 11; i++ {
			if !owned[fmt.Sprintf("f:l%d", i)] {
				t.Errorf("label l%d lost its owner: %+v", i, l.ManagedFields)
			}
		}
	})

	t.Run("timestamp-only update is a no-op", func(t *testing.T) {
		l := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "times"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("a")}}, metav1.CreateOptions{FieldManager: "m"}))
		w, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion, FieldSelector: "metadata.name=times"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		stale := l.DeepCopy()
		stale.ManagedFields[0].Time = &metav1.Time{Time: l.ManagedFields[0].Time.Add(-time.Hour)}
		got := must[*coordinationv1.Lease](t)(leases.Update(ctx, stale, metav1.UpdateOptions{FieldManager: "m"}))
		if got.ResourceVersion != l.ResourceVersion || !got.ManagedFields[0].Time.Equal(l.ManagedFields[0].Time) {
			t.Errorf("timestamp-only update: rv %s -> %s, time %v -> %v", l.ResourceVersion, got.ResourceVersion, l.ManagedFields[0].Time, got.ManagedFields[0].Time)
		}
		// A real change follows; it must be the first event.
		l.Spec.HolderIdentity = ptr("b")
		changed := must[*coordinationv1.Lease](t)(leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: "m"}))
		if ev := wantEvent(t, w, watch.Modified, "times"); ev.ResourceVersion != changed.ResourceVersion {
			t.Errorf("first event after the no-op has rv %s, want %s", ev.ResourceVersion, changed.ResourceVersion)
		}
	})

	t.Run("reset", func(t *testing.T) {
		for _, tc := range []struct {
			name, body string
		}{
			{"one empty entry", `[{}]`},
			{"empty list", `[]`},
		} {
			name := "reset-" + strings.ReplaceAll(tc.name, " ", "-")
			l := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("a")}}, metav1.CreateOptions{FieldManager: "m"}))
			if len(l.ManagedFields) != 1 {
				t.Fatalf("managedFields after create: %+v", l.ManagedFields)
			}
			r := do(t, s, "PATCH", leasesPath+"/"+name, map[string]string{"Content-Type": "application/merge-patch+json"},
				`{"metadata":{"managedFields":`+tc.body+`}}`)
			if r.code != http.StatusOK {
				t.Fatalf("%s: %d %s", tc.name, r.code, r.body)
			}
			got := must[*coordinationv1.Lease](t)(leases.Get(ctx, name, metav1.GetOptions{}))
			if len(got.ManagedFields) != 0 {
				t.Errorf("%s: managedFields not reset: %+v", tc.name, got.ManagedFields)
			}
		}
		// A client that drops managedFields (nil) keeps them.
		must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "keep"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("a")}}, metav1.CreateOptions{FieldManager: "m"}))
		for enc, c := range s.Clients(t) {
			l := must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("default").Get(ctx, "keep", metav1.GetOptions{}))
			l.ManagedFields = nil
			l.Spec.HolderIdentity = ptr("by-" + enc)
			got := must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("default").Update(ctx, l, metav1.UpdateOptions{FieldManager: "m"}))
			if len(got.ManagedFields) != 1 || got.ManagedFields[0].Manager != "m" {
				t.Errorf("%s: update without managedFields: %+v", enc, got.ManagedFields)
			}
		}
	})
}

// TestPatchHTTP checks status codes and messages of patch requests
// against kube-apiserver's (apiserver/pkg/endpoints/handlers/patch.go).
func TestPatchHTTP(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	c := s.Client(t)
	lease := must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("alice")}}, metav1.CreateOptions{}))
	const (
		jsonPatch  = "application/json-patch+json"
		mergePatch = "application/merge-patch+json"
		smPatch    = "application/strategic-merge-patch+json"
		applyPatch = "application/apply-patch+yaml"
	)
	bigPatch := "[" + strings.Repeat(`{"op":"test","path":"/kind","value":"Lease"},`, 10000) + `{"op":"test","path":"/kind","value":"Lease"}]`
	cases := []struct {
		name, path, contentType, body string
		code                          int
		reason                        metav1.StatusReason
		message                       string
		causes                        []metav1.StatusCause
	}{
		{name: "unknown patch type", path: leasesPath + "/p", contentType: "application/json", body: `{}`, code: 415, reason: metav1.StatusReasonUnsupportedMediaType,
			message: "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"},
		{name: "apply-patch+cbor without the CBOR gate", path: leasesPath + "/p", contentType: "application/apply-patch+cbor", body: `{}`, code: 415, reason: metav1.StatusReasonUnsupportedMediaType,
			message: "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"},
		{name: "force on a merge patch", path: leasesPath + "/p?force=true", contentType: mergePatch, body: `{}`, code: 422, reason: metav1.StatusReasonInvalid,
			message: `PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch`,
			causes:  []metav1.StatusCause{{Type: metav1.CauseType(field.ErrorTypeForbidden), Message: "Forbidden: may not be specified for non-apply patch", Field: "force"}}},
		{name: "apply without fieldManager", path: leasesPath + "/p", contentType: applyPatch, body: `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"p"}}`, code: 422, reason: metav1.StatusReasonInvalid,
			message: `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`,
			causes:  []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value: is required for apply patch", Field: "fieldManager"}}},
		{name: "bad fieldValidation", path: leasesPath + "/p?fieldValidation=Loose", contentType: mergePatch, body: `{}`, code: 422, reason: metav1.StatusReasonInvalid},
		{name: "bad dryRun", path: leasesPath + "/p?dryRun=Some", contentType: mergePatch, body: `{}`, code: 422, reason: metav1.StatusReasonInvalid},
		{name: "merge patch of a missing object", path: leasesPath + "/nope", contentType: mergePatch, body: `{"spec":{}}`, code: 404, reason: metav1.StatusReasonNotFound,
			message: `leases.coordination.k8s.io "nope" not found`},
		{name: "json patch of a missing object", path: leasesPath + "/nope", contentType: jsonPatch, body: `[]`, code: 404, reason: metav1.StatusReasonNotFound},
		{name: "strategic patch of missing endpoints", path: endpointsPath + "/nope", contentType: smPatch, body: `{}`, code: 404, reason: metav1.StatusReasonNotFound,
			message: `endpoints "nope" not found`},
		{name: "malformed merge patch", path: leasesPath + "/p", contentType: mergePatch, body: `{`, code: 400, reason: metav1.StatusReasonBadRequest, message: "invalid JSON patch"},
		{name: "malformed json patch", path: leasesPath + "/p", contentType: jsonPatch, body: `[{"op":"replace"`, code: 400, reason: metav1.StatusReasonBadRequest, message: "invalid JSON patch"},
		{name: "json patch that is not a list", path: leasesPath + "/p", contentType: jsonPatch, body: `{"op":"add"}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "json patch with an unknown op", path: leasesPath + "/p", contentType: jsonPatch, body: `[{"op":"frobnicate","path":"/spec"}]`, code: 422, reason: metav1.StatusReasonInvalid,
			message: "the server rejected our request due to an error in our request"},
		{name: "failing json patch test", path: leasesPath + "/p", contentType: jsonPatch, body: `[{"op":"test","path":"/spec/holderIdentity","value":"bob"}]`, code: 422, reason: metav1.StatusReasonInvalid,
			message: "the server rejected our request due to an error in our request"},
		{name: "json patch removing a missing path", path: leasesPath + "/p", contentType: jsonPatch, body: `[{"op":"remove","path":"/spec/leaseTransitions"}]`, code: 422, reason: metav1.StatusReasonInvalid,
			message: "the server rejected our request due to an error in our request"},
		{name: "json patch of more than 10000 operations", path: leasesPath + "/p", contentType: jsonPatch, body: bigPatch, code: 413, reason: metav1.StatusReasonRequestEntityTooLarge,
			message: "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"},
		{name: "stale resourceVersion in a merge patch", path: leasesPath + "/p", contentType: mergePatch, body: `{"metadata":{"resourceVersion":"1"},"spec":{"holderIdentity":"x"}}`, code: 409, reason: metav1.StatusReasonConflict,
			message: `Operation cannot be fulfilled on leases.coordination.k8s.io "p": the object has been modified; please apply your changes to the latest version and try again`},
		// kube-apiserver's registry returns the versioner's parse error
		// unwrapped (store.go Update, APIObjectVersioner), a 500 with no
		// reason; leasehold answers the client's error as a list's
		// malformed resourceVersion is answered.
		{name: "unparseable resourceVersion in a merge patch", path: leasesPath + "/p", contentType: mergePatch, body: `{"metadata":{"resourceVersion":"x1"}}`, code: 400, reason: metav1.StatusReasonBadRequest,
			message: `invalid resource version: resourceVersion: Invalid value: "x1": strconv.ParseUint: parsing "x1": invalid syntax`},
		{name: "json patch removing resourceVersion of a Lease", path: leasesPath + "/p", contentType: jsonPatch, body: `[{"op":"remove","path":"/metadata/resourceVersion"},{"op":"replace","path":"/spec/holderIdentity","value":"x"}]`, code: 422, reason: metav1.StatusReasonInvalid,
			message: `leases.coordination.k8s.io "p" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`},
		{name: "patch changing the uid", path: leasesPath + "/p", contentType: mergePatch, body: `{"metadata":{"uid":"00000000-0000-0000-0000-000000000001"}}`, code: 422, reason: metav1.StatusReasonInvalid,
			// Twice, as kube-apiserver reports it: rest.BeforeUpdate's common
			// checks and the Lease strategy both validate object metadata.
			message: `Lease.coordination.k8s.io "p" is invalid: metadata.uid: Invalid value: "00000000-0000-0000-0000-000000000001": field is immutable`,
			causes: []metav1.StatusCause{
				{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "00000000-0000-0000-0000-000000000001": field is immutable`, Field: "metadata.uid"},
				{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "00000000-0000-0000-0000-000000000001": field is immutable`, Field: "metadata.uid"},
			}},
		{name: "patch changing the name", path: leasesPath + "/p", contentType: mergePatch, body: `{"metadata":{"name":"q"}}`, code: 400, reason: metav1.StatusReasonBadRequest,
			message: "the name of the object (q) does not match the name on the URL (p)"},
		{name: "patch changing the namespace", path: leasesPath + "/p", contentType: mergePatch, body: `{"metadata":{"namespace":"kube-system"}}`, code: 400, reason: metav1.StatusReasonBadRequest,
			message: "the namespace of the provided object does not match the namespace sent on the request"},
		{name: "patch making the lease invalid", path: leasesPath + "/p", contentType: mergePatch, body: `{"spec":{"leaseDurationSeconds":0}}`, code: 422, reason: metav1.StatusReasonInvalid,
			message: `Lease.coordination.k8s.io "p" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0`},
		{name: "patch with a wrong field type", path: leasesPath + "/p", contentType: mergePatch, body: `{"spec":{"leaseDurationSeconds":"ten"}}`, code: 422, reason: metav1.StatusReasonInvalid},
		{name: "apply without kind", path: leasesPath + "/p?fieldManager=m", contentType: applyPatch, body: "metadata:\n  name: p\n", code: 400, reason: metav1.StatusReasonBadRequest,
			message: "invalid object type: /, Kind="},
		{name: "apply of malformed JSON", path: leasesPath + "/p?fieldManager=m", contentType: applyPatch, body: `{"apiVersion":`, code: 400, reason: metav1.StatusReasonBadRequest,
			// kube-apiserver transcodes with util/yaml.ToJSON, which passes a
			// body starting with "{" through unchecked; the apply
			// unmarshalling then fails (patch.go validateAndTranscodePatch,
			// applyPatcher).
			message: "error decoding patch: error converting YAML to JSON: yaml: line 1: did not find expected node content"},
		{name: "apply of malformed YAML", path: leasesPath + "/p?fieldManager=m", contentType: applyPatch, body: "a: b: c", code: 400, reason: metav1.StatusReasonBadRequest,
			message: "error encoding patch: yaml: mapping values are not allowed in this context"},
		{name: "apply with managedFields", path: leasesPath + "/p?fieldManager=m", contentType: applyPatch,
			body: `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"p","managedFields":[{"manager":"x","operation":"Apply"}]}}`, code: 400, reason: metav1.StatusReasonBadRequest,
			message: "metadata.managedFields must be nil"},
		{name: "json patch removing the name", path: leasesPath + "/p", contentType: jsonPatch, body: `[{"op":"remove","path":"/metadata/name"}]`, code: 400, reason: metav1.StatusReasonBadRequest,
			message: "the name of the object (p based on URL) was undeterminable: name must be provided"},
		// kube-apiserver decodes the patched JSON into the resource's type
		// with its codec (runtime.DecodeInto); another kind fails there, a
		// non-strict decoding error: 422 on field "patch" (patch.go
		// applyPatchToCurrentObject).
		{name: "json patch changing the kind", path: leasesPath + "/p", contentType: jsonPatch,
			body: `[{"op":"replace","path":"/apiVersion","value":"v1"},{"op":"replace","path":"/kind","value":"Endpoints"}]`, code: 422, reason: metav1.StatusReasonInvalid},
		{name: "merge patch emptying the resourceVersion of a Lease", path: leasesPath + "/p", contentType: mergePatch, body: `{"metadata":{"resourceVersion":""},"spec":{"holderIdentity":"x"}}`,
			code: 422, reason: metav1.StatusReasonInvalid,
			message: `leases.coordination.k8s.io "p" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`},
		{name: "apply creating without a name", path: leasesPath + "/unnamed?fieldManager=m", contentType: applyPatch,
			body: `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease"}`, code: 400, reason: metav1.StatusReasonBadRequest,
			message: "the name of the object (unnamed based on URL) was undeterminable: name must be provided"},
		{name: "merge patch with a renewTime lacking microseconds", path: leasesPath + "/p", contentType: mergePatch, body: `{"spec":{"renewTime":"2026-01-01T00:00:00Z"}}`,
			code: 422, reason: metav1.StatusReasonInvalid},
		{name: "apply with another namespace", path: leasesPath + "/p?fieldManager=m", contentType: applyPatch,
			body: `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"p","namespace":"kube-system"}}`, code: 400, reason: metav1.StatusReasonBadRequest,
			message: "the namespace of the provided object does not match the namespace sent on the request"},
		{name: "apply creating in a missing namespace", path: "/apis/coordination.k8s.io/v1/namespaces/missing/leases/x?fieldManager=m", contentType: applyPatch,
			body: `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"x"}}`, code: 404, reason: metav1.StatusReasonNotFound,
			message: `namespaces "missing" not found`},
		{name: "apply creating an invalid lease", path: leasesPath + "/bad?fieldManager=m", contentType: applyPatch,
			body: `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"bad"},"spec":{"leaseDurationSeconds":-5}}`, code: 422, reason: metav1.StatusReasonInvalid,
			message: `Lease.coordination.k8s.io "bad" is invalid: spec.leaseDurationSeconds: Invalid value: -5: must be greater than 0`},
		{name: "apply with an invalid name", path: leasesPath + "/Bad_Name?fieldManager=m", contentType: applyPatch,
			body: `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"Bad_Name"}}`, code: 422, reason: metav1.StatusReasonInvalid},
		{name: "apply with an unknown field", path: leasesPath + "/p?fieldManager=m", contentType: applyPatch,
			body: "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: p\nspec:\n  foo: 1\n", code: 400, reason: metav1.StatusReasonBadRequest,
			message: "failed to create typed patch object (/p; coordination.k8s.io/v1, Kind=Lease): .spec.foo: field not declared in schema"},
		// kube-apiserver answers the next three 500, passing the patch
		// libraries' errors on; they are the client's (an apply: 400, as
		// kubernetes/kubernetes#139255 intends; other patches: 422).
		{name: "apply with a value of the wrong type", path: leasesPath + "/p?fieldManager=m&force=true", contentType: applyPatch,
			body: `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"p"},"spec":{"renewTime":0}}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "strategic directive of the wrong type", path: leasesPath + "/p", contentType: smPatch, body: `{"metadata":{"$setElementOrder/finalizers":{}}}`, code: 422, reason: metav1.StatusReasonInvalid},
		{name: "strategic directive naming a missing field", path: leasesPath + "/p", contentType: smPatch, body: `{"metadata":{"$setElementOrder/0":[]}}`, code: 422, reason: metav1.StatusReasonInvalid},
		{name: "apply with a stale resourceVersion", path: leasesPath + "/p?fieldManager=m", contentType: applyPatch,
			body: `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"p","resourceVersion":"1"}}`, code: 409, reason: metav1.StatusReasonConflict},
		{name: "apply creating with a uid", path: leasesPath + "/fresh?fieldManager=m", contentType: applyPatch,
			body: `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"fresh","uid":"00000000-0000-0000-0000-000000000001"}}`, code: 409, reason: metav1.StatusReasonConflict,
			message: `Operation cannot be fulfilled on leases.coordination.k8s.io "fresh": uid mismatch: the provided object specified uid 00000000-0000-0000-0000-000000000001, and no existing object was found`},
		{name: "apply with another name", path: leasesPath + "/p?fieldManager=m", contentType: applyPatch,
			body: `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"q"}}`, code: 400, reason: metav1.StatusReasonBadRequest,
			message: "the name of the object (q) does not match the name on the URL (p)"},
		{name: "apply of the wrong kind", path: leasesPath + "/p?fieldManager=m", contentType: applyPatch,
			body: `{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"p"}}`, code: 400, reason: metav1.StatusReasonBadRequest,
			message: "invalid object type: /v1, Kind=Endpoints"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, s, "PATCH", tc.path, map[string]string{"Content-Type": tc.contentType}, tc.body)
			if r.code != tc.code {
				t.Fatalf("code %d, want %d: %s", r.code, tc.code, r.body)
			}
			var st metav1.Status
			if err := json.Unmarshal(r.body, &st); err != nil {
				t.Fatalf("body is not a Status: %v: %s", err, r.body)
			}
			if st.Kind != "Status" || st.Status != metav1.StatusFailure || st.Reason != tc.reason || int(st.Code) != tc.code {
				t.Errorf("status %+v, want %d %q", st, tc.code, tc.reason)
			}
			if tc.message != "" && st.Message != tc.message {
				t.Errorf("message\n%q, want\n%q", st.Message, tc.message)
			}
			if (tc.name == "merge patch with a renewTime lacking microseconds" || tc.name == "json patch changing the kind") && (st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "patch") {
				t.Errorf("details %+v, want one cause on field patch", st.Details)
			}
			if tc.causes != nil {
				if st.Details == nil || !cmp.Equal(tc.causes, st.Details.Causes) {
					t.Errorf("details %+v, want causes %+v", st.Details, tc.causes)
				}
			}
		})
	}
	// None of them changed the lease or created anything.
	got := must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("default").Get(ctx, "p", metav1.GetOptions{}))
	if got.ResourceVersion != lease.ResourceVersion {
		t.Errorf("a failed patch changed the lease: %+v", got)
	}
	if list := must[*coordinationv1.LeaseList](t)(c.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{})); len(list.Items) != 1 {
		t.Errorf("failed patches created objects: %d leases", len(list.Items))
	}
}

// TestPatchSuccessHTTP checks the codes of successful patches: apply
// creates (201) then updates (200), charset parameters are ignored, and
// an apply that creates ignores a resourceVersion in its body.
func TestPatchSuccessHTTP(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	apply := func(name, extra string) string {
		return `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"` + name + `"` + extra + `},"spec":{"holderIdentity":"h"}}`
	}
	steps := []struct {
		name, method, path, contentType, body string
		code                                  int
	}{
		{"apply creates", "PATCH", leasesPath + "/a?fieldManager=m", "application/apply-patch+yaml", apply("a", ""), 201},
		{"apply updates", "PATCH", leasesPath + "/a?fieldManager=m", "application/apply-patch+yaml", "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: a\nspec:\n  holderIdentity: i\n", 200},
		{"apply with charset", "PATCH", leasesPath + "/a?fieldManager=m", "application/apply-patch+yaml; charset=utf-8", apply("a", ""), 200},
		{"merge with charset", "PATCH", leasesPath + "/a", "application/merge-patch+json; charset=utf-8", `{"spec":{"leaseTransitions":1}}`, 200},
		// kube-apiserver's etcd3 GuaranteedUpdate clears the
		// resourceVersion before storing (PrepareObjectForStorage), so a
		// create through apply with one set succeeds.
		{"apply creates despite a resourceVersion", "PATCH", leasesPath + "/b?fieldManager=m", "application/apply-patch+yaml", apply("b", `,"resourceVersion":"12345"`), 201},
		{"apply creates endpoints", "PATCH", endpointsPath + "/e?fieldManager=m", "application/apply-patch+yaml",
			`{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"e"},"subsets":[{"addresses":[{"ip":"10.0.0.1"}]}]}`, 201},
		{"dry-run apply does not create", "PATCH", leasesPath + "/c?fieldManager=m&dryRun=All", "application/apply-patch+yaml", apply("c", ""), 201},
		// Endpoints allow unconditional updates: a patch emptying the
		// resourceVersion applies to the current object.
		{"endpoints patch emptying the resourceVersion", "PATCH", endpointsPath + "/e", "application/merge-patch+json", `{"metadata":{"resourceVersion":"","labels":{"a":"b"}}}`, 200},
		{"apply without a name to an existing lease", "PATCH", leasesPath + "/a?fieldManager=m", "application/apply-patch+yaml", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","spec":{"holderIdentity":"i"}}`, 200},
	}
	for _, st := range steps {
		r := do(t, s, st.method, st.path, map[string]string{"Content-Type": st.contentType}, st.body)
		if r.code != st.code {
			t.Errorf("%s: %d, want %d: %s", st.name, r.code, st.code, r.body)
		}
	}
	// A dry-run apply that would create answers the would-be object:
	// system fields filled in, no resourceVersion (SPEC §5.8).
	r := do(t, s, "PATCH", leasesPath+"/d?fieldManager=m&dryRun=All", map[string]string{"Content-Type": "application/apply-patch+yaml"}, apply("d", ""))
	var dry coordinationv1.Lease
	if err := json.Unmarshal(r.body, &dry); err != nil || r.code != 201 {
		t.Fatalf("dry-run apply: %d %v %s", r.code, err, r.body)
	}
	if dry.UID == "" || dry.CreationTimestamp.IsZero() || dry.ResourceVersion != "" || dry.Namespace != "default" || len(dry.ManagedFields) != 1 {
		t.Errorf("dry-run apply answer: %+v", dry.ObjectMeta)
	}
	c := s.Client(t)
	if b := must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("default").Get(t.Context(), "b", metav1.GetOptions{})); b.ResourceVersion == "12345" {
		t.Errorf("created lease kept the body's resourceVersion")
	}
	if _, err := c.CoordinationV1().Leases("default").Get(t.Context(), "c", metav1.GetOptions{}); err == nil {
		t.Errorf("dry-run apply created the lease")
	}
}

// TestFieldValidationOnPatch covers fieldValidation=Strict|Warn|Ignore for
// each patch type (SPEC §5.7): Strict is a 422 on field "patch" for
// JSON, merge and strategic patches (400 for apply), Warn (the default)
// answers Warning headers, Ignore is silent.
func TestFieldValidationOnPatch(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	must[*coordinationv1.Lease](t)(s.Client(t).CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "fv"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("alice")}}, metav1.CreateOptions{}))
	type outcome struct {
		Code     int
		Warnings []string
		// StrictDetail is what the Strict error must contain.
		StrictDetail string
	}
	cases := []struct {
		name, contentType, body string
		// field is the field of the Strict error's cause ("" for apply's
		// BadRequest).
		field  string
		strict string
		warn   []string
	}{
		{name: "merge patch unknown field", contentType: "application/merge-patch+json", body: `{"spec":{"foo":1}}`, field: "patch",
			strict: `strict decoding error: unknown field "spec.foo"`, warn: []string{`unknown field "spec.foo"`}},
		{name: "merge patch duplicate field", contentType: "application/merge-patch+json", body: `{"spec":{"holderIdentity":"a","holderIdentity":"b"}}`, field: "patch",
			strict: `strict decoding error: duplicate field "spec.holderIdentity"`, warn: []string{`duplicate field "spec.holderIdentity"`}},
		{name: "strategic patch unknown field", contentType: "application/strategic-merge-patch+json", body: `{"spec":{"foo":1}}`, field: "patch",
			strict: `strict decoding error: unknown field "spec.foo"`, warn: []string{`unknown field "spec.foo"`}},
		{name: "strategic patch duplicate and unknown fields", contentType: "application/strategic-merge-patch+json", body: `{"metadata":{"labels":{"a":"1","a":"2"}},"spec":{"bar":1}}`, field: "patch",
			strict: `strict decoding error: duplicate field "metadata.labels.a", unknown field "spec.bar"`, warn: []string{`duplicate field "metadata.labels.a"`, `unknown field "spec.bar"`}},
		{name: "json patch adding an unknown field", contentType: "application/json-patch+json", body: `[{"op":"add","path":"/spec/foo","value":1}]`, field: "patch",
			strict: `strict decoding error: unknown field "spec.foo"`, warn: []string{`unknown field "spec.foo"`}},
		{name: "json patch with an unknown operation field", contentType: "application/json-patch+json", body: `[{"op":"replace","path":"/spec/holderIdentity","value":"x","extra":1}]`, field: "patch",
			strict: `strict decoding error: json patch unknown field "[0].extra"`, warn: []string{`json patch unknown field "[0].extra"`}},
		{name: "apply duplicate field", contentType: "application/apply-patch+yaml",
			body:   "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: fv\nspec:\n  holderIdentity: a\n  holderIdentity: a\n",
			strict: "error strict decoding patch: error converting YAML to JSON: yaml: unmarshal errors:\n  line 7: key \"holderIdentity\" already set in map",
			// The warning text has a newline, which cannot go in a header:
			// kube-apiserver's warning recorder drops it.
			warn: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := leasesPath + "/fv?fieldManager=fv-test"
			if tc.contentType == "application/apply-patch+yaml" {
				// The other cases' patches own holderIdentity.
				path += "&force=true"
			}
			header := map[string]string{"Content-Type": tc.contentType}

			r := do(t, s, "PATCH", path+"&fieldValidation=Strict", header, tc.body)
			st := metav1.Status{}
			_ = json.Unmarshal(r.body, &st)
			if tc.field != "" {
				if r.code != 422 || st.Reason != metav1.StatusReasonInvalid || st.Details == nil || len(st.Details.Causes) != 1 ||
					st.Details.Causes[0].Field != tc.field || !strings.HasSuffix(st.Details.Causes[0].Message, ": "+tc.strict) {
					t.Errorf("Strict: %d %s, want 422 Invalid on %q ending in %q", r.code, r.body, tc.field, tc.strict)
				}
			} else if r.code != 400 || st.Reason != metav1.StatusReasonBadRequest || st.Message != tc.strict {
				t.Errorf("Strict: %d %s, want 400 %q", r.code, r.body, tc.strict)
			}

			for _, v := range []string{"&fieldValidation=Warn", ""} {
				r = do(t, s, "PATCH", path+v, header, tc.body)
				if r.code != 200 {
					t.Errorf("Warn (%q): %d %s", v, r.code, r.body)
				}
				var want []string
				for _, w := range tc.warn {
					want = append(want, `299 - `+strconv.Quote(w))
				}
				if diff := cmp.Diff(want, r.header.Values("Warning")); diff != "" {
					t.Errorf("Warn (%q) Warning headers (-want +got):\n%s", v, diff)
				}
			}

			r = do(t, s, "PATCH", path+"&fieldValidation=Ignore", header, tc.body)
			if r.code != 200 || len(r.header.Values("Warning")) != 0 {
				t.Errorf("Ignore: %d %q %s", r.code, r.header.Values("Warning"), r.body)
			}
		})
	}
}

// TestPatchNoOp checks that patches which change nothing keep the
// resourceVersion and send no watch event, dry-run patches store nothing,
// and a patch retried on a concurrent write still applies.
func TestPatchNoOp(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for enc, c := range s.Clients(t) {
		t.Run(enc, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			leases := c.CoordinationV1().Leases("default")
			name := "noop-" + enc
			l := must[*coordinationv1.Lease](t)(leases.Apply(ctx, coordinationv1ac.Lease(name, "default").
				WithLabels(map[string]string{"a": "1"}).
				WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("alice").WithLeaseDurationSeconds(10)), metav1.ApplyOptions{FieldManager: "m"}))
			w, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion, FieldSelector: "metadata.name=" + name})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			noops := []struct {
				name  string
				typ   types.PatchType
				patch string
				opts  metav1.PatchOptions
			}{
				{"merge same value", types.MergePatchType, `{"spec":{"holderIdentity":"alice"}}`, metav1.PatchOptions{}},
				{"merge empty", types.MergePatchType, `{}`, metav1.PatchOptions{}},
				{"strategic same value", types.StrategicMergePatchType, `{"metadata":{"labels":{"a":"1"}}}`, metav1.PatchOptions{FieldManager: "other"}},
				{"json test only", types.JSONPatchType, `[{"op":"test","path":"/spec/holderIdentity","value":"alice"}]`, metav1.PatchOptions{}},
				{"json empty", types.JSONPatchType, `[]`, metav1.PatchOptions{}},
				{"apply same configuration", types.ApplyPatchType, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"` + name + `","labels":{"a":"1"}},"spec":{"holderIdentity":"alice","leaseDurationSeconds":10}}`,
					metav1.PatchOptions{FieldManager: "m"}},
				{"dry-run change", types.MergePatchType, `{"spec":{"holderIdentity":"dry"}}`, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}},
			}
			for _, np := range noops {
				got, err := leases.Patch(ctx, name, np.typ, []byte(np.patch), np.opts)
				if err != nil {
					t.Fatalf("%s: %v", np.name, err)
				}
				if got.ResourceVersion != l.ResourceVersion {
					t.Errorf("%s: resourceVersion %s -> %s", np.name, l.ResourceVersion, got.ResourceVersion)
				}
				if np.opts.DryRun != nil {
					if *got.Spec.HolderIdentity != "dry" {
						t.Errorf("%s: response does not show the patched object: %+v", np.name, got.Spec)
					}
				} else if diff := cmp.Diff(l, got); diff != "" {
					t.Errorf("%s: object changed (-before +after):\n%s", np.name, diff)
				}
			}
			stored := must[*coordinationv1.Lease](t)(leases.Get(ctx, name, metav1.GetOptions{}))
			if diff := cmp.Diff(l, stored); diff != "" {
				t.Errorf("stored object changed (-before +after):\n%s", diff)
			}
			// The first event is the first real change.
			changed := must[*coordinationv1.Lease](t)(leases.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"holderIdentity":"bob"}}`), metav1.PatchOptions{}))
			if ev := wantEvent(t, w, watch.Modified, name); ev.ResourceVersion != changed.ResourceVersion || *ev.Spec.HolderIdentity != "bob" {
				t.Errorf("first event: rv %s holder %s, want rv %s holder bob", ev.ResourceVersion, *ev.Spec.HolderIdentity, changed.ResourceVersion)
			}
		})
	}
}

// TestManagedFieldsUntracked pins a kube-apiserver quirk: an object whose
// create recorded no managed fields (nothing but a name) is never tracked
// by later updates or patches, only from its first apply on, which gives
// the fields set so far to "before-first-apply" (apimachinery managedfields
// skipNonAppliedManager).
func TestManagedFieldsUntracked(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	leases := s.Client(t).CoordinationV1().Leases("default")
	l := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}, metav1.CreateOptions{FieldManager: "creator"}))
	if len(l.ManagedFields) != 0 {
		t.Errorf("create of a bare lease recorded %+v", l.ManagedFields)
	}
	l = must[*coordinationv1.Lease](t)(leases.Patch(ctx, "bare", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"1"}},"spec":{"holderIdentity":"h"}}`), metav1.PatchOptions{FieldManager: "patcher"}))
	l.Spec.LeaseTransitions = ptr[int32](1)
	l = must[*coordinationv1.Lease](t)(leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: "updater"}))
	if len(l.ManagedFields) != 0 || *l.Spec.HolderIdentity != "h" || l.Labels["a"] != "1" {
		t.Errorf("updates of an untracked lease: managedFields %+v, spec %+v, labels %v", l.ManagedFields, l.Spec, l.Labels)
	}
	l = must[*coordinationv1.Lease](t)(leases.Apply(ctx, coordinationv1ac.Lease("bare", "default").WithSpec(coordinationv1ac.LeaseSpec().WithLeaseDurationSeconds(5)),
		metav1.ApplyOptions{FieldManager: "applier"}))
	l = must[*coordinationv1.Lease](t)(leases.Patch(ctx, "bare", types.MergePatchType, []byte(`{"metadata":{"labels":{"b":"2"}}}`), metav1.PatchOptions{FieldManager: "patcher"}))
	want := []managedEntry{
		{"applier", metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:leaseDurationSeconds":{}}}`},
		{"before-first-apply", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{".":{},"f:a":{}}},"f:spec":{"f:holderIdentity":{},"f:leaseTransitions":{}}}`},
		{"patcher", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{"f:b":{}}}}`},
	}
	if diff := cmp.Diff(want, managed(t, l, leaseAPIVersion)); diff != "" {
		t.Errorf("managedFields once applied (-want +got):\n%s", diff)
	}
}

// TestApplyInTerminatingNamespace checks NamespaceLifecycle on creates
// through apply: a namespace being deleted refuses new content with 403
// and cause NamespaceTerminating, while patches of existing objects go on.
func TestApplyInTerminatingNamespace(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	c := s.Client(t)
	must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ending"}}, metav1.CreateOptions{}))
	// The finalizer keeps the lease, and so the namespace, around.
	must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("ending").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{}))
	if err := c.CoreV1().Namespaces().Delete(ctx, "ending", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		ns, err := c.CoreV1().Namespaces().Get(ctx, "ending", metav1.GetOptions{})
		return err == nil && ns.Status.Phase == corev1.NamespaceTerminating
	})
	_, err := c.CoordinationV1().Leases("ending").Apply(ctx, coordinationv1ac.Lease("new", "ending"), metav1.ApplyOptions{FieldManager: "m"})
	se := wantStatus(t, err, http.StatusForbidden, metav1.StatusReasonForbidden)
	if want := `leases.coordination.k8s.io "new" is forbidden: unable to create new content in namespace ending because it is being terminated`; se.ErrStatus.Message != want {
		t.Errorf("message %q, want %q", se.ErrStatus.Message, want)
	}
	wantCauses := []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace ending is being terminated", Field: "metadata.namespace"}}
	if se.ErrStatus.Details == nil || !cmp.Equal(wantCauses, se.ErrStatus.Details.Causes) {
		t.Errorf("details %+v, want causes %+v", se.ErrStatus.Details, wantCauses)
	}
	// Patching the existing lease is an update: allowed. Removing its
	// finalizer lets the namespace go.
	must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("ending").Patch(ctx, "held", types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}))
	waitFor(t, func() bool {
		_, err := c.CoreV1().Namespaces().Get(ctx, "ending", metav1.GetOptions{})
		return err != nil
	})
}

// TestManagedFieldsFromClients covers managedFields sent by clients and
// the manager name taken from the User-Agent (apiserver
// handlers/create.go prefixFromUserAgent): entries that decode replace the
// stored ones (how kubectl migrates client-side apply), others are
// ignored, and a long User-Agent is cut to 128 bytes.
func TestManagedFieldsFromClients(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	leases := s.Client(t).CoordinationV1().Leases("default")

	// On create everything set is a change of the creator's, so foreign
	// entries lose those fields to it.
	foreign := []metav1.ManagedFieldsEntry{{Manager: "elsewhere", Operation: metav1.ManagedFieldsOperationApply, APIVersion: leaseAPIVersion,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:holderIdentity":{}}}`)}}}
	l := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "copied", ManagedFields: foreign},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("h"), LeaseTransitions: ptr[int32](1)}}, metav1.CreateOptions{FieldManager: "creator"}))
	want := []managedEntry{{"creator", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:holderIdentity":{},"f:leaseTransitions":{}}}`}}
	if diff := cmp.Diff(want, managed(t, l, leaseAPIVersion)); diff != "" {
		t.Errorf("create with foreign managedFields (-want +got):\n%s", diff)
	}

	// An update that only rewrites managedFields is taken as is.
	l.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "creator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: leaseAPIVersion, Time: l.ManagedFields[0].Time,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:holderIdentity":{}}}`)}},
		{Manager: "elsewhere", Operation: metav1.ManagedFieldsOperationApply, APIVersion: leaseAPIVersion, Time: l.ManagedFields[0].Time,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:leaseTransitions":{}}}`)}},
	}
	l = must[*coordinationv1.Lease](t)(leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: "editor"}))
	want = []managedEntry{
		{"elsewhere", metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:leaseTransitions":{}}}`},
		{"creator", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:holderIdentity":{}}}`},
	}
	if diff := cmp.Diff(want, managed(t, l, leaseAPIVersion)); diff != "" {
		t.Errorf("update rewriting managedFields (-want +got):\n%s", diff)
	}

	// Entries that do not decode are ignored: the stored ones stay.
	l.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "elsewhere", Operation: "Bogus", APIVersion: leaseAPIVersion,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:holderIdentity":{}}}`)}}}
	l.Spec.HolderIdentity = ptr("i")
	l = must[*coordinationv1.Lease](t)(leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: "editor"}))
	want = []managedEntry{
		{"elsewhere", metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:leaseTransitions":{}}}`},
		{"editor", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:holderIdentity":{}}}`},
	}
	if diff := cmp.Diff(want, managed(t, l, leaseAPIVersion)); diff != "" {
		t.Errorf("update with undecodable managedFields (-want +got):\n%s", diff)
	}

	long := strings.Repeat("a", 200)
	r := do(t, s, "POST", leasesPath, map[string]string{"Content-Type": "application/json", "User-Agent": long + "/1.0"},
		`{"metadata":{"name":"agent"},"spec":{"holderIdentity":"h"}}`)
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	l = must[*coordinationv1.Lease](t)(leases.Get(ctx, "agent", metav1.GetOptions{}))
	if len(l.ManagedFields) != 1 || l.ManagedFields[0].Manager != long[:128] {
		t.Errorf("manager from a 200-byte User-Agent: %+v", l.ManagedFields)
	}
}

package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	discoveryv1ac "k8s.io/client-go/applyconfigurations/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// The generic verbs are the per-kind suite's (TestKinds); these tests
// cover what is EndpointSlice's own: defaults, generation, dropped
// fields, list semantics of patches and apply, validation and warnings.

const slicesPath = "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices"

// webSlice is a slice of Service "web" as the EndpointSlice controller
// writes it, less the defaults.
func webSlice(name string, addrs ...string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Port: ptr[int32](80)}},
	}
}

func createNamespace(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))
}

// TestEndpointSlices drives the typed DiscoveryV1 client in JSON and
// protobuf through every verb.
func TestEndpointSlices(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for enc, c := range s.Clients(t) {
		t.Run(enc, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			ns := "slices-" + enc
			createNamespace(t, c, ns)
			eps := c.DiscoveryV1().EndpointSlices(ns)

			// Create: ports defaulted, generation 1 whatever was sent,
			// deprecatedTopology dropped.
			in := webSlice("web-1", "10.0.0.1", "10.0.0.2")
			in.Generation = 7
			in.Endpoints[0].NodeName = ptr("node-1")
			in.Endpoints[0].Zone = ptr("zone-a")
			in.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelHostname: "node-1"}
			in.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}, ForNodes: []discoveryv1.ForNode{{Name: "node-1"}}}
			created := must[*discoveryv1.EndpointSlice](t)(eps.Create(ctx, in, metav1.CreateOptions{}))
			want := in.DeepCopy()
			want.Ports[0].Name, want.Ports[0].Protocol = ptr(""), ptr(corev1.ProtocolTCP)
			want.Endpoints[0].DeprecatedTopology = nil
			if diff := cmp.Diff(want.Endpoints, created.Endpoints); diff != "" {
				t.Errorf("created endpoints (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want.Ports, created.Ports); diff != "" {
				t.Errorf("created ports (-want +got):\n%s", diff)
			}
			if created.Generation != 1 || created.AddressType != discoveryv1.AddressTypeIPv4 {
				t.Errorf("created: generation %d addressType %q", created.Generation, created.AddressType)
			}
			must[*discoveryv1.EndpointSlice](t)(eps.Create(ctx, &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: "other-1", Labels: map[string]string{discoveryv1.LabelServiceName: "other"}},
				AddressType: discoveryv1.AddressTypeIPv6,
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"2001:db8::1"}}},
			}, metav1.CreateOptions{}))

			got := must[*discoveryv1.EndpointSlice](t)(eps.Get(ctx, "web-1", metav1.GetOptions{}))
			if diff := cmp.Diff(created, got); diff != "" {
				t.Errorf("get (-created +got):\n%s", diff)
			}
			l := must[*discoveryv1.EndpointSliceList](t)(eps.List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"}))
			if len(l.Items) != 1 || l.Items[0].Name != "web-1" {
				t.Errorf("list by service name: %v", sliceNames(l.Items))
			}
			if _, err := eps.List(ctx, metav1.ListOptions{FieldSelector: "addressType=IPv4"}); !apierrors.IsBadRequest(err) {
				t.Errorf("list by addressType: %v, want 400", err)
			}

			// The generation counts changes of anything but metadata, and
			// of the labels.
			gen := func(what string, obj *discoveryv1.EndpointSlice, want int64) {
				t.Helper()
				if obj.Generation != want {
					t.Errorf("%s: generation %d, want %d", what, obj.Generation, want)
				}
			}
			cur := got.DeepCopy()
			cur.Annotations = map[string]string{"note": "a"}
			cur = must[*discoveryv1.EndpointSlice](t)(eps.Update(ctx, cur, metav1.UpdateOptions{}))
			gen("annotation update", cur, 1)
			cur.Endpoints[0].Conditions.Serving = ptr(true)
			cur = must[*discoveryv1.EndpointSlice](t)(eps.Update(ctx, cur, metav1.UpdateOptions{}))
			gen("conditions update", cur, 2)
			cur.Labels["tier"] = "front"
			cur = must[*discoveryv1.EndpointSlice](t)(eps.Update(ctx, cur, metav1.UpdateOptions{}))
			gen("labels update", cur, 3)
			cur.Generation = 1
			cur = must[*discoveryv1.EndpointSlice](t)(eps.Update(ctx, cur, metav1.UpdateOptions{}))
			gen("update sending an older generation", cur, 3)

			// A PUT never creates; one without resourceVersion overwrites.
			_, err := eps.Update(ctx, webSlice("missing", "10.0.0.9"), metav1.UpdateOptions{})
			wantStatus(t, err, http.StatusNotFound, metav1.StatusReasonNotFound)
			over := webSlice("web-1", "10.0.0.3")
			over.Labels["tier"] = "front"
			over = must[*discoveryv1.EndpointSlice](t)(eps.Update(ctx, over, metav1.UpdateOptions{}))
			gen("unconditional update", over, 4)
			if over.UID != created.UID || len(over.Annotations) != 0 || !slices.Equal(over.Endpoints[0].Addresses, []string{"10.0.0.3"}) {
				t.Errorf("unconditional update: %+v", over)
			}

			// Patches: no list has a merge key, so a strategic merge
			// patch replaces endpoints as a whole, as a merge patch does.
			p := must[*discoveryv1.EndpointSlice](t)(eps.Patch(ctx, "web-1", types.StrategicMergePatchType,
				[]byte(`{"endpoints":[{"addresses":["10.0.0.4"]}]}`), metav1.PatchOptions{}))
			if diff := cmp.Diff([]discoveryv1.Endpoint{{Addresses: []string{"10.0.0.4"}}}, p.Endpoints); diff != "" {
				t.Errorf("strategic merge patch (-want +got):\n%s", diff)
			}
			gen("strategic merge patch", p, 5)
			p = must[*discoveryv1.EndpointSlice](t)(eps.Patch(ctx, "web-1", types.MergePatchType,
				[]byte(`{"ports":[{"name":"https","port":443}]}`), metav1.PatchOptions{}))
			if diff := cmp.Diff([]discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr[int32](443), Protocol: ptr(corev1.ProtocolTCP)}}, p.Ports); diff != "" {
				t.Errorf("merge patch: ports (-want +got):\n%s", diff)
			}
			gen("merge patch", p, 6)
			p = must[*discoveryv1.EndpointSlice](t)(eps.Patch(ctx, "web-1", types.JSONPatchType,
				[]byte(`[{"op":"add","path":"/endpoints/0/addresses/-","value":"10.0.0.5"}]`), metav1.PatchOptions{}))
			if !slices.Equal(p.Endpoints[0].Addresses, []string{"10.0.0.4", "10.0.0.5"}) {
				t.Errorf("json patch: addresses %q", p.Endpoints[0].Addresses)
			}
			gen("json patch", p, 7)
			p = must[*discoveryv1.EndpointSlice](t)(eps.Patch(ctx, "web-1", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"note":"b"}}}`), metav1.PatchOptions{}))
			gen("annotation patch", p, 7)
			_, err = eps.Patch(ctx, "web-1", types.MergePatchType, []byte(`{"addressType":"IPv6"}`), metav1.PatchOptions{})
			se := wantStatus(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
			wantCauses(t, "addressType change", se, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: "addressType", Message: `Invalid value: "IPv6": field is immutable`})

			// Dry runs check everything and store nothing.
			dry := must[*discoveryv1.EndpointSlice](t)(eps.Create(ctx, webSlice("dry", "10.0.0.6"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}))
			if dry.ResourceVersion != "" || dry.UID == "" || dry.Generation != 1 || *dry.Ports[0].Protocol != corev1.ProtocolTCP {
				t.Errorf("dry-run create: %+v", dry)
			}
			if _, err := eps.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("dry-run create stored: %v", err)
			}
			_, err = eps.Create(ctx, webSlice("dry", "127.0.0.1"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			wantStatus(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
			dryUpd := p.DeepCopy()
			dryUpd.Endpoints[0].Addresses = []string{"10.0.0.7"}
			dryUpd = must[*discoveryv1.EndpointSlice](t)(eps.Update(ctx, dryUpd, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}))
			gen("dry-run update", dryUpd, 8)
			stored := must[*discoveryv1.EndpointSlice](t)(eps.Get(ctx, "web-1", metav1.GetOptions{}))
			if stored.ResourceVersion != p.ResourceVersion || stored.Generation != 7 {
				t.Errorf("dry-run update stored: rv %s generation %d", stored.ResourceVersion, stored.Generation)
			}

			// Delete, and delete a collection by label.
			must[*discoveryv1.EndpointSlice](t)(eps.Create(ctx, webSlice("web-2", "10.0.1.1"), metav1.CreateOptions{}))
			if err := eps.Delete(ctx, "web-2", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Fatal(err)
			}
			must[*discoveryv1.EndpointSlice](t)(eps.Get(ctx, "web-2", metav1.GetOptions{}))
			if err := eps.Delete(ctx, "web-2", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID}}); !apierrors.IsConflict(err) {
				t.Errorf("delete with another uid: %v", err)
			}
			if err := eps.Delete(ctx, "web-2", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			must[*discoveryv1.EndpointSlice](t)(eps.Create(ctx, webSlice("web-3", "10.0.1.2"), metav1.CreateOptions{}))
			if err := eps.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"}); err != nil {
				t.Fatal(err)
			}
			l = must[*discoveryv1.EndpointSliceList](t)(eps.List(ctx, metav1.ListOptions{}))
			if diff := cmp.Diff([]string{"other-1"}, sliceNames(l.Items)); diff != "" {
				t.Errorf("after deletecollection (-want +got):\n%s", diff)
			}
		})
	}
}

func sliceNames(items []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Name)
	}
	return out
}

// wantCauses fails unless se's causes are want.
func wantCauses(t *testing.T, what string, se *apierrors.StatusError, want ...metav1.StatusCause) {
	t.Helper()
	var got []metav1.StatusCause
	if se.ErrStatus.Details != nil {
		got = se.ErrStatus.Details.Causes
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: causes (-want +got):\n%s\nmessage: %s", what, diff, se.ErrStatus.Message)
	}
}

// TestEndpointSliceValidation: 422 answers through the API, as
// kube-apiserver words them.
func TestEndpointSliceValidation(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	eps := s.Client(t).DiscoveryV1().EndpointSlices("default")
	many := webSlice("many")
	many.Endpoints = nil
	for i := range 1001 {
		many.Endpoints = append(many.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}})
	}
	cases := []struct {
		name    string
		slice   *discoveryv1.EndpointSlice
		message string
		causes  []metav1.StatusCause
	}{
		{
			name: "family and duplicate port",
			slice: func() *discoveryv1.EndpointSlice {
				e := webSlice("family", "2001:db8::1")
				e.Ports = []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr[int32](80)}, {Name: ptr("http"), Port: ptr[int32](81)}}
				return e
			}(),
			message: `EndpointSlice.discovery.k8s.io "family" is invalid: [ports[1].name: Duplicate value: "http", endpoints[0].addresses: Invalid value: "2001:db8::1": must be an IPv4 address]`,
			causes: []metav1.StatusCause{
				{Type: metav1.CauseTypeFieldValueDuplicate, Field: "ports[1].name", Message: `Duplicate value: "http"`},
				{Type: metav1.CauseTypeFieldValueInvalid, Field: "endpoints[0].addresses", Message: `Invalid value: "2001:db8::1": must be an IPv4 address`},
			},
		},
		{
			name:    "no address type",
			slice:   func() *discoveryv1.EndpointSlice { e := webSlice("untyped", "10.0.0.1"); e.AddressType = ""; return e }(),
			message: `EndpointSlice.discovery.k8s.io "untyped" is invalid: addressType: Required value`,
			causes:  []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired, Field: "addressType", Message: "Required value"}},
		},
		{
			name:    "leading zeros",
			slice:   webSlice("zeros", "010.0.0.1"),
			message: `EndpointSlice.discovery.k8s.io "zeros" is invalid: endpoints[0].addresses[0]: Invalid value: "010.0.0.1": must not have leading 0s`,
			causes:  []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "endpoints[0].addresses[0]", Message: `Invalid value: "010.0.0.1": must not have leading 0s`}},
		},
		{
			name:    "1001 endpoints",
			slice:   many,
			message: `EndpointSlice.discovery.k8s.io "many" is invalid: endpoints: Too many: 1001: must have at most 1000 items`,
			causes:  []metav1.StatusCause{{Type: metav1.CauseTypeTooMany, Field: "endpoints", Message: "Too many: 1001: must have at most 1000 items"}},
		},
		{
			name: "protocol",
			slice: func() *discoveryv1.EndpointSlice {
				e := webSlice("icmp", "10.0.0.1")
				e.Ports[0].Protocol = ptr(corev1.Protocol("ICMP"))
				return e
			}(),
			message: `EndpointSlice.discovery.k8s.io "icmp" is invalid: ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`,
			causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueNotSupported, Field: "ports[0].protocol",
				Message: `Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := eps.Create(ctx, tc.slice, metav1.CreateOptions{})
			se := wantStatus(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
			if se.ErrStatus.Message != tc.message {
				t.Errorf("message:\n %s\nwant\n %s", se.ErrStatus.Message, tc.message)
			}
			if d := se.ErrStatus.Details; d == nil || d.Kind != "EndpointSlice" || d.Group != "discovery.k8s.io" || d.Name != tc.slice.Name {
				t.Errorf("details %+v", d)
			}
			wantCauses(t, tc.name, se, tc.causes...)
			if _, err := eps.Get(ctx, tc.slice.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("an invalid slice was stored: %v", err)
			}
		})
	}
}

// warningRecorder collects the Warning headers a client receives.
type warningRecorder struct {
	mu   sync.Mutex // guards list
	list []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// take returns the warnings received since the last take.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// TestEndpointSliceWarnings: FQDN slices are deprecated (a create warns),
// and an address that is an IP in a non-standard form warns on create and
// update; strict IP validation leaves such addresses to FQDN slices.
// Unknown fields warn, or fail with fieldValidation=Strict.
func TestEndpointSliceWarnings(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(s.Config)
	cfg.WarningHandler = rec
	eps := kubernetes.NewForConfigOrDie(cfg).DiscoveryV1().EndpointSlices("default")

	fqdn := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "names"},
		AddressType: discoveryv1.AddressTypeFQDN,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"web.example.com", "010.0.0.1"}}},
	}
	created := must[*discoveryv1.EndpointSlice](t)(eps.Create(ctx, fqdn, metav1.CreateOptions{}))
	ipWarning := `endpoints[0].addresses[1]: non-standard IP address "010.0.0.1" is invalid: use "10.0.0.1"`
	if diff := cmp.Diff([]string{"spec.addressType: FQDN endpoints are deprecated", ipWarning}, rec.take()); diff != "" {
		t.Errorf("create warnings (-want +got):\n%s", diff)
	}
	created.Annotations = map[string]string{"a": "b"}
	must[*discoveryv1.EndpointSlice](t)(eps.Update(ctx, created, metav1.UpdateOptions{}))
	if diff := cmp.Diff([]string{ipWarning}, rec.take()); diff != "" {
		t.Errorf("update warnings (-want +got):\n%s", diff)
	}
	managed := webSlice("managed", "10.0.0.1")
	managed.AddressType = discoveryv1.AddressTypeFQDN
	managed.Endpoints[0].Addresses = []string{"010.0.0.1"}
	managed.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
	must[*discoveryv1.EndpointSlice](t)(eps.Create(ctx, managed, metav1.CreateOptions{}))
	if diff := cmp.Diff([]string{"spec.addressType: FQDN endpoints are deprecated"}, rec.take()); diff != "" {
		t.Errorf("controller's slice: warnings (-want +got):\n%s", diff)
	}
	must[*discoveryv1.EndpointSlice](t)(eps.Create(ctx, webSlice("canonical", "10.0.0.1"), metav1.CreateOptions{}))
	if got := rec.take(); len(got) != 0 {
		t.Errorf("canonical slice: warnings %q", got)
	}

	body := `{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"%s"},"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"],"bogus":true}]}`
	path := fmt.Sprintf(slicesPath, "default")
	r := do(t, s, "POST", path+"?fieldValidation=Strict", map[string]string{"Content-Type": "application/json"}, fmt.Sprintf(body, "strict"))
	var st metav1.Status
	_ = json.Unmarshal(r.body, &st)
	if want := `EndpointSlice in version "v1" cannot be handled as a EndpointSlice: strict decoding error: unknown field "endpoints[0].bogus"`; r.code != 400 || st.Message != want {
		t.Errorf("Strict: %d %s, want 400 %q", r.code, r.body, want)
	}
	r = do(t, s, "POST", path, map[string]string{"Content-Type": "application/json"}, fmt.Sprintf(body, "warned"))
	if want := []string{`299 - ` + strconv.Quote(`unknown field "endpoints[0].bogus"`)}; r.code != 201 || !slices.Equal(r.header.Values("Warning"), want) {
		t.Errorf("Warn: %d %q %s, want 201 with %q", r.code, r.header.Values("Warning"), r.body, want)
	}
}

// TestServerSideApplyEndpointSlice: endpoints and ports are atomic lists,
// each owned whole by one manager; addressType, applied with the same
// value by both, is shared.
func TestServerSideApplyEndpointSlice(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for enc, c := range s.Clients(t) {
		t.Run(enc, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			eps := c.DiscoveryV1().EndpointSlices("default")
			name := "ssa-" + enc
			endpoint := func(addrs ...string) *discoveryv1ac.EndpointApplyConfiguration {
				return discoveryv1ac.Endpoint().WithAddresses(addrs...).WithConditions(discoveryv1ac.EndpointConditions().WithReady(true))
			}
			cfgA := func() *discoveryv1ac.EndpointSliceApplyConfiguration {
				return discoveryv1ac.EndpointSlice(name, "default").WithAddressType(discoveryv1.AddressTypeIPv4).
					WithEndpoints(endpoint("10.0.0.1"), endpoint("10.0.0.2"))
			}
			a := must[*discoveryv1.EndpointSlice](t)(eps.Apply(ctx, cfgA(), metav1.ApplyOptions{FieldManager: "mgr-a"}))
			if a.Generation != 1 || len(a.Endpoints) != 2 {
				t.Errorf("first apply: generation %d endpoints %v", a.Generation, a.Endpoints)
			}
			want := []managedEntry{{"mgr-a", metav1.ManagedFieldsOperationApply, `{"f:addressType":{},"f:endpoints":{}}`}}
			if diff := cmp.Diff(want, managed(t, a, "discovery.k8s.io/v1")); diff != "" {
				t.Errorf("managedFields (-want +got):\n%s", diff)
			}
			again := must[*discoveryv1.EndpointSlice](t)(eps.Apply(ctx, cfgA(), metav1.ApplyOptions{FieldManager: "mgr-a"}))
			if again.ResourceVersion != a.ResourceVersion {
				t.Errorf("re-applying the same configuration wrote: rv %s -> %s", a.ResourceVersion, again.ResourceVersion)
			}

			// Another manager adds the ports; re-applying them without
			// the defaulted name and protocol is a no-op.
			cfgB := func() *discoveryv1ac.EndpointSliceApplyConfiguration {
				return discoveryv1ac.EndpointSlice(name, "default").WithAddressType(discoveryv1.AddressTypeIPv4).
					WithPorts(discoveryv1ac.EndpointPort().WithPort(80))
			}
			b := must[*discoveryv1.EndpointSlice](t)(eps.Apply(ctx, cfgB(), metav1.ApplyOptions{FieldManager: "mgr-b"}))
			if diff := cmp.Diff([]discoveryv1.EndpointPort{{Name: ptr(""), Port: ptr[int32](80), Protocol: ptr(corev1.ProtocolTCP)}}, b.Ports); diff != "" {
				t.Errorf("applied ports (-want +got):\n%s", diff)
			}
			if b.Generation != 2 || len(b.Endpoints) != 2 {
				t.Errorf("second manager: generation %d endpoints %v", b.Generation, b.Endpoints)
			}
			want = []managedEntry{
				{"mgr-a", metav1.ManagedFieldsOperationApply, `{"f:addressType":{},"f:endpoints":{}}`},
				{"mgr-b", metav1.ManagedFieldsOperationApply, `{"f:addressType":{},"f:ports":{}}`},
			}
			if diff := cmp.Diff(want, managed(t, b, "discovery.k8s.io/v1")); diff != "" {
				t.Errorf("managedFields (-want +got):\n%s", diff)
			}
			if again := must[*discoveryv1.EndpointSlice](t)(eps.Apply(ctx, cfgB(), metav1.ApplyOptions{FieldManager: "mgr-b"})); again.ResourceVersion != b.ResourceVersion {
				t.Errorf("re-applying the ports wrote: rv %s -> %s", b.ResourceVersion, again.ResourceVersion)
			}

			// One address more is a change of the whole atomic list.
			_, err := eps.Apply(ctx, cfgB().WithEndpoints(endpoint("10.0.0.1"), endpoint("10.0.0.2"), endpoint("10.0.0.3")), metav1.ApplyOptions{FieldManager: "mgr-b"})
			se := wantStatus(t, err, http.StatusConflict, metav1.StatusReasonConflict)
			if got, want := se.ErrStatus.Message, `Apply failed with 1 conflict: conflict with "mgr-a": .endpoints`; got != want {
				t.Errorf("conflict message %q, want %q", got, want)
			}
			forced := must[*discoveryv1.EndpointSlice](t)(eps.Apply(ctx, cfgB().WithEndpoints(endpoint("10.0.0.3")),
				metav1.ApplyOptions{FieldManager: "mgr-b", Force: true}))
			if len(forced.Endpoints) != 1 || forced.Endpoints[0].Addresses[0] != "10.0.0.3" || forced.Generation != 3 {
				t.Errorf("forced: generation %d endpoints %v", forced.Generation, forced.Endpoints)
			}
			want = []managedEntry{
				{"mgr-a", metav1.ManagedFieldsOperationApply, `{"f:addressType":{}}`},
				{"mgr-b", metav1.ManagedFieldsOperationApply, `{"f:addressType":{},"f:endpoints":{},"f:ports":{}}`},
			}
			if diff := cmp.Diff(want, managed(t, forced, "discovery.k8s.io/v1")); diff != "" {
				t.Errorf("managedFields after force (-want +got):\n%s", diff)
			}
			// Extracting mgr-b's configuration gives the stored values of
			// what it owns, defaults included.
			extracted, err := discoveryv1ac.ExtractEndpointSlice(forced, "mgr-b")
			if err != nil {
				t.Fatal(err)
			}
			wantAC := discoveryv1ac.EndpointSlice(name, "default").WithAddressType(discoveryv1.AddressTypeIPv4).
				WithEndpoints(endpoint("10.0.0.3")).
				WithPorts(discoveryv1ac.EndpointPort().WithName("").WithPort(80).WithProtocol(corev1.ProtocolTCP))
			if diff := cmp.Diff(wantAC, extracted); diff != "" {
				t.Errorf("ExtractEndpointSlice(mgr-b) (-want +got):\n%s", diff)
			}

			// addressType stays immutable under apply.
			_, err = eps.Apply(ctx, discoveryv1ac.EndpointSlice(name, "default").WithAddressType(discoveryv1.AddressTypeFQDN), metav1.ApplyOptions{FieldManager: "mgr-c", Force: true})
			se = wantStatus(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
			wantCauses(t, "apply of another addressType", se, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: "addressType", Message: `Invalid value: "FQDN": field is immutable`})
		})
	}
}

// TestEndpointSliceInformer: a client-go informer on EndpointSlices sees
// adds, updates and deletes.
func TestEndpointSliceInformer(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	admin := s.Client(t)
	createNamespace(t, admin, "informed")
	eps := admin.DiscoveryV1().EndpointSlices("informed")

	factory := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(s.ProtoConfig()), 0, informers.WithNamespace("informed"))
	inf := factory.Discovery().V1().EndpointSlices()
	type event struct {
		kind, name string
		addrs      []string
		gen        int64
	}
	// Events wait here for the test; 16 is more than it makes.
	events := make(chan event, 16)
	send := func(kind string, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		e := obj.(*discoveryv1.EndpointSlice)
		events <- event{kind, e.Name, e.Endpoints[0].Addresses, e.Generation}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { send("add", obj) },
		UpdateFunc: func(_, obj any) { send("update", obj) },
		DeleteFunc: func(obj any) { send("delete", obj) },
	}); err != nil {
		t.Fatal(err)
	}
	must[*discoveryv1.EndpointSlice](t)(eps.Create(ctx, webSlice("before", "10.0.0.1"), metav1.CreateOptions{}))
	stop := make(chan struct{})
	// Shutdown waits for the informers, which stop when stop closes.
	defer factory.Shutdown()
	defer close(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.Informer().HasSynced) {
		t.Fatal("informer did not sync")
	}
	next := func(want event) {
		t.Helper()
		select {
		case got := <-events:
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(event{})); diff != "" {
				t.Errorf("event (-want +got):\n%s", diff)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no event within 20s, want %+v", want)
		}
	}
	next(event{"add", "before", []string{"10.0.0.1"}, 1})
	must[*discoveryv1.EndpointSlice](t)(eps.Create(ctx, webSlice("after", "10.0.0.2"), metav1.CreateOptions{}))
	next(event{"add", "after", []string{"10.0.0.2"}, 1})
	must[*discoveryv1.EndpointSlice](t)(eps.Patch(ctx, "after", types.MergePatchType, []byte(`{"endpoints":[{"addresses":["10.0.0.3"]}]}`), metav1.PatchOptions{}))
	next(event{"update", "after", []string{"10.0.0.3"}, 2})
	if err := eps.Delete(ctx, "before", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next(event{"delete", "before", []string{"10.0.0.1"}, 1})
	if got, err := inf.Lister().EndpointSlices("informed").Get("after"); err != nil || got.Generation != 2 {
		t.Errorf("lister: %v %v", got, err)
	}
}

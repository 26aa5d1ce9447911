package endpointslice_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/endpointslice"
)

func ptr[T any](v T) *T { return &v }

// render is an error as kube-apiserver's 422 causes word it, with its type.
func render(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Error())
	}
	return out
}

const (
	dnsSubdomainMsg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	dnsLabelMsg     = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	qualifiedMsg    = "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
	labelValueMsg   = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
	badIPMsg        = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
)

// newSlice is what the EndpointSlice controller writes for a Service "web"
// with one ready endpoint, after v1 defaulting.
func newSlice() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-abcde", Namespace: "default", ResourceVersion: "3", Generation: 1,
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.0.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
			NodeName:   ptr("node-1"),
			Zone:       ptr("zone-a"),
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr[int32](80)}},
	}
}

func TestDescription(t *testing.T) {
	k := endpointslice.New()
	if err := k.Check(); err != nil {
		t.Fatal(err)
	}
	v := k.Versions[0]
	got := []any{
		v.GroupVersion.String(), k.Names.Kind, k.Names.ListKind, k.Names.Plural, k.Names.Singular, k.KeyPath, k.Names.ShortNames,
		k.Namespaced, k.ServedVerbs(), k.Updates.AllowCreateOnUpdate, k.Updates.AllowUnconditionalUpdate, k.Fields.Labels,
		k.StorageVersionHash(), len(k.Subresources), len(k.Versions), k.TTL,
	}
	want := []any{
		"discovery.k8s.io/v1", "EndpointSlice", "EndpointSliceList", "endpointslices", "endpointslice", "endpointslices", []string(nil),
		true, resources.AllVerbs, false, true, []string{"metadata.name", "metadata.namespace"},
		// base64 of sha256("discovery.k8s.io/v1/EndpointSlice")[:8]
		"qgS0xkrxYAI=", 0, 1, time.Duration(0),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("description (-want +got):\n%s", diff)
	}
	if _, ok := v.New().(*discoveryv1.EndpointSlice); !ok {
		t.Errorf("New() = %T", v.New())
	}
	if _, ok := v.NewList().(*discoveryv1.EndpointSliceList); !ok {
		t.Errorf("NewList() = %T", v.NewList())
	}
	set := fields.Set{}
	for _, l := range k.Fields.Labels {
		set[l] = k.Fields.Value(newSlice(), l)
	}
	if diff := cmp.Diff(fields.Set{"metadata.name": "web-abcde", "metadata.namespace": "default"}, set); diff != "" {
		t.Errorf("field set (-want +got):\n%s", diff)
	}
	res := k.Storage()
	if _, err := res.FieldLabel("addressType"); err == nil || err.Error() != `"addressType" is not a known field selector: only "metadata.name", "metadata.namespace"` {
		t.Errorf("field label addressType: %v", err)
	}
}

func TestDefault(t *testing.T) {
	eps := newSlice()
	eps.Ports = []discoveryv1.EndpointPort{
		{Port: ptr[int32](80)},
		{Name: ptr("dns"), Protocol: ptr(corev1.ProtocolUDP), Port: ptr[int32](53)},
		{Name: ptr(""), Protocol: ptr(corev1.Protocol("tcp"))},
	}
	want := eps.DeepCopy()
	want.Ports[0].Name, want.Ports[0].Protocol = ptr(""), ptr(corev1.ProtocolTCP)
	endpointslice.New().Versions[0].Default(eps)
	if diff := cmp.Diff(want, eps); diff != "" {
		t.Errorf("defaulted (-want +got):\n%s", diff)
	}
	// Defaults share nothing between ports.
	*eps.Ports[0].Name = "changed"
	if *eps.Ports[2].Name != "" {
		t.Error("defaulted names share storage")
	}
}

func TestPrepareForCreate(t *testing.T) {
	k := endpointslice.New()
	eps := newSlice()
	eps.Generation = 9
	eps.Endpoints[0].NodeName = nil
	eps.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelHostname: "node-1", "rack": "r1"}
	eps.Endpoints[0].Hints = &discoveryv1.EndpointHints{
		ForZones: []discoveryv1.ForZone{{Name: "zone-a"}},
		ForNodes: []discoveryv1.ForNode{{Name: "node-1"}},
	}
	want := eps.DeepCopy()
	want.Generation = 1
	// Dropped on create; no earlier state lends its node name.
	want.Endpoints[0].DeprecatedTopology = nil
	k.Strategy.PrepareForCreate(eps)
	if diff := cmp.Diff(want, eps); diff != "" {
		t.Errorf("prepared (-want +got):\n%s", diff)
	}
}

func TestPrepareForUpdate(t *testing.T) {
	k := endpointslice.New()
	topo := func(m map[string]string) func(*discoveryv1.EndpointSlice) {
		return func(e *discoveryv1.EndpointSlice) { e.Endpoints[0].DeprecatedTopology = m }
	}
	cases := []struct {
		name    string
		old     func(*discoveryv1.EndpointSlice)
		change  func(*discoveryv1.EndpointSlice)
		wantGen int64
		// want adjusts the sent object to what is stored; nil: as sent.
		want func(*discoveryv1.EndpointSlice)
	}{
		{name: "nothing changed", change: func(*discoveryv1.EndpointSlice) {}, wantGen: 4},
		{name: "annotation", change: func(e *discoveryv1.EndpointSlice) { e.Annotations = map[string]string{"a": "b"} }, wantGen: 4},
		{name: "owner reference", change: func(e *discoveryv1.EndpointSlice) {
			e.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: "u"}}
		}, wantGen: 4},
		{name: "label", change: func(e *discoveryv1.EndpointSlice) { e.Labels["tier"] = "front" }, wantGen: 5},
		{name: "labels removed", change: func(e *discoveryv1.EndpointSlice) { e.Labels = nil }, wantGen: 5},
		{name: "nil and empty labels are equal", old: func(e *discoveryv1.EndpointSlice) { e.Labels = nil },
			change: func(e *discoveryv1.EndpointSlice) { e.Labels = map[string]string{} }, wantGen: 4},
		{name: "condition", change: func(e *discoveryv1.EndpointSlice) { e.Endpoints[0].Conditions.Serving = ptr(true) }, wantGen: 5},
		{name: "address", change: func(e *discoveryv1.EndpointSlice) { e.Endpoints[0].Addresses = []string{"10.0.0.2"} }, wantGen: 5},
		{name: "port", change: func(e *discoveryv1.EndpointSlice) { e.Ports[0].Port = ptr[int32](81) }, wantGen: 5},
		{name: "address type", change: func(e *discoveryv1.EndpointSlice) { e.AddressType = discoveryv1.AddressTypeIPv6 }, wantGen: 5},
		{name: "nil and empty endpoints are equal", old: func(e *discoveryv1.EndpointSlice) { e.Endpoints = nil },
			change: func(e *discoveryv1.EndpointSlice) { e.Endpoints = []discoveryv1.Endpoint{} }, wantGen: 4},
		{
			// Compared before it is dropped, as upstream does.
			name: "deprecatedTopology sent", change: topo(map[string]string{"rack": "r1"}), wantGen: 5,
			want: topo(nil),
		},
		{
			name: "unchanged endpoints keep their topology", old: topo(map[string]string{"rack": "r1"}),
			change: func(e *discoveryv1.EndpointSlice) { e.Ports[0].Port = ptr[int32](81) }, wantGen: 5,
		},
		{
			name: "node name moves to nodeName when old had it",
			old: func(e *discoveryv1.EndpointSlice) {
				e.Endpoints[0].NodeName = nil
				e.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelHostname: "node-7"}
			},
			change: func(e *discoveryv1.EndpointSlice) {
				e.Endpoints[0].NodeName = nil
				e.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelHostname: "node-7"}
				e.Endpoints[0].Addresses = []string{"10.0.0.2"}
			},
			wantGen: 5,
			want: func(e *discoveryv1.EndpointSlice) {
				e.Endpoints[0].NodeName = ptr("node-7")
				e.Endpoints[0].DeprecatedTopology = nil
			},
		},
		{
			name: "a node name old did not have is dropped",
			old: func(e *discoveryv1.EndpointSlice) {
				e.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelHostname: "node-7"}
			},
			change: func(e *discoveryv1.EndpointSlice) {
				e.Endpoints[0].NodeName = nil
				e.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelHostname: "node-8"}
			},
			wantGen: 5,
			want:    topo(nil),
		},
		{
			name: "nodeName set wins",
			old: func(e *discoveryv1.EndpointSlice) {
				e.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelHostname: "node-7"}
			},
			change: func(e *discoveryv1.EndpointSlice) {
				e.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelHostname: "node-7"}
				e.Endpoints[0].Zone = ptr("zone-b")
			},
			wantGen: 5,
			want:    topo(nil),
		},
		{
			name: "an invalid node name is not moved",
			old: func(e *discoveryv1.EndpointSlice) {
				e.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelHostname: "Node_7"}
			},
			change: func(e *discoveryv1.EndpointSlice) {
				e.Endpoints[0].NodeName = nil
				e.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelHostname: "Node_7", "rack": "r1"}
			},
			wantGen: 5,
			want:    topo(nil),
		},
		{
			// PreferSameTrafficDistribution is GA: forNodes is kept.
			name: "forNodes kept",
			change: func(e *discoveryv1.EndpointSlice) {
				e.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForNodes: []discoveryv1.ForNode{{Name: "node-1"}}}
			},
			wantGen: 5,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := newSlice()
			old.Generation = 4
			if tc.old != nil {
				tc.old(old)
			}
			obj := old.DeepCopy()
			tc.change(obj)
			want := obj.DeepCopy()
			want.Generation = tc.wantGen
			if tc.want != nil {
				tc.want(want)
			}
			kept := old.DeepCopy()
			k.Strategy.PrepareForUpdate(obj, old)
			if diff := cmp.Diff(want, obj); diff != "" {
				t.Errorf("prepared (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(kept, old); diff != "" {
				t.Errorf("old modified (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	k := endpointslice.New()
	odd := func(e *discoveryv1.EndpointSlice) {
		e.Endpoints = []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1", "010.000.001.002"}},
			{Addresses: []string{"::ffff:10.0.0.1", "2001:DB8:0:0::1", "web.example.com"}},
		}
	}
	oddWarnings := []string{
		`endpoints[0].addresses[1]: non-standard IP address "010.000.001.002" is invalid: use "10.0.1.2"`,
		`endpoints[1].addresses[0]: non-standard IP address "::ffff:10.0.0.1" is invalid: use "10.0.0.1"`,
		`endpoints[1].addresses[1]: IPv6 address "2001:DB8:0:0::1" should be in RFC 5952 canonical format ("2001:db8::1")`,
	}
	fqdn := "spec.addressType: FQDN endpoints are deprecated"
	cases := []struct {
		name               string
		change             func(*discoveryv1.EndpointSlice)
		onCreate, onUpdate []string
	}{
		{name: "canonical", change: func(*discoveryv1.EndpointSlice) {}},
		{name: "non-standard IPs", change: odd, onCreate: oddWarnings, onUpdate: oddWarnings},
		{
			name: "FQDN on create only",
			change: func(e *discoveryv1.EndpointSlice) {
				e.AddressType = discoveryv1.AddressTypeFQDN
				e.Endpoints[0].Addresses = []string{"web.example.com"}
			},
			onCreate: []string{fqdn},
		},
		{
			// Any address that is an IP is looked at, whatever the type.
			name: "FQDN with an IP-looking address",
			change: func(e *discoveryv1.EndpointSlice) {
				e.AddressType = discoveryv1.AddressTypeFQDN
				e.Endpoints[0].Addresses = []string{"010.0.0.1"}
			},
			onCreate: []string{fqdn, `endpoints[0].addresses[0]: non-standard IP address "010.0.0.1" is invalid: use "10.0.0.1"`},
			onUpdate: []string{`endpoints[0].addresses[0]: non-standard IP address "010.0.0.1" is invalid: use "10.0.0.1"`},
		},
		{
			name: "EndpointSlice controller skipped",
			change: func(e *discoveryv1.EndpointSlice) {
				odd(e)
				e.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
			},
		},
		{
			name: "mirroring controller skipped",
			change: func(e *discoveryv1.EndpointSlice) {
				odd(e)
				e.Labels[discoveryv1.LabelManagedBy] = "endpointslicemirroring-controller.k8s.io"
			},
		},
		{
			name: "other managers warned",
			change: func(e *discoveryv1.EndpointSlice) {
				odd(e)
				e.Labels[discoveryv1.LabelManagedBy] = "someone-else"
			},
			onCreate: oddWarnings, onUpdate: oddWarnings,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eps := newSlice()
			tc.change(eps)
			if diff := cmp.Diff(tc.onCreate, k.Strategy.Warnings(eps, nil)); diff != "" {
				t.Errorf("create warnings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.onUpdate, k.Strategy.Warnings(eps, newSlice())); diff != "" {
				t.Errorf("update warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTable(t *testing.T) {
	k := endpointslice.New()
	type col struct {
		Name, Type, Format string
		Priority           int32
	}
	var cols []col
	for _, c := range k.Table.Columns {
		cols = append(cols, col{c.Name, c.Type, c.Format, c.Priority})
	}
	wantCols := []col{{"Name", "string", "name", 0}, {"AddressType", "string", "", 0}, {"Ports", "string", "", 0}, {"Endpoints", "string", "", 0}, {"Age", "string", "", 0}}
	if diff := cmp.Diff(wantCols, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	doc := discoveryv1.EndpointSlice{}.SwaggerDoc()
	for i, f := range []string{"addressType", "ports", "endpoints"} {
		if got := k.Table.Columns[i+1].Description; got != doc[f] || got == "" {
			t.Errorf("column %d description %q, want %q", i+1, got, doc[f])
		}
	}

	port := func(name *string, n *int32) discoveryv1.EndpointPort {
		return discoveryv1.EndpointPort{Name: name, Port: n, Protocol: ptr(corev1.ProtocolTCP)}
	}
	ep := func(addrs ...string) discoveryv1.Endpoint { return discoveryv1.Endpoint{Addresses: addrs} }
	cases := []struct {
		name      string
		ports     []discoveryv1.EndpointPort
		endpoints []discoveryv1.Endpoint
		wantPorts string
		wantEPs   string
	}{
		{name: "none", wantPorts: "<unset>", wantEPs: "<unset>"},
		{
			name:      "one each",
			ports:     []discoveryv1.EndpointPort{port(ptr("http"), ptr[int32](80))},
			endpoints: []discoveryv1.Endpoint{ep("10.0.0.1")},
			wantPorts: "80", wantEPs: "10.0.0.1",
		},
		{
			name:      "exactly three",
			ports:     []discoveryv1.EndpointPort{port(ptr("a"), ptr[int32](1)), port(ptr("b"), ptr[int32](2)), port(ptr("c"), ptr[int32](3))},
			endpoints: []discoveryv1.Endpoint{ep("10.0.0.1", "10.0.0.2"), ep("10.0.0.3")},
			wantPorts: "1,2,3", wantEPs: "10.0.0.1,10.0.0.2,10.0.0.3",
		},
		{
			name: "more than three",
			ports: []discoveryv1.EndpointPort{
				port(ptr("a"), ptr[int32](1)), port(ptr("b"), ptr[int32](2)), port(ptr("c"), ptr[int32](3)), port(ptr("d"), ptr[int32](4)), port(ptr("e"), ptr[int32](5)),
			},
			endpoints: []discoveryv1.Endpoint{ep("10.0.0.1", "10.0.0.2"), ep("10.0.0.3", "10.0.0.4"), ep("10.0.0.5")},
			wantPorts: "1,2,3 + 2 more...", wantEPs: "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...",
		},
		{
			// Every address counts, ready or not; IPv6 unbracketed.
			name:      "not ready and IPv6",
			endpoints: []discoveryv1.Endpoint{{Addresses: []string{"2001:db8::1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}}},
			wantPorts: "<unset>", wantEPs: "2001:db8::1",
		},
		{
			name:      "port without number shows its name",
			ports:     []discoveryv1.EndpointPort{port(ptr("http"), nil), port(nil, nil), port(ptr("dns"), ptr[int32](53))},
			wantPorts: "http,*,53", wantEPs: "<unset>",
		},
		{
			// Defaulting names every port: a lone all-wildcard port has
			// an empty name, which the printer takes for nothing.
			name:      "defaulted wildcard port",
			ports:     []discoveryv1.EndpointPort{port(ptr(""), nil)},
			wantPorts: "<unset>", wantEPs: "<unset>",
		},
		{
			name:      "two wildcard ports",
			ports:     []discoveryv1.EndpointPort{port(ptr(""), nil), port(ptr("x"), nil)},
			wantPorts: ",x", wantEPs: "<unset>",
		},
		{
			name:      "endpoint without addresses",
			endpoints: []discoveryv1.Endpoint{ep(), ep("10.0.0.1")},
			wantPorts: "<unset>", wantEPs: "10.0.0.1",
		},
	}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eps := newSlice()
			eps.CreationTimestamp = metav1.NewTime(now.Add(-150 * time.Second))
			eps.Ports, eps.Endpoints = tc.ports, tc.endpoints
			want := []any{"web-abcde", "IPv4", tc.wantPorts, tc.wantEPs, "2m30s"}
			if diff := cmp.Diff(want, k.Table.Row(eps, now)); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
}

// sliceCases are the rules create and update share; each starts from
// newSlice.
var sliceCases = []struct {
	name   string
	change func(*discoveryv1.EndpointSlice)
	want   []string
}{
	{name: "valid", change: func(*discoveryv1.EndpointSlice) {}},
	{
		name:   "name is a DNS subdomain",
		change: func(e *discoveryv1.EndpointSlice) { e.Name = "Web_1" },
		want:   []string{`FieldValueInvalid metadata.name: Invalid value: "Web_1": ` + dnsSubdomainMsg},
	},
	{name: "dotted name", change: func(e *discoveryv1.EndpointSlice) { e.Name = "web.v2-x" }},
	{
		name:   "address type required",
		change: func(e *discoveryv1.EndpointSlice) { e.AddressType = "" },
		want:   []string{`FieldValueRequired addressType: Required value`},
	},
	{
		// The deprecated "IP" is refused; addresses of an unknown type
		// are not checked.
		name: "address type unsupported",
		change: func(e *discoveryv1.EndpointSlice) {
			e.AddressType = "IP"
			e.Endpoints[0].Addresses = []string{"nonsense"}
		},
		want: []string{`FieldValueNotSupported addressType: Unsupported value: "IP": supported values: "FQDN", "IPv4", "IPv6"`},
	},
	{name: "no endpoints", change: func(e *discoveryv1.EndpointSlice) { e.Endpoints = nil }},
	{name: "no ports", change: func(e *discoveryv1.EndpointSlice) { e.Ports = nil }},
	{
		name:   "endpoint without addresses",
		change: func(e *discoveryv1.EndpointSlice) { e.Endpoints[0].Addresses = nil },
		want:   []string{`FieldValueRequired endpoints[0].addresses: Required value: must contain at least 1 address`},
	},
	{
		name: "101 addresses",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Endpoints[0].Addresses = nil
			for i := range 101 {
				e.Endpoints[0].Addresses = append(e.Endpoints[0].Addresses, fmt.Sprintf("10.0.%d.%d", i/200, i%200+1))
			}
		},
		want: []string{`FieldValueTooMany endpoints[0].addresses: Too many: 101: must have at most 100 items`},
	},
	{
		name: "1000 endpoints",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Endpoints = endpointsOf(1000)
		},
	},
	{
		// One error, and nothing in them is looked at.
		name: "1001 endpoints",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Endpoints = endpointsOf(1001)
			e.Endpoints[0].Addresses = []string{"bad"}
		},
		want: []string{`FieldValueTooMany endpoints: Too many: 1001: must have at most 1000 items`},
	},
	{
		name: "IPv4: not an IP",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Endpoints[0].Addresses = []string{"10.0.0.256", "web.example.com"}
		},
		want: []string{
			`FieldValueInvalid endpoints[0].addresses[0]: Invalid value: "10.0.0.256": ` + badIPMsg,
			`FieldValueInvalid endpoints[0].addresses[1]: Invalid value: "web.example.com": ` + badIPMsg,
		},
	},
	{
		// The wrong family is reported on the list, not the address.
		name: "IPv4 given IPv6",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Endpoints[0].Addresses = []string{"10.0.0.1", "2001:db8::1", "fe80::1"}
		},
		want: []string{
			`FieldValueInvalid endpoints[0].addresses: Invalid value: "2001:db8::1": must be an IPv4 address`,
			`FieldValueInvalid endpoints[0].addresses: Invalid value: "fe80::1": must be an IPv4 address`,
			`FieldValueInvalid endpoints[0].addresses[2]: Invalid value: "fe80::1": may not be in the link-local range (169.254.0.0/16, fe80::/10)`,
		},
	},
	{
		// StrictIPCIDRValidation (on in 1.36) refuses what older
		// releases only warned about; then no other check runs.
		name: "IPv4 strict forms",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Endpoints[0].Addresses = []string{"010.0.0.1", "::ffff:10.0.0.1", "0127.0.0.1"}
		},
		want: []string{
			`FieldValueInvalid endpoints[0].addresses[0]: Invalid value: "010.0.0.1": must not have leading 0s`,
			`FieldValueInvalid endpoints[0].addresses[1]: Invalid value: "::ffff:10.0.0.1": must not be an IPv4-mapped IPv6 address`,
			`FieldValueInvalid endpoints[0].addresses[2]: Invalid value: "0127.0.0.1": must not have leading 0s`,
		},
	},
	{
		name: "IPv4 special ranges",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Endpoints[0].Addresses = []string{"0.0.0.0", "127.0.0.1", "169.254.1.1", "224.0.0.1", "239.1.1.1", "255.255.255.255"}
		},
		want: []string{
			`FieldValueInvalid endpoints[0].addresses[0]: Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)`,
			`FieldValueInvalid endpoints[0].addresses[1]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`,
			`FieldValueInvalid endpoints[0].addresses[2]: Invalid value: "169.254.1.1": may not be in the link-local range (169.254.0.0/16, fe80::/10)`,
			`FieldValueInvalid endpoints[0].addresses[3]: Invalid value: "224.0.0.1": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)`,
		},
	},
	{
		name: "IPv6 given IPv4",
		change: func(e *discoveryv1.EndpointSlice) {
			e.AddressType = discoveryv1.AddressTypeIPv6
			e.Endpoints[0].Addresses = []string{"2001:db8::1", "10.0.0.1", "127.0.0.1"}
		},
		want: []string{
			`FieldValueInvalid endpoints[0].addresses: Invalid value: "10.0.0.1": must be an IPv6 address`,
			`FieldValueInvalid endpoints[0].addresses: Invalid value: "127.0.0.1": must be an IPv6 address`,
			`FieldValueInvalid endpoints[0].addresses[2]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`,
		},
	},
	{
		// IPv6 addresses are checked strictly, canonical form included.
		name: "IPv6 forms",
		change: func(e *discoveryv1.EndpointSlice) {
			e.AddressType = discoveryv1.AddressTypeIPv6
			e.Endpoints[0].Addresses = []string{"2001:DB8::1", "2001:db8:0:0::2", "::ffff:10.0.0.1", "010.0.0.1", "zz::1"}
		},
		want: []string{
			`FieldValueInvalid endpoints[0].addresses[0]: Invalid value: "2001:DB8::1": must be in canonical form ("2001:db8::1")`,
			`FieldValueInvalid endpoints[0].addresses[1]: Invalid value: "2001:db8:0:0::2": must be in canonical form ("2001:db8::2")`,
			`FieldValueInvalid endpoints[0].addresses[2]: Invalid value: "::ffff:10.0.0.1": must not be an IPv4-mapped IPv6 address`,
			`FieldValueInvalid endpoints[0].addresses[3]: Invalid value: "010.0.0.1": must not have leading 0s`,
			`FieldValueInvalid endpoints[0].addresses[4]: Invalid value: "zz::1": ` + badIPMsg,
		},
	},
	{
		name: "IPv6 special ranges",
		change: func(e *discoveryv1.EndpointSlice) {
			e.AddressType = discoveryv1.AddressTypeIPv6
			e.Endpoints[0].Addresses = []string{"::", "::1", "fe80::1", "ff02::1", "ff05::1"}
		},
		want: []string{
			`FieldValueInvalid endpoints[0].addresses[0]: Invalid value: "::": may not be unspecified (::)`,
			`FieldValueInvalid endpoints[0].addresses[1]: Invalid value: "::1": may not be in the loopback range (127.0.0.0/8, ::1/128)`,
			`FieldValueInvalid endpoints[0].addresses[2]: Invalid value: "fe80::1": may not be in the link-local range (169.254.0.0/16, fe80::/10)`,
			`FieldValueInvalid endpoints[0].addresses[3]: Invalid value: "ff02::1": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)`,
		},
	},
	{
		name: "FQDN",
		change: func(e *discoveryv1.EndpointSlice) {
			e.AddressType = discoveryv1.AddressTypeFQDN
			e.Endpoints[0].Addresses = []string{"web.example.com", "web.example.com.", "10.0.0.1", "", "web", "Web.example.com", "a.-b.com", strings.Repeat("a", 64) + ".com"}
		},
		want: []string{
			`FieldValueRequired endpoints[0].addresses[3]: Required value`,
			`FieldValueInvalid endpoints[0].addresses[4]: Invalid value: "web": should be a domain with at least two segments separated by dots`,
			`FieldValueInvalid endpoints[0].addresses[5]: Invalid value: "Web.example.com": ` + dnsSubdomainMsg,
			`FieldValueInvalid endpoints[0].addresses[6]: Invalid value: "a.-b.com": ` + dnsSubdomainMsg,
			`FieldValueInvalid endpoints[0].addresses[7]: Invalid value: "` + strings.Repeat("a", 64) + `": must be no more than 63 characters`,
		},
	},
	{
		name: "hostname and nodeName",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Endpoints[0].Hostname = ptr("Web.1")
			e.Endpoints[0].NodeName = ptr("Node_1")
			e.Endpoints = append(e.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.2"}, Hostname: ptr(""), NodeName: ptr("node.example.com")})
		},
		want: []string{
			`FieldValueInvalid endpoints[0].nodeName: Invalid value: "Node_1": ` + dnsSubdomainMsg,
			`FieldValueInvalid endpoints[0].hostname: Invalid value: "Web.1": ` + dnsLabelMsg,
			`FieldValueInvalid endpoints[1].hostname: Invalid value: "": ` + dnsLabelMsg,
		},
	},
	{
		// Conditions, zone and targetRef are not validated.
		name: "unvalidated fields",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}
			e.Endpoints[0].Zone = ptr("Not A Zone!")
			e.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod?", Name: "!"}
		},
	},
	{
		name: "hints",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Endpoints[0].Hints = &discoveryv1.EndpointHints{
				ForZones: []discoveryv1.ForZone{{Name: "zone-a"}, {Name: "zone-a"}, {Name: "bad zone"}, {Name: ""}},
				ForNodes: []discoveryv1.ForNode{{Name: "node-1"}, {Name: "node-1"}, {Name: "Node_2"}},
			}
		},
		want: []string{
			`FieldValueDuplicate endpoints[0].hints.forZones[1].name: Duplicate value: "zone-a"`,
			`FieldValueInvalid endpoints[0].hints.forZones[2].name: Invalid value: "bad zone": ` + labelValueMsg,
			`FieldValueDuplicate endpoints[0].hints.forNodes[1].name: Duplicate value: "node-1"`,
			`FieldValueInvalid endpoints[0].hints.forNodes[2].name: Invalid value: "Node_2": ` + dnsSubdomainMsg,
		},
	},
	{
		// Too many zones: nodes are not looked at.
		name: "nine zone hints",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForNodes: []discoveryv1.ForNode{{Name: "Bad_Node"}}}
			for i := range 9 {
				e.Endpoints[0].Hints.ForZones = append(e.Endpoints[0].Hints.ForZones, discoveryv1.ForZone{Name: fmt.Sprint("zone-", i)})
			}
		},
		want: []string{`FieldValueTooMany endpoints[0].hints.forZones: Too many: 9: must have at most 8 items`},
	},
	{
		name: "nine node hints",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "bad zone"}}}
			for i := range 9 {
				e.Endpoints[0].Hints.ForNodes = append(e.Endpoints[0].Hints.ForNodes, discoveryv1.ForNode{Name: fmt.Sprint("node-", i)})
			}
		},
		want: []string{
			`FieldValueInvalid endpoints[0].hints.forZones[0].name: Invalid value: "bad zone": ` + labelValueMsg,
			`FieldValueTooMany endpoints[0].hints.forNodes: Too many: 9: must have at most 8 items`,
		},
	},
	{
		// Names are optional but unique, the empty one included;
		// numbers are not checked at all.
		name: "port names and numbers",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Ports = []discoveryv1.EndpointPort{
				{Name: ptr(""), Protocol: ptr(corev1.ProtocolTCP), Port: ptr[int32](0)},
				{Name: ptr(""), Protocol: ptr(corev1.ProtocolTCP), Port: ptr[int32](70000)},
				{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP)},
				{Name: ptr("http"), Protocol: ptr(corev1.ProtocolUDP), Port: ptr[int32](-1)},
				{Name: ptr("HTTP_2"), Protocol: ptr(corev1.ProtocolTCP)},
				{Name: ptr("a<b"), Protocol: ptr(corev1.ProtocolTCP)},
				{Name: ptr("a<b"), Protocol: ptr(corev1.ProtocolTCP)},
			}
		},
		want: []string{
			`FieldValueDuplicate ports[1].name: Duplicate value: ""`,
			`FieldValueDuplicate ports[3].name: Duplicate value: "http"`,
			`FieldValueInvalid ports[4].name: Invalid value: "HTTP_2": ` + dnsLabelMsg,
			`FieldValueInvalid ports[5].name: Invalid value: "a<b": ` + dnsLabelMsg,
			`FieldValueInvalid ports[6].name: Invalid value: "a<b": ` + dnsLabelMsg,
			// The duplicate's value is a *string, rendered as JSON.
			`FieldValueDuplicate ports[6].name: Duplicate value: "a\u003cb"`,
		},
	},
	{
		name: "protocol",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Ports = []discoveryv1.EndpointPort{
				{Name: ptr("a"), Protocol: ptr(corev1.ProtocolSCTP)},
				{Name: ptr("b"), Protocol: ptr(corev1.Protocol("tcp"))},
				{Name: ptr("c")},
			}
		},
		want: []string{
			`FieldValueNotSupported ports[1].protocol: Unsupported value: "tcp": supported values: "SCTP", "TCP", "UDP"`,
			`FieldValueRequired ports[2].protocol: Required value`,
		},
	},
	{
		name: "appProtocol",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Ports = []discoveryv1.EndpointPort{
				{Name: ptr("a"), Protocol: ptr(corev1.ProtocolTCP), AppProtocol: ptr("kubernetes.io/h2c")},
				{Name: ptr("b"), Protocol: ptr(corev1.ProtocolTCP), AppProtocol: ptr("a/b/c")},
				{Name: ptr("c"), Protocol: ptr(corev1.ProtocolTCP), AppProtocol: ptr("")},
			}
		},
		want: []string{
			`FieldValueInvalid ports[1].appProtocol: Invalid value: "a/b/c": ` + qualifiedMsg,
			`FieldValueInvalid ports[2].appProtocol: Invalid value: "": name part must be non-empty`,
			`FieldValueInvalid ports[2].appProtocol: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		},
	},
	{
		name:   "20001 ports",
		change: func(e *discoveryv1.EndpointSlice) { e.Ports = make([]discoveryv1.EndpointPort, 20001) },
		want:   []string{`FieldValueTooMany ports: Too many: 20001: must have at most 20000 items`},
	},
	{
		// Metadata, addressType, ports, endpoints: upstream's order.
		name: "order",
		change: func(e *discoveryv1.EndpointSlice) {
			e.Endpoints[0].Addresses = []string{"127.0.0.1"}
			e.Ports[0].Protocol = ptr(corev1.Protocol("ICMP"))
			e.AddressType = ""
			e.Labels["bad"] = "a b"
		},
		want: []string{
			`FieldValueInvalid metadata.labels: Invalid value: "a b": ` + labelValueMsg,
			`FieldValueRequired addressType: Required value`,
			`FieldValueNotSupported ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`,
		},
	},
}

func endpointsOf(n int) []discoveryv1.Endpoint {
	out := make([]discoveryv1.Endpoint, n)
	for i := range out {
		out[i].Addresses = []string{fmt.Sprintf("10.%d.%d.%d", i/62500, i/250%250, i%250+1)}
	}
	return out
}

func TestValidate(t *testing.T) {
	k := endpointslice.New()
	type tcase struct {
		name   string
		change func(*discoveryv1.EndpointSlice)
		want   []string
	}
	cases := []tcase{
		{
			name:   "namespace required",
			change: func(e *discoveryv1.EndpointSlice) { e.Namespace = "" },
			want:   []string{`FieldValueRequired metadata.namespace: Required value`},
		},
		{
			name:   "core finalizer rule",
			change: func(e *discoveryv1.EndpointSlice) { e.Finalizers = []string{"mine"} },
			want:   []string{`FieldValueInvalid metadata.finalizers[0]: Invalid value: "mine": name is neither a standard finalizer name nor is it fully qualified`},
		},
		{
			name:   "generated name",
			change: func(e *discoveryv1.EndpointSlice) { e.GenerateName = "web-"; e.Name = "web-x7k2b" },
		},
	}
	for _, sc := range sliceCases {
		cases = append(cases, tcase(sc))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eps := newSlice()
			eps.ResourceVersion = ""
			tc.change(eps)
			if diff := cmp.Diff(tc.want, render(k.Strategy.Validate(eps, discoveryv1.SchemeGroupVersion))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	k := endpointslice.New()
	label := `FieldValueInvalid metadata.labels: Invalid value: "a b": ` + labelValueMsg
	type tcase struct {
		name   string
		old    func(*discoveryv1.EndpointSlice)
		change func(*discoveryv1.EndpointSlice)
		want   []string
	}
	loopback := func(e *discoveryv1.EndpointSlice) { e.Endpoints[0].Addresses = []string{"127.0.0.1"} }
	cases := []tcase{
		{
			name: "addressType immutable",
			change: func(e *discoveryv1.EndpointSlice) {
				e.AddressType = discoveryv1.AddressTypeFQDN
				e.Endpoints[0].Addresses = []string{"a.example.com"}
			},
			want: []string{`FieldValueInvalid addressType: Invalid value: "FQDN": field is immutable`},
		},
		{
			name:   "addressType unsupported and immutable",
			change: func(e *discoveryv1.EndpointSlice) { e.AddressType = "IP" },
			want: []string{
				`FieldValueNotSupported addressType: Unsupported value: "IP": supported values: "FQDN", "IPv4", "IPv6"`,
				`FieldValueInvalid addressType: Invalid value: "IP": field is immutable`,
			},
		},
		{
			name:   "addressType cleared",
			change: func(e *discoveryv1.EndpointSlice) { e.AddressType = "" },
			want: []string{
				`FieldValueRequired addressType: Required value`,
				`FieldValueInvalid addressType: Invalid value: "": field is immutable`,
			},
		},
		{
			name:   "unchanged invalid endpoints are not re-checked",
			old:    loopback,
			change: func(e *discoveryv1.EndpointSlice) { loopback(e); e.Ports[0].Port = ptr[int32](81) },
		},
		{
			name: "changed invalid endpoints are checked",
			old:  loopback,
			change: func(e *discoveryv1.EndpointSlice) {
				e.Endpoints[0].Addresses = []string{"127.0.0.1", "10.0.0.9"}
			},
			want: []string{`FieldValueInvalid endpoints[0].addresses[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`},
		},
		{
			// Unlike endpoints, ports are always checked.
			name:   "unchanged invalid ports are checked",
			old:    func(e *discoveryv1.EndpointSlice) { e.Ports[0].Protocol = ptr(corev1.Protocol("ICMP")) },
			change: func(e *discoveryv1.EndpointSlice) { e.Ports[0].Protocol = ptr(corev1.Protocol("ICMP")) },
			want:   []string{`FieldValueNotSupported ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`},
		},
		{
			name:   "namespace immutable",
			change: func(e *discoveryv1.EndpointSlice) { e.Namespace = "other" },
			want:   []string{`FieldValueInvalid metadata.namespace: Invalid value: "other": field is immutable`},
		},
		{
			// Generic create and update passes, and the create rules
			// ValidateEndpointSlice runs again.
			name:   "bad label reported three times",
			change: func(e *discoveryv1.EndpointSlice) { e.Labels["k"] = "a b" },
			want:   []string{label, label, label},
		},
		{
			name:   "legacy finalizer reported once",
			change: func(e *discoveryv1.EndpointSlice) { e.Finalizers = []string{"mine"} },
			want:   []string{`FieldValueInvalid metadata.finalizers[0]: Invalid value: "mine": name is neither a standard finalizer name nor is it fully qualified`},
		},
	}
	for _, sc := range sliceCases {
		switch sc.name {
		case "name is a DNS subdomain", "dotted name":
			continue // names cannot change
		case "address type required", "address type unsupported", "IPv6 given IPv4", "IPv6 forms", "IPv6 special ranges", "FQDN", "order":
			continue // they change addressType: see the cases above
		}
		cases = append(cases, tcase{name: sc.name, change: sc.change, want: sc.want})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, eps := newSlice(), newSlice()
			if tc.old != nil {
				tc.old(old)
			}
			tc.change(eps)
			if diff := cmp.Diff(tc.want, render(k.Strategy.ValidateUpdate(eps, old, discoveryv1.SchemeGroupVersion))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOrigins: the origins kube-apiserver's handwritten rules give their
// errors (declarative validation of EndpointSlice is alpha in 1.36 and
// its errors are not returned).
func TestOrigins(t *testing.T) {
	k := endpointslice.New()
	eps := newSlice()
	eps.Endpoints = []discoveryv1.Endpoint{
		{Addresses: []string{"x"}},
		{Addresses: []string{"127.0.0.1"}, Hostname: ptr("A")},
		{Addresses: slices.Repeat([]string{"10.0.0.1"}, 101)},
	}
	eps.Ports = []discoveryv1.EndpointPort{{Name: ptr("A"), Protocol: ptr(corev1.ProtocolTCP), AppProtocol: ptr("/")}}
	old := newSlice()
	old.AddressType = discoveryv1.AddressTypeIPv6
	type origin struct{ Field, Origin string }
	var got []origin
	for _, e := range k.Strategy.ValidateUpdate(eps, old, discoveryv1.SchemeGroupVersion) {
		got = append(got, origin{e.Field, e.Origin})
	}
	want := []origin{
		{"ports[0].name", "format=k8s-short-name"},
		{"ports[0].appProtocol", "format=qualified-name"},
		{"ports[0].appProtocol", "format=qualified-name"},
		{"ports[0].appProtocol", "format=qualified-name"},
		{"endpoints[0].addresses[0]", "format=ip-sloppy"},
		{"endpoints[1].addresses[0]", "format=endpoint-ip"},
		{"endpoints[1].hostname", "format=k8s-short-name"},
		{"endpoints[2].addresses", "maxItems"},
		{"addressType", "immutable"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("origins (-want +got):\n%s", diff)
	}
}

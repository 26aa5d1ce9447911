package endpoints_test

import (
	"github.com/leasehold/leasehold/internal/resources"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/resources/endpoints"
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
	dnsLabelMsg      = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	qualifiedNameMsg = "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
	labelValueMsg    = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

func newEndpoints() *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "3"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}},
			Ports:     []corev1.EndpointPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		}},
	}
}

func TestDescription(t *testing.T) {
	r := endpoints.New()
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	v := r.Versions[0]
	got := []any{
		v.GroupVersion.String(), r.Names.Kind, r.Names.ListKind, r.Names.Plural, r.Names.Singular, r.KeyPath, r.Names.ShortNames,
		r.Namespaced, r.Updates.AllowCreateOnUpdate, r.Updates.AllowUnconditionalUpdate, r.Fields.Labels,
		r.StorageVersionHash(), len(r.Subresources), v.Default != nil,
	}
	want := []any{
		"v1", "Endpoints", "EndpointsList", "endpoints", "endpoints", "services/endpoints", []string{"ep"},
		true, true, true, []string{"metadata.name", "metadata.namespace"},
		"fWeeMqaN/OA=", 0, true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("description (-want +got):\n%s", diff)
	}
	if _, ok := v.New().(*corev1.Endpoints); !ok {
		t.Errorf("New() = %T", v.New())
	}
	if _, ok := v.NewList().(*corev1.EndpointsList); !ok {
		t.Errorf("NewList() = %T", v.NewList())
	}
	if diff := cmp.Diff(fields.Set{"metadata.name": "web", "metadata.namespace": "default"}, fieldSet(r, newEndpoints())); diff != "" {
		t.Errorf("Fields (-want +got):\n%s", diff)
	}
}

func TestDefault(t *testing.T) {
	ep := newEndpoints()
	ep.Subsets = []corev1.EndpointSubset{
		{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}},
			Ports:     []corev1.EndpointPort{{Name: "a", Port: 1}, {Name: "b", Port: 2, Protocol: corev1.ProtocolUDP}},
		},
		{NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.2"}}},
		{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.3"}},
			Ports:     []corev1.EndpointPort{{Port: 3, Protocol: "tcp"}, {Port: 4}},
		},
	}
	want := ep.DeepCopy()
	want.Subsets[0].Ports[0].Protocol = corev1.ProtocolTCP
	want.Subsets[2].Ports[1].Protocol = corev1.ProtocolTCP
	endpoints.New().Versions[0].Default(ep)
	if diff := cmp.Diff(want, ep); diff != "" {
		t.Errorf("defaulted (-want +got):\n%s", diff)
	}
}

// subsetCases cover E2-E10, which create and update share.
var subsetCases = []struct {
	name    string
	subsets []corev1.EndpointSubset
	want    []string
}{
	{name: "no subsets"},
	{
		name:    "headless: no ports",
		subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}}},
	},
	{
		name:    "notReady only",
		subsets: []corev1.EndpointSubset{{NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}}},
	},
	{
		name:    "subset without addresses",
		subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}}, {Ports: []corev1.EndpointPort{{Port: 80, Protocol: "TCP"}}}},
		want:    []string{"FieldValueRequired subsets[1]: Required value: must specify `addresses` or `notReadyAddresses`"},
	},
	{
		name:    "unparseable IP is reported twice",
		subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0"}}}},
		want: []string{
			`FieldValueInvalid subsets[0].addresses[0].ip: Invalid value: "10.0.0": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`,
			`FieldValueInvalid subsets[0].addresses[0].ip: Invalid value: "10.0.0": must be a valid IP address`,
		},
	},
	{
		name:    "empty IP",
		subsets: []corev1.EndpointSubset{{NotReadyAddresses: []corev1.EndpointAddress{{IP: ""}}}},
		want: []string{
			`FieldValueInvalid subsets[0].notReadyAddresses[0].ip: Invalid value: "": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`,
			`FieldValueInvalid subsets[0].notReadyAddresses[0].ip: Invalid value: "": must be a valid IP address`,
		},
	},
	{
		name: "lenient IP forms",
		subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{
			{IP: "010.000.001.002"}, {IP: "::ffff:10.0.0.1"}, {IP: "2001:DB8:0:0::1"},
			// Multicast outside the link-local block, broadcast and 0/8 pass.
			{IP: "224.0.1.1"}, {IP: "255.255.255.255"}, {IP: "0.1.2.3"}, {IP: "ff05::1"},
		}}},
	},
	{
		name: "special IPs",
		subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{
			{IP: "0.0.0.0"}, {IP: "::"}, {IP: "127.0.0.2"}, {IP: "::1"}, {IP: "::ffff:127.0.0.1"},
			{IP: "169.254.1.1"}, {IP: "fe80::1"}, {IP: "224.0.0.251"}, {IP: "ff02::fb"},
		}}},
		want: []string{
			`FieldValueInvalid subsets[0].addresses[0].ip: Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)`,
			`FieldValueInvalid subsets[0].addresses[1].ip: Invalid value: "::": may not be unspecified (::)`,
			`FieldValueInvalid subsets[0].addresses[2].ip: Invalid value: "127.0.0.2": may not be in the loopback range (127.0.0.0/8, ::1/128)`,
			`FieldValueInvalid subsets[0].addresses[3].ip: Invalid value: "::1": may not be in the loopback range (127.0.0.0/8, ::1/128)`,
			`FieldValueInvalid subsets[0].addresses[4].ip: Invalid value: "::ffff:127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`,
			`FieldValueInvalid subsets[0].addresses[5].ip: Invalid value: "169.254.1.1": may not be in the link-local range (169.254.0.0/16, fe80::/10)`,
			`FieldValueInvalid subsets[0].addresses[6].ip: Invalid value: "fe80::1": may not be in the link-local range (169.254.0.0/16, fe80::/10)`,
			`FieldValueInvalid subsets[0].addresses[7].ip: Invalid value: "224.0.0.251": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)`,
			`FieldValueInvalid subsets[0].addresses[8].ip: Invalid value: "ff02::fb": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)`,
		},
	},
	{
		name: "hostname, nodeName, then IP",
		subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{
			{IP: "x", Hostname: "a.b", NodeName: ptr("Node_1")},
			{IP: "10.0.0.2", Hostname: "Pod", NodeName: ptr("")},
			{IP: "10.0.0.3", Hostname: "pod-3", NodeName: ptr("node-3.example"), TargetRef: &corev1.ObjectReference{Kind: "??", Name: "Not Valid"}},
		}}},
		want: []string{
			`FieldValueInvalid subsets[0].addresses[0].ip: Invalid value: "x": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`,
			`FieldValueInvalid subsets[0].addresses[0].hostname: Invalid value: "a.b": must not contain dots`,
			`FieldValueInvalid subsets[0].addresses[0].nodeName: Invalid value: "Node_1": ` + dnsSubdomainMsg,
			`FieldValueInvalid subsets[0].addresses[0].ip: Invalid value: "x": must be a valid IP address`,
			`FieldValueInvalid subsets[0].addresses[1].hostname: Invalid value: "Pod": ` + dnsLabelMsg,
			`FieldValueInvalid subsets[0].addresses[1].nodeName: Invalid value: "": ` + dnsSubdomainMsg,
		},
	},
	{
		name: "port names required only with several ports",
		subsets: []corev1.EndpointSubset{
			{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []corev1.EndpointPort{{Port: 80, Protocol: "TCP"}}},
			{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []corev1.EndpointPort{{Port: 80, Protocol: "TCP"}, {Name: "b", Port: 81, Protocol: "UDP"}}},
		},
		want: []string{`FieldValueRequired subsets[1].ports[0].name: Required value`},
	},
	{
		name: "duplicates are accepted",
		subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.1"}},
			Ports:     []corev1.EndpointPort{{Name: "a", Port: 80, Protocol: "TCP"}, {Name: "a", Port: 80, Protocol: "TCP"}},
		}},
	},
	{
		name: "port name is a DNS label, not an IANA name",
		subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}},
			Ports: []corev1.EndpointPort{
				{Name: "123-very-long-but-still-fine", Port: 1, Protocol: "TCP"},
				{Name: "HTTP", Port: 2, Protocol: "TCP"},
				{Name: "a.b", Port: 3, Protocol: "TCP"},
			},
		}},
		want: []string{
			`FieldValueInvalid subsets[0].ports[1].name: Invalid value: "HTTP": ` + dnsLabelMsg,
			`FieldValueInvalid subsets[0].ports[2].name: Invalid value: "a.b": must not contain dots`,
		},
	},
	{
		name: "port numbers",
		subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}},
			Ports: []corev1.EndpointPort{
				{Name: "a", Port: 0, Protocol: "TCP"}, {Name: "b", Port: 65536, Protocol: "TCP"},
				{Name: "c", Port: 1, Protocol: "TCP"}, {Name: "d", Port: 65535, Protocol: "TCP"},
			},
		}},
		want: []string{
			`FieldValueInvalid subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive`,
			`FieldValueInvalid subsets[0].ports[1].port: Invalid value: 65536: must be between 1 and 65535, inclusive`,
		},
	},
	{
		name: "protocols",
		subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}},
			Ports: []corev1.EndpointPort{
				{Name: "a", Port: 1, Protocol: "TCP"}, {Name: "b", Port: 1, Protocol: "UDP"}, {Name: "c", Port: 1, Protocol: "SCTP"},
				{Name: "d", Port: 1, Protocol: "tcp"}, {Name: "e", Port: 1},
			},
		}},
		want: []string{
			`FieldValueNotSupported subsets[0].ports[3].protocol: Unsupported value: "tcp": supported values: "SCTP", "TCP", "UDP"`,
			`FieldValueRequired subsets[0].ports[4].protocol: Required value`,
		},
	},
	{
		name: "appProtocol",
		subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}},
			Ports: []corev1.EndpointPort{
				{Name: "a", Port: 1, Protocol: "TCP", AppProtocol: ptr("kubernetes.io/h2c")},
				{Name: "b", Port: 1, Protocol: "TCP", AppProtocol: ptr("a/b/c")},
				{Name: "c", Port: 1, Protocol: "TCP", AppProtocol: ptr("")},
			},
		}},
		want: []string{
			`FieldValueInvalid subsets[0].ports[1].appProtocol: Invalid value: "a/b/c": ` + qualifiedNameMsg,
			`FieldValueInvalid subsets[0].ports[2].appProtocol: Invalid value: "": name part must be non-empty`,
			`FieldValueInvalid subsets[0].ports[2].appProtocol: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		},
	},
}

func TestValidate(t *testing.T) {
	r := endpoints.New()
	type tcase struct {
		name string
		ep   func(ep *corev1.Endpoints)
		want []string
	}
	cases := []tcase{
		{name: "dotted name", ep: func(ep *corev1.Endpoints) { ep.Name = "web.v2" }},
		{
			name: "name is a DNS subdomain",
			ep:   func(ep *corev1.Endpoints) { ep.Name = "Web" },
			want: []string{`FieldValueInvalid metadata.name: Invalid value: "Web": ` + dnsSubdomainMsg},
		},
		{
			name: "generated name",
			ep:   func(ep *corev1.Endpoints) { ep.GenerateName = "web-"; ep.Name = "web-x7k2b" },
		},
		{
			name: "namespace required",
			ep:   func(ep *corev1.Endpoints) { ep.Namespace = "" },
			want: []string{`FieldValueRequired metadata.namespace: Required value`},
		},
		{
			name: "core finalizer rule",
			ep:   func(ep *corev1.Endpoints) { ep.Finalizers = []string{"mine"} },
			want: []string{`FieldValueInvalid metadata.finalizers[0]: Invalid value: "mine": name is neither a standard finalizer name nor is it fully qualified`},
		},
	}
	for _, sc := range subsetCases {
		cases = append(cases, tcase{"subsets/" + sc.name, func(ep *corev1.Endpoints) { ep.Subsets = sc.subsets }, sc.want})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := newEndpoints()
			ep.ResourceVersion = ""
			tc.ep(ep)
			if diff := cmp.Diff(tc.want, render(r.Strategy.Validate(ep, corev1.SchemeGroupVersion))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	r := endpoints.New()
	badIP := []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "127.0.0.1"}}}}
	type tcase struct {
		name string
		old  func(ep *corev1.Endpoints)
		ep   func(ep *corev1.Endpoints)
		want []string
	}
	label := `FieldValueInvalid metadata.labels: Invalid value: "a b": ` + labelValueMsg
	cases := []tcase{
		{
			name: "nodeName may change",
			old:  func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].NodeName = ptr("node-1") },
			ep:   func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].NodeName = ptr("node-2") },
		},
		{
			name: "unchanged invalid subsets are not re-checked",
			old:  func(ep *corev1.Endpoints) { ep.Subsets = badIP },
			ep:   func(ep *corev1.Endpoints) { ep.Subsets = badIP; ep.Labels = map[string]string{"a": "b"} },
		},
		{
			name: "nil and empty subsets compare equal",
			old:  func(ep *corev1.Endpoints) { ep.Subsets = []corev1.EndpointSubset{{}} },
			ep: func(ep *corev1.Endpoints) {
				ep.Subsets = []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{}}}
			},
		},
		{
			name: "changed invalid subsets are checked",
			old:  func(ep *corev1.Endpoints) { ep.Subsets = badIP },
			ep: func(ep *corev1.Endpoints) {
				ep.Subsets = []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "127.0.0.1"}, {IP: "10.0.0.9"}}}}
			},
			want: []string{`FieldValueInvalid subsets[0].addresses[0].ip: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`},
		},
		{
			name: "namespace immutable",
			ep:   func(ep *corev1.Endpoints) { ep.Namespace = "other" },
			want: []string{
				`FieldValueInvalid metadata.namespace: Invalid value: "other": field is immutable`,
				`FieldValueInvalid metadata.namespace: Invalid value: "other": field is immutable`,
			},
		},
		{
			// Generic create and update passes, core update rules, and the
			// create rules ValidateEndpoints runs again.
			name: "bad label reported four times",
			ep:   func(ep *corev1.Endpoints) { ep.Labels = map[string]string{"k": "a b"} },
			want: []string{label, label, label, label},
		},
		{
			name: "legacy finalizer reported by both core passes",
			ep:   func(ep *corev1.Endpoints) { ep.Finalizers = []string{"mine"} },
			want: []string{
				`FieldValueInvalid metadata.finalizers[0]: Invalid value: "mine": name is neither a standard finalizer name nor is it fully qualified`,
				`FieldValueInvalid metadata.finalizers[0]: Invalid value: "mine": name is neither a standard finalizer name nor is it fully qualified`,
			},
		},
	}
	for _, sc := range subsetCases {
		cases = append(cases, tcase{"subsets/" + sc.name, nil, func(ep *corev1.Endpoints) { ep.Subsets = sc.subsets }, sc.want})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, ep := newEndpoints(), newEndpoints()
			if tc.old != nil {
				tc.old(old)
			}
			tc.ep(ep)
			if diff := cmp.Diff(tc.want, render(r.Strategy.ValidateUpdate(ep, old, corev1.SchemeGroupVersion))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	r := endpoints.New()
	odd := []corev1.EndpointSubset{
		{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "010.000.001.002"}, {IP: "::ffff:10.0.0.1"}}},
		{
			Addresses:         []corev1.EndpointAddress{{IP: "2001:DB8:0:0::1"}, {IP: "2001:db8::1"}, {IP: "not-an-ip"}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "fd00:0::1"}},
		},
	}
	cases := []struct {
		name   string
		labels map[string]string
		want   []string
	}{
		{
			name: "non-canonical IPs",
			want: []string{
				`subsets[0].addresses[1].ip: non-standard IP address "010.000.001.002" is invalid: use "10.0.1.2"`,
				`subsets[0].addresses[2].ip: non-standard IP address "::ffff:10.0.0.1" is invalid: use "10.0.0.1"`,
				`subsets[1].addresses[0].ip: IPv6 address "2001:DB8:0:0::1" should be in RFC 5952 canonical format ("2001:db8::1")`,
				`subsets[1].notReadyAddresses[0].ip: IPv6 address "fd00:0::1" should be in RFC 5952 canonical format ("fd00::1")`,
			},
		},
		{
			name:   "other managers still warned",
			labels: map[string]string{"endpoints.kubernetes.io/managed-by": "someone-else"},
			want: []string{
				`subsets[0].addresses[1].ip: non-standard IP address "010.000.001.002" is invalid: use "10.0.1.2"`,
				`subsets[0].addresses[2].ip: non-standard IP address "::ffff:10.0.0.1" is invalid: use "10.0.0.1"`,
				`subsets[1].addresses[0].ip: IPv6 address "2001:DB8:0:0::1" should be in RFC 5952 canonical format ("2001:db8::1")`,
				`subsets[1].notReadyAddresses[0].ip: IPv6 address "fd00:0::1" should be in RFC 5952 canonical format ("fd00::1")`,
			},
		},
		{
			name:   "endpoints controller skipped",
			labels: map[string]string{"endpoints.kubernetes.io/managed-by": "endpoint-controller"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := newEndpoints()
			ep.Labels = tc.labels
			ep.Subsets = odd
			if diff := cmp.Diff(tc.want, r.Strategy.Warnings(ep, nil)); diff != "" {
				t.Errorf("create warnings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, r.Strategy.Warnings(ep, newEndpoints())); diff != "" {
				t.Errorf("update warnings (-want +got):\n%s", diff)
			}
		})
	}
	if got := r.Strategy.Warnings(newEndpoints(), nil); got != nil {
		t.Errorf("canonical IPs: warnings %q", got)
	}
}

func TestTable(t *testing.T) {
	r := endpoints.New()
	type col struct{ Name, Type, Format string }
	var cols []col
	for _, c := range r.Table.Columns {
		cols = append(cols, col{c.Name, c.Type, c.Format})
	}
	if diff := cmp.Diff([]col{{"Name", "string", "name"}, {"Endpoints", "string", ""}, {"Age", "string", ""}}, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if want := (corev1.Endpoints{}).SwaggerDoc()["subsets"]; r.Table.Columns[1].Description != want {
		t.Errorf("Endpoints description = %q, want %q", r.Table.Columns[1].Description, want)
	}

	addrs := func(ips ...string) []corev1.EndpointAddress {
		var out []corev1.EndpointAddress
		for _, ip := range ips {
			out = append(out, corev1.EndpointAddress{IP: ip})
		}
		return out
	}
	port := func(n int32) corev1.EndpointPort { return corev1.EndpointPort{Port: n, Protocol: "TCP"} }
	cases := []struct {
		name    string
		subsets []corev1.EndpointSubset
		want    string
	}{
		{name: "no subsets", want: "<none>"},
		{name: "empty subsets", subsets: []corev1.EndpointSubset{}, want: "<none>"},
		{
			name:    "no ports",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2")}},
			want:    "10.0.0.1,10.0.0.2",
		},
		{
			name:    "one port",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: []corev1.EndpointPort{port(80)}}},
			want:    "10.0.0.1:80,10.0.0.2:80",
		},
		{
			name:    "IPv6 bracketed",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("2001:db8::1"), Ports: []corev1.EndpointPort{port(443)}}},
			want:    "[2001:db8::1]:443",
		},
		{
			name:    "exactly three",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3")}},
			want:    "10.0.0.1,10.0.0.2,10.0.0.3",
		},
		{
			name:    "more than three",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5")}},
			want:    "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...",
		},
		{
			name:    "ports multiply addresses",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: []corev1.EndpointPort{port(80), port(443)}}},
			want:    "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more...",
		},
		{
			name: "across subsets, in order",
			subsets: []corev1.EndpointSubset{
				{Addresses: addrs("10.0.0.9"), Ports: []corev1.EndpointPort{port(8080)}},
				{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3")},
			},
			want: "10.0.0.9:8080,10.0.0.1,10.0.0.2 + 1 more...",
		},
		{
			name: "notReady addresses are not shown",
			subsets: []corev1.EndpointSubset{
				{Addresses: addrs("10.0.0.1"), NotReadyAddresses: addrs("10.0.0.2"), Ports: []corev1.EndpointPort{port(80)}},
			},
			want: "10.0.0.1:80",
		},
		{
			name:    "notReady only",
			subsets: []corev1.EndpointSubset{{NotReadyAddresses: addrs("10.0.0.1", "10.0.0.2"), Ports: []corev1.EndpointPort{port(80)}}},
			want:    "",
		},
	}
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := newEndpoints()
			ep.CreationTimestamp = metav1.NewTime(now.Add(-90 * time.Second))
			ep.Subsets = tc.subsets
			want := []any{"web", tc.want, "90s"}
			if diff := cmp.Diff(want, r.Table.Row(ep, now)); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
}

func fieldSet(r *resources.Kind, obj resources.Object) fields.Set {
	set := fields.Set{}
	for _, l := range r.Fields.Labels {
		set[l] = r.Fields.Value(obj, l)
	}
	return set
}

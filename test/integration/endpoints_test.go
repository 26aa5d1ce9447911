package integration

import (
	"github.com/leasehold/leasehold/internal/testkit/testserver"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEndpointsStoredAsSent: subsets keep their order, grouping and
// duplicates, in JSON and protobuf; only the port protocol is defaulted;
// a PUT without resourceVersion overwrites the whole object. The generic
// verbs are the per-kind suite's (TestKinds).
func TestEndpointsStoredAsSent(t *testing.T) {
	ts := testserver.Start(t)
	for name, c := range ts.Clients(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			eps := c.CoreV1().Endpoints("default")
			// Subsets are stored as sent: order, grouping and duplicates
			// kept; only the port protocol is defaulted.
			in := &corev1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Name: "svc-" + name},
				Subsets: []corev1.EndpointSubset{
					{
						Addresses: []corev1.EndpointAddress{{IP: "10.0.0.2"}, {IP: "10.0.0.1"}, {IP: "10.0.0.1"}},
						Ports:     []corev1.EndpointPort{{Name: "b", Port: 81}, {Name: "a", Port: 80, Protocol: corev1.ProtocolUDP}},
					},
					{
						NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.3", Hostname: "h", NodeName: ptr("node-1")}},
					},
				},
			}
			created := must[*corev1.Endpoints](t)(eps.Create(ctx, in, metav1.CreateOptions{}))
			want := in.DeepCopy()
			want.Subsets[0].Ports[0].Protocol = corev1.ProtocolTCP
			if diff := cmp.Diff(want.Subsets, created.Subsets); diff != "" {
				t.Fatalf("subsets not stored as sent (-want +got):\n%s", diff)
			}

			// PUT without resourceVersion overwrites an Endpoints.
			over := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: in.Name}}
			out := must[*corev1.Endpoints](t)(eps.Update(ctx, over, metav1.UpdateOptions{}))
			if len(out.Subsets) != 0 || out.ResourceVersion == created.ResourceVersion || out.UID != created.UID {
				t.Fatalf("unconditional update: %+v", out)
			}
		})
	}
}

func TestEndpointsValidation(t *testing.T) {
	ts := testserver.Start(t)
	ctx := t.Context()
	eps := ts.Client(t).CoreV1().Endpoints("default")
	bad := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "127.0.0.1"}},
			Ports:     []corev1.EndpointPort{{Name: "a", Port: 0}, {Port: 80}},
		}},
	}
	_, err := eps.Create(ctx, bad, metav1.CreateOptions{})
	se := wantStatus(t, err, 422, metav1.StatusReasonInvalid)
	var fields []string
	for _, c := range se.ErrStatus.Details.Causes {
		fields = append(fields, c.Field)
	}
	want := []string{"subsets[0].addresses[0].ip", "subsets[0].ports[0].port", "subsets[0].ports[1].name"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("causes (-want +got):\n%s\nmessage: %s", diff, se.ErrStatus.Message)
	}
	if se.ErrStatus.Details.Kind != "Endpoints" || se.ErrStatus.Details.Name != "bad" {
		t.Errorf("details = %+v", se.ErrStatus.Details)
	}
	if _, err := eps.Get(ctx, "bad", metav1.GetOptions{}); err == nil {
		t.Fatal("an invalid object was stored")
	}
}

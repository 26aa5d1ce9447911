package bench

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// TestWithRenewTime: the heartbeat's byte surgery, in both wire formats,
// changes the renewTime and nothing else, as a real decoder sees it.
func TestWithRenewTime(t *testing.T) {
	old := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC))
	lease := &coordinationv1.Lease{
		TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: "node-000001", Namespace: "kube-node-lease", ResourceVersion: "42", UID: "u",
			Labels:      map[string]string{"renewTime": `"renewTime":"x"`},
			Annotations: map[string]string{"spec": `{"spec":{"renewTime":"x"}}`}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: new("node-000001"), LeaseDurationSeconds: new(int32(40)), RenewTime: &old},
	}
	now := time.Date(2026, 11, 28, 15, 4, 5, 123456789, time.UTC)
	for _, tc := range []struct {
		mediaType string
		patch     func([]byte, time.Time) ([]byte, error)
	}{
		{"application/json", withRenewTime},
		{protobufType, withRenewTimeProto},
	} {
		info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), tc.mediaType)
		var buf bytes.Buffer
		if err := info.Serializer.Encode(lease, &buf); err != nil {
			t.Fatal(err)
		}
		patched, err := tc.patch(buf.Bytes(), now)
		if err != nil {
			t.Fatalf("%s: %v", tc.mediaType, err)
		}
		got := &coordinationv1.Lease{}
		if _, _, err := info.Serializer.Decode(patched, nil, got); err != nil {
			t.Fatalf("%s: decoding the patched lease: %v", tc.mediaType, err)
		}
		want := lease.DeepCopy()
		want.Spec.RenewTime = &metav1.MicroTime{Time: now.Truncate(time.Microsecond)}
		got.Spec.RenewTime.Time = got.Spec.RenewTime.UTC()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: patched lease (-want +got):\n%s", tc.mediaType, diff)
		}
	}
}

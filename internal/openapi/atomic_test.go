package openapi_test

import (
	"reflect"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/openapi"
	"github.com/leasehold/leasehold/internal/resources/builtin"
)

// TestAtomicList: the lists k8s.io/api declares atomic are, and keyed
// lists, sets, maps and scalars are not.
func TestAtomicList(t *testing.T) {
	s, err := openapi.New(builtin.Kinds(builtin.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		t     reflect.Type
		field string
		want  bool
	}{
		{reflect.TypeFor[corev1.Endpoints](), "subsets", true},
		{reflect.TypeFor[corev1.EndpointSubset](), "addresses", true},
		{reflect.TypeFor[corev1.EndpointSubset](), "ports", true},
		{reflect.TypeFor[metav1.ObjectMeta](), "finalizers", false},      // a set
		{reflect.TypeFor[metav1.ObjectMeta](), "ownerReferences", false}, // keyed by uid
		{reflect.TypeFor[metav1.ObjectMeta](), "labels", false},
		{reflect.TypeFor[coordinationv1.LeaseSpec](), "holderIdentity", false},
		{reflect.TypeFor[corev1.Endpoints](), "nothing", false},
		{reflect.TypeFor[string](), "subsets", false},
	} {
		if got := s.AtomicList(c.t, c.field); got != c.want {
			t.Errorf("AtomicList(%v, %q) = %t, want %t", c.t, c.field, got, c.want)
		}
	}
}

package integration

import (
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// wantStatus fails unless err is an API error with the given code and
// reason.
func wantStatus(t testing.TB, err error, code int32, reason metav1.StatusReason) *apierrors.StatusError {
	t.Helper()
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("got error %v (%T), want a %d %s Status", err, err, code, reason)
	}
	if se.ErrStatus.Code != code || se.ErrStatus.Reason != reason {
		t.Fatalf("got %d %s (%q), want %d %s", se.ErrStatus.Code, se.ErrStatus.Reason, se.ErrStatus.Message, code, reason)
	}
	return se
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func ptr[T any](v T) *T { return &v }

// waitFor polls cond until it holds, failing the test after 20 s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func indexOf(s, sub string) int { return strings.Index(s, sub) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// releaseNamespace removes the finalizers of held, the last object keeping
// its terminating namespace, and waits for the namespace to go.
func releaseNamespace(t testing.TB, c kubernetes.Interface, held *coordinationv1.Lease) {
	t.Helper()
	held.Finalizers = nil
	if _, err := c.CoordinationV1().Leases(held.Namespace).Update(t.Context(), held, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, err := c.CoreV1().Namespaces().Get(t.Context(), held.Namespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

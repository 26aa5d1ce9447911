package clusterroleaggregation

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/testkit/testregistry"
)

// failing fails the writes of keys containing failKey while fail is set.
type failing struct {
	storage.Interface
	failKey string
	fail    atomic.Bool
}

func (f *failing) Put(ctx context.Context, key string, value []byte, expected int64, opts ...storage.PutOption) (storage.KeyValue, error) {
	if f.fail.Load() && strings.Contains(key, f.failKey) {
		return storage.KeyValue{}, errors.New("injected write failure")
	}
	return f.Interface.Put(ctx, key, value, expected, opts...)
}

// TestRetryAfterFailedWrite: an aggregated role whose update failed gets
// its rules at the retry, with no other ClusterRole changing meanwhile.
func TestRetryAfterFailedWrite(t *testing.T) {
	st := &failing{failKey: "/clusterroles/aggregated"}
	reg := testregistry.Start(t, testregistry.Options{Wrap: func(s storage.Interface) storage.Interface {
		st.Interface = s
		return st
	}})
	res, ok := reg.ResourceFor(schema.GroupKind{Group: rbacv1.GroupName, Kind: "ClusterRole"})
	if !ok {
		t.Fatal("cluster roles are not served")
	}
	ctx := t.Context()
	create := func(r *rbacv1.ClusterRole) {
		if _, err := reg.Create(ctx, res, "", r, registry.WriteOptions{Manager: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	create(&rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "aggregated"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{"aggregate-to-test": "true"}},
		}},
	})
	st.fail.Store(true)
	create(&rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "source", Labels: map[string]string{"aggregate-to-test": "true"}},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}}},
	})

	c := New(reg, slog.New(slog.DiscardHandler))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		cancel()
		<-done
	}()

	rules := func() int {
		got, err := reg.Get(ctx, res, "", "aggregated", "")
		if err != nil {
			t.Fatal(err)
		}
		return len(got.Object().(*rbacv1.ClusterRole).Rules)
	}
	// The controller tries and fails for a while.
	time.Sleep(1500 * time.Millisecond)
	if n := rules(); n != 0 {
		t.Fatalf("aggregated role has %d rules while its writes fail", n)
	}
	st.fail.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for rules() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("aggregated role never got its rule after writes came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package etcd_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/storage/etcd"
	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
)

// TestNoSpace fills an etcd with a small quota: writes are refused with
// etcd's words, NoSpace says so, reads, watches and deletes go on, and
// writes resume once an operator has compacted, defragmented and disarmed
// the alarm.
func TestNoSpace(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Config{Args: []string{"--quota-backend-bytes=2000000"}})
	s := open(t, c, etcd.Options{CompactInterval: -1}, false)
	ctx := t.Context()
	if err := s.NoSpace(ctx); err != nil {
		t.Fatalf("NoSpace of an empty etcd: %v", err)
	}
	w, err := s.Watch(ctx, "/registry/", 0)
	if err != nil {
		t.Fatal(err)
	}

	value := []byte(strings.Repeat("x", 100<<10))
	var kvs []storage.KeyValue
	var refused error
	for i := range 100 {
		kv, err := s.Put(ctx, fmt.Sprintf("/registry/leases/ns/l%d", i), value, 0)
		if err != nil {
			refused = err
			break
		}
		kvs = append(kvs, kv)
	}
	var ns *storage.NoSpaceError
	if !errors.As(refused, &ns) || ns.Message != "etcdserver: mvcc: database space exceeded" {
		t.Fatalf("after %d puts of 100 KiB into a 2 MB quota: %v, want a NoSpaceError with etcd's words", len(kvs), refused)
	}
	if err := s.NoSpace(ctx); !errors.As(err, &ns) || !strings.Contains(ns.Message, "database space exceeded") {
		t.Errorf("NoSpace with the alarm raised: %v", err)
	}
	if _, err := s.Get(ctx, kvs[0].Key); err != nil {
		t.Errorf("Get with the alarm raised: %v", err)
	}
	// The put that crossed the quota may have been applied: etcd applies
	// it, then raises the alarm and answers ErrNoSpace.
	if list, err := s.List(ctx, "/registry/"); err != nil || len(list.KVs) != len(kvs) && len(list.KVs) != len(kvs)+1 {
		t.Errorf("List with the alarm raised: %d keys, %v; want %d or %d", len(list.KVs), err, len(kvs), len(kvs)+1)
	}
	if _, err := s.Put(ctx, "/registry/leases/ns/later", value, 0); !errors.Is(err, storage.ErrNoSpace) {
		t.Errorf("a put with the alarm raised: %v, want ErrNoSpace", err)
	}
	if _, err := s.Get(ctx, "/registry/leases/ns/later"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("the put refused with the alarm raised: Get answered %v, want not found", err)
	}
	del, err := s.Delete(ctx, kvs[0].Key, kvs[0].ModRevision)
	if err != nil {
		t.Fatalf("Delete with the alarm raised: %v", err)
	}
	for ev := range w.Events() {
		if ev.Type == storage.EventDelete && ev.Revision == del.ModRevision {
			break
		}
	}
	if _, err := s.Put(ctx, "/registry/leases/ns/small", []byte("x"), 0); !errors.Is(err, storage.ErrNoSpace) {
		t.Errorf("a small put after a delete, the alarm still raised: %v, want ErrNoSpace", err)
	}

	// What an operator does (docs/reliability.md): compact, defragment, disarm.
	raw := c.Client(t)
	for _, kv := range kvs[1:] {
		if _, err := s.Delete(ctx, kv.Key, kv.ModRevision); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	for _, ep := range c.Endpoints() {
		if _, err := raw.Defragment(ctx, ep); err != nil {
			t.Fatal(err)
		}
	}
	alarms, err := raw.AlarmList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alarms.Alarms {
		if _, err := raw.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.NoSpace(ctx); err != nil {
		t.Errorf("NoSpace after the alarm was disarmed: %v", err)
	}
	if _, err := s.Put(ctx, "/registry/leases/ns/small", []byte("x"), 0); err != nil {
		t.Errorf("a put after the alarm was disarmed: %v", err)
	}
}

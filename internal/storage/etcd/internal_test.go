package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
)

func TestWrapErr(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want error // nil: none of the contract's errors
	}{
		{"compacted", rpctypes.ErrCompacted, storage.ErrCompacted},
		{"compacted, raw gRPC", rpctypes.ErrGRPCCompacted, nil}, // the client converts these first
		{"request too large", rpctypes.ErrRequestTooLarge, storage.ErrTooLarge},
		{"client send limit", status.Error(codes.ResourceExhausted, "trying to send message larger than max (3145800 vs. 2097152)"), storage.ErrTooLarge},
		{"server receive limit", status.Error(codes.ResourceExhausted, "grpc: received message larger than max (3145800 vs. 2097152)"), storage.ErrTooLarge},
		{"no space", rpctypes.ErrNoSpace, storage.ErrNoSpace},
		{"too many requests", rpctypes.ErrTooManyRequests, storage.ErrUnavailable},
		{"no leader", rpctypes.ErrNoLeader, storage.ErrUnavailable},
		{"leader changed", rpctypes.ErrLeaderChanged, storage.ErrUnavailable},
		{"server timeout", rpctypes.ErrTimeout, storage.ErrUnavailable},
		{"server stopped", rpctypes.ErrStopped, storage.ErrUnavailable},
		{"connection refused", status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused\""), storage.ErrUnavailable},
		{"deadline", context.DeadlineExceeded, storage.ErrUnavailable},
		{"permission denied", rpctypes.ErrPermissionDenied, nil},
		{"invalid auth token", rpctypes.ErrInvalidAuthToken, nil},
		{"other", errors.New("boom"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := wrapErr("op", tc.err)
			for _, sentinel := range []error{storage.ErrCompacted, storage.ErrTooLarge, storage.ErrUnavailable, storage.ErrNotFound, storage.ErrConflict, storage.ErrNoSpace} {
				if is, want := errors.Is(got, sentinel), sentinel == tc.want; is != want {
					t.Errorf("wrapErr(%v) = %v: errors.Is(%v) = %v, want %v", tc.err, got, sentinel, is, want)
				}
			}
		})
	}
}

func TestEvent(t *testing.T) {
	kv := func(key string, value string, create, mod int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value), CreateRevision: create, ModRevision: mod}
	}
	for _, tc := range []struct {
		name    string
		ev      *clientv3.Event
		want    storage.Event
		wantErr bool
	}{
		{
			name: "create",
			ev:   &clientv3.Event{Type: mvccpb.PUT, Kv: kv("/k", "v1", 5, 5)},
			want: storage.Event{Type: storage.EventPut, KV: storage.KeyValue{Key: "/k", Value: []byte("v1"), CreateRevision: 5, ModRevision: 5}, Revision: 5},
		},
		{
			name: "update",
			ev:   &clientv3.Event{Type: mvccpb.PUT, Kv: kv("/k", "v2", 5, 7)},
			want: storage.Event{Type: storage.EventPut, KV: storage.KeyValue{Key: "/k", Value: []byte("v2"), CreateRevision: 5, ModRevision: 7}, Revision: 7},
		},
		{
			name: "delete",
			ev:   &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("/k"), ModRevision: 9}},
			want: storage.Event{Type: storage.EventDelete, KV: storage.KeyValue{Key: "/k", ModRevision: 9}, Revision: 9},
		},
		{name: "unknown type", ev: &clientv3.Event{Type: 7, Kv: kv("/k", "v2", 5, 7)}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := event(tc.ev)
			if (err != nil) != tc.wantErr {
				t.Fatalf("event: error %v, want error %v", err, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("event (-want +got):\n%s", d)
			}
		})
	}
}

// TestListPages lists a prefix in pages of three keys while a writer
// changes the keys, and checks that the result is exactly etcd's state at
// the list's revision.
func TestListPages(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Config{})
	raw := c.Client(t)
	ctx := t.Context()
	s, err := Open(ctx, Options{Endpoints: c.Endpoints(), CompactInterval: -1, pageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	const keys = 20
	key := func(i int) string { return fmt.Sprintf("/registry/leases/ns/k%02d", i) }
	for i := range keys {
		if _, err := s.Put(ctx, key(i), []byte("0"), 0); err != nil {
			t.Fatal(err)
		}
	}
	// Keys just outside the prefix on both sides.
	for _, k := range []string{"/registry/leases/nr", "/registry/leases/ns0"} {
		if _, err := s.Put(ctx, k, []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}

	writeCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Go(func() {
		for n := 1; writeCtx.Err() == nil; n++ {
			for i := range keys {
				if _, err := raw.Put(writeCtx, key(i), strconv.Itoa(n)); err != nil && writeCtx.Err() == nil {
					t.Errorf("writer: %v", err)
					return
				}
			}
		}
	})
	for range 20 {
		res, err := s.List(ctx, "/registry/leases/ns/")
		if err != nil {
			t.Fatal(err)
		}
		want, err := raw.Get(ctx, "/registry/leases/ns/", clientv3.WithPrefix(), clientv3.WithRev(res.Revision))
		if err != nil {
			t.Fatal(err)
		}
		var wantKVs []storage.KeyValue
		for _, kv := range want.Kvs {
			wantKVs = append(wantKVs, keyValue(kv))
		}
		if d := cmp.Diff(wantKVs, res.KVs, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("List at %d (-etcd at that revision +list):\n%s", res.Revision, d)
		}
	}
}

// TestNoSpaceMessage: clients see etcd's own words, as kube-apiserver's.
func TestNoSpaceMessage(t *testing.T) {
	var ns *storage.NoSpaceError
	if err := wrapErr("put", rpctypes.ErrNoSpace); !errors.As(err, &ns) || ns.Message != "etcdserver: mvcc: database space exceeded" {
		t.Errorf("wrapErr(ErrNoSpace) = %v, want a NoSpaceError with etcd's message", err)
	}
}

// TestSharedReads: every call gets a read that began after it joined
// (what makes a shared read as linearizable as a read of its own), and
// calls that come while a read is out share the next one.
func TestSharedReads(t *testing.T) {
	var clock, reads atomic.Int64
	read := func() (int64, error) {
		reads.Add(1)
		began := clock.Add(1)
		time.Sleep(time.Millisecond)
		return began, nil
	}
	var q sharedReads
	const calls = 200
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			joined := clock.Add(1)
			r := q.join(read)
			<-r.done
			if r.rev <= joined {
				t.Errorf("a call that joined at %d got a read that began at %d", joined, r.rev)
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n >= calls {
		t.Errorf("%d calls made %d reads: none shared", calls, n)
	} else {
		t.Logf("%d calls made %d reads", calls, n)
	}
}

package multi

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources/builtin"
)

// version is one version of a lease in etcd's history, read behind the
// replicas' back.
type version struct {
	name    string
	rev     int64 // the revision of the write: the resourceVersion
	deleted bool
	lease   *coordinationv1.Lease // nil when deleted
}

// leaseKeyPrefix is the etcd key prefix of the leases of a namespace, in
// kube-apiserver's layout.
func leaseKeyPrefix(namespace string) string {
	return etcdPrefix + "/leases/" + namespace + "/"
}

// leaseHistory returns every version of every lease of namespace that etcd
// holds, in revision order: a watch from revision 1 (the tests never
// compact), read until a progress notification says it has caught up with
// the revision current when it was called.
func leaseHistory(t testing.TB, cl *clientv3.Client, namespace string) []version {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	prefix := leaseKeyPrefix(namespace)
	cur, err := cl.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("etcd history: %v", err)
	}
	target := cur.Header.Revision
	// A context of its own, so that progress requests reach this watch's
	// stream only.
	wctx, stop := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer stop()
	wch := cl.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(1))
	go func() {
		// etcd ignores progress requests while a watch replays history:
		// ask until it answers.
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
				_ = cl.RequestProgress(wctx)
			}
		}
	}()
	dec, err := codec.New(builtin.Kinds(builtin.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	var out []version
	for resp := range wch {
		if err := resp.Err(); err != nil {
			t.Fatalf("etcd history: %v", err)
		}
		for _, ev := range resp.Events {
			v := version{name: strings.TrimPrefix(string(ev.Kv.Key), prefix), rev: ev.Kv.ModRevision}
			if ev.Type == clientv3.EventTypeDelete {
				v.deleted = true
			} else {
				v.lease = &coordinationv1.Lease{}
				if err := dec.DecodeStorage(ev.Kv.Value, ev.Kv.ModRevision, v.lease); err != nil {
					t.Fatalf("etcd history: %s at %d: %v", ev.Kv.Key, ev.Kv.ModRevision, err)
				}
			}
			out = append(out, v)
		}
		if resp.IsProgressNotify() && resp.Header.Revision >= target {
			return out
		}
	}
	t.Fatalf("etcd history: watch ended: %v", ctx.Err())
	return nil
}

// byName groups a history by lease name, each in revision order.
func byName(h []version) map[string][]version {
	m := map[string][]version{}
	for _, v := range h {
		m[v.name] = append(m[v.name], v)
	}
	return m
}

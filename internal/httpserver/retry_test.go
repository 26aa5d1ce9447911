package httpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/storage"
)

// interloper, once armed, writes the stored value of the next put's key
// again just before that put, which then conflicts with a concurrent
// write, as when another client's update lands first.
type interloper struct {
	storage.Interface
	armed atomic.Bool
}

func (i *interloper) Put(ctx context.Context, key string, value []byte, expected int64, opts ...storage.PutOption) (storage.KeyValue, error) {
	if i.armed.Swap(false) {
		cur, err := i.Interface.Get(ctx, key)
		if err == nil {
			_, err = i.Interface.Put(ctx, key, cur.Value, cur.ModRevision, opts...)
		}
		if err != nil {
			return storage.KeyValue{}, err
		}
	}
	return i.Interface.Put(ctx, key, value, expected, opts...)
}

// TestUpdateRetryDecodesTheBodyAgain: a PUT without a resourceVersion
// that loses a race with a concurrent write is retried, from its body
// decoded again (the registry's Again), and lands over that write.
func TestUpdateRetryDecodesTheBodyAgain(t *testing.T) {
	var st *interloper
	p := newInProcessWith(t, func(c *registry.Config) {
		st = &interloper{Interface: c.Store}
		c.Store = st
	}, nil)
	const path = "/api/v1/namespaces/default/endpoints"
	p.mustDo(t, http.StatusCreated, "POST", path, "application/json", `{"metadata":{"name":"e","labels":{"v":"1"}}}`)
	before := p.revision(t)

	st.armed.Store(true)
	w := p.mustDo(t, http.StatusOK, "PUT", path+"/e", "application/json", `{"metadata":{"name":"e","labels":{"v":"2"}}}`)
	if st.armed.Load() {
		t.Fatal("no concurrent write")
	}
	var got corev1.Endpoints
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Labels["v"] != "2" {
		t.Errorf("labels %v, want v=2", got.Labels)
	}
	if after := p.revision(t); after != before+2 {
		t.Errorf("revision %d after %d: want the concurrent write and the update", after, before)
	}
}

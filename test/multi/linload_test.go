package multi

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

const (
	// linNamespace holds the linearizability workload's leases.
	linNamespace = "lin"
	// linKeys leases, shared by linClientsPerReplica clients per replica.
	linKeys              = 3
	linClientsPerReplica = 2
	// linPause is the most a client waits between operations (uniform).
	linPause = 30 * time.Millisecond
)

// linClient issues operations through one replica, each as exactly one
// HTTP request (client-go's REST client with retries off: a retried
// update could answer 409 for a first attempt that was applied), and
// records them.
type linClient struct {
	id      int
	replica int
	rest    rest.Interface
	// known is the last state of each lease this client saw, the base of
	// its compare-and-swaps.
	known map[string]*coordinationv1.Lease
	// done counts operations with a definite outcome.
	done atomic.Int64
}

type linLoad struct {
	h       *linHistory
	clients []*linClient
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	// errs collects answers the model does not expect at all (a 400 or
	// 422), which are test failures of their own.
	mu   sync.Mutex // guards errs
	errs []error
}

func linKey(i int) string { return fmt.Sprintf("lin-%d", i) }

// startLinLoad creates the leases through replica 0 (recorded as creates)
// and starts the clients.
func startLinLoad(t testing.TB, d *deployment) *linLoad {
	t.Helper()
	l := &linLoad{h: newLinHistory()}
	for r := range d.replicas {
		for range linClientsPerReplica {
			c := d.clientFor(t, r)
			l.clients = append(l.clients, &linClient{id: len(l.clients), replica: r, rest: c.CoordinationV1().RESTClient(), known: map[string]*coordinationv1.Lease{}})
		}
	}
	for k := range linKeys {
		l.clients[0].create(t.Context(), l, linKey(k))
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for _, c := range l.clients {
		l.wg.Go(func() { c.run(ctx, l) })
	}
	return l
}

func (l *linLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

func (l *linLoad) unexpected(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

// progress returns each client's operations of definite outcome so far.
func (l *linLoad) progress() []int64 {
	var p []int64
	for _, c := range l.clients {
		p = append(p, c.done.Load())
	}
	return p
}

func (c *linClient) run(ctx context.Context, l *linLoad) {
	rnd := rand.New(rand.NewPCG(uint64(c.id), uint64(time.Now().UnixNano())))
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(rnd.Int64N(int64(linPause)))):
		}
		key := linKey(rnd.IntN(linKeys))
		value := fmt.Sprintf("c%d-%d", c.id, seq)
		switch p := rnd.IntN(10); {
		case c.known[key] == nil || p < 4:
			c.get(ctx, l, key)
		case p < 8:
			c.cas(ctx, l, key, value)
		default:
			c.patch(ctx, l, key, value)
		}
	}
}

// classify turns a request's error into an outcome; ok false means the
// request certainly never reached a server (connection refused), so it
// has no place in the history.
func classify(err error) (o outcome, ok bool, unexpected error) {
	var se apierrors.APIStatus
	switch {
	case err == nil:
		return outOK, true, nil
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return outConflict, true, nil
	case apierrors.IsNotFound(err):
		return outNotFound, true, nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return 0, false, nil
	case errors.As(err, &se) && se.Status().Code >= 400 && se.Status().Code < 500 &&
		se.Status().Code != http.StatusRequestTimeout && se.Status().Code != http.StatusTooManyRequests:
		// A client error is an answer: the write was not applied; but
		// this workload never sends an invalid request.
		return 0, false, err
	default:
		return outUnknown, true, nil
	}
}

// do runs one request with a deadline and records it.
func (c *linClient) do(ctx context.Context, l *linLoad, in linInput, req func(context.Context) (*coordinationv1.Lease, error)) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	call := l.h.now()
	got, err := req(ctx)
	ret := l.h.now()
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// The load stopping cut it off: an unknown outcome of its own
		// making; record it as such.
		err = errors.New("cancelled")
	}
	o, ok, unexpected := classify(err)
	if unexpected != nil {
		l.unexpected(fmt.Errorf("client %d: %s %s: %w", c.id, in.op, in.key, unexpected))
	}
	if !ok || o == outUnknown && in.op == opGet {
		// Never sent, or a read without an answer: no effect to model.
		return
	}
	out := linOutput{outcome: o}
	switch o {
	case outOK:
		out.rv = rvOf(nil, got.ResourceVersion)
		if in.op == opGet {
			out.value = ptrValue(got.Spec.HolderIdentity)
		}
		c.known[in.key] = got
		c.done.Add(1)
	case outUnknown:
		delete(c.known, in.key)
	default:
		delete(c.known, in.key)
		c.done.Add(1)
	}
	l.h.add(c.id, in, call, out, ret)
}

func (c *linClient) create(ctx context.Context, l *linLoad, key string) {
	value := fmt.Sprintf("c%d-create", c.id)
	c.do(ctx, l, linInput{op: opCreate, key: key, value: value}, func(ctx context.Context) (*coordinationv1.Lease, error) {
		var out coordinationv1.Lease
		err := c.rest.Post().Namespace(linNamespace).Resource("leases").MaxRetries(0).
			Body(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: key}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &value}}).
			Do(ctx).Into(&out)
		return &out, err
	})
}

func (c *linClient) get(ctx context.Context, l *linLoad, key string) {
	c.do(ctx, l, linInput{op: opGet, key: key}, func(ctx context.Context) (*coordinationv1.Lease, error) {
		var out coordinationv1.Lease
		err := c.rest.Get().Namespace(linNamespace).Resource("leases").Name(key).MaxRetries(0).Do(ctx).Into(&out)
		return &out, err
	})
}

// cas updates the lease from the last state this client saw: a
// compare-and-swap on its resourceVersion.
func (c *linClient) cas(ctx context.Context, l *linLoad, key, value string) {
	base := c.known[key].DeepCopy()
	base.Spec.HolderIdentity = &value
	c.do(ctx, l, linInput{op: opCAS, key: key, value: value, expect: rvOf(nil, base.ResourceVersion)}, func(ctx context.Context) (*coordinationv1.Lease, error) {
		var out coordinationv1.Lease
		err := c.rest.Put().Namespace(linNamespace).Resource("leases").Name(key).MaxRetries(0).Body(base).Do(ctx).Into(&out)
		return &out, err
	})
}

// patch sets the holder with a merge patch without a resourceVersion:
// an unconditional write (Leases refuse an update without one).
func (c *linClient) patch(ctx context.Context, l *linLoad, key, value string) {
	body := fmt.Appendf(nil, `{"spec":{"holderIdentity":%q}}`, value)
	c.do(ctx, l, linInput{op: opPatch, key: key, value: value}, func(ctx context.Context) (*coordinationv1.Lease, error) {
		var out coordinationv1.Lease
		err := c.rest.Patch(types.MergePatchType).Namespace(linNamespace).Resource("leases").Name(key).MaxRetries(0).Body(body).Do(ctx).Into(&out)
		return &out, err
	})
}

// check checks the recorded history, and that the model rejects it once a
// read is made stale (so a pass means something).
func (l *linLoad) check(t testing.TB) {
	t.Helper()
	for _, err := range l.errs {
		t.Errorf("unexpected answer: %v", err)
	}
	l.h.mu.Lock()
	ops := l.h.ops
	l.h.mu.Unlock()
	if res := checkLinearizable(t, "recorded history", ops, 2*time.Minute, true); res != porcupine.Ok {
		t.Errorf("the history of %d operations through %d replicas is not linearizable (%s)", len(ops), len(l.clients)/linClientsPerReplica, res)
		return
	}
	if stale, ok := staleRead(ops); ok {
		if res := checkLinearizable(t, "the same with one read made stale (must be Illegal)", stale, time.Minute, false); res == porcupine.Ok {
			t.Errorf("the model accepts the history with one read made stale")
		}
	}
}

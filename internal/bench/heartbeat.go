package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// HeartbeatConfig configures Heartbeat.
type HeartbeatConfig struct {
	// Namespace holds the nodes' Leases, node-000000 on (kube-node-lease,
	// where kubelets keep theirs); missing ones are created first, as a
	// kubelet creates its own.
	Namespace string
	Nodes     int
	// Period is how often each node renews (the kubelet: every 10 s, a
	// quarter of its 40 s lease).
	Period time.Duration
	// Warmup is renewed through before Duration is measured: the first
	// seconds after a fleet's leases are created are slower (the store
	// flushes and compacts them, the controllers take them in), and
	// whether a server sustains a fleet is about the steady state.
	Warmup   time.Duration
	Duration time.Duration
	// Conns are the HTTP/2 connections the nodes share; InFlight bounds
	// the requests waiting for an answer at once, over all of them.
	Conns    int
	InFlight int
	// JSON makes the nodes speak JSON; by default they speak protobuf,
	// as kubelets do.
	JSON bool
}

// MaxHeartbeatLatency is the p99 under which a server sustains a node
// count: a heartbeat later than that is a node the control plane sees late.
const MaxHeartbeatLatency = 100 * time.Millisecond

// Heartbeat renews Nodes node Leases, each every Period at a phase of its
// own (spread evenly, as a fleet's kubelets drift apart), with one PUT of
// the Lease as the server last returned it with a new renewTime, as the
// kubelet renews (a conflict costs a GET and the PUT again). Latency
// counts from when a renewal was due, so a generator or server falling
// behind shows in it. After Warmup, it measures for Duration and reports
// whether the server sustained the load: every due renewal made, none
// failed (warm-up included), p99 under MaxHeartbeatLatency.
//
// The generator is lean so that it is not the limit: it never decodes a
// Lease, only replaces the renewTime in the bytes the server sent, over
// Go's HTTP/2 client; its own CPU a renewal is reported.
func Heartbeat(ctx context.Context, e *Env, cfg HeartbeatConfig) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cfg.Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	conns := make([]*leaseClient, cfg.Conns)
	for i := range conns {
		if conns[i], err = newLeaseClient(e.configFor(i), cfg.Namespace, !cfg.JSON); err != nil {
			return err
		}
	}
	nodes := make([][]byte, cfg.Nodes) // each node's Lease as last returned
	// A node renews one at a time, as a kubelet does, should the generator
	// fall a whole period behind.
	nodeMu := make([]sync.Mutex, cfg.Nodes)

	var made atomic.Int64
	start := time.Now()
	prog := e.startProgress(func() string {
		return fmt.Sprintf("heartbeat: %d of %d node leases ready", made.Load(), cfg.Nodes)
	})
	err = parallel(ctx, cfg.Nodes, cfg.InFlight, func(i int) error {
		body, err := conns[i%len(conns)].ensure(ctx, nodeName(i))
		nodes[i] = body
		made.Add(1)
		return err
	})
	prog.Stop()
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Out, "heartbeat: %d node leases ready in %v\n", cfg.Nodes, time.Since(start).Round(time.Millisecond))

	type job struct {
		node int
		due  time.Time
	}
	jobs := make(chan job, cfg.InFlight)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start = time.Now()
	measured := start.Add(cfg.Warmup) // renewals due from then on are measured
	end := measured.Add(cfg.Duration)
	var due, done, conflicts, failed atomic.Int64
	var firstErr error
	var lat Latencies
	var mu sync.Mutex // guards lat and firstErr
	prog = e.startProgress(func() string {
		el := time.Since(measured)
		if el < 0 {
			return fmt.Sprintf("heartbeat: warming up, %v to go", (-el).Truncate(time.Second))
		}
		return fmt.Sprintf("heartbeat: %v of %v, %d renewals (%s), %d failed", el.Truncate(time.Second), cfg.Duration, done.Load(), rate(done.Load(), el), failed.Load())
	})

	var wg sync.WaitGroup
	wg.Go(func() { // the clock: renewal k is node k mod Nodes's, due at k Period/Nodes
		defer close(jobs)
		for k := int64(0); ; k++ {
			at := start.Add(time.Duration(k * int64(cfg.Period) / int64(cfg.Nodes)))
			if !at.Before(end) {
				return
			}
			if d := time.Until(at); d > time.Millisecond {
				time.Sleep(d) // a millisecond early at most; those due then go at once
			}
			if !at.Before(measured) {
				due.Add(1)
			}
			select {
			case jobs <- job{int(k % int64(cfg.Nodes)), at}:
			case <-rctx.Done():
				return
			}
		}
	})
	for w := range cfg.InFlight {
		lc := conns[w%len(conns)]
		wg.Go(func() {
			var mine Latencies
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for j := range jobs {
				nodeMu[j.node].Lock()
				body, conflicted, err := lc.renew(rctx, nodeName(j.node), nodes[j.node])
				if err == nil {
					nodes[j.node] = body
				}
				nodeMu[j.node].Unlock()
				if err != nil {
					if rctx.Err() != nil {
						return
					}
					failed.Add(1) // warming up or not: a failure is one
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				if j.due.Before(measured) {
					continue // warming up
				}
				if conflicted {
					conflicts.Add(1)
				}
				mine = append(mine, time.Since(j.due))
				done.Add(1)
			}
		})
	}
	select { // the warm-up
	case <-time.After(time.Until(measured)):
	case <-rctx.Done():
	}
	proc := StartSampling(e.PIDs)
	self0, _ := cpuTime(os.Getpid())
	wg.Wait()
	prog.Stop()
	took := time.Since(measured)
	proc.Sample()
	self1, _ := cpuTime(os.Getpid())
	self := self1 - self0

	n := done.Load()
	p99 := lat.quantile(0.99)
	fmt.Fprintf(e.Out, "heartbeat: %d nodes every %v over %d connections: %d of %d due renewals made (%s), %d failed, %d conflicts; latency from when due %v\n",
		cfg.Nodes, cfg.Period, cfg.Conns, n, due.Load(), rate(n, took), failed.Load(), conflicts.Load(), lat)
	if n == 0 {
		return fmt.Errorf("heartbeat: no renewal made: %v", firstErr)
	}
	fmt.Fprintf(e.Out, "generator: %s of its own CPU a renewal\n", perOp(self, n))
	if len(e.PIDs) > 0 {
		fmt.Fprintln(e.Out, proc.Report(n, "renewal"))
	}
	sustained := n == due.Load() && failed.Load() == 0 && p99 < MaxHeartbeatLatency
	verdict := "yes"
	if !sustained {
		verdict = "no"
	}
	fmt.Fprintf(e.Out, "sustained: %s (every renewal made, none failed, p99 %v under %v)\n", verdict, p99.Round(10*time.Microsecond), MaxHeartbeatLatency)
	if firstErr != nil {
		fmt.Fprintf(e.Out, "first failure: %v\n", firstErr)
	}
	return nil
}

func nodeName(i int) string { return fmt.Sprintf("node-%06d", i) }

// leaseClient makes nodes' requests over one HTTP/2 connection of its
// own, in protobuf or JSON, decoding nothing.
type leaseClient struct {
	http   *http.Client
	base   string // .../namespaces/NS/leases/
	accept string
}

func newLeaseClient(base *rest.Config, namespace string, protobuf bool) (*leaseClient, error) {
	cfg := rest.CopyConfig(base)
	cfg.Proxy = noProxy // a connection of its own (see Env.clientFor)
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	return &leaseClient{
		http:   &http.Client{Transport: tr, Timeout: time.Minute},
		base:   strings.TrimSuffix(cfg.Host, "/") + "/apis/coordination.k8s.io/v1/namespaces/" + namespace + "/leases/",
		accept: map[bool]string{true: protobufType, false: "application/json"}[protobuf],
	}, nil
}

// do sends one request and returns the answer's status and body.
func (lc *leaseClient) do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", lc.accept)
	if body != nil {
		typ := lc.accept
		if bytes.HasPrefix(body, []byte("{")) {
			typ = "application/json" // a creation's
		}
		req.Header.Set("Content-Type", typ)
	}
	resp, err := lc.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// ensure returns node's Lease, created as a kubelet creates it when it
// is missing.
func (lc *leaseClient) ensure(ctx context.Context, node string) ([]byte, error) {
	status, body, err := lc.do(ctx, "GET", lc.base+node, nil)
	if err != nil || status == http.StatusOK {
		return body, err
	}
	if status != http.StatusNotFound {
		return nil, fmt.Errorf("GET lease %s: %d %s", node, status, body)
	}
	lease := fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":%q},"spec":{"holderIdentity":%q,"leaseDurationSeconds":40,"renewTime":%q}}`,
		node, node, metav1.NowMicro().Format(metav1.RFC3339Micro))
	status, body, err = lc.do(ctx, "POST", strings.TrimSuffix(lc.base, "/"), []byte(lease))
	switch {
	case err != nil:
		return nil, err
	case status == http.StatusCreated:
		return body, nil
	case status == http.StatusConflict: // created meanwhile
		return lc.ensure(ctx, node)
	}
	return nil, fmt.Errorf("create lease %s: %d %s", node, status, body)
}

// maxTries is the kubelet's maxUpdateRetries (component-helpers'
// lease controller): PUTs of one heartbeat, the later ones after a
// conflict and a GET.
const maxTries = 5

// renew makes one heartbeat: the Lease last returned, with a new
// renewTime, PUT; after a conflict, the Lease as it is and the PUT again.
// It returns the Lease as the server answered it. Other failures are not
// retried (the kubelet retries them too): the benchmark counts them.
func (lc *leaseClient) renew(ctx context.Context, node string, last []byte) (body []byte, conflicted bool, err error) {
	for try := 1; ; try++ {
		renewed := withRenewTime
		if lc.accept == protobufType {
			renewed = withRenewTimeProto
		}
		put, err := renewed(last, time.Now())
		if err != nil {
			return nil, conflicted, fmt.Errorf("lease %s: %w", node, err)
		}
		status, body, err := lc.do(ctx, "PUT", lc.base+node, put)
		switch {
		case err != nil:
			return nil, conflicted, err
		case status == http.StatusOK:
			return body, conflicted, nil
		case status != http.StatusConflict || try == maxTries:
			return nil, conflicted, fmt.Errorf("PUT lease %s: %d %s", node, status, body)
		}
		conflicted = true
		if status, last, err = lc.do(ctx, "GET", lc.base+node, nil); err != nil || status != http.StatusOK {
			return nil, conflicted, fmt.Errorf("GET lease %s after a conflict: %d %v", node, status, err)
		}
	}
}

var (
	specField      = []byte(`"spec":{`)
	renewTimeField = []byte(`"renewTime":"`)
)

// withRenewTime returns a copy of a Lease's JSON with spec.renewTime set
// to t. Servers write spec after metadata, whose labels and annotations
// may hold anything: the spec is the last object named so (quotes in
// strings are escaped, and managedFields' keys are prefixed), its
// renewTime the first after it (its other fields are numbers and
// escaped strings).
func withRenewTime(lease []byte, t time.Time) ([]byte, error) {
	spec := bytes.LastIndex(lease, specField)
	if spec < 0 {
		return nil, errors.New("no spec in the lease the server returned")
	}
	i := bytes.Index(lease[spec:], renewTimeField)
	if i < 0 {
		return nil, errors.New("no renewTime in the lease the server returned")
	}
	i += spec + len(renewTimeField)
	j := bytes.IndexByte(lease[i:], '"')
	if j < 0 {
		return nil, errors.New("renewTime not terminated")
	}
	out := make([]byte, 0, len(lease)+8)
	out = append(out, lease[:i]...)
	out = t.UTC().AppendFormat(out, metav1.RFC3339Micro)
	return append(out, lease[i+j:]...), nil
}

const protobufType = "application/vnd.kubernetes.protobuf"

// protobufMagic starts every Kubernetes protobuf body; an
// runtime.Unknown envelope follows, its raw (2) the object.
var protobufMagic = []byte("k8s\x00")

// withRenewTimeProto is withRenewTime for a Lease in protobuf: the
// envelope's raw (2), the Lease's spec (2), the spec's renewTime (4, a
// MicroTime: seconds 1, nanos 2) rewritten, the lengths around them with it.
func withRenewTimeProto(lease []byte, t time.Time) ([]byte, error) {
	env, ok := bytes.CutPrefix(lease, protobufMagic)
	if !ok {
		return nil, errors.New("the lease the server returned is not protobuf")
	}
	t = t.Truncate(time.Microsecond)
	out, err := rewriteField(env, 2, func(raw []byte) ([]byte, error) {
		return rewriteField(raw, 2, func(spec []byte) ([]byte, error) {
			return rewriteField(spec, 4, func([]byte) ([]byte, error) {
				b := protowire.AppendTag(nil, 1, protowire.VarintType)
				b = protowire.AppendVarint(b, uint64(t.Unix()))
				b = protowire.AppendTag(b, 2, protowire.VarintType)
				return protowire.AppendVarint(b, uint64(t.Nanosecond())), nil
			})
		})
	})
	return append(append(make([]byte, 0, len(lease)+8), protobufMagic...), out...), err
}

// rewriteField returns msg with its length-delimited field num replaced by
// f of its value (appended when msg has none), the other fields as they
// were.
func rewriteField(msg []byte, num protowire.Number, f func([]byte) ([]byte, error)) ([]byte, error) {
	out := make([]byte, 0, len(msg)+8)
	done := false
	for len(msg) > 0 {
		n, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		vl := protowire.ConsumeFieldValue(n, typ, msg[l:])
		if vl < 0 {
			return nil, protowire.ParseError(vl)
		}
		if n == num && typ == protowire.BytesType && !done {
			old, _ := protowire.ConsumeBytes(msg[l:])
			v, err := f(old)
			if err != nil {
				return nil, err
			}
			out = protowire.AppendBytes(protowire.AppendTag(out, num, protowire.BytesType), v)
			done = true
		} else {
			out = append(out, msg[:l+vl]...)
		}
		msg = msg[l+vl:]
	}
	if !done {
		v, err := f(nil)
		if err != nil {
			return nil, err
		}
		out = protowire.AppendBytes(protowire.AppendTag(out, num, protowire.BytesType), v)
	}
	return out, nil
}

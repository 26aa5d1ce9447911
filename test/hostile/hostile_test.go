package hostile_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"golang.org/x/net/http2"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
	"github.com/leasehold/leasehold/test/hostile"
)

// The large answer: a list of leaseCount leases of about
// leaseAnnotationBytes each, 3.3 MB of JSON, much more than the socket
// buffers of a client that stops reading (4 KiB) and of the server.
const (
	namespace            = "hostile"
	leaseCount           = 1000
	leaseAnnotationBytes = 3000
)

// Each attack runs attackConns connections for attackDuration: long
// enough for a server's defences (which act within milliseconds) and for
// an unbounded queue to pass its bound, short enough for a failing run
// to stay small.
const (
	attackConns = 2
	// attackDuration outlasts h2server's hold (5 s: a connection past
	// a bound is held, unread, that long before it is closed; 1 s more
	// when its GOAWAY cannot be written), so that every flooding
	// connection is seen closed.
	attackDuration = 8 * time.Second
	// renewInterval paces the well-behaved client.
	renewInterval = 20 * time.Millisecond
)

// Bounds on the growth of the live heap, with the attacking connections
// open.
const (
	// controlFloodHeapBound bounds a control-frame flood's growth. The
	// server may queue 10,000 control frames a connection (well under
	// 1 MiB) before it closes it; a stalled answer holds a few MiB more
	// while its write waits. A server without the bound queues the
	// flood as fast as it comes, hundreds of MiB a second.
	controlFloodHeapBound = 32 << 20
	// requestFloodHeapBound bounds the growth under attacks on request
	// handling (rapid reset, CONTINUATION, HPACK bomb, streams past the
	// limit): a header block held is at most twice MAX_HEADER_LIST_SIZE
	// (2 MiB), handlers of small answers hold little, and an open
	// watch a few KiB.
	requestFloodHeapBound = 64 << 20
	// zeroWindowHeldBound bounds what a zero-window attack's connections
	// hold once its streams are set: answers waiting for window are
	// capped at 32 MiB a connection, plus the handlers' own memory and a
	// MiB of request bodies, ~52 MiB a connection by the server's
	// reckoning; 56 MiB leaves a little room.
	zeroWindowHeldBound = attackConns * 56 << 20
	// runawayHeapStop stops the zero-window attack, whose peak is not
	// bounded here: each of up to MAX_CONCURRENT_STREAMS handlers a
	// connection renders its 3.3 MB list before the server can tell
	// whether the answer may wait.
	runawayHeapStop = 1 << 30
)

// slowlorisDuration is how long the slowloris test waits for its
// connections to be closed: the server's 10 s for a connection's preface,
// and 5 s of room.
const slowlorisDuration = 15 * time.Second

// env is a server with a large list to ask for, and the target made of
// it.
type env struct {
	target hostile.Target
	client kubernetes.Interface
}

// start starts leasehold, with leases leases of leaseAnnotationBytes each
// in the namespace.
func start(t *testing.T, leases int) *env {
	t.Helper()
	s := testserver.Start(t)
	c := s.Client(t)
	if _, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fill(t, c, leases)
	tg, err := hostile.TargetFor(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	base := "/apis/coordination.k8s.io/v1/namespaces/" + namespace + "/leases"
	tg.LargePath = base
	tg.SmallPath = base + "/lease-0000"
	tg.WatchPath = base + "?watch=1&timeoutSeconds=600&fieldSelector=" + url.QueryEscape("metadata.name=none")
	return &env{target: tg, client: c}
}

// fill creates n leases named lease-NNNN, with an annotation of
// leaseAnnotationBytes, eight at a time.
func fill(t *testing.T, c kubernetes.Interface, n int) {
	t.Helper()
	leases := c.CoordinationV1().Leases(namespace)
	pad := strings.Repeat("x", leaseAnnotationBytes)
	var wg sync.WaitGroup
	errs := make(chan error, 8) // a worker sends at most one
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				holder := fmt.Sprintf("holder-%04d", i)
				_, err := leases.Create(t.Context(), &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lease-%04d", i), Annotations: map[string]string{"hostile/pad": pad}},
					Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
				}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// attackCase is an attack and what the server must do about it.
type attackCase struct {
	name   string
	attack func(context.Context, hostile.Target, hostile.Options) hostile.Report
	// heapBound bounds the live heap's growth during the attack; the
	// attack is stopped once it is passed.
	heapBound uint64
	// heldBound, when set, bounds it at the attack's end, its
	// connections still open.
	heldBound uint64
	// check checks what the server did to the attacking connections.
	check func(t *testing.T, r hostile.Report)
}

// TestAttacks runs each attack against leasehold with a well-behaved
// client alongside, one attack at a time (the heap is the process's).
func TestAttacks(t *testing.T) {
	t.Parallel()
	e := start(t, leaseCount)

	// The well-behaved client's latencies without an attack, to compare.
	t.Run("baseline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), attackDuration)
		defer cancel()
		r := hostile.Renew(ctx, e.client.CoordinationV1().Leases(namespace), "well-behaved", renewInterval)
		t.Logf("well-behaved client: %v", r)
		if r.Errors > 0 {
			t.Errorf("the well-behaved client failed %d of %d renewals without an attack: %v", r.Errors, r.Requests, r.FirstError)
		}
	})

	for _, tc := range []attackCase{
		{name: "ping-flood", attack: hostile.PingFlood, heapBound: controlFloodHeapBound, check: allClosed},
		{name: "settings-flood", attack: hostile.SettingsFlood, heapBound: controlFloodHeapBound, check: allClosed},
		{name: "rst-flood", attack: hostile.ResetFlood, heapBound: controlFloodHeapBound, check: allClosed},
		// The window the server gives back grows only as it writes its
		// WINDOW_UPDATEs, which this flood stalls: its DATA overruns the
		// window within a MiB.
		{name: "window-update-flood", attack: hostile.WindowUpdateFlood, heapBound: controlFloodHeapBound, check: allClosed},
		{name: "zero-window", attack: hostile.ZeroWindow, heapBound: runawayHeapStop, heldBound: zeroWindowHeldBound, check: throttled},
		{name: "rapid-reset", attack: hostile.RapidReset, heapBound: requestFloodHeapBound, check: calmedOrOpen},
		{name: "continuation-flood", attack: hostile.ContinuationFlood, heapBound: requestFloodHeapBound, check: allClosed},
		{name: "hpack-bomb", attack: hostile.HPACKBomb, heapBound: requestFloodHeapBound, check: all431Closed},
		{name: "max-streams", attack: hostile.MaxStreams, heapBound: requestFloodHeapBound, check: excessRefused},
	} {
		t.Run(tc.name, func(t *testing.T) { e.runAttack(t, tc) })
	}

	// What the server saw is counted in /metrics.
	t.Run("metrics", func(t *testing.T) {
		body, err := e.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]float64{}
		for _, line := range strings.Split(string(body), "\n") {
			var kind string
			var n float64
			if _, err := fmt.Sscanf(line, "leasehold_http2_client_errors_total{kind=%q} %g", &kind, &n); err == nil {
				counts[kind] = n
			}
		}
		// Three floods of two connections each were closed for it;
		// max-streams' excess streams broke the protocol.
		if counts["flood"] < 6 || counts["protocol"] < 1 {
			t.Errorf("leasehold_http2_client_errors_total: %v, want flood >= 6 and protocol >= 1", counts)
		}
	})
}

// runAttack runs one attack with the well-behaved client alongside, and
// checks the server's heap, what it did to the attack and the client.
func (e *env) runAttack(t *testing.T, tc attackCase) {
	ctx, stopAttack := context.WithCancel(t.Context())
	defer stopAttack()
	heap := watchHeap(tc.heapBound, stopAttack)
	clientCtx, stopClient := context.WithCancel(t.Context())
	clientDone := make(chan hostile.ClientResult, 1)
	go func() {
		clientDone <- hostile.Renew(clientCtx, e.client.CoordinationV1().Leases(namespace), "well-behaved", renewInterval)
	}()
	var held uint64
	r := tc.attack(ctx, e.target, hostile.Options{
		Conns: attackConns, Duration: attackDuration,
		AtEnd: func() { held = heap.heldNow() },
	})
	growth, objects, passed := heap.stop()
	stopClient()
	client := <-clientDone
	t.Logf("%v", r)
	t.Logf("live heap: peak growth %s (objects up to %s), %s held at the end; well-behaved client: %v",
		hostile.Bytes(int64(growth)), hostile.Bytes(int64(objects)), hostile.Bytes(int64(held)), client)
	if err := r.Err(); err != nil {
		t.Fatalf("the attack could not start: %v", err)
	}
	if passed {
		t.Errorf("the live heap grew by %s during the attack, past its bound of %s (the attack was stopped then)",
			hostile.Bytes(int64(growth)), hostile.Bytes(int64(tc.heapBound)))
	}
	if tc.heldBound > 0 && held > tc.heldBound {
		t.Errorf("the attack's connections held %s of live heap at its end, past the bound of %s",
			hostile.Bytes(int64(held)), hostile.Bytes(int64(tc.heldBound)))
	}
	if tc.check != nil {
		tc.check(t, r)
	}
	if client.Errors > 0 {
		t.Errorf("the well-behaved client failed %d of %d renewals during the attack: %v", client.Errors, client.Requests, client.FirstError)
	}
}

// allClosed: the server closed every attacking connection.
func allClosed(t *testing.T, r hostile.Report) {
	t.Helper()
	if r.Closed() != len(r.Conns) {
		t.Errorf("attacking connections closed: %s; want all", r.ClosedSummary())
	}
}

// calmedOrOpen: the server sent GOAWAY ENHANCE_YOUR_CALM to the
// attacking connections it closed. Whether it closes one depends on the
// race between the client's resets and its handlers' ends (it closes a
// connection whose client outruns them), which on two cores with the
// race detector goes either way; the heap bound and the well-behaved
// client are what must hold.
func calmedOrOpen(t *testing.T, r hostile.Report) {
	t.Helper()
	want := "GOAWAY " + http2.ErrCodeEnhanceYourCalm.String()
	for i, c := range r.Conns {
		if c.Closed > 0 && c.How != want {
			t.Errorf("connection %d: closed %q, want %s or open", i, c.How, want)
		}
	}
}

// throttled: every attacking connection had no more streams waiting
// than the server's limit, had streams reset, or was closed.
func throttled(t *testing.T, r hostile.Report) {
	t.Helper()
	for i, c := range r.Conns {
		if c.Closed == 0 && len(c.Resets) == 0 && (c.MaxStreams == 0 || c.Streams > int(c.MaxStreams)) {
			t.Errorf("connection %d: %d streams waiting for window (the limit %d), none reset and the connection open", i, c.Streams, c.MaxStreams)
		}
	}
}

// all431: every bomb was answered 431 (or its stream reset), none
// served.
func all431(t *testing.T, r hostile.Report) {
	t.Helper()
	st := r.Statuses()
	answered := st[431]
	for _, n := range r.Resets() {
		answered += n
	}
	if answered == 0 {
		t.Errorf("no bomb was answered 431 or reset")
	}
	for code, n := range st {
		if code != 431 {
			t.Errorf("%d bombs answered %d, want 431", n, code)
		}
	}
}

// all431Closed: all431, and the connections closed: past a few bombs a
// connection is a flood.
func all431Closed(t *testing.T, r hostile.Report) {
	t.Helper()
	all431(t, r)
	allClosed(t, r)
}

// excessRefused: every stream past MAX_CONCURRENT_STREAMS was refused.
func excessRefused(t *testing.T, r hostile.Report) {
	t.Helper()
	for i, c := range r.Conns {
		refused := c.Resets[http2.ErrCodeRefusedStream] + c.Resets[http2.ErrCodeProtocol]
		if excess := c.Streams - int(c.MaxStreams); refused < excess {
			t.Errorf("connection %d: %d streams past the server's limit of %d, %d refused", i, excess, c.MaxStreams, refused)
		}
	}
}

// TestSlowloris: connections that send their preface a byte a second are
// closed once the server's wait for a preface is over, and nobody else
// notices. It has a server of its own (without leases), and runs beside
// TestAttacks: it holds little of the heap.
func TestSlowloris(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), slowlorisDuration)
	defer cancel()
	clientDone := make(chan hostile.ClientResult, 1)
	go func() {
		clientDone <- hostile.Renew(ctx, e.client.CoordinationV1().Leases(namespace), "well-behaved", renewInterval)
	}()
	r := hostile.Slowloris(t.Context(), e.target, hostile.Options{Conns: 20, Duration: slowlorisDuration})
	client := <-clientDone
	t.Logf("%v; well-behaved client: %v", r, client)
	if err := r.Err(); err != nil {
		t.Fatalf("the attack could not start: %v", err)
	}
	allClosed(t, r)
	if client.Errors > 0 {
		t.Errorf("the well-behaved client failed %d of %d renewals during the attack: %v", client.Errors, client.Requests, client.FirstError)
	}
}

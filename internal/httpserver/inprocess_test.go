package httpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/admission"
	namespacecontroller "github.com/leasehold/leasehold/internal/controllers/namespace"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/builtin"
	"github.com/leasehold/leasehold/internal/storage/embedded"
)

// inProcess is a Server on a real registry and embedded store, driven
// without a network (ServeHTTP on a recorder): for fuzzing and for tests
// of the filters.
type inProcess struct {
	srv   *Server
	reg   *registry.Registry
	store *embedded.Store
	// logs collects the server's log, shown when a check fails.
	logs *syncBuffer
}

type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newInProcess starts a server in a temporary directory, stopped when tb
// ends; mutate changes its configuration.
func newInProcess(tb testing.TB, mutate func(*Config)) *inProcess {
	tb.Helper()
	return newInProcessWith(tb, nil, mutate)
}

// newInProcessWith is newInProcess with the registry's configuration
// changed by mutateRegistry too.
func newInProcessWith(tb testing.TB, mutateRegistry func(*registry.Config), mutate func(*Config)) *inProcess {
	tb.Helper()
	logs := &syncBuffer{}
	log := newTestLogger(logs)
	store, err := embedded.Open(tb.TempDir(), embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	kinds := builtin.Kinds(builtin.Options{CoordinatedLeaderElection: true})
	ns := resources.Find(kinds, schema.GroupKind{Kind: "Namespace"})
	rcfg := registry.Config{Store: store, Kinds: kinds, Logger: log,
		Admission: admission.Chain{admission.NamespaceLifecycle{Namespaces: ns.Storage()}}}
	if mutateRegistry != nil {
		mutateRegistry(&rcfg)
	}
	reg, err := registry.New(rcfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx) }()
	cfg := Config{Registry: reg, Codecs: reg.Codecs(), OpenAPI: reg.OpenAPI(), Logger: log}
	if mutate != nil {
		mutate(&cfg)
	}
	p := &inProcess{srv: New(cfg), reg: reg, store: store, logs: logs}
	tb.Cleanup(func() {
		cancel()
		<-done
		store.Close()
	})
	<-reg.Ready()
	if err := namespacecontroller.EnsureSystem(ctx, reg); err != nil {
		tb.Fatal(err)
	}
	return p
}

// do serves one request.
func (p *inProcess) do(method, target, contentType string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	p.srv.ServeHTTP(w, req)
	return w
}

// mustDo serves a request that must answer code.
func (p *inProcess) mustDo(tb testing.TB, code int, method, target, contentType, body string) *httptest.ResponseRecorder {
	tb.Helper()
	w := p.do(method, target, contentType, []byte(body))
	if w.Code != code {
		tb.Fatalf("%s %s: %d %s, want %d", method, target, w.Code, w.Body, code)
	}
	return w
}

// revision is the store's current revision.
func (p *inProcess) revision(tb testing.TB) int64 {
	tb.Helper()
	rev, err := p.store.Revision(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return rev
}

// checkAnswer fails unless an answer is well formed: an error is a
// Status with its code, and no 500 comes from anything but a known
// kube-apiserver 500.
func (p *inProcess) checkAnswer(tb testing.TB, w *httptest.ResponseRecorder, request string) {
	tb.Helper()
	body := w.Body.Bytes()
	if w.Code < 400 {
		return
	}
	if w.Code == http.StatusTooManyRequests {
		return
	}
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || int(st.Code) != w.Code {
		tb.Fatalf("%s: %d answer is not a Status: %v: %s", request, w.Code, err, body)
	}
	if w.Code >= 500 && w.Code != http.StatusGatewayTimeout && !knownInternalError(st.Message) {
		tb.Fatalf("%s: %d %s\nserver log:\n%s", request, w.Code, body, p.logs.String())
	}
}

// knownInternalError lists the 500s kube-apiserver answers too, on
// purpose or nearly: a create with a resourceVersion. An unparseable
// metadata.resourceVersion on an update, a 500 there, is a 400 here
// (test/integration's TestPatchHTTP and TestUpdateMalformedResourceVersion
// pin it). The patch libraries' own errors, which kube-apiserver also
// passes on as 500s, are answered 400 or 422 by leasehold; their inputs
// are in testdata/fuzz/FuzzPatch.
func knownInternalError(msg string) bool {
	return strings.Contains(msg, "resourceVersion should not be set on objects to be created")
}

// newTestLogger logs warnings and errors to w.
func newTestLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

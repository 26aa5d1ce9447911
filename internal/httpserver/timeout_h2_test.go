package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/auth"
	"github.com/leasehold/leasehold/internal/h2server"
)

// TestWithTimeoutHTTP2 is TestWithTimeout through leasehold's HTTP/2
// server, where the handler runs in the request's goroutine and the
// deadline is a timer's (timeoutInline): the client hears of the
// deadline when it passes, whatever the handler does.
func TestWithTimeoutHTTP2(t *testing.T) {
	get := auth.Attributes{Verb: "get", ResourceRequest: true, Resource: "leases", Namespace: "a", Name: "x"}
	serve := func(t *testing.T, next func(http.ResponseWriter, *http.Request)) (*httptest.Server, *Server) {
		s := newBareServer(t)
		ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if finisherOf(w) == nil {
				t.Error("leasehold's HTTP/2 server's writer cannot finish a response early")
			}
			setBaseHeader(w.Header(), []string{"audit-1"})
			r := withAttrs(req, get)
			r.auditID[0] = "audit-1"
			s.withTimeout(w, req, r, func(w http.ResponseWriter, req *http.Request) {
				// As serveAuthenticated gives it to the API.
				next(w, req.WithContext(newRequestContext(req.Context(), r)))
			})
		}))
		ts.EnableHTTP2 = true
		h2server.Configure(ts.Config, &h2server.Server{})
		ts.StartTLS()
		t.Cleanup(ts.Close)
		return ts, s
	}
	statusOf := func(t *testing.T, resp *http.Response) metav1.Status {
		t.Helper()
		defer resp.Body.Close()
		var st metav1.Status
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}

	t.Run("a handler past its deadline gets a 504 at the deadline", func(t *testing.T) {
		release, handled := make(chan struct{}), make(chan error, 1)
		ts, s := serve(t, func(w http.ResponseWriter, r *http.Request) {
			<-release // deaf to its context
			w.Header().Set("X-Late", "1")
			_, err := w.Write([]byte("late"))
			handled <- err
		})
		resp, err := ts.Client().Get(ts.URL + "/apis/x?timeout=100ms")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("X-Late") != "" {
			t.Fatalf("%d %v", resp.StatusCode, resp.Header)
		}
		if st := statusOf(t, resp); st.Reason != metav1.StatusReasonTimeout {
			t.Errorf("status %+v", st)
		}
		close(release)
		if err := <-handled; !errors.Is(err, http.ErrHandlerTimeout) {
			t.Errorf("late write: %v", err)
		}
		s.Wait()
	})

	t.Run("the handler's context ends at the deadline, as past its deadline", func(t *testing.T) {
		// The stream's context, ended by the deadline's timer, reads as
		// a context.WithDeadline's would, and so do those made from it.
		checked := make(chan struct{})
		ts, s := serve(t, func(w http.ResponseWriter, r *http.Request) {
			defer close(checked)
			ctx := r.Context()
			deadline, ok := ctx.Deadline()
			if left := time.Until(deadline); !ok || left <= 0 || left > 100*time.Millisecond {
				t.Errorf("deadline %v, %v: want within the 100ms timeout", deadline, ok)
			}
			if a, ok := auth.RequestFrom(ctx); !ok || a.Name != "x" {
				t.Errorf("the request's attributes: %+v, %v", a, ok)
			}
			child, cancel := context.WithCancel(ctx)
			defer cancel()
			timed, cancel2 := context.WithTimeout(ctx, time.Hour)
			defer cancel2()
			if d, _ := timed.Deadline(); !d.Equal(deadline) {
				t.Errorf("a later deadline of a derived context: %v, want %v", d, deadline)
			}
			<-child.Done()
			<-timed.Done()
			if err := ctx.Err(); err != context.DeadlineExceeded { //nolint:errorlint // exactly it, as context.WithDeadline's
				t.Errorf("Err: %v", err)
			}
			for _, c := range []context.Context{ctx, child, timed} {
				if err := context.Cause(c); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Cause: %v", err)
				}
			}
		})
		resp, err := ts.Client().Get(ts.URL + "/apis/x?timeout=100ms")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("%d", resp.StatusCode)
		}
		<-checked
		s.Wait()
	})

	t.Run("the handler's context ends when the client goes", func(t *testing.T) {
		started, checked := make(chan struct{}), make(chan struct{})
		ts, s := serve(t, func(w http.ResponseWriter, r *http.Request) {
			defer close(checked)
			close(started)
			<-r.Context().Done()
			if err := r.Context().Err(); err != context.Canceled { //nolint:errorlint // exactly it
				t.Errorf("Err: %v", err)
			}
		})
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/apis/x?timeout=10s", nil)
		go func() {
			<-started // the client goes once the handler runs
			cancel()
		}()
		if resp, err := ts.Client().Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("answered %d", resp.StatusCode)
		}
		<-checked
		s.Wait()
	})

	t.Run("the 504 has the base header, not the handler's", func(t *testing.T) {
		// The handler writes the response's own header map; the timer
		// must answer with another (under -race, sharing it is a race).
		stop, handled := make(chan struct{}), make(chan struct{})
		ts, s := serve(t, func(w http.ResponseWriter, r *http.Request) {
			defer close(handled)
			h := w.Header()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				h.Set("X-Handler", strconv.Itoa(i))
				h.Del("Audit-Id")
			}
		})
		resp, err := ts.Client().Get(ts.URL + "/apis/x?timeout=100ms")
		if err != nil {
			t.Fatal(err)
		}
		close(stop)
		<-handled
		s.Wait()
		if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("X-Handler") != "" ||
			resp.Header.Get("Audit-Id") != "audit-1" || resp.Header.Get("Cache-Control") == "" {
			t.Fatalf("%d %v", resp.StatusCode, resp.Header)
		}
		if st := statusOf(t, resp); st.Reason != metav1.StatusReasonTimeout {
			t.Errorf("status %+v", st)
		}
	})

	t.Run("a panic after the 504 leaves it be", func(t *testing.T) {
		release, panicking := make(chan struct{}), make(chan struct{})
		ts, s := serve(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/again" {
				return
			}
			<-release
			close(panicking)
			panic("late boom")
		})
		resp, err := ts.Client().Get(ts.URL + "/apis/x?timeout=100ms")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("%d", resp.StatusCode)
		}
		resp.Body.Close()
		close(release)
		<-panicking // (and so s.Wait waits for this handler)
		s.Wait()
		// The connection still serves.
		resp, err = ts.Client().Get(ts.URL + "/again")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("after the panic: %d", resp.StatusCode)
		}
	})

	t.Run("a panic is a 500", func(t *testing.T) {
		ts, _ := serve(t, func(http.ResponseWriter, *http.Request) { panic("boom") })
		resp, err := ts.Client().Get(ts.URL + "/apis/x")
		if err != nil {
			t.Fatal(err)
		}
		if st := statusOf(t, resp); resp.StatusCode != http.StatusInternalServerError || st.Reason != metav1.StatusReasonInternalError {
			t.Errorf("%d %+v", resp.StatusCode, st)
		}
	})

	t.Run("an answer begun may finish within the grace", func(t *testing.T) {
		ts, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			<-r.Context().Done()
			_, _ = w.Write([]byte("done"))
		})
		resp, err := ts.Client().Get(ts.URL + "/apis/x?timeout=100ms")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || string(body) != "done" {
			t.Errorf("%d %q %v", resp.StatusCode, body, err)
		}
	})

	t.Run("an answer begun and not finished is reset after the grace", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		ts, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-release
		})
		start := time.Now()
		resp, err := ts.Client().Get(ts.URL + "/apis/x?timeout=100ms")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		if err == nil || !strings.Contains(err.Error(), "stream error") {
			t.Errorf("read %v, want a stream reset", err)
		}
		if took := time.Since(start); took < writeGrace || took > writeGrace+5*time.Second {
			t.Errorf("reset after %v, want the deadline and the %v grace", took, writeGrace)
		}
	})
}

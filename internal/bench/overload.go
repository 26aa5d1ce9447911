package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// OverloadConfig describes an overload run.
type OverloadConfig struct {
	Namespace string
	// Leases is how many leases (made by Fill) the writes spread over.
	Leases int
	// Rate is the writes offered per second, whatever the answers: an
	// open loop, as independent clients are.
	Rate float64
	// Connections is how many client connections carry them.
	Connections int
	Duration    time.Duration
	// Token, when set, replaces the kubeconfig's credentials: the
	// in-flight limits do not apply to system:masters (kube-apiserver's
	// rule), which the admin kubeconfig is.
	Token string
	// StreamsPerConnection bounds the requests waiting for an answer on
	// one connection: a write that would exceed it is counted as not sent.
	// Below the server's HTTP/2 stream limit (250), so that the HTTP
	// client never opens more connections, whose TLS handshakes would
	// cost the server more than the requests.
	StreamsPerConnection int
}

// Overload offers writes (merge patches renewing leases) at a fixed rate,
// typically several times what the server sustains, and reports how the
// server sheds them: answers by kind, the latency of the admitted writes
// (2xx) and of the refused ones (429), the latency of reads probed twice a
// second alongside, and the server's CPU and peak memory.
func Overload(ctx context.Context, e *Env, oc OverloadConfig) error {
	if oc.Rate <= 0 || oc.Connections <= 0 || oc.Leases <= 0 {
		return errors.New("overload: rate, connections and leases must be positive")
	}
	// The writes go out as plain HTTP requests with prepared bodies, one
	// attempt each (client-go would retry a 429 after its Retry-After,
	// which hides the shedding): on a machine shared with the server, the
	// load tool must spend little CPU per request.
	type conn struct {
		http *http.Client
		base string
		// outstanding counts its requests waiting for an answer.
		outstanding atomic.Int64
	}
	conns := make([]*conn, oc.Connections)
	var probe kubernetes.Interface
	for i := range conns {
		cfg := rest.CopyConfig(e.configFor(i))
		if oc.Token != "" {
			cfg.BearerToken, cfg.BearerTokenFile = oc.Token, ""
			cfg.CertData, cfg.CertFile, cfg.KeyData, cfg.KeyFile = nil, "", nil, ""
		}
		cfg.Proxy = noProxy // a connection of its own
		cfg.UserAgent = fmt.Sprintf("leasehold-bench-overload/%d", i)
		tr, err := rest.TransportFor(cfg)
		if err != nil {
			return err
		}
		conns[i] = &conn{http: &http.Client{Transport: tr}, base: strings.TrimSuffix(cfg.Host, "/") + "/apis/coordination.k8s.io/v1/namespaces/" + oc.Namespace + "/leases/"}
		if i == 0 {
			if probe, err = kubernetes.NewForConfig(cfg); err != nil {
				return err
			}
		}
	}
	proc := StartSampling(e.PIDs)

	const reportEvery = 10 * time.Second
	perConn := int64(oc.StreamsPerConnection)
	if perConn <= 0 {
		perConn = 200
	}
	var (
		// mu guards the latencies and other.
		mu                        sync.Mutex
		admitted, refused, probes Latencies
		other                     = map[string]int{}

		sent, notSent, outstanding, probeFailures atomic.Int64
		// Counts since the last progress line.
		windowAdmitted, window429, windowOther, windowNotSent atomic.Int64

		wg sync.WaitGroup
	)
	start := time.Now()
	interval := time.Duration(float64(time.Second) / oc.Rate)
	runCtx, cancel := context.WithTimeout(ctx, oc.Duration)
	defer cancel()
	patch := func() []byte {
		return fmt.Appendf(nil, `{"spec":{"renewTime":%q}}`, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"))
	}
	record := func(lat time.Duration, code int, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			other[err.Error()]++
			windowOther.Add(1)
		case code/100 == 2:
			admitted = append(admitted, lat)
			windowAdmitted.Add(1)
		case code == http.StatusTooManyRequests:
			refused = append(refused, lat)
			window429.Add(1)
		default:
			other[http.StatusText(code)]++
			windowOther.Add(1)
		}
	}

	// Reads alongside: a get of one lease twice a second.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		api := probe.CoordinationV1().Leases(oc.Namespace)
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
			t := time.Now()
			rctx, rcancel := context.WithTimeout(runCtx, 10*time.Second)
			_, err := api.Get(rctx, "lease-000000", metav1.GetOptions{})
			rcancel()
			if err != nil {
				if runCtx.Err() == nil {
					probeFailures.Add(1)
				}
				continue
			}
			mu.Lock()
			probes = append(probes, time.Since(t))
			mu.Unlock()
		}
	}()

	// Progress every reportEvery, with the server's RSS.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(reportEvery)
		defer tick.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
			proc.Sample()
			rss := ""
			if proc != nil {
				if n, err := proc.RSS(); err == nil {
					rss = fmt.Sprintf(", server RSS %.0f MiB", float64(n)/(1<<20))
				}
			}
			s := reportEvery.Seconds()
			fmt.Fprintf(e.Out, "overload: %3.0fs: 2xx %.0f/s, 429 %.0f/s, other %.0f/s, not sent %.0f/s, outstanding %d%s\n",
				time.Since(start).Seconds(), float64(windowAdmitted.Swap(0))/s, float64(window429.Swap(0))/s,
				float64(windowOther.Swap(0))/s, float64(windowNotSent.Swap(0))/s, outstanding.Load(), rss)
		}
	}()

	// The open loop: one write per interval, on its own goroutine.
	next := time.Now()
	for i := 0; runCtx.Err() == nil; i++ {
		next = next.Add(interval)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		c := conns[i%len(conns)]
		if c.outstanding.Load() >= perConn {
			notSent.Add(1)
			windowNotSent.Add(1)
			continue
		}
		c.outstanding.Add(1)
		outstanding.Add(1)
		sent.Add(1)
		url := c.base + fmt.Sprintf("lease-%06d", i%oc.Leases)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer outstanding.Add(-1)
			defer c.outstanding.Add(-1)
			req, err := http.NewRequestWithContext(ctx, http.MethodPatch, url, bytes.NewReader(patch()))
			if err != nil {
				record(0, 0, err)
				return
			}
			req.Header.Set("Content-Type", "application/merge-patch+json")
			req.Header.Set("Accept", "application/vnd.kubernetes.protobuf")
			t := time.Now()
			resp, err := c.http.Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if ctx.Err() != nil {
				return
			}
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			record(time.Since(t), code, err)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	fmt.Fprintf(e.Out, "overload: offered %.0f writes/s for %v over %d connections: sent %.0f/s (%d not sent: %d waiting on their connection already)\n",
		oc.Rate, oc.Duration, oc.Connections, float64(sent.Load())/elapsed.Seconds(), notSent.Load(), perConn)
	fmt.Fprintf(e.Out, "overload: admitted (2xx) %.0f/s, latency %s\n", float64(len(admitted))/elapsed.Seconds(), admitted)
	fmt.Fprintf(e.Out, "overload: refused (429) %.0f/s, latency %s\n", float64(len(refused))/elapsed.Seconds(), refused)
	for k, n := range other {
		fmt.Fprintf(e.Out, "overload: other answers: %d × %s\n", n, k)
	}
	fmt.Fprintf(e.Out, "overload: reads alongside: latency %s, %d failed\n", probes, probeFailures.Load())
	if proc != nil {
		fmt.Fprintln(e.Out, proc.Report(int64(len(admitted)+len(refused)), "answered write"))
	}
	return nil
}

package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// List times raw list requests of every lease in namespace: whole (plain,
// and gzipped as client-go asks by default), and in pages of pageSize, in
// JSON and protobuf, rounds times each. The client reads each body whole,
// as client-go does before decoding, and neither decodes nor decompresses
// it, so the times are the server's plus the transfer.
func List(ctx context.Context, e *Env, namespace string, pageSize, rounds int) error {
	cfg := rest.CopyConfig(e.Config)
	cfg.Proxy = noProxy
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: tr}
	base := strings.TrimSuffix(cfg.Host, "/") + "/apis/coordination.k8s.io/v1/namespaces/" + namespace + "/leases"
	get := func(query, accept, encoding string) (int64, string, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", base+query, nil)
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Accept", accept)
		req.Header.Set("Accept-Encoding", encoding)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			return 0, "", fmt.Errorf("%s: %d %s", query, resp.StatusCode, b)
		}
		// Read as client-go reads a response, with io.ReadAll: each read
		// takes what has arrived. (A reader of 8 KiB at a time, as
		// io.Copy to io.Discard, makes Go's client return flow-control
		// window every 8 KiB: some 1,700 WINDOW_UPDATE frames for a
		// 14 MB list, each a TLS record the server must read, ~5 ms of
		// its CPU a list that client-go does not cost it.)
		b, err := io.ReadAll(resp.Body)
		if accept == "application/json" && query != "" {
			return int64(len(b)), continueToken(b), err
		}
		return int64(len(b)), "", err
	}
	var phase atomic.Value // string: what is being timed
	phase.Store("starting")
	for _, accept := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		for _, encoding := range []string{"identity", "gzip"} {
			var lat Latencies
			var size int64
			prog := e.startProgress(func() string { return "list: " + phase.Load().(string) })
			proc := StartSampling(e.PIDs)
			for r := range rounds {
				phase.Store(fmt.Sprintf("whole, %s, %s: round %d of %d", accept, encoding, r+1, rounds))
				t := time.Now()
				if size, _, err = get("", accept, encoding); err != nil {
					prog.Stop()
					return err
				}
				lat = append(lat, time.Since(t))
			}
			prog.Stop()
			fmt.Fprintf(e.Out, "list %s whole, %s (%.1f MiB): %s%s\n", accept, encoding, float64(size)/(1<<20), lat, cpuPer(proc, rounds, "list"))
		}
	}
	var lat Latencies
	pages := 0
	prog := e.startProgress(func() string { return "list: " + phase.Load().(string) })
	defer prog.Stop()
	proc := StartSampling(e.PIDs)
	for r := range rounds {
		t := time.Now()
		cont := ""
		for page := 1; ; page++ {
			phase.Store(fmt.Sprintf("in pages of %d: round %d of %d, page %d", pageSize, r+1, rounds, page))
			q := fmt.Sprintf("?limit=%d", pageSize)
			if cont != "" {
				q += "&continue=" + cont
			}
			if _, cont, err = get(q, "application/json", "identity"); err != nil {
				return err
			}
			pages++
			if cont == "" {
				break
			}
		}
		lat = append(lat, time.Since(t))
	}
	prog.Stop()
	fmt.Fprintf(e.Out, "list application/json in pages of %d (%d pages): %s%s\n", pageSize, pages/rounds, lat, cpuPer(proc, rounds, "list"))
	return nil
}

// cpuPer reports the server's CPU per operation since proc started, or
// nothing without a server to sample.
func cpuPer(proc *Process, ops int, op string) string {
	if proc == nil {
		return ""
	}
	return "; server CPU " + perOp(proc.CPU(), int64(ops)) + " per " + op
}

// continueToken finds metadata.continue in the head of a JSON list.
func continueToken(data []byte) string {
	head := string(data[:min(len(data), 1024)])
	const key = `"continue":"`
	i := strings.Index(head, key)
	if i < 0 {
		return ""
	}
	rest := head[i+len(key):]
	return rest[:strings.IndexByte(rest, '"')]
}

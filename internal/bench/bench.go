package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Env is what every scenario works with.
type Env struct {
	// Config is the REST config of the server under test; with several
	// servers, the first one's.
	Config *rest.Config
	// Configs are the REST configs of every server under test (replicas of
	// one leasehold sharing a store): a scenario's simulated clients are
	// spread over them round-robin. Configs[0] is Config.
	Configs []*rest.Config
	// PIDs, when any, are the server's processes (several: kube-apiserver
	// and its etcd, to compare), sampled together for CPU and RSS.
	PIDs []int
	// Out receives the results.
	Out io.Writer
	// Progress, when not nil, receives reports of how a scenario is going
	// while it runs: one line redrawn in place when Live (a terminal),
	// else a plain line every ProgressInterval (10 s when 0).
	Progress         io.Writer
	Live             bool
	ProgressInterval time.Duration
}

// NewEnv loads a kubeconfig, or several separated by commas: the
// kubeconfigs of replicas of one leasehold, whose servers the simulated
// clients are then spread over. A path that exists as given is one
// kubeconfig, commas and all.
func NewEnv(kubeconfig string, pids []int, out io.Writer) (*Env, error) {
	paths := []string{kubeconfig}
	if _, err := os.Stat(kubeconfig); err != nil && strings.Contains(kubeconfig, ",") {
		paths = nil
		for _, p := range strings.Split(kubeconfig, ",") {
			if p = strings.TrimSpace(p); p != "" {
				paths = append(paths, p)
			}
		}
	}
	e := &Env{PIDs: pids, Out: out}
	for _, p := range paths {
		cfg, err := clientcmd.BuildConfigFromFlags("", p)
		if err != nil {
			return nil, err
		}
		cfg.QPS, cfg.Burst = -1, 0
		e.Configs = append(e.Configs, cfg)
	}
	if len(e.Configs) == 0 {
		return nil, fmt.Errorf("no kubeconfig in %q", kubeconfig)
	}
	e.Config = e.Configs[0]
	return e, nil
}

// configFor is the REST config of simulated client i: the servers in turn.
func (e *Env) configFor(i int) *rest.Config {
	if len(e.Configs) == 0 {
		return e.Config
	}
	return e.Configs[i%len(e.Configs)]
}

// client returns a protobuf clientset of the first server with its own
// connection, so that simulated clients do not share one HTTP/2
// connection.
func (e *Env) client() (kubernetes.Interface, error) { return e.clientFor(0) }

// clientFor is client for simulated client i, on configFor(i)'s server.
func (e *Env) clientFor(i int) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(e.configFor(i))
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	// A Proxy function keeps client-go from sharing a cached transport, so
	// this client gets its own connection.
	cfg.Proxy = noProxy
	cfg.UserAgent = fmt.Sprintf("leasehold-bench/%d", time.Now().UnixNano())
	return kubernetes.NewForConfig(cfg)
}

func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

// Process samples the CPU time and memory of a server's processes from
// /proc: their sums.
type Process struct {
	pids      []int
	startCPU  time.Duration
	startWall time.Time
	peakRSS   int64
}

// StartSampling begins measuring pids (nil when there are none).
func StartSampling(pids []int) *Process {
	if len(pids) == 0 {
		return nil
	}
	p := &Process{pids: pids, startWall: time.Now()}
	p.startCPU = p.cpu()
	return p
}

// cpu is the processes' CPU time so far.
func (p *Process) cpu() time.Duration {
	var sum time.Duration
	for _, pid := range p.pids {
		t, _ := cpuTime(pid)
		sum += t
	}
	return sum
}

// RSS is the processes' resident set size now.
func (p *Process) RSS() (int64, error) {
	var sum int64
	for _, pid := range p.pids {
		n, err := RSS(pid)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// Sample records the current RSS for the peak.
func (p *Process) Sample() {
	if p == nil {
		return
	}
	if rss, err := p.RSS(); err == nil && rss > p.peakRSS {
		p.peakRSS = rss
	}
}

// CPU is the CPU time the processes used since the start.
func (p *Process) CPU() time.Duration { return p.cpu() - p.startCPU }

// Report describes CPU use since the start, per operation when ops is
// positive (op names one, as "renewal"), and the peak RSS seen.
func (p *Process) Report(ops int64, op string) string {
	if p == nil {
		return ""
	}
	p.Sample()
	cpu := p.CPU()
	wall := time.Since(p.startWall)
	per := ""
	if ops > 0 {
		per = "; " + perOp(cpu, ops) + " per " + op
	}
	return fmt.Sprintf("server: %.2f cores (%.1fs CPU in %.1fs%s), peak RSS %.1f MiB",
		cpu.Seconds()/wall.Seconds(), cpu.Seconds(), wall.Seconds(), per, float64(p.peakRSS)/(1<<20))
}

// perOp formats cpu/ops in a readable unit. /proc counts CPU in ticks of
// 10 ms: the runs are meant to be long enough for that not to matter.
func perOp(cpu time.Duration, ops int64) string {
	d := cpu / time.Duration(ops)
	switch {
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

// RSS returns the resident set size of pid in bytes.
func RSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// cpuTime returns user+system CPU time of pid.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses.
	rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
	f := strings.Fields(rest)
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks, nil
}

// Latencies summarises durations.
type Latencies []time.Duration

func (l Latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := append(Latencies(nil), l...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q * float64(len(s)-1))
	return s[i]
}

func (l Latencies) String() string {
	return fmt.Sprintf("n=%d p50=%v p90=%v p99=%v max=%v", len(l),
		l.quantile(0.5).Round(time.Microsecond*10), l.quantile(0.9).Round(time.Microsecond*10),
		l.quantile(0.99).Round(time.Microsecond*10), l.quantile(1).Round(time.Microsecond*10))
}

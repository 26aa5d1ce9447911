// Command h2attack runs test/hostile's attacks on an HTTP/2 server, one
// at a time, against any Kubernetes API server given its kubeconfig:
// leasehold's admin.kubeconfig (client certificates) or kube-apiserver's
// (a bearer token). A well-behaved client renews a lease alongside each
// attack, and once alone for as long first: its baseline. The server's
// RSS (the sum of --server-pid's processes, as kube-apiserver's and its
// etcd's) is sampled before, during and after each attack. An attack is
// sustained for --duration: the connections a server closes are replaced
// by a new wave of --conns, so the client meets the attack throughout,
// however soon the server ends each connection. It prints a
// row per attack: the attacking connections the server closed and how,
// how soon, the RSS, and the well-behaved client's requests, errors and
// p99 against the baseline's. The well-behaved client runs in a process
// of its own (this command, re-executed), so that the attack's goroutines
// do not delay it in this process's scheduler: its latencies are the
// server's, and the operating system's, not ours.
//
//	go run ./test/perf/h2attack --kubeconfig DATA_DIR/admin.kubeconfig --server-pid PID
//	go run ./test/perf/h2attack --kubeconfig ~/.cache/leasehold-peers/admin.kubeconfig --server-pid $KAS_PID,$ETCD_PID
//
// It creates what the large answer needs, --leases leases with an
// annotation of --lease-bytes in --namespace (and the namespace), where
// they are absent, and leaves them for the next run; with --cleanup it
// deletes the namespace, if this run created it. It attacks loopback
// addresses only.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/bench"
	"github.com/leasehold/leasehold/test/hostile"
)

// rssInterval is how often the servers' RSS is sampled during an attack.
const rssInterval = 100 * time.Millisecond

type config struct {
	kubeconfig    string
	pids          []int
	duration      time.Duration
	conns         int
	attacks       []string
	namespace     string
	leases        int
	leaseBytes    int
	rssLimit      int64
	renewInterval time.Duration
	cooldown      time.Duration
	cleanup       bool
}

func main() {
	var c config
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "the server's kubeconfig")
	flag.Func("server-pid", "a process of the server whose RSS is sampled; comma-separated or repeated, summed (kube-apiserver's and etcd's)", func(s string) error {
		for _, f := range strings.Split(s, ",") {
			pid, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return err
			}
			c.pids = append(c.pids, pid)
		}
		return nil
	})
	flag.DurationVar(&c.duration, "duration", 30*time.Second, "how long each attack (and the baseline) runs")
	flag.IntVar(&c.conns, "conns", 4, "attacking connections")
	attacks := flag.String("attacks", "", "the attacks to run, comma-separated (default all: "+strings.Join(names(), ",")+")")
	flag.StringVar(&c.namespace, "namespace", "h2attack", "the namespace of the large list's leases")
	flag.IntVar(&c.leases, "leases", 1000, "leases in the large list")
	flag.IntVar(&c.leaseBytes, "lease-bytes", 3000, "the size of each lease's annotation")
	rssLimit := flag.Int64("rss-limit-mib", 4096, "stop an attack once the server's RSS passes this")
	flag.DurationVar(&c.renewInterval, "renew-interval", 20*time.Millisecond, "the well-behaved client's pace")
	flag.DurationVar(&c.cooldown, "cooldown", 5*time.Second, "pause between attacks, for the server to finish what the last one left")
	flag.BoolVar(&c.cleanup, "cleanup", false, "delete the namespace at the end if this run created it")
	list := flag.Bool("list", false, "print the attacks' names and exit")
	wellBehaved := flag.Bool("well-behaved", false, "be the well-behaved client until interrupted, then print what it saw (JSON); the attacks start this themselves")
	flag.Parse()
	if *list {
		fmt.Println(strings.Join(names(), "\n"))
		return
	}
	if *wellBehaved {
		if err := renewUntilInterrupted(c); err != nil {
			fmt.Fprintln(os.Stderr, "h2attack:", err)
			os.Exit(1)
		}
		return
	}
	c.rssLimit = *rssLimit << 20
	if *attacks != "" {
		c.attacks = strings.Split(*attacks, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "h2attack:", err)
		os.Exit(1)
	}
}

func names() []string {
	var n []string
	for _, a := range hostile.Attacks() {
		n = append(n, a.Name)
	}
	return n
}

// row is one attack's line of the table.
type row struct {
	report hostile.Report
	// The servers' RSS before the attack, its peak, at the attack's end
	// (its connections open) and after they closed.
	before, peak, atEnd, after int64
	stoppedAt                  int64 // the RSS that stopped the attack, if one did
	// waves is how many times the attack's connections were opened: a
	// connection the server closes is replaced until the duration ends.
	waves       int
	rssKnown    bool
	client      hostile.ClientResult
	baselineP99 time.Duration
}

func run(ctx context.Context, c config, stdout, stderr io.Writer) error {
	if c.kubeconfig == "" {
		return errors.New("--kubeconfig is required")
	}
	attacks, err := pick(c.attacks)
	if err != nil {
		return err
	}
	cfg, cs, err := clientFor(c.kubeconfig)
	if err != nil {
		return err
	}
	tg, err := hostile.TargetFor(cfg)
	if err != nil {
		return err
	}
	base := "/apis/coordination.k8s.io/v1/namespaces/" + c.namespace + "/leases"
	tg.LargePath = base
	tg.SmallPath = base + "/lease-0000"
	tg.WatchPath = base + "?watch=1&timeoutSeconds=600&fieldSelector=" + url.QueryEscape("metadata.name=none")

	created, err := prepare(ctx, cs, c, stderr)
	if err != nil {
		return err
	}
	if created && c.cleanup {
		defer func() {
			err := cs.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), c.namespace, metav1.DeleteOptions{})
			fmt.Fprintf(stderr, "h2attack: deleted namespace %s: %v\n", c.namespace, err)
		}()
	}

	fmt.Fprintf(stderr, "h2attack: baseline: the well-behaved client alone for %v\n", c.duration)
	bctx, cancel := context.WithTimeout(ctx, c.duration)
	baseline, err := renew(bctx, c)
	cancel()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "h2attack: baseline: %v\n", baseline)

	var rows []row
	for i, a := range attacks {
		if ctx.Err() != nil {
			break
		}
		if i > 0 {
			// Not a readiness wait: the last attack's leftovers (writes
			// timing out, garbage) settle before the next "before".
			time.Sleep(c.cooldown)
		}
		fmt.Fprintf(stderr, "h2attack: %s: %d connections for %v\n", a.Name, c.conns, c.duration)
		r := attack(ctx, a, tg, c)
		r.baselineP99 = baseline.Quantile(0.99)
		fmt.Fprintf(stderr, "h2attack: %v\n", r.report)
		rows = append(rows, r)
	}
	printTable(stdout, c, baseline, rows)
	return ctx.Err()
}

// pick finds the attacks named, all when none are.
func pick(want []string) ([]hostile.Attack, error) {
	all := hostile.Attacks()
	if len(want) == 0 {
		return all, nil
	}
	var out []hostile.Attack
	for _, w := range want {
		i := slices.IndexFunc(all, func(a hostile.Attack) bool { return a.Name == strings.TrimSpace(w) })
		if i < 0 {
			return nil, fmt.Errorf("no attack %q (there are %s)", w, strings.Join(names(), ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// prepare creates the namespace and the leases of the large list where
// they are absent; created reports whether it created the namespace.
func prepare(ctx context.Context, cs kubernetes.Interface, c config, stderr io.Writer) (created bool, err error) {
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}}, metav1.CreateOptions{})
	switch {
	case err == nil:
		created = true
	case !apierrors.IsAlreadyExists(err):
		return false, err
	}
	leases := cs.CoordinationV1().Leases(c.namespace)
	have := map[string]bool{}
	list, err := leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		return created, err
	}
	for _, l := range list.Items {
		have[l.Name] = true
	}
	var missing []string
	for i := range c.leases {
		if name := fmt.Sprintf("lease-%04d", i); !have[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return created, nil
	}
	fmt.Fprintf(stderr, "h2attack: creating %d leases in %s\n", len(missing), c.namespace)
	pad := strings.Repeat("x", c.leaseBytes)
	const workers = 8
	errs := make(chan error, workers) // a worker sends at most one
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(missing); i += workers {
				holder := "h2attack"
				_, err := leases.Create(ctx, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: missing[i], Annotations: map[string]string{"h2attack/pad": pad}},
					Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
				}, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return created, <-errs
}

// attack runs one attack with the well-behaved client alongside,
// sampling the servers' RSS; it stops the attack once the RSS passes the
// limit.
func attack(ctx context.Context, a hostile.Attack, tg hostile.Target, c config) row {
	var r row
	r.before, r.rssKnown = rss(c.pids)
	actx, stopAttack := context.WithCancel(ctx)
	defer stopAttack()
	var mu sync.Mutex // guards r.peak, r.stoppedAt
	r.peak = r.before
	done := make(chan struct{})
	var sampler sync.WaitGroup
	if r.rssKnown {
		sampler.Go(func() {
			t := time.NewTicker(rssInterval)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
				}
				v, ok := rss(c.pids)
				if !ok {
					continue
				}
				mu.Lock()
				r.peak = max(r.peak, v)
				if v > c.rssLimit && r.stoppedAt == 0 {
					r.stoppedAt = v
					stopAttack()
				}
				mu.Unlock()
			}
		})
	}
	cctx, stopClient := context.WithCancel(ctx)
	type clientResult struct {
		r   hostile.ClientResult
		err error
	}
	clientDone := make(chan clientResult, 1)
	go func() {
		r, err := renew(cctx, c)
		clientDone <- clientResult{r, err}
	}()
	// The attack is sustained: connections the server closes are
	// replaced, by a new wave of c.conns, until the duration is over.
	start := time.Now()
	for left := c.duration; left > 0 && actx.Err() == nil; left = c.duration - time.Since(start) {
		rep := a.Run(actx, tg, hostile.Options{
			Conns: c.conns, Duration: left,
			AtEnd: func() { r.atEnd, _ = rss(c.pids) },
		})
		r.waves++
		r.report.Attack = rep.Attack
		r.report.Conns = append(r.report.Conns, rep.Conns...)
		if !slices.ContainsFunc(rep.Conns, func(cr hostile.ConnResult) bool { return cr.Err == nil }) {
			break // none could attack: no point in a hot loop
		}
	}
	stopClient()
	cr := <-clientDone
	r.client = cr.r
	if cr.err != nil {
		r.client.Errors++
		r.client.FirstError = cr.err
	}
	close(done)
	sampler.Wait()
	r.after, _ = rss(c.pids)
	mu.Lock()
	r.peak = max(r.peak, r.atEnd)
	mu.Unlock()
	return r
}

// wellBehavedResult is what the well-behaved client's process prints.
type wellBehavedResult struct {
	Requests, Errors int
	FirstError       string
	Latencies        []time.Duration
}

// renew runs the well-behaved client in a process of its own until ctx
// ends, and returns what it saw.
func renew(ctx context.Context, c config) (hostile.ClientResult, error) {
	self, err := os.Executable()
	if err != nil {
		return hostile.ClientResult{}, err
	}
	// Ahead of the attacker in the CPU's queue (nice -19 needs root;
	// without, nice says so and runs it as it is).
	cmd := exec.Command("nice", "-n", "-19", self, "--well-behaved", "--kubeconfig", c.kubeconfig,
		"--namespace", c.namespace, "--renew-interval", c.renewInterval.String())
	cmd.Stderr = os.Stderr
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		return hostile.ClientResult{}, err
	}
	<-ctx.Done()
	_ = cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		return hostile.ClientResult{}, fmt.Errorf("the well-behaved client: %w", err)
	}
	var w wellBehavedResult
	if err := json.Unmarshal([]byte(out.String()), &w); err != nil {
		return hostile.ClientResult{}, fmt.Errorf("the well-behaved client's result: %w", err)
	}
	r := hostile.ClientResult{Requests: w.Requests, Errors: w.Errors, Latencies: w.Latencies}
	if w.FirstError != "" {
		r.FirstError = errors.New(w.FirstError)
	}
	return r, nil
}

// clientFor is the client of the server in kubeconfig, without
// client-go's rate limit.
func clientFor(kubeconfig string) (*rest.Config, kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	return cfg, cs, err
}

// renewUntilInterrupted is the well-behaved client's process.
func renewUntilInterrupted(c config) error {
	_, cs, err := clientFor(c.kubeconfig)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r := hostile.Renew(ctx, cs.CoordinationV1().Leases(c.namespace), "well-behaved", c.renewInterval)
	w := wellBehavedResult{Requests: r.Requests, Errors: r.Errors, Latencies: r.Latencies}
	if r.FirstError != nil {
		w.FirstError = r.FirstError.Error()
	}
	return json.NewEncoder(os.Stdout).Encode(w)
}

// rss is the processes' summed RSS; ok is false without processes or
// when one cannot be read.
func rss(pids []int) (int64, bool) {
	if len(pids) == 0 {
		return 0, false
	}
	var sum int64
	for _, pid := range pids {
		v, err := bench.RSS(pid)
		if err != nil {
			return 0, false
		}
		sum += v
	}
	return sum, true
}

func printTable(w io.Writer, c config, baseline hostile.ClientResult, rows []row) {
	fmt.Fprintf(w, "# %d connections an attack, %v each; well-behaved client: a renewal every %v; baseline (no attack): %v\n",
		c.conns, c.duration, c.renewInterval, baseline)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "attack\tclosed\ttime to close\tRSS before\tpeak\tgrowth\tat end\tafter\trenewals\terrors\tp50\tp99\tp99/baseline")
	for _, r := range rows {
		rssCols := "-\t-\t-\t-\t-"
		if r.rssKnown {
			rssCols = fmt.Sprintf("%s\t%s\t%s\t%s\t%s", mib(r.before), mib(r.peak), mib(r.peak-r.before), mib(r.atEnd), mib(r.after))
		}
		ratio := "-"
		if r.baselineP99 > 0 {
			ratio = fmt.Sprintf("%.1f×", float64(r.client.Quantile(0.99))/float64(r.baselineP99))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%v\t%v\t%s\n", r.report.Attack, r.report.ClosedSummary(), r.report.CloseTimes(), rssCols,
			r.client.Requests, r.client.Errors, roundMS(r.client.Quantile(0.5)), roundMS(r.client.Quantile(0.99)), ratio)
	}
	tw.Flush()
	for _, r := range rows {
		fmt.Fprintf(w, "# %s: %d waves of %d connections; %s", r.report.Attack, r.waves, c.conns, r.report.Detail())
		if r.stoppedAt > 0 {
			fmt.Fprintf(w, "; stopped at RSS %s", mib(r.stoppedAt))
		}
		if r.client.FirstError != nil {
			fmt.Fprintf(w, "; the client's first error: %v", r.client.FirstError)
		}
		fmt.Fprintln(w)
	}
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

func roundMS(d time.Duration) time.Duration {
	if d >= 10*time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Microsecond)
}

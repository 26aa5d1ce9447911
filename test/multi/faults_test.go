package multi

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/leasehold/leasehold/internal/testkit/electiontest"
	"github.com/leasehold/leasehold/internal/testkit/locktest"
)

func TestMain(m *testing.M) {
	// client-go logs every failed call of the candidates and informers
	// while replicas and etcd members are down; keep the output readable
	// unless asked.
	if os.Getenv("LEASEHOLD_TEST_LOG") == "" {
		klog.SetLogger(logr.Discard())
	}
	code := m.Run()
	locktest.Cleanup() // the binaries TestLockReplicaLoss built
	os.Exit(code)
}

const (
	// phaseTime is the least time each phase of a fault test lasts, so that
	// the load runs under each fault, not just across it.
	phaseTime = 2 * time.Second
	// phaseTimeout bounds waiting for the system to make progress in a
	// phase: failovers take up to the longest lease duration plus polls.
	phaseTimeout = time.Minute
)

// system is a deployment under load: elections, the renew load, the
// linearizability workload and an informer on every replica.
type system struct {
	d         *deployment
	elections []*election
	renew     *renewLoad
	lin       *linLoad
	// informers has an informer on every replica; a replica's is
	// dropped when it is killed (client-go backs off reconnecting to a
	// dead server) and a new one started when it is back.
	informers []*leaseInformer
	// lbInformer connects through lb, a load balancer in front of every
	// replica, and lives through every fault.
	lb         *balancer
	lbInformer *leaseInformer
	// probe measures etcd's own write outages; stalls the test
	// process's.
	probe    *etcdProbe
	stalls   *electiontest.Stalls
	down     map[int]bool // replicas killed and not restarted
	start    time.Time
	stopOnce sync.Once
}

func startSystem(t *testing.T, d *deployment) *system {
	t.Helper()
	s := &system{d: d, down: map[int]bool{}, start: time.Now()}
	t.Cleanup(s.stopLoad) // also when a start below fails
	createNamespaces(t, d, renewNamespace, linNamespace)
	s.probe = startEtcdProbe(t, d)
	s.lb = startBalancer(t, d.addrs())
	lbConfig := d.configFor(0)
	lbConfig.Host = s.lb.URL()
	s.lbInformer = startInformer(t, "the load balancer", kubernetes.NewForConfigOrDie(lbConfig))
	for i := range d.replicas {
		s.informers = append(s.informers, startInformer(t, d.replicas[i].Name(), d.clientFor(t, i)))
	}
	s.renew = startRenewLoad(t, d)
	s.lin = startLinLoad(t, d)
	s.stalls = electiontest.StartStalls()
	for i, spec := range electionSpecs {
		s.elections = append(s.elections, startElection(t, d, i, spec, s.stalls))
	}
	return s
}

// stopLoad stops the candidates and the writers; safe to call twice.
func (s *system) stopLoad() {
	s.stopOnce.Do(func() {
		for _, e := range s.elections {
			e.stop()
		}
		if s.renew != nil {
			s.renew.stop()
		}
		if s.lin != nil {
			s.lin.stop()
		}
		if s.probe != nil {
			s.probe.stop()
		}
		if s.stalls != nil {
			s.stalls.Stop()
		}
	})
}

// steady waits at least phaseTime and until the system makes progress
// where it can: every election has a leader on a running replica, and
// every renew writer and linearizability client on a running replica got
// answers (at least 10 and 5 since the call).
func (s *system) steady(t *testing.T, phase string) {
	t.Helper()
	start := time.Now()
	renew0, lin0 := s.renew.progress(), s.lin.progress()
	waitUntil(t, phaseTimeout, phase+": progress on every running replica", func() bool {
		if time.Since(start) < phaseTime {
			return false
		}
		for _, e := range s.elections {
			if r, ok := e.leaderReplica(); !ok || s.down[r] {
				return false
			}
		}
		for i, n := range s.renew.progress() {
			if !s.down[s.renew.workers[i].replica] && n-renew0[i] < 10 {
				return false
			}
		}
		for i, n := range s.lin.progress() {
			if !s.down[s.lin.clients[i].replica] && n-lin0[i] < 5 {
				return false
			}
		}
		return true
	})
	t.Logf("%s: steady after %v", phase, time.Since(start).Round(time.Millisecond))
}

// leaderHeavyReplica returns the replica whose candidates lead the most
// elections.
func (s *system) leaderHeavyReplica() int {
	count := make([]int, len(s.d.replicas))
	for _, e := range s.elections {
		if r, ok := e.leaderReplica(); ok {
			count[r]++
		}
	}
	best := 0
	for r, n := range count {
		if n > count[best] {
			best = r
		}
	}
	return best
}

func (s *system) killReplica(t *testing.T, r int) {
	t.Helper()
	s.d.replicas[r].Kill(t)
	s.down[r] = true
	s.informers[r].stop()
	t.Logf("killed replica %s", s.d.replicas[r].Name())
}

func (s *system) restartReplica(t *testing.T, r int) {
	t.Helper()
	s.d.replicas[r].Restart(t)
	delete(s.down, r)
	s.informers[r] = startInformer(t, s.d.replicas[r].Name(), s.d.clientFor(t, r))
	t.Logf("restarted replica %s", s.d.replicas[r].Name())
}

// stopAndCheck stops the load and runs every check against etcd's
// history and the replicas.
func (s *system) stopAndCheck(t *testing.T) {
	t.Helper()
	s.stopLoad()
	t.Logf("load ran %v", time.Since(s.start).Round(time.Millisecond))
	cl := s.d.etcd.Client(t)
	step := time.Now()
	took := func(what string) {
		t.Logf("check %s: %v", what, time.Since(step).Round(time.Millisecond))
		step = time.Now()
	}

	// Never two leaders; failovers within bounds.
	elections := byName(leaseHistory(t, cl, electionNamespace))
	failovers := 0
	for _, e := range s.elections {
		failovers += e.check(t, elections[e.name])
	}
	t.Logf("elections: %d failovers; the test process stalled for up to %v", failovers, s.stalls.Longest().Round(time.Millisecond))
	took("elections")

	// No acknowledged write lost; every replica reads what etcd holds.
	hist := leaseHistory(t, cl, renewNamespace)
	acked, unacked := s.renew.check(t, hist)
	t.Logf("renew load: %d acknowledged writes checked against etcd's history; %d leases ended on an unacknowledged write; longest time without an acknowledged write: %v (etcd itself: %v)",
		acked, unacked, s.renew.longestGap().Round(time.Millisecond), s.probe.longestGap().Round(time.Millisecond))
	checkReadsAgree(t, s.d, renewNamespace, hist)
	checkReadsAgree(t, s.d, linNamespace, leaseHistory(t, cl, linNamespace))
	took("acknowledged writes")

	// Linearizable.
	s.lin.check(t)
	took("linearizability")

	// Informers in sync.
	for _, inf := range append(s.informers, s.lbInformer) {
		inf.checkInSync(t)
		inf.stop()
	}
	took("informers")
}

// TestEtcdFollowerLoss kills an etcd member that does not lead, and
// restarts it, under load.
func TestEtcdFollowerLoss(t *testing.T) {
	d := deploy(t, 3, startInProcess)
	s := startSystem(t, d)
	s.steady(t, "start")
	m := d.etcdFollower(t)
	m.Kill()
	t.Logf("killed etcd follower %s", m.Name)
	s.steady(t, "etcd follower down")
	restartEtcd(t, m)
	t.Logf("restarted etcd member %s", m.Name)
	s.steady(t, "etcd follower back")
	s.stopAndCheck(t)
}

// TestEtcdLeaderLoss kills the etcd leader, and restarts it, under load.
func TestEtcdLeaderLoss(t *testing.T) {
	d := deploy(t, 3, startInProcess)
	s := startSystem(t, d)
	s.steady(t, "start")
	m := d.etcdLeader(t)
	m.Kill()
	t.Logf("killed etcd leader %s; %s leads now", m.Name, d.etcdLeader(t).Name)
	s.steady(t, "etcd leader down")
	restartEtcd(t, m)
	t.Logf("restarted etcd member %s", m.Name)
	s.steady(t, "etcd member back")
	s.stopAndCheck(t)
}

// TestReplicaLoss kills the in-process replica whose candidates lead the
// most elections, so that they fail over to the others, and restarts it.
func TestReplicaLoss(t *testing.T) {
	d := deploy(t, 3, startInProcess)
	s := startSystem(t, d)
	s.steady(t, "start")
	r := s.leaderHeavyReplica()
	s.killReplica(t, r)
	s.steady(t, "replica down")
	s.restartReplica(t, r)
	s.steady(t, "replica back")
	s.stopAndCheck(t)
}

// TestProcessesUnderFaults runs three real leasehold processes and, in
// turn, kills the etcd leader, then SIGKILLs the replica whose candidates
// lead the most elections, restarting each.
func TestProcessesUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	d := deploy(t, 3, startProcess)
	s := startSystem(t, d)
	s.steady(t, "start")
	m := d.etcdLeader(t)
	m.Kill()
	t.Logf("killed etcd leader %s; %s leads now", m.Name, d.etcdLeader(t).Name)
	s.steady(t, "etcd leader down")
	restartEtcd(t, m)
	s.steady(t, "etcd member back")
	r := s.leaderHeavyReplica()
	s.killReplica(t, r)
	s.steady(t, "replica SIGKILLed")
	s.restartReplica(t, r)
	s.steady(t, "replica back")
	s.stopAndCheck(t)
}

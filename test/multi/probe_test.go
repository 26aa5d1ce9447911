package multi

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"
)

// etcdProbe writes a key of its own to etcd directly every probePeriod,
// each write with a short deadline, to measure etcd's own write outages
// next to the replicas'.
type etcdProbe struct {
	cancel context.CancelFunc
	done   chan struct{}
	acks   []time.Time // written by the probe goroutine until done
}

const probePeriod = 20 * time.Millisecond

func startEtcdProbe(t testing.TB, d *deployment) *etcdProbe {
	cl := d.etcd.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	p := &etcdProbe{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(probePeriod)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := cl.Put(rctx, "/probe", strconv.Itoa(i))
			cancel()
			if err == nil {
				p.acks = append(p.acks, time.Now())
			}
		}
	}()
	t.Cleanup(p.stop)
	return p
}

// stop stops the probe and waits for it; safe to call twice.
func (p *etcdProbe) stop() {
	p.cancel()
	<-p.done
}

// longestGap is the longest time between two acknowledged probe writes
// (after stop).
func (p *etcdProbe) longestGap() time.Duration {
	return longestGap(p.acks)
}

// longestGap is the longest time between consecutive times.
func longestGap(at []time.Time) time.Duration {
	at = slices.Clone(at)
	slices.SortFunc(at, time.Time.Compare)
	var gap time.Duration
	for i := 1; i < len(at); i++ {
		gap = max(gap, at[i].Sub(at[i-1]))
	}
	return gap
}

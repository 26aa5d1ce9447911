package election

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.MicroTime { return &metav1.MicroTime{Time: t0.Add(d)} }

// cand is a candidate for lease "lead" with the given versions, renewed
// renew before t0 (nil: never); ping, when set, is its pingTime.
type cand struct {
	name, emulation, binary string
	renew                   *time.Duration
	ping                    *time.Duration
	created                 time.Duration
	strategy                coordinationv1.CoordinatedLeaseStrategy
}

func ago(d time.Duration) *time.Duration { d = -d; return &d }

func (c cand) object() *coordinationv1beta1.LeaseCandidate {
	o := &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: c.name, ResourceVersion: "1", CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour + c.created))},
		Spec: coordinationv1beta1.LeaseCandidateSpec{
			LeaseName: "lead", BinaryVersion: c.binary, EmulationVersion: c.emulation, Strategy: c.strategy,
		},
	}
	if o.Spec.Strategy == "" {
		o.Spec.Strategy = coordinationv1.OldestEmulationVersion
	}
	if c.renew != nil {
		o.Spec.RenewTime = at(*c.renew)
	}
	if c.ping != nil {
		o.Spec.PingTime = at(*c.ping)
	}
	return o
}

// held is a Lease held by holder, renewed renew ago for 15 s.
func held(holder string, renew time.Duration) *coordinationv1.Lease {
	s := coordinationv1.OldestEmulationVersion
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lead", ResourceVersion: "9"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: &holder, LeaseDurationSeconds: ptr(int32(15)), RenewTime: at(-renew),
			LeaseTransitions: ptr(int32(4)), Strategy: &s, AcquireTime: at(-time.Hour),
		},
	}
}

func withPref(l *coordinationv1.Lease, pref string) *coordinationv1.Lease {
	l.Spec.PreferredHolder = &pref
	return l
}

// outcome is a plan as the tests compare it.
type outcome struct {
	Ping   []string
	Create string // holder of a created Lease ("-" for none)
	// Update: holder/preferredHolder/transitions/duration of an updated Lease.
	Update string
	Next   time.Duration // after t0; -1 for none
	Err    string
}

func summarize(p plan) outcome {
	o := outcome{Next: -1}
	for _, c := range p.ping {
		o.Ping = append(o.Ping, c.Name)
	}
	show := func(l *coordinationv1.Lease) string {
		str := func(s *string) string {
			if s == nil {
				return "nil"
			}
			return *s
		}
		var parts []string
		parts = append(parts, "holder="+str(l.Spec.HolderIdentity), "pref="+str(l.Spec.PreferredHolder))
		if l.Spec.LeaseTransitions != nil {
			parts = append(parts, "transitions="+strconv.Itoa(int(*l.Spec.LeaseTransitions)))
		}
		if l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil {
			parts = append(parts, "until="+expiry(l).Sub(t0).String())
		}
		if l.Spec.Strategy != nil {
			parts = append(parts, "strategy="+string(*l.Spec.Strategy))
		}
		return strings.Join(parts, " ")
	}
	if p.create != nil {
		o.Create = show(p.create)
	}
	if p.update != nil {
		o.Update = show(p.update)
	}
	if !p.next.IsZero() {
		o.Next = p.next.Sub(t0)
	}
	if p.err != nil {
		o.Err = p.err.Error()
	}
	return o
}

func TestDecide(t *testing.T) {
	fresh := ago(time.Second)
	stale := ago(time.Minute)
	const oev = "strategy=OldestEmulationVersion"
	cases := []struct {
		name  string
		lease *coordinationv1.Lease
		cands []cand
		want  outcome
	}{
		{name: "no candidates", lease: held("x", time.Second), want: outcome{Next: -1}},
		{
			name:  "candidates renewed 30 minutes ago or never take no part",
			cands: []cand{{name: "a", emulation: "1.30.0", binary: "1.30.0", renew: ago(31 * time.Minute)}, {name: "b", emulation: "1.30.0", binary: "1.30.0"}},
			want:  outcome{Next: -1},
		},
		{
			name: "missing lease, live candidates: the lowest emulation version wins",
			cands: []cand{
				{name: "a", emulation: "1.36.0", binary: "1.36.0", renew: fresh},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
				{name: "c", emulation: "1.35.0", binary: "1.35.0", renew: fresh},
			},
			want: outcome{Create: "holder=c pref=nil transitions=0 until=5s " + oev, Next: 5 * time.Second},
		},
		{
			name: "same versions: the oldest wins, then the first name",
			cands: []cand{
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
				{name: "a", emulation: "1.35.0", binary: "1.36.0", renew: fresh, created: time.Second},
				{name: "z", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
			},
			want: outcome{Create: "holder=b pref=nil transitions=0 until=5s " + oev, Next: 5 * time.Second},
		},
		{
			name: "missing lease, nobody renewed lately: ping them all",
			cands: []cand{
				{name: "a", emulation: "1.36.0", binary: "1.36.0", renew: stale},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: stale},
			},
			want: outcome{Ping: []string{"a", "b"}, Next: PingTimeout},
		},
		{
			name: "the best is live: elect without asking the others",
			cands: []cand{
				{name: "a", emulation: "1.36.0", binary: "1.36.0", renew: stale},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
			},
			want: outcome{Create: "holder=b pref=nil transitions=0 until=5s " + oev, Next: 5 * time.Second},
		},
		{
			name: "only better candidates than the best live one are asked",
			cands: []cand{
				{name: "a", emulation: "1.34.0", binary: "1.36.0", renew: stale},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
				{name: "c", emulation: "1.36.0", binary: "1.36.0", renew: stale},
			},
			want: outcome{Ping: []string{"a"}, Next: PingTimeout},
		},
		{
			name: "a better candidate pinged: wait for its answer",
			cands: []cand{
				{name: "a", emulation: "1.34.0", binary: "1.36.0", renew: stale, ping: ago(2 * time.Second)},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
			},
			want: outcome{Next: 3 * time.Second},
		},
		{
			name: "a better candidate that did not answer is dead: the live one wins",
			cands: []cand{
				{name: "a", emulation: "1.34.0", binary: "1.36.0", renew: stale, ping: ago(6 * time.Second)},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
			},
			want: outcome{Create: "holder=b pref=nil transitions=0 until=5s " + oev, Next: 5 * time.Second},
		},
		{
			name: "an answer counts for twice the ping timeout",
			cands: []cand{
				{name: "a", emulation: "1.34.0", binary: "1.36.0", renew: ago(8 * time.Second), ping: ago(9 * time.Second)},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
			},
			want: outcome{Create: "holder=a pref=nil transitions=0 until=5s " + oev, Next: 5 * time.Second},
		},
		{
			name: "an older answer does not: ask again",
			cands: []cand{
				{name: "a", emulation: "1.34.0", binary: "1.36.0", renew: ago(10 * time.Second), ping: ago(11 * time.Second)},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
			},
			want: outcome{Ping: []string{"a"}, Next: PingTimeout},
		},
		{
			name: "dead candidates are not pinged again; with none live, nothing to do",
			cands: []cand{
				{name: "a", emulation: "1.34.0", binary: "1.36.0", renew: stale, ping: ago(6 * time.Second)},
			},
			want: outcome{Next: -1},
		},
		{
			name:  "held by the best: nothing to do until it expires",
			lease: held("b", 2*time.Second),
			cands: []cand{
				{name: "a", emulation: "1.36.0", binary: "1.36.0", renew: stale},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: stale},
			},
			want: outcome{Next: 13 * time.Second},
		},
		{
			name:  "held by a worse candidate: the better live one becomes preferredHolder",
			lease: held("a", 2*time.Second),
			cands: []cand{
				{name: "a", emulation: "1.36.0", binary: "1.36.0", renew: stale},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
			},
			want: outcome{Update: "holder=a pref=b transitions=4 until=13s " + oev, Next: 13 * time.Second},
		},
		{
			name:  "preferredHolder already set: wait for the holder to let go",
			lease: withPref(held("a", 2*time.Second), "b"),
			cands: []cand{
				{name: "a", emulation: "1.36.0", binary: "1.36.0", renew: stale},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
			},
			want: outcome{Next: 13 * time.Second},
		},
		{
			name:  "held by a worse candidate, the better one not heard from lately: ask it first",
			lease: held("a", 2*time.Second),
			cands: []cand{
				{name: "a", emulation: "1.36.0", binary: "1.36.0", renew: stale},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: stale},
			},
			want: outcome{Ping: []string{"a", "b"}, Next: PingTimeout},
		},
		{
			name:  "the preferred holder's candidate is gone: cleared, the holder keeps the lease",
			lease: withPref(held("a", 2*time.Second), "d"),
			cands: []cand{
				{name: "a", emulation: "1.35.0", binary: "1.36.0", renew: stale},
				{name: "c", emulation: "1.36.0", binary: "1.36.0", renew: stale},
			},
			want: outcome{Update: "holder=a pref=nil transitions=4 until=13s " + oev, Next: 13 * time.Second},
		},
		{
			name:  "the preferred holder is dead: cleared",
			lease: withPref(held("a", 2*time.Second), "d"),
			cands: []cand{
				{name: "a", emulation: "1.35.0", binary: "1.36.0", renew: stale},
				{name: "d", emulation: "1.34.0", binary: "1.36.0", renew: stale, ping: ago(6 * time.Second)},
			},
			want: outcome{Update: "holder=a pref=nil transitions=4 until=13s " + oev, Next: 13 * time.Second},
		},
		{
			name:  "expired, and the expired holder is still the best live candidate: handed to it again",
			lease: withPref(held("a", 20*time.Second), "d"),
			cands: []cand{
				{name: "a", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
				{name: "c", emulation: "1.36.0", binary: "1.36.0", renew: fresh},
			},
			want: outcome{Update: "holder=a pref=nil transitions=4 until=5s " + oev, Next: 5 * time.Second},
		},
		{
			name:  "expired: what candidates showed before the term ended does not count",
			lease: withPref(held("a", 16*time.Second), "p"),
			cands: []cand{
				{name: "a", emulation: "1.35.0", binary: "1.36.0", renew: stale},
				{name: "p", emulation: "1.34.0", binary: "1.36.0", renew: ago(2 * time.Second)},
			},
			want: outcome{Ping: []string{"a", "p"}, Next: PingTimeout},
		},
		{
			name:  "expired, the holder dead: the next best, counted as a transition",
			lease: held("a", 20*time.Second),
			cands: []cand{
				{name: "a", emulation: "1.35.0", binary: "1.36.0", renew: stale, ping: ago(5 * time.Second)},
				{name: "c", emulation: "1.36.0", binary: "1.36.0", renew: ago(4 * time.Second), ping: ago(5 * time.Second)},
			},
			want: outcome{Update: "holder=c pref=nil transitions=5 until=5s " + oev, Next: 5 * time.Second},
		},
		{
			name: "released (client-go writes holder \"\", 1 s, no strategy): elected, strategy set",
			lease: func() *coordinationv1.Lease {
				l := held("", time.Second)
				l.Spec.Strategy, l.Spec.LeaseDurationSeconds, l.Spec.LeaseTransitions = nil, ptr(int32(1)), nil
				return l
			}(),
			cands: []cand{{name: "a", emulation: "1.35.0", binary: "1.36.0", renew: ago(500 * time.Millisecond)}},
			want:  outcome{Update: "holder=a pref=nil transitions=0 until=5s " + oev, Next: 5 * time.Second},
		},
		{
			name: "released: what candidates showed before does not count",
			lease: func() *coordinationv1.Lease {
				l := held("", time.Second)
				l.Spec.LeaseDurationSeconds = ptr(int32(1))
				return l
			}(),
			cands: []cand{
				{name: "a", emulation: "1.35.0", binary: "1.36.0", renew: ago(2 * time.Second), ping: ago(3 * time.Second)},
				{name: "b", emulation: "1.36.0", binary: "1.36.0", renew: ago(500 * time.Millisecond)},
			},
			want: outcome{Ping: []string{"a"}, Next: PingTimeout},
		},
		{
			name: "the newest binaries decide the strategy, and must agree",
			cands: []cand{
				{name: "a", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: fresh, strategy: "example.com/Other"},
				{name: "c", emulation: "1.34.0", binary: "1.35.0", renew: fresh},
			},
			want: outcome{Next: -1, Err: `candidates "a" and "b", both at binary version 1.36.0, want different strategies "OldestEmulationVersion" and "example.com/Other"`},
		},
		{
			name: "older binaries may disagree",
			cands: []cand{
				{name: "a", emulation: "1.35.0", binary: "1.35.0", renew: fresh},
				{name: "b", emulation: "1.35.0", binary: "1.35.0", renew: fresh, strategy: "example.com/Other"},
				{name: "c", emulation: "1.35.0", binary: "1.36.0", renew: fresh},
			},
			want: outcome{Create: "holder=a pref=nil transitions=0 until=5s " + oev, Next: 5 * time.Second},
		},
		{
			name: "a third party's strategy: the lease is created without holder, no pings",
			cands: []cand{
				{name: "a", emulation: "1.35.0", binary: "1.36.0", renew: stale, strategy: "example.com/Other"},
			},
			// The next look: when the candidate is due a refresh ping.
			want: outcome{Create: "holder=nil pref=nil until=5s strategy=example.com/Other", Next: 14 * time.Minute},
		},
		{
			name:  "a third party's strategy on a held lease: left alone until it expires",
			lease: held("x", time.Second),
			cands: []cand{{name: "a", emulation: "1.35.0", binary: "1.36.0", renew: fresh, strategy: "example.com/Other"}},
			want:  outcome{Next: 14 * time.Second},
		},
		{
			name:  "a third party's strategy on an expired lease: strategy set, holder kept",
			lease: withPref(held("x", time.Minute), "y"),
			cands: []cand{{name: "a", emulation: "1.35.0", binary: "1.36.0", renew: fresh, strategy: "example.com/Other"}},
			want:  outcome{Update: "holder=x pref=y transitions=4 until=-45s strategy=example.com/Other", Next: 15*time.Minute - time.Second},
		},
		{
			name:  "candidates quiet for 15 minutes are pinged, to keep them",
			lease: held("b", time.Second),
			cands: []cand{
				{name: "a", emulation: "1.36.0", binary: "1.36.0", renew: ago(16 * time.Minute)},
				{name: "b", emulation: "1.35.0", binary: "1.36.0", renew: ago(10 * time.Minute)},
			},
			want: outcome{Ping: []string{"a"}, Next: 14 * time.Second},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []*coordinationv1beta1.LeaseCandidate
			for _, c := range tc.cands {
				objs = append(objs, c.object())
			}
			var before *coordinationv1.Lease
			if tc.lease != nil {
				before = tc.lease.DeepCopy()
			}
			got := summarize(decide(t0, "ns", "lead", tc.lease, objs))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.lease); diff != "" {
				t.Errorf("decide modified the lease:\n%s", diff)
			}
		})
	}
}

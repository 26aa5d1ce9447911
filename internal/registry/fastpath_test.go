package registry

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/builtin"
)

// fastPathEnv is the field managers of the built-in kinds, without a
// store: the two paths are compared on objects alone.
type fastPathEnv struct {
	reg            *Registry
	tc             managedfields.TypeConverter
	leases, endpts resources.Resource
}

func newFastPathEnv(tb testing.TB) *fastPathEnv {
	tb.Helper()
	kinds := builtin.Kinds(builtin.Options{CoordinatedLeaderElection: true})
	reg, err := New(Config{Kinds: kinds})
	if err != nil {
		tb.Fatal(err)
	}
	e := &fastPathEnv{reg: reg, tc: reg.typeConverter}
	e.leases, _ = reg.ResourceFor(schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"})
	e.endpts, _ = reg.ResourceFor(schema.GroupKind{Kind: "Endpoints"})
	return e
}

// slow runs the field manager itself.
func (e *fastPathEnv) slow(res resources.Resource, live, obj resources.Object, manager string) resources.Object {
	return e.reg.fieldManager(res, "").UpdateNoErrors(live.DeepCopyObject(), obj.DeepCopyObject(), manager).(resources.Object)
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// randLease returns a lease with a random selection of fields.
func randLease(r *rand.Rand) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns"}}
	maybe := func() bool { return r.IntN(3) > 0 }
	if maybe() {
		l.Spec.HolderIdentity = ptr(pick(r, "", "a", "b"))
	}
	if maybe() {
		l.Spec.LeaseDurationSeconds = ptr(int32(r.IntN(3) * 15))
	}
	if maybe() {
		t := metav1.NewMicroTime(time.Unix(int64(r.IntN(1000)), 0))
		l.Spec.RenewTime = &t
	}
	if maybe() {
		t := metav1.NewMicroTime(time.Unix(int64(r.IntN(1000)), 0))
		l.Spec.AcquireTime = &t
	}
	if maybe() {
		l.Spec.LeaseTransitions = ptr(int32(r.IntN(3)))
	}
	if r.IntN(4) == 0 {
		l.Spec.Strategy = ptr(coordinationv1.OldestEmulationVersion)
	}
	if r.IntN(3) == 0 {
		l.Labels = map[string]string{"app": pick(r, "x", "y")}
	}
	if r.IntN(3) == 0 {
		l.GenerateName = "g-"
	}
	if r.IntN(5) == 0 {
		l.Annotations = map[string]string{"note": pick(r, "1", "2")}
	}
	if r.IntN(8) == 0 {
		l.Finalizers = []string{"example.com/f", "example.com/g"}
	}
	if r.IntN(8) == 0 {
		l.OwnerReferences = []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u1"},
			{APIVersion: "v1", Kind: "Node", Name: "n2", UID: "u2"},
		}
	}
	return l
}

// mutateLease changes l as a client might: mostly values (a renewal, a
// takeover), sometimes presence, metadata or untracked fields.
func mutateLease(r *rand.Rand, l *coordinationv1.Lease) {
	for range 1 + r.IntN(3) {
		switch r.IntN(20) {
		case 0, 1, 2:
			t := metav1.NewMicroTime(time.Unix(int64(1000+r.IntN(1000)), 0))
			if l.Spec.RenewTime != nil || r.IntN(4) == 0 {
				l.Spec.RenewTime = &t
			}
		case 3:
			if l.Spec.HolderIdentity != nil || r.IntN(4) == 0 {
				l.Spec.HolderIdentity = ptr(pick(r, "", "a", "b", "c"))
			}
		case 4:
			l.Spec.HolderIdentity = nil
		case 5:
			l.Spec.LeaseTransitions = ptr(int32(r.IntN(5)))
		case 6:
			if l.Labels != nil {
				l.Labels = map[string]string{"app": pick(r, "x", "y", "z")}
			}
		case 7:
			l.Labels = map[string]string{"other": "1"}
		case 8:
			l.Annotations = nil
		case 9:
			l.Generation = int64(r.IntN(3))
			l.ResourceVersion = fmt.Sprint(r.IntN(100))
		case 10:
			l.Finalizers = append(l.Finalizers, "example.com/g")
		case 11:
			l.Spec.PreferredHolder = ptr("p")
			l.Spec.Strategy = ptr(coordinationv1.OldestEmulationVersion)
		case 12:
			// Less than a MicroTime's precision, or just that.
			if l.Spec.RenewTime != nil {
				t := metav1.NewMicroTime(l.Spec.RenewTime.Add(time.Duration(pick(r, 1, 999, 1000))))
				l.Spec.RenewTime = &t
			}
		case 13:
			slices.Reverse(l.Finalizers)
		case 14:
			slices.Reverse(l.OwnerReferences)
		case 15:
			if l.Annotations == nil {
				l.Annotations = map[string]string{}
			} else if len(l.Annotations) == 0 {
				l.Annotations = nil
			}
		case 16:
			for k := range l.Labels {
				l.Labels[k] = pick(r, "", "x")
			}
		case 17:
			for k := range l.Labels {
				delete(l.Labels, k)
			}
		case 18:
			if l.Spec.AcquireTime != nil {
				l.Spec.AcquireTime = &metav1.MicroTime{}
			}
		case 19:
			l.GenerateName = pick(r, "", "g-", "h-")
		}
	}
}

func randEndpoints(r *rand.Rand) *corev1.Endpoints {
	e := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}}
	if r.IntN(3) > 0 {
		e.Subsets = []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: pick(r, "10.0.0.1", "10.0.0.2")}}}}
	}
	if r.IntN(2) == 0 {
		e.Labels = map[string]string{"svc": "a"}
	}
	return e
}

func mutateEndpoints(r *rand.Rand, e *corev1.Endpoints) {
	switch r.IntN(8) {
	case 0:
		e.Subsets = []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: pick(r, "10.0.0.1", "10.0.0.3")}}}}
	case 1:
		e.Subsets = nil
	case 2:
		if e.Labels != nil {
			e.Labels = map[string]string{"svc": pick(r, "a", "b")}
		}
	case 3:
		e.Annotations = map[string]string{"x": "y"}
	case 4:
		for i := range e.Subsets {
			slices.Reverse(e.Subsets[i].Addresses)
			e.Subsets[i].Addresses = append(e.Subsets[i].Addresses, corev1.EndpointAddress{IP: "10.0.0.9"})
			slices.Reverse(e.Subsets[i].Addresses)
		}
	case 5: // empty, not nil: the same on the wire
		for i := range e.Subsets {
			e.Subsets[i].NotReadyAddresses = pick(r, []corev1.EndpointAddress{}, nil)
		}
	case 6:
		for i := range e.Subsets {
			e.Subsets[i].Ports = pick(r, []corev1.EndpointPort{{Port: 80}}, []corev1.EndpointPort{{Port: 81, Name: "http"}}, nil)
		}
	case 7:
		if len(e.Subsets) > 0 {
			e.Subsets = append(e.Subsets, corev1.EndpointSubset{NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.1.1"}}})
		} else {
			e.Subsets = []corev1.EndpointSubset{}
		}
	}
}

// trial builds a stored object with a history of writes and an update of
// it, runs both paths, and fails if the fast path, where it applies,
// gives another result. It reports whether the fast path applied.
func (e *fastPathEnv) trial(t testing.TB, r *rand.Rand) bool {
	t.Helper()
	var res resources.Resource
	var first, next resources.Object
	var mutate func(resources.Object)
	if r.IntN(4) == 0 {
		res = e.endpts
		first = randEndpoints(r)
		mutate = func(o resources.Object) { mutateEndpoints(r, o.(*corev1.Endpoints)) }
	} else {
		res = e.leases
		first = randLease(r)
		mutate = func(o resources.Object) { mutateLease(r, o.(*coordinationv1.Lease)) }
	}
	const m = "holder"
	// A history: created by m (mostly) or another manager, then updates.
	live := e.slow(res, res.New(), first, pick(r, m, m, m, "creator"))
	for range r.IntN(3) {
		next = live.DeepCopyObject().(resources.Object)
		mutate(next)
		live = e.slow(res, live, next, pick(r, m, m, m, "other"))
	}
	obj := live.DeepCopyObject().(resources.Object)
	mutate(obj)
	switch r.IntN(8) {
	case 0, 1, 2, 3:
		obj.SetManagedFields(nil) // as clients that do not echo them
	case 4:
		obj.SetManagedFields([]metav1.ManagedFieldsEntry{}) // a reset
	}
	if !ownsAll(e.tc, res.GroupVersionKind(), live) {
		return false // the registry would not try the fast path
	}
	now := time.Now()
	fast, ok := e.reg.compare.fastUpdate(live, obj.DeepCopyObject().(resources.Object), m, res.APIVersion(), now)
	if !ok {
		return false
	}
	before := time.Now()
	slow := e.slow(res, live, obj, m)
	after := time.Now()
	got, want := fast.GetManagedFields(), slow.GetManagedFields()
	if len(want) == 1 && len(got) == 1 && want[0].Time != nil && got[0].Time != nil {
		liveTime := live.GetManagedFields()[0].Time
		switch {
		case want[0].Time.Equal(liveTime):
			if !got[0].Time.Equal(liveTime) {
				t.Fatalf("the slow path kept the time, the fast path moved it\nlive %+v\nobj  %+v", live, obj)
			}
		case want[0].Time.Time.Before(before.Add(-time.Second)) || want[0].Time.Time.After(after.Add(time.Second)) || !got[0].Time.Time.Equal(now.UTC()):
			t.Fatalf("times: slow %v, fast %v\nlive %+v\nobj  %+v", want[0].Time, got[0].Time, live, obj)
		}
		got[0].Time, want[0].Time = nil, nil
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("fast and slow paths differ (-slow +fast):\n%s\nlive %+v\nobj  %+v", diff, live, obj)
	}
	// And the fast path's result keeps its precondition.
	if !ownsAll(e.tc, res.GroupVersionKind(), fast) {
		t.Fatalf("the fast path's result does not own all its fields: %+v", fast)
	}
	return true
}

// TestManagedFieldsFastPath: on many generated histories and updates, the
// fast path, where it applies, gives the field manager's own result; and
// it applies to the renewals it is for.
func TestManagedFieldsFastPath(t *testing.T) {
	e := newFastPathEnv(t)
	r := rand.New(rand.NewPCG(1, 2))
	const trials = 3000
	hits := 0
	for range trials {
		if e.trial(t, r) {
			hits++
		}
	}
	if hits < trials/10 {
		t.Fatalf("the fast path applied %d times in %d trials", hits, trials)
	}
	t.Logf("fast path in %d of %d trials", hits, trials)

	// A renewal: created by the holder, renewed with the managedFields it
	// read, or without them.
	h := "node-1"
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &h, RenewTime: &metav1.MicroTime{Time: time.Unix(1, 0)}}}
	live := e.slow(e.leases, e.leases.New(), l, "kubelet")
	for _, echo := range []bool{true, false} {
		renew := live.DeepCopyObject().(*coordinationv1.Lease)
		renew.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(2, 0)}
		if !echo {
			renew.ManagedFields = nil
		}
		if _, ok := e.reg.compare.fastUpdate(live, renew, "kubelet", "coordination.k8s.io/v1", time.Now()); !ok {
			t.Errorf("a renewal (managedFields echoed: %t) missed the fast path", echo)
		}
	}

	// An endpoints controller's update: other addresses, its subsets an
	// atomic list.
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []corev1.EndpointPort{{Port: 80}},
	}}}
	liveEp := e.slow(e.endpts, e.endpts.New(), ep, "endpoint-controller")
	next := liveEp.DeepCopyObject().(*corev1.Endpoints)
	next.Subsets[0].Addresses = append(next.Subsets[0].Addresses, corev1.EndpointAddress{IP: "10.0.0.2"})
	if _, ok := e.reg.compare.fastUpdate(liveEp, next, "endpoint-controller", "v1", time.Now()); !ok {
		t.Errorf("an endpoints update of its addresses missed the fast path")
	}
}

func FuzzManagedFieldsFastPath(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3, 42} {
		f.Add(binary.LittleEndian.AppendUint64(nil, seed))
	}
	e := newFastPathEnv(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var seed [16]byte
		copy(seed[:], data)
		r := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
		for range 4 {
			e.trial(t, r)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// TestFastPathOwners: the registry remembers the objects the fast path may
// take, through a lease's life: created and renewed by its holder, written
// by another manager, then by its holder again, deleted.
func TestFastPathOwners(t *testing.T) {
	reg, _ := newTestRegistry(t)
	ctx := t.Context()
	leases := resourceOf(t, reg, schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"})
	owners := &reg.state[leases.Kind].owners
	key := reg.key(leases.Kind, "default", "l")
	sole := func(step string, obj resources.Object, want bool) {
		t.Helper()
		rv, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := owners.at(key) == rv; got != want {
			t.Errorf("after %s: sole owner recorded %t, want %t (managedFields %+v)", step, got, want, obj.GetManagedFields())
		}
	}
	write := func(step string, l *coordinationv1.Lease, manager string, want bool) *coordinationv1.Lease {
		t.Helper()
		out, err := reg.Update(ctx, leases, "default", "l", "", l, WriteOptions{Manager: manager})
		if err != nil {
			t.Fatal(err)
		}
		sole(step, out.Object, want)
		return out.Object.(*coordinationv1.Lease)
	}
	renew := func(l *coordinationv1.Lease, at int64) *coordinationv1.Lease {
		l = l.DeepCopy()
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(at, 0)}
		return l
	}

	holder := "a"
	created, err := reg.Create(ctx, leases, "default", &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "l"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &metav1.MicroTime{Time: time.Unix(1, 0)}},
	}, WriteOptions{Manager: "elector"})
	if err != nil {
		t.Fatal(err)
	}
	sole("create", created.Object, true)
	l := created.Object.(*coordinationv1.Lease)
	l = write("a renewal", renew(l, 2), "elector", true)
	l.ManagedFields = nil
	l = write("a renewal without managedFields", renew(l, 3), "elector", true)

	labelled := l.DeepCopy()
	labelled.Labels = map[string]string{"team": "x"}
	l = write("a label by another manager", labelled, "kubectl", false)
	l = write("a renewal of a lease with two managers", renew(l, 4), "elector", false)

	// The other manager removes its label, and its entry goes: the next
	// renewal is checked with the type converter and found sole.
	unlabelled := l.DeepCopy()
	unlabelled.Labels = nil
	l = write("the label removed by its manager", unlabelled, "kubectl", false)
	if len(l.ManagedFields) != 1 {
		t.Fatalf("managedFields %+v, want the elector's alone", l.ManagedFields)
	}
	l = write("a renewal after", renew(l, 5), "elector", true)
	l = write("another renewal", renew(l, 6), "elector", true)

	// A reset leaves no managedFields to fast-path.
	l.ManagedFields = []metav1.ManagedFieldsEntry{{}}
	write("a reset", renew(l, 7), "elector", false)

	if _, err := reg.Delete(ctx, leases, "default", "l", &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if owners.at(key) != 0 {
		t.Errorf("a deleted lease is still recorded")
	}
}

// TestCompareMicroTime: compareLeaf's shortcut for MicroTimes agrees with
// their JSON form, the field manager's view of them.
func TestCompareMicroTime(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	base := []time.Time{{}, time.Unix(0, 0), time.Unix(1_700_000_000, 999_999_999), time.Date(9999, 12, 31, 23, 59, 59, 999_999_500, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)}
	for range 20000 {
		a := pick(r, base...)
		b := a.Add(time.Duration(pick(r, 0, 1, 499, 500, 999, 1000, 1001, -1, -1000, 1e9)))
		if r.IntN(10) == 0 {
			b = time.Time{}
		}
		if r.IntN(3) == 0 {
			b = b.In(time.FixedZone("x", 3600))
		}
		ma, mb := metav1.NewMicroTime(a), metav1.NewMicroTime(b)
		got := compareLeaf(reflect.ValueOf(ma), reflect.ValueOf(mb))
		ja, errA := json.Marshal(ma)
		jb, errB := json.Marshal(mb)
		var want verdict
		switch {
		case errA != nil || errB != nil:
			want = unsure
		case bytes.Equal(ja, jb):
			want = same
		case ma.IsZero() || mb.IsZero():
			want = unsure
		default:
			want = changed
		}
		if got != want {
			t.Fatalf("%v against %v (%s, %s): %d, want %d", a, b, ja, jb, got, want)
		}
	}
}

// TestSoleOwnersPrune: entries of objects gone without a delete through
// the registry (expired events) go once they outnumber the cached
// objects, also when no write follows.
func TestSoleOwnersPrune(t *testing.T) {
	live := map[string]bool{}
	s := &soleOwners{live: func(k string, _ int64) bool { return live[k] }, size: func() int { return len(live) }}
	for i := range 2000 {
		key := strconv.Itoa(i)
		live[key] = true
		s.set(key, 1, true)
	}
	if len(s.revs) != 2000 {
		t.Fatalf("%d entries recorded, want 2000", len(s.revs))
	}
	for i := range 1990 {
		delete(live, strconv.Itoa(i))
	}
	s.prune()
	if len(s.revs) != 10 {
		t.Errorf("%d entries after expiries and a prune, want 10", len(s.revs))
	}
}

// BenchmarkTracked is comparer.tracked on a renewal: a labelled Lease
// against itself with renewTime moved.
func BenchmarkTracked(b *testing.B) {
	holder, d := "node-1", int32(15)
	old := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "default", Labels: map[string]string{"app": "x", "tier": "control"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d,
			AcquireTime: &metav1.MicroTime{Time: time.Unix(1, 0)}, RenewTime: &metav1.MicroTime{Time: time.Unix(1, 0)}},
	}
	renewed := old.DeepCopy()
	renewed.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(2, 0)}
	c := &comparer{}
	b.ReportAllocs()
	for b.Loop() {
		if c.tracked(old, renewed) != changed {
			b.Fatal("not changed")
		}
	}
}

package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// errorLog is a logr sink that keeps the errors logged through it, for
// checking that client-go's event recorders met none.
type errorLog struct {
	mu     sync.Mutex
	errors []string
}

func (l *errorLog) Init(logr.RuntimeInfo)          {}
func (l *errorLog) Enabled(int) bool               { return false }
func (l *errorLog) Info(int, string, ...any)       {}
func (l *errorLog) WithValues(...any) logr.LogSink { return l }
func (l *errorLog) WithName(string) logr.LogSink   { return l }
func (l *errorLog) Error(err error, msg string, kv ...any) {
	if errors.Is(err, context.Canceled) {
		return // the test's own cancel, met by a request in flight
	}
	l.add(fmt.Sprintf("%s: %v %v", msg, err, kv))
}

func (l *errorLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errors = append(l.errors, s)
}

func (l *errorLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errors {
		t.Errorf("logged: %s", e)
	}
}

// eventsFixture starts a server with a namespace and a Lease the events
// are about.
func eventsFixture(t *testing.T, namespace string, opts ...testserver.Option) (*testserver.Server, kubernetes.Interface, *coordinationv1.Lease) {
	t.Helper()
	s := testserver.Start(t, opts...)
	c := s.Client(t)
	must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}))
	lease := must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases(namespace).Create(t.Context(),
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "subject"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("a")}}, metav1.CreateOptions{}))
	// The recorders' references need the kind.
	lease.APIVersion, lease.Kind = "coordination.k8s.io/v1", "Lease"
	return s, c, lease
}

// TestEventRecorders: client-go's two event recorders record against
// leasehold without an error, with their aggregation (core v1: count
// bumped by strategic merge patches) and series (events.k8s.io/v1), and
// what each records reads back through both versions and their field
// selectors.
func TestEventRecorders(t *testing.T) {
	t.Parallel()
	const ns = "ev-recorders"
	_, c, lease := eventsFixture(t, ns)
	log := &errorLog{}
	ctx := klog.NewContext(t.Context(), logr.New(log))

	// tools/record, core v1, as leader election and controller-runtime
	// use it. The same event three times is one event of count 3.
	core := record.NewBroadcaster(record.WithContext(ctx))
	core.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.CoreV1().Events("")})
	rec := core.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "events-test", Host: "node-1"}).WithLogger(logr.New(log))
	for range 3 {
		rec.Event(lease, corev1.EventTypeNormal, "Acquired", "a acquired the lease")
	}
	rec.Eventf(lease, corev1.EventTypeWarning, "Lost", "a lost the lease after %d s", 15)
	// Similar events (one reason, messages of their own): the first few
	// are created, then the recorder aggregates the rest into one event
	// whose count it bumps.
	for i := range 12 {
		rec.Eventf(lease, corev1.EventTypeNormal, "Scaled", "scaled to %d", i)
	}

	// tools/events, events.k8s.io/v1: the second occurrence makes a series.
	ev1 := events.NewBroadcaster(&events.EventSinkImpl{Interface: c.EventsV1()})
	ev1.StartRecordingToSinkWithContext(ctx)
	erec := ev1.NewRecorder(scheme.Scheme, "leasehold.dev/events-test").WithLogger(logr.New(log))
	erec.Eventf(lease, nil, corev1.EventTypeNormal, "Renewed", "Renew", "renewed by %s", "a")
	waitFor(t, func() bool { return len(listCore(t, c, ns, "reason=Renewed")) == 1 })
	erec.Eventf(lease, nil, corev1.EventTypeNormal, "Renewed", "Renew", "renewed by %s", "a")

	waitFor(t, func() bool {
		l := listCore(t, c, ns, "reason=Acquired")
		return len(l) == 1 && l[0].Count == 3
	})
	waitFor(t, func() bool {
		l := listCore(t, c, ns, "reason=Renewed")
		return len(l) == 1 && l[0].Series != nil && l[0].Series.Count == 2
	})
	waitFor(t, func() bool { return len(listCore(t, c, ns, "type=Warning")) == 1 })
	var scaled int // events stored for the 12 Scaled
	waitFor(t, func() bool {
		l := listCore(t, c, ns, "reason=Scaled")
		var count int32
		aggregated := false
		for _, e := range l {
			count += e.Count
			aggregated = aggregated || strings.HasPrefix(e.Message, "(combined from similar events): ") && e.Count > 1
		}
		scaled = len(l)
		return aggregated && count == 12
	})
	core.Shutdown()
	ev1.Shutdown()
	log.check(t)

	// The core event through events.k8s.io/v1.
	acquired := listCore(t, c, ns, "reason=Acquired")[0]
	asV1 := must[*eventsv1.Event](t)(c.EventsV1().Events(ns).Get(t.Context(), acquired.Name, metav1.GetOptions{}))
	if asV1.Regarding.Name != "subject" || asV1.Regarding.Kind != "Lease" || asV1.Note != "a acquired the lease" ||
		asV1.DeprecatedCount != 3 || asV1.DeprecatedSource.Component != "events-test" || asV1.DeprecatedFirstTimestamp.IsZero() ||
		asV1.ResourceVersion != acquired.ResourceVersion {
		t.Errorf("the core event at events.k8s.io/v1: %+v", asV1)
	}
	// The events.k8s.io event through core v1.
	renewed := listCore(t, c, ns, "reason=Renewed")[0]
	if renewed.InvolvedObject.Name != "subject" || renewed.Message != "renewed by a" || renewed.ReportingController != "leasehold.dev/events-test" ||
		renewed.Action != "Renew" || renewed.EventTime.IsZero() || renewed.Count != 0 {
		t.Errorf("the events.k8s.io event at v1: %+v", renewed)
	}

	// Field selectors, each version with its own labels.
	for sel, want := range map[string]int{
		"involvedObject.kind=Lease,involvedObject.name=subject,involvedObject.namespace=" + ns: 3 + scaled,
		"involvedObject.uid=" + string(lease.UID):                                              3 + scaled,
		"source=events-test":                           2 + scaled,
		"source=leasehold.dev/events-test":             1,
		"reportingComponent=leasehold.dev/events-test": 1,
		"type=Normal,reason!=Acquired":                 1 + scaled,
	} {
		if got := len(listCore(t, c, ns, sel)); got != want {
			t.Errorf("v1 events with %s: %d, want %d", sel, got, want)
		}
	}
	for sel, want := range map[string]int{
		"regarding.name=subject,regarding.kind=Lease":   3 + scaled,
		"reportingController=leasehold.dev/events-test": 1,
		"reason=Lost,type=Warning":                      1,
	} {
		l := must[*eventsv1.EventList](t)(c.EventsV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: sel}))
		if len(l.Items) != want {
			t.Errorf("events.k8s.io events with %s: %d, want %d", sel, len(l.Items), want)
		}
	}
	_, err := c.EventsV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=subject"})
	if se := wantStatus(t, err, 400, metav1.StatusReasonBadRequest); !strings.Contains(se.Error(), "field label not supported: involvedObject.name") {
		t.Errorf("events.k8s.io with core's label: %v", se)
	}
}

func listCore(t *testing.T, c kubernetes.Interface, ns, sel string) []corev1.Event {
	t.Helper()
	return must[*corev1.EventList](t)(c.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: sel})).Items
}

// TestLeaderElectionEvents: client-go's leader election with an event
// recorder reports its elections as Events about its Lease.
func TestLeaderElectionEvents(t *testing.T) {
	t.Parallel()
	const ns = "ev-election"
	_, c, _ := eventsFixture(t, ns)
	log := &errorLog{}
	// The broadcaster outlives the election, whose release is an event too.
	bctx := klog.NewContext(t.Context(), logr.New(log))
	b := record.NewBroadcaster(record.WithContext(bctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.CoreV1().Events("")})
	defer b.Shutdown()
	ctx, cancel := context.WithCancel(bctx)
	lock := &resourcelock.LeaseLock{
		LeaseMeta: metav1.ObjectMeta{Namespace: ns, Name: "elected"},
		Client:    c.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{
			Identity:      "candidate-1",
			EventRecorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "candidate-1"}).WithLogger(logr.New(log)),
		},
	}
	elected := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { close(elected) },
				OnStoppedLeading: func() {},
			},
		})
	}()
	<-elected
	waitFor(t, func() bool {
		l := listCore(t, c, ns, "involvedObject.kind=Lease,involvedObject.name=elected,reason=LeaderElection")
		return len(l) == 1 && l[0].Message == "candidate-1 became leader"
	})
	cancel()
	<-done
	waitFor(t, func() bool {
		return len(listCore(t, c, ns, "involvedObject.name=elected,reason=LeaderElection")) == 2
	})
	log.check(t)
}

// TestEventValidation: the 422s of kube-apiserver's event validation,
// which depends on the version of the request, through client-go.
func TestEventValidation(t *testing.T) {
	t.Parallel()
	const ns = "ev-validation"
	_, c, lease := eventsFixture(t, ns)
	now := metav1.NewMicroTime(time.Now())
	ref := corev1.ObjectReference{Kind: "Lease", Namespace: ns, Name: lease.Name, UID: lease.UID}
	causes := func(err error) []string {
		t.Helper()
		se := wantStatus(t, err, 422, metav1.StatusReasonInvalid)
		var out []string
		for _, c := range se.ErrStatus.Details.Causes {
			out = append(out, c.Field+": "+c.Message)
		}
		return out
	}

	// core v1: an event about an object of another namespace.
	_, err := c.CoreV1().Events(ns).Create(t.Context(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "elsewhere"},
		InvolvedObject: corev1.ObjectReference{Kind: "Lease", Namespace: "other", Name: "x"},
	}, metav1.CreateOptions{})
	if got := causes(err); !slices.Equal(got, []string{`involvedObject.namespace: Invalid value: "other": does not match event.namespace`}) {
		t.Errorf("core v1 create: %q", got)
	}
	// events.k8s.io/v1 checks more; its errors name core's fields.
	_, err = c.EventsV1().Events(ns).Create(t.Context(), &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "Strict"}, EventTime: now, Regarding: ref,
		ReportingController: "leasehold.dev/t", ReportingInstance: "t-1", Action: "Test", Reason: "Tested", Type: "Bad",
		DeprecatedCount: 2,
	}, metav1.CreateOptions{})
	want := []string{
		`metadata.name: Invalid value: "Strict": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		`type: Invalid value: "": has invalid value: Bad`,
		`count: Invalid value: "": needs to be unset`,
	}
	if got := causes(err); !slices.Equal(got, want) {
		t.Errorf("events.k8s.io/v1 create:\n got %q\nwant %q", got, want)
	}
	// An event created at v1 may change freely there, not at
	// events.k8s.io/v1.
	created := must[*eventsv1.Event](t)(c.EventsV1().Events(ns).Create(t.Context(), &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "strict"}, EventTime: now, Regarding: ref, Note: "first",
		ReportingController: "leasehold.dev/t", ReportingInstance: "t-1", Action: "Test", Reason: "Tested", Type: corev1.EventTypeNormal,
	}, metav1.CreateOptions{}))
	created.Note = "second"
	_, err = c.EventsV1().Events(ns).Update(t.Context(), created, metav1.UpdateOptions{})
	if got := causes(err); !slices.Equal(got, []string{`message: Invalid value: "second": field is immutable`}) {
		t.Errorf("events.k8s.io/v1 update: %q", got)
	}
	patch := []byte(`{"message":"second"}`)
	if _, err := c.CoreV1().Events(ns).Patch(t.Context(), "strict", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Errorf("core v1 patch of the message: %v", err)
	}
}

// TestEventApplyAcrossGroups: managedFields recorded at one group's
// version count at the other's, so server-side apply sees the conflict.
func TestEventApplyAcrossGroups(t *testing.T) {
	t.Parallel()
	const ns = "ev-apply"
	_, c, _ := eventsFixture(t, ns)
	must[*corev1.Event](t)(c.CoreV1().Events(ns).Create(t.Context(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "applied", Annotations: map[string]string{"owner": "core"}},
		InvolvedObject: corev1.ObjectReference{Kind: "Lease", Namespace: ns, Name: "subject"},
		Reason:         "Tested", Message: "m",
	}, metav1.CreateOptions{FieldManager: "core-writer"}))
	apply := []byte(`{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"applied","annotations":{"owner":"events"}}}`)
	_, err := c.EventsV1().Events(ns).Patch(t.Context(), "applied", types.ApplyPatchType, apply, metav1.PatchOptions{FieldManager: "events-applier"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `.metadata.annotations.owner`) || !strings.Contains(err.Error(), `core-writer`) {
		t.Fatalf("apply at events.k8s.io over a field core-writer set at v1: %v, want a conflict", err)
	}
	got := must[*eventsv1.Event](t)(c.EventsV1().Events(ns).Patch(t.Context(), "applied", types.ApplyPatchType, apply, metav1.PatchOptions{FieldManager: "events-applier", Force: ptr(true)}))
	var managers []string
	for _, mf := range got.ManagedFields {
		managers = append(managers, mf.Manager+"@"+mf.APIVersion)
	}
	slices.Sort(managers)
	if got.Annotations["owner"] != "events" || !slices.Equal(managers, []string{"core-writer@v1", "events-applier@events.k8s.io/v1"}) {
		t.Errorf("after a forced apply: annotations %v, managers %v", got.Annotations, managers)
	}
}

// TestEventTTL: with --event-ttl, events disappear once unwritten for
// that long, on either engine (run with LEASEHOLD_TEST_STORAGE=etcd too),
// and watchers of both versions see them deleted; other kinds stay.
func TestEventTTL(t *testing.T) {
	t.Parallel()
	const ns = "ev-ttl"
	_, c, lease := eventsFixture(t, ns, func(cfg *server.Config) { cfg.EventTTL = 2 * time.Second })
	list := must[*corev1.EventList](t)(c.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{}))
	coreWatch := must[watch.Interface](t)(c.CoreV1().Events(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.ResourceVersion}))
	defer coreWatch.Stop()
	v1Watch := must[watch.Interface](t)(c.EventsV1().Events(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.ResourceVersion}))
	defer v1Watch.Stop()

	var names []string
	for i := range 3 {
		ev := must[*corev1.Event](t)(c.CoreV1().Events(ns).Create(t.Context(), &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: "expiring-"},
			InvolvedObject: corev1.ObjectReference{Kind: "Lease", Namespace: ns, Name: lease.Name},
			Reason:         fmt.Sprint("Reason", i), Message: "m",
		}, metav1.CreateOptions{}))
		names = append(names, ev.Name)
	}
	for _, w := range []watch.Interface{coreWatch, v1Watch} {
		deleted := map[string]bool{}
		timeout := time.After(30 * time.Second)
		for len(deleted) < len(names) {
			select {
			case e, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("watch ended")
				}
				if e.Type == watch.Deleted {
					obj := e.Object.(metav1.Object)
					deleted[obj.GetName()] = true
				}
			case <-timeout:
				t.Fatalf("deleted within 30s: %v of %v", deleted, names)
			}
		}
	}
	if l := must[*corev1.EventList](t)(c.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})); len(l.Items) != 0 {
		t.Errorf("%d events left after their TTL", len(l.Items))
	}
	if _, err := c.CoordinationV1().Leases(ns).Get(t.Context(), lease.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the lease, which has no TTL: %v", err)
	}
}

// TestEventsGoWithTheirNamespace: deleting a namespace deletes its
// events, as every namespaced kind.
func TestEventsGoWithTheirNamespace(t *testing.T) {
	t.Parallel()
	const ns = "ev-namespace"
	_, c, _ := eventsFixture(t, ns)
	for i := range 3 {
		must[*corev1.Event](t)(c.CoreV1().Events(ns).Create(t.Context(), &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprint("e", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Lease", Namespace: ns, Name: "subject"},
		}, metav1.CreateOptions{}))
	}
	if err := c.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, err := c.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if l := must[*corev1.EventList](t)(c.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})); len(l.Items) != 0 {
		t.Errorf("%d events left in the deleted namespace", len(l.Items))
	}
}

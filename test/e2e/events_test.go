package e2e

import (
	"context"
	"regexp"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// TestKubectlDescribeElection: kubectl describe lease shows the event
// client-go's leader election records about its Lease when it is elected.
func TestKubectlDescribeElection(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)
	w, err := c.CoreV1().Events("default").Watch(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Lease,involvedObject.name=elected,reason=LeaderElection"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	b := record.NewBroadcaster(record.WithContext(t.Context()))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.CoreV1().Events("")})
	defer b.Shutdown()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() {
		defer close(done)
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta: metav1.ObjectMeta{Namespace: "default", Name: "elected"},
				Client:    c.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{
					Identity:      "candidate-1",
					EventRecorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "candidate-1"}),
				},
			},
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
		})
	}()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Added {
			break
		}
	}
	out := k.ok("", "describe", "lease", "elected")
	for _, re := range []string{
		`(?m)^  Holder Identity:\s+candidate-1$`,
		`(?m)^Events:$`,
		`(?m)^  Normal\s+LeaderElection\s+\S+\s+candidate-1\s+candidate-1 became leader$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("describe lease lacks %s:\n%s", re, out)
		}
	}
}

// TestKubectlEvents: kubectl get events (both groups), kubectl events,
// kubectl describe's Events section and kubectl explain, against events
// written as client-go's two recorders write them.
func TestKubectlEvents(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)
	l := createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "elect"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("candidate-1")}})
	ref := corev1.ObjectReference{Kind: "Lease", APIVersion: "coordination.k8s.io/v1", Namespace: "default", Name: "elect", UID: l.UID}
	now := time.Now()
	// As tools/record writes them: source, count, first and last seen.
	if _, err := c.CoreV1().Events("default").Create(t.Context(), &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "elect.1"}, InvolvedObject: ref, Type: corev1.EventTypeNormal, Reason: "LeaderElection",
		Message: "candidate-1 became leader", Source: corev1.EventSource{Component: "candidate-1_abc"},
		FirstTimestamp: metav1.NewTime(now.Add(-3 * time.Minute)), LastTimestamp: metav1.NewTime(now.Add(-time.Minute)), Count: 4,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// As tools/events writes them: eventTime and a series.
	if _, err := c.EventsV1().Events("default").Create(t.Context(), &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "elect.2"}, Regarding: ref, Type: corev1.EventTypeWarning, Reason: "Contended",
		Note: "candidate-2 waits", EventTime: metav1.NewMicroTime(now.Add(-2 * time.Minute)), Action: "Campaign",
		ReportingController: "leasehold.dev/elect", ReportingInstance: "elect-host",
		Series: &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(now.Add(-30 * time.Second))},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	ageRE := regexp.MustCompile(`^\d+s$|^\dm\d*s?$`)
	checkAges := func(what string, rows [][]string, cols ...int) {
		t.Helper()
		for _, row := range rows {
			for _, i := range cols {
				if !ageRE.MatchString(row[i]) {
					t.Errorf("%s: row %q: age %q", what, row, row[i])
				}
				row[i] = "AGE"
			}
		}
	}
	// kube-apiserver's columns, the server's table, the same for both
	// groups.
	for _, resource := range []string{"events", "events.v1.events.k8s.io"} {
		rows := table(t, "get "+resource, k.ok("", "get", resource, "--sort-by=.metadata.name"), "LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
		checkAges("get "+resource, rows, 0)
		wantRows(t, "get "+resource, rows,
			[]string{"AGE", "", "Normal", "LeaderElection", "lease/elect", "candidate-1 became leader"},
			[]string{"AGE", "", "Warning", "Contended", "lease/elect", "candidate-2 waits"})
	}
	rows := table(t, "get events -o wide", k.ok("", "get", "events", "-o", "wide", "--sort-by=.metadata.name"),
		"LAST", "SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST", "SEEN", "COUNT", "NAME")
	checkAges("get events -o wide", rows, 0, 8)
	wantRows(t, "get events -o wide", rows,
		[]string{"AGE", "", "Normal", "LeaderElection", "lease/elect", "", "candidate-1_abc", "candidate-1 became leader", "AGE", "", "4", "elect.1"},
		[]string{"AGE", "", "Warning", "Contended", "lease/elect", "", "leasehold.dev/elect, elect-host", "candidate-2 waits", "AGE", "", "2", "elect.2"})

	// kubectl events prints on the client side, from core v1 lists with
	// field selectors.
	out := k.ok("", "events", "--for", "lease/elect")
	rows = table(t, "kubectl events", out, "LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
	if len(rows) != 2 {
		t.Fatalf("kubectl events: %d rows:\n%s", len(rows), out)
	}
	wantContains(t, "kubectl events", out, "Lease/elect", "candidate-1 became leader", "candidate-2 waits")
	wantContains(t, "kubectl events --types", k.ok("", "events", "--types=Warning"), "Contended")

	// describe finds them by involvedObject field selectors.
	out = k.ok("", "describe", "lease", "elect")
	for _, re := range []string{
		`(?m)^Events:$`,
		`(?m)^  Type\s+Reason\s+Age\s+From\s+Message$`,
		`(?m)^  Normal\s+LeaderElection\s+\S+ \(x4 over \S+\)\s+candidate-1_abc\s+candidate-1 became leader$`,
		`(?m)^  Warning\s+Contended\s+\S+ \(x2 over \S+\)\s+leasehold.dev/elect\s+candidate-2 waits$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("describe lease lacks %s:\n%s", re, out)
		}
	}

	// explain, both versions.
	out = k.ok("", "explain", "event.involvedObject")
	wantContains(t, "explain event.involvedObject", out, "KIND:       Event", "VERSION:    v1", "FIELD: involvedObject <ObjectReference>")
	out = k.ok("", "explain", "events.regarding", "--api-version=events.k8s.io/v1")
	wantContains(t, "explain events.regarding", out, "GROUP:      events.k8s.io", "KIND:       Event", "FIELD: regarding <ObjectReference>")
}

// wantRows compares table rows.
func wantRows(t *testing.T, what string, got [][]string, want ...[]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d: %q", what, len(got), len(want), got)
		return
	}
	for i := range want {
		if normalize(joinCells(got[i])) != normalize(joinCells(want[i])) {
			t.Errorf("%s: row %d %q, want %q", what, i, got[i], want[i])
		}
	}
}

func joinCells(cells []string) string {
	out := ""
	for _, c := range cells {
		out += c + " | "
	}
	return out
}

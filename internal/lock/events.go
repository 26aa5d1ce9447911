package lock

import (
	"context"
	"log/slog"
	"os"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	recordutil "k8s.io/client-go/tools/record/util"
	"k8s.io/klog/v2"
)

// EventRecorder records the elector's Events on the lease, as client-go's
// leader election does when given resourcelock.ResourceLockConfig's
// EventRecorder: "IDENTITY became leader" and "IDENTITY stopped
// leading", reason LeaderElection, so that `kubectl describe lease` tells
// the lease's story. It writes them to the server through client-go's
// event broadcaster, in the background; Flush waits for them.
//
// Events are best effort: one the server refuses (no create on events)
// is dropped, logged at info level.
type EventRecorder struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	mu sync.Mutex // guards recorded and written
	// recorded counts Events handed to the broadcaster; written those
	// the server answered for good (stored, or refused).
	recorded, written int
	// wrote gets a value when written grows (buffer 1: a pending value
	// means "look again", so a full buffer drops the new one).
	wrote chan struct{}
}

var _ resourcelock.EventRecorder = (*EventRecorder)(nil)

// NewEventRecorder starts a broadcaster writing to events, the Events
// coming from component on this host. Call Flush when done.
func NewEventRecorder(events corev1client.EventsGetter, component string, log *slog.Logger) *EventRecorder {
	host, _ := os.Hostname()
	r := &EventRecorder{wrote: make(chan struct{}, 1)}
	// A context without cancellation: Flush shuts the broadcaster down.
	r.broadcaster = record.NewBroadcaster(record.WithContext(klog.NewContext(context.Background(), clientGoLogger(log))))
	r.broadcaster.StartRecordingToSink(&countingSink{EventSink: &corev1client.EventSinkImpl{Interface: events.Events("")}, r: r})
	r.recorder = r.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component, Host: host})
	return r
}

// Eventf records an Event; client-go's LeaseLock.RecordEvent calls it.
func (r *EventRecorder) Eventf(obj runtime.Object, eventType, reason, message string, args ...any) {
	r.mu.Lock()
	r.recorded++
	r.mu.Unlock()
	r.recorder.Eventf(obj, eventType, reason, message, args...)
}

// Flush waits until the server answered every Event recorded, or ctx
// ends, and stops the broadcaster. An Event client-go's spam filter
// drops is never answered: Flush then waits for ctx.
func (r *EventRecorder) Flush(ctx context.Context) {
	defer r.broadcaster.Shutdown()
	for {
		r.mu.Lock()
		done := r.written >= r.recorded
		r.mu.Unlock()
		if done {
			return
		}
		select {
		case <-r.wrote:
		case <-ctx.Done():
			return
		}
	}
}

func (r *EventRecorder) answered() {
	r.mu.Lock()
	r.written++
	r.mu.Unlock()
	select {
	case r.wrote <- struct{}{}:
	default:
	}
}

// countingSink counts the answers client-go's broadcaster does not retry
// (tools/record/event.go, recordEvent): success, or any Status but a
// patch's 404, after which it creates the Event instead.
type countingSink struct {
	record.EventSink
	r *EventRecorder
}

func (s *countingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Create(e)
	if final(err) {
		s.r.answered()
	}
	return out, err
}

func (s *countingSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	out, err := s.EventSink.Patch(e, data)
	if final(err) && !recordutil.IsKeyNotFoundError(err) {
		s.r.answered()
	}
	return out, err
}

// final reports whether the broadcaster is done with an Event after err;
// it retries other errors. A type switch, as client-go's.
func final(err error) bool {
	switch err.(type) {
	case nil, *apierrors.StatusError, *rest.RequestConstructionError:
		return true
	}
	return false
}

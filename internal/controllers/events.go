package controllers

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

// eventWriteTimeout bounds one write of an event: the recorder's
// goroutine must not wait on a store that does not answer.
const eventWriteTimeout = 10 * time.Second

// NewRecorder returns client-go's event recorder for a controller named
// component, posting core v1 Events through the registry as
// kube-controller-manager's controllers post them through a client: the
// same names, counts and aggregation of repeated events. stop flushes
// nothing and ends the recorder's goroutines. Without served Events the
// recorder only logs.
func NewRecorder(reg *registry.Registry, component string) (rec record.EventRecorder, stop func()) {
	b := record.NewBroadcaster()
	if res, ok := reg.ResourceFor(schema.GroupKind{Kind: "Event"}); ok {
		b.StartRecordingToSink(&eventSink{reg: reg, res: res})
	}
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}), b.Shutdown
}

// eventSink writes a recorder's events to the registry.
type eventSink struct {
	reg *registry.Registry
	res resources.Resource
}

var _ record.EventSink = (*eventSink)(nil)

func (s *eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), eventWriteTimeout)
	defer cancel()
	out, err := s.reg.Create(ctx, s.res, e.Namespace, e, registry.WriteOptions{Manager: manager})
	return s.result(out, err)
}

func (s *eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), eventWriteTimeout)
	defer cancel()
	out, err := s.reg.Update(ctx, s.res, e.Namespace, e.Name, "", e, registry.WriteOptions{Manager: manager})
	return s.result(out, err)
}

func (s *eventSink) Patch(old *corev1.Event, patch []byte) (*corev1.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), eventWriteTimeout)
	defer cancel()
	out, err := s.reg.Patch(ctx, s.res, old.Namespace, old.Name, "", types.StrategicMergePatchType, patch, registry.PatchOptions{WriteOptions: registry.WriteOptions{Manager: manager}})
	return s.result(out, err)
}

func (s *eventSink) result(out registry.WriteResult, err error) (*corev1.Event, error) {
	if err != nil {
		return nil, err
	}
	e, ok := out.Object.(*corev1.Event)
	if !ok {
		return nil, errors.New("events: the registry answered with no core v1 Event")
	}
	return e, nil
}

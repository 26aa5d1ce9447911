package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

// registryLock is a client-go resourcelock on a Lease in kube-system,
// read and written through the registry, as resourcelock.LeaseLock does
// through a client.
type registryLock struct {
	reg      *registry.Registry
	leases   resources.Resource
	name     string
	identity string
	// lease is the last Lease read or written, for the next update's
	// resourceVersion; one elector uses a lock, from one goroutine.
	lease *coordinationv1.Lease
}

func newLock(reg *registry.Registry, name, identity string) (*registryLock, error) {
	leases, ok := reg.ResourceFor(schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"})
	if !ok {
		return nil, errors.New("leases are not served")
	}
	return &registryLock{reg: reg, leases: leases, name: name, identity: identity}, nil
}

var _ resourcelock.Interface = (*registryLock)(nil)

const leaseNamespace = metav1.NamespaceSystem

// manager is the field manager of the registry's writes.
const manager = "leasehold"

func (l *registryLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	c, err := l.reg.Get(ctx, l.leases, leaseNamespace, l.name, "")
	if err != nil {
		return nil, nil, err
	}
	obj := c.Object()
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return nil, nil, fmt.Errorf("lock: a %T is no Lease", obj)
	}
	l.lease = lease
	record := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(record)
	if err != nil {
		return nil, nil, err
	}
	return record, raw, nil
}

func (l *registryLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: leaseNamespace},
		Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&ler),
	}
	out, err := l.reg.Create(ctx, l.leases, leaseNamespace, lease, registry.WriteOptions{Manager: manager})
	if err != nil {
		return err
	}
	l.lease = out.Object.(*coordinationv1.Lease)
	return nil
}

func (l *registryLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if l.lease == nil {
		return errors.New("lock: update before get")
	}
	lease := l.lease.DeepCopy()
	lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&ler)
	out, err := l.reg.Update(ctx, l.leases, leaseNamespace, l.name, "", lease, registry.WriteOptions{Manager: manager})
	if err != nil {
		return err
	}
	l.lease = out.Object.(*coordinationv1.Lease)
	return nil
}

// RecordEvent records nothing: leasehold does not post events about
// itself.
func (l *registryLock) RecordEvent(string) {}

func (l *registryLock) Identity() string { return l.identity }

func (l *registryLock) Describe() string { return leaseNamespace + "/" + l.name }

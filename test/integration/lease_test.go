package integration

import (
	"github.com/leasehold/leasehold/internal/testserver"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLeaseCRUD(t *testing.T) {
	ts := testserver.Start(t)
	for name, c := range ts.Clients(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			leases := c.CoordinationV1().Leases("default")
			now := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC))
			in := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "crud-" + name, Labels: map[string]string{"app": "x"}},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr(""),
					LeaseDurationSeconds: ptr[int32](15),
					AcquireTime:          &now,
					RenewTime:            &now,
					LeaseTransitions:     ptr[int32](0),
					Strategy:             ptr(coordinationv1.OldestEmulationVersion),
					PreferredHolder:      ptr("b"),
				},
			}
			created := must[*coordinationv1.Lease](t)(leases.Create(ctx, in, metav1.CreateOptions{}))
			if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() {
				t.Fatalf("system fields not set: %+v", created.ObjectMeta)
			}
			// Pointers keep "" and 0 apart from absent.
			if diff := cmp.Diff(in.Spec, created.Spec); diff != "" {
				t.Fatalf("spec changed on create (-sent +stored):\n%s", diff)
			}
			got := must[*coordinationv1.Lease](t)(leases.Get(ctx, in.Name, metav1.GetOptions{}))
			if diff := cmp.Diff(created, got); diff != "" {
				t.Fatalf("get differs from create (-create +get):\n%s", diff)
			}

			got.Spec.HolderIdentity = ptr("alice")
			updated := must[*coordinationv1.Lease](t)(leases.Update(ctx, got, metav1.UpdateOptions{}))
			if *updated.Spec.HolderIdentity != "alice" || updated.ResourceVersion == got.ResourceVersion {
				t.Fatalf("update not applied: %+v", updated)
			}
			list := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{}))
			found := false
			for _, l := range list.Items {
				found = found || l.Name == in.Name
			}
			if !found {
				t.Fatalf("list lacks %s: %+v", in.Name, list.Items)
			}
			if err := leases.Delete(ctx, in.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			_, err := leases.Get(ctx, in.Name, metav1.GetOptions{})
			se := wantStatus(t, err, 404, metav1.StatusReasonNotFound)
			if se.ErrStatus.Message != `leases.coordination.k8s.io "crud-`+name+`" not found` {
				t.Errorf("message = %q", se.ErrStatus.Message)
			}
		})
	}
}

func TestLeaseUpdateRules(t *testing.T) {
	ts := testserver.Start(t)
	c := ts.Client(t)
	ctx := t.Context()
	leases := c.CoordinationV1().Leases("default")

	// PUT to a missing name creates it (201).
	put := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "put-create"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("a")}}
	var code int
	res := c.CoordinationV1().RESTClient().Put().Namespace("default").Resource("leases").Name("put-create").Body(put).Do(ctx).StatusCode(&code)
	if err := res.Error(); err != nil || code != 201 {
		t.Fatalf("PUT create: code %d err %v", code, err)
	}
	cur := must[*coordinationv1.Lease](t)(leases.Get(ctx, "put-create", metav1.GetOptions{}))

	// PUT without resourceVersion is 422 for a Lease.
	noRV := cur.DeepCopy()
	noRV.ResourceVersion = ""
	_, err := leases.Update(ctx, noRV, metav1.UpdateOptions{})
	se := wantStatus(t, err, 422, metav1.StatusReasonInvalid)
	if want := `leases.coordination.k8s.io "put-create" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`; se.ErrStatus.Message != want {
		t.Errorf("message = %q, want %q", se.ErrStatus.Message, want)
	}

	// A stale resourceVersion is a 409 Conflict.
	next := cur.DeepCopy()
	next.Spec.HolderIdentity = ptr("b")
	must[*coordinationv1.Lease](t)(leases.Update(ctx, next, metav1.UpdateOptions{}))
	stale := cur.DeepCopy()
	stale.Spec.HolderIdentity = ptr("c")
	_, err = leases.Update(ctx, stale, metav1.UpdateOptions{})
	se = wantStatus(t, err, 409, metav1.StatusReasonConflict)
	if want := `Operation cannot be fulfilled on leases.coordination.k8s.io "put-create": the object has been modified; please apply your changes to the latest version and try again`; se.ErrStatus.Message != want {
		t.Errorf("message = %q", se.ErrStatus.Message)
	}

	// A write that changes nothing keeps the resourceVersion.
	latest := must[*coordinationv1.Lease](t)(leases.Get(ctx, "put-create", metav1.GetOptions{}))
	same := must[*coordinationv1.Lease](t)(leases.Update(ctx, latest.DeepCopy(), metav1.UpdateOptions{}))
	if same.ResourceVersion != latest.ResourceVersion {
		t.Errorf("no-op update moved resourceVersion %s -> %s", latest.ResourceVersion, same.ResourceVersion)
	}

	// System fields cannot be changed by an update.
	changed := latest.DeepCopy()
	changed.CreationTimestamp = metav1.NewTime(time.Unix(1, 0))
	changed.Generation = 7
	changed.Spec.HolderIdentity = ptr("d")
	out := must[*coordinationv1.Lease](t)(leases.Update(ctx, changed, metav1.UpdateOptions{}))
	if !out.CreationTimestamp.Equal(&latest.CreationTimestamp) || out.Generation != latest.Generation {
		t.Errorf("system fields changed: creationTimestamp %v generation %d", out.CreationTimestamp, out.Generation)
	}

	// A different uid in the body is a precondition that fails.
	wrongUID := out.DeepCopy()
	wrongUID.UID = "00000000-0000-0000-0000-000000000000"
	_, err = leases.Update(ctx, wrongUID, metav1.UpdateOptions{})
	se = wantStatus(t, err, 409, metav1.StatusReasonConflict)
	if want := "Precondition failed: UID in precondition"; !strings.Contains(se.ErrStatus.Message, want) {
		t.Errorf("message = %q, want it to contain %q", se.ErrStatus.Message, want)
	}

	// AlreadyExists on create.
	_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "put-create"}}, metav1.CreateOptions{})
	se = wantStatus(t, err, 409, metav1.StatusReasonAlreadyExists)
	if se.ErrStatus.Message != `leases.coordination.k8s.io "put-create" already exists` {
		t.Errorf("message = %q", se.ErrStatus.Message)
	}
}

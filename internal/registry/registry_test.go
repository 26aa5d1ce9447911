package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/admission"
	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/builtin"
	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/storage/embedded"
)

// conflicting makes the next writes conflict, as a concurrent writer
// would: the registry must retry them from the current value. It injects
// a fault a test cannot cause on time otherwise.
type conflicting struct {
	storage.Interface
	conflicts atomic.Int64
	// before, when set, runs once before the next put or delete: a
	// concurrent writer's turn.
	before atomic.Pointer[func()]
}

func (c *conflicting) Delete(ctx context.Context, key string, expected int64) (storage.KeyValue, error) {
	if f := c.before.Swap(nil); f != nil {
		(*f)()
	}
	return c.Interface.Delete(ctx, key, expected)
}

func (c *conflicting) Put(ctx context.Context, key string, value []byte, expected int64, opts ...storage.PutOption) (storage.KeyValue, error) {
	if f := c.before.Swap(nil); f != nil {
		(*f)()
	}
	if c.conflicts.Add(-1) >= 0 {
		cur, err := c.Interface.Get(ctx, key)
		if err != nil {
			return storage.KeyValue{}, err
		}
		return storage.KeyValue{}, &storage.ConflictError{Key: key, Expected: expected, Current: &cur}
	}
	return c.Interface.Put(ctx, key, value, expected, opts...)
}

// refuse is an admission step that refuses objects with a given name.
type refuse struct{ name string }

func (r refuse) Admit(_ context.Context, _ admission.Reader, req *admission.Request) error {
	if req.Name == r.name {
		return apierrors.NewForbidden(req.Resource.GroupResource(), req.Name, fmt.Errorf("refused by test step %s", req.Operation))
	}
	return nil
}

// newTestRegistry runs a registry of the built-in kinds on an embedded
// store behind st.
func newTestRegistry(t *testing.T, steps ...admission.Step) (*Registry, *conflicting) {
	t.Helper()
	store, err := embedded.Open(t.TempDir(), embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	st := &conflicting{Interface: store}
	kinds := builtin.Kinds(builtin.Options{CoordinatedLeaderElection: true})
	reg, err := New(Config{Store: st, Kinds: kinds, Admission: steps, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		store.Close()
	})
	<-reg.Ready()
	return reg, st
}

func resourceOf(t *testing.T, reg *Registry, gk schema.GroupKind) resources.Resource {
	t.Helper()
	res, ok := reg.ResourceFor(gk)
	if !ok {
		t.Fatalf("%v not served", gk)
	}
	return res
}

// TestRetriedWritesSayThingsOnce: a write retried after a conflict
// answers with the last try's warnings, not every try's.
func TestRetriedWritesSayThingsOnce(t *testing.T) {
	reg, st := newTestRegistry(t)
	ctx := t.Context()
	eps := resourceOf(t, reg, schema.GroupKind{Kind: "Endpoints"})
	// A leading zero is accepted with a warning.
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e"}, Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "010.0.0.1"}}}}}
	created, err := reg.Create(ctx, eps, "default", ep.DeepCopy(), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(created.Warnings) != 1 {
		t.Fatalf("create warnings %q, want one", created.Warnings)
	}
	want := created.Warnings

	update := ep.DeepCopy()
	update.Labels = map[string]string{"v": "2"}
	st.conflicts.Store(3)
	out, err := reg.Update(ctx, eps, "default", "e", "", update, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, out.Warnings); diff != "" {
		t.Errorf("update warnings after three retries (-want +got):\n%s", diff)
	}
	if st.conflicts.Load() >= 0 {
		t.Fatalf("the update was not retried")
	}

	st.conflicts.Store(2)
	patched, err := reg.Patch(ctx, eps, "default", "e", "", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"v":"3"}}}`), PatchOptions{FieldValidation: metav1.FieldValidationWarn})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, patched.Warnings); diff != "" {
		t.Errorf("patch warnings after two retries (-want +got):\n%s", diff)
	}
}

// TestUpdateRetryStartsOver: an update retried after a concurrent write
// starts again from its object as the request had it, not as its first
// attempt left it (with the resourceVersion it was given then, an
// unconditional update would conflict with itself): from Again when the
// caller gives it, called for retries only, and from a copy otherwise.
func TestUpdateRetryStartsOver(t *testing.T) {
	for _, withAgain := range []bool{false, true} {
		t.Run(fmt.Sprintf("again=%v", withAgain), func(t *testing.T) {
			reg, st := newTestRegistry(t)
			ctx := t.Context()
			eps := resourceOf(t, reg, schema.GroupKind{Kind: "Endpoints"})
			ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e", Labels: map[string]string{"v": "1"}}}
			if _, err := reg.Create(ctx, eps, "default", ep.DeepCopy(), WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			concurrent := func() {
				other := ep.DeepCopy()
				other.Annotations = map[string]string{"by": "other"}
				if _, err := reg.Update(ctx, eps, "default", "e", "", other, WriteOptions{Manager: "other"}); err != nil {
					t.Error(err)
				}
			}
			st.before.Store(&concurrent)
			update := ep.DeepCopy() // unconditional: no resourceVersion
			update.Labels["v"] = "2"
			request := update.DeepCopy()
			agains := 0
			opts := WriteOptions{Manager: "m"}
			if withAgain {
				opts.Again = func() (resources.Object, error) { agains++; return request.DeepCopy(), nil }
			}
			out, err := reg.Update(ctx, eps, "default", "e", "", update, opts)
			if err != nil {
				t.Fatal(err)
			}
			if st.before.Load() != nil {
				t.Fatal("no concurrent write")
			}
			if got := out.Object.(*corev1.Endpoints); got.Labels["v"] != "2" || got.Annotations != nil {
				t.Errorf("stored %+v, want the request's labels, and its lack of annotations", got.ObjectMeta)
			}
			if withAgain && agains != 1 {
				t.Errorf("Again called %d times for one retry", agains)
			}
		})
	}
}

// TestFinalizingUpdateRetries: an update that removes the last finalizer
// of an object being deleted deletes it; a write coming between is a
// conflict retried like any other, not an internal error.
func TestFinalizingUpdateRetries(t *testing.T) {
	reg, st := newTestRegistry(t)
	ctx := t.Context()
	eps := resourceOf(t, reg, schema.GroupKind{Kind: "Endpoints"})
	held := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}
	if _, err := reg.Create(ctx, eps, "default", held.DeepCopy(), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Delete(ctx, eps, "default", "held", &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := reg.Get(ctx, eps, "default", "held", "")
	if err != nil {
		t.Fatal(err)
	}
	marked := got.Object().(*corev1.Endpoints)
	if marked.DeletionTimestamp == nil {
		t.Fatalf("delete left %+v, want it marked", marked.ObjectMeta)
	}
	writes := 0
	concurrent := func() {
		writes++
		other := marked.DeepCopy()
		other.ResourceVersion = ""
		other.Labels = map[string]string{"write": fmt.Sprint(writes)}
		if _, err := reg.Update(ctx, eps, "default", "held", "", other, WriteOptions{Manager: "other"}); err != nil {
			t.Error(err)
		}
	}

	// Conditioned on the resourceVersion read: a conflict for the client.
	st.before.Store(&concurrent)
	release := marked.DeepCopy()
	release.Finalizers = nil
	_, err = reg.Update(ctx, eps, "default", "held", "", release, WriteOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("release after a concurrent write: %v, want a conflict", err)
	}

	// Unconditional: retried on the object as it now is, and deleted.
	st.before.Store(&concurrent)
	release.ResourceVersion = ""
	if _, err := reg.Update(ctx, eps, "default", "held", "", release, WriteOptions{}); err != nil {
		t.Fatalf("unconditional release after a concurrent write: %v", err)
	}
	if st.before.Load() != nil {
		t.Fatal("no concurrent write")
	}
	if _, err := reg.Get(ctx, eps, "default", "held", ""); !apierrors.IsNotFound(err) {
		t.Errorf("get after release: %v, want not found", err)
	}
}

// TestProtobufItemsVerbatim: the cache serves a Lease's protobuf item
// from its stored bytes (codec.Verbatim holds of what the registry
// stores), and the list decodes to the objects with their
// resourceVersions.
func TestProtobufItemsVerbatim(t *testing.T) {
	reg, _ := newTestRegistry(t)
	ctx := t.Context()
	leases := resourceOf(t, reg, schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"})
	holder := "h"
	for i := range 3 {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("l", i), Labels: map[string]string{"i": fmt.Sprint(i)}}}
		out, err := reg.Create(ctx, leases, "default", l, WriteOptions{Manager: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			l = out.Object.(*coordinationv1.Lease).DeepCopy()
			l.Spec.HolderIdentity = &holder
			if _, err := reg.Update(ctx, leases, "default", l.Name, "", l, WriteOptions{Manager: "test"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	list, err := reg.List(ctx, leases, "default", &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := &coordinationv1.LeaseList{ListMeta: list.ListMeta()}
	for _, it := range list.Items {
		if _, _, ok := it.From.(codec.VerbatimSource).Verbatim(); !ok {
			t.Errorf("%s is not served verbatim", it.Object().GetName())
		}
		want.Items = append(want.Items, *it.Object().(*coordinationv1.Lease))
	}
	info, err := reg.Codecs().InputSerializer(codec.Protobuf)
	if err != nil {
		t.Fatal(err)
	}
	body, err := reg.Codecs().EncodeList(codec.Output{Info: info}, leases, list.Items, list.ListMeta())
	if err != nil {
		t.Fatal(err)
	}
	var got coordinationv1.LeaseList
	if _, _, err := info.Serializer.Decode(body.AppendTo(nil), nil, &got); err != nil {
		t.Fatal(err)
	}
	got.TypeMeta = metav1.TypeMeta{}
	if diff := cmp.Diff(want, &got); diff != "" || len(got.Items) != 3 || got.Items[1].ResourceVersion == got.Items[0].ResourceVersion {
		t.Errorf("protobuf list (-want +got):\n%s", diff)
	}
}

// TestAdmissionChain: the chain's steps run in order on creates (also a
// PUT that creates), updates and deletes; the first refusal ends the
// write and nothing is stored.
func TestAdmissionChain(t *testing.T) {
	reg, _ := newTestRegistry(t, refuse{name: "no"})
	ctx := t.Context()
	leases := resourceOf(t, reg, schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"})
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	_, err := reg.Create(ctx, leases, "default", lease("no"), WriteOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("create refused by admission: %v", err)
	}
	_, err = reg.Update(ctx, leases, "default", "no", "", lease("no"), WriteOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("PUT that creates, refused by admission: %v", err)
	}
	if _, err := reg.Get(ctx, leases, "default", "no", ""); !apierrors.IsNotFound(err) {
		t.Errorf("refused object stored: %v", err)
	}
	if _, err := reg.Create(ctx, leases, "default", lease("yes"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = reg.Delete(ctx, leases, "default", "no", &metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("delete refused by admission: %v", err)
	}
	if _, err := reg.Delete(ctx, leases, "default", "yes", &metav1.DeleteOptions{}); err != nil {
		t.Errorf("admitted delete: %v", err)
	}
}

// TestWatchEnds: a watch ends with io.EOF at its timeout, and with the
// context's error when its reader goes.
func TestWatchEnds(t *testing.T) {
	reg, _ := newTestRegistry(t)
	leases := resourceOf(t, reg, schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"})
	zero := int64(0)
	w, err := reg.Watch(t.Context(), leases, "default", "", &metainternalversion.ListOptions{TimeoutSeconds: &zero})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for {
		events, err := w.Next(t.Context())
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("watch ended with %v, want io.EOF", err)
			}
			break
		}
		if len(events) > 0 && events[0].Type != "ADDED" {
			t.Fatalf("event %v", events[0].Type)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	w2, err := reg.Watch(ctx, leases, "default", "", &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	cancel()
	for {
		if _, err := w2.Next(ctx); err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("watch ended with %v, want the context's", err)
			}
			break
		}
	}
}

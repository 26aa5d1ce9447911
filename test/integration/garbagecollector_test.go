package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/util/retry"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// gcEnv creates owners and dependents in one namespace.
type gcEnv struct {
	t      *testing.T
	ctx    context.Context
	c      kubernetes.Interface
	ns     string
	leases typedcoordinationv1.LeaseInterface
}

func newGCEnv(t *testing.T, c kubernetes.Interface, ns string) *gcEnv {
	t.Helper()
	ctx := t.Context()
	must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	return &gcEnv{t: t, ctx: ctx, c: c, ns: ns, leases: c.CoordinationV1().Leases(ns)}
}

// lease creates a Lease with finalizers and owned by owners.
func (e *gcEnv) lease(name string, finalizers []string, owners ...metav1.OwnerReference) *coordinationv1.Lease {
	e.t.Helper()
	return must[*coordinationv1.Lease](e.t)(e.leases.Create(e.ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: name, Finalizers: finalizers, OwnerReferences: owners,
	}}, metav1.CreateOptions{}))
}

// ref is a reference to a Lease; block sets blockOwnerDeletion.
func ref(l *coordinationv1.Lease, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: l.Name, UID: l.UID, BlockOwnerDeletion: &block}
}

func (e *gcEnv) get(name string) *coordinationv1.Lease {
	e.t.Helper()
	l, err := e.leases.Get(e.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

func (e *gcEnv) waitGone(names ...string) {
	e.t.Helper()
	for _, n := range names {
		waitFor(e.t, func() bool { return e.get(n) == nil })
	}
}

func (e *gcEnv) delete(name string, opts metav1.DeleteOptions) {
	e.t.Helper()
	if err := e.leases.Delete(e.ctx, name, opts); err != nil {
		e.t.Fatalf("delete %s: %v", name, err)
	}
}

// release removes a Lease's finalizers; the collector may write it
// meanwhile (marking it deleted), so a conflict is tried again.
func (e *gcEnv) release(name string) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l := e.get(name)
		l.Finalizers = nil
		_, err := e.leases.Update(e.ctx, l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("release %s: %v", name, err)
	}
}

// in returns e for the subtest t.
func (e *gcEnv) in(t *testing.T) *gcEnv {
	c := *e
	c.t = t
	return &c
}

func owners(l *coordinationv1.Lease) []types.UID {
	var out []types.UID
	for _, r := range l.OwnerReferences {
		out = append(out, r.UID)
	}
	return out
}

const hold = "example.com/hold"

// TestGarbageCollectorPolicies: delete with each propagation policy, as
// kube-apiserver with kube-controller-manager's garbage collector does
// it: background deletes the owner at once and its dependents after;
// foreground keeps the owner, marked, until its blocking dependents are
// gone, and deletes the others too; orphan removes the owner's reference
// from its dependents and keeps them. The deprecated orphanDependents
// says the same, and a second delete switches a deletion's policy.
func TestGarbageCollectorPolicies(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	e := newGCEnv(t, ts.Client(t), "gc-policies")
	background, foreground, orphan := metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan

	t.Run("background", func(t *testing.T) {
		e := e.in(t)
		o := e.lease("bg-owner", nil)
		e.lease("bg-a", nil, ref(o, true))
		e.lease("bg-b", nil, ref(o, false))
		e.delete("bg-owner", metav1.DeleteOptions{PropagationPolicy: &background})
		if e.get("bg-owner") != nil {
			t.Fatal("owner still there after a background delete")
		}
		e.waitGone("bg-a", "bg-b")
	})

	t.Run("default is background", func(t *testing.T) {
		e := e.in(t)
		o := e.lease("def-owner", nil)
		e.lease("def-a", nil, ref(o, true))
		e.delete("def-owner", metav1.DeleteOptions{})
		if e.get("def-owner") != nil {
			t.Fatal("owner still there after a delete")
		}
		e.waitGone("def-a")
	})

	t.Run("foreground", func(t *testing.T) {
		e := e.in(t)
		o := e.lease("fg-owner", nil)
		e.lease("fg-held", []string{hold}, ref(o, true))
		e.lease("fg-loose", nil, ref(o, false))
		e.delete("fg-owner", metav1.DeleteOptions{PropagationPolicy: &foreground})
		marked := e.get("fg-owner")
		if marked == nil || marked.DeletionTimestamp == nil || !slices.Equal(marked.Finalizers, []string{metav1.FinalizerDeleteDependents}) {
			t.Fatalf("owner after a foreground delete: %+v", marked)
		}
		// The non-blocking dependent goes too; the held one is marked.
		e.waitGone("fg-loose")
		waitFor(t, func() bool { l := e.get("fg-held"); return l != nil && l.DeletionTimestamp != nil })
		if e.get("fg-owner") == nil {
			t.Fatal("owner gone while a blocking dependent is held")
		}
		e.release("fg-held")
		e.waitGone("fg-held", "fg-owner")
	})

	t.Run("foreground without blocking dependents", func(t *testing.T) {
		e := e.in(t)
		o := e.lease("fgnb-owner", nil)
		e.lease("fgnb-loose", []string{hold}, ref(o, false))
		e.delete("fgnb-owner", metav1.DeleteOptions{PropagationPolicy: &foreground})
		e.waitGone("fgnb-owner")
		waitFor(t, func() bool { l := e.get("fgnb-loose"); return l != nil && l.DeletionTimestamp != nil })
		e.release("fgnb-loose")
		e.waitGone("fgnb-loose")
	})

	t.Run("orphan", func(t *testing.T) {
		e := e.in(t)
		o := e.lease("or-owner", nil)
		other := e.lease("or-other", nil)
		e.lease("or-a", nil, ref(o, true))
		e.lease("or-b", nil, ref(o, false), ref(other, true))
		e.delete("or-owner", metav1.DeleteOptions{PropagationPolicy: &orphan})
		e.waitGone("or-owner")
		if a := e.get("or-a"); a == nil || len(a.OwnerReferences) != 0 {
			t.Errorf("orphaned or-a: %+v", a)
		}
		if b := e.get("or-b"); b == nil || !slices.Equal(owners(b), []types.UID{other.UID}) {
			t.Errorf("orphaned or-b: %+v", b)
		}
	})

	t.Run("orphanDependents", func(t *testing.T) {
		e := e.in(t)
		o := e.lease("od-owner", nil)
		e.lease("od-a", nil, ref(o, true))
		e.delete("od-owner", metav1.DeleteOptions{OrphanDependents: ptr(true)})
		e.waitGone("od-owner")
		if a := e.get("od-a"); a == nil || len(a.OwnerReferences) != 0 {
			t.Errorf("orphaned od-a: %+v", a)
		}
		o = e.lease("od-owner2", nil)
		e.lease("od-b", nil, ref(o, true))
		e.delete("od-owner2", metav1.DeleteOptions{OrphanDependents: ptr(false)})
		e.waitGone("od-owner2", "od-b")
	})

	t.Run("orphan finalizer set by its creator", func(t *testing.T) {
		e := e.in(t)
		o := e.lease("of-owner", []string{metav1.FinalizerOrphanDependents})
		e.lease("of-a", nil, ref(o, true))
		e.delete("of-owner", metav1.DeleteOptions{})
		e.waitGone("of-owner")
		if a := e.get("of-a"); a == nil || len(a.OwnerReferences) != 0 {
			t.Errorf("orphaned of-a: %+v", a)
		}
	})

	t.Run("a second delete switches foreground to orphan", func(t *testing.T) {
		e := e.in(t)
		o := e.lease("sw-owner", nil)
		e.lease("sw-held", []string{hold}, ref(o, true))
		e.delete("sw-owner", metav1.DeleteOptions{PropagationPolicy: &foreground})
		waitFor(t, func() bool { l := e.get("sw-held"); return l != nil && l.DeletionTimestamp != nil })
		e.delete("sw-owner", metav1.DeleteOptions{PropagationPolicy: &orphan})
		e.waitGone("sw-owner")
		if l := e.get("sw-held"); l == nil || len(l.OwnerReferences) != 0 {
			t.Errorf("sw-held after the owner was orphaned: %+v", l)
		}
		e.release("sw-held")
		e.waitGone("sw-held")
	})

	t.Run("foreground chain", func(t *testing.T) {
		e := e.in(t)
		a := e.lease("ch-a", nil)
		b := e.lease("ch-b", nil, ref(a, true))
		e.lease("ch-c", []string{hold}, ref(b, true))
		e.delete("ch-a", metav1.DeleteOptions{PropagationPolicy: &foreground})
		waitFor(t, func() bool {
			l := e.get("ch-b")
			return l != nil && l.DeletionTimestamp != nil && slices.Contains(l.Finalizers, metav1.FinalizerDeleteDependents)
		})
		if e.get("ch-a") == nil {
			t.Fatal("ch-a gone before its dependent")
		}
		e.release("ch-c")
		e.waitGone("ch-c", "ch-b", "ch-a")
	})

	t.Run("deletecollection", func(t *testing.T) {
		e := e.in(t)
		for _, n := range []string{"dc-1", "dc-2"} {
			o := must[*coordinationv1.Lease](t)(e.leases.Create(e.ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"gc": "dc"}}}, metav1.CreateOptions{}))
			e.lease(n+"-dep", []string{hold}, ref(o, true))
		}
		if err := e.leases.DeleteCollection(e.ctx, metav1.DeleteOptions{PropagationPolicy: &foreground}, metav1.ListOptions{LabelSelector: "gc=dc"}); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"dc-1", "dc-2"} {
			waitFor(t, func() bool { l := e.get(n + "-dep"); return l != nil && l.DeletionTimestamp != nil })
			if l := e.get(n); l == nil || l.DeletionTimestamp == nil {
				t.Fatalf("%s after a foreground deletecollection: %+v", n, l)
			}
			e.release(n + "-dep")
		}
		e.waitGone("dc-1-dep", "dc-2-dep", "dc-1", "dc-2")
	})
}

// TestGarbageCollectorMissingOwners: an object whose owner does not
// exist is collected once that is confirmed; one with another owner
// that exists loses only the dangling reference. A namespaced owner is
// looked for in the dependent's namespace only; a cluster-scoped object
// cannot be owned by a namespaced kind, and such a reference keeps it.
// An owner found in another namespace is told in upstream's
// OwnerRefInvalidNamespace Event.
func TestGarbageCollectorMissingOwners(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	c := ts.Client(t)
	e := newGCEnv(t, c, "gc-missing")
	other := newGCEnv(t, c, "gc-missing-other")
	ctx := t.Context()

	alive := e.lease("alive", nil)
	ghost := metav1.OwnerReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: "ghost", UID: "6f1c5a52-5a11-4d0e-9a4b-000000000001"}
	// Same name as a live Lease, another UID.
	impostor := metav1.OwnerReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: "alive", UID: "6f1c5a52-5a11-4d0e-9a4b-000000000002"}
	e.lease("orphan-of-ghost", nil, ghost)
	e.lease("orphan-of-impostor", nil, impostor)
	e.lease("half", nil, ghost, ref(alive, false))
	// An owner in another namespace is absent from this one.
	elsewhere := other.lease("elsewhere", nil)
	cross := e.lease("cross", nil, ref(elsewhere, false))
	// An owner of a kind not served cannot be resolved.
	e.lease("unknown-kind", nil, metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Nope", Name: "x", UID: "6f1c5a52-5a11-4d0e-9a4b-000000000003"})

	// Cluster-scoped dependents: of a Namespace that is gone (collected),
	// and of a Lease (never).
	roles := c.RbacV1().ClusterRoles()
	nsRef := metav1.OwnerReference{APIVersion: "v1", Kind: "Namespace", Name: "gc-gone", UID: "6f1c5a52-5a11-4d0e-9a4b-000000000004"}
	must[*rbacv1.ClusterRole](t)(roles.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gc-role-of-gone-ns", OwnerReferences: []metav1.OwnerReference{nsRef}}}, metav1.CreateOptions{}))
	roleOfLease := must[*rbacv1.ClusterRole](t)(roles.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gc-role-of-lease", OwnerReferences: []metav1.OwnerReference{ref(elsewhere, false)}}}, metav1.CreateOptions{}))

	e.waitGone("orphan-of-ghost", "orphan-of-impostor", "cross")
	waitFor(t, func() bool {
		_, err := roles.Get(ctx, "gc-role-of-gone-ns", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	waitFor(t, func() bool { h := e.get("half"); return h != nil && slices.Equal(owners(h), []types.UID{alive.UID}) })
	if e.get("unknown-kind") == nil {
		t.Error("a dependent of an unknown kind was collected")
	}
	if _, err := roles.Get(ctx, "gc-role-of-lease", metav1.GetOptions{}); err != nil {
		t.Errorf("a cluster-scoped dependent of a namespaced kind: %v", err)
	}
	if e.get("alive") == nil || other.get("elsewhere") == nil {
		t.Error("an owner was collected")
	}

	for _, want := range []struct {
		ns, dependentNS string
		uid             types.UID
	}{{e.ns, e.ns, cross.UID}, {"default", "", roleOfLease.UID}} {
		ev := waitEvent(t, c, want.ns, want.uid, "OwnerRefInvalidNamespace")
		msg := fmt.Sprintf("ownerRef [coordination.k8s.io/v1/Lease, namespace: %s, name: elsewhere, uid: %s] does not exist in namespace %q", want.dependentNS, elsewhere.UID, want.dependentNS)
		if ev.Type != corev1.EventTypeWarning || ev.Message != msg || ev.Source.Component != "garbage-collector-controller" {
			t.Errorf("event %s %q from %q, want Warning %q", ev.Type, ev.Message, ev.Source.Component, msg)
		}
	}
}

// TestGarbageCollectorAcrossKinds: owners and dependents of different
// kinds, and the EndpointSlices mirrored from an Endpoints, which go
// with it through their ownerReference: a foreground delete of the
// Endpoints waits for them.
func TestGarbageCollectorAcrossKinds(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	c := ts.Client(t)
	e := newGCEnv(t, c, "gc-kinds")
	ctx := t.Context()

	o := e.lease("owner", nil)
	eps := c.CoreV1().Endpoints(e.ns)
	must[*corev1.Endpoints](t)(eps.Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "owned", OwnerReferences: []metav1.OwnerReference{ref(o, true)}}}, metav1.CreateOptions{}))
	e.delete("owner", metav1.DeleteOptions{})
	waitFor(t, func() bool { _, err := eps.Get(ctx, "owned", metav1.GetOptions{}); return apierrors.IsNotFound(err) })

	must[*corev1.Endpoints](t)(eps.Create(ctx, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}},
			Ports:     []corev1.EndpointPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		}},
	}, metav1.CreateOptions{}))
	slices := c.DiscoveryV1().EndpointSlices(e.ns)
	sel := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"}
	waitFor(t, func() bool {
		l := must[*discoveryv1.EndpointSliceList](t)(slices.List(ctx, sel))
		return len(l.Items) == 1 && len(l.Items[0].OwnerReferences) == 1
	})
	foreground := metav1.DeletePropagationForeground
	if err := eps.Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := eps.Get(ctx, "web", metav1.GetOptions{}); return apierrors.IsNotFound(err) })
	if l := must[*discoveryv1.EndpointSliceList](t)(slices.List(ctx, sel)); len(l.Items) != 0 {
		t.Errorf("slices left after their Endpoints went in the foreground: %d", len(l.Items))
	}
}

// TestBlockOwnerDeletionPermission: kube-apiserver's
// OwnerReferencesPermissionEnforcement. A reference that blocks its
// owner's deletion needs update on the owner's finalizers subresource;
// changing the references of an existing object needs delete on it.
func TestBlockOwnerDeletionPermission(t *testing.T) {
	t.Parallel()
	s := startWithUsers(t, "")
	ctx := t.Context()
	admin := s.Client(t)
	owner := newGCEnv(t, admin, "gc-perm").lease("owner", nil)
	roles := admin.RbacV1().Roles("gc-perm")
	role := must[*rbacv1.Role](t)(roles.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "writer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}},
	}, metav1.CreateOptions{}))
	must[*rbacv1.RoleBinding](t)(admin.RbacV1().RoleBindings("gc-perm").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "writer"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}},
	}, metav1.CreateOptions{}))
	leases := secClient(t, s.tokenConfig("alice-token")).CoordinationV1().Leases("gc-perm")
	waitFor(t, func() bool { _, err := leases.Get(ctx, "owner", metav1.GetOptions{}); return err == nil })

	create := func(name string, block bool) error {
		_, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{ref(owner, block)}}}, metav1.CreateOptions{})
		return err
	}
	se := wantStatus(t, create("blocking", true), 403, metav1.StatusReasonForbidden)
	if want := `leases.coordination.k8s.io "blocking" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>`; se.ErrStatus.Message != want {
		t.Errorf("message %q, want %q", se.ErrStatus.Message, want)
	}
	if err := create("loose", false); err != nil {
		t.Fatalf("a non-blocking reference, on create: %v", err)
	}
	plain := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, metav1.CreateOptions{}))
	plain.OwnerReferences = []metav1.OwnerReference{ref(owner, false)}
	se = wantStatus(t, must2(leases.Update(ctx, plain, metav1.UpdateOptions{})), 403, metav1.StatusReasonForbidden)
	if want := `leases.coordination.k8s.io "plain" is forbidden: cannot set an ownerRef on a resource you can't delete: , <nil>`; se.ErrStatus.Message != want {
		t.Errorf("message %q, want %q", se.ErrStatus.Message, want)
	}
	// Other changes of an object whose references stay need no more.
	plain.OwnerReferences = nil
	plain.Labels = map[string]string{"a": "b"}
	must[*coordinationv1.Lease](t)(leases.Update(ctx, plain, metav1.UpdateOptions{}))

	role.Rules = append(role.Rules,
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"delete"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases/finalizers"}, Verbs: []string{"update"}, ResourceNames: []string{"owner"}})
	must[*rbacv1.Role](t)(roles.Update(ctx, role, metav1.UpdateOptions{}))
	waitFor(t, func() bool { return create("blocking", true) == nil })
	plain = must[*coordinationv1.Lease](t)(leases.Get(ctx, "plain", metav1.GetOptions{}))
	plain.OwnerReferences = []metav1.OwnerReference{ref(owner, true)}
	must[*coordinationv1.Lease](t)(leases.Update(ctx, plain, metav1.UpdateOptions{}))
}

// TestBlockOwnerDeletionPermissionDisabled: with
// --disable-admission-plugins=OwnerReferencesPermissionEnforcement, as
// kube-apiserver by default, creating a blocking reference needs only
// create.
func TestBlockOwnerDeletionPermissionDisabled(t *testing.T) {
	t.Parallel()
	s := startWithUsers(t, "", func(c *server.Config) {
		c.DisabledAdmissionPlugins = []string{server.OwnerReferencesPermissionEnforcement}
	})
	ctx := t.Context()
	admin := s.Client(t)
	owner := newGCEnv(t, admin, "gc-perm-off").lease("owner", nil)
	must[*rbacv1.Role](t)(admin.RbacV1().Roles("gc-perm-off").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "writer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create"}}},
	}, metav1.CreateOptions{}))
	must[*rbacv1.RoleBinding](t)(admin.RbacV1().RoleBindings("gc-perm-off").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "writer"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}},
	}, metav1.CreateOptions{}))
	leases := secClient(t, s.tokenConfig("alice-token")).CoordinationV1().Leases("gc-perm-off")
	waitFor(t, func() bool { _, err := leases.Get(ctx, "owner", metav1.GetOptions{}); return err == nil })
	must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "blocking", OwnerReferences: []metav1.OwnerReference{ref(owner, true)}}}, metav1.CreateOptions{}))
}

// must2 drops an answer, keeping its error.
func must2[T any](_ T, err error) error { return err }

// TestDeleteAcceptedStatus: kube-apiserver answers 202 Accepted, with
// the object, to a delete with orphanDependents false that leaves the
// object waiting for a finalizer; 200 to the other deletes that wait.
func TestDeleteAcceptedStatus(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	e := newGCEnv(t, ts.Client(t), "gc-accepted")
	for _, c := range []struct {
		body string
		code int
	}{{`{"orphanDependents":false}`, 202}, {`{"propagationPolicy":"Foreground"}`, 200}} {
		name := fmt.Sprintf("held-%d", c.code)
		e.lease(name, []string{hold})
		var code int
		res := ts.Client(t).CoordinationV1().RESTClient().Delete().Namespace(e.ns).Resource("leases").Name(name).
			Body([]byte(c.body)).SetHeader("Content-Type", "application/json").Do(e.ctx).StatusCode(&code)
		if err := res.Error(); err != nil || code != c.code {
			t.Errorf("delete %s: %d %v, want %d", c.body, code, err, c.code)
		}
		if l := e.get(name); l == nil || l.DeletionTimestamp == nil {
			t.Errorf("delete %s: %+v, want it marked", c.body, l)
		}
		e.release(name)
	}
}

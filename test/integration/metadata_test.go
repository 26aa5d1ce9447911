package integration

import (
	"github.com/leasehold/leasehold/internal/testkit/testserver"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestGenerateName(t *testing.T) {
	ts := testserver.Start(t)
	leases := ts.Client(t).CoordinationV1().Leases("default")
	l := must[*coordinationv1.Lease](t)(leases.Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}}, metav1.CreateOptions{}))
	if !strings.HasPrefix(l.Name, "gen-") || len(l.Name) != len("gen-")+5 {
		t.Fatalf("generated name %q", l.Name)
	}
	_, err := leases.Create(t.Context(), &coordinationv1.Lease{}, metav1.CreateOptions{})
	se := wantStatus(t, err, 422, metav1.StatusReasonInvalid)
	if !strings.Contains(se.ErrStatus.Message, "metadata.name: Required value: name or generateName is required") {
		t.Errorf("message = %q", se.ErrStatus.Message)
	}
}

func TestCreateIgnoresSystemFields(t *testing.T) {
	ts := testserver.Start(t)
	leases := ts.Client(t).CoordinationV1().Leases("default")
	in := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: "sys", UID: "client-uid", CreationTimestamp: metav1.Unix(5, 0), Generation: 3,
	}}
	l := must[*coordinationv1.Lease](t)(leases.Create(t.Context(), in, metav1.CreateOptions{}))
	if l.UID == "client-uid" || l.CreationTimestamp.Unix() == 5 {
		t.Errorf("client system fields kept: %+v", l.ObjectMeta)
	}
	if l.Generation != 3 {
		t.Errorf("generation = %d, want the client's 3 (not managed for leases)", l.Generation)
	}

	// A create carrying a resourceVersion is kube-apiserver's plain 500.
	withRV := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "rv", ResourceVersion: "42"}}
	_, err := leases.Create(t.Context(), withRV, metav1.CreateOptions{})
	se := wantStatus(t, err, 500, metav1.StatusReasonUnknown)
	if se.ErrStatus.Message != "resourceVersion should not be set on objects to be created" {
		t.Errorf("message = %q", se.ErrStatus.Message)
	}
}

func TestDryRun(t *testing.T) {
	ts := testserver.Start(t)
	ctx := t.Context()
	leases := ts.Client(t).CoordinationV1().Leases("default")
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	l := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "dry"}}, dry))
	if l.UID == "" || l.ResourceVersion != "" {
		t.Errorf("dry-run create: uid %q resourceVersion %q, want a uid and no resourceVersion", l.UID, l.ResourceVersion)
	}
	if _, err := leases.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dry-run create stored the object: %v", err)
	}
	real := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "dry"}}, metav1.CreateOptions{}))
	upd := real.DeepCopy()
	upd.Spec.HolderIdentity = ptr("x")
	out := must[*coordinationv1.Lease](t)(leases.Update(ctx, upd, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}))
	if *out.Spec.HolderIdentity != "x" || out.ResourceVersion != real.ResourceVersion {
		t.Errorf("dry-run update answer: %+v", out)
	}
	if err := leases.Delete(ctx, "dry", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	after := must[*coordinationv1.Lease](t)(leases.Get(ctx, "dry", metav1.GetOptions{}))
	if after.Spec.HolderIdentity != nil || after.ResourceVersion != real.ResourceVersion {
		t.Errorf("dry-run writes changed the object: %+v", after)
	}
	_, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "dry2"}}, metav1.CreateOptions{DryRun: []string{"Some"}})
	wantStatus(t, err, 422, metav1.StatusReasonInvalid)
}

func TestFinalizersAndDeletePreconditions(t *testing.T) {
	ts := testserver.Start(t)
	ctx := t.Context()
	leases := ts.Client(t).CoordinationV1().Leases("default")
	l := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: "fin", Finalizers: []string{"example.com/hold"}, Generation: 1,
	}}, metav1.CreateOptions{}))

	// Preconditions that do not match are 409 with kube-apiserver's text.
	err := leases.Delete(ctx, "fin", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(types.UID("other"))}})
	se := wantStatus(t, err, 409, metav1.StatusReasonConflict)
	if want := "the UID in the precondition (other) does not match the UID in record (" + string(l.UID) + "). The object might have been deleted and then recreated"; !strings.Contains(se.ErrStatus.Message, want) {
		t.Errorf("message = %q", se.ErrStatus.Message)
	}
	err = leases.Delete(ctx, "fin", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr("1")}})
	wantStatus(t, err, 409, metav1.StatusReasonConflict)

	// With a finalizer, delete only marks the object.
	if err := leases.Delete(ctx, "fin", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &l.UID}}); err != nil {
		t.Fatal(err)
	}
	marked := must[*coordinationv1.Lease](t)(leases.Get(ctx, "fin", metav1.GetOptions{}))
	if marked.DeletionTimestamp == nil || marked.DeletionGracePeriodSeconds == nil || *marked.DeletionGracePeriodSeconds != 0 || marked.Generation != 2 {
		t.Fatalf("not marked for deletion: %+v", marked.ObjectMeta)
	}
	// No new finalizer may be added now.
	more := marked.DeepCopy()
	more.Finalizers = append(more.Finalizers, "example.com/more")
	_, err = leases.Update(ctx, more, metav1.UpdateOptions{})
	wantStatus(t, err, 422, metav1.StatusReasonInvalid)
	// Creating the name again says it is being deleted.
	_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "fin"}}, metav1.CreateOptions{})
	se = wantStatus(t, err, 409, metav1.StatusReasonAlreadyExists)
	if !strings.HasPrefix(se.ErrStatus.Message, "object is being deleted: ") {
		t.Errorf("message = %q", se.ErrStatus.Message)
	}
	// Removing the last finalizer deletes it.
	done := marked.DeepCopy()
	done.Finalizers = nil
	final := must[*coordinationv1.Lease](t)(leases.Update(ctx, done, metav1.UpdateOptions{}))
	if final.Name != "fin" {
		t.Fatalf("update answer %+v", final)
	}
	if _, err := leases.Get(ctx, "fin", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("object still there after its last finalizer went: %v", err)
	}
}

func TestOwnerReferencesKept(t *testing.T) {
	ts := testserver.Start(t)
	eps := ts.Client(t).CoreV1().Endpoints("default")
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: "svc", UID: "u1", Controller: ptr(true)}
	e := must[*corev1.Endpoints](t)(eps.Create(t.Context(), &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{
		Name: "owned", OwnerReferences: []metav1.OwnerReference{ref, ref},
	}}, metav1.CreateOptions{}))
	if len(e.OwnerReferences) != 1 || e.OwnerReferences[0].UID != "u1" {
		t.Errorf("ownerReferences = %+v, want the duplicate dropped", e.OwnerReferences)
	}
}

func TestNamespaceLifecycle(t *testing.T) {
	ts := testserver.Start(t)
	ctx := t.Context()
	c := ts.Client(t)
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		ns := must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}))
		if ns.Status.Phase != corev1.NamespaceActive {
			t.Errorf("%s phase %s", name, ns.Status.Phase)
		}
	}
	// Creating in a missing namespace is 404 on the namespace.
	_, err := c.CoordinationV1().Leases("nope").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	se := wantStatus(t, err, 404, metav1.StatusReasonNotFound)
	if se.ErrStatus.Message != `namespaces "nope" not found` {
		t.Errorf("message = %q", se.ErrStatus.Message)
	}
	// The system namespaces cannot be deleted.
	err = c.CoreV1().Namespaces().Delete(ctx, "default", metav1.DeleteOptions{})
	se = wantStatus(t, err, 403, metav1.StatusReasonForbidden)
	if se.ErrStatus.Message != `namespaces "default" is forbidden: this namespace may not be deleted` {
		t.Errorf("message = %q", se.ErrStatus.Message)
	}

	ns := must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}))
	if ns.Labels[corev1.LabelMetadataName] != "team" || len(ns.Spec.Finalizers) != 1 || ns.Spec.Finalizers[0] != corev1.FinalizerKubernetes {
		t.Errorf("namespace defaults: %+v", ns)
	}
	must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("team").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{}))
	must[*corev1.Endpoints](t)(c.CoreV1().Endpoints("team").Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ep"}}, metav1.CreateOptions{}))

	if err := c.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	term := must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{}))
	if term.Status.Phase != corev1.NamespaceTerminating || term.DeletionTimestamp == nil {
		t.Fatalf("namespace not terminating: %+v", term)
	}
	// Creating in a terminating namespace is 403 NamespaceTerminating.
	_, err = c.CoordinationV1().Leases("team").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
	se = wantStatus(t, err, 403, metav1.StatusReasonForbidden)
	if len(se.ErrStatus.Details.Causes) != 1 || se.ErrStatus.Details.Causes[0].Type != corev1.NamespaceTerminatingCause {
		t.Errorf("causes = %+v", se.ErrStatus.Details.Causes)
	}
	// The endpoints go; the lease with a finalizer is marked and waits, and
	// keeps the namespace, until its finalizer is removed. Resources are
	// emptied in no set order, so wait for each on its own.
	waitFor(t, func() bool {
		_, err := c.CoreV1().Endpoints("team").Get(ctx, "ep", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	var held *coordinationv1.Lease
	waitFor(t, func() bool {
		held = must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("team").Get(ctx, "held", metav1.GetOptions{}))
		return held.DeletionTimestamp != nil
	})
	if _, err := c.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace gone while a lease in it holds a finalizer: %v", err)
	}
	releaseNamespace(t, c, held)
}

// TestDeletePropagation: kubectl delete --cascade and controller-runtime
// send propagationPolicy and orphanDependents. An object without
// dependents goes under every policy, at once or once the garbage
// collector has removed the finalizer an orphaning or foreground delete
// adds (TestGarbageCollectorPolicies has the dependents); invalid options
// are kube-apiserver's 422 on DeleteOptions, for one object and for a
// collection.
func TestDeletePropagation(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	ctx := t.Context()
	for enc, c := range ts.Clients(t) {
		leases := c.CoordinationV1().Leases("default")
		orphan, foreground, background := metav1.DeletePropagationOrphan, metav1.DeletePropagationForeground, metav1.DeletePropagationBackground
		for i, opts := range []metav1.DeleteOptions{
			{PropagationPolicy: &orphan}, {PropagationPolicy: &foreground}, {PropagationPolicy: &background}, {OrphanDependents: ptr(true)},
		} {
			name := enc + "-" + string(rune('a'+i))
			must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))
			if err := leases.Delete(ctx, name, opts); err != nil {
				t.Fatalf("%s: delete %+v: %v", enc, opts, err)
			}
			waitFor(t, func() bool {
				_, err := leases.Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			})
		}

		// A client's own finalizer holds the object; the collector's
		// goes once it has deleted the (no) dependents.
		held := enc + "-held"
		must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: held, Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{}))
		if err := leases.Delete(ctx, held, metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			l := must[*coordinationv1.Lease](t)(leases.Get(ctx, held, metav1.GetOptions{}))
			return l.DeletionTimestamp != nil && len(l.Finalizers) == 1 && l.Finalizers[0] == "example.com/hold"
		})

		bogus := metav1.DeletionPropagation("Bogus")
		for _, opts := range []metav1.DeleteOptions{{PropagationPolicy: &bogus}, {PropagationPolicy: &orphan, OrphanDependents: ptr(true)}} {
			se := wantStatus(t, leases.Delete(ctx, held, opts), 422, metav1.StatusReasonInvalid)
			if se.ErrStatus.Details == nil || se.ErrStatus.Details.Kind != "DeleteOptions" {
				t.Errorf("%s: delete %+v: details %+v, want kind DeleteOptions", enc, opts, se.ErrStatus.Details)
			}
			wantStatus(t, leases.DeleteCollection(ctx, opts, metav1.ListOptions{}), 422, metav1.StatusReasonInvalid)
		}
	}
}

// TestWriteOptionsInvalid: a create or an update with options
// kube-apiserver refuses (metav1 validation's ValidateCreateOptions and
// ValidateUpdateOptions) is answered 422 Invalid about CreateOptions or
// UpdateOptions, and changes nothing; without options, or with valid
// ones, it goes through.
func TestWriteOptionsInvalid(t *testing.T) {
	ts := testserver.Start(t)
	ctx := t.Context()
	leases := ts.Client(t).CoordinationV1().Leases("default")
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("a")}}
	}
	wantInvalid := func(t *testing.T, err error, kind, field string) {
		t.Helper()
		se := wantStatus(t, err, 422, metav1.StatusReasonInvalid)
		d := se.ErrStatus.Details
		if d == nil || d.Kind != kind || d.Group != "meta.k8s.io" || len(d.Causes) != 1 || d.Causes[0].Field != field {
			t.Errorf("details %+v, want %s.meta.k8s.io with a cause on %s (%q)", d, kind, field, se.ErrStatus.Message)
		}
	}
	// Each refused option, by the field kube-apiserver names.
	refused := []struct {
		field             string
		dryRun            []string
		validation, owner string
	}{
		{field: "dryRun", dryRun: []string{"Some"}},
		{field: "fieldValidation", validation: "Loose"},
		{field: "fieldManager", owner: strings.Repeat("m", 129)},
	}
	for _, r := range refused {
		name := "c-" + strings.ToLower(r.field)
		_, err := leases.Create(ctx, lease(name), metav1.CreateOptions{DryRun: r.dryRun, FieldValidation: r.validation, FieldManager: r.owner})
		wantInvalid(t, err, "CreateOptions", r.field)
		_, err = leases.Get(ctx, name, metav1.GetOptions{})
		wantStatus(t, err, 404, metav1.StatusReasonNotFound)
	}
	if _, err := leases.Create(ctx, lease("dry"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	_, err := leases.Get(ctx, "dry", metav1.GetOptions{})
	wantStatus(t, err, 404, metav1.StatusReasonNotFound)

	l := must[*coordinationv1.Lease](t)(leases.Create(ctx, lease("u"), metav1.CreateOptions{}))
	changed := l.DeepCopy()
	changed.Spec.HolderIdentity = ptr("b")
	for _, r := range refused {
		_, err := leases.Update(ctx, changed, metav1.UpdateOptions{DryRun: r.dryRun, FieldValidation: r.validation, FieldManager: r.owner})
		wantInvalid(t, err, "UpdateOptions", r.field)
	}
	if got := must[*coordinationv1.Lease](t)(leases.Get(ctx, "u", metav1.GetOptions{})); got.ResourceVersion != l.ResourceVersion {
		t.Errorf("refused updates changed the lease: resourceVersion %s, was %s", got.ResourceVersion, l.ResourceVersion)
	}
	if got := must[*coordinationv1.Lease](t)(leases.Update(ctx, changed, metav1.UpdateOptions{FieldManager: "m"})); *got.Spec.HolderIdentity != "b" {
		t.Errorf("update with valid options: holder %q", *got.Spec.HolderIdentity)
	}
}

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/yaml"
)

// holderMirror is a controller-runtime reconciler: for every Lease in its
// namespace it keeps an Endpoints of the same name, owned by the Lease,
// whose "holder" annotation is the lease's holder, and deletes the
// Endpoints when the Lease goes. It reads Leases through the manager's
// cache and Endpoints from the server: the controller watches Endpoints
// metadata only, and a typed cache of them would be a second informer
// that may not have seen yet the change that woke the reconciler.
type holderMirror struct {
	client.Client
	api client.Reader
}

func (m holderMirror) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var lease coordinationv1.Lease
	err := m.Get(ctx, req.NamespacedName, &lease)
	if apierrors.IsNotFound(err) {
		ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: req.Namespace}}
		return ctrl.Result{}, client.IgnoreNotFound(m.Delete(ctx, ep))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	var ep corev1.Endpoints
	err = m.api.Get(ctx, req.NamespacedName, &ep)
	if apierrors.IsNotFound(err) {
		ep = corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: req.Namespace, Annotations: map[string]string{"holder": holder}}}
		if err := controllerutil.SetControllerReference(&lease, &ep, m.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, m.Create(ctx, &ep)
	}
	if err != nil || ep.Annotations["holder"] == holder {
		return ctrl.Result{}, err
	}
	if ep.Annotations == nil {
		ep.Annotations = map[string]string{}
	}
	ep.Annotations["holder"] = holder
	return ctrl.Result{}, m.Update(ctx, &ep)
}

// managerRBAC is the RBAC the holder-mirror operator would ship, as
// kubebuilder lays it out (config/rbac): the manager's ClusterRole for
// what its reconciler reads and writes, bound to its service account, and
// the leader election Role in its namespace, narrowed to its one Lease
// (get and update on it, create on leases: the Lease does not exist until
// the first election) and to the events it records.
const managerRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: holder-mirror-manager
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch]
# SetControllerReference makes the reference block the owner's deletion,
# which OwnerReferencesPermissionEnforcement allows with this (kubebuilder
# scaffolds it for every controller).
- apiGroups: [coordination.k8s.io]
  resources: [leases/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [endpoints]
  verbs: [get, list, watch, create, update, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: holder-mirror-manager
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: holder-mirror-manager
subjects:
- kind: ServiceAccount
  name: holder-mirror
  namespace: operators
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: holder-mirror-leader-election
  namespace: operators
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [holder-mirror]
  verbs: [get, update]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: holder-mirror-leader-election
  namespace: operators
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: holder-mirror-leader-election
subjects:
- kind: ServiceAccount
  name: holder-mirror
  namespace: operators
`

// applyRBAC creates the RBAC objects of a multi-document YAML manifest.
func applyRBAC(t *testing.T, c kubernetes.Interface, manifest string) {
	t.Helper()
	for _, doc := range strings.Split(manifest, "\n---\n") {
		var tm metav1.TypeMeta
		must[any](t)(nil, yaml.Unmarshal([]byte(doc), &tm))
		var err error
		switch tm.Kind {
		case "ClusterRole":
			var o rbacv1.ClusterRole
			must[any](t)(nil, yaml.UnmarshalStrict([]byte(doc), &o))
			_, err = c.RbacV1().ClusterRoles().Create(t.Context(), &o, metav1.CreateOptions{})
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			must[any](t)(nil, yaml.UnmarshalStrict([]byte(doc), &o))
			_, err = c.RbacV1().ClusterRoleBindings().Create(t.Context(), &o, metav1.CreateOptions{})
		case "Role":
			var o rbacv1.Role
			must[any](t)(nil, yaml.UnmarshalStrict([]byte(doc), &o))
			_, err = c.RbacV1().Roles(o.Namespace).Create(t.Context(), &o, metav1.CreateOptions{})
		case "RoleBinding":
			var o rbacv1.RoleBinding
			must[any](t)(nil, yaml.UnmarshalStrict([]byte(doc), &o))
			_, err = c.RbacV1().RoleBindings(o.Namespace).Create(t.Context(), &o, metav1.CreateOptions{})
		default:
			t.Fatalf("manifest kind %q", tm.Kind)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestControllerRuntime: a controller-runtime manager, as operators are
// built, runs against leasehold unchanged, with exactly the RBAC its
// manifests ask for, as its service account (a token user of that name):
// leader election on its Lease, a cached client with informers on Leases
// and (metadata only) Endpoints, and a reconciler that creates, updates
// and deletes through it.
func TestControllerRuntime(t *testing.T) {
	t.Parallel()
	ts := startWithUsers(t, "")
	ctx, cancel := context.WithCancel(t.Context())
	c := ts.Client(t)
	secNamespaces(t, c, "cr", "operators")
	applyRBAC(t, c, managerRBAC)
	operator := ts.tokenConfig("holder-mirror-token")
	waitAllowed(t, secClient(t, operator), &authorizationv1.ResourceAttributes{Namespace: "operators", Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "holder-mirror"})

	leaseDuration, renewDeadline, retryPeriod := 4*time.Second, 3*time.Second, 500*time.Millisecond
	mgr, err := ctrl.NewManager(operator, ctrl.Options{
		Scheme:                  clientgoscheme.Scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		LeaderElection:          true,
		LeaderElectionID:        "holder-mirror",
		LeaderElectionNamespace: "operators",
		LeaseDuration:           &leaseDuration,
		RenewDeadline:           &renewDeadline,
		RetryPeriod:             &retryPeriod,
		// Names are unique per process (for metrics); -count runs this
		// test more than once in one.
		Controller: config.Controller{SkipNameValidation: ptr(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	inCR := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == "cr" })
	err = ctrl.NewControllerManagedBy(mgr).
		Named("holder-mirror").
		For(&coordinationv1.Lease{}, builder.WithPredicates(inCR)).
		Owns(&corev1.Endpoints{}, builder.OnlyMetadata, builder.WithPredicates(inCR)).
		Complete(holderMirror{Client: mgr.GetClient(), api: mgr.GetAPIReader()})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	select {
	case <-mgr.Elected():
	case err := <-stopped:
		t.Fatalf("manager stopped before it was elected: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not elected within 30s")
	}
	lock := must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("operators").Get(ctx, "holder-mirror", metav1.GetOptions{}))
	if lock.Spec.HolderIdentity == nil || *lock.Spec.HolderIdentity == "" || lock.Spec.LeaseDurationSeconds == nil || *lock.Spec.LeaseDurationSeconds != 4 {
		t.Errorf("leader election lease: %+v", lock.Spec)
	}
	// The election is reported as an Event about the Lease, as
	// kube-apiserver shows it to kubectl describe.
	waitFor(t, func() bool {
		l, err := c.CoreV1().Events("operators").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Lease,involvedObject.name=holder-mirror,reason=LeaderElection"})
		return err == nil && len(l.Items) == 1 && strings.HasSuffix(l.Items[0].Message, " became leader")
	})

	leases := c.CoordinationV1().Leases("cr")
	eps := c.CoreV1().Endpoints("cr")
	mirrored := func(name, holder string) func() bool {
		return func() bool {
			ep, err := eps.Get(ctx, name, metav1.GetOptions{})
			return err == nil && ep.Annotations["holder"] == holder
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("h-" + name)}}, metav1.CreateOptions{}))
	}
	for _, name := range []string{"a", "b", "c"} {
		waitFor(t, mirrored(name, "h-"+name))
	}
	must[*coordinationv1.Lease](t)(leases.Patch(ctx, "b", types.MergePatchType, []byte(`{"spec":{"holderIdentity":"h-new"}}`), metav1.PatchOptions{}))
	waitFor(t, mirrored("b", "h-new"))
	if err := leases.Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, err := eps.Get(ctx, "c", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	// A change made behind the controller's back is put right: the
	// metadata-only watch on the owned Endpoints (PartialObjectMetadata
	// lists and watches) maps it to its Lease.
	ep := must[*corev1.Endpoints](t)(eps.Get(ctx, "a", metav1.GetOptions{}))
	if refs := ep.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Lease" || refs[0].Name != "a" || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("ownerReferences of the mirrored Endpoints: %+v", refs)
	}
	if err := eps.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, mirrored("a", "h-a"))
	ep = must[*corev1.Endpoints](t)(eps.Get(ctx, "a", metav1.GetOptions{}))
	ep.Annotations["holder"] = "tampered"
	must[*corev1.Endpoints](t)(eps.Update(ctx, ep, metav1.UpdateOptions{}))
	waitFor(t, mirrored("a", "h-a"))
}

package openapi_test

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/util/proto"
	explainv2 "k8s.io/kubectl/pkg/explain/v2"
	"k8s.io/utils/ptr"
)

// clientConfig serves the documents over HTTP and returns a client-go
// configuration for them.
func clientConfig(t *testing.T) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(newService(t))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

// client-go's OpenAPI v3 root, which kubectl explain, apply and the
// fieldValidation check are built on, finds and parses every document.
func TestClientGoOpenAPIV3(t *testing.T) {
	dc := discovery.NewDiscoveryClientForConfigOrDie(clientConfig(t))
	root := openapi3.NewRoot(dc.OpenAPIV3())
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]schema.GroupVersion{{Group: "coordination.k8s.io", Version: "v1"}, {Group: "discovery.k8s.io", Version: "v1"}, {Group: "events.k8s.io", Version: "v1"}, {Group: "rbac.authorization.k8s.io", Version: "v1"}, {Version: "v1"}}, gvs); diff != "" {
		t.Errorf("group versions (-want +got):\n%s", diff)
	}
	for _, c := range []struct {
		gv         schema.GroupVersion
		def, field string
		want       string
	}{
		{coordinationv1.SchemeGroupVersion, "io.k8s.api.coordination.v1.LeaseSpec", "holderIdentity", "holderIdentity contains the identity of the holder"},
		{corev1.SchemeGroupVersion, "io.k8s.api.core.v1.Endpoints", "subsets", "The set of all endpoints is the union of all subsets"},
		{corev1.SchemeGroupVersion, "io.k8s.api.core.v1.NamespaceSpec", "finalizers", "Finalizers is an opaque list of values"},
	} {
		doc, err := root.GVSpec(c.gv)
		if err != nil {
			t.Fatalf("GVSpec(%v): %v", c.gv, err)
		}
		def, ok := doc.Components.Schemas[c.def]
		if !ok {
			t.Errorf("%v: no schema %s", c.gv, c.def)
			continue
		}
		if desc := def.Properties[c.field].Description; !strings.Contains(desc, c.want) {
			t.Errorf("%s.%s description %q, want it to contain %q", c.def, c.field, desc, c.want)
		}
	}
}

// kubectl explain renders fields from the v3 documents.
func TestKubectlExplain(t *testing.T) {
	dc := discovery.NewDiscoveryClientForConfigOrDie(clientConfig(t))
	for _, c := range []struct {
		gvr    schema.GroupVersionResource
		fields []string
		want   []string
	}{
		{coordinationv1.SchemeGroupVersion.WithResource("leases"), []string{"spec", "holderIdentity"},
			[]string{"KIND:       Lease", "FIELD: holderIdentity <string>", "holderIdentity contains the identity of the holder"}},
		{corev1.SchemeGroupVersion.WithResource("endpoints"), []string{"subsets"},
			[]string{"KIND:       Endpoints", "FIELD: subsets <[]EndpointSubset>", "addresses", "notReadyAddresses", "ports"}},
		{corev1.SchemeGroupVersion.WithResource("namespaces"), []string{"spec"},
			[]string{"KIND:       Namespace", "FIELD: spec <NamespaceSpec>", "finalizers"}},
	} {
		var out bytes.Buffer
		if err := explainv2.PrintModelDescription(c.fields, &out, dc.OpenAPIV3(), c.gvr, false, 0, "plaintext"); err != nil {
			t.Errorf("explain %s.%s: %v", c.gvr.Resource, strings.Join(c.fields, "."), err)
			continue
		}
		for _, want := range c.want {
			if !strings.Contains(out.String(), want) {
				t.Errorf("explain %s.%s output lacks %q:\n%s", c.gvr.Resource, strings.Join(c.fields, "."), want, out.String())
			}
		}
	}
}

// kubectl create/apply/replace use server-side field validation when the
// v3 document shows fieldValidation on the kind's PATCH operation.
func TestKubectlFieldValidationSupport(t *testing.T) {
	cfg := clientConfig(t)
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	verifier := resource.NewQueryParamVerifierV3(dynamic.NewForConfigOrDie(cfg), dc.OpenAPIV3(), resource.QueryParamFieldValidation)
	for _, gvk := range []schema.GroupVersionKind{
		coordinationv1.SchemeGroupVersion.WithKind("Lease"),
		corev1.SchemeGroupVersion.WithKind("Endpoints"),
		corev1.SchemeGroupVersion.WithKind("Namespace"),
	} {
		if err := verifier.HasSupport(gvk); err != nil {
			t.Errorf("HasSupport(%v): %v", gvk, err)
		}
	}
}

// client-go's v2 client (protobuf) and kube-openapi's model parser, which
// kubectl falls back to for strategic merge patch metadata.
func TestClientGoOpenAPIV2(t *testing.T) {
	dc := discovery.NewDiscoveryClientForConfigOrDie(clientConfig(t))
	doc, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	models, err := proto.NewOpenAPIData(doc)
	if err != nil {
		t.Fatal(err)
	}
	meta, ok := models.LookupModel("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta").(*proto.Kind)
	if !ok {
		t.Fatal("no ObjectMeta model")
	}
	owners := meta.Fields["ownerReferences"]
	if got := owners.GetExtensions()["x-kubernetes-patch-merge-key"]; got != "uid" {
		t.Errorf("ownerReferences patch merge key %v, want uid", got)
	}
	if models.LookupModel("io.k8s.api.coordination.v1.Lease") == nil {
		t.Error("no Lease model")
	}
}

// Definitions feed server-side apply's type converter.
func TestDefinitionsTypeConverter(t *testing.T) {
	s := newService(t)
	tc, err := managedfields.NewTypeConverter(s.Definitions(), false)
	if err != nil {
		t.Fatalf("NewTypeConverter: %v", err)
	}
	now := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC))
	for _, obj := range []runtime.Object{
		&coordinationv1.Lease{
			TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: metav1.ObjectMeta{Name: "leader", Namespace: "kube-system", Labels: map[string]string{"a": "b"}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To("node-1"),
				LeaseDurationSeconds: ptr.To[int32](15),
				AcquireTime:          &now,
				RenewTime:            &now,
				LeaseTransitions:     ptr.To[int32](3),
			},
		},
		&corev1.Endpoints{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Endpoints"},
			ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "default"},
			Subsets: []corev1.EndpointSubset{{
				Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}},
				Ports:     []corev1.EndpointPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
			}},
		},
		&corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: "ns"},
			Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive, Conditions: []corev1.NamespaceCondition{
				{Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionFalse},
			}},
		},
	} {
		gvk := obj.GetObjectKind().GroupVersionKind()
		typed, err := tc.ObjectToTyped(obj)
		if err != nil {
			t.Errorf("ObjectToTyped(%v): %v", gvk, err)
			continue
		}
		back, err := tc.TypedToObject(typed)
		if err != nil {
			t.Errorf("TypedToObject(%v): %v", gvk, err)
			continue
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(u, back.(runtime.Unstructured).UnstructuredContent()); diff != "" {
			t.Errorf("%v round trip (-want +got):\n%s", gvk, diff)
		}
	}

	// Unknown fields are rejected: the schemas are structural.
	bad := &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}}
	u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(bad)
	u["spec"] = map[string]any{"holder": "x"}
	if _, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: u}); err == nil {
		t.Error("ObjectToTyped accepted spec.holder")
	}
}

package openapi

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/leasehold/leasehold/internal/buildinfo"
	"github.com/leasehold/leasehold/internal/resources"
)

// Service serves the OpenAPI documents of a set of resources. It is
// safe for concurrent use.
//
// The schemas server-side apply needs are built by New; the documents
// only when first asked for (30 MiB allocated and ~4 MiB kept, for
// clients that may never come: kubectl asks once per cache lifetime).
type Service struct {
	defs map[string]*spec.Schema

	build func() (*documents, error)
	once  sync.Once
	docs  *documents
	err   error
}

// documents are the built documents.
type documents struct {
	v2 http.Handler
	v3 *handler3.OpenAPIService
	// v3Docs holds the document names under /openapi/v3/ ("api/v1").
	v3Docs map[string]bool
}

// New prepares the documents describing the served kinds (at each of
// their versions) and the discovery and /version endpoints, and builds
// the served kinds' schemas.
func New(kinds []*resources.Kind) (*Service, error) {
	var rs []resources.Resource
	for _, k := range kinds {
		rs = append(rs, k.Resources()...)
	}
	defs := definitionsOf(kinds)
	services, err := webServices(rs)
	if err != nil {
		return nil, err
	}
	namer, err := servedNamer(rs)
	if err != nil {
		return nil, err
	}
	v := buildinfo.KubeVersion()
	info := &spec.Info{InfoProps: spec.InfoProps{
		Title: "Kubernetes",
		// kube-apiserver's emulation version, major.minor.
		Version: v.EmulationMajor + "." + v.EmulationMinor,
	}}
	v3 := v3Config(info, namer, defs)
	s := &Service{build: func() (*documents, error) { return buildDocuments(services, v2Config(info, namer, defs), v3) }}

	// The schemas of the served kinds and their dependencies, as
	// kube-apiserver builds them for its field managers.
	names := make([]string, 0, len(rs))
	for _, r := range rs {
		names = append(names, util.GetCanonicalTypeName(r.New()))
	}
	s.defs, err = builder3.BuildOpenAPIDefinitionsForResources(v3, names...)
	if err != nil {
		return nil, fmt.Errorf("openapi: building definitions: %w", err)
	}
	return s, nil
}

// buildDocuments builds the v2 document and one v3 document per group
// version, and serialises each to JSON.
func buildDocuments(services []*webService, v2 *common.Config, v3 *common.OpenAPIV3Config) (*documents, error) {
	containers := make([]common.RouteContainer, len(services))
	for i, ws := range services {
		containers[i] = ws
	}
	swagger, err := builder.BuildOpenAPISpecFromRoutes(containers, v2)
	if err != nil {
		return nil, fmt.Errorf("openapi: building v2: %w", err)
	}
	// As kube-apiserver does: defaults are for v3 consumers.
	swagger.Definitions = handler.PruneDefaults(swagger.Definitions)
	d := &documents{v3: handler3.NewOpenAPIService(), v3Docs: map[string]bool{}}
	handler.NewOpenAPIService(swagger).RegisterOpenAPIVersionedService("/openapi/v2", capture{&d.v2})

	// One v3 document per route container, named by its root path.
	for _, ws := range services {
		doc, err := builder3.BuildOpenAPISpecFromRoutes([]common.RouteContainer{ws}, v3)
		if err != nil {
			return nil, fmt.Errorf("openapi: building v3 %s: %w", ws.root, err)
		}
		filterGroupVersionKinds(doc, ws.root)
		name := strings.TrimPrefix(ws.root, "/")
		d.v3.UpdateGroupVersion(name, doc)
		d.v3Docs[name] = true
	}
	if err := d.warm(); err != nil {
		return nil, err
	}
	return d, nil
}

// Definitions returns the OpenAPI v3 schemas of the served kinds and of
// every type they reference, keyed by definition name
// ("io.k8s.api.coordination.v1.Lease"), with x-kubernetes-group-version-kind
// set on the kinds. This is what managedfields.NewTypeConverter takes
// (with preserveUnknownFields false) to build server-side apply's type
// converter. The map and schemas are shared: callers must not modify them.
func (s *Service) Definitions() map[string]*spec.Schema {
	return s.defs
}

// TypeConverter returns server-side apply's type converter for the served
// kinds, built from Definitions.
func (s *Service) TypeConverter() (managedfields.TypeConverter, error) {
	return managedfields.NewTypeConverter(s.defs, false)
}

// Build builds the documents now, if no request has yet; the error is
// the one every request for a document would get.
func (s *Service) Build() error {
	s.once.Do(func() { s.docs, s.err = s.build() })
	return s.err
}

// ServeHTTP serves /openapi/v2, /openapi/v3 and /openapi/v3/<group
// version>; any other path is a plain 404. Like kube-apiserver, it
// answers whatever the method; HEAD gets headers only.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := s.Build(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.docs.ServeHTTP(w, r)
}

func (d *documents) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/openapi/v2":
		d.v2.ServeHTTP(w, r)
	case p == "/openapi/v3":
		d.v3.HandleDiscovery(w, r)
	case strings.HasPrefix(p, "/openapi/v3/") && d.v3Docs[p[len("/openapi/v3/"):]]:
		// handler3 answers an unknown document with an empty 200;
		// v3Docs keeps those out.
		d.v3.HandleGroupVersion(w, r)
	default:
		http.NotFound(w, r)
	}
}

// warm serialises every document to JSON once, so that the handlers'
// caches and the v3 index's hashes are ready before the first request is
// answered and a document that cannot be encoded fails Build. The
// protobuf forms are left to the first request that asks for one, as in
// kube-apiserver: converting costs as much as building, few clients want
// them, and converting a document that encodes to JSON does not fail (the
// tests convert each).
func (d *documents) warm() error {
	paths := []string{"/openapi/v2", "/openapi/v3"}
	for name := range d.v3Docs {
		paths = append(paths, "/openapi/v3/"+name)
	}
	var errs []error
	for _, p := range paths {
		r, err := http.NewRequest(http.MethodGet, p, nil)
		if err != nil {
			return err
		}
		r.Header.Set("Accept", "application/json")
		w := &statusRecorder{header: http.Header{}}
		d.ServeHTTP(w, r)
		if w.status != http.StatusOK || w.n == 0 {
			errs = append(errs, fmt.Errorf("openapi: serving %s: status %d, %d bytes", p, w.status, w.n))
		}
	}
	return errors.Join(errs...)
}

// statusRecorder is a ResponseWriter that keeps only the status and the
// body size.
type statusRecorder struct {
	header http.Header
	status int
	n      int
}

func (w *statusRecorder) Header() http.Header { return w.header }
func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *statusRecorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(b)
	return len(b), nil
}

// capture is the common.PathHandler handler.OpenAPIService registers its
// (content-negotiating, gzipping) handler with; it keeps the handler.
type capture struct{ h *http.Handler }

func (c capture) Handle(_ string, h http.Handler) { *c.h = h }

// servedNamer returns the definition namer of a scheme holding the served
// kinds and, per served group version, the kinds metav1.AddToGroupVersion
// registers (WatchEvent, the options types, and Status and the discovery
// types as unversioned v1), as kube-apiserver's scheme has them.
func servedNamer(rs []resources.Resource) (*definitionNamer, error) {
	scheme := runtime.NewScheme()
	for _, r := range rs {
		gv := r.GroupVersion()
		scheme.AddKnownTypeWithName(r.GroupVersionKind(), r.New())
		scheme.AddKnownTypeWithName(r.ListGroupVersionKind(), r.Version.NewList())
		metav1.AddToGroupVersion(scheme, gv)
	}
	return newDefinitionNamer(scheme)
}

// definitionsOf merges the OpenAPI definitions of every served version;
// versions sharing one generator (openapi-gen's output for k8s.io/api)
// run it once.
func definitionsOf(kinds []*resources.Kind) common.GetOpenAPIDefinitions {
	var fns []common.GetOpenAPIDefinitions
	seen := map[uintptr]bool{}
	for _, k := range kinds {
		for _, v := range k.Versions {
			id := reflect.ValueOf(v.OpenAPI).Pointer()
			if !seen[id] {
				seen[id] = true
				fns = append(fns, v.OpenAPI)
			}
		}
	}
	return func(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
		out := map[string]common.OpenAPIDefinition{}
		for _, fn := range fns {
			maps.Copy(out, fn(ref))
		}
		return out
	}
}

// v2Config is kube-apiserver's OpenAPI v2 configuration: its title, https,
// the bearer token security definition, and 401 on every operation.
// https://github.com/kubernetes/apiserver/blob/v0.37.2/pkg/server/config.go
func v2Config(info *spec.Info, namer *definitionNamer, defs common.GetOpenAPIDefinitions) *common.Config {
	return &common.Config{
		ProtocolList:   []string{"https"},
		IgnorePrefixes: []string{},
		Info:           info,
		DefaultResponse: &spec.Response{ResponseProps: spec.ResponseProps{
			Description: "Default Response.",
		}},
		CommonResponses: map[int]spec.Response{
			http.StatusUnauthorized: {ResponseProps: spec.ResponseProps{Description: "Unauthorized"}},
		},
		GetOperationIDAndTagsFromRoute: operationIDAndTags,
		GetDefinitionName:              namer.definitionName,
		GetDefinitions:                 defs,
		SecurityDefinitions:            &spec.SecurityDefinitions{"BearerToken": bearerToken()},
		DefaultSecurity:                []map[string][]string{{"BearerToken": {}}},
	}
}

// v3Config is v2Config for OpenAPI v3. The definitions are generated once
// and shared by the per-group-version documents.
func v3Config(info *spec.Info, namer *definitionNamer, defs common.GetOpenAPIDefinitions) *common.OpenAPIV3Config {
	c := &common.OpenAPIV3Config{
		IgnorePrefixes: []string{},
		Info:           info,
		DefaultResponse: &spec3.Response{ResponseProps: spec3.ResponseProps{
			Description: "Default Response.",
		}},
		CommonResponses: map[int]*spec3.Response{
			http.StatusUnauthorized: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}},
		},
		GetOperationIDAndTagsFromRoute: operationIDAndTags,
		GetDefinitionName:              namer.definitionName,
		SecuritySchemes: spec3.SecuritySchemes{"BearerToken": &spec3.SecurityScheme{
			SecuritySchemeProps: spec3.SecuritySchemeProps{
				Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
			},
		}},
		DefaultSecurity: []map[string][]string{{"BearerToken": {}}},
	}
	c.Definitions = defs(func(name string) spec.Ref {
		defName, _ := namer.definitionName(name)
		return spec.MustCreateRef("#/components/schemas/" + common.EscapeJsonPointer(defName))
	})
	return c
}

func bearerToken() *spec.SecurityScheme {
	return &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
		Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
	}}
}

// AtomicList reports whether field (its JSON name) of the Go struct type t
// is a list declared atomic (x-kubernetes-list-type: atomic): one value
// to the field manager, whatever its items.
func (s *Service) AtomicList(t reflect.Type, field string) bool {
	if t.PkgPath() == "" {
		return false
	}
	d := s.defs[util.ToRESTFriendlyName(t.PkgPath()+"."+t.Name())]
	if d == nil {
		return false
	}
	p, ok := d.Properties[field]
	if !ok || !p.Type.Contains("array") {
		return false
	}
	lt, _ := p.Extensions.GetString("x-kubernetes-list-type")
	return lt == "atomic"
}

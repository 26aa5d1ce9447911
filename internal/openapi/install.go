package openapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/kube-openapi/pkg/common"

	"github.com/leasehold/leasehold/internal/resources"
)

// Media types, as kube-apiserver declares them with its default serializers
// (CBOR is behind the CBORServingAndStorage gate, off by default); they are
// the formats internal/codec serves.
var (
	objectMediaTypes = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
	allMediaTypes    = append(slices.Clip(objectMediaTypes), "application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch")
	patchMediaTypes  = []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"}
	anyMediaType     = []string{"*/*"}
)

// optionParams are the query parameters of each kind of operation, from
// the metav1 options types.
type optionParams struct {
	list, create, update, patch, delete, deleteCollection []common.Parameter
}

func newOptionParams() (optionParams, error) {
	var p optionParams
	var errs []error
	add := func(dst *[]common.Parameter, opts documented, exclude ...string) {
		ps, err := queryParams(opts, exclude...)
		errs = append(errs, err)
		*dst = append(*dst, ps...)
	}
	add(&p.list, metav1.ListOptions{})
	add(&p.create, metav1.CreateOptions{})
	add(&p.update, metav1.UpdateOptions{})
	add(&p.patch, metav1.PatchOptions{})
	add(&p.delete, metav1.DeleteOptions{})
	add(&p.deleteCollection, metav1.DeleteOptions{})
	add(&p.deleteCollection, metav1.ListOptions{}, "watch", "allowWatchBookmarks")
	return p, errors.Join(errs...)
}

// webServices returns the route containers kube-apiserver would install
// for rs: the discovery endpoints (/api, /apis, /apis/<group>, /version)
// and one per group version with its resources' routes.
func webServices(rs []resources.Resource) ([]*webService, error) {
	opts, err := newOptionParams()
	if err != nil {
		return nil, err
	}
	byGV := map[schema.GroupVersion][]resources.Resource{}
	for _, r := range rs {
		byGV[r.GroupVersion()] = append(byGV[r.GroupVersion()], r)
	}
	gvs := make([]schema.GroupVersion, 0, len(byGV))
	for gv := range byGV {
		gvs = append(gvs, gv)
	}
	sort.Slice(gvs, func(i, j int) bool { return gvs[i].String() < gvs[j].String() })

	out := []*webService{
		discoveryService("/api", "getAPIVersions", "get available API versions", objectMediaTypes, metav1.APIVersions{}),
		discoveryService("/apis", "getAPIVersions", "get available API versions", objectMediaTypes, metav1.APIGroupList{}),
		discoveryService("/version", "getCodeVersion", "get the version information for this server", []string{"application/json"}, version.Info{}),
	}
	groups := map[string]bool{}
	for _, gv := range gvs {
		if gv.Group != "" && !groups[gv.Group] {
			groups[gv.Group] = true
			out = append(out, discoveryService("/apis/"+gv.Group, "getAPIGroup", "get information of a group", objectMediaTypes, metav1.APIGroup{}))
		}
		ws := discoveryService(gvRoot(gv), "getAPIResources", "get available resources", objectMediaTypes, metav1.APIResourceList{})
		group := byGV[gv]
		sort.Slice(group, func(i, j int) bool { return group[i].Kind.Names.Plural < group[j].Kind.Names.Plural })
		for _, r := range group {
			ws.routes = append(ws.routes, resourceRoutes(ws.root, r, nil, opts)...)
			subs := slices.Clone(r.Kind.Subresources)
			sort.Slice(subs, func(i, j int) bool { return subs[i].Name < subs[j].Name })
			for i := range subs {
				ws.routes = append(ws.routes, resourceRoutes(ws.root, r, &subs[i], opts)...)
			}
		}
		out = append(out, ws)
	}
	return out, nil
}

// gvRoot is the path a group version is served under.
func gvRoot(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "/api/" + gv.Version
	}
	return "/apis/" + gv.Group + "/" + gv.Version
}

// discoveryService is a web service with the single GET route of a
// discovery document at root + "/".
// https://github.com/kubernetes/apiserver/tree/v0.37.2/pkg/endpoints/discovery
func discoveryService(root, operation, doc string, mediaTypes []string, model any) *webService {
	return &webService{root: root, routes: []common.Route{&route{
		method:    http.MethodGet,
		path:      root + "/",
		operation: operation,
		doc:       doc,
		consumes:  mediaTypes,
		produces:  mediaTypes,
		writes:    model,
	}}}
}

// action is one operation on a path, as in the installer: verb is the
// installer's (LIST, WATCHLIST, POST, ...).
type action struct {
	verb          string
	path          string
	params        []common.Parameter
	allNamespaces bool
}

// resourceRoutes lays out the routes of resource r (or its subresource
// sub) under root as kube-apiserver's APIInstaller.registerResourceHandlers
// does.
// https://github.com/kubernetes/apiserver/blob/v0.37.2/pkg/endpoints/installer.go
func resourceRoutes(root string, r resources.Resource, subresource *resources.Subresource, opts optionParams) []common.Route {
	verbs := r.Kind.ServedVerbs()
	sub := ""
	if subresource != nil {
		verbs, sub = subresource.Verbs, subresource.Name
	}
	serves := func(v string) bool { return slices.Contains(verbs, v) }
	watchList := serves("watch") && serves("list")

	var (
		plural         = r.Kind.Names.Plural
		resourcePath   = plural
		resourceParams []common.Parameter
		itemPath       = plural + "/{name}"
		nameParams     = []common.Parameter{nameParam(r.Kind.Names.Kind)}
	)
	if r.Kind.Namespaced {
		resourcePath = "namespaces/{namespace}/" + plural
		resourceParams = []common.Parameter{namespaceParam()}
		itemPath = resourcePath + "/{name}"
		nameParams = []common.Parameter{namespaceParam(), nameParam(r.Kind.Names.Kind)}
	}
	if sub != "" {
		itemPath += "/" + sub
		resourcePath, resourceParams = itemPath, nameParams
	}

	var actions []action
	add := func(ok bool, a action) {
		if ok {
			actions = append(actions, a)
		}
	}
	add(serves("list"), action{"LIST", resourcePath, resourceParams, false})
	add(serves("create"), action{"POST", resourcePath, resourceParams, false})
	add(serves("deletecollection"), action{"DELETECOLLECTION", resourcePath, resourceParams, false})
	// The /watch/ paths are deprecated since 1.11 but still served.
	add(watchList, action{"WATCHLIST", "watch/" + resourcePath, resourceParams, false})
	add(serves("get"), action{"GET", itemPath, nameParams, false})
	add(serves("update"), action{"PUT", itemPath, nameParams, false})
	add(serves("patch"), action{"PATCH", itemPath, nameParams, false})
	add(serves("delete"), action{"DELETE", itemPath, nameParams, false})
	add(serves("watch"), action{"WATCH", "watch/" + itemPath, nameParams, false})
	if r.Kind.Namespaced && sub == "" {
		add(serves("list"), action{"LIST", plural, nil, true})
		add(watchList, action{"WATCHLIST", "watch/" + plural, nil, true})
	}

	gvk := metav1.GroupVersionKind{Group: r.Version.Group, Version: r.Version.Version, Kind: r.Kind.Names.Kind}
	routes := make([]common.Route, 0, len(actions))
	for _, a := range actions {
		rt := operationRoute(r, sub, a, serves, opts)
		rt.path = root + "/" + a.path
		rt.params = append(rt.params, a.params...)
		rt.meta = map[string]any{gvkExtension: gvk, "x-kubernetes-action": strings.ToLower(a.verb)}
		routes = append(routes, rt)
	}
	return routes
}

// operationRoute fills in what depends on the action's verb: operation
// name, description, parameters, media types and responses.
func operationRoute(r resources.Resource, sub string, a action, serves func(string) bool, opts optionParams) *route {
	kind := r.Kind.Names.Kind
	obj := r.New()
	status := &metav1.Status{}
	event := &metav1.WatchEvent{}

	// "readNamespacedLeaseStatus", "listLeaseForAllNamespaces", ...
	scope, suffix := "", ""
	if r.Kind.Namespaced {
		scope = "Namespaced"
	}
	if a.allNamespaces {
		scope, suffix = "", "ForAllNamespaces"
	}
	name := func(verb string) string { return verb + scope + kind + title(sub) + suffix }
	// doc picks the description of a resource or of its subresource.
	doc := func(resource, subresource string) string {
		if sub != "" {
			return subresource
		}
		return resource
	}
	ok := func(model any) response { return response{http.StatusOK, "OK", model} }
	created := func(model any) response { return response{http.StatusCreated, "Created", model} }
	accepted := func(model any) response { return response{http.StatusAccepted, "Accepted", model} }

	rt := &route{consumes: anyMediaType, params: []common.Parameter{prettyParam()}}
	switch a.verb {
	case "GET":
		rt.method, rt.operation = http.MethodGet, name("read")
		rt.doc = doc("read the specified "+kind, "read "+sub+" of the specified "+kind)
		rt.produces, rt.writes = objectMediaTypes, obj
		rt.responses = []common.StatusCodeResponse{ok(obj)}
	case "LIST":
		list := r.Version.NewList()
		rt.method, rt.operation = http.MethodGet, name("list")
		rt.doc = doc("list objects of kind "+kind, "list "+sub+" of objects of kind "+kind)
		if serves("watch") {
			rt.doc = doc("list or watch objects of kind "+kind, "list or watch "+sub+" of objects of kind "+kind)
		}
		rt.produces, rt.writes = allMediaTypes, list
		rt.responses = []common.StatusCodeResponse{ok(list)}
		rt.params = append(rt.params, opts.list...)
	case "PUT":
		rt.method, rt.operation = http.MethodPut, name("replace")
		rt.doc = doc("replace the specified "+kind, "replace "+sub+" of the specified "+kind)
		rt.produces, rt.reads, rt.writes = objectMediaTypes, obj, obj
		rt.responses = []common.StatusCodeResponse{ok(obj), created(obj)}
		rt.params = append(append(rt.params, bodyParam(true)), opts.update...)
	case "PATCH":
		rt.method, rt.operation = http.MethodPatch, name("patch")
		rt.doc = doc("partially update the specified "+kind, "partially update "+sub+" of the specified "+kind)
		rt.consumes, rt.produces, rt.reads, rt.writes = patchMediaTypes, objectMediaTypes, &metav1.Patch{}, obj
		// 201 when server-side apply creates the object.
		rt.responses = []common.StatusCodeResponse{ok(obj), created(obj)}
		rt.params = append(append(rt.params, bodyParam(true)), opts.patch...)
	case "POST":
		article := articleFor(kind)
		rt.method, rt.operation = http.MethodPost, name("create")
		rt.doc = doc("create"+article+kind, "create "+sub+" of"+article+kind)
		rt.produces, rt.reads, rt.writes = objectMediaTypes, obj, obj
		rt.responses = []common.StatusCodeResponse{ok(obj), created(obj), accepted(obj)}
		rt.params = append(append(rt.params, bodyParam(true)), opts.create...)
	case "DELETE":
		article := articleFor(kind)
		rt.method, rt.operation = http.MethodDelete, name("delete")
		rt.doc = doc("delete"+article+kind, "delete "+sub+" of"+article+kind)
		rt.produces, rt.reads, rt.writes = objectMediaTypes, &metav1.DeleteOptions{}, status
		rt.responses = []common.StatusCodeResponse{ok(status), accepted(status)}
		rt.params = append(append(rt.params, bodyParam(false)), opts.delete...)
	case "DELETECOLLECTION":
		rt.method, rt.operation = http.MethodDelete, name("deletecollection")
		rt.doc = doc("delete collection of "+kind, "delete collection of "+sub+" of a "+kind)
		rt.produces, rt.reads, rt.writes = objectMediaTypes, &metav1.DeleteOptions{}, status
		rt.responses = []common.StatusCodeResponse{ok(status)}
		rt.params = append(append(rt.params, bodyParam(false)), opts.deleteCollection...)
	case "WATCH":
		rt.method, rt.operation = http.MethodGet, name("watch")
		rt.doc = doc("watch changes to an object of kind "+kind, "watch changes to "+sub+" of an object of kind "+kind) +
			". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter."
		rt.produces, rt.writes = allMediaTypes, event
		rt.responses = []common.StatusCodeResponse{ok(event)}
		rt.params = append(rt.params, opts.list...)
	case "WATCHLIST":
		rt.method, rt.operation = http.MethodGet, "watch"+scope+kind+title(sub)+"List"+suffix
		rt.doc = doc("watch individual changes to a list of "+kind, "watch individual changes to a list of "+sub+" of "+kind) +
			". deprecated: use the 'watch' parameter with a list operation instead."
		rt.produces, rt.writes = allMediaTypes, event
		rt.responses = []common.StatusCodeResponse{ok(event)}
		rt.params = append(rt.params, opts.list...)
	default:
		panic(fmt.Sprintf("openapi: unknown action %q", a.verb))
	}
	return rt
}

// title capitalises a subresource name for operation names ("status" ->
// "Status"), as the installer's cases.Title does for these ASCII words.
func title(s string) string {
	if s == "" {
		return ""
	}
	return strings.ToUpper(s[:1]) + strings.ToLower(s[1:])
}

// articleFor returns " a ", " an " or, for plural-looking kinds such as
// Endpoints, " ", as the installer's GetArticleForNoun does.
func articleFor(kind string) string {
	if strings.HasSuffix(kind, "s") && !strings.HasSuffix(kind, "ss") {
		return " "
	}
	if strings.ContainsRune("aeiouAEIOU", rune(kind[0])) {
		return " an "
	}
	return " a "
}

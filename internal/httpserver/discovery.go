package httpserver

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/munnerz/goautoneg"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources"
)

// group is one API group and the resources it serves (one version each).
type group struct {
	name      string // "" for the core group
	version   string
	resources []*resources.Resource
}

func (g group) groupVersion() string {
	if g.name == "" {
		return g.version
	}
	return g.name + "/" + g.version
}

// groupsOf arranges resources by group, core first, then by name.
func groupsOf(rs []*resources.Resource) []group {
	byName := map[string]*group{}
	for _, r := range rs {
		g := byName[r.Group]
		if g == nil {
			g = &group{name: r.Group, version: r.Version}
			byName[r.Group] = g
		}
		g.resources = append(g.resources, r)
	}
	var out []group
	for _, g := range byName {
		sort.Slice(g.resources, func(i, j int) bool { return g.resources[i].Plural < g.resources[j].Plural })
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

const aggregatedDiscoveryType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// serveDiscovery answers the discovery documents; false means the path is
// not one.
func (s *Server) serveDiscovery(w http.ResponseWriter, req *http.Request) bool {
	parts := splitPath(req.URL.Path)
	aggregated := func(core bool) bool {
		if !s.wantsAggregated(req) {
			return false
		}
		s.writeAggregated(w, req, s.aggregated(core))
		return true
	}
	var doc runtime.Object
	switch {
	case len(parts) == 1 && parts[0] == "api":
		if aggregated(true) {
			return true
		}
		doc = s.apiVersions(req)
	case len(parts) == 1 && parts[0] == "apis":
		if aggregated(false) {
			return true
		}
		doc = s.apiGroupList()
	case len(parts) == 2 && parts[0] == "api":
		g, ok := s.findGroup("", parts[1])
		if !ok {
			return false
		}
		doc = resourceList(g)
	case len(parts) == 2 && parts[0] == "apis":
		g, ok := s.findGroup(parts[1], "")
		if !ok || g.name == "" {
			return false
		}
		doc = apiGroup(g)
	case len(parts) == 3 && parts[0] == "apis":
		g, ok := s.findGroup(parts[1], parts[2])
		if !ok || g.name == "" {
			return false
		}
		doc = resourceList(g)
	default:
		return false
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		s.writeError(w, req, methodNotAllowed())
		return true
	}
	out, err := s.codecs.Negotiate(req, codec.Target{})
	if err != nil {
		s.writeError(w, req, err)
		return true
	}
	s.writeObject(w, req, out, http.StatusOK, doc)
	return true
}

// findGroup finds a served group by name and, unless version is empty,
// version.
func (s *Server) findGroup(name, version string) (group, bool) {
	for _, g := range s.groups {
		if g.name == name && (version == "" || g.version == version) {
			return g, true
		}
	}
	return group{}, false
}

// wantsAggregated reports whether the client asks for aggregated
// discovery (apidiscovery.k8s.io/v2) before any plain format.
func (s *Server) wantsAggregated(req *http.Request) bool {
	for _, c := range goautoneg.ParseAccept(req.Header.Get("Accept")) {
		if c.Params["g"] == "apidiscovery.k8s.io" && c.Params["as"] == "APIGroupDiscoveryList" {
			if c.Params["v"] == "v2" && (c.Type == "application" && (c.SubType == "json" || c.SubType == "*") || c.Type == "*") {
				return true
			}
			continue
		}
		if c.Params["as"] == "" {
			return false
		}
	}
	return false
}

func (s *Server) apiVersions(req *http.Request) *metav1.APIVersions {
	v := &metav1.APIVersions{
		Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{
			ClientCIDR: "0.0.0.0/0", ServerAddress: req.Host,
		}},
	}
	v.Kind = "APIVersions"
	return v
}

func (s *Server) apiGroupList() *metav1.APIGroupList {
	l := &metav1.APIGroupList{Groups: []metav1.APIGroup{}}
	l.Kind, l.APIVersion = "APIGroupList", "v1"
	for _, g := range s.groups {
		if g.name != "" {
			l.Groups = append(l.Groups, *apiGroup(g))
		}
	}
	return l
}

func apiGroup(g group) *metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: g.groupVersion(), Version: g.version}
	ag := &metav1.APIGroup{Name: g.name, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
	ag.Kind, ag.APIVersion = "APIGroup", "v1"
	return ag
}

func resourceList(g group) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: g.groupVersion()}
	l.Kind, l.APIVersion = "APIResourceList", "v1"
	for _, r := range g.resources {
		l.APIResources = append(l.APIResources, metav1.APIResource{
			Name:               r.Plural,
			SingularName:       r.Singular,
			Namespaced:         r.Namespaced,
			Kind:               r.Kind,
			Verbs:              r.ServedVerbs(),
			ShortNames:         r.ShortNames,
			StorageVersionHash: storageVersionHash(r),
		})
		for _, name := range sortedKeys(r.Subresources) {
			l.APIResources = append(l.APIResources, metav1.APIResource{
				Name:       r.Plural + "/" + name,
				Namespaced: r.Namespaced,
				Kind:       r.Kind,
				Verbs:      subresourceVerbs(name),
			})
		}
	}
	return l
}

// storageVersionHash is empty for resources without storage (the
// reviews), as kube-apiserver lists them.
func storageVersionHash(r *resources.Resource) string {
	if r.KeyPath == "" {
		return ""
	}
	return r.StorageVersionHash()
}

func subresourceVerbs(name string) []string {
	if name == "finalize" {
		return []string{"update"}
	}
	return []string{"get", "patch", "update"}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// aggregated builds the apidiscovery.k8s.io/v2 document of /api (core
// only) or /apis (every other group).
func (s *Server) aggregated(core bool) *apidiscoveryv2.APIGroupDiscoveryList {
	l := &apidiscoveryv2.APIGroupDiscoveryList{Items: []apidiscoveryv2.APIGroupDiscovery{}}
	l.Kind, l.APIVersion = "APIGroupDiscoveryList", "apidiscovery.k8s.io/v2"
	for _, g := range s.groups {
		if (g.name == "") != core {
			continue
		}
		v := apidiscoveryv2.APIVersionDiscovery{Version: g.version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		for _, r := range g.resources {
			scope := apidiscoveryv2.ScopeCluster
			if r.Namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			kind := &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
			rd := apidiscoveryv2.APIResourceDiscovery{
				Resource:         r.Plural,
				ResponseKind:     kind,
				Scope:            scope,
				SingularResource: r.Singular,
				Verbs:            r.ServedVerbs(),
				ShortNames:       r.ShortNames,
			}
			for _, name := range sortedKeys(r.Subresources) {
				rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
					Subresource:  name,
					ResponseKind: kind,
					Verbs:        subresourceVerbs(name),
				})
			}
			v.Resources = append(v.Resources, rd)
		}
		gd := apidiscoveryv2.APIGroupDiscovery{Versions: []apidiscoveryv2.APIVersionDiscovery{v}}
		gd.Name = g.name
		l.Items = append(l.Items, gd)
	}
	return l
}

// writeAggregated writes an aggregated discovery document with its ETag;
// a matching If-None-Match is answered 304, as kube-apiserver does.
func (s *Server) writeAggregated(w http.ResponseWriter, req *http.Request, doc *apidiscoveryv2.APIGroupDiscoveryList) {
	data, err := json.Marshal(doc)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	sum := sha512.Sum512(data)
	etag := `"` + strings.ToUpper(hex.EncodeToString(sum[:])) + `"`
	h := w.Header()
	h.Set("Vary", "Accept")
	h.Set("ETag", etag)
	h.Set("Cache-Control", "public")
	h.Set("Content-Type", aggregatedDiscoveryType)
	if req.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(data, '\n'))
}

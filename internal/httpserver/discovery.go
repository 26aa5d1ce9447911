package httpserver

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/munnerz/goautoneg"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources"
)

// group is one API group as discovery lists it: its versions, the
// preferred first.
type group struct {
	name     string // "" for the core group
	versions []groupVersion
}

// groupVersion is one version of a group and the resources it serves,
// by name.
type groupVersion struct {
	schema.GroupVersion
	resources []entry
}

// entry is one resource as discovery lists it.
type entry struct {
	plural, singular, kind string
	namespaced             bool
	verbs, shortNames      []string
	// storageVersionHash is empty for resources without storage (the
	// reviews), as kube-apiserver lists them.
	storageVersionHash string
	subresources       []resources.Subresource
}

// entryOf is the discovery entry of a served kind.
func entryOf(k *resources.Kind) entry {
	return entry{
		plural: k.Names.Plural, singular: k.Names.Singular, kind: k.Names.Kind,
		namespaced: k.Namespaced, verbs: k.ServedVerbs(), shortNames: k.Names.ShortNames,
		storageVersionHash: k.StorageVersionHash(),
		subresources:       k.Subresources,
	}
}

// groupsOf arranges the served kinds (at each of their versions) and the
// extra entries by group, core first, then by name; a group's versions
// by kube-apiserver's version priority (v1 before v1beta1 before
// v1alpha1), its resources by name.
func groupsOf(kinds []*resources.Kind, extra map[schema.GroupVersion][]entry) []group {
	byGV := map[schema.GroupVersion][]entry{}
	for _, k := range kinds {
		for _, v := range k.Versions {
			byGV[v.GroupVersion] = append(byGV[v.GroupVersion], entryOf(k))
		}
	}
	for gv, es := range extra {
		byGV[gv] = append(byGV[gv], es...)
	}
	byName := map[string]*group{}
	for gv, es := range byGV {
		sort.Slice(es, func(i, j int) bool { return es[i].plural < es[j].plural })
		g := byName[gv.Group]
		if g == nil {
			g = &group{name: gv.Group}
			byName[gv.Group] = g
		}
		g.versions = append(g.versions, groupVersion{GroupVersion: gv, resources: es})
	}
	out := make([]group, 0, len(byName))
	for _, g := range byName {
		sort.Slice(g.versions, func(i, j int) bool {
			return version.CompareKubeAwareVersionStrings(g.versions[i].Version, g.versions[j].Version) > 0
		})
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
		gv, ok := s.findGroupVersion(schema.GroupVersion{Version: parts[1]})
		if !ok {
			return false
		}
		doc = resourceList(gv)
	case len(parts) == 2 && parts[0] == "apis":
		g, ok := s.findGroup(parts[1])
		if !ok || g.name == "" {
			return false
		}
		doc = apiGroup(g)
	case len(parts) == 3 && parts[0] == "apis":
		gv, ok := s.findGroupVersion(schema.GroupVersion{Group: parts[1], Version: parts[2]})
		if !ok || gv.Group == "" {
			return false
		}
		doc = resourceList(gv)
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

// findGroup finds a served group by name.
func (s *Server) findGroup(name string) (group, bool) {
	for _, g := range s.groups {
		if g.name == name {
			return g, true
		}
	}
	return group{}, false
}

// findGroupVersion finds a served group version.
func (s *Server) findGroupVersion(gv schema.GroupVersion) (groupVersion, bool) {
	g, ok := s.findGroup(gv.Group)
	if !ok {
		return groupVersion{}, false
	}
	for _, v := range g.versions {
		if v.Version == gv.Version {
			return v, true
		}
	}
	return groupVersion{}, false
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
	ag := &metav1.APIGroup{Name: g.name}
	for _, v := range g.versions {
		ag.Versions = append(ag.Versions, metav1.GroupVersionForDiscovery{GroupVersion: v.String(), Version: v.Version})
	}
	ag.PreferredVersion = ag.Versions[0]
	ag.Kind, ag.APIVersion = "APIGroup", "v1"
	return ag
}

func resourceList(gv groupVersion) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: gv.String()}
	l.Kind, l.APIVersion = "APIResourceList", "v1"
	for _, e := range gv.resources {
		l.APIResources = append(l.APIResources, metav1.APIResource{
			Name:               e.plural,
			SingularName:       e.singular,
			Namespaced:         e.namespaced,
			Kind:               e.kind,
			Verbs:              e.verbs,
			ShortNames:         e.shortNames,
			StorageVersionHash: e.storageVersionHash,
		})
		for _, sub := range sortedSubresources(e.subresources) {
			l.APIResources = append(l.APIResources, metav1.APIResource{
				Name:       e.plural + "/" + sub.Name,
				Namespaced: e.namespaced,
				Kind:       e.kind,
				Verbs:      sortedVerbs(sub.Verbs),
			})
		}
	}
	return l
}

// sortedSubresources returns subs by name, as discovery lists them.
func sortedSubresources(subs []resources.Subresource) []resources.Subresource {
	out := slices.Clone(subs)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func sortedVerbs(verbs []string) []string {
	out := slices.Clone(verbs)
	sort.Strings(out)
	return out
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
		gd := apidiscoveryv2.APIGroupDiscovery{}
		gd.Name = g.name
		for _, gv := range g.versions {
			v := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
			for _, e := range gv.resources {
				scope := apidiscoveryv2.ScopeCluster
				if e.namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				kind := &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: e.kind}
				rd := apidiscoveryv2.APIResourceDiscovery{
					Resource:         e.plural,
					ResponseKind:     kind,
					Scope:            scope,
					SingularResource: e.singular,
					Verbs:            e.verbs,
					ShortNames:       e.shortNames,
				}
				for _, sub := range sortedSubresources(e.subresources) {
					rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource:  sub.Name,
						ResponseKind: kind,
						Verbs:        sortedVerbs(sub.Verbs),
					})
				}
				v.Resources = append(v.Resources, rd)
			}
			gd.Versions = append(gd.Versions, v)
		}
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

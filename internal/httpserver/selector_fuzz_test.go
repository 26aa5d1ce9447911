package httpserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/resources"
)

// fuzzScopes are the lists the selector targets read.
var fuzzScopes = []struct {
	path      string
	namespace string // of the URL
	res       schema.GroupVersionResource
}{
	{"/apis/coordination.k8s.io/v1/namespaces/team-a/leases", "team-a", schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}},
	{"/apis/coordination.k8s.io/v1/leases", "", schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}},
	{"/api/v1/endpoints", "", schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}},
	{"/api/v1/namespaces", "", schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}},
}

// fuzzObject is an object as a list returns it, with what selectors see.
type fuzzObject struct {
	key    string // namespace/name
	labels labels.Set
	fields fields.Set
}

// everything lists every object of a scope, without selectors.
func (p *inProcess) everything(tb testing.TB, scope int) []fuzzObject {
	tb.Helper()
	s := fuzzScopes[scope]
	res, _ := p.reg.Resource(s.res)
	w := p.mustDo(tb, http.StatusOK, "GET", s.path, "", "")
	var list unstructured.UnstructuredList
	if err := list.UnmarshalJSON(w.Body.Bytes()); err != nil {
		tb.Fatal(err)
	}
	var out []fuzzObject
	for _, u := range list.Items {
		obj := res.New()
		data, err := u.MarshalJSON()
		if err != nil {
			tb.Fatal(err)
		}
		if err := json.Unmarshal(data, obj); err != nil {
			tb.Fatal(err)
		}
		fs := fields.Set{}
		for _, l := range res.Kind.Fields.Labels {
			fs[l] = res.Kind.Fields.Value(obj, l)
		}
		out = append(out, fuzzObject{key: obj.GetNamespace() + "/" + obj.GetName(), labels: obj.GetLabels(), fields: fs})
	}
	return out
}

// listKeys lists a scope with extra query parameters; ok is false when
// the answer is not 200.
func (p *inProcess) listKeys(tb testing.TB, scope int, query url.Values) (keys []string, code int) {
	tb.Helper()
	target := fuzzScopes[scope].path + "?" + query.Encode()
	w := p.do("GET", target, "", nil)
	p.checkAnswer(tb, w, "GET "+target)
	if w.Code != http.StatusOK {
		return nil, w.Code
	}
	var list unstructured.UnstructuredList
	if err := list.UnmarshalJSON(w.Body.Bytes()); err != nil {
		tb.Fatalf("GET %s: %v: %s", target, err, w.Body)
	}
	for _, u := range list.Items {
		keys = append(keys, u.GetNamespace()+"/"+u.GetName())
	}
	return keys, w.Code
}

// FuzzLabelSelector lists with label selectors and compares the answer
// with apimachinery's own matching of the same selector: the watch cache
// matches labels with its own code (internal/watchcache/labels.go).
func FuzzLabelSelector(f *testing.F) {
	p := newFuzzServer(f)
	all := make([][]fuzzObject, len(fuzzScopes))
	for i := range fuzzScopes {
		all[i] = p.everything(f, i)
	}
	f.Fuzz(func(t *testing.T, selector string, scope uint8) {
		i := int(scope) % len(fuzzScopes)
		keys, code := p.listKeys(t, i, url.Values{"labelSelector": {selector}})
		sel, err := labels.Parse(selector)
		if err == nil {
			if reqs, _ := sel.Requirements(); len(reqs) > maxSelectorRequirements {
				err = fmt.Errorf("%d requirements", len(reqs))
			}
		}
		if err != nil {
			if code != http.StatusBadRequest {
				t.Fatalf("labelSelector %q does not parse (%v) but the list answered %d", selector, err, code)
			}
			return
		}
		if code != http.StatusOK {
			t.Fatalf("labelSelector %q: %d", selector, code)
		}
		var want []string
		for _, o := range all[i] {
			if sel.Matches(o.labels) {
				want = append(want, o.key)
			}
		}
		if !slices.Equal(want, keys) {
			t.Fatalf("labelSelector %q (%s) on %s: got %q, want %q", selector, sel, fuzzScopes[i].path, keys, want)
		}
	})
}

// FuzzFieldSelector lists with field selectors and compares the answer
// with apimachinery's matching of the resource's field labels.
func FuzzFieldSelector(f *testing.F) {
	p := newFuzzServer(f)
	all := make([][]fuzzObject, len(fuzzScopes))
	for i := range fuzzScopes {
		all[i] = p.everything(f, i)
	}
	f.Fuzz(func(t *testing.T, selector string, scope uint8) {
		i := int(scope) % len(fuzzScopes)
		res, _ := p.reg.Resource(fuzzScopes[i].res)
		keys, code := p.listKeys(t, i, url.Values{"fieldSelector": {selector}})
		sel, err := fields.ParseSelector(selector)
		if err == nil {
			err = supportedFields(res, sel)
		}
		if err == nil && len(sel.Requirements()) > maxSelectorRequirements {
			err = fmt.Errorf("%d requirements", len(sel.Requirements()))
		}
		if err != nil {
			if code != http.StatusBadRequest {
				t.Fatalf("fieldSelector %q is not valid (%v) but the list answered %d", selector, err, code)
			}
			return
		}
		if code != http.StatusOK {
			t.Fatalf("fieldSelector %q: %d", selector, code)
		}
		var want []string
		for _, o := range all[i] {
			if sel.Matches(o.fields) {
				want = append(want, o.key)
			}
		}
		if !slices.Equal(want, keys) {
			t.Fatalf("fieldSelector %q (%s) on %s: got %q, want %q", selector, sel, fuzzScopes[i].path, keys, want)
		}
	})
}

func supportedFields(res resources.Resource, sel fields.Selector) error {
	for _, r := range sel.Requirements() {
		if !slices.Contains(res.Kind.Fields.Labels, r.Field) {
			return fmt.Errorf("unsupported field %s", r.Field)
		}
	}
	return nil
}

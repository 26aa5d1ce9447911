package httpserver

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzContinueToken lists with continue tokens: an answer is 200, 400
// (a token that does not decode), 410 (an expired one) or 504 (one from
// the future, answered within the request's short timeout), and a page
// holds only objects of the list's own scope, in order, at most limit of
// them, whatever the token says.
func FuzzContinueToken(f *testing.F) {
	p := newFuzzServer(f)
	all := make([][]string, len(fuzzScopes))
	for i := range fuzzScopes {
		for _, o := range p.everything(f, i) {
			all[i] = append(all[i], o.key)
		}
	}
	f.Fuzz(func(t *testing.T, token string, limit int64, scope uint8) {
		i := int(scope) % len(fuzzScopes)
		q := url.Values{"continue": {token}, "timeout": {"50ms"}}
		if limit != 0 {
			q.Set("limit", strconv.FormatInt(limit, 10))
		}
		keys, code := p.listKeys(t, i, q)
		switch code {
		case http.StatusOK:
		case http.StatusBadRequest, http.StatusGone, http.StatusGatewayTimeout:
			return
		default:
			t.Fatalf("continue %q limit %d: %d", token, limit, code)
		}
		if limit > 0 && int64(len(keys)) > limit {
			t.Fatalf("continue %q limit %d: %d items", token, limit, len(keys))
		}
		if !slices.IsSorted(keys) {
			t.Fatalf("continue %q: items out of order: %q", token, keys)
		}
		for _, k := range keys {
			if !slices.Contains(all[i], k) {
				t.Fatalf("continue %q on %s returned %s, outside the list", token, fuzzScopes[i].path, k)
			}
			if ns := fuzzScopes[i].namespace; ns != "" && !strings.HasPrefix(k, ns+"/") {
				t.Fatalf("continue %q on %s returned %s from another namespace", token, fuzzScopes[i].path, k)
			}
		}
	})
}

// FuzzResourceVersion reads with resourceVersion and resourceVersionMatch
// parameters, a single object or a list: the answer is 200, 400, 410,
// 422 or 504 (a version from the future, answered within the request's
// short timeout).
func FuzzResourceVersion(f *testing.F) {
	p := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, rv, match string, limit int64, get bool, scope uint8) {
		target := fuzzScopes[int(scope)%len(fuzzScopes)].path
		if get {
			target = fuzzKinds[int(scope)%len(fuzzKinds)].seed
		}
		q := url.Values{"resourceVersion": {rv}, "timeout": {"50ms"}}
		if match != "" {
			q.Set("resourceVersionMatch", match)
		}
		if limit != 0 {
			q.Set("limit", strconv.FormatInt(limit, 10))
		}
		target += "?" + q.Encode()
		w := p.do("GET", target, "", nil)
		p.checkAnswer(t, w, "GET "+target)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusGone, http.StatusUnprocessableEntity, http.StatusGatewayTimeout:
		default:
			t.Fatalf("GET %s: %d %s", target, w.Code, w.Body)
		}
	})
}

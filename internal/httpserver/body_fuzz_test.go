package httpserver

import (
	"fmt"
	"net/http"
	"testing"
)

// The fuzz targets drive an in-process server (inprocess_test.go) with
// what a hostile client may send, and check what every answer must be:
// a Status for every error, no 500 that kube-apiserver would not give,
// no panic, and, for dry-run writes, an unchanged store. Their seed
// corpora (testdata/fuzz) hold real client-go payloads; TestWriteFuzzSeeds
// (seeds_test.go) regenerates them.

// fuzzKinds are the resources the targets write: the path of the
// collection, and of an existing object named "seed".
var fuzzKinds = []struct{ collection, seed string }{
	{"/apis/coordination.k8s.io/v1/namespaces/default/leases", "/apis/coordination.k8s.io/v1/namespaces/default/leases/seed"},
	{"/api/v1/namespaces/default/endpoints", "/api/v1/namespaces/default/endpoints/seed"},
	{"/api/v1/namespaces", "/api/v1/namespaces/seed"},
}

var fuzzBodyTypes = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}

var fuzzFieldValidation = []string{"", "Strict", "Warn", "Ignore"}

// newFuzzServer starts an in-process server holding a lease, an
// Endpoints and a namespace named "seed", and leases with labels in the
// namespaces default, team-a and team-b.
func newFuzzServer(tb testing.TB) *inProcess {
	tb.Helper()
	p := newInProcess(tb, nil)
	p.mustDo(tb, http.StatusCreated, "POST", "/api/v1/namespaces", "application/json",
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"seed","labels":{"team":"seed"}}}`)
	for _, ns := range []string{"team-a", "team-b"} {
		p.mustDo(tb, http.StatusCreated, "POST", "/api/v1/namespaces", "application/json",
			fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, ns))
	}
	p.mustDo(tb, http.StatusCreated, "POST", fuzzKinds[0].collection, "application/json",
		`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"seed","labels":{"app":"web","tier":"front"}},"spec":{"holderIdentity":"a","leaseDurationSeconds":15,"acquireTime":"2026-01-01T00:00:00.000000Z","renewTime":"2026-01-01T00:00:05.000000Z","leaseTransitions":1}}`)
	p.mustDo(tb, http.StatusCreated, "POST", fuzzKinds[1].collection, "application/json",
		`{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"seed","labels":{"app":"web"}},"subsets":[{"addresses":[{"ip":"10.0.0.1","nodeName":"n1"},{"ip":"10.0.0.2"}],"notReadyAddresses":[{"ip":"10.0.0.3"}],"ports":[{"name":"http","port":80},{"name":"https","port":443,"protocol":"TCP"}]}]}`)
	labels := []string{`{"app":"web","env":"prod"}`, `{"app":"db","env":"dev","tier":"back"}`, `{"app":"web","env":"dev","example.com/owner":"x"}`, `{}`}
	for i, ns := range []string{"default", "team-a", "team-b"} {
		for j, l := range labels {
			p.mustDo(tb, http.StatusCreated, "POST", "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases", "application/json",
				fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l%d-%d","labels":%s},"spec":{"holderIdentity":"h%d"}}`, i, j, l, j))
		}
	}
	return p
}

// FuzzDecodeBody sends request bodies of each resource, in each content
// type, as dry-run creates (POST) and updates (PUT of an existing object).
func FuzzDecodeBody(f *testing.F) {
	p := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte, contentType, kind, method, validation uint8) {
		k := fuzzKinds[int(kind)%len(fuzzKinds)]
		verb, target := "POST", k.collection
		if method%2 == 1 {
			verb, target = "PUT", k.seed
		}
		target += "?dryRun=All&fieldValidation=" + fuzzFieldValidation[int(validation)%len(fuzzFieldValidation)]
		before := p.revision(t)
		w := p.do(verb, target, fuzzBodyTypes[int(contentType)%len(fuzzBodyTypes)], body)
		p.checkAnswer(t, w, verb+" "+target)
		if after := p.revision(t); after != before {
			t.Fatalf("%s %s changed the store: revision %d, then %d", verb, target, before, after)
		}
	})
}

package auth

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// FuzzParsePolicies parses policy files and authorizes a few requests with
// what parsed: nothing panics, and a policy file never lets the anonymous
// user in through "*" (which means authenticated users only).
func FuzzParsePolicies(f *testing.F) {
	attrs := []Attributes{
		{User: userOf("alice"), Verb: "get", ResourceRequest: true, APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: "a"},
		{User: userOf("bob", "devs"), Verb: "update", ResourceRequest: true, Resource: "namespaces", Subresource: "status", Name: "a", Namespace: "a"},
		{User: userOf("carol"), Verb: "list", ResourceRequest: true, Resource: "endpoints"},
		{User: userOf("dave"), Verb: "get", Path: "/apis/coordination.k8s.io"},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pl, _, err := ParsePolicies(data)
		if err != nil {
			return
		}
		for _, a := range attrs {
			pl.Authorize(a)
			pl.RulesFor(a.User, a.Namespace)
			anon := a
			anon.User = anonymousUser()
			if d, _ := pl.Authorize(anon); d == DecisionAllow && !mentionsUnauthenticated(pl) {
				t.Fatalf("the anonymous user is allowed %+v by %+v", anon, pl)
			}
		}
	})
}

// mentionsUnauthenticated reports whether a policy names the anonymous
// user or its group, the only way to let it in.
func mentionsUnauthenticated(pl PolicyList) bool {
	for _, p := range pl {
		if p.User == Anonymous || p.Group == AllUnauthenticated {
			return true
		}
	}
	return false
}

// FuzzParseTokens parses token files: nothing panics, and every token
// found maps to the user of its line.
func FuzzParseTokens(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		tokens, _, err := ParseTokens(data)
		if err != nil {
			return
		}
		for tok, u := range tokens {
			if tok == "" {
				t.Fatalf("empty token for %+v", u)
			}
		}
	})
}

// TestWriteFuzzSeeds writes the seed corpora of this package's fuzz
// targets: kube-apiserver's example policy file, the policies of these
// tests, and token files in kube-apiserver's documented format.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("LEASEHOLD_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set LEASEHOLD_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz")
	}
	// k8s.io/kubernetes/pkg/auth/authorizer/abac/example_policy_file.jsonl
	example := `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group":"system:authenticated",  "nonResourcePath": "*", "readonly": true}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group":"system:unauthenticated", "nonResourcePath": "*", "readonly": true}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"admin",     "namespace": "*",              "resource": "*",         "apiGroup": "*"                   }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"scheduler", "namespace": "*",              "resource": "pods",                       "readonly": true }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"alice",     "namespace": "projectCaribou", "resource": "*",         "apiGroup": "*"                   }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"bob",       "namespace": "projectCaribou", "resource": "*",         "apiGroup": "*", "readonly": true }}
`
	policies := map[string]string{
		"kube-example": example,
		"tests":        testPolicies,
		"v0":           "{\"user\":\"a\"}\n{\"readonly\":true}\n{\"group\":\"*\",\"namespace\":\"x\",\"resource\":\"leases\"}\n",
		"comments":     "# a comment\n\n   \n{\"apiVersion\":\"abac.authorization.kubernetes.io/v1beta1\",\"kind\":\"Policy\",\"spec\":{\"user\":\"*\",\"nonResourcePath\":\"/apis/*\"}}",
	}
	tokens := map[string]string{
		"kube-doc": "31ada4fd-adec-460c-809a-9e56ceb75269,alice,alice-uid,\"group1,group2,group3\"\n",
		"columns":  "t1,u1,uid1\nt2,u2,uid2,g\nt3,u3,uid3,\"g1,g2\",extra\n,empty,uid\nt1,dup,uid\n",
		"quotes":   "\"tok,en\",\"us\"\"er\",uid\n",
	}
	write := func(target string, files map[string]string) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range files {
			data := "go test fuzz v1\n[]byte(" + strconv.Quote(content) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("FuzzParsePolicies", policies)
	write("FuzzParseTokens", tokens)
}

package auth

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

const testPolicies = `
# Comments and blank lines are skipped.

{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"*","readonly":true,"nonResourcePath":"/api"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"*","nonResourcePath":"/custom"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"*","nonResourcePath":"/root/*"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"ops","nonResourcePath":"*"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"*","readonly":true,"namespace":"*","resource":"endpoints","apiGroup":""}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"alice","namespace":"team-a","resource":"*","apiGroup":"*"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"bob","readonly":true,"namespace":"team-a","resource":"*","apiGroup":"*"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"carol","namespace":"team-b","resource":"leases","apiGroup":"coordination.k8s.io"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"watchers","readonly":true,"namespace":"*","resource":"leases","apiGroup":"coordination.k8s.io"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"nsadmin","resource":"namespaces","apiGroup":""}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"system:unauthenticated","readonly":true,"namespace":"public","resource":"leases","apiGroup":"coordination.k8s.io"}}
`

func userOf(name string, groups ...string) User {
	return User{Name: name, Groups: append(groups, AllAuthenticated)}
}

func TestABAC(t *testing.T) {
	pl, warnings, err := ParsePolicies([]byte(testPolicies))
	if err != nil || len(warnings) > 0 {
		t.Fatalf("parse: %v %v", err, warnings)
	}
	alice, bob, carol, chuck := userOf("alice"), userOf("bob"), userOf("carol"), userOf("chuck")
	watcher, ops, nsadmin := userOf("dave", "watchers"), userOf("ops"), userOf("nsadmin")
	anon := anonymousUser()
	lease := func(u User, verb, ns string) Attributes {
		return Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: "coordination.k8s.io", APIVersion: "v1", Resource: "leases", Namespace: ns}
	}
	path := func(u User, verb, p string) Attributes { return Attributes{User: u, Verb: verb, Path: p} }

	cases := []struct {
		name  string
		attrs Attributes
		allow bool
	}{
		// A namespace policy: everything inside, nothing outside, nothing
		// across namespaces.
		{"alice gets a lease in her namespace", lease(alice, "get", "team-a"), true},
		{"alice updates a lease in her namespace", lease(alice, "update", "team-a"), true},
		{"alice deletes a collection in her namespace", lease(alice, "deletecollection", "team-a"), true},
		{"alice watches in her namespace", lease(alice, "watch", "team-a"), true},
		{"alice gets a lease elsewhere", lease(alice, "get", "team-b"), false},
		{"alice lists leases across namespaces", lease(alice, "list", ""), false},
		{"alice watches across namespaces", lease(alice, "watch", ""), false},
		// readonly allows get, list and watch only.
		{"bob reads", lease(bob, "list", "team-a"), true},
		{"bob watches", lease(bob, "watch", "team-a"), true},
		{"bob creates", lease(bob, "create", "team-a"), false},
		{"bob patches", lease(bob, "patch", "team-a"), false},
		{"bob deletes", lease(bob, "delete", "team-a"), false},
		// Resource and API group must match.
		{"carol updates leases", lease(carol, "update", "team-b"), true},
		{"carol updates endpoints", Attributes{User: carol, Verb: "update", ResourceRequest: true, Resource: "endpoints", Namespace: "team-b"}, false},
		{"carol's leases in another group", Attributes{User: carol, Verb: "get", ResourceRequest: true, APIGroup: "other.io", Resource: "leases", Namespace: "team-b"}, false},
		// A policy for every namespace covers lists and watches across them.
		{"a watcher lists across namespaces", lease(watcher, "list", ""), true},
		{"a watcher watches across namespaces", lease(watcher, "watch", ""), true},
		{"a watcher cannot write", lease(watcher, "update", "x"), false},
		// "*" as user means authenticated users, not the anonymous one.
		{"anyone reads endpoints", Attributes{User: chuck, Verb: "get", ResourceRequest: true, Resource: "endpoints", Namespace: "x"}, true},
		{"the anonymous user does not", Attributes{User: anon, Verb: "get", ResourceRequest: true, Resource: "endpoints", Namespace: "x"}, false},
		{"the anonymous user reads what its group may", lease(anon, "get", "public"), true},
		// Subresources match by resource.
		{"nsadmin updates a namespace's status", Attributes{User: nsadmin, Verb: "update", ResourceRequest: true, Resource: "namespaces", Subresource: "status", Namespace: "", Name: "x"}, true},
		// Non-resource paths.
		{"GET /api", path(chuck, "get", "/api"), true},
		{"POST /api is not read-only", path(chuck, "post", "/api"), false},
		{"PUT /custom", path(chuck, "put", "/custom"), true},
		{"/root is not /root/*", path(chuck, "get", "/root"), false},
		{"/root/ matches /root/*", path(chuck, "get", "/root/"), true},
		{"/root/a/b matches /root/*", path(chuck, "get", "/root/a/b"), true},
		{"ops reads anything", path(ops, "get", "/debug/pprof/heap"), true},
		{"ops is no resource policy", lease(ops, "get", "x"), false},
		{"a resource policy is no path policy", path(alice, "get", "/api/v1"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, reason := pl.Authorize(tc.attrs)
			if (d == DecisionAllow) != tc.allow {
				t.Fatalf("decision %v, want allow %v", d, tc.allow)
			}
			if !tc.allow && reason != "No policy matched." {
				t.Errorf("reason %q", reason)
			}
		})
	}
}

func TestParsePolicies(t *testing.T) {
	cases := []struct {
		name     string
		file     string
		want     PolicyList
		warnings int
		err      string
	}{
		{name: "empty", file: "", want: PolicyList{}},
		{name: "no final newline", file: `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"a","namespace":"n","resource":"*","apiGroup":"*"}}`,
			want: PolicyList{{User: "a", Namespace: "n", Resource: "*", APIGroup: "*"}}},
		{name: "star user is every authenticated user", file: `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"*","group":"x","readonly":true,"nonResourcePath":"*"}}`,
			want: PolicyList{{Group: AllAuthenticated, Readonly: true, NonResourcePath: "*"}}},
		{name: "v0 without subject", file: `{"readonly":true}`, warnings: 1,
			want: PolicyList{{Group: AllAuthenticated, Readonly: true, Namespace: "*", Resource: "*", APIGroup: "*", NonResourcePath: "*"}}},
		{name: "v0 with user and namespace", file: `{"user":"a","namespace":"n"}`, warnings: 1,
			want: PolicyList{{User: "a", Namespace: "n", Resource: "*", APIGroup: "*"}}},
		{name: "v0 versioned", file: `{"apiVersion":"abac.authorization.kubernetes.io/v0","kind":"Policy","user":"a","resource":"leases"}`, warnings: 1,
			want: PolicyList{{User: "a", Namespace: "*", Resource: "leases", APIGroup: "*"}}},
		{name: "unknown field", file: `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"a","namesapce":"n"}}`, err: `line 1: `},
		{name: "unknown version", file: "\n" + `{"apiVersion":"abac.authorization.kubernetes.io/v2","kind":"Policy","spec":{"user":"a"}}`, err: `line 2: `},
		{name: "spec without version", file: `{"spec":{"user":"a","namespace":"n"}}`, err: "needs apiVersion"},
		{name: "v1beta1 fields outside spec", file: `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","user":"a","spec":{}}`, err: "keep user"},
		{name: "v1beta1 without spec", file: `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy"}`, err: "without spec"},
		{name: "not JSON", file: "user=a", err: "line 1"},
		{name: "wrong type", file: `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"readonly":"yes"}}`, err: "line 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings, err := ParsePolicies([]byte(tc.file))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("policies (-want +got):\n%s", diff)
			}
			if len(warnings) != tc.warnings {
				t.Errorf("warnings %q, want %d", warnings, tc.warnings)
			}
		})
	}
}

func newPolicyFile(t *testing.T, content string) *PolicyFile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.jsonl")
	writeFile(t, path, content)
	pf, err := NewPolicyFile(path, quietReload())
	if err != nil {
		t.Fatal(err)
	}
	return pf
}

func TestAuthorizer(t *testing.T) {
	withPolicies := NewAuthorizer(DefaultRules(), ABAC(newPolicyFile(t, testPolicies)))
	alwaysAllow := NewAuthorizer(DefaultRules(), AlwaysAllow())
	master := userOf("root", SystemPrivilegedGroup)
	chuck, anon := userOf("chuck"), anonymousUser()
	lease := func(u User, verb string) Attributes {
		return Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: "x"}
	}
	path := func(u User, verb, p string) Attributes { return Attributes{User: u, Verb: verb, Path: p} }
	review := func(u User, group, resource string) Attributes {
		return Attributes{User: u, Verb: "create", ResourceRequest: true, APIGroup: group, Resource: resource}
	}

	cases := []struct {
		name        string
		z           *Authorizer
		attrs       Attributes
		allow       bool
		denyMessage string
	}{
		{"masters may do everything", withPolicies, lease(master, "delete"), true, ""},
		{"masters may read profiles", withPolicies, path(master, "get", "/debug/pprof/"), true, ""},
		{"a user without policy", withPolicies, lease(chuck, "get"), false, "No policy matched."},
		// kube-apiserver's default RBAC bindings.
		{"discovery for authenticated users", withPolicies, path(chuck, "get", "/apis/coordination.k8s.io/v1"), true, ""},
		{"openapi for authenticated users", withPolicies, path(chuck, "get", "/openapi/v3"), true, ""},
		{"discovery is read-only", withPolicies, path(chuck, "post", "/apis"), false, "No policy matched."},
		{"no profiles by default", withPolicies, path(chuck, "get", "/debug/pprof/"), false, "No policy matched."},
		{"no discovery for the anonymous user", withPolicies, path(anon, "get", "/apis"), false, "No policy matched."},
		{"version for the anonymous user", withPolicies, path(anon, "get", "/version"), true, ""},
		{"whoami", withPolicies, review(chuck, "authentication.k8s.io", "selfsubjectreviews"), true, ""},
		{"can-i", withPolicies, review(chuck, "authorization.k8s.io", "selfsubjectaccessreviews"), true, ""},
		{"can-i --list", withPolicies, review(chuck, "authorization.k8s.io", "selfsubjectrulesreviews"), true, ""},
		{"no whoami for the anonymous user", withPolicies, review(anon, "authentication.k8s.io", "selfsubjectreviews"), false, "No policy matched."},
		{"reviews are created, not read", withPolicies, Attributes{User: chuck, Verb: "list", ResourceRequest: true, APIGroup: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, false, "No policy matched."},
		// AlwaysAllow, as kube-apiserver's: everyone, the anonymous user too.
		{"every authenticated user may do everything", alwaysAllow, lease(chuck, "delete"), true, ""},
		{"the anonymous user may too", alwaysAllow, lease(anon, "get"), true, ""},
		{"the anonymous user reads health", alwaysAllow, path(anon, "get", "/healthz"), true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, reason := tc.z.Authorize(tc.attrs)
			if (d == DecisionAllow) != tc.allow {
				t.Fatalf("decision %v (%q), want allow %v", d, reason, tc.allow)
			}
			if !tc.allow && reason != tc.denyMessage {
				t.Errorf("reason %q, want %q", reason, tc.denyMessage)
			}
		})
	}
}

func TestRulesFor(t *testing.T) {
	z := NewAuthorizer(DefaultRules(), ABAC(newPolicyFile(t, testPolicies)))
	everything := Rules{
		Resource:    []ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
		NonResource: []NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
	}
	rulesFor := func(z *Authorizer, u User, ns string) Rules {
		t.Helper()
		r, err := z.RulesFor(u, ns)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if diff := cmp.Diff(everything, rulesFor(z, userOf("root", SystemPrivilegedGroup), "x")); diff != "" {
		t.Errorf("masters (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(everything, rulesFor(NewAuthorizer(AlwaysAllow()), userOf("chuck"), "x")); diff != "" {
		t.Errorf("AlwaysAllow (-want +got):\n%s", diff)
	}
	got := rulesFor(z, userOf("bob"), "team-a")
	var resources []ResourceRule
	for _, r := range got.Resource {
		if r.APIGroups[0] != "authorization.k8s.io" && r.APIGroups[0] != "authentication.k8s.io" {
			resources = append(resources, r)
		}
	}
	want := []ResourceRule{
		{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"endpoints"}},
		{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	}
	if diff := cmp.Diff(want, resources); diff != "" {
		t.Errorf("bob in team-a (-want +got):\n%s", diff)
	}
	if got := rulesFor(z, userOf("bob"), "team-b"); len(got.Resource) != 3 { // endpoints and the two review rules
		t.Errorf("bob in team-b: %+v", got.Resource)
	}
}

func TestPolicyFileReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "policy.jsonl")
		writeFile(t, path, `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"alice","namespace":"a","resource":"*","apiGroup":"*"}}`)
		pf, err := NewPolicyFile(path, quietReload())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- pf.Run(ctx) }()
		defer func() { cancel(); <-done }()
		z := NewAuthorizer(DefaultRules(), ABAC(pf))
		allowed := func(ns string) bool {
			d, _ := z.Authorize(Attributes{User: userOf("alice"), Verb: "get", ResourceRequest: true, Resource: "leases", Namespace: ns})
			return d == DecisionAllow
		}
		if !allowed("a") || allowed("b") {
			t.Fatal("initial policy wrong")
		}
		writeFile(t, path, `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"alice","namespace":"b","resource":"*","apiGroup":"*"}}`)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if allowed("a") || !allowed("b") {
			t.Fatal("policy not reloaded")
		}
		writeFile(t, path, `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"alice","namespace":"*","typo":1}}`)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !allowed("b") || allowed("c") {
			t.Fatal("a bad policy file replaced the policies")
		}
	})
}

package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/leasehold/leasehold/internal/auth"
)

// kubeEncode is how kube-apiserver writes an event: encoding/json's
// Encoder, kind and apiVersion set.
func kubeEncode(t *testing.T, ev auditv1.Event) string {
	t.Helper()
	ev.TypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: "audit.k8s.io/v1"}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(&ev); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestEncodeEvent(t *testing.T) {
	at := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600)))
	full := auditv1.Event{
		Level: auditv1.LevelRequestResponse, AuditID: "0d1a", Stage: auditv1.StageResponseComplete,
		RequestURI: "/apis/coordination.k8s.io/v1/namespaces/a/leases/l?fieldManager=x&y=<z>", Verb: "update",
		User: authnv1.UserInfo{Username: "alice", UID: "u", Groups: []string{"g", "system:authenticated"},
			Extra: map[string]authnv1.ExtraValue{"b": {"2"}, "a": {"1", "\u2028"}, "n": nil}},
		ImpersonatedUser:       &authnv1.UserInfo{Username: "bob", Groups: []string{"system:authenticated"}},
		AuthenticationMetadata: &auditv1.AuthenticationMetadata{ImpersonationConstraint: "impersonate:user-info"},
		SourceIPs:              []string{"127.0.0.1", "::1"},
		UserAgent:              "kubectl/v1.37 \"quoted\" \\ \t\x01 \xff é",
		ObjectRef: &auditv1.ObjectReference{Resource: "leases", Namespace: "a", Name: "l", UID: "uid", APIGroup: "coordination.k8s.io",
			APIVersion: "v1", ResourceVersion: "12", Subresource: "status"},
		ResponseStatus:           &metav1.Status{Code: 200},
		RequestObject:            &runtime.Unknown{Raw: []byte("{\"a\": \"<b>&\",\n \"c\": [1, 2]}\n"), ContentType: runtime.ContentTypeJSON},
		ResponseObject:           &runtime.Unknown{Raw: []byte(`{"kind":"Lease"}`), ContentType: runtime.ContentTypeJSON},
		RequestReceivedTimestamp: at,
		StageTimestamp:           at,
		Annotations:              map[string]string{"z": "1", "authorization.k8s.io/reason": "", "authorization.k8s.io/decision": "allow"},
	}
	failed := auditv1.Event{
		Level: auditv1.LevelMetadata, AuditID: "x", Stage: auditv1.StageResponseStarted, RequestURI: "/api", Verb: "get",
		ResponseStatus: &metav1.Status{Status: metav1.StatusFailure, Message: "Unauthorized", Reason: metav1.StatusReasonUnauthorized, Code: 401,
			Details: &metav1.StatusDetails{Name: "n", Causes: []metav1.StatusCause{{Type: "t", Message: "m", Field: "f"}}}},
		RequestReceivedTimestamp: at, StageTimestamp: at,
	}
	minimal := auditv1.Event{Level: auditv1.LevelMetadata, Stage: auditv1.StageRequestReceived, ObjectRef: &auditv1.ObjectReference{},
		ResponseStatus: &metav1.Status{}, AuthenticationMetadata: &auditv1.AuthenticationMetadata{}}
	for name, ev := range map[string]auditv1.Event{"full": full, "failed": failed, "minimal": minimal} {
		t.Run(name, func(t *testing.T) {
			got := string(appendEvent(nil, &ev))
			if want := kubeEncode(t, ev); got != want {
				t.Errorf("encoding differs from encoding/json:\n got %s\nwant %s", got, want)
			}
		})
	}
	// A record's authorization annotations, kept apart from the map.
	extra := [][2]string{{"authorization.k8s.io/decision", "forbid"}, {"authorization.k8s.io/reason", "no <rule>"}}
	for name, ev := range map[string]auditv1.Event{"annotated": full, "annotated minimal": minimal} {
		t.Run(name, func(t *testing.T) {
			got := string(appendEventAnnotated(nil, &ev, extra))
			merged := maps.Clone(ev.Annotations)
			if merged == nil {
				merged = map[string]string{}
			}
			for _, kv := range extra {
				merged[kv[0]] = kv[1]
			}
			ev.Annotations = merged
			if want := kubeEncode(t, ev); got != want {
				t.Errorf("encoding differs from encoding/json:\n got %s\nwant %s", got, want)
			}
		})
	}
	// Timestamps: microseconds in UTC, the years AppendFormat writes
	// otherwise.
	for _, at := range []time.Time{time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 24, 23, 59, 59, 0, time.FixedZone("y", -7200))} {
		ev := minimal
		ev.RequestReceivedTimestamp, ev.StageTimestamp = metav1.NewMicroTime(at), metav1.NewMicroTime(at.Add(time.Microsecond))
		if got, want := string(appendEvent(nil, &ev)), kubeEncode(t, ev); got != want {
			t.Errorf("%v:\n got %s\nwant %s", at, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<&>", "\u2028\u2029", "\xff\xfe", "\"\\\b\f\n\r\t\x00\x1f\x7f", "é漢字🙂"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

const testPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
- level: RequestResponse
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
    resourceNames: ["important"]
- level: Request
  verbs: ["delete"]
  namespaces: ["prod"]
- level: Metadata
  userGroups: ["auditors"]
  omitStages: [ResponseComplete]
- level: Metadata
  resources:
  - group: ""
    resources: ["namespaces/status", "*/finalize"]
- level: Metadata
  nonResourceURLs: ["/healthz*", "/version"]
`

func TestPolicy(t *testing.T) {
	p, warnings, err := ParsePolicy([]byte(testPolicy))
	if err != nil || len(warnings) > 0 {
		t.Fatalf("%v %v", err, warnings)
	}
	u := func(name string, groups ...string) auth.User { return auth.User{Name: name, Groups: groups} }
	lease := func(user auth.User, verb, ns, name string) auth.Attributes {
		return auth.Attributes{User: user, Verb: verb, ResourceRequest: true, APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: name}
	}
	cases := []struct {
		name    string
		a       auth.Attributes
		hasUser bool
		want    auditv1.Level
		omitted stages
	}{
		{"a user left out", lease(u("system:kube-proxy", "auditors"), "get", "x", "important"), true, auditv1.LevelNone, stageRequestReceived},
		{"an important lease", lease(u("alice"), "update", "x", "important"), true, auditv1.LevelRequestResponse, stageRequestReceived},
		{"another lease", lease(u("alice"), "update", "x", "other"), true, auditv1.LevelNone, stageRequestReceived},
		{"deletes in prod", lease(u("alice"), "delete", "prod", "other"), true, auditv1.LevelRequest, stageRequestReceived},
		{"deletes elsewhere", lease(u("alice"), "delete", "dev", "other"), true, auditv1.LevelNone, stageRequestReceived},
		{"a group, stages joined", lease(u("dave", "auditors"), "get", "x", "y"), true, auditv1.LevelMetadata, stageRequestReceived | stageResponseComplete},
		{"no user, no group match", lease(u(""), "get", "x", "y"), false, auditv1.LevelNone, stageRequestReceived},
		{"a subresource", auth.Attributes{User: u("a"), Verb: "update", ResourceRequest: true, Resource: "namespaces", Subresource: "status", Name: "n", Namespace: "n"}, true, auditv1.LevelMetadata, stageRequestReceived},
		{"*/subresource", auth.Attributes{User: u("a"), Verb: "update", ResourceRequest: true, Resource: "namespaces", Subresource: "finalize"}, true, auditv1.LevelMetadata, stageRequestReceived},
		{"the resource is not its subresource", auth.Attributes{User: u("a"), Verb: "update", ResourceRequest: true, Resource: "namespaces"}, true, auditv1.LevelNone, stageRequestReceived},
		{"a path prefix", auth.Attributes{User: u("a"), Verb: "get", Path: "/healthz/ping"}, true, auditv1.LevelMetadata, stageRequestReceived},
		{"another path", auth.Attributes{User: u("a"), Verb: "get", Path: "/apis"}, true, auditv1.LevelNone, stageRequestReceived},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := p.evaluate(&tc.a, tc.hasUser)
			if got.level != tc.want || got.omitStages != tc.omitted {
				t.Errorf("level %s, omitted %b; want %s, %b", got.level, got.omitStages, tc.want, tc.omitted)
			}
		})
	}
}

func TestPolicyErrors(t *testing.T) {
	for name, c := range map[string]struct{ policy, err string }{
		"no rules":      {"apiVersion: audit.k8s.io/v1\nkind: Policy\n", "loaded illegal policy with 0 rules"},
		"a bad level":   {"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n", `rules[0].level: Unsupported value: "Everything"`},
		"no apiVersion": {"kind: Policy\nrules:\n- level: None\n", "unknown group version field"},
		"v1beta1":       {"apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules:\n- level: None\n", "failed decoding"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := ParsePolicy([]byte(c.policy)); err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("error %v, want one containing %q", err, c.err)
			}
		})
	}
	// Unknown fields are warned about, as kube-apiserver does.
	_, warnings, err := ParsePolicy([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  usres: [a]\n"))
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], `unknown field "rules[0].usres"`) {
		t.Errorf("%v %q", err, warnings)
	}
}

// blockingWriter holds every write until released, as a disk that stops
// taking writes does.
type blockingWriter struct {
	release chan struct{}
	mu      sync.Mutex
	written bytes.Buffer
	entered chan struct{}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written.Write(p)
}

// A writer stuck on the disk never holds up add: events beyond the buffer
// are dropped and counted in a log line.
func TestSinkDropsWhenFull(t *testing.T) {
	var logs bytes.Buffer
	w := &blockingWriter{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	s := newSink(w, 100, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- s.Run(ctx, time.Minute) }()
	line := []byte(strings.Repeat("x", 39) + "\n")
	s.add(line)
	<-w.entered // the writer holds the first event
	start := time.Now()
	for range 10 {
		s.add(line) // two fit the buffer, eight are dropped
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("add took %v with the writer stuck", d)
	}
	s.report()
	if !strings.Contains(logs.String(), "dropped=8") {
		t.Errorf("log: %s", logs.String())
	}
	close(w.release)
	cancel()
	<-done
	if got := strings.Count(w.written.String(), "\n"); got != 3 {
		t.Errorf("%d events written, want 3", got)
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("no space left on device")
}

func TestSinkCountsLostEvents(t *testing.T) {
	var logs bytes.Buffer
	s := newSink(&failingWriter{}, 1<<20, slog.New(slog.NewTextHandler(&logs, nil)))
	for range 3 {
		s.add([]byte("{}\n"))
	}
	s.flush(nil)
	s.report()
	if !strings.Contains(logs.String(), "lost=3") || !strings.Contains(logs.String(), "no space left on device") {
		t.Errorf("log: %s", logs.String())
	}
}

// Writes are whole lines of at most maxChunk bytes.
func TestSinkChunks(t *testing.T) {
	var writes [][]byte
	w := writerFunc(func(p []byte) (int, error) { writes = append(writes, append([]byte(nil), p...)); return len(p), nil })
	s := newSink(w, 8<<20, slog.New(slog.NewTextHandler(io.Discard, nil)))
	line := []byte(strings.Repeat("y", 999) + "\n")
	for range 3000 {
		s.add(line)
	}
	s.flush(nil)
	total := 0
	for _, p := range writes {
		if len(p) > maxChunk || p[len(p)-1] != '\n' {
			t.Fatalf("write of %d bytes ending %q", len(p), p[len(p)-1])
		}
		total += len(p)
	}
	if total != 3000*1000 || len(writes) < 3 {
		t.Errorf("%d bytes in %d writes", total, len(writes))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// BenchmarkEncode compares the hand-written encoder with encoding/json on
// a renewal's Metadata event.
func BenchmarkEncode(b *testing.B) {
	at := metav1.NewMicroTime(time.Now())
	ev := auditv1.Event{
		Level: auditv1.LevelMetadata, AuditID: "6872212b-f433-4c34-9f53-0cf006422a5b", Stage: auditv1.StageResponseComplete,
		RequestURI: "/apis/coordination.k8s.io/v1/namespaces/default/leases/lease-000001", Verb: "update",
		User:      authnv1.UserInfo{Username: "holder", UID: "uid", Groups: []string{"system:authenticated"}},
		SourceIPs: []string{"127.0.0.1"}, UserAgent: "leasehold/v0.1.0 (linux/amd64) kubernetes/$Format",
		ObjectRef:      &auditv1.ObjectReference{Resource: "leases", Namespace: "default", Name: "lease-000001", UID: "0d1a", APIGroup: "coordination.k8s.io", APIVersion: "v1", ResourceVersion: "1234"},
		ResponseStatus: &metav1.Status{Code: 200}, RequestReceivedTimestamp: at, StageTimestamp: at,
		Annotations: map[string]string{"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": `RBAC: allowed by RoleBinding "holder/default" of Role "holder" to User "holder"`},
	}
	b.Run("appendEvent", func(b *testing.B) {
		buf := make([]byte, 0, 2048)
		for b.Loop() {
			buf = appendEvent(buf[:0], &ev)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			_ = json.NewEncoder(&buf).Encode(&ev)
		}
	})
}

package integration

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
	"github.com/leasehold/leasehold/internal/transport"
)

// rawClient is an HTTP client with the admin credentials, for requests
// client-go would not send.
func rawClient(t testing.TB, ts *testserver.Server) *http.Client {
	t.Helper()
	tr, err := rest.TransportFor(ts.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr}
}

type rawResponse struct {
	code   int
	header http.Header
	body   []byte
}

func (r rawResponse) status(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, r.body)
	}
	return m
}

func do(t testing.TB, ts *testserver.Server, method, path string, header map[string]string, body string) rawResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := rawClient(t, ts).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResponse{code: resp.StatusCode, header: resp.Header, body: b}
}

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	const leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	cases := []struct {
		name, method, path string
		header             map[string]string
		body               string
		code               int
		reason, message    string
	}{
		{name: "unknown path", method: "GET", path: "/apis/nope/v1/things", code: 404, reason: "NotFound", message: "the server could not find the requested resource"},
		{name: "unknown resource", method: "GET", path: "/api/v1/pods", code: 404, reason: "NotFound"},
		{name: "POST on an item", method: "POST", path: leases + "/x", body: "{}", code: 405, reason: "MethodNotAllowed", message: "the server does not allow this method on the requested resource"},
		{name: "PUT on a collection", method: "PUT", path: leases, body: "{}", code: 405, reason: "MethodNotAllowed"},
		{name: "POST across namespaces", method: "POST", path: "/apis/coordination.k8s.io/v1/leases", body: "{}", code: 405, reason: "MethodNotAllowed"},
		{name: "deletecollection of namespaces", method: "DELETE", path: "/api/v1/namespaces", code: 405, reason: "MethodNotAllowed"},
		{name: "unknown content type", method: "POST", path: leases, header: map[string]string{"Content-Type": "text/plain"}, body: "x", code: 415, reason: "UnsupportedMediaType",
			message: "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"},
		{name: "nothing acceptable", method: "GET", path: leases, header: map[string]string{"Accept": "text/html"}, code: 406, reason: "NotAcceptable",
			message: "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"},
		{name: "malformed JSON", method: "POST", path: leases, header: map[string]string{"Content-Type": "application/json"}, body: "{", code: 400, reason: "BadRequest"},
		{name: "wrong apiVersion", method: "POST", path: leases, header: map[string]string{"Content-Type": "application/json"},
			body: `{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"x"}}`, code: 400, reason: "BadRequest",
			message: "the API version in the data (v1) does not match the expected API version (coordination.k8s.io/v1)"},
		{name: "namespace mismatch", method: "POST", path: leases, header: map[string]string{"Content-Type": "application/json"},
			body: `{"metadata":{"name":"x","namespace":"other"}}`, code: 400, reason: "BadRequest",
			message: "the namespace of the provided object does not match the namespace sent on the request"},
		{name: "name mismatch on PUT", method: "PUT", path: leases + "/a", header: map[string]string{"Content-Type": "application/json"},
			body: `{"metadata":{"name":"b"}}`, code: 400, reason: "BadRequest",
			message: "the name of the object (b) does not match the name on the URL (a)"},
		{name: "MicroTime without 6 digits", method: "POST", path: leases, header: map[string]string{"Content-Type": "application/json"},
			body: `{"metadata":{"name":"t"},"spec":{"renewTime":"2026-01-01T00:00:05Z"}}`, code: 400, reason: "BadRequest"},
		{name: "strict unknown field", method: "POST", path: leases + "?fieldValidation=Strict", header: map[string]string{"Content-Type": "application/json"},
			body: `{"metadata":{"name":"s"},"spec":{"foo":1}}`, code: 400, reason: "BadRequest",
			message: `Lease in version "v1" cannot be handled as a Lease: strict decoding error: unknown field "spec.foo"`},
		{name: "bad fieldValidation", method: "POST", path: leases + "?fieldValidation=Loose", header: map[string]string{"Content-Type": "application/json"},
			body: `{"metadata":{"name":"s"}}`, code: 422, reason: "Invalid"},
		{name: "body too large", method: "POST", path: leases, header: map[string]string{"Content-Type": "application/json"},
			body: `{"metadata":{"name":"big","annotations":{"a":"` + strings.Repeat("x", 3<<20) + `"}}}`, code: 413, reason: "RequestEntityTooLarge",
			message: "Request entity too large: limit is 3145728"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, ts, tc.method, tc.path, tc.header, tc.body)
			if r.code != tc.code {
				t.Fatalf("code %d, want %d: %s", r.code, tc.code, r.body)
			}
			st := r.status(t)
			if st["kind"] != "Status" || st["apiVersion"] != "v1" || st["status"] != "Failure" || st["reason"] != tc.reason || int(st["code"].(float64)) != tc.code {
				t.Errorf("status = %v", st)
			}
			if tc.message != "" && st["message"] != tc.message {
				t.Errorf("message = %q, want %q", st["message"], tc.message)
			}
		})
	}
}

func TestHeadersAndFormats(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	const leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"

	// YAML in, YAML out.
	r := do(t, ts, "POST", leases, map[string]string{"Content-Type": "application/yaml", "Accept": "application/yaml"},
		"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: yl\nspec:\n  holderIdentity: h\n")
	if r.code != 201 || r.header.Get("Content-Type") != "application/yaml" || !bytes.Contains(r.body, []byte("holderIdentity: h")) {
		t.Fatalf("YAML create: %d %s %s", r.code, r.header.Get("Content-Type"), r.body)
	}
	// Unknown fields are warned about by default.
	r = do(t, ts, "POST", leases, map[string]string{"Content-Type": "application/json"}, `{"metadata":{"name":"w"},"spec":{"foo":1}}`)
	if r.code != 201 || r.header.Get("Warning") != `299 - "unknown field \"spec.foo\""` {
		t.Errorf("warn: %d %q", r.code, r.header.Values("Warning"))
	}
	// As many as a body can hold, capped as kube-apiserver caps them: 1,000
	// unknown fields make 1,000 warnings of 60 runes; 68 fit in 4,096 runes
	// and the 69th, which passes the limit, is the last one sent.
	var body strings.Builder
	body.WriteString(`{"metadata":{"name":"many-warnings"},"spec":{`)
	for i := range 1000 {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `"unknown-%031d":1`, i)
	}
	body.WriteString("}}")
	r = do(t, ts, "POST", leases, map[string]string{"Content-Type": "application/json"}, body.String())
	if warnings := r.header.Values("Warning"); r.code != 201 || len(warnings) != 69 || warnings[0] != `299 - "unknown field \"spec.unknown-0000000000000000000000000000000\""` {
		t.Errorf("1,000 unknown fields: %d, %d warnings, the first %q", r.code, len(warnings), warnings[0])
	}
	// pretty=true indents; Audit-ID is echoed; cache headers are set.
	r = do(t, ts, "GET", leases+"/yl?pretty=true", map[string]string{"Audit-ID": "abc"}, "")
	if !bytes.HasPrefix(r.body, []byte("{\n  \"kind\": \"Lease\"")) {
		t.Errorf("pretty body: %s", r.body)
	}
	if r.header.Get("Audit-ID") != "abc" || r.header.Get("Cache-Control") != "no-cache, private" || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers: %v", r.header)
	}
	// Lists encode empty items as [].
	r = do(t, ts, "GET", "/api/v1/namespaces/default/endpoints", nil, "")
	if !bytes.Contains(r.body, []byte(`"items":[]`)) {
		t.Errorf("empty list: %s", r.body)
	}
	// No deprecation warning for Endpoints: leasehold serves them first-class.
	if w := r.header.Values("Warning"); len(w) != 0 {
		t.Errorf("Endpoints warnings: %q", w)
	}
}

func TestUnauthenticated(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	cfg := rest.AnonymousClientConfig(ts.Config)
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: tr}
	for path, code := range map[string]int{"/api/v1/namespaces": 401, "/healthz": 200, "/readyz": 200, "/livez": 200, "/version": 200} {
		resp, err := hc.Get(ts.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("%s: %d, want %d: %s", path, resp.StatusCode, code, body)
		}
	}
}

// TestHTTP2ServerFlag: --http2-server chooses the server that answers
// HTTP/2 (their first SETTINGS tell them apart: net/http's announces a
// larger frame size), and either serves client-go.
func TestHTTP2ServerFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		http2   string
		goFrame bool
	}{
		{transport.HTTP2Leasehold, false},
		{transport.HTTP2Go, true},
	} {
		t.Run(tc.http2, func(t *testing.T) {
			t.Parallel()
			s := testserver.Start(t, func(c *server.Config) { c.HTTP2Server = tc.http2 })
			tlsConfig, err := rest.TLSConfigFor(s.Config)
			if err != nil {
				t.Fatal(err)
			}
			tlsConfig.NextProtos = []string{"h2"}
			tc2, err := tls.Dial("tcp", strings.TrimPrefix(s.URL(), "https://"), tlsConfig)
			if err != nil {
				t.Fatal(err)
			}
			defer tc2.Close()
			_ = tc2.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(tc2, http2.ClientPreface); err != nil {
				t.Fatal(err)
			}
			fr := http2.NewFramer(tc2, tc2)
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			sf, ok := f.(*http2.SettingsFrame)
			if !ok {
				t.Fatalf("first frame %v", f)
			}
			if _, ok := sf.Value(http2.SettingMaxFrameSize); ok != tc.goFrame {
				t.Errorf("--http2-server=%s: SETTINGS announce MAX_FRAME_SIZE: %v, want %v", tc.http2, ok, tc.goFrame)
			}
			if v, _ := sf.Value(http2.SettingMaxConcurrentStreams); v != transport.MaxConcurrentStreams {
				t.Errorf("MAX_CONCURRENT_STREAMS %d", v)
			}
			if _, err := s.Client(t).CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
}

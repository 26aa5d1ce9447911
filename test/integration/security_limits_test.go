package integration

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/internal/server"
)

// heldRequest is a write whose body the test sends when it chooses: the
// server's handler waits for it, holding its in-flight slot.
type heldRequest struct {
	body *io.PipeWriter
	done chan heldResult
}

type heldResult struct {
	code int
	body []byte
	err  error
}

// holdWrite starts a POST of a lease, sending only the start of its body.
func holdWrite(t *testing.T, cfg *rest.Config, url string) *heldRequest {
	t.Helper()
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), "POST", url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	h := &heldRequest{body: pw, done: make(chan heldResult, 1)}
	go func() {
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			h.done <- heldResult{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		h.done <- heldResult{code: resp.StatusCode, body: b, err: err}
	}()
	if _, err := pw.Write([]byte(`{"apiVersion":"coordination.k8s.io/v1",`)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pw.CloseWithError(errors.New("test over")) })
	return h
}

// finish sends the rest of the body and waits for the answer.
func (h *heldRequest) finish(t *testing.T, name string) heldResult {
	t.Helper()
	if _, err := fmt.Fprintf(h.body, `"kind":"Lease","metadata":{"name":%q}}`, name); err != nil {
		t.Fatal(err)
	}
	h.body.Close()
	return h.wait(t)
}

func (h *heldRequest) wait(t *testing.T) heldResult {
	t.Helper()
	select {
	case r := <-h.done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("no answer within 60s")
		return heldResult{}
	}
}

// TestTooManyRequests: over --max-mutating-requests-inflight, writes get
// kube-apiserver's plain-text 429 with Retry-After; system:masters,
// reads and watches are not held up.
func TestTooManyRequests(t *testing.T) {
	t.Parallel()
	s := startSecure(t, "", func(c *server.Config) { c.MaxMutatingRequestsInflight = 1 })
	alice := s.tokenConfig("alice-token")
	held := holdWrite(t, alice, s.URL()+secLeasesPath)

	probe := func() rawResponse {
		return doAs(t, alice, s.URL(), "POST", secLeasesPath+"?dryRun=All", map[string]string{"Content-Type": "application/json"},
			strings.NewReader(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"probe"}}`))
	}
	// A probe may take the slot first, and the held write get the 429:
	// then hold another.
	var r rawResponse
	waitFor(t, func() bool {
		select {
		case res := <-held.done:
			if res.code != http.StatusTooManyRequests {
				t.Fatalf("held write answered early: %d %s %v", res.code, res.body, res.err)
			}
			held = holdWrite(t, alice, s.URL()+secLeasesPath)
			return false
		default:
		}
		r = probe()
		return r.code == http.StatusTooManyRequests
	})
	if string(r.body) != "Too many requests, please try again later.\n" || r.header.Get("Retry-After") != "1" ||
		!strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Errorf("429: %v %q", r.header, r.body)
	}
	// client-go sees a TooManyRequests error (without its retries).
	err := secClient(t, alice).CoordinationV1().RESTClient().Post().Namespace("default").Resource("leases").
		Param("dryRun", "All").Body(secLease("probe")).MaxRetries(0).Do(t.Context()).Error()
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("client-go: %v", err)
	}
	// system:masters always gets an answer.
	if _, err := s.Client(t).CoordinationV1().Leases("default").Create(t.Context(), secLease("admin"), metav1.CreateOptions{}); err != nil {
		t.Errorf("admin write while full: %v", err)
	}
	// Reads and watches have their own budget, or none.
	aliceClient := secClient(t, alice)
	if _, err := aliceClient.CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("read while writes are full: %v", err)
	}
	w, err := aliceClient.CoordinationV1().Leases("default").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Errorf("watch while writes are full: %v", err)
	} else {
		w.Stop()
	}
	// The held write completes; the slot is free again.
	if res := held.finish(t, "held"); res.code != http.StatusCreated {
		t.Errorf("held write: %d %s", res.code, res.body)
	}
	if r := probe(); r.code != http.StatusCreated {
		t.Errorf("after release: %d %s", r.code, r.body)
	}
}

// TestWatchesPerUser: --max-watches-per-user answers 429 beyond the limit.
func TestWatchesPerUser(t *testing.T) {
	t.Parallel()
	s := startSecure(t, "", func(c *server.Config) { c.MaxWatchesPerUser = 2 })
	bob := secClient(t, s.tokenConfig("bob-token"))
	for range 2 {
		w, err := bob.CoordinationV1().Leases("default").Watch(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
	}
	err := bob.CoordinationV1().RESTClient().Get().Namespace("default").Resource("leases").Param("watch", "true").MaxRetries(0).Do(t.Context()).Error()
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("third watch: %v", err)
	}
	if _, err := secClient(t, s.tokenConfig("alice-token")).CoordinationV1().Leases("default").Watch(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("another user's watch: %v", err)
	}
}

// TestRequestTimeout: a request past its deadline gets kube-apiserver's
// 504, whatever its handler is doing, and changes nothing.
func TestRequestTimeout(t *testing.T) {
	t.Parallel()
	s := startSecure(t, "")
	alice := s.tokenConfig("alice-token")

	// A write whose body never completes.
	held := holdWrite(t, alice, s.URL()+secLeasesPath+"?timeout=1s")
	res := held.wait(t)
	var st metav1.Status
	if err := json.Unmarshal(res.body, &st); err != nil || res.code != http.StatusGatewayTimeout || st.Reason != metav1.StatusReasonTimeout ||
		st.Message != "Timeout: request did not complete within requested timeout - context deadline exceeded" {
		t.Errorf("held write: %d %s", res.code, res.body)
	}
	list, err := s.Client(t).CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("leases after a timed-out create: %v %v", list, err)
	}

	// A read of a version from the future, with a short timeout. (Far
	// enough ahead that the other servers on CI's shared etcd cannot reach
	// it meanwhile.)
	rv, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	rv += 1 << 30
	// (client-go retries 504s that carry Retry-After; not here.)
	err = secClient(t, alice).CoordinationV1().RESTClient().Get().Namespace("default").Resource("leases").
		Param("resourceVersion", strconv.FormatInt(rv, 10)).Param("resourceVersionMatch", "NotOlderThan").
		Param("timeout", "300ms").MaxRetries(0).Do(t.Context()).Error()
	wantStatus(t, err, http.StatusGatewayTimeout, metav1.StatusReasonTimeout)
	r := doAs(t, alice, s.URL(), "GET", secLeasesPath+"?timeout=200ms&resourceVersionMatch=NotOlderThan&resourceVersion="+strconv.FormatInt(rv, 10), nil, nil)
	wantRawStatus(t, r, http.StatusGatewayTimeout, "Timeout", "")
	// An HTTP/1.1 connection that carried a 504 serves the next request.
	h1 := rest.CopyConfig(alice)
	h1.NextProtos = []string{"http/1.1"}
	tr, err := rest.TransportFor(h1)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: tr}
	var reused []bool
	for _, q := range []string{"?timeout=200ms&resourceVersionMatch=NotOlderThan&resourceVersion=" + strconv.FormatInt(rv, 10), ""} {
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", s.URL()+secLeasesPath+q, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want := map[bool]int{true: 504, false: 200}[q != ""]; resp.StatusCode != want {
			t.Errorf("HTTP/1.1 %q: %d, want %d", q, resp.StatusCode, want)
		}
	}
	if len(reused) != 2 || !reused[1] {
		t.Errorf("connection reuse: %v", reused)
	}
	// A timeout that does not parse is a 400.
	r = doAs(t, alice, s.URL(), "GET", secLeasesPath+"?timeout=soon", nil, nil)
	wantRawStatus(t, r, http.StatusBadRequest, "BadRequest", `invalid timeout specified in the request URL - time: invalid duration "soon"`)
	// The server still serves.
	if _, err := secClient(t, alice).CoordinationV1().Leases("default").Create(t.Context(), secLease("after"), metav1.CreateOptions{}); err != nil {
		t.Errorf("create after timeouts: %v", err)
	}
}

// TestSizeLimits: kube-apiserver's answers to requests too large.
func TestSizeLimits(t *testing.T) {
	t.Parallel()
	s := startSecure(t, "")
	admin := s.Config
	jsonCT := map[string]string{"Content-Type": "application/json"}

	// A body over 3 MiB.
	big := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"big","annotations":{"a":"` + strings.Repeat("x", 3<<20) + `"}}}`
	r := doAs(t, admin, s.URL(), "POST", secLeasesPath, jsonCT, strings.NewReader(big))
	wantRawStatus(t, r, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "Request entity too large: limit is 3145728")

	// An object under 3 MiB on the wire but over the store's 1.5 MiB.
	var addrs strings.Builder
	for i := range 140000 {
		if i > 0 {
			addrs.WriteByte(',')
		}
		addrs.WriteString(`{"ip":"10.0.0.1"}`)
	}
	eps := `{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"huge"},"subsets":[{"addresses":[` + addrs.String() + `]}]}`
	if len(eps) >= 3<<20 {
		t.Fatalf("body %d bytes", len(eps))
	}
	r = doAs(t, admin, s.URL(), "POST", "/api/v1/namespaces/default/endpoints", jsonCT, strings.NewReader(eps))
	wantRawStatus(t, r, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "")

	// A JSON patch of more than 10000 operations.
	if _, err := s.Client(t).CoordinationV1().Leases("default").Create(t.Context(), secLease("p"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ops := strings.Repeat(`{"op":"test","path":"/metadata/name","value":"p"},`, 10001)
	r = doAs(t, admin, s.URL(), "PATCH", secLeasesPath+"/p", map[string]string{"Content-Type": "application/json-patch+json"}, strings.NewReader("["+strings.TrimSuffix(ops, ",")+"]"))
	wantRawStatus(t, r, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001")

	// Headers over 1 MiB (and net/http's 4 KiB of slack): net/http's 431,
	// as kube-apiserver's.
	h1 := rest.CopyConfig(admin)
	h1.NextProtos = []string{"http/1.1"}
	r = doAs(t, h1, s.URL(), "GET", secLeasesPath, map[string]string{"X-Big": strings.Repeat("x", 1<<20+8<<10)}, nil)
	if r.code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("big header: %d %s", r.code, r.body)
	}
	// So is a URL over 1 MiB, a label selector for one.
	r = doAs(t, h1, s.URL(), "GET", secLeasesPath+"?labelSelector=a"+strings.Repeat(",a", 1<<19+8<<10), nil, nil)
	if r.code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("big label selector: %d %.200s", r.code, r.body)
	}
	// Below that, selectors may have at most 256 requirements (filtering
	// costs requirements × objects); kube-apiserver has no such limit.
	var reqs []string
	for i := range 257 {
		reqs = append(reqs, fmt.Sprintf("!k%d", i))
	}
	_, err := s.Client(t).CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{LabelSelector: strings.Join(reqs, ",")})
	if se := wantStatus(t, err, http.StatusBadRequest, metav1.StatusReasonBadRequest); se.ErrStatus.Message != "labelSelector has 257 requirements; at most 256 are allowed" {
		t.Errorf("label selector requirements: %q", se.ErrStatus.Message)
	}
	if _, err := s.Client(t).CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{LabelSelector: strings.Join(reqs[:256], ",")}); err != nil {
		t.Errorf("256 requirements: %v", err)
	}
	_, err = s.Client(t).CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{FieldSelector: strings.Repeat("metadata.name!=a,", 300) + "metadata.name!=b"})
	wantStatus(t, err, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	// Selector values follow the label rules.
	_, err = s.Client(t).CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{LabelSelector: "a=" + strings.Repeat("v", 64)})
	wantStatus(t, err, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	// Nothing was stored but the lease p.
	list, err := s.Client(t).CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("leases: %d %v", len(list.Items), err)
	}
}

// TestMalformedBodies: every malformed body gets a Status, the store is
// unchanged, and the server keeps serving.
func TestMalformedBodies(t *testing.T) {
	t.Parallel()
	s := startSecure(t, "")
	admin := s.Client(t)
	// What this server stores. (Not the list's resourceVersion: on the
	// shared etcd of CI's second pass other servers move the revision.)
	stored := func() map[string]string {
		l := must[*coordinationv1.LeaseList](t)(admin.CoordinationV1().Leases("").List(t.Context(), metav1.ListOptions{}))
		e := must[*corev1.EndpointsList](t)(admin.CoreV1().Endpoints("").List(t.Context(), metav1.ListOptions{}))
		out := map[string]string{}
		for k, v := range versions(ptrs(l.Items)) {
			out["lease "+k] = v
		}
		for k, v := range versions(ptrs(e.Items)) {
			out["endpoints "+k] = v
		}
		return out
	}
	before := stored()
	const (
		jsonType  = "application/json"
		yamlType  = "application/yaml"
		protoType = "application/vnd.kubernetes.protobuf"
	)
	lease := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"m"%s}%s}`
	cases := []struct {
		name, contentType, body string
		code                    int
	}{
		{"empty", jsonType, "", 400},
		{"truncated", jsonType, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":`, 400},
		{"not an object", jsonType, `[1,2,3]`, 400},
		{"null", jsonType, `null`, 422}, // an empty Lease: no name
		{"wrong type", jsonType, fmt.Sprintf(lease, "", `,"spec":{"leaseDurationSeconds":"15"}`), 400},
		{"number too large", jsonType, fmt.Sprintf(lease, "", `,"spec":{"leaseDurationSeconds":1e400}`), 400},
		{"int32 overflow", jsonType, fmt.Sprintf(lease, "", `,"spec":{"leaseDurationSeconds":4294967296}`), 400},
		{"nested too deep", jsonType, strings.Repeat("[", 10001) + strings.Repeat("]", 10001), 400},
		{"nested annotations", jsonType, fmt.Sprintf(lease, `,"annotations":`+strings.Repeat(`{"a":`, 10001)+`"v"`+strings.Repeat("}", 10001), ""), 400},
		{"invalid UTF-8 name", jsonType, "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"\xff\"}}", 422},
		{"wrong kind", jsonType, `{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"m"}}`, 400},
		{"unknown kind", jsonType, `{"apiVersion":"coordination.k8s.io/v1","kind":"Nope","metadata":{"name":"m"}}`, 400},
		{"bad yaml", yamlType, "apiVersion: [\n", 400},
		{"yaml aliases", yamlType, "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n", 400},
		{"protobuf garbage", protoType, "\x00\x01\x02", 400},
		{"protobuf bad envelope", protoType, "k8s\x00\n\x0f\n\x02v1\x12\tEndpoints\x12\xff\xff\xff\xff\x0f", 400},
		{"invalid lease", jsonType, fmt.Sprintf(lease, "", `,"spec":{"leaseDurationSeconds":-1}`), 422},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := doAs(t, s.Config, s.URL(), "POST", secLeasesPath, map[string]string{"Content-Type": tc.contentType}, strings.NewReader(tc.body))
			st := r.status(t)
			if r.code != tc.code || st["kind"] != "Status" || st["code"] != float64(tc.code) {
				t.Errorf("%d %.300s, want %d", r.code, r.body, tc.code)
			}
		})
	}
	// And through client-go: an invalid object is a 422.
	_, err := admin.CoordinationV1().Leases("default").Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"},
	}, metav1.CreateOptions{})
	wantStatus(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if diff := cmp.Diff(before, stored()); diff != "" {
		t.Errorf("store changed (-before +after):\n%s", diff)
	}
	if _, err := admin.CoreV1().Endpoints("default").Create(t.Context(), &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ok"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("create after malformed bodies: %v", err)
	}
}

// TestSlowClients: a client that sends its headers too slowly is cut off
// (ReadHeaderTimeout); one that does not read its answer holds its
// handler only until the request's deadline.
func TestSlowClients(t *testing.T) {
	t.Parallel()
	s := startSecure(t, "", func(c *server.Config) { c.MaxRequestsInflight = 1 })

	// Slowloris: half a request line, then nothing.
	conn, err := tlsDial(t, s.Server, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /api HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(60 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, conn); err != nil {
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the server kept a connection without headers for 60s")
		}
	}

	// A reader that stops reading: a large list, asked over HTTP/1.1 with
	// a short timeout, then never read.
	eps := secClient(t, s.Config).CoreV1().Endpoints("default")
	for i := range 8 {
		e := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("big-%d", i)}, Subsets: []corev1.EndpointSubset{{}}}
		for range 100000 {
			e.Subsets[0].Addresses = append(e.Subsets[0].Addresses, corev1.EndpointAddress{IP: "10.0.0.1"})
		}
		if _, err := eps.Create(t.Context(), e, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	alice := s.tokenConfig("alice-token")
	stuck, err := tlsDial(t, s.Server, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	fmt.Fprintf(stuck, "GET /api/v1/namespaces/default/endpoints?timeout=10s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", alice.BearerToken)
	// Read the status line only: the answer has begun, the rest waits (a
	// server too slow to list within the timeout answers 504 instead;
	// either way the slot must come free).
	line, err := bufio.NewReader(stuck).ReadString('\n')
	if err != nil || !strings.Contains(line, " 200 ") && !strings.Contains(line, " 504 ") {
		t.Fatalf("stuck reader: %q %v", line, err)
	}
	// The read slot is freed once the write deadline passes (10 s and the
	// 5 s grace).
	waitSlot := func() {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			r := doAs(t, alice, s.URL(), "GET", "/api/v1/namespaces/default/endpoints?limit=1", nil, nil)
			if r.code == http.StatusOK {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the read slot is still held after 90s: %d", r.code)
			}
		}
	}
	waitSlot()

	// The same over HTTP/2, from a client that never opens its flow
	// control window: past the deadline and the grace the stream is
	// reset, which frees the slot.
	h2, err := tlsDial(t, s.Server, func(c *tls.Config) { c.NextProtos = []string{"h2"} })
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if _, err := io.WriteString(h2, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(h2, h2)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{
		{":method", "GET"}, {":scheme", "https"}, {":authority", "127.0.0.1"},
		{":path", "/api/v1/namespaces/default/endpoints?timeout=10s"},
		{"authorization", "Bearer " + alice.BearerToken},
	} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(fr.WriteSettings(), fr.WriteHeaders(http2.HeadersFrameParam{
		StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true,
	})); err != nil {
		t.Fatal(err)
	}
	// The frames of the answer: from here on only this goroutine writes.
	ended := make(chan string, 1)
	go func() {
		data := 0
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				ended <- "connection ended: " + err.Error()
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.DataFrame:
				data += len(f.Data())
				if f.StreamEnded() && data > 64<<10 {
					ended <- fmt.Sprintf("answer complete (%d bytes) though the client never read", data)
					return
				}
				if f.StreamEnded() {
					ended <- "" // a 504 of a server too slow to list in time
					return
				}
			case *http2.RSTStreamFrame:
				ended <- ""
				return
			}
		}
	}()
	waitSlot()
	select {
	case msg := <-ended:
		if msg != "" {
			t.Error(msg)
		}
	case <-time.After(30 * time.Second):
		t.Error("the slot came free, but the stuck HTTP/2 stream was neither reset nor ended")
	}
}

package httpserver

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/leasehold/leasehold/internal/auth"
	"github.com/leasehold/leasehold/internal/codec"
)

func TestInflight(t *testing.T) {
	user := auth.User{Name: "u", Groups: []string{auth.AllAuthenticated}}
	master := auth.User{Name: "root", Groups: []string{auth.SystemPrivilegedGroup, auth.AllAuthenticated}}
	read := func(u auth.User) auth.Attributes {
		return auth.Attributes{User: u, Verb: "list", ResourceRequest: true, Resource: "leases"}
	}
	write := func(u auth.User) auth.Attributes {
		return auth.Attributes{User: u, Verb: "create", ResourceRequest: true, Resource: "leases"}
	}
	watch := func(u auth.User) auth.Attributes {
		return auth.Attributes{User: u, Verb: "watch", ResourceRequest: true, Resource: "leases"}
	}
	l := newInflight(1, 1, 2)

	releaseRead, ok := l.admit(read(user))
	if !ok {
		t.Fatal("first read refused")
	}
	if _, ok := l.admit(read(user)); ok {
		t.Fatal("second read admitted over the limit")
	}
	// The budgets are separate.
	releaseWrite, ok := l.admit(write(user))
	if !ok {
		t.Fatal("a write refused while only reads are at the limit")
	}
	if _, ok := l.admit(write(user)); ok {
		t.Fatal("second write admitted over the limit")
	}
	// Non-resource POSTs are writes, GETs reads.
	if _, ok := l.admit(auth.Attributes{User: user, Verb: "post", Path: "/x"}); ok {
		t.Fatal("a non-resource POST is not counted as a write")
	}
	// system:masters always gets an answer.
	if release, ok := l.admit(read(master)); !ok {
		t.Fatal("a master refused")
	} else {
		release()
	}
	// Watches do not count against the budgets, only against the
	// per-user watch limit.
	var releases []func()
	for range 2 {
		release, ok := l.admit(watch(user))
		if !ok {
			t.Fatal("watch refused under the per-user limit")
		}
		releases = append(releases, release)
	}
	if _, ok := l.admit(watch(user)); ok {
		t.Fatal("third watch of one user admitted")
	}
	if release, ok := l.admit(watch(auth.User{Name: "other"})); !ok {
		t.Fatal("another user's watch refused")
	} else {
		release()
	}
	if release, ok := l.admit(watch(master)); !ok {
		t.Fatal("a master's watch refused")
	} else {
		release()
	}
	releases[0]()
	if release, ok := l.admit(watch(user)); !ok {
		t.Fatal("watch refused after one ended")
	} else {
		release()
	}
	// Profiles are long-running too.
	if _, ok := l.admit(auth.Attributes{User: user, Verb: "get", Path: "/debug/pprof/profile"}); !ok {
		t.Fatal("a profile counted as a read")
	}
	releaseRead()
	releaseWrite()
	if release, ok := l.admit(read(user)); !ok {
		t.Fatal("read refused after release")
	} else {
		release()
	}
	// No limits.
	unlimited := newInflight(0, 0, 0)
	for range 1000 {
		if _, ok := unlimited.admit(write(user)); !ok {
			t.Fatal("refused without limits")
		}
	}
}

func newBareServer(t *testing.T) *Server {
	t.Helper()
	logs := &syncBuffer{}
	codecs, err := codec.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Codecs: codecs, Logger: newTestLogger(logs)})
	t.Cleanup(s.Shutdown)
	return s
}

// statusOf decodes a Status answer.
func statusOf(t *testing.T, w *httptest.ResponseRecorder) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.Kind != "Status" {
		t.Fatalf("not a Status (%v): %s", err, w.Body)
	}
	return st
}

// withAttrs is req as authorization sees it with attributes a.
func withAttrs(req *http.Request, a auth.Attributes) *request {
	return &request{attrs: a, method: req.Method, query: req.URL.Query(), routable: true}
}

func TestTooManyRequestsAnswer(t *testing.T) {
	w := httptest.NewRecorder()
	tooManyRequests(w)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" ||
		w.Body.String() != "Too many requests, please try again later.\n" || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		t.Errorf("%d %v %q", w.Code, w.Header(), w.Body)
	}
}

// TestEmptyQueryOptions holds the shortcuts of decodeParams and of the
// create and update handlers: decoding an empty query leaves every
// options type zero, and zero create and update options are valid.
func TestEmptyQueryOptions(t *testing.T) {
	for _, o := range []runtime.Object{&metav1.UpdateOptions{}, &metav1.CreateOptions{}, &metav1.PatchOptions{}, &metav1.DeleteOptions{}, &metav1.GetOptions{}, &metav1.ListOptions{}, &metainternalversion.ListOptions{}} {
		zero := reflect.New(reflect.TypeOf(o).Elem()).Interface()
		if err := metainternalversionscheme.ParameterCodec.DecodeParameters(url.Values{}, metav1.SchemeGroupVersion, o); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(o, zero) {
			t.Errorf("%T from an empty query: %+v", o, o)
		}
	}
	if errs := metav1validation.ValidateCreateOptions(&metav1.CreateOptions{}); len(errs) > 0 {
		t.Error(errs)
	}
	if errs := metav1validation.ValidateUpdateOptions(&metav1.UpdateOptions{}); len(errs) > 0 {
		t.Error(errs)
	}
}

// TestManagerOrUserAgent: the field manager a User-Agent gives, with
// printable ASCII taken as it is, as the rune by rune rule would.
func TestManagerOrUserAgent(t *testing.T) {
	long := strings.Repeat("a", 200)
	for _, tc := range []struct{ ua, want string }{
		{"kubectl/v1.36.3 (linux/amd64) kubernetes/abc", "kubectl"},
		{"leader-election ~x/1", "leader-election ~x"},
		{"no-slash", "no-slash"},
		{"", ""},
		{"tab\there/1", "tabhere"},
		{"del\x7fx/1", "delx"},
		{"ünïcode-✓/2", "ünïcode-✓"},
		{"zero\u200bwidth/1", "zerowidth"},
		{long + "/1", long[:128]},
		{strings.Repeat("é", 100), strings.Repeat("é", 64)},
	} {
		if got := managerOrUserAgent("", tc.ua); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.ua, got, tc.want)
		}
	}
	if got := managerOrUserAgent("mine", "kubectl/1"); got != "mine" {
		t.Errorf("fieldManager: %q", got)
	}
}

// TestReadAll: readAll reads what io.ReadAll does whatever the declared
// length, true or not, and whatever buffer it is given (its old contents
// gone); into that buffer when it has room for the declared length.
func TestReadAll(t *testing.T) {
	body := strings.Repeat("0123456789", 101)
	for _, declared := range []int64{-1, 0, 1, 999, 1000, 1001, 5000, 1 << 30} {
		for _, size := range []int{0, 1, 999, 1000, 1001} {
			for _, room := range []int{0, 10, 1002, 6000} {
				buf := []byte(strings.Repeat("x", room))
				got, err := readAll(buf, iotest.OneByteReader(strings.NewReader(body[:size])), declared, 1<<20)
				if err != nil || string(got) != body[:size] {
					t.Errorf("declared %d, body %d, room %d: %d bytes, %v", declared, size, room, len(got), err)
				}
				reused := len(got) > 0 && cap(buf) > 0 && &got[0] == &buf[:1][0]
				if want := declared > 0 && declared <= 1<<20 && int64(room) > declared && size <= room; reused != want && size > 0 {
					t.Errorf("declared %d, body %d, room %d: buffer reused %v", declared, size, room, reused)
				}
			}
		}
	}
	if _, err := readAll(nil, iotest.ErrReader(errors.New("broken")), 10, 100); err == nil {
		t.Error("a failing reader read")
	}
}

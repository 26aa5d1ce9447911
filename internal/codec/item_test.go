package codec

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/builtin"
)

func testLease(name string) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC))
	h := "holder <&>"
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "42", Labels: map[string]string{"a": "b"},
			CreationTimestamp: metav1.NewTime(now.Time.Truncate(time.Second))},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &h, RenewTime: &now},
	}
}

func output(t *testing.T, c *Codecs, mediaType string) Output {
	t.Helper()
	out, err := c.Negotiate(&http.Request{Header: http.Header{"Accept": {mediaType}}, URL: &url.URL{}}, Target{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// newCodecs returns the codecs of the built-in kinds.
func newCodecs(tb testing.TB) *Codecs {
	tb.Helper()
	c, err := New(builtin.Kinds(builtin.Options{}))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func TestItemsAssembleLikeSerializers(t *testing.T) {
	c := newCodecs(t)
	for _, mt := range []string{JSON, Protobuf} {
		t.Run(mt, func(t *testing.T) {
			out := output(t, c, mt)
			obj := testLease("a")
			var want bytes.Buffer
			if err := c.Encode(&want, out, obj); err != nil {
				t.Fatal(err)
			}
			item, err := c.EncodeItem(out, obj)
			if err != nil {
				t.Fatal(err)
			}
			got := AppendObject(nil, out, coordinationv1.SchemeGroupVersion.WithKind("Lease"), item)
			if mt == JSON {
				got = append(got, '\n')
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("object:\n got %q\nwant %q", got, want.Bytes())
			}

			list := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: "7", Continue: "tok"},
				Items: []coordinationv1.Lease{*testLease("a"), *testLease("b")}}
			want.Reset()
			if err := c.Encode(&want, out, list); err != nil {
				t.Fatal(err)
			}
			var items [][]byte
			for i := range list.Items {
				it, err := c.EncodeItem(out, &list.Items[i])
				if err != nil {
					t.Fatal(err)
				}
				items = append(items, it)
			}
			l, err := NewListBody(out, coordinationv1.SchemeGroupVersion.WithKind("LeaseList"), list.ListMeta, items)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := bytes.CutPrefix(l.AppendTo([]byte("kept")), []byte("kept"))
			if !ok || !bytes.Equal(got, want.Bytes()) {
				t.Errorf("list:\n got %q\nwant %q", got, want.Bytes())
			}
			// And the standard decoder reads it back.
			var back coordinationv1.LeaseList
			if _, _, err := out.Info.Serializer.Decode(got, nil, &back); err != nil || len(back.Items) != 2 || back.Continue != "tok" {
				t.Errorf("decode: %v %+v", err, back.ListMeta)
			}
		})
	}
}

// shortWriter takes at most limit bytes, then fails.
type shortWriter struct {
	bytes.Buffer
	limit int
}

func (w *shortWriter) Write(p []byte) (int, error) {
	if w.Len()+len(p) > w.limit {
		return 0, errors.New("full")
	}
	return w.Buffer.Write(p)
}

// TestListWriteTo: a list of several chunks written out is the list the
// serializer writes, of the length announced, in either wire format and
// with no items; a failing writer's error comes back.
func TestListWriteTo(t *testing.T) {
	c := newCodecs(t)
	for _, mt := range []string{JSON, Protobuf} {
		for _, n := range []int{0, 1, 8000} {
			t.Run(fmt.Sprintf("%s/%d", mt, n), func(t *testing.T) {
				out := output(t, c, mt)
				list := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}, Items: []coordinationv1.Lease{}}
				var items [][]byte
				for i := range n {
					list.Items = append(list.Items, *testLease(fmt.Sprintf("lease-%06d", i)))
					it, err := c.EncodeItem(out, &list.Items[i])
					if err != nil {
						t.Fatal(err)
					}
					items = append(items, it)
				}
				var want bytes.Buffer
				if err := c.Encode(&want, out, list); err != nil {
					t.Fatal(err)
				}
				l, err := NewListBody(out, coordinationv1.SchemeGroupVersion.WithKind("LeaseList"), list.ListMeta, items)
				if err != nil {
					t.Fatal(err)
				}
				if n == 8000 && want.Len() < 2*listChunk {
					t.Fatalf("the list is %d bytes, fewer than two chunks", want.Len())
				}
				var got bytes.Buffer
				written, err := l.WriteTo(&got)
				if err != nil || written != int64(got.Len()) || l.Len() != want.Len() || !bytes.Equal(got.Bytes(), want.Bytes()) {
					t.Fatalf("WriteTo: %d bytes written, err %v, Len %d; %d bytes, equal %v; want %d bytes",
						written, err, l.Len(), got.Len(), bytes.Equal(got.Bytes(), want.Bytes()), want.Len())
				}
				if !bytes.Equal(l.AppendTo(nil), want.Bytes()) {
					t.Fatal("AppendTo differs from the serializer's list")
				}
				if n == 8000 {
					w := &shortWriter{limit: listChunk + 1}
					if _, err := l.WriteTo(w); err == nil || w.Len() != listChunk {
						t.Errorf("a writer failing after %d bytes: err %v after %d", w.limit, err, w.Len())
					}
				}
			})
		}
	}
}

var _ runtime.Object = (*coordinationv1.Lease)(nil)

// TestEncodeStorage: the stored bytes of every built-in kind are those of
// apimachinery's protobuf serializer, with resourceVersion left out, and
// the object encoded is left as it was.
func TestEncodeStorage(t *testing.T) {
	c := newCodecs(t)
	serializer := protobuf.NewSerializer(c.scheme, c.scheme)
	var objs []runtime.Object
	for _, k := range builtin.Kinds(builtin.Options{}) {
		for _, rv := range []string{"", "42"} {
			obj := k.Storage().New()
			obj.SetName("a")
			obj.SetResourceVersion(rv)
			obj.SetLabels(map[string]string{"k": "v"})
			objs = append(objs, obj)
		}
	}
	typed := testLease("typed")
	typed.SetGroupVersionKind(coordinationv1.SchemeGroupVersion.WithKind("Lease"))
	objs = append(objs, testLease("a"), typed)
	for _, obj := range objs {
		before := obj.DeepCopyObject()
		got, err := c.EncodeStorage(obj)
		if err != nil {
			t.Fatalf("%T: %v", obj, err)
		}
		if !equality.Semantic.DeepEqual(before, obj) {
			t.Errorf("%T: EncodeStorage changed the object", obj)
		}
		want, err := c.WithTypeMeta(obj.DeepCopyObject())
		if err != nil {
			t.Fatal(err)
		}
		want.(metav1.Object).SetResourceVersion("")
		var buf bytes.Buffer
		if err := serializer.Encode(want, &buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, buf.Bytes()) {
			t.Errorf("%T:\n got %q\nwant %q", obj, got, buf.Bytes())
		}
		if cap(got) > len(got)+64 {
			t.Errorf("%T: %d bytes in a buffer of %d", obj, len(got), cap(got))
		}
	}
}

// TestEncodeObjectLikeSerializers: an object's answer is the serializer's,
// whether its encodings are memoised (a cached object) or not (the answer
// to a write, encoded in one piece), and a memo's second use answers the
// same bytes.
func TestEncodeObjectLikeSerializers(t *testing.T) {
	c := newCodecs(t)
	var res resources.Resource
	for _, k := range builtin.Kinds(builtin.Options{}) {
		if k.Names.Kind == "Lease" {
			res = k.Storage()
		}
	}
	for _, mt := range []string{JSON, Protobuf} {
		out := output(t, c, mt)
		obj := testLease("a")
		var want bytes.Buffer
		if err := c.Encode(&want, out, obj); err != nil {
			t.Fatal(err)
		}
		memo := &Memo{}
		for _, tc := range []struct {
			name string
			memo *Memo
		}{{"no memo", nil}, {"memo", memo}, {"memoised", memo}} {
			got, err := c.EncodeObject(out, res, Cached{Obj: obj, Memo: tc.memo})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("%s, %s:\n got %q\nwant %q", mt, tc.name, got, want.Bytes())
			}
		}
	}
}

// TestPrettyOnlyForJSON: curl asks for pretty output by its User-Agent,
// others with ?pretty=true;
// JSON is indented for it, but a protobuf answer cannot be, and is served
// from the item encodings like any other.
func TestPrettyOnlyForJSON(t *testing.T) {
	c := newCodecs(t)
	asks := map[string]*http.Request{
		"curl":         {Header: http.Header{"User-Agent": {"curl/8.14.1"}}, URL: &url.URL{}},
		"?pretty=true": {Header: http.Header{}, URL: &url.URL{RawQuery: "pretty=true"}},
	}
	for how, req := range asks {
		for mt, pretty := range map[string]bool{JSON: true, Protobuf: false} {
			req.Header.Set("Accept", mt)
			out, err := c.Negotiate(req, Target{List: true, Transforms: true})
			if err != nil {
				t.Fatal(err)
			}
			if out.Pretty != pretty {
				t.Errorf("%s, %s: pretty %v, want %v", how, mt, out.Pretty, pretty)
			}
			if _, ok := itemFormat(out); ok == pretty {
				t.Errorf("%s, %s: item format %v, want %v", how, mt, ok, !pretty)
			}
		}
	}
}

package codec

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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
			got, err = AppendList([]byte("kept"), out, coordinationv1.SchemeGroupVersion.WithKind("LeaseList"), list.ListMeta, items)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := bytes.CutPrefix(got, []byte("kept"))
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

var _ runtime.Object = (*coordinationv1.Lease)(nil)

package codec

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/builtin"
)

// storageOf returns the resource of kind at version, and its kind's
// storage resource.
func storageOf(t *testing.T, kind, version string) resources.Resource {
	t.Helper()
	for _, k := range builtin.Kinds(builtin.Options{CoordinatedLeaderElection: true}) {
		if k.Names.Kind != kind {
			continue
		}
		for _, r := range k.Resources() {
			if r.Version.GroupVersion.Version == version {
				return r
			}
		}
	}
	t.Fatalf("no %s at %s", kind, version)
	return resources.Resource{}
}

// stored returns obj's storage encoding and obj as the cache decodes it:
// resourceVersion rv, no apiVersion and kind.
func stored[T resources.Object](t *testing.T, c *Codecs, obj T, rv int64) ([]byte, T) {
	t.Helper()
	data, err := c.EncodeStorage(obj)
	if err != nil {
		t.Fatal(err)
	}
	back := obj.DeepCopyObject().(T)
	if err := c.DecodeStorage(data, rv, back); err != nil {
		t.Fatal(err)
	}
	back.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return data, back
}

// undecodable is a stored object that fails a test that decodes it.
type undecodable struct {
	t      *testing.T
	stored []byte
	rev    int64
}

func (u undecodable) Decoded() resources.Object {
	u.t.Fatal("a verbatim item was decoded")
	return nil
}

func (u undecodable) Verbatim() ([]byte, int64, bool) { return u.stored, u.rev, true }

// verbatimObject is a stored object that decodes.
type verbatimObject struct {
	obj    resources.Object
	stored []byte
	rev    int64
}

func (v verbatimObject) Decoded() resources.Object       { return v.obj }
func (v verbatimObject) Verbatim() ([]byte, int64, bool) { return v.stored, v.rev, true }

// TestVerbatimItems: the item served from stored bytes is the object's
// own protobuf encoding, for metadata of every length around the
// one-byte and two-byte length boundaries and revisions of every number
// of digits.
func TestVerbatimItems(t *testing.T) {
	c := newCodecs(t)
	as := verbatimAs{"coordination.k8s.io/v1", "Lease"}
	deleted := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	for _, rv := range []int64{1, 9, 10, 127, 128, 16383, 16384, 1234567890123, math.MaxInt64} {
		for n := 1; n < 300; n += 3 {
			l := testLease(strings.Repeat("n", n))
			l.ResourceVersion = ""
			if n%2 == 0 {
				l.UID = types.UID("4f5c0bd8-8c37-4dd8-9bd3-16b0a2bd0c52")
				l.Finalizers = []string{"example.com/hold"}
				l.DeletionTimestamp = &deleted
				l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "u"}}
			}
			data, obj := stored(t, c, l, rv)
			if !Verbatim(data, obj) {
				t.Fatalf("name of %d, rv %d: not verbatim", n, rv)
			}
			it, ok := as.item(Cached{From: undecodable{t, data, rv}})
			if !ok {
				t.Fatalf("name of %d, rv %d: no verbatim item", n, rv)
			}
			want, err := obj.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if got := it.appendTo(nil); it.size() != len(want) || !bytes.Equal(got, want) {
				t.Fatalf("name of %d, rv %d: size %d, item\n%q\nwant %d bytes\n%q", n, rv, it.size(), got, len(want), want)
			}
		}
	}
}

// TestNotVerbatim: stored bytes that are not the object's encoding but
// for its resourceVersion are encoded from the object instead.
func TestNotVerbatim(t *testing.T) {
	c := newCodecs(t)
	l := testLease("a")
	l.ResourceVersion = ""
	data, obj := stored(t, c, l, 7)
	env, _ := splitEnvelope(data)
	gvk := coordinationv1.SchemeGroupVersion.WithKind("Lease")
	withRV := obj.DeepCopy()
	raw, err := withRV.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		stored []byte
	}{
		// Field 99, which no version of Lease has: decoding drops it.
		{"unknown field", appendEnvelope(nil, gvk, append(bytes.Clone(env.raw), 0x9a, 0x06, 0x01, 'x'))},
		{"resourceVersion stored", appendEnvelope(nil, gvk, raw)},
		{"spec before metadata", appendEnvelope(nil, gvk, append(bytes.Clone(env.raw[2+int(env.raw[1]):]), env.raw[:2+int(env.raw[1])]...))},
		{"JSON", []byte(`{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"a"}}`)},
		{"truncated", data[:len(data)-10]},
	} {
		if Verbatim(tc.stored, obj) {
			t.Errorf("%s: verbatim", tc.name)
		}
	}
	if !Verbatim(data, obj) {
		t.Error("the stored encoding is not verbatim")
	}
	// Another object (a holder fewer) is not what these bytes hold.
	if other := obj.DeepCopy(); other.Spec.HolderIdentity != nil {
		other.Spec.HolderIdentity = nil
		if Verbatim(data, other) {
			t.Error("verbatim for another object")
		}
	}
}

// TestVerbatimLists: a list whose items are made verbatim, decoding no
// object, is the list the serializer writes of the decoded objects, whole
// and in chunks, the first time and from the memos; a version other than
// the storage one is encoded from the object.
func TestVerbatimLists(t *testing.T) {
	c := newCodecs(t)
	leases := storageOf(t, "Lease", "v1")
	var objs []Cached
	list := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: "90000"}}
	for i := range 8000 {
		data, obj := stored(t, c, testLease(fmt.Sprintf("lease-%06d", i)), int64(1000+i*11))
		list.Items = append(list.Items, *obj)
		objs = append(objs, Cached{From: undecodable{t, data, int64(1000 + i*11)}, Memo: &Memo{}})
	}
	out := output(t, c, Protobuf)
	var want bytes.Buffer
	if err := c.Encode(&want, out, list); err != nil {
		t.Fatal(err)
	}
	for _, read := range []string{"first", "memoised"} {
		body, err := c.EncodeList(out, leases, objs, list.ListMeta)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if _, err := body.WriteTo(&got); err != nil || body.Len() != want.Len() || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("%s: WriteTo %d bytes, err %v, Len %d, want %d bytes", read, got.Len(), err, body.Len(), want.Len())
		}
	}

	// A LeaseCandidate stored at v1beta1, read at v1alpha2.
	c, err := New(builtin.Kinds(builtin.Options{CoordinatedLeaderElection: true}))
	if err != nil {
		t.Fatal(err)
	}
	alpha := storageOf(t, "LeaseCandidate", "v1alpha2")
	lc := &coordinationv1beta1.LeaseCandidate{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: coordinationv1beta1.LeaseCandidateSpec{LeaseName: "l", BinaryVersion: "1.36.0", Strategy: coordinationv1.OldestEmulationVersion}}
	data, obj := stored(t, c, lc, 5)
	out = output(t, c, Protobuf)
	inAlpha, err := alpha.FromStorage(obj)
	if err != nil {
		t.Fatal(err)
	}
	want.Reset()
	if err := c.Encode(&want, out, inAlpha); err != nil {
		t.Fatal(err)
	}
	got, err := c.EncodeObject(out, alpha, Cached{From: verbatimObject{obj, data, 5}, Memo: &Memo{}})
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Errorf("v1alpha2 from v1beta1 storage: %v\n got %q\nwant %q", err, got, want.Bytes())
	}
	if rv, _ := strconv.Atoi(inAlpha.(resources.Object).GetResourceVersion()); rv != 5 {
		t.Errorf("resourceVersion %d", rv)
	}
}

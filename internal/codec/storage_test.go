package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/resources/builtin"
	"sigs.k8s.io/randfill"
)

func TestAfterMetadata(t *testing.T) {
	c := newCodecs(t)
	encode := func(l *coordinationv1.Lease) []byte { return encodeStorage(t, c, l) }
	after := func(data []byte) []byte {
		t.Helper()
		a, ok := AfterMetadata(data)
		if !ok {
			t.Fatalf("AfterMetadata(%q) found no metadata", data)
		}
		return a
	}

	l := testLease("a")
	spec, err := l.Spec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := binary.AppendUvarint([]byte{0x12}, uint64(len(spec))) // Lease.spec = 2
	want = append(append(want, spec...), 0x1a, 0x00, 0x22, 0x00)  // the envelope's end
	data := encode(l)
	if got := after(data); !bytes.Equal(got, want) {
		t.Fatalf("AfterMetadata = %x, want %x", got, want)
	}

	// Metadata changes (managedFields times among them) leave the end alone.
	m := l.DeepCopy()
	m.Name = "a-much-longer-name-than-before"
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate,
		Time: &metav1.Time{Time: time.Unix(1_800_000_000, 0)}}}
	if got := after(encode(m)); !bytes.Equal(got, want) {
		t.Errorf("after a metadata change AfterMetadata = %x, want %x", got, want)
	}
	// A spec change does not.
	s := l.DeepCopy()
	renewed := metav1.NewMicroTime(s.Spec.RenewTime.Add(time.Second))
	s.Spec.RenewTime = &renewed
	if got := after(encode(s)); bytes.Equal(got, want) {
		t.Error("after a spec change AfterMetadata is the same")
	}

	// Every kind stored in protobuf begins with its metadata.
	for _, k := range builtin.Kinds(builtin.Options{}) {
		obj := k.Storage().New()
		obj.SetName("a")
		data, err := c.EncodeStorage(obj)
		if err != nil {
			t.Fatal(err)
		}
		_, ok := AfterMetadata(data)
		if proto := bytes.HasPrefix(data, protobufPrefix); ok != proto {
			t.Errorf("%s: AfterMetadata found metadata %v, stored in protobuf %v", k.Names.Plural, ok, proto)
		}
	}

	// What is not a whole encoding is refused, never misread.
	for _, bad := range [][]byte{nil, []byte(`{"kind":"Lease","metadata":{}}`), protobufPrefix} {
		if _, ok := AfterMetadata(bad); ok {
			t.Errorf("AfterMetadata(%q) found metadata", bad)
		}
	}
	for n := range len(data) - len(want) { // cut before the metadata's end
		if a, ok := AfterMetadata(data[:n]); ok {
			t.Errorf("AfterMetadata of the first %d bytes = %x", n, a)
		}
	}
}

// encodeStorage is l's storage encoding.
func encodeStorage(t *testing.T, c *Codecs, l *coordinationv1.Lease) []byte {
	t.Helper()
	data, err := c.EncodeStorage(l)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDecodeStorage holds DecodeStorage's own protobuf decoding to the
// serializer's.
func TestDecodeStorage(t *testing.T) {
	c := newCodecs(t)
	type object interface {
		runtime.Object
		metav1.Object
	}
	var objs []object
	for _, k := range builtin.Kinds(builtin.Options{}) {
		obj := k.Storage().New()
		obj.SetName("a")
		obj.SetLabels(map[string]string{"k": "v"})
		objs = append(objs, obj)
	}
	l := testLease("a")
	l.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}, Time: &metav1.Time{Time: time.Unix(1_800_000_000, 0)}}}
	objs = append(objs, l)

	for _, obj := range objs {
		data, err := c.EncodeStorage(obj)
		if err != nil {
			t.Fatal(err)
		}
		fresh := func() runtime.Object { return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object) }
		got := fresh()
		if err := c.DecodeStorage(data, 7, got); err != nil {
			t.Fatalf("%T: %v", obj, err)
		}
		want := fresh()
		if _, _, err := c.jsonOrProto(data).Decode(data, nil, want); err != nil {
			t.Fatalf("%T: the serializer: %v", obj, err)
		}
		want.(metav1.Object).SetResourceVersion("7")
		if !equality.Semantic.DeepEqual(got, want) || got.GetObjectKind().GroupVersionKind() != want.GetObjectKind().GroupVersionKind() {
			t.Errorf("%T: DecodeStorage = %+v, the serializer %+v", obj, got, want)
		}
		if gvk := got.GetObjectKind().GroupVersionKind(); gvk.Kind == "" || gvk.Version == "" {
			t.Errorf("%T: decoded without apiVersion and kind: %v", obj, gvk)
		}
	}

	// A stored Lease is not an Endpoints, and a damaged one is no Lease.
	data, err := c.EncodeStorage(l)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DecodeStorage(data, 1, &corev1.Endpoints{}); err == nil {
		t.Error("a stored Lease decoded into an Endpoints")
	}
	for _, n := range []int{5, len(data) / 2, len(data) - 5} {
		if err := c.DecodeStorage(data[:n], 1, &coordinationv1.Lease{}); err == nil {
			t.Errorf("the first %d of %d bytes decoded", n, len(data))
		}
	}
}

func (c *Codecs) jsonOrProto(data []byte) runtime.Serializer {
	if bytes.HasPrefix(data, protobufPrefix) {
		return c.protoStorage
	}
	return c.jsonStorage
}

// TestDecodeProtobufBody holds Decode's own reading of protobuf bodies
// to the protobuf serializer's: the same object, apiVersion and kind,
// and the serializer's errors for what it does not take (another kind,
// a damaged body, an envelope it would not write).
func TestDecodeProtobufBody(t *testing.T) {
	c := newCodecs(t)
	info, err := c.InputSerializer(Protobuf)
	if err != nil {
		t.Fatal(err)
	}
	l := testLease("a")
	l.TypeMeta = metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}
	l.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}, Time: &metav1.Time{Time: time.Unix(1_800_000_000, 0)}}}
	var buf bytes.Buffer
	if err := info.Serializer.Encode(l, &buf); err != nil {
		t.Fatal(err)
	}
	body := buf.Bytes()
	endpoints := &corev1.Endpoints{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Endpoints"}, ObjectMeta: metav1.ObjectMeta{Name: "e"}}
	buf.Reset()
	if err := info.Serializer.Encode(endpoints, &buf); err != nil {
		t.Fatal(err)
	}
	bodies := map[string][]byte{
		"a lease":      body,
		"an endpoints": buf.Bytes(),
		"no prefix":    body[4:],
		"empty":        nil,
		"json":         []byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease"}`),
	}
	for _, n := range []int{4, 10, len(body) / 2, len(body) - 3} {
		bodies[fmt.Sprintf("the first %d bytes", n)] = body[:n]
	}
	for name, b := range bodies {
		got, gotErr := c.Decode(info, false, b, &coordinationv1.Lease{})
		want := &coordinationv1.Lease{}
		wantObj, wantGVK, wantErr := info.Serializer.Decode(b, &schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}, want)
		if (gotErr != nil) != (wantErr != nil) {
			t.Errorf("%s: error %v, the serializer's %v", name, gotErr, wantErr)
			continue
		}
		if wantErr != nil {
			continue
		}
		if !equality.Semantic.DeepEqual(got.Object, wantObj) || got.GVK != *wantGVK ||
			got.Object.GetObjectKind().GroupVersionKind() != wantObj.GetObjectKind().GroupVersionKind() {
			t.Errorf("%s: decoded %v %+v, the serializer %v %+v", name, got.GVK, got.Object, *wantGVK, wantObj)
		}
	}
}

// TestInputSerializer: a Content-Type names its serializer whatever its
// case and parameters; what is not a media type, or not one of ours, is
// a 415.
func TestInputSerializer(t *testing.T) {
	c := newCodecs(t)
	for _, tc := range []struct{ contentType, want string }{
		{"", JSON},
		{JSON, JSON},
		{"application/json; charset=utf-8", JSON},
		{"Application/JSON", JSON},
		{YAML, YAML},
		{Protobuf, Protobuf},
		{"application/vnd.kubernetes.protobuf ; x=y", Protobuf},
		{"application/vnd.kubernetes.protobuf;stream=watch", Protobuf},
		{"text/plain", ""},
		{"application/json; charset", ""},
		{"json", ""},
	} {
		info, err := c.InputSerializer(tc.contentType)
		switch {
		case tc.want == "" && !apierrors.IsUnsupportedMediaType(err):
			t.Errorf("%q: %v, %v; want a 415", tc.contentType, info.MediaType, err)
		case tc.want != "" && (err != nil || info.MediaType != tc.want):
			t.Errorf("%q: %v, %v; want %s", tc.contentType, info.MediaType, err, tc.want)
		}
	}
}

// TestDecodeObjectKeepsNoBody: an object decoded from a body holds no
// part of it (the HTTP layer reuses body buffers once decoded): random
// objects of every kind, in JSON and protobuf, are unchanged when their
// body is overwritten.
func TestDecodeObjectKeepsNoBody(t *testing.T) {
	c := newCodecs(t)
	f := randfill.NewWithSeed(7).NilChance(0.2).NumElements(1, 3)
	for _, k := range builtin.Kinds(builtin.Options{}) {
		res := k.Storage()
		for _, mt := range []string{JSON, Protobuf} {
			if mt == Protobuf && !res.Protobuf() {
				continue
			}
			info, err := c.InputSerializer(mt)
			if err != nil {
				t.Fatal(err)
			}
			decoded := 0
			for range 50 {
				obj := res.New()
				f.Fill(obj)
				obj.GetObjectKind().SetGroupVersionKind(res.GroupVersionKind())
				mf := obj.GetManagedFields()
				for i := range mf { // random bytes are no JSON
					mf[i].FieldsV1 = &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}
				}
				var buf bytes.Buffer
				if err := info.Serializer.Encode(obj, &buf); err != nil {
					continue // a value random filling made unencodable
				}
				body := buf.Bytes()
				got, _, err := c.DecodeObject(info, false, body, res)
				if err != nil {
					continue
				}
				// Its encoding, not a deep copy: that would share strings.
				before, err := json.Marshal(got)
				if err != nil {
					t.Fatal(err)
				}
				for i := range body {
					body[i] = 'x'
				}
				if after, _ := json.Marshal(got); !bytes.Equal(before, after) {
					t.Fatalf("%s in %s: the decoded object changed with its body:\n%s\n%s", k.Names.Kind, mt, before, after)
				}
				decoded++
			}
			if decoded < 25 {
				t.Errorf("%s in %s: %d of 50 random objects decoded", k.Names.Kind, mt, decoded)
			}
		}
	}
}

package codec

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	goruntime "runtime"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/resources"
)

// The encoders of a resource's objects: one object, a list, and (in
// watch.go) watch events. They take objects of the kind's storage
// version, as the registry returns them, and answer in the resource's
// version and the negotiated output, transforms included (a Table, a
// PartialObjectMetadata[List]).

// EncodeObject returns the response body of one object.
func (c *Codecs) EncodeObject(out Output, res resources.Resource, obj Cached) ([]byte, error) {
	if t := out.Transform; t != nil {
		obj = obj.decoded()
		var result runtime.Object
		switch t.Kind {
		case "Table":
			rv := obj.Object().GetResourceVersion()
			table, err := c.table(res, t, []Cached{obj}, metav1.ListMeta{ResourceVersion: rv})
			if err != nil {
				return nil, err
			}
			result = table
		case "PartialObjectMetadata":
			result = partial(obj.Object(), t)
		default:
			return nil, notAcceptableTransform(t, res.New())
		}
		return c.encode(out, result)
	}
	if format, ok := itemFormat(out); ok {
		if format == itemProtobuf && obj.Memo == nil {
			// No memo keeps the item (the answer to a write): the
			// envelope and the object are encoded into one buffer.
			if b, ok, err := c.enveloped(res, obj.Object()); ok {
				return b, err
			}
		}
		item, err := c.item(out, format, res, obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		b := AppendObject(make([]byte, 0, len(item)+64), out, res.GroupVersionKind(), item)
		if out.Info.MediaType == JSON {
			b = append(b, '\n')
		}
		return b, nil
	}
	v, err := res.FromStorage(obj.Object())
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return c.encode(out, v)
}

// enveloped returns obj at res's version in the protobuf envelope, when
// its type has a generated protobuf encoding (ok).
func (c *Codecs) enveloped(res resources.Resource, obj resources.Object) (b []byte, ok bool, err error) {
	v, err := res.FromStorage(obj)
	if err != nil {
		return nil, true, apierrors.NewInternalError(err)
	}
	m, ok := v.(sizedMarshaler)
	if !ok {
		return nil, false, nil
	}
	if b, err = marshalEnveloped(res.GroupVersionKind(), m); err != nil {
		return nil, true, apierrors.NewInternalError(err)
	}
	return b, true, nil
}

// EncodeList returns the response body of a list: the kind's list, a
// Table or a PartialObjectMetadataList.
func (c *Codecs) EncodeList(out Output, res resources.Resource, objs []Cached, lm metav1.ListMeta) (Body, error) {
	if t := out.Transform; t != nil {
		switch t.Kind {
		case "Table":
			table, err := c.table(res, t, objs, lm)
			if err != nil {
				return nil, err
			}
			return c.encodeBody(out, table)
		case "PartialObjectMetadataList":
			items := make([]metav1.PartialObjectMetadata, len(objs))
			for i, obj := range objs {
				items[i] = *partial(obj.Object(), t)
			}
			var list runtime.Object
			if t.Version == "v1beta1" {
				list = &metav1beta1.PartialObjectMetadataList{ListMeta: lm, Items: items}
			} else {
				list = &metav1.PartialObjectMetadataList{ListMeta: lm, Items: items}
			}
			list.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{Group: metav1.GroupName, Version: t.Version, Kind: "PartialObjectMetadataList"})
			return c.encodeBody(out, list)
		default:
			return nil, notAcceptableTransform(t, res.Version.NewList())
		}
	}
	if format, ok := itemFormat(out); ok {
		items, err := c.items(out, format, res, objs)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		l, err := NewListBody(out, res.ListGroupVersionKind(), lm, items)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		return l, nil
	}
	list := res.Version.NewList()
	items := make([]runtime.Object, len(objs))
	for i, o := range objs {
		v, err := res.FromStorage(o.Object())
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		items[i] = v
	}
	// SetList copies the items; an empty list is encoded as "items": [].
	if err := meta.SetList(list, items); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	la, err := meta.ListAccessor(list)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	la.SetResourceVersion(lm.ResourceVersion)
	la.SetContinue(lm.Continue)
	la.SetRemainingItemCount(lm.RemainingItemCount)
	return c.encodeBody(out, list)
}

// encodeBody returns obj in the negotiated format, as a Body.
func (c *Codecs) encodeBody(out Output, obj runtime.Object) (Body, error) {
	b, err := c.encode(out, obj)
	if err != nil {
		return nil, err
	}
	return Bytes(b), nil
}

// encode returns obj in the negotiated format.
func (c *Codecs) encode(out Output, obj runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	if err := c.Encode(&buf, out, obj); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return buf.Bytes(), nil
}

// items returns the item encodings of objs, encoding those not yet
// memoised on every core: a first list of many objects is otherwise
// bounded by one core's encoding speed.
func (c *Codecs) items(out Output, format int, res resources.Resource, objs []Cached) ([][]byte, error) {
	items := make([][]byte, len(objs))
	encodeRange := func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			item, err := c.item(out, format, res, objs[i])
			if err != nil {
				return err
			}
			items[i] = item
		}
		return nil
	}
	workers := goruntime.GOMAXPROCS(0)
	const minPerWorker = 512
	if workers < 2 || len(objs) < 2*minPerWorker {
		return items, encodeRange(0, len(objs))
	}
	var g errgroup.Group
	chunk := (len(objs) + workers - 1) / workers
	for lo := 0; lo < len(objs); lo += chunk {
		hi := min(lo+chunk, len(objs))
		g.Go(func() error { return encodeRange(lo, hi) })
	}
	return items, g.Wait()
}

func partial(obj resources.Object, t *Transform) *metav1.PartialObjectMetadata {
	p := meta.AsPartialObjectMetadata(obj)
	p.APIVersion = "meta.k8s.io/" + t.Version
	p.Kind = "PartialObjectMetadata"
	return p
}

// TableOptions decodes and validates a request's table options
// (includeObject), with kube-apiserver's 400s.
func TableOptions(query url.Values) (metav1.TableOptions, error) {
	var opts metav1.TableOptions
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(query, metav1.SchemeGroupVersion, &opts); err != nil {
		return opts, apierrors.NewBadRequest(err.Error())
	}
	if errs := metav1validation.ValidateTableOptions(&opts); len(errs) > 0 {
		if len(errs) == 1 {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs[0].Error()))
		}
		return opts, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs))
	}
	return opts, nil
}

// table builds the server-side table of objs (kube-apiserver's asTable),
// with the options in t.
func (c *Codecs) table(res resources.Resource, t *Transform, objs []Cached, lm metav1.ListMeta) (*metav1.Table, error) {
	table := &metav1.Table{ListMeta: lm, Rows: make([]metav1.TableRow, 0, len(objs))}
	table.APIVersion = "meta.k8s.io/" + t.Version
	table.Kind = "Table"
	if !t.Table.NoHeaders {
		table.ColumnDefinitions = res.Kind.Table.Columns
	}
	now := time.Now()
	for _, o := range objs {
		obj := o.Object()
		row := metav1.TableRow{Cells: res.Kind.Table.Row(obj, now)}
		switch t.Table.IncludeObject {
		case metav1.IncludeObject:
			v, err := res.FromStorage(obj)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			typed, err := c.WithTypeMeta(v)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			row.Object.Object = typed
		case metav1.IncludeMetadata, "":
			row.Object.Object = partial(obj, t)
		}
		table.Rows = append(table.Rows, row)
	}
	return table, nil
}

func notAcceptableTransform(t *Transform, obj runtime.Object) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: fmt.Sprintf("you requested %s, but the requested object is a %T", t.Kind, obj),
	}}
}

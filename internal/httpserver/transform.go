package httpserver

import (
	"fmt"
	"net/http"
	goruntime "runtime"
	"time"

	"golang.org/x/sync/errgroup"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/watchcache"
)

// writeResult writes one object, transformed to a Table or
// PartialObjectMetadata when the client asked for it.
func (s *Server) writeResult(w http.ResponseWriter, req *http.Request, out codec.Output, res *resources.Resource, code int, obj resources.Object) error {
	var result runtime.Object = obj
	if t := out.Transform; t != nil {
		switch t.Kind {
		case "Table":
			table, err := s.table(req, res, t, []resources.Object{obj}, metav1.ListMeta{ResourceVersion: obj.GetResourceVersion()})
			if err != nil {
				return err
			}
			result = table
		case "PartialObjectMetadata":
			result = partial(obj, t)
		default:
			return notAcceptableTransform(t, obj)
		}
	}
	s.writeObject(w, req, out, code, result)
	return nil
}

// encodeItems returns the item encodings of objs, encoding those not yet
// memoised on every core: a first list of many objects is otherwise
// bounded by one core's encoding speed.
func (s *Server) encodeItems(out codec.Output, slot int, objs []*watchcache.Object) ([][]byte, error) {
	items := make([][]byte, len(objs))
	encodeRange := func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			o := objs[i]
			item, err := o.Memo(slot, func() ([]byte, error) { return s.codecs.EncodeItem(out, o.Obj) })
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

// writeItem writes one object from its item encoding.
func (s *Server) writeItem(w http.ResponseWriter, req *http.Request, out codec.Output, res *resources.Resource, code int, item []byte) {
	b := codec.AppendObject(make([]byte, 0, len(item)+64), out, res.GroupVersionKind(), item)
	if out.Info.MediaType == codec.JSON {
		b = append(b, '\n')
	}
	w.Header().Set("Content-Type", out.MediaType())
	writeBody(w, req, code, b)
}

// writeList writes a list result as the resource's list kind, a Table or a
// PartialObjectMetadataList.
func (s *Server) writeList(w http.ResponseWriter, req *http.Request, out codec.Output, res *resources.Resource, result *registry.ListResult) error {
	lm := metav1.ListMeta{
		ResourceVersion:    fmt.Sprint(result.ResourceVersion),
		Continue:           result.Continue,
		RemainingItemCount: result.RemainingItemCount,
	}
	objs := make([]resources.Object, len(result.Objects))
	for i, o := range result.Objects {
		objs[i] = o.Obj
	}
	if t := out.Transform; t != nil {
		switch t.Kind {
		case "Table":
			table, err := s.table(req, res, t, objs, lm)
			if err != nil {
				return err
			}
			s.writeObject(w, req, out, http.StatusOK, table)
			return nil
		case "PartialObjectMetadataList":
			items := make([]metav1.PartialObjectMetadata, len(objs))
			for i, obj := range objs {
				items[i] = *partial(obj, t)
			}
			var list runtime.Object
			if t.Version == "v1beta1" {
				list = &metav1beta1.PartialObjectMetadataList{ListMeta: lm, Items: items}
			} else {
				list = &metav1.PartialObjectMetadataList{ListMeta: lm, Items: items}
			}
			list.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{Group: metav1.GroupName, Version: t.Version, Kind: "PartialObjectMetadataList"})
			s.writeObject(w, req, out, http.StatusOK, list)
			return nil
		default:
			return notAcceptableTransform(t, res.NewList())
		}
	}
	if slot, ok := codec.ItemSlot(out); ok {
		items, err := s.encodeItems(out, slot, result.Objects)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		body, err := codec.AppendList(nil, out, res.GroupVersion().WithKind(res.ListKind), lm, items)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		w.Header().Set("Content-Type", out.MediaType())
		writeBody(w, req, http.StatusOK, body)
		return nil
	}
	list := res.NewList()
	items := make([]runtime.Object, len(objs))
	for i, o := range objs {
		items[i] = o
	}
	// SetList copies the items; an empty list is encoded as "items": [].
	if err := meta.SetList(list, items); err != nil {
		return apierrors.NewInternalError(err)
	}
	la, err := meta.ListAccessor(list)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	la.SetResourceVersion(lm.ResourceVersion)
	la.SetContinue(lm.Continue)
	la.SetRemainingItemCount(lm.RemainingItemCount)
	s.writeObject(w, req, out, http.StatusOK, list)
	return nil
}

func partial(obj resources.Object, t *codec.Transform) *metav1.PartialObjectMetadata {
	p := meta.AsPartialObjectMetadata(obj)
	p.APIVersion = "meta.k8s.io/" + t.Version
	p.Kind = "PartialObjectMetadata"
	return p
}

// table builds the server-side table of objs (kube-apiserver's asTable).
func (s *Server) table(req *http.Request, res *resources.Resource, t *codec.Transform, objs []resources.Object, lm metav1.ListMeta) (*metav1.Table, error) {
	opts, err := tableOptions(req)
	if err != nil {
		return nil, err
	}
	return s.buildTable(res, t, opts, objs, lm)
}

// tableOptions decodes and validates a request's TableOptions.
func tableOptions(req *http.Request) (metav1.TableOptions, error) {
	var opts metav1.TableOptions
	if err := decodeParams(req, &opts); err != nil {
		return opts, err
	}
	if errs := metav1validation.ValidateTableOptions(&opts); len(errs) > 0 {
		if len(errs) == 1 {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs[0].Error()))
		}
		return opts, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs))
	}
	return opts, nil
}

// buildTable makes the Table of objs with options already validated.
func (s *Server) buildTable(res *resources.Resource, t *codec.Transform, opts metav1.TableOptions, objs []resources.Object, lm metav1.ListMeta) (*metav1.Table, error) {
	table := &metav1.Table{ListMeta: lm, Rows: make([]metav1.TableRow, 0, len(objs))}
	table.APIVersion = "meta.k8s.io/" + t.Version
	table.Kind = "Table"
	if !opts.NoHeaders {
		table.ColumnDefinitions = res.Columns
	}
	now := time.Now()
	for _, obj := range objs {
		row := metav1.TableRow{Cells: res.Row(obj, now)}
		switch opts.IncludeObject {
		case metav1.IncludeObject:
			typed, err := s.codecs.WithTypeMeta(obj)
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

func notAcceptableTransform(t *codec.Transform, obj runtime.Object) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: fmt.Sprintf("you requested %s, but the requested object is a %T", t.Kind, obj),
	}}
}

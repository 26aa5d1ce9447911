package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/watchcache"
)

// Get returns one object (storage version), as the cache holds it:
// callers must not modify it. resourceVersion follows kube-apiserver: ""
// is a consistent read, "0" any cached state, N a state at least as new
// as N.
func (r *Registry) Get(ctx context.Context, res resources.Resource, namespace, name, resourceVersion string) (codec.Cached, error) {
	rv, err := parseResourceVersion(resourceVersion)
	if err != nil {
		return codec.Cached{}, err
	}
	s, err := r.stateNotOlderThan(ctx, res, resourceVersion, rv)
	if err != nil {
		return codec.Cached{}, err
	}
	o, ok := s.Get(r.key(res.Kind, namespace, name))
	if !ok {
		return codec.Cached{}, apierrors.NewNotFound(res.GroupResource(), name)
	}
	return o.Cached(), nil
}

// stateNotOlderThan returns a cache state for a read with the given
// resourceVersion ("" consistent, "0" any, N at least N).
func (r *Registry) stateNotOlderThan(ctx context.Context, res resources.Resource, resourceVersion string, rv int64) (*watchcache.State, error) {
	c := r.cache(res.Kind)
	switch resourceVersion {
	case "0":
		if s := c.Current(); s != nil {
			return s, nil
		}
		return r.waitFor(ctx, c, 0)
	case "":
		cur, err := r.store.Revision(ctx)
		if err != nil {
			return nil, storageError(err, res, "", "get")
		}
		return r.waitFor(ctx, c, cur)
	default:
		return r.waitFor(ctx, c, rv)
	}
}

// waitFor waits, within kube-apiserver's 3 s budget, for the cache to reach
// rev; it answers 504 "Too large resource version" when it does not.
func (r *Registry) waitFor(ctx context.Context, c *watchcache.Cache, rev int64) (*watchcache.State, error) {
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	s, err := c.WaitFor(wctx, rev)
	if err == nil {
		return s, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var current int64
	if s := c.Current(); s != nil {
		current = s.Rev
	}
	return nil, tooLargeResourceVersion(rev, current)
}

func tooLargeResourceVersion(rev, current int64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rev, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}
	return err
}

// parseResourceVersion parses a resourceVersion parameter; "" and "0" are 0.
func parseResourceVersion(rv string) (int64, error) {
	if rv == "" || rv == "0" {
		return 0, nil
	}
	n, err := strconv.ParseUint(rv, 10, 63)
	if err != nil {
		fe := field.Invalid(field.NewPath("resourceVersion"), rv, err.Error())
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", fe))
	}
	return int64(n), nil
}

// ListResult is one list response.
type ListResult struct {
	// Items are of the kind's storage version and shared: callers must
	// not modify them.
	Items []codec.Cached
	// ResourceVersion is the revision the list reflects.
	ResourceVersion int64
	Continue        string
	// RemainingItemCount is set when a page is cut short and no selector
	// was used.
	RemainingItemCount *int64
}

// ListMeta returns the list's metadata, as the response carries it.
func (l *ListResult) ListMeta() metav1.ListMeta {
	return metav1.ListMeta{
		ResourceVersion:    strconv.FormatInt(l.ResourceVersion, 10),
		Continue:           l.Continue,
		RemainingItemCount: l.RemainingItemCount,
	}
}

// List lists objects of res in namespace ("" for all namespaces and for
// cluster-scoped resources), with kube-apiserver's resourceVersion,
// resourceVersionMatch, limit and continue rules.
func (r *Registry) List(ctx context.Context, res resources.Resource, namespace string, opts *metainternalversion.ListOptions) (*ListResult, error) {
	sel, err := r.selector(res, namespace, opts)
	if err != nil {
		return nil, err
	}
	c := r.cache(res.Kind)
	var (
		s    *watchcache.State
		from string
		tok  continueToken
	)
	if opts.Continue != "" {
		tok, err = decodeContinue(opts.Continue)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return nil, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		from = r.kindPrefix(res.Kind) + tok.StartKey
		if tok.ResourceVersion < 0 {
			// A token handed out with a 410: continue at the latest state.
			if s, err = r.stateNotOlderThan(ctx, res, "", 0); err != nil {
				return nil, err
			}
		} else {
			// A token from another replica may be ahead of this cache:
			// wait for it as for an exact read.
			if cur := c.Current(); cur == nil || tok.ResourceVersion > cur.Rev {
				if _, err := r.waitFor(ctx, c, tok.ResourceVersion); err != nil {
					return nil, err
				}
			}
			if s, err = c.StateAt(tok.ResourceVersion); err != nil {
				return nil, r.expiredContinue(res, from, err)
			}
		}
	} else {
		rv, err := parseResourceVersion(opts.ResourceVersion)
		if err != nil {
			return nil, err
		}
		exact := opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact ||
			// A legacy paginated list at N reads exactly N.
			opts.ResourceVersionMatch == "" && rv > 0 && opts.Limit > 0
		if exact {
			cur := c.Current()
			if cur != nil && rv > cur.Rev {
				if _, err := r.waitFor(ctx, c, rv); err != nil {
					return nil, err
				}
			}
			if s, err = c.StateAt(rv); err != nil {
				if errors.Is(err, watchcache.ErrExpired) {
					return nil, apierrors.NewResourceExpired("The resourceVersion for the provided list is too old.")
				}
				return nil, apierrors.NewInternalError(err)
			}
		} else if s, err = r.stateNotOlderThan(ctx, res, opts.ResourceVersion, rv); err != nil {
			return nil, err
		}
	}

	page := s.List(sel, from, int(opts.Limit))
	out := &ListResult{Items: make([]codec.Cached, len(page.Objects)), ResourceVersion: s.Rev}
	for i, o := range page.Objects {
		out.Items[i] = o.Cached()
	}
	if page.Next != "" {
		c.Retain(s)
		last := page.Objects[len(page.Objects)-1].Key
		var left int64 // objects after this page
		if sel.Label.Empty() && sel.Field.Empty() {
			// The previous page's token says how many were left then;
			// counting them at every page made paging O(n^2).
			left = tok.Left - int64(len(page.Objects))
			if left < 1 { // unknown (0), or not what this state holds
				left = int64(s.Count(sel, page.Next))
			}
			out.RemainingItemCount = &left
		}
		out.Continue = encodeContinue(strings.TrimPrefix(last, r.kindPrefix(res.Kind))+"\x00", s.Rev, left)
	}
	return out, nil
}

// expiredContinue answers a continue token whose snapshot is gone: 410
// with a token that continues from the same key at the latest revision,
// as kube-apiserver does.
func (r *Registry) expiredContinue(res resources.Resource, from string, err error) error {
	if !errors.Is(err, watchcache.ErrExpired) {
		return apierrors.NewInternalError(err)
	}
	se := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
		"objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
	se.ErrStatus.ListMeta.Continue = encodeContinue(strings.TrimPrefix(from, r.kindPrefix(res.Kind)), -1, 0)
	return se
}

// selector builds the cache selector of a list: namespace from the URL,
// metadata.name and metadata.namespace from the field selector to narrow
// the key range, and the full label and field selectors, the field labels
// translated into the storage version's.
func (r *Registry) selector(res resources.Resource, namespace string, opts *metainternalversion.ListOptions) (watchcache.Selector, error) {
	sel := watchcache.Selector{Namespace: namespace, Label: opts.LabelSelector, Field: opts.FieldSelector}
	if sel.Label == nil {
		sel.Label = labels.Everything()
	}
	if sel.Field == nil {
		sel.Field = fields.Everything()
	} else {
		f, err := sel.Field.Transform(func(label, value string) (string, string, error) {
			stored, err := res.FieldLabel(label)
			return stored, value, err
		})
		if err != nil {
			return sel, apierrors.NewBadRequest(err.Error())
		}
		sel.Field = f
	}
	for _, req := range sel.Field.Requirements() {
		if req.Operator != selection.Equals && req.Operator != selection.DoubleEquals {
			continue
		}
		switch req.Field {
		case "metadata.name":
			sel.Name = req.Value
		case "metadata.namespace":
			if sel.Namespace == "" && res.Kind.Namespaced {
				sel.Namespace = req.Value
			}
		}
	}
	return sel, nil
}

// continueToken is kube-apiserver's continue token format; clients treat it
// as opaque, but keeping the format lets tokens be read by humans and
// tools alike.
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
	// Left, when not 0, is how many objects the list's key range holds
	// from StartKey on at ResourceVersion: the next page's
	// remainingItemCount is then Left less that page. Our own field
	// (kube-apiserver counts in etcd); a token that lies about it
	// misinforms only its own client.
	Left int64 `json:"left,omitempty"`
}

func encodeContinue(start string, rev, left int64) string {
	b, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", ResourceVersion: rev, StartKey: start, Left: left})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (continueToken, error) {
	var tok continueToken
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return tok, fmt.Errorf("continue key is not valid: %v", err)
	}
	if err := json.Unmarshal(data, &tok); err != nil {
		return tok, fmt.Errorf("continue key is not valid: %v", err)
	}
	if tok.APIVersion != "meta.k8s.io/v1" {
		return tok, fmt.Errorf("continue key is not valid: server does not recognize this encoded version %v", tok.APIVersion)
	}
	if tok.ResourceVersion == 0 {
		return tok, errors.New("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
	}
	if tok.StartKey == "" {
		return tok, errors.New("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")
	}
	// A token may not reach outside the resource's key space.
	key := "/" + strings.TrimPrefix(tok.StartKey, "/")
	if path.Clean(key) != key {
		return tok, fmt.Errorf("continue key is not valid: %v", tok.StartKey)
	}
	tok.StartKey = key[1:]
	return tok, nil
}

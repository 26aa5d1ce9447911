package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/admission"
	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/storage"
)

// WriteOptions are the options shared by create, update and patch.
type WriteOptions struct {
	// DryRun runs every check but stores nothing (dryRun=All).
	DryRun bool
	// Manager is the field manager recorded in managedFields: the
	// fieldManager parameter, or the client's User-Agent prefix.
	Manager string
	// Again, when set, gives an update's object again as the caller
	// first had it (the HTTP layer decodes the body once more). An
	// update's first attempt consumes its object; only a retry needs it
	// again, and a copy for every first attempt would cost every update
	// what only a retry needs. Without Again, Update copies the object
	// before its first attempt.
	Again func() (resources.Object, error)
}

// WriteResult is the outcome of a create, update or patch.
type WriteResult struct {
	// Object is the object as stored (storage version), with its new
	// resourceVersion (the old one for a write that changed nothing, none
	// for a dry-run create).
	Object resources.Object
	// Created is true when the write created the object (201).
	Created bool
	// Warnings go to the client as Warning headers.
	Warnings []string
}

// maxGenerateNameAttempts is how often a create with generateName retries
// on a name collision (kube-apiserver's maxNameGenerationCreateAttempts).
const maxGenerateNameAttempts = 8

// Create stores a new object. obj is of res's version, decoded from the
// request, and owned by the call.
func (r *Registry) Create(ctx context.Context, res resources.Resource, namespace string, obj resources.Object, opts WriteOptions) (WriteResult, error) {
	wipeSystemFields(obj)
	if err := ensureNamespace(res, namespace, obj); err != nil {
		return WriteResult{}, err
	}
	warnings := dedupOwnerReferences(obj, duplicateOwnersWarning)
	obj, sole := r.trackUpdate(res, "", "", nil, res.New(), obj, opts.Manager)
	stored, err := res.ToStorage(obj)
	if err != nil {
		return WriteResult{}, apierrors.NewInternalError(err)
	}
	if err := r.admitCreate(ctx, res, stored); err != nil {
		return WriteResult{}, err
	}
	generate := stored.GetGenerateName() != "" && stored.GetName() == ""
	for attempt := 1; ; attempt++ {
		candidate := stored
		if generate {
			candidate = stored.DeepCopyObject().(resources.Object)
		}
		out, err := r.create(ctx, res, candidate, generate, sole, opts)
		if err == nil {
			out.Warnings = append(warnings, out.Warnings...)
			return out, nil
		}
		if !generate || !apierrors.IsAlreadyExists(err) {
			return WriteResult{}, err
		}
		if attempt == maxGenerateNameAttempts {
			se := apierrors.NewAlreadyExists(res.GroupResource(), candidate.GetName())
			se.ErrStatus.Message = fmt.Sprintf("%s %q already exists, the server was not able to generate a unique name for the object", res.GroupResource(), candidate.GetName())
			se.ErrStatus.Details.RetryAfterSeconds = 1
			return WriteResult{}, se
		}
	}
}

// create makes one attempt at storing a new object (storage version).
func (r *Registry) create(ctx context.Context, res resources.Resource, obj resources.Object, generate, sole bool, opts WriteOptions) (WriteResult, error) {
	r.fillSystemFields(obj)
	if generate {
		obj.SetName(generateName(obj.GetGenerateName()))
	}
	warnings, err := r.beforeCreate(res, obj)
	if err != nil {
		return WriteResult{}, err
	}
	// kube-apiserver's storage refuses a create that carries a parseable,
	// non-zero resourceVersion, as a plain 500.
	if rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64); err == nil && rv != 0 {
		return WriteResult{}, errors.New("resourceVersion should not be set on objects to be created")
	}
	obj.SetResourceVersion("")
	key := r.key(res.Kind, obj.GetNamespace(), obj.GetName())
	data, err := r.codecs.EncodeStorage(obj)
	if err != nil {
		return WriteResult{}, apierrors.NewInternalError(err)
	}
	if opts.DryRun {
		if cur, ok := r.cachedObject(res.Kind, key); ok {
			return WriteResult{}, alreadyExists(res, obj.GetName(), cur)
		}
		return WriteResult{Object: obj, Created: true, Warnings: warnings}, nil
	}
	kv, err := r.store.Put(ctx, key, data, 0, putOptions(res.Kind)...)
	if err != nil {
		var ce *storage.ConflictError
		if errors.As(err, &ce) && ce.Current != nil {
			cur, derr := r.decode(res.Kind, *ce.Current)
			if derr != nil {
				return WriteResult{}, apierrors.NewInternalError(derr)
			}
			return WriteResult{}, alreadyExists(res, obj.GetName(), cur)
		}
		return WriteResult{}, storageError(err, res, obj.GetName(), "create")
	}
	obj.SetResourceVersion(strconv.FormatInt(kv.ModRevision, 10))
	r.state[res.Kind].owners.set(key, kv.ModRevision, sole)
	return WriteResult{Object: obj, Created: true, Warnings: warnings}, nil
}

func alreadyExists(res resources.Resource, name string, cur resources.Object) error {
	se := apierrors.NewAlreadyExists(res.GroupResource(), name)
	if cur.GetDeletionTimestamp() != nil {
		se.ErrStatus.Message = "object is being deleted: " + se.ErrStatus.Message
	}
	return se
}

// admitCreate runs the admission chain on a create, as kube-apiserver's
// handlers run admission: on the object as decoded, before the kind's
// preparation, a generated name not yet chosen.
func (r *Registry) admitCreate(ctx context.Context, res resources.Resource, obj resources.Object) error {
	name := obj.GetName()
	if name == "" {
		name = obj.GetGenerateName()
	}
	return r.admit(ctx, admission.Create, res, obj.GetNamespace(), name, obj, nil)
}

// beforeCreate prepares and validates a new object (storage version), as
// kube-apiserver's rest.BeforeCreate does.
func (r *Registry) beforeCreate(res resources.Resource, obj resources.Object) ([]string, error) {
	strategy := res.Kind.Strategy
	strategy.PrepareForCreate(obj)
	// Validate includes kube-apiserver's generic metadata checks.
	if errs := strategy.Validate(obj, res.GroupVersion()); len(errs) > 0 {
		return nil, invalid(res, obj.GetName(), errs)
	}
	return strategy.Warnings(obj, nil), nil
}

// invalid is the 422 of a write that does not validate; it names the
// kind, as kube-apiserver's does.
func invalid(res resources.Resource, name string, errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: res.Version.Group, Kind: res.Kind.Names.Kind}, name, errs)
}

// admit runs the admission chain on a write.
func (r *Registry) admit(ctx context.Context, op admission.Operation, res resources.Resource, namespace, name string, obj, old resources.Object) error {
	if len(r.admission) == 0 {
		return nil
	}
	return r.admission.Admit(ctx, reader{r}, &admission.Request{
		Operation: op, Resource: res, Namespace: namespace, Name: name, Object: obj, Old: old,
	})
}

// Update replaces an object (PUT), or a subresource of it ("status",
// "finalize"). A missing object is created when the kind allows it. obj
// is of res's version, decoded from the request, and owned by the call.
func (r *Registry) Update(ctx context.Context, res resources.Resource, namespace, name, subresource string, obj resources.Object, opts WriteOptions) (WriteResult, error) {
	sub, err := subresourceOf(res, name, subresource)
	if err != nil {
		return WriteResult{}, err
	}
	prepare := func(obj resources.Object) ([]string, error) {
		if err := ensureNamespace(res, namespace, obj); err != nil {
			return nil, err
		}
		if err := checkName(obj, name); err != nil {
			return nil, err
		}
		return dedupOwnerReferences(obj, duplicateOwnersWarning), nil
	}
	warnings, err := prepare(obj)
	if err != nil {
		return WriteResult{}, err
	}
	key := r.key(res.Kind, namespace, name)
	bodyUID := obj.GetUID()
	w := write{res: res, sub: sub, name: name, allowCreate: res.Kind.Updates.AllowCreateOnUpdate && sub == nil}
	seen, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	var again func() (resources.Object, error)
	if opts.Again != nil {
		again = func() (resources.Object, error) {
			obj, err := opts.Again()
			if err == nil {
				_, err = prepare(obj)
			}
			return obj, err
		}
	} else {
		kept := obj.DeepCopyObject().(resources.Object)
		again = func() (resources.Object, error) { return kept.DeepCopyObject().(resources.Object), nil }
	}
	next := obj // the next attempt's object; nil once consumed
	out, err := r.guaranteedUpdate(ctx, res, key, name, seen, opts.DryRun, func(existing *current) (*attempt, error) {
		// A uid in the body is a precondition on the stored object.
		if bodyUID != "" && (existing == nil || existing.obj.GetUID() != bodyUID) {
			var have types.UID
			if existing != nil {
				have = existing.obj.GetUID()
			}
			return nil, apierrors.NewConflict(res.GroupResource(), name,
				fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", bodyUID, have))
		}
		live, err := r.live(res, existing)
		if err != nil {
			return nil, err
		}
		in := next
		next = nil
		if in == nil {
			if in, err = again(); err != nil {
				return nil, apierrors.NewInternalError(err)
			}
		}
		newObj, sole := r.trackUpdate(res, subresource, key, existing, live, in, opts.Manager)
		a, err := r.updateObject(ctx, w, existing, newObj)
		if err != nil {
			return nil, err
		}
		a.sole = sole
		return a, nil
	})
	if err != nil {
		return WriteResult{}, err
	}
	return WriteResult{Object: out.obj, Created: out.created, Warnings: append(warnings, out.warnings...)}, nil
}

func subresourceOf(res resources.Resource, name, subresource string) (*resources.Subresource, error) {
	if subresource == "" {
		return nil, nil
	}
	s := res.Kind.Subresource(subresource)
	if s == nil {
		return nil, apierrors.NewNotFound(res.GroupResource(), name)
	}
	return s, nil
}

// live is the stored object at res's version, for managedFields
// bookkeeping; an empty object when there is none.
func (r *Registry) live(res resources.Resource, existing *current) (resources.Object, error) {
	if existing == nil {
		return res.New(), nil
	}
	v, err := res.FromStorage(existing.obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return v, nil
}

// write describes one update request for updateObject.
type write struct {
	res  resources.Resource
	sub  *resources.Subresource
	name string
	// allowCreate: a missing object is created (PUT to a kind that
	// allows it, or server-side apply).
	allowCreate bool
}

// attempt is the outcome of one try of an update: the object to store
// (storage version) and what the client learns of it. Each try makes a
// new one, so a retry cannot add to what an earlier try said.
type attempt struct {
	obj      resources.Object
	created  bool
	deleted  bool
	warnings []string
	// sole: obj's one managedFields entry owns all its fields (the fast
	// path's precondition, recorded once stored).
	sole bool
}

// updateObject applies kube-apiserver's generic update rules to newObj
// (res's version), the object an update wants stored where existing is
// (nil: missing), and returns the attempt to store. It creates when
// allowed, checks resourceVersion, and runs the kind's update
// preparation, admission and validation.
func (r *Registry) updateObject(ctx context.Context, w write, existing *current, newObj resources.Object) (*attempt, error) {
	res := w.res
	if existing == nil {
		if !w.allowCreate {
			return nil, apierrors.NewNotFound(res.GroupResource(), w.name)
		}
		obj, err := res.ToStorage(newObj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		wipeSystemFields(obj)
		r.fillSystemFields(obj)
		if err := r.admitCreate(ctx, res, obj); err != nil {
			return nil, err
		}
		warnings, err := r.beforeCreate(res, obj)
		if err != nil {
			return nil, err
		}
		obj.SetResourceVersion("")
		return &attempt{obj: obj, created: true, warnings: warnings}, nil
	}
	// kube-apiserver returns the versioner's strconv error as is, a 500
	// logged as the server's fault; the input is the client's: a 400, as
	// a list's malformed resourceVersion is (a deliberate difference).
	newRV, err := parseResourceVersion(newObj.GetResourceVersion())
	if err != nil {
		return nil, err
	}
	obj, err := res.ToStorage(newObj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if newRV == 0 {
		if !res.Kind.Updates.AllowUnconditionalUpdate {
			// kube-apiserver names the plural resource here, not the kind.
			return nil, apierrors.NewInvalid(schema.GroupKind{Group: res.Version.Group, Kind: res.Kind.Names.Plural}, w.name, field.ErrorList{
				field.Invalid(field.NewPath("metadata", "resourceVersion"), newRV, "must be specified for an update"),
			})
		}
		// An unconditional update validates as an update of the stored
		// version.
		obj.SetResourceVersion(strconv.FormatInt(existing.rev, 10))
	} else if int64(newRV) != existing.rev {
		return nil, apierrors.NewConflict(res.GroupResource(), w.name, errors.New(optimisticLockMessage))
	}
	if err := r.admit(ctx, admission.Update, res, obj.GetNamespace(), w.name, obj, existing.obj); err != nil {
		return nil, err
	}
	warnings, err := r.beforeUpdate(res, w.sub, obj, existing.obj)
	if err != nil {
		return nil, err
	}
	obj.SetResourceVersion("")
	return &attempt{obj: obj, warnings: warnings}, nil
}

// beforeUpdate prepares and validates an update (storage version), as
// kube-apiserver's rest.BeforeUpdate does. The body's name and namespace
// were reconciled with the request's by Update and Patch.
func (r *Registry) beforeUpdate(res resources.Resource, sub *resources.Subresource, obj, old resources.Object) ([]string, error) {
	obj.SetGeneration(old.GetGeneration())
	var strategy resources.UpdateStrategy = res.Kind.Strategy
	if sub != nil {
		strategy = sub.Strategy
	}
	strategy.PrepareForUpdate(obj, old)
	if obj.GetUID() == "" {
		obj.SetUID(old.GetUID())
	}
	if ts := old.GetCreationTimestamp(); !ts.IsZero() {
		obj.SetCreationTimestamp(ts)
	}
	if old.GetDeletionTimestamp() != nil {
		obj.SetDeletionTimestamp(old.GetDeletionTimestamp())
	}
	if old.GetDeletionGracePeriodSeconds() != nil && obj.GetDeletionGracePeriodSeconds() == nil {
		obj.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	}
	// ValidateUpdate includes kube-apiserver's generic metadata checks,
	// duplicates and all: NewInvalid words the message without them, the
	// causes keep them, as kube-apiserver's do.
	if errs := strategy.ValidateUpdate(obj, old, res.GroupVersion()); len(errs) > 0 {
		return nil, invalid(res, obj.GetName(), errs)
	}
	if sub != nil {
		return nil, nil
	}
	return res.Kind.Strategy.Warnings(obj, old), nil
}

// current is the stored state an update starts from.
type current struct {
	obj  resources.Object // storage version, shared: never modified
	rev  int64
	data []byte // the stored bytes (shared: never modified)
	// fresh says the state was read from storage (or returned by a failed
	// write), not from a possibly stale cache.
	fresh bool
}

// updateFunc computes what to store from the current state (nil when the
// object does not exist). It must not modify existing.
type updateFunc func(existing *current) (*attempt, error)

// guaranteedUpdate applies fn until its result is stored without
// conflicting with a concurrent write, as kube-apiserver's
// GuaranteedUpdate does: it starts from the cached object, and only
// re-reads storage when fn fails or the write conflicts. A result
// byte-identical to the stored object is not written. An object left with
// a deletionTimestamp and nothing holding it is deleted. The attempt
// returned is the last one's, its object carrying the stored
// resourceVersion.
//
// seen is a revision the object is known to have reached (the
// resourceVersion an update is conditioned on, 0 when none): a cached
// state older than it is bound to fail, so storage is read at once. A
// holder renewing faster than the cache follows (the answer to its last
// renewal is its next one's precondition) would otherwise pay for every
// renewal twice.
func (r *Registry) guaranteedUpdate(ctx context.Context, res resources.Resource, key, name string, seen int64, dryRun bool, fn updateFunc) (*attempt, error) {
	cur := r.cachedCurrent(res.Kind, key)
	if cur != nil && cur.rev < seen {
		var err error
		if cur, err = r.storedCurrent(ctx, res, key, name); err != nil {
			return nil, err
		}
	}
	for {
		a, err := fn(cur)
		if err != nil {
			if cur != nil && cur.fresh || cur == nil && r.storageMissing(ctx, key) {
				return nil, err
			}
			if cur, err = r.storedCurrent(ctx, res, key, name); err != nil {
				return nil, err
			}
			continue
		}
		newObj := a.obj
		if cur != nil && readyToDelete(res.Kind, newObj) {
			if err := r.deleteFinalized(ctx, key, cur, newObj, dryRun); err != nil {
				// Another write came between: fn decides again on it,
				// as after a conflicting put.
				if cur, err = r.conflicted(res, name, "delete", err); err != nil {
					return nil, err
				}
				continue
			}
			r.state[res.Kind].owners.set(key, 0, false)
			a.deleted = true
			return a, nil
		}
		data, err := r.codecs.EncodeStorage(newObj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if cur != nil {
			same := bytes.Equal(data, cur.data)
			if !same {
				data, same = r.ignoreManagedFieldsTimes(newObj, cur, data)
			}
			if same {
				if !cur.fresh {
					if cur, err = r.storedCurrent(ctx, res, key, name); err != nil {
						return nil, err
					}
					continue
				}
				// Nothing changed: no write, no event, same resourceVersion.
				a.obj = cur.obj
				return a, nil
			}
		}
		var expected int64
		if cur != nil {
			expected = cur.rev
		}
		if dryRun {
			if cur != nil {
				newObj.SetResourceVersion(strconv.FormatInt(cur.rev, 10))
			}
			return a, nil
		}
		kv, err := r.store.Put(ctx, key, data, expected, putOptions(res.Kind)...)
		if err != nil {
			if cur, err = r.conflicted(res, name, "update", err); err != nil {
				return nil, err
			}
			continue
		}
		newObj.SetResourceVersion(strconv.FormatInt(kv.ModRevision, 10))
		r.state[res.Kind].owners.set(key, kv.ModRevision, a.sole)
		return a, nil
	}
}

// putOptions are the storage options of every write of k's objects: the
// kind's TTL, which each create and update starts again (kube-apiserver's
// TTLFunc for Events returns the TTL whatever the write).
func putOptions(k *resources.Kind) []storage.PutOption {
	if k.TTL > 0 {
		return []storage.PutOption{storage.WithTTL(k.TTL)}
	}
	return nil
}

// ignoreManagedFieldsTimes makes an update that only moves managedFields
// timestamps a no-op, as kube-apiserver does
// (apiserver/pkg/endpoints/handlers/fieldmanager IgnoreManagedFieldsTimestampsTransformer):
// when the entries equal the stored ones but for their times, and the
// object is otherwise unchanged, the stored times are kept. It returns the
// encoding to store and whether it is the stored one.
func (r *Registry) ignoreManagedFieldsTimes(obj resources.Object, cur *current, data []byte) ([]byte, bool) {
	mf, old := obj.GetManagedFields(), cur.obj.GetManagedFields()
	if len(mf) == 0 || len(mf) != len(old) || !sameEntries(mf, old, false) {
		return data, false
	}
	// What lies after the metadata is not touched by the times: when it
	// differs (a renewal's spec), restoring them cannot make the encodings
	// equal, and the encoding that would prove it is saved.
	if cur.differsAfterMetadata(data) {
		return data, false
	}
	restored := slices.Clone(mf)
	for i := range restored {
		restored[i].Time = old[i].Time
	}
	obj.SetManagedFields(restored)
	if d, err := r.codecs.EncodeStorage(obj); err == nil && bytes.Equal(d, cur.data) {
		return d, true
	}
	obj.SetManagedFields(mf)
	return data, false
}

// differsAfterMetadata reports whether what follows data's metadata is
// proven to differ from what follows it in cur's stored encoding.
func (cur *current) differsAfterMetadata(data []byte) bool {
	a, ok := codec.AfterMetadata(data)
	if !ok {
		return false
	}
	b, ok := codec.AfterMetadata(cur.data)
	return ok && !bytes.Equal(a, b)
}

// readyToDelete reports whether an updated object has been marked for
// deletion and nothing holds it any more.
func readyToDelete(k *resources.Kind, obj resources.Object) bool {
	if obj.GetDeletionTimestamp() == nil || len(obj.GetFinalizers()) > 0 {
		return false
	}
	return k.Finalization == nil || !k.Finalization.Holds(obj)
}

// deleteFinalized deletes an object whose update removed its last
// finalizer; the answer is the object as the update left it. An object
// already gone is not an error; a conflict is returned as storage's.
func (r *Registry) deleteFinalized(ctx context.Context, key string, cur *current, final resources.Object, dryRun bool) error {
	final.SetResourceVersion(strconv.FormatInt(cur.rev, 10))
	if dryRun {
		return nil
	}
	if _, err := r.store.Delete(ctx, key, cur.rev); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	return nil
}

func (r *Registry) cachedObject(k *resources.Kind, key string) (resources.Object, bool) {
	s := r.cache(k).Current()
	if s == nil {
		return nil, false
	}
	o, ok := s.Get(key)
	if !ok {
		return nil, false
	}
	return o.Decoded(), true
}

// cachedCurrent returns the cached state of key, nil when not cached.
func (r *Registry) cachedCurrent(k *resources.Kind, key string) *current {
	s := r.cache(k).Current()
	if s == nil {
		return nil
	}
	o, ok := s.Get(key)
	if !ok {
		return nil
	}
	return &current{obj: o.Decoded(), rev: o.Rev, data: o.Stored}
}

// storedCurrent reads key from storage; nil when it does not exist.
func (r *Registry) storedCurrent(ctx context.Context, res resources.Resource, key, name string) (*current, error) {
	kv, err := r.store.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, storageError(err, res, name, "get")
	}
	obj, err := r.decode(res.Kind, kv)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return &current{obj: obj, rev: kv.ModRevision, data: kv.Value, fresh: true}, nil
}

// storageMissing reports whether key is absent from storage, so that a
// failure computed on "not found in cache" can be trusted.
func (r *Registry) storageMissing(ctx context.Context, key string) bool {
	_, err := r.store.Get(ctx, key)
	return errors.Is(err, storage.ErrNotFound)
}

// conflicted returns the object as stored when a write's err is a
// conflict, for the write to be tried again on it (nil: gone), and
// otherwise the error the client gets.
func (r *Registry) conflicted(res resources.Resource, name, verb string, err error) (*current, error) {
	var ce *storage.ConflictError
	if !errors.As(err, &ce) {
		return nil, storageError(err, res, name, verb)
	}
	return r.fromConflict(res.Kind, ce)
}

func (r *Registry) fromConflict(k *resources.Kind, ce *storage.ConflictError) (*current, error) {
	if ce.Current == nil {
		return nil, nil
	}
	obj, err := r.decode(k, *ce.Current)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return &current{obj: obj, rev: ce.Current.ModRevision, data: ce.Current.Value, fresh: true}, nil
}

// wipeSystemFields clears what clients may not set on create
// (apiserver/pkg/registry/rest/meta.go WipeObjectMetaSystemFields).
func wipeSystemFields(obj resources.Object) {
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetUID("")
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetSelfLink("")
}

func (r *Registry) fillSystemFields(obj resources.Object) {
	// Stored times have second precision (metav1.Time's protobuf form);
	// truncating here makes the answer equal to what is stored.
	obj.SetCreationTimestamp(metav1.NewTime(r.now().Truncate(time.Second)))
	obj.SetUID(types.UID(uuid.NewString()))
}

// ensureNamespace reconciles the body's namespace with the request's, as
// kube-apiserver's EnsureObjectNamespaceMatchesRequestNamespace does.
func ensureNamespace(res resources.Resource, requestNamespace string, obj resources.Object) error {
	if !res.Kind.Namespaced {
		requestNamespace = ""
	}
	switch ns := obj.GetNamespace(); {
	case ns == requestNamespace:
	case ns == "":
		obj.SetNamespace(requestNamespace)
	case requestNamespace == "":
		obj.SetNamespace("")
	default:
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

// generateName appends five random characters to a generateName prefix,
// truncated so the result fits a DNS label (kube-apiserver's
// names.SimpleNameGenerator).
func generateName(base string) string {
	const maxGeneratedNameLength = 63 - 5
	if len(base) > maxGeneratedNameLength {
		base = base[:maxGeneratedNameLength]
	}
	return base + utilrand.String(5)
}

// kube-apiserver's warnings for duplicate ownerReferences: creates and
// updates are checked as sent, patches only once applied, which it words
// as after mutating admission.
const (
	duplicateOwnersWarning        = ".metadata.ownerReferences contains duplicate entries; API server dedups owner references in 1.20+, and may reject such requests as early as 1.24; please fix your requests; duplicate UID(s) observed: %s"
	duplicateOwnersPatchedWarning = ".metadata.ownerReferences contains duplicate entries after mutating admission happens; API server dedups owner references in 1.20+, and may reject such requests as early as 1.24; please fix your requests; duplicate UID(s) observed: %s"
)

// dedupOwnerReferences drops ownerReferences with a repeated UID and
// returns the warning format with the duplicates when it did.
func dedupOwnerReferences(obj resources.Object, warning string) []string {
	refs := obj.GetOwnerReferences()
	if len(refs) < 2 {
		return nil
	}
	seen := make(map[types.UID]bool, len(refs))
	var dups []string
	out := refs[:0:0]
	for _, ref := range refs {
		// Only a reference equal to a kept one is a duplicate; same UID
		// with other fields is kept, as kube-apiserver does.
		if seen[ref.UID] && slices.ContainsFunc(out, func(o metav1.OwnerReference) bool { return equality.Semantic.DeepEqual(o, ref) }) {
			dups = append(dups, string(ref.UID))
			continue
		}
		seen[ref.UID] = true
		out = append(out, ref)
	}
	if len(dups) == 0 {
		return nil
	}
	obj.SetOwnerReferences(out)
	return []string{fmt.Sprintf(warning, strings.Join(dups, ", "))}
}

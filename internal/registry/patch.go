package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources"
)

// PatchOptions are the options of a patch.
type PatchOptions struct {
	WriteOptions
	// Force takes ownership of conflicting fields (apply only).
	Force bool
	// FieldValidation is Strict, Warn (the default) or Ignore.
	FieldValidation string
}

// maxJSONPatchOperations is kube-apiserver's limit on JSON patch length.
const maxJSONPatchOperations = 10000

// Patch changes an object with a JSON patch, a JSON merge patch, a
// strategic merge patch or a server-side apply, as kube-apiserver's patch
// handler does (apiserver/pkg/endpoints/handlers/patch.go): the patch is
// applied to the current object, and applied again to the new current
// object if a concurrent write intervenes. Only apply creates a missing
// object.
func (r *Registry) Patch(ctx context.Context, res resources.Resource, namespace, name, subresource string, patchType types.PatchType, patch []byte, opts PatchOptions) (WriteResult, error) {
	sub, err := subresourceOf(res, name, subresource)
	if err != nil {
		return WriteResult{}, err
	}
	if err := checkPatchSyntax(patchType, patch); err != nil {
		return WriteResult{}, err
	}
	key := r.key(res.Kind, namespace, name)
	w := write{res: res, sub: sub, name: name, allowCreate: patchType == types.ApplyYAMLPatchType && sub == nil}
	out, err := r.guaranteedUpdate(ctx, res, key, name, 0, opts.DryRun, func(existing *current) (*attempt, error) {
		if existing == nil && patchType != types.ApplyYAMLPatchType {
			return nil, apierrors.NewNotFound(res.GroupResource(), name)
		}
		// The patch applies to the object at the request's version.
		live, err := r.live(res, existing)
		if err != nil {
			return nil, err
		}
		var (
			patched  resources.Object
			warnings []string
		)
		switch patchType {
		case types.JSONPatchType, types.MergePatchType:
			patched, warnings, err = r.jsonPatch(res, live, patchType, patch, opts.FieldValidation)
		case types.StrategicMergePatchType:
			patched, warnings, err = r.strategicPatch(res, live, patch, opts.FieldValidation)
		case types.ApplyYAMLPatchType:
			patched, warnings, err = r.apply(res, subresource, live, patch, opts)
		default:
			err = fmt.Errorf("%v: unimplemented patch type", patchType)
		}
		if err != nil {
			return nil, patchApplicationError(patchType, err)
		}
		sole := false
		if patchType != types.ApplyYAMLPatchType {
			patched, sole = r.trackUpdate(res, subresource, key, existing, live, patched, opts.Manager)
		}
		if existing == nil && patched.GetUID() != "" {
			return nil, apierrors.NewConflict(res.GroupResource(), name, fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", patched.GetUID()))
		}
		if err := ensureNamespace(res, namespace, patched); err != nil {
			return nil, err
		}
		if err := checkName(patched, name); err != nil {
			return nil, err
		}
		warnings = append(warnings, dedupOwnerReferences(patched, duplicateOwnersPatchedWarning)...)
		a, err := r.updateObject(ctx, w, existing, patched)
		if err != nil {
			return nil, err
		}
		a.sole = sole
		a.warnings = append(warnings, a.warnings...)
		return a, nil
	})
	if err != nil {
		return WriteResult{}, err
	}
	return WriteResult{Object: out.obj, Created: out.created, Warnings: out.warnings}, nil
}

// patchApplicationError answers an error of the patch libraries that is
// not already a Status. Their errors come from the patch and the object
// alone, so they are the client's: an apply is answered 400, as
// kube-apiserver intends to (kubernetes/kubernetes#139255), and the other
// patch types 422, as a JSON patch that cannot apply. kube-apiserver
// passes some of them on as 500s: a strategic merge directive of the
// wrong type or naming a missing field, an apply naming a field the
// schema lacks or giving one a value of the wrong type.
func patchApplicationError(patchType types.PatchType, err error) error {
	if _, ok := err.(apierrors.APIStatus); ok || errors.As(err, new(apierrors.APIStatus)) {
		return err
	}
	if patchType == types.ApplyYAMLPatchType {
		return apierrors.NewBadRequest(err.Error())
	}
	return apierrors.NewGenericServerResponse(codeUnprocessable, "", schema.GroupResource{}, "", err.Error(), 0, false)
}

// checkPatchSyntax rejects a body that is not JSON (or, for apply, YAML)
// before anything else, with kube-apiserver's answers.
func checkPatchSyntax(patchType types.PatchType, patch []byte) error {
	if patchType == types.ApplyYAMLPatchType {
		// util/yaml.ToJSON passes a body that looks like JSON through
		// unchecked, as kube-apiserver's validateAndTranscodePatch relies on.
		if _, err := utilyaml.ToJSON(patch); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("error encoding patch: %v", err))
		}
		return nil
	}
	if !json.Valid(patch) {
		return apierrors.NewBadRequest("invalid JSON patch")
	}
	return nil
}

// checkName checks the name of an updated or patched object against the
// URL's, with kube-apiserver's answers.
func checkName(obj resources.Object, name string) error {
	switch got := obj.GetName(); {
	case got == "":
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s based on URL) was undeterminable: name must be provided", name))
	case got != name:
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", got, name))
	}
	return nil
}

// jsonPatch applies a JSON patch or merge patch to the JSON of current.
// current and the result are of res's version.
func (r *Registry) jsonPatch(res resources.Resource, current resources.Object, patchType types.PatchType, patch []byte, validation string) (resources.Object, []string, error) {
	strict := validation != metav1.FieldValidationIgnore
	currentJSON, err := r.objectJSON(current)
	if err != nil {
		return nil, nil, err
	}
	var strictErrs []error
	var patchedJSON []byte
	switch patchType {
	case types.JSONPatchType:
		if strict {
			var ops []struct {
				Op    string `json:"op"`
				Path  string `json:"path"`
				From  string `json:"from"`
				Value any    `json:"value"`
			}
			if strictErrs, err = kjson.UnmarshalStrict(patch, &ops); err != nil {
				return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
			for i, e := range strictErrs {
				strictErrs[i] = fmt.Errorf("json patch %v", e)
			}
		}
		ops, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, nil, apierrors.NewBadRequest(err.Error())
		}
		if len(ops) > maxJSONPatchOperations {
			return nil, nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(ops)))
		}
		if patchedJSON, err = applyJSONPatch(ops, currentJSON); err != nil {
			return nil, nil, apierrors.NewGenericServerResponse(codeUnprocessable, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	case types.MergePatchType:
		if strict {
			v := map[string]any{}
			if strictErrs, err = kjson.UnmarshalStrict(patch, &v); err != nil {
				return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
		}
		if patchedJSON, err = jsonpatch.MergePatch(currentJSON, patch); err != nil {
			if errors.Is(err, jsonpatch.ErrBadJSONPatch) {
				return nil, nil, apierrors.NewBadRequest(err.Error())
			}
			return nil, nil, err
		}
	}
	obj, d, err := r.codecs.DecodeObject(r.jsonInfo(), strict, patchedJSON, res)
	var wrong *codec.WrongKindError
	switch {
	case errors.As(err, &wrong):
		// runtime.DecodeInto's refusal, reported on the patch as
		// kube-apiserver does.
		err := fmt.Errorf("unable to decode %v into %T", wrong.Got, res.New())
		return nil, nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), string(patchedJSON), err.Error())})
	case err != nil:
		return nil, nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), string(patchedJSON), err.Error())})
	}
	warnings, err := strictOutcome(validation, append(strictErrs, d.Strict...), string(patchedJSON))
	if err != nil {
		return nil, nil, err
	}
	return obj, warnings, nil
}

// strictOutcome turns unknown or duplicate fields into warnings (Warn) or
// a 422 on the patch (Strict), as kube-apiserver does for patches.
func strictOutcome(validation string, strictErrs []error, patched string) ([]string, error) {
	if len(strictErrs) == 0 || validation == metav1.FieldValidationIgnore {
		return nil, nil
	}
	if validation == metav1.FieldValidationStrict {
		return nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
			field.Invalid(field.NewPath("patch"), patched, runtime.NewStrictDecodingError(strictErrs).Error()),
		})
	}
	warnings := make([]string, len(strictErrs))
	for i, e := range strictErrs {
		warnings[i] = e.Error()
	}
	return warnings, nil
}

// strategicPatch applies a strategic merge patch, using the Go type's
// patch strategies (none for Lease and Endpoints: lists are replaced).
func (r *Registry) strategicPatch(res resources.Resource, current resources.Object, patch []byte, validation string) (resources.Object, []string, error) {
	strict := validation != metav1.FieldValidationIgnore
	original, err := runtime.DefaultUnstructuredConverter.ToUnstructured(current)
	if err != nil {
		return nil, nil, err
	}
	patchMap := map[string]any{}
	var strictErrs []error
	if strict {
		if strictErrs, err = kjson.UnmarshalStrict(patch, &patchMap); err != nil {
			return nil, nil, apierrors.NewBadRequest(err.Error())
		}
	} else if err := kjson.UnmarshalCaseSensitivePreserveInts(patch, &patchMap); err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	patched, err := strategicpatch.StrategicMergeMapPatch(original, patchMap, res.New())
	if err != nil {
		return nil, nil, strategicPatchError(err)
	}
	obj, objStrictErrs, err := r.codecs.ObjectFromMap(patched, strict, res)
	if err != nil {
		return nil, nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), fmt.Sprintf("%+v", patchMap), err.Error())})
	}
	warnings, err := strictOutcome(validation, append(strictErrs, objStrictErrs...), fmt.Sprintf("%+v", patchMap))
	if err != nil {
		return nil, nil, err
	}
	return obj, warnings, nil
}

// strategicPatchError maps strategic merge errors as kube-apiserver does.
func strategicPatchError(err error) error {
	switch {
	case errors.Is(err, mergepatch.ErrBadJSONDoc), errors.Is(err, mergepatch.ErrBadPatchFormatForPrimitiveList),
		errors.Is(err, mergepatch.ErrBadPatchFormatForRetainKeys), errors.Is(err, mergepatch.ErrBadPatchFormatForSetElementOrderList),
		errors.Is(err, mergepatch.ErrUnsupportedStrategicMergePatchFormat):
		return apierrors.NewBadRequest(err.Error())
	case errors.Is(err, mergepatch.ErrNoListOfLists), errors.Is(err, mergepatch.ErrPatchContentNotMatchRetainKeys):
		return apierrors.NewGenericServerResponse(codeUnprocessable, "", schema.GroupResource{}, "", err.Error(), 0, false)
	}
	return err
}

// apply runs server-side apply of a YAML (or JSON) configuration.
func (r *Registry) apply(res resources.Resource, subresource string, live resources.Object, patch []byte, opts PatchOptions) (resources.Object, []string, error) {
	applied := &unstructured.Unstructured{Object: map[string]any{}}
	if err := yaml.Unmarshal(patch, &applied.Object); err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	out, err := r.fieldManager(res, subresource).Apply(live, applied, opts.Manager, opts.Force)
	if err != nil {
		return nil, nil, err
	}
	obj, ok := out.(resources.Object)
	if !ok {
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("apply returned %T", out))
	}
	var warnings []string
	if opts.FieldValidation != metav1.FieldValidationIgnore {
		if err := yaml.UnmarshalStrict(patch, &map[string]any{}); err != nil {
			if opts.FieldValidation == metav1.FieldValidationStrict {
				return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding patch: %v", err))
			}
			warnings = append(warnings, err.Error())
		}
	}
	return obj, warnings, nil
}

// objectJSON is the JSON a patch applies to: the object with apiVersion
// and kind.
func (r *Registry) objectJSON(obj resources.Object) ([]byte, error) {
	typed, err := r.codecs.WithTypeMeta(obj)
	if err != nil {
		return nil, err
	}
	return json.Marshal(typed)
}

// applyJSONPatch applies ops to doc. The library panics on some malformed
// operations (a "test" of the root path without a value dereferences
// nil); kube-apiserver answers those 500, leasehold 422 like any other
// patch that cannot apply.
func applyJSONPatch(ops jsonpatch.Patch, doc []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("json patch cannot be applied: %v", r)
		}
	}()
	return ops.Apply(doc)
}

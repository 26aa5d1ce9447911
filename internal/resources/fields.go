package resources

import (
	"fmt"
	"maps"
	"slices"
)

// MetadataFields are the field selector labels every kind supports.
var MetadataFields = []string{"metadata.name", "metadata.namespace"}

// MetadataField returns metadata.name or metadata.namespace of obj, the
// field labels every kind supports.
func MetadataField(obj Object, label string) string {
	switch label {
	case "metadata.name":
		return obj.GetName()
	case "metadata.namespace":
		return obj.GetNamespace()
	}
	return ""
}

// FieldLabel translates a field selector label of the resource's version
// into the storage version's. ok is false for an unsupported label, and
// err then words the refusal as kube-apiserver's conversion functions do:
// the generic message for kinds that support only metadata.name and
// metadata.namespace, a kind-specific one otherwise
// (k8s.io/apimachinery/pkg/runtime/conversion.go,
// kubernetes/pkg/apis/core/v1/conversion.go).
func (r Resource) FieldLabel(label string) (string, error) {
	labels := r.Kind.Fields.Labels
	if c := r.Version.Conversion; c != nil && c.FieldLabels != nil {
		if stored, ok := c.FieldLabels[label]; ok {
			return stored, nil
		}
		labels = slices.Sorted(maps.Keys(c.FieldLabels))
	} else if slices.Contains(labels, label) {
		return label, nil
	}
	if slices.Equal(labels, MetadataFields) {
		return "", fmt.Errorf("%q is not a known field selector: only %q, %q", label, "metadata.name", "metadata.namespace")
	}
	return "", fmt.Errorf("field label not supported: %s", label)
}

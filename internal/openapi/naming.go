package openapi

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// operationVerbs are the verbs kube-apiserver recognises at the start of an
// operation name, shortest first: the shortest match wins, so
// "deletecollectionNamespacedLease" becomes "delete" + "CollectionNamespacedLease".
var operationVerbs = []string{"log", "get", "read", "list", "watch", "patch", "proxy", "create", "delete", "replace", "connect", "deletecollection"}

// operationIDAndTags names an operation after its verb, API group and
// version, as apiserver's openapi.GetOperationIDAndTags does: the route
// "readNamespacedLease" under /apis/coordination.k8s.io/v1 becomes
// "readCoordinationV1NamespacedLease" tagged "coordination_v1"; /api is
// treated as /apis/core.
// https://github.com/kubernetes/apiserver/blob/v0.37.2/pkg/endpoints/openapi/openapi.go
func operationIDAndTags(r common.Route) (string, []string, error) {
	op := r.OperationName()
	i := slices.IndexFunc(operationVerbs, func(v string) bool { return strings.HasPrefix(op, v) })
	if i < 0 {
		return op, nil, fmt.Errorf("operation name %q does not start with a verb", op)
	}
	verb, rest := operationVerbs[i], op[len(operationVerbs[i]):]
	parts := strings.Split(strings.Trim(r.Path(), "/"), "/")
	if parts[0] == "api" {
		parts = append([]string{"apis", "core"}, parts[1:]...)
	}
	var tags []string
	prefix := verb
	switch {
	case len(parts) >= 2 && parts[0] == "apis":
		group := strings.TrimSuffix(parts[1], ".k8s.io")
		prefix += validOperationID(group, true)
		tag := validOperationID(group, false)
		if len(parts) > 2 {
			prefix += validOperationID(parts[2], true)
			tag += "_" + validOperationID(parts[2], false)
		}
		tags = append(tags, tag)
	default:
		tags = append(tags, validOperationID(parts[0], false))
	}
	return prefix + validOperationID(rest, true), tags, nil
}

// validOperationID drops what is not a letter, '_' or a non-leading digit
// from s and capitalises the letter after each dropped run (and the first
// one if capitalizeFirst): "coordination" -> "Coordination",
// "flowcontrol.apiserver" -> "FlowcontrolApiserver".
func validOperationID(s string, capitalizeFirst bool) string {
	var b strings.Builder
	capitalize := capitalizeFirst
	for i, r := range s {
		if unicode.IsLetter(r) || r == '_' || (i != 0 && unicode.IsDigit(r)) {
			if capitalize {
				r = unicode.ToUpper(r)
				capitalize = false
			}
			b.WriteRune(r)
		} else {
			capitalize = true
		}
	}
	return b.String()
}

// definitionNamer names definitions by their model name and lists, in the
// x-kubernetes-group-version-kind extension, every kind the scheme
// registers for the type, as apiserver's openapi.DefinitionNamer does for
// kube-apiserver's scheme.
// https://github.com/kubernetes/apiserver/blob/v0.37.2/pkg/endpoints/openapi/openapi.go
type definitionNamer struct {
	gvks map[string][]schema.GroupVersionKind
}

func newDefinitionNamer(scheme *runtime.Scheme) (*definitionNamer, error) {
	n := &definitionNamer{gvks: map[string][]schema.GroupVersionKind{}}
	for gvk, typ := range scheme.AllKnownTypes() {
		name, err := scheme.ToOpenAPIDefinitionName(gvk)
		if err != nil {
			return nil, fmt.Errorf("naming %v: %w", gvk, err)
		}
		n.gvks[name] = append(n.gvks[name], gvk)
		// A type without an OpenAPI model name (a kind defined outside
		// k8s.io/api) is named by its Go path in the definitions.
		if goName := util.GetCanonicalTypeName(reflect.New(typ).Interface()); goName != name {
			n.gvks[goName] = append(n.gvks[goName], gvk)
		}
	}
	for _, gvks := range n.gvks {
		slices.SortFunc(gvks, func(a, b schema.GroupVersionKind) int {
			return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Version, b.Version), cmp.Compare(a.Kind, b.Kind))
		})
	}
	return n, nil
}

// definitionName implements common.Config.GetDefinitionName. The extension
// value is built afresh on each call: the builders store it in schemas
// that are later filtered per document.
func (n *definitionNamer) definitionName(name string) (string, spec.Extensions) {
	friendly := name
	if strings.Contains(name, "/") {
		// A Go path, as kube-apiserver names such definitions:
		// "example.com/pkg.Type" -> "com.example.pkg.Type".
		friendly = util.ToRESTFriendlyName(name)
	}
	gvks, ok := n.gvks[name]
	if !ok {
		return friendly, nil
	}
	list := make([]any, 0, len(gvks))
	for _, gvk := range gvks {
		list = append(list, map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind})
	}
	return friendly, spec.Extensions{gvkExtension: list}
}

const gvkExtension = "x-kubernetes-group-version-kind"

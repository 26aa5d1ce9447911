package openapi

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/kube-openapi/pkg/common"
)

const prettyDoc = "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget)."

func prettyParam() common.Parameter {
	return &param{name: "pretty", desc: prettyDoc, kind: common.QueryParameterKind, dataType: "string"}
}

func namespaceParam() common.Parameter {
	return &param{name: "namespace", desc: "object name and auth scope, such as for teams and projects",
		kind: common.PathParameterKind, dataType: "string", required: true}
}

func nameParam(kind string) common.Parameter {
	return &param{name: "name", desc: "name of the " + kind, kind: common.PathParameterKind, dataType: "string", required: true}
}

func bodyParam(required bool) common.Parameter {
	return &param{name: "body", kind: common.BodyParameterKind, required: required}
}

// documented is an options type with field descriptions (metav1.ListOptions
// and the like).
type documented interface {
	SwaggerDoc() map[string]string
}

// queryParams turns an options struct into query parameters the way
// kube-apiserver's AddObjectParams does: one per top-level field with a JSON
// name whose type is not a struct or interface (nor a pointer to one),
// described by the type's SwaggerDoc, minus the excluded names.
// https://github.com/kubernetes/apiserver/blob/v0.37.2/pkg/endpoints/installer.go
func queryParams(opts documented, exclude ...string) ([]common.Parameter, error) {
	t := reflect.TypeOf(opts)
	docs := opts.SwaggerDoc()
	var out []common.Parameter
	for f := range t.Fields() {
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct || ft.Kind() == reflect.Interface {
			continue // TypeMeta, Preconditions
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || slices.Contains(exclude, name) {
			continue
		}
		dataType, err := jsonType(ft)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		out = append(out, &param{name: name, desc: docs[name], kind: common.QueryParameterKind, dataType: dataType})
	}
	return out, nil
}

// jsonType is the OpenAPI type of a query parameter of Go type t. Slices
// are declared by their element type, as kube-apiserver does: go-restful
// cannot express array query parameters.
func jsonType(t reflect.Type) (string, error) {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean", nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer", nil
	case reflect.Float32, reflect.Float64:
		return "number", nil
	case reflect.String:
		return "string", nil
	case reflect.Slice:
		return jsonType(t.Elem())
	}
	return "", fmt.Errorf("no OpenAPI type for query parameter of type %s", t)
}

package integration

import (
	"fmt"
	"strconv"
	"time"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/leasehold/leasehold/internal/resources"
)

// Widget is a kind that exists only in this test: everything the server
// knows of it is its description, widgetKind, added to the list of
// kinds. It has no protobuf encoding, so it is served and stored as JSON,
// as kube-apiserver serves custom resources.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec,omitempty"`
}

// WidgetSpec is a Widget's spec.
type WidgetSpec struct {
	Size  int32  `json:"size,omitempty"`
	Color string `json:"color,omitempty"`
}

// WidgetList is a list of Widgets.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

func (w *Widget) DeepCopyObject() runtime.Object {
	c := &Widget{TypeMeta: w.TypeMeta, Spec: w.Spec}
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return c
}

func (l *WidgetList) DeepCopyObject() runtime.Object {
	c := &WidgetList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	for i := range l.Items {
		c.Items = append(c.Items, *l.Items[i].DeepCopyObject().(*Widget))
	}
	return c
}

// WidgetV2 is a Widget at version v2, which names its fields otherwise:
// spec.diameter is v1's spec.size, spec.shade its spec.color. Widgets are
// stored at v1 and converted at the edges.
type WidgetV2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetV2Spec `json:"spec,omitempty"`
}

// WidgetV2Spec is a v2 Widget's spec.
type WidgetV2Spec struct {
	Diameter int32  `json:"diameter,omitempty"`
	Shade    string `json:"shade,omitempty"`
}

// WidgetV2List is a list of v2 Widgets.
type WidgetV2List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WidgetV2 `json:"items"`
}

func (w *WidgetV2) DeepCopyObject() runtime.Object {
	c := &WidgetV2{TypeMeta: w.TypeMeta, Spec: w.Spec}
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return c
}

func (l *WidgetV2List) DeepCopyObject() runtime.Object {
	c := &WidgetV2List{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	for i := range l.Items {
		c.Items = append(c.Items, *l.Items[i].DeepCopyObject().(*WidgetV2))
	}
	return c
}

var (
	widgetVersion   = schema.GroupVersion{Group: "test.leasehold.dev", Version: "v1"}
	widgetVersionV2 = schema.GroupVersion{Group: "test.leasehold.dev", Version: "v2"}
)

// widgetConversion converts between v2 and the storage version, v1.
var widgetConversion = &resources.Conversion{
	ToStorage: func(in resources.Object) (resources.Object, error) {
		w := in.(*WidgetV2)
		out := &Widget{Spec: WidgetSpec{Size: w.Spec.Diameter, Color: w.Spec.Shade}}
		w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
		return out, nil
	},
	FromStorage: func(in resources.Object) (resources.Object, error) {
		w := in.(*Widget)
		out := &WidgetV2{Spec: WidgetV2Spec{Diameter: w.Spec.Size, Shade: w.Spec.Color}}
		w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
		return out, nil
	},
	FieldLabels: map[string]string{"metadata.name": "metadata.name", "metadata.namespace": "metadata.namespace", "spec.shade": "spec.color"},
}

// widgetKind describes Widgets: namespaced, spec.size at least 0, a Color
// column and a spec.color field selector.
func widgetKind() *resources.Kind {
	return &resources.Kind{
		Names:      resources.Names{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget", ShortNames: []string{"wd"}},
		Namespaced: true,
		KeyPath:    "widgets",
		Versions: []resources.Version{{
			GroupVersion: widgetVersion,
			New:          func() resources.Object { return &Widget{} },
			NewList:      func() runtime.Object { return &WidgetList{} },
			Default: func(obj resources.Object) {
				if w := obj.(*Widget); w.Spec.Color == "" {
					w.Spec.Color = "grey"
				}
			},
			OpenAPI: widgetOpenAPI,
		}, {
			GroupVersion: widgetVersionV2,
			New:          func() resources.Object { return &WidgetV2{} },
			NewList:      func() runtime.Object { return &WidgetV2List{} },
			Default: func(obj resources.Object) {
				if w := obj.(*WidgetV2); w.Spec.Shade == "" {
					w.Spec.Shade = "grey"
				}
			},
			Conversion: widgetConversion,
			OpenAPI:    widgetOpenAPI,
		}},
		Strategy: widgetStrategy{},
		Updates:  resources.UpdatePolicy{AllowCreateOnUpdate: true},
		Table: resources.Table{
			Columns: []metav1.TableColumnDefinition{
				resources.NameColumn(),
				{Name: "Size", Type: "integer"},
				{Name: "Color", Type: "string"},
				resources.AgeColumn(),
			},
			Row: func(obj resources.Object, now time.Time) []any {
				w := obj.(*Widget)
				return []any{w.Name, int64(w.Spec.Size), w.Spec.Color, resources.Age(w.CreationTimestamp, now)}
			},
		},
		Fields: resources.Fields{
			Labels: []string{"metadata.name", "metadata.namespace", "spec.color"},
			Value: func(obj resources.Object, label string) string {
				if label == "spec.color" {
					return obj.(*Widget).Spec.Color
				}
				return resources.MetadataField(obj, label)
			},
		},
	}
}

type widgetStrategy struct {
	resources.Unprepared
	resources.NoWarnings
}

func (widgetStrategy) Validate(obj resources.Object, _ schema.GroupVersion) field.ErrorList {
	w := obj.(*Widget)
	errs := apivalidation.ValidateObjectMetaAccessor(w, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, validateWidgetSpec(&w.Spec)...)
	return resources.ValidateCreate(w, true, errs)
}

func (widgetStrategy) ValidateUpdate(obj, old resources.Object, _ schema.GroupVersion) field.ErrorList {
	w, o := obj.(*Widget), old.(*Widget)
	meta := resources.CheckMetaUpdate(w, o)
	errs := append(meta.Errors(), validateWidgetSpec(&w.Spec)...)
	return resources.ValidateUpdate(w, true, meta, errs)
}

func validateWidgetSpec(s *WidgetSpec) field.ErrorList {
	if s.Size < 0 {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "size"), s.Size, "must be greater than or equal to 0")}
	}
	return nil
}

// widgetOpenAPI is what openapi-gen would generate for the Widget types.
func widgetOpenAPI(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	pkg := "github.com/leasehold/leasehold/test/integration."
	str := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}, Description: desc}}
	}
	refTo := func(name string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(name)}}
	}
	objectMeta, listMeta := metav1.ObjectMeta{}.OpenAPIModelName(), metav1.ListMeta{}.OpenAPIModelName()
	object := func(desc, specName string) common.OpenAPIDefinition {
		return common.OpenAPIDefinition{
			Schema: spec.Schema{SchemaProps: spec.SchemaProps{
				Description: desc,
				Type:        []string{"object"},
				Properties: map[string]spec.Schema{
					"apiVersion": str("APIVersion defines the versioned schema of this representation of an object."),
					"kind":       str("Kind is a string value representing the REST resource this object represents."),
					"metadata":   refTo(objectMeta),
					"spec":       refTo(pkg + specName),
				},
			}},
			Dependencies: []string{objectMeta, pkg + specName},
		}
	}
	list := func(desc, item string) common.OpenAPIDefinition {
		return common.OpenAPIDefinition{
			Schema: spec.Schema{SchemaProps: spec.SchemaProps{
				Description: desc,
				Type:        []string{"object"},
				Properties: map[string]spec.Schema{
					"apiVersion": str("APIVersion defines the versioned schema of this representation of an object."),
					"kind":       str("Kind is a string value representing the REST resource this object represents."),
					"metadata":   refTo(listMeta),
					"items": {SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: &spec.Schema{
						SchemaProps: spec.SchemaProps{Default: map[string]any{}, Ref: ref(pkg + item)}}}}},
				},
				Required: []string{"items"},
			}},
			Dependencies: []string{listMeta, pkg + item},
		}
	}
	fields := func(desc string, props map[string]spec.Schema) common.OpenAPIDefinition {
		return common.OpenAPIDefinition{Schema: spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"object"}, Properties: props}}}
	}
	int32Prop := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"integer"}, Format: "int32", Description: desc}}
	}
	return map[string]common.OpenAPIDefinition{
		pkg + "Widget":       object("Widget is a kind of this test only.", "WidgetSpec"),
		pkg + "WidgetSpec":   fields("WidgetSpec is a Widget's spec.", map[string]spec.Schema{"size": int32Prop("Size of the widget."), "color": str("Color of the widget.")}),
		pkg + "WidgetList":   list("WidgetList is a list of Widgets.", "Widget"),
		pkg + "WidgetV2":     object("WidgetV2 is a Widget at v2.", "WidgetV2Spec"),
		pkg + "WidgetV2Spec": fields("WidgetV2Spec is a v2 Widget's spec.", map[string]spec.Schema{"diameter": int32Prop("Diameter of the widget."), "shade": str("Shade of the widget.")}),
		pkg + "WidgetV2List": list("WidgetV2List is a list of v2 Widgets.", "WidgetV2"),
	}
}

// widgetSize reads spec.size of an unstructured Widget.
func widgetSize(obj map[string]any) int64 {
	spec, _ := obj["spec"].(map[string]any)
	switch n := spec["size"].(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case string:
		v, _ := strconv.ParseInt(n, 10, 64)
		return v
	}
	return 0
}

var _ = fmt.Sprint

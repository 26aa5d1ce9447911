package openapi

import (
	"k8s.io/kube-openapi/pkg/common"
)

// webService is a group of routes under one root path, like a go-restful
// WebService in kube-apiserver: one per group version, one per discovery
// endpoint. Each becomes one OpenAPI v3 document.
type webService struct {
	root   string
	routes []common.Route
}

var _ common.RouteContainer = (*webService)(nil)

func (ws *webService) RootPath() string                   { return ws.root }
func (ws *webService) PathParameters() []common.Parameter { return nil }
func (ws *webService) Routes() []common.Route             { return ws.routes }

// route is one operation. Models (reads, writes, response models) are Go
// values of the k8s.io/api types: the builders name them through their
// OpenAPIModelName methods.
type route struct {
	method string
	// path is the full path, root included.
	path string
	// operation is the go-restful operation name ("readNamespacedLease");
	// operationIDAndTags turns it into the OpenAPI operation ID.
	operation string
	doc       string
	params    []common.Parameter
	consumes  []string
	produces  []string
	meta      map[string]any
	reads     any
	writes    any
	responses []common.StatusCodeResponse
}

var _ common.Route = (*route)(nil)

func (r *route) Method() string                                   { return r.method }
func (r *route) Path() string                                     { return r.path }
func (r *route) OperationName() string                            { return r.operation }
func (r *route) Parameters() []common.Parameter                   { return r.params }
func (r *route) Description() string                              { return r.doc }
func (r *route) Consumes() []string                               { return r.consumes }
func (r *route) Produces() []string                               { return r.produces }
func (r *route) Metadata() map[string]any                         { return r.meta }
func (r *route) RequestPayloadSample() any                        { return r.reads }
func (r *route) ResponsePayloadSample() any                       { return r.writes }
func (r *route) StatusCodeResponses() []common.StatusCodeResponse { return r.responses }

// param is a route parameter. None allows multiple values: kube-apiserver
// declares repeatable query parameters (dryRun) as single strings too,
// which the builders render as uniqueItems.
type param struct {
	name     string
	desc     string
	kind     common.ParameterKind
	dataType string
	required bool
}

var _ common.Parameter = (*param)(nil)

func (p *param) Name() string               { return p.name }
func (p *param) Description() string        { return p.desc }
func (p *param) Required() bool             { return p.required }
func (p *param) Kind() common.ParameterKind { return p.kind }
func (p *param) DataType() string           { return p.dataType }
func (p *param) AllowMultiple() bool        { return false }

// response is a documented response of a route.
type response struct {
	code  int
	msg   string
	model any
}

var _ common.StatusCodeResponse = response{}

func (r response) Code() int       { return r.code }
func (r response) Message() string { return r.msg }
func (r response) Model() any      { return r.model }

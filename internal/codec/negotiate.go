package codec

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/munnerz/goautoneg"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Transform names an alternative representation a client asks for with the
// as=, g= and v= parameters of its Accept header.
type Transform struct {
	Kind    string // "Table", "PartialObjectMetadata", "PartialObjectMetadataList"
	Version string // "v1" or "v1beta1" of meta.k8s.io
	// Table holds the request's table options (TableOptions), for Kind
	// "Table"; the caller decodes them when it is ready to answer.
	Table metav1.TableOptions
}

// Output is the negotiated response format.
type Output struct {
	Info      runtime.SerializerInfo
	Pretty    bool
	Transform *Transform
}

// MediaType is the Content-Type of the response.
func (o Output) MediaType() string {
	if o.Transform != nil {
		return o.Info.MediaType + ";as=" + o.Transform.Kind + ";g=meta.k8s.io;v=" + o.Transform.Version
	}
	return o.Info.MediaType
}

func (o Output) serializer() runtime.Encoder {
	if o.Pretty && o.Info.PrettySerializer != nil {
		return o.Info.PrettySerializer
	}
	return o.Info.Serializer
}

// Target says what an endpoint can produce.
type Target struct {
	// List is true for collection reads, false for single objects.
	List bool
	// Transforms are allowed (resource reads); false for discovery,
	// Status-only and other fixed responses.
	Transforms bool
	// NoProtobuf: the objects have no protobuf encoding (a custom type),
	// so protobuf is not offered, as kube-apiserver serves custom
	// resources.
	NoProtobuf bool
}

// Negotiate picks the response format from the request's Accept header, as
// kube-apiserver does: the first acceptable clause wins; a missing header
// means JSON; nothing acceptable answers 406.
func (c *Codecs) Negotiate(req *http.Request, target Target) (Output, error) {
	accept := req.Header.Get("Accept")
	out, ok := c.negotiate(accept, target)
	if !ok {
		return Output{}, statusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			"only the following media types are accepted: "+join(c.MediaTypes()))
	}
	// Pretty only means something to a format that can be pretty
	// (JSON): a protobuf list asked for by curl is served from the
	// cached items like any other.
	out.Pretty = (out.Pretty || prettyRequested(req)) && out.Info.PrettySerializer != nil
	return out, nil
}

// NegotiateStream picks the format of a watch stream.
func (c *Codecs) NegotiateStream(req *http.Request, target Target) (Output, error) {
	out, ok := c.negotiate(req.Header.Get("Accept"), target)
	if !ok || out.Info.StreamSerializer == nil {
		return Output{}, statusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			"only the following media types are accepted: "+join(c.StreamMediaTypes()))
	}
	return out, nil
}

// negotiation is a key of Codecs.negotiated.
type negotiation struct {
	accept string
	target Target
}

// negotiatedMax bounds Codecs.negotiated, and negotiatedLen the Accept
// headers it keeps: a hostile client sending new ones at every request
// costs parsing, not memory.
const (
	negotiatedMax = 256
	negotiatedLen = 512
)

func (c *Codecs) negotiate(accept string, target Target) (Output, bool) {
	if accept == "" {
		return Output{Info: c.infos[0]}, true
	}
	key := negotiation{accept, target}
	if out, ok := c.negotiated.Load(key); ok {
		return out.(Output), true
	}
	out, ok := c.parseAccept(accept, target)
	// A Transform is the caller's to fill in: not shared.
	if ok && out.Transform == nil && len(accept) <= negotiatedLen && c.negotiatedSize.Load() < negotiatedMax {
		if _, loaded := c.negotiated.LoadOrStore(key, out); !loaded {
			c.negotiatedSize.Add(1)
		}
	}
	return out, ok
}

// parseAccept is negotiate without the memory.
func (c *Codecs) parseAccept(accept string, target Target) (Output, bool) {
	for _, clause := range goautoneg.ParseAccept(accept) {
		for _, info := range c.infos {
			if target.NoProtobuf && info.MediaType == Protobuf {
				continue
			}
			if !(clause.Type == "*" && clause.SubType == "*" ||
				clause.Type == info.MediaTypeType && (clause.SubType == "*" || clause.SubType == info.MediaTypeSubType)) {
				continue
			}
			if out, ok := acceptParams(clause.Params, info, target); ok {
				return out, true
			}
		}
	}
	return Output{}, false
}

// acceptParams applies the parameters of one Accept clause; false means the
// clause cannot be served and the next one is tried.
func acceptParams(params map[string]string, info runtime.SerializerInfo, target Target) (Output, bool) {
	out := Output{Info: info}
	var gvk *schema.GroupVersionKind
	for k, v := range params {
		switch k {
		case "as", "g", "v":
			if gvk == nil {
				gvk = &schema.GroupVersionKind{}
			}
			switch k {
			case "as":
				gvk.Kind = v
			case "g":
				gvk.Group = v
			case "v":
				gvk.Version = v
			}
		case "stream":
			if v != "" && (info.StreamSerializer == nil || v != "watch") {
				return Output{}, false
			}
		case "sv":
			if v != "" {
				return Output{}, false
			}
		case "pretty":
			out.Pretty = v == "1"
		}
	}
	if gvk == nil {
		return out, true
	}
	if !target.Transforms || gvk.Group != metav1.GroupName || (gvk.Version != "v1" && gvk.Version != "v1beta1") {
		return Output{}, false
	}
	switch gvk.Kind {
	case "Table":
		// Tables are served as JSON and YAML only, as in kube-apiserver.
		if info.MediaType == Protobuf {
			return Output{}, false
		}
	case "PartialObjectMetadata":
		if target.List {
			return Output{}, false
		}
	case "PartialObjectMetadataList":
		if !target.List {
			return Output{}, false
		}
	default:
		return Output{}, false
	}
	out.Transform = &Transform{Kind: gvk.Kind, Version: gvk.Version}
	return out, true
}

// prettyRequested reports the deprecated pretty=true query parameter, or a
// User-Agent of a human's tool, as kube-apiserver does.
func prettyRequested(req *http.Request) bool {
	if strings.Contains(req.URL.RawQuery, "pretty") {
		if v := req.URL.Query().Get("pretty"); v != "" {
			b, _ := strconv.ParseBool(v)
			return b
		}
	}
	ua := req.UserAgent()
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}

// InputSerializer returns the serializer for a request body's
// Content-Type; an empty Content-Type means JSON. Unknown types answer 415.
func (c *Codecs) InputSerializer(contentType string) (runtime.SerializerInfo, error) {
	if contentType == "" {
		return c.infos[0], nil
	}
	// Clients send one of ours exactly, without parameters: what parsing
	// would find, without its allocations.
	for _, info := range c.infos {
		if info.MediaType == contentType {
			return info, nil
		}
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err == nil {
		for _, info := range c.infos {
			if info.MediaType == mediaType {
				return info, nil
			}
		}
	}
	return runtime.SerializerInfo{}, UnsupportedMediaType(c.MediaTypes())
}

// AsJSON returns out answering in compact JSON, its transform kept: what
// the audit log records of a response, whatever the client asked for.
func (c *Codecs) AsJSON(out Output) Output {
	return Output{Info: c.infos[0], Transform: out.Transform}
}

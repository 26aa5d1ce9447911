package httpserver

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// servePprof serves the runtime profiles under /debug/pprof/.
func servePprof(w http.ResponseWriter, req *http.Request) {
	switch name := strings.TrimPrefix(req.URL.Path, "/debug/pprof/"); name {
	case "cmdline":
		pprof.Cmdline(w, req)
	case "profile":
		pprof.Profile(w, req)
	case "symbol":
		pprof.Symbol(w, req)
	case "trace":
		pprof.Trace(w, req)
	default:
		pprof.Index(w, req)
	}
}

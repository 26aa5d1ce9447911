package webui

import (
	"embed"
	"io/fs"
	"net/http"
	"strconv"
	"time"
)

// TimeHeader carries the server's clock, Unix milliseconds, on every
// answer under /ui/.
const TimeHeader = "X-Leasehold-Time"

//go:embed static
var files embed.FS

// contentSecurityPolicy lets the page load only its own files and talk
// only to its own server.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the page's files under /ui/ (and redirects /ui there).
func Handler() http.Handler {
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	fileServer := http.StripPrefix("/ui", http.FileServerFS(static))
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if req.URL.Path == "/ui" {
			http.Redirect(w, req, "/ui/", http.StatusMovedPermanently)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		// The server's clock in milliseconds, read as late as can be: the
		// page estimates its offset from the browser's to well under a
		// second (the Date header has whole seconds).
		h.Set(TimeHeader, strconv.FormatInt(time.Now().UnixMilli(), 10))
		fileServer.ServeHTTP(w, req)
	})
}

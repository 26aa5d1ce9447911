package h2server

import (
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2/hpack"
)

// newRequest builds st's request from its HEADERS, checking what RFC
// 9113 (8.2 and 8.3) requires of a request's fields; an error makes the
// request malformed (a stream error, PROTOCOL_ERROR).
func (c *conn) newRequest(st *stream, fields []hpack.HeaderField) (*http.Request, error) {
	var method, path, scheme, authority string
	n := 0 // pseudo-header fields come first (checked as they were read)
	for ; n < len(fields) && fields[n].IsPseudo(); n++ {
		switch hf := fields[n]; hf.Name {
		case ":method":
			method = hf.Value
		case ":path":
			path = hf.Value
		case ":scheme":
			scheme = hf.Value
		case ":authority":
			authority = hf.Value
		default:
			// :protocol: extended CONNECT is not offered (the header
			// block's checks let no other pseudo-header through).
			return nil, errors.New("unexpected pseudo-header " + hf.Name)
		}
	}
	regular := fields[n:]
	connect := method == http.MethodConnect
	switch {
	case connect && (path != "" || scheme != "" || authority == ""):
		return nil, errors.New("malformed CONNECT request")
	case !connect && (method == "" || path == "" || scheme == ""):
		return nil, errors.New("missing :method, :path or :scheme")
	}
	header := make(http.Header, len(regular))
	// The values of fields seen once (most) share one backing array.
	values := make([]string, len(regular))
	for i, hf := range regular {
		switch hf.Name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			return nil, errors.New("connection-specific header field " + hf.Name)
		case "te":
			if hf.Value != "trailers" {
				return nil, errors.New(`"te" header field other than "trailers"`)
			}
		}
		k := c.canonical(hf.Name)
		if vv, ok := header[k]; ok {
			header[k] = append(vv, hf.Value)
			continue
		}
		values[i] = hf.Value
		header[k] = values[i : i+1 : i+1]
	}
	if cookies := header["Cookie"]; len(cookies) > 1 {
		header["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	if authority == "" {
		authority = header.Get("Host")
	}

	var body io.ReadCloser = http.NoBody
	var contentLength int64
	if !st.remoteDone {
		contentLength = -1
		switch cl := header["Content-Length"]; len(cl) {
		case 0:
		case 1:
			v, err := strconv.ParseUint(cl[0], 10, 63)
			if err != nil {
				return nil, errors.New("malformed Content-Length")
			}
			contentLength = int64(v)
			st.declared = contentLength
		default:
			return nil, errors.New("several Content-Length fields")
		}
		if httpguts.HeaderValuesContainsToken(header["Expect"], "100-continue") {
			st.needContinue = true
			delete(header, "Expect")
		}
		body = &st.body
	} else if cl := header["Content-Length"]; len(cl) == 1 && cl[0] != "0" {
		return nil, errors.New("Content-Length of a request without a body")
	}

	var u *url.URL
	if connect {
		u = &url.URL{Host: authority}
	} else {
		var err error
		if u, err = url.ParseRequestURI(path); err != nil {
			return nil, errors.New("malformed :path")
		}
	}
	req := &http.Request{
		Method:        method,
		URL:           u,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        header,
		Body:          body,
		ContentLength: contentLength,
		Host:          authority,
		RemoteAddr:    c.remoteAddr,
		RequestURI:    path,
		TLS:           c.tlsState,
	}
	return req.WithContext(st.ctx), nil
}

// commonCanonical are the request header names clients usually send, in
// the form http.Header keys them.
var commonCanonical = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Audit-Id", "Authorization",
		"Cache-Control", "Content-Encoding", "Content-Length", "Content-Type", "Cookie",
		"Expect", "Host", "If-Match", "If-None-Match", "If-Modified-Since", "Origin",
		"Referer", "User-Agent", "Impersonate-User", "Impersonate-Group", "Impersonate-Uid",
		"Kubectl-Command", "Kubectl-Session", "X-Remote-User", "X-Remote-Group",
		"X-Forwarded-For", "Te",
	} {
		m[strings.ToLower(k)] = k
	}
	return m
}()

// maxCanonicalCache bounds a connection's memory of the other names it
// canonicalised, against a client sending endless new ones.
const maxCanonicalCache = 100

// canonical is the http.Header key of an HTTP/2 field name (lower case
// already, checked by the Framer). The serve goroutine's own.
func (c *conn) canonical(name string) string {
	if k, ok := commonCanonical[name]; ok {
		return k
	}
	if k, ok := c.canonCache[name]; ok {
		return k
	}
	k := textproto.CanonicalMIMEHeaderKey(name)
	if len(c.canonCache) < maxCanonicalCache {
		if c.canonCache == nil {
			c.canonCache = map[string]string{}
		}
		c.canonCache[name] = k
	}
	return k
}

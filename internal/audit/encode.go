package audit

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// appendEvent appends ev as one line of JSON, byte for byte what
// kube-apiserver's JSON serializer (encoding/json's Encoder, HTML-safe)
// writes for it, kind and apiVersion first. It is written by hand because
// it runs on every audited request: encoding/json takes several times as
// long. TestEncodeEvent checks it against encoding/json.
func appendEvent(b []byte, ev *auditv1.Event) []byte { return appendEventAnnotated(b, ev, nil) }

// appendEventAnnotated is appendEvent with more annotations than
// ev.Annotations: extra, key and value pairs sorted by key, whose values
// win over the map's.
func appendEventAnnotated(b []byte, ev *auditv1.Event, extra [][2]string) []byte {
	b = append(b, `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":`...)
	b = appendString(b, string(ev.Level))
	b = append(b, `,"auditID":`...)
	b = appendString(b, string(ev.AuditID))
	b = append(b, `,"stage":`...)
	b = appendString(b, string(ev.Stage))
	b = append(b, `,"requestURI":`...)
	b = appendString(b, ev.RequestURI)
	b = append(b, `,"verb":`...)
	b = appendString(b, ev.Verb)
	b = append(b, `,"user":`...)
	b = appendUser(b, &ev.User)
	if ev.ImpersonatedUser != nil {
		b = append(b, `,"impersonatedUser":`...)
		b = appendUser(b, ev.ImpersonatedUser)
	}
	if m := ev.AuthenticationMetadata; m != nil {
		b = append(b, `,"authenticationMetadata":{`...)
		if m.ImpersonationConstraint != "" {
			b = append(b, `"impersonationConstraint":`...)
			b = appendString(b, m.ImpersonationConstraint)
		}
		b = append(b, '}')
	}
	if len(ev.SourceIPs) > 0 {
		b = append(b, `,"sourceIPs":`...)
		b = appendStrings(b, ev.SourceIPs)
	}
	if ev.UserAgent != "" {
		b = append(b, `,"userAgent":`...)
		b = appendString(b, ev.UserAgent)
	}
	if r := ev.ObjectRef; r != nil {
		b = append(b, `,"objectRef":`...)
		b = appendObjectRef(b, r)
	}
	if st := ev.ResponseStatus; st != nil {
		b = append(b, `,"responseStatus":`...)
		b = appendStatus(b, st)
	}
	if o := ev.RequestObject; o != nil {
		b = append(b, `,"requestObject":`...)
		b = appendRaw(b, o.Raw)
	}
	if o := ev.ResponseObject; o != nil {
		b = append(b, `,"responseObject":`...)
		b = appendRaw(b, o.Raw)
	}
	b = append(b, `,"requestReceivedTimestamp":`...)
	b = appendMicroTime(b, ev.RequestReceivedTimestamp)
	b = append(b, `,"stageTimestamp":`...)
	b = appendMicroTime(b, ev.StageTimestamp)
	if len(ev.Annotations) > 0 || len(extra) > 0 {
		b = append(b, `,"annotations":{`...)
		if len(ev.Annotations) > 0 {
			// extra's values win over the map's.
			all := append(make([][2]string, 0, len(ev.Annotations)+len(extra)), extra...)
			for k, v := range ev.Annotations {
				if !slices.ContainsFunc(extra, func(kv [2]string) bool { return kv[0] == k }) {
					all = append(all, [2]string{k, v})
				}
			}
			slices.SortFunc(all, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
			extra = all
		}
		for i, kv := range extra {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, kv[0])
			b = append(b, ':')
			b = appendString(b, kv[1])
		}
		b = append(b, '}')
	}
	return append(b, "}\n"...)
}

func appendUser(b []byte, u *authnv1.UserInfo) []byte {
	o := object{b: append(b, '{')}
	o.str("username", u.Username)
	o.str("uid", u.UID)
	if len(u.Groups) > 0 {
		o.key("groups")
		o.b = appendStrings(o.b, u.Groups)
	}
	if len(u.Extra) > 0 {
		o.key("extra")
		o.b = append(o.b, '{')
		keys := make([]string, 0, len(u.Extra))
		for k := range u.Extra {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = appendString(o.b, k)
			o.b = append(o.b, ':')
			if v := u.Extra[k]; v == nil {
				o.b = append(o.b, "null"...)
			} else {
				o.b = appendStrings(o.b, v)
			}
		}
		o.b = append(o.b, '}')
	}
	return append(o.b, '}')
}

func appendObjectRef(b []byte, r *auditv1.ObjectReference) []byte {
	o := object{b: append(b, '{')}
	o.str("resource", r.Resource)
	o.str("namespace", r.Namespace)
	o.str("name", r.Name)
	o.str("uid", string(r.UID))
	o.str("apiGroup", r.APIGroup)
	o.str("apiVersion", r.APIVersion)
	o.str("resourceVersion", r.ResourceVersion)
	o.str("subresource", r.Subresource)
	return append(o.b, '}')
}

// object writes the members of a JSON object after its '{', with the
// commas between them.
type object struct {
	b     []byte
	comma bool
}

func (o *object) key(name string) {
	if o.comma {
		o.b = append(o.b, ',')
	}
	o.comma = true
	o.b = append(o.b, '"')
	o.b = append(o.b, name...)
	o.b = append(o.b, `":`...)
}

// str writes a string member, left out when empty (omitempty).
func (o *object) str(name, v string) {
	if v != "" {
		o.key(name)
		o.b = appendString(o.b, v)
	}
}

// appendStatus writes a response status; only the common one, a code
// alone, is written by hand.
func appendStatus(b []byte, st *metav1.Status) []byte {
	if st.Status == "" && st.Message == "" && st.Reason == "" && st.Details == nil && st.Kind == "" && st.APIVersion == "" && st.ListMeta == (metav1.ListMeta{}) {
		b = append(b, `{"metadata":{}`...)
		if st.Code != 0 {
			b = append(b, `,"code":`...)
			b = appendInt(b, int64(st.Code))
		}
		return append(b, '}')
	}
	data, err := json.Marshal(st)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, data...)
}

// appendRaw writes an embedded object (runtime.Unknown) as
// encoding/json writes a Marshaler's output: compacted and HTML-escaped.
func appendRaw(b []byte, raw []byte) []byte {
	if raw == nil {
		return append(b, "null"...)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return append(b, "null"...)
	}
	var escaped bytes.Buffer
	json.HTMLEscape(&escaped, compact.Bytes())
	return append(b, escaped.Bytes()...)
}

// appendMicroTime writes metav1.MicroTime's JSON: RFC 3339 in UTC with
// microseconds, or null.
func appendMicroTime(b []byte, t metav1.MicroTime) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	u := t.UTC()
	year, month, day := u.Date()
	if year < 0 || year > 9999 {
		b = append(b, '"')
		b = u.AppendFormat(b, metav1.RFC3339Micro)
		return append(b, '"')
	}
	// 2006-01-02T15:04:05.000000Z, as AppendFormat writes it, faster.
	hour, minute, sec := u.Clock()
	b = append(b, '"')
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, u.Nanosecond()/1000, 6)
	return append(b, 'Z', '"')
}

// appendDigits writes n (0 <= n < 10^width) in width digits.
func appendDigits(b []byte, n, width int) []byte {
	var tmp [6]byte
	for i := width - 1; i >= 0; i-- {
		tmp[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, tmp[:width]...)
}

func appendInt(b []byte, n int64) []byte {
	var tmp [20]byte
	i := len(tmp)
	neg := n < 0
	if neg {
		n = -n
	}
	for {
		i--
		tmp[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	if neg {
		i--
		tmp[i] = '-'
	}
	return append(b, tmp[i:]...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// plainASCII says which ASCII bytes a JSON string holds as they are.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString writes s as encoding/json does with HTML escaping:
// control characters, <, > and & as \u00XX (\b \f \n \r \t by name), "
// and \ escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

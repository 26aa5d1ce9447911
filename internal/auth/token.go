package auth

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Tokens maps bearer tokens to their users.
type Tokens map[string]User

// ParseTokens parses kube-apiserver's static token file: CSV records
// "token,user,uid" with an optional fourth column of comma-separated
// groups (quoted when there are several: "group1,group2"); more columns
// are ignored. As in kube-apiserver (apiserver/pkg/authentication/token/
// tokenfile), a record with fewer than three columns is an error, one with
// an empty token is skipped, and a later duplicate replaces an earlier
// one; those two are returned as warnings.
func ParseTokens(data []byte) (Tokens, []string, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	tokens := Tokens{}
	var warnings []string
	for n := 1; ; n++ {
		record, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if len(record) < 3 {
			return nil, nil, fmt.Errorf("record %d must have at least 3 columns (token, user name, user uid), found %d", n, len(record))
		}
		if record[0] == "" {
			warnings = append(warnings, fmt.Sprintf("empty token in record %d", n))
			continue
		}
		u := User{Name: record[1], UID: record[2]}
		if len(record) >= 4 {
			u.Groups = strings.Split(record[3], ",")
		}
		if _, dup := tokens[record[0]]; dup {
			warnings = append(warnings, fmt.Sprintf("duplicate token in record %d", n))
		}
		tokens[record[0]] = u
	}
	return tokens, warnings, nil
}

// TokenFile authenticates bearer tokens listed in a static token file
// (ParseTokens), re-read when it changes.
type TokenFile struct {
	src *fileSource[Tokens]
}

// NewTokenFile loads the token file at path. It fails when the file cannot
// be read or parsed; later, a file that fails keeps the previous tokens.
func NewTokenFile(path string, reload Reload) (*TokenFile, error) {
	reload = reload.withDefaults()
	log := reload.Logger
	parse := func(data []byte) (Tokens, error) {
		tokens, warnings, err := ParseTokens(data)
		for _, w := range warnings {
			log.Warn("token file: "+w, "path", path)
		}
		return tokens, err
	}
	src, err := newFileSource(path, "token file", parse, reload)
	if err != nil {
		return nil, err
	}
	return &TokenFile{src: src}, nil
}

// Run re-reads the file when it changes, until ctx ends.
func (t *TokenFile) Run(ctx context.Context) error { return t.src.Run(ctx) }

// Lookup returns the user of a token.
func (t *TokenFile) Lookup(token string) (User, bool) {
	u, ok := t.src.get()[token]
	return u, ok
}

// errInvalidToken is kube-apiserver's error for an unknown bearer token.
var errInvalidToken = errors.New("invalid bearer token")

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header, as kube-apiserver's bearertoken authenticator reads it: the
// scheme is case-insensitive, and a missing or empty token is no token.
func bearerToken(req *http.Request) (string, bool) {
	h := strings.TrimSpace(req.Header.Get("Authorization"))
	if h == "" {
		return "", false
	}
	parts := strings.SplitN(h, " ", 3)
	if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") || parts[1] == "" {
		return "", false
	}
	return parts[1], true
}

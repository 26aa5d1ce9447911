package httpserver

import (
	"fmt"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/leasehold/leasehold/internal/auth"
)

// Defaults of the in-flight limits (kube-apiserver's
// --max-requests-inflight and --max-mutating-requests-inflight).
const (
	DefaultMaxRequestsInflight         = 400
	DefaultMaxMutatingRequestsInflight = 200
)

// tooManyRequestsMessage is kube-apiserver's plain-text 429 body
// (apiserver/pkg/server/filters/maxinflight.go).
const tooManyRequestsMessage = "Too many requests, please try again later."

// maxSelectorRequirements bounds the requirements of one label or field
// selector. kube-apiserver has no such limit (only the 1 MiB header
// limit), but a list costs requirements × objects to filter, without
// looking at its deadline: a 1 MiB selector of "!k" terms takes minutes of
// CPU over 20,000 leases. Real selectors have a handful of requirements;
// "in (...)" value lists are sets and do not count against this.
const maxSelectorRequirements = 256

// inflight limits the requests served at once, as kube-apiserver's
// WithMaxInFlightLimit does: one budget for reads (get, list), one for
// everything else; long-running requests (watches, profiles) do not count;
// a request over budget is refused with 429, unless its user is in
// system:masters. It also limits the watches per user when watchesPerUser
// is positive (kube-apiserver has no such limit).
type inflight struct {
	// readOnly and mutating hold one token per request being served;
	// nil means no limit. A full channel refuses the request: they are
	// never waited on.
	readOnly, mutating chan struct{}
	// releaseReadOnly and releaseMutating give a slot back, made once:
	// a closure per request was an allocation.
	releaseReadOnly, releaseMutating func()
	watchesPerUser                   int

	mu sync.Mutex // guards watches
	// watches counts the open watches per user name.
	watches map[string]int
}

func newInflight(readOnly, mutating, watchesPerUser int) *inflight {
	l := &inflight{watchesPerUser: watchesPerUser, watches: map[string]int{}}
	if readOnly > 0 {
		l.readOnly = make(chan struct{}, readOnly)
		l.releaseReadOnly = func() { <-l.readOnly }
	}
	if mutating > 0 {
		l.mutating = make(chan struct{}, mutating)
		l.releaseMutating = func() { <-l.mutating }
	}
	return l
}

// admit takes a slot for the request; ok false means it is refused.
// release frees the slot; it must be called once the request ends.
func (l *inflight) admit(a auth.Attributes) (release func(), ok bool) {
	privileged := a.User.InGroup(auth.SystemPrivilegedGroup)
	if longRunning(a) {
		if a.Verb != "watch" || l.watchesPerUser <= 0 || privileged {
			return func() {}, true
		}
		return l.admitWatch(a.User.Name)
	}
	c, release := l.readOnly, l.releaseReadOnly
	if mutating(a) {
		c, release = l.mutating, l.releaseMutating
	}
	if c == nil {
		return func() {}, true
	}
	select {
	case c <- struct{}{}:
		return release, true
	default:
		// A system:master always gets an answer (kube-apiserver: "a
		// super-admin or a loopback connection").
		return func() {}, privileged
	}
}

func (l *inflight) admitWatch(user string) (func(), bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watches[user] >= l.watchesPerUser {
		return nil, false
	}
	l.watches[user]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.watches[user]--; l.watches[user] <= 0 {
			delete(l.watches, user)
		}
	}, true
}

// tooManyRequests is kube-apiserver's 429: plain text and Retry-After, not
// a Status.
func tooManyRequests(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, tooManyRequestsMessage, http.StatusTooManyRequests)
}

// checkSelectors refuses, with 400, selectors of more than
// maxSelectorRequirements requirements. Selectors that do not parse are
// left to the handler, which words the error as kube-apiserver does.
func checkSelectors(call *request) error {
	if a := call.attrs; !a.ResourceRequest || a.Verb != "list" && a.Verb != "watch" && a.Verb != "deletecollection" {
		return nil
	}
	q := call.query
	n := 0
	if v := q.Get("labelSelector"); v != "" {
		if sel, err := labels.Parse(v); err == nil {
			reqs, _ := sel.Requirements()
			n = len(reqs)
		}
		if n > maxSelectorRequirements {
			return apierrors.NewBadRequest(fmt.Sprintf("labelSelector has %d requirements; at most %d are allowed", n, maxSelectorRequirements))
		}
	}
	if v := q.Get("fieldSelector"); v != "" {
		n = 0
		if sel, err := fields.ParseSelector(v); err == nil {
			n = len(sel.Requirements())
		}
		if n > maxSelectorRequirements {
			return apierrors.NewBadRequest(fmt.Sprintf("fieldSelector has %d requirements; at most %d are allowed", n, maxSelectorRequirements))
		}
	}
	return nil
}

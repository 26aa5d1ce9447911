package httpserver

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/registry"
)

// TestPeriodicBookmarks: a watch with allowWatchBookmarks gets a bookmark
// every BookmarkInterval (a minute by default, as kube-apiserver) even
// when nothing changes, each at the latest revision; a watch without it
// gets none.
func TestPeriodicBookmarks(t *testing.T) {
	p := newInProcessWith(t, func(c *registry.Config) { c.BookmarkInterval = 100 * time.Millisecond }, nil)
	hs := httptest.NewServer(p.srv)
	t.Cleanup(hs.Close)
	rev := strconv.FormatInt(p.revision(t), 10)

	type event struct {
		Type   string
		Object struct {
			Kind     string
			Metadata struct{ ResourceVersion string }
		}
	}
	watch := func(query string) <-chan event {
		req, err := http.NewRequestWithContext(t.Context(), "GET", hs.URL+"/apis/coordination.k8s.io/v1/namespaces/default/leases?watch=true&resourceVersion="+rev+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		events := make(chan event, 16)
		go func() {
			defer close(events)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				var ev event
				if json.Unmarshal(sc.Bytes(), &ev) == nil {
					events <- ev
				}
			}
		}()
		return events
	}
	with, without := watch("&allowWatchBookmarks=true"), watch("")
	start := time.Now()
	for range 3 {
		select {
		case ev := <-with:
			if ev.Type != "BOOKMARK" || ev.Object.Kind != "Lease" || ev.Object.Metadata.ResourceVersion != rev {
				t.Fatalf("event %+v, want a BOOKMARK of a Lease at %s", ev, rev)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no bookmark within 10s")
		}
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("3 bookmarks in %v, at most one per 100ms", d)
	}
	select {
	case ev := <-without:
		t.Errorf("watch without allowWatchBookmarks got %+v", ev)
	default:
	}
}

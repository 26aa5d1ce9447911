package embedded

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/storage"
)

func putEvent(rev int64, key string, valueLen int) storage.Event {
	return storage.Event{
		Type:     storage.EventPut,
		KV:       storage.KeyValue{Key: key, Value: []byte(strings.Repeat("v", valueLen)), CreateRevision: rev, ModRevision: rev},
		Revision: rev,
	}
}

func revisions(evs []storage.Event) []int64 {
	var out []int64
	for _, ev := range evs {
		out = append(out, ev.Revision)
	}
	return out
}

func TestHistoryWindow(t *testing.T) {
	h := newHistory(4, 1<<20, 10)

	// Empty at the start revision: reading from it works, from before fails.
	if res, err := h.read(10, "/", nil, 100); err != nil || len(res.events) != 0 || res.newest != 10 || res.scanned != 10 {
		t.Errorf("read of an empty history = %+v, %v", res, err)
	}
	if _, err := h.read(9, "/", nil, 100); !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("read before the start: %v, want ErrCompacted", err)
	}

	h.append([]storage.Event{putEvent(11, "/a", 1), putEvent(12, "/b", 1), putEvent(13, "/a", 1)}, 13)
	res, err := h.read(10, "/a", nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]int64{11, 13}, revisions(res.events)); d != "" {
		t.Errorf("prefix /a (-want +got):\n%s", d)
	}
	if res.scanned != 13 || res.newest != 13 {
		t.Errorf("scanned %d, newest %d; want 13, 13", res.scanned, res.newest)
	}

	// maxScan bounds one read.
	if res, _ := h.read(10, "/", nil, 2); res.scanned != 12 || len(res.events) != 2 {
		t.Errorf("read with maxScan 2 = %v scanned to %d, want 11,12 to 12", revisions(res.events), res.scanned)
	}

	// Two more events overflow the four slots: 11 leaves.
	h.append([]storage.Event{putEvent(14, "/c", 1), putEvent(15, "/c", 1)}, 15)
	if _, err := h.read(10, "/", nil, 100); !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("read from 10 after overflow: %v, want ErrCompacted", err)
	}
	res, err = h.read(11, "/", nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]int64{12, 13, 14, 15}, revisions(res.events)); d != "" {
		t.Errorf("after overflow (-want +got):\n%s", d)
	}
	if !h.available(11) || h.available(10) {
		t.Errorf("available(11) = %v, available(10) = %v; want true, false", h.available(11), h.available(10))
	}

	// A read from the future returns nothing and stays put.
	if res, err := h.read(20, "/", nil, 100); err != nil || len(res.events) != 0 || res.scanned != 20 {
		t.Errorf("read from the future = %+v, %v", res, err)
	}
}

func TestHistoryNotify(t *testing.T) {
	h := newHistory(4, 1<<20, 0)
	_, notify := h.state()
	select {
	case <-notify:
		t.Fatal("notify closed before any commit")
	default:
	}
	h.append(nil, 0) // nothing new: still wakes waiters, harmless
	<-notify
	_, notify = h.state()
	h.append([]storage.Event{putEvent(1, "/a", 1)}, 1)
	<-notify
	if newest, _ := h.state(); newest != 1 {
		t.Errorf("newest = %d, want 1", newest)
	}
}

func TestHistoryBytes(t *testing.T) {
	sample := putEvent(1, "/k", 1000)
	per := eventBytes(&sample)
	h := newHistory(100, 3*per, 0)
	for rev := int64(1); rev <= 10; rev++ {
		h.append([]storage.Event{putEvent(rev, "/k", 1000)}, rev)
		if h.bytes > 3*per {
			t.Fatalf("after revision %d: %d bytes retained, limit %d", rev, h.bytes, 3*per)
		}
	}
	if h.oldest != 8 {
		t.Errorf("oldest = %d, want 8 (three events fit)", h.oldest)
	}
	// Evicted slots no longer hold values.
	if ev := h.events[1%100]; ev.KV.Value != nil {
		t.Errorf("evicted slot still holds a %d-byte value", len(ev.KV.Value))
	}

	// One event above the limit is still kept: a watch from just before
	// the newest revision works.
	h.append([]storage.Event{putEvent(11, "/k", 10*1000)}, 11)
	if h.oldest != 11 || !h.available(10) {
		t.Errorf("after an oversized event: oldest %d, want 11", h.oldest)
	}
}

func TestHistoryRejectsGaps(t *testing.T) {
	h := newHistory(4, 1<<20, 5)
	defer func() {
		if recover() == nil {
			t.Error("appending revision 7 after 5 did not panic")
		}
	}()
	h.append([]storage.Event{putEvent(7, "/a", 1)}, 7)
}

package storagetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/storage"
)

// The TTL tests use the shortest TTL (a second; etcd may make it its own
// minimum, a few seconds) and never time an expiry: they wait for the
// delete in a watch, and judge what else must have happened by the order
// of events, a key written after another expiring no sooner.

const ttl = time.Second

// waitDeleted reads r until key's delete event and returns it, with the
// events of other keys read meanwhile.
func waitDeleted(t *testing.T, r *eventReader, key string) (del storage.Event, others []storage.Event) {
	t.Helper()
	for {
		ev := r.next()
		if ev.KV.Key == key && ev.Type == storage.EventDelete {
			return ev, others
		}
		others = append(others, ev)
	}
}

// A value written with a TTL is deleted by the engine: watches see the
// delete, reads no longer find the key, and a new value can be created in
// its place.
func (s *suite) testTTLExpires(t *testing.T) {
	st := s.newStore(t)
	start := mustRevision(t, st)
	r := newEventReader(t, mustWatch(t, t.Context(), st, "/registry/events/", start), "/registry/events/", start, s.opts.Timeout+10*time.Second)
	kv := mustPut(t, st, "/registry/events/ns/a", "a", 0, storage.WithTTL(ttl))
	if ev := r.next(); ev.Type != storage.EventPut || ev.KV.Key != kv.Key {
		t.Fatalf("first event %v %q, want the put", ev.Type, ev.KV.Key)
	}
	del, others := waitDeleted(t, r, kv.Key)
	if len(others) != 0 || del.Revision <= kv.ModRevision {
		t.Errorf("expiry at %d after the put at %d, events between: %v", del.Revision, kv.ModRevision, others)
	}
	if _, err := st.Get(t.Context(), kv.Key); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get after expiry: %v, want ErrNotFound", err)
	}
	if l := mustList(t, st, "/registry/events/"); len(l.KVs) != 0 || l.Revision < del.Revision {
		t.Errorf("List after expiry: %d keys at %d", len(l.KVs), l.Revision)
	}
	again := mustPut(t, st, kv.Key, "a2", 0)
	if again.CreateRevision <= del.Revision {
		t.Errorf("created again at %d, not after the expiry at %d", again.CreateRevision, del.Revision)
	}
}

// A Put without TTL over an expiring value keeps the key for good; a Put
// with one counts from itself. The key rewritten without TTL must outlive
// a key written after it with the same TTL.
func (s *suite) testTTLRewrite(t *testing.T) {
	st := s.newStore(t)
	start := mustRevision(t, st)
	r := newEventReader(t, mustWatch(t, t.Context(), st, "/registry/events/", start), "/registry/events/", start, s.opts.Timeout+10*time.Second)
	kept := mustPut(t, st, "/registry/events/ns/kept", "1", 0, storage.WithTTL(ttl))
	kept = mustUpdate(t, st, kept, "2")
	renewed := mustPut(t, st, "/registry/events/ns/renewed", "1", 0, storage.WithTTL(ttl))
	sentinel := mustPut(t, st, "/registry/events/ns/sentinel", "s", 0, storage.WithTTL(ttl))
	renewed = mustUpdate(t, st, renewed, "2", storage.WithTTL(ttl))

	_, others := waitDeleted(t, r, sentinel.Key)
	var renewedDel *storage.Event
	for _, ev := range others {
		switch {
		case ev.Type == storage.EventDelete && ev.KV.Key == kept.Key:
			t.Errorf("the key rewritten without TTL expired at %d", ev.Revision)
		case ev.Type == storage.EventDelete && ev.KV.Key == renewed.Key:
			// It may expire with the sentinel, in the same millisecond.
			renewedDel = &ev
		}
	}
	if got := mustGet(t, st, kept.Key); got.ModRevision != kept.ModRevision {
		t.Errorf("kept key at %d, want %d", got.ModRevision, kept.ModRevision)
	}
	// The renewed key still expires.
	if renewedDel == nil {
		del, _ := waitDeleted(t, r, renewed.Key)
		renewedDel = &del
	}
	if renewedDel.Revision <= renewed.ModRevision {
		t.Errorf("renewed key expired at %d, before its last put at %d", renewedDel.Revision, renewed.ModRevision)
	}
	if got := mustGet(t, st, kept.Key); got.ModRevision != kept.ModRevision {
		t.Errorf("kept key at %d after the others expired, want %d", got.ModRevision, kept.ModRevision)
	}
}

// A key deleted before its expiry is deleted once: the expiry does not
// delete it again, nor a new key created under its name without TTL.
func (s *suite) testTTLDeletedFirst(t *testing.T) {
	st := s.newStore(t)
	start := mustRevision(t, st)
	r := newEventReader(t, mustWatch(t, t.Context(), st, "/registry/events/", start), "/registry/events/", start, s.opts.Timeout+10*time.Second)
	a := mustPut(t, st, "/registry/events/ns/a", "1", 0, storage.WithTTL(ttl))
	del := mustDelete(t, st, a.Key, a.ModRevision)
	recreated := mustPut(t, st, a.Key, "2", 0)
	sentinel := mustPut(t, st, "/registry/events/ns/sentinel", "s", 0, storage.WithTTL(ttl))
	_, others := waitDeleted(t, r, sentinel.Key)
	deletes := 0
	for _, ev := range others {
		if ev.Type == storage.EventDelete && ev.KV.Key == a.Key {
			deletes++
			if ev.Revision != del.ModRevision {
				t.Errorf("a deleted again at %d", ev.Revision)
			}
		}
	}
	if deletes != 1 {
		t.Errorf("%d deletes of the key, want 1", deletes)
	}
	if got := mustGet(t, st, a.Key); got.ModRevision != recreated.ModRevision {
		t.Errorf("recreated key at %d, want %d", got.ModRevision, recreated.ModRevision)
	}
}

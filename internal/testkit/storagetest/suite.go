// Package storagetest is the conformance suite for storage.Interface. Every
// engine runs it (the embedded engine, the etcd engine, and both behind
// the watch cache as the registry reads them, in internal/watchcache), so
// that the promises written in internal/storage/interface.go are checked
// once, in one place.
//
// An engine's test calls RunTests with a factory for empty stores:
//
//	func TestConformance(t *testing.T) {
//		storagetest.RunTests(t, func(t *testing.T) storage.Interface {
//			s := open(t) // an empty store; close it in t.Cleanup
//			return s
//		}, storagetest.Options{MaxValueSize: limit, Compact: compact})
//	}
//
// Every subtest gets its own store from the factory and writes only to it, so
// it can reason about exact revisions. The suite never relies on a store's
// first revision: it reads Revision and counts from there.
package storagetest

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/storage"
)

// Options state what the suite cannot learn through storage.Interface.
type Options struct {
	// MaxValueSize is the largest value the engine accepts. The suite stores
	// a value of exactly this size and expects one byte more to fail with
	// storage.ErrTooLarge. Zero skips that test.
	MaxValueSize int

	// Compact makes the history up to rev unavailable to Watch, in whatever
	// way the engine has: compacting an etcd keyspace, or writing enough to
	// push rev out of an in-memory event window. rev is the current revision
	// when the suite calls it; Compact may write to keys outside
	// "/registry/" and the suite then checks that a Watch from a revision
	// several writes older than rev fails with storage.ErrCompacted. Nil
	// skips that test.
	Compact func(t *testing.T, s storage.Interface, rev int64)

	// Timeout bounds each wait for a watch event, a progress note or the
	// end of a watch. Zero means 10 seconds.
	Timeout time.Duration
}

// RunTests runs the conformance suite as subtests of t. newStore must return
// a new, empty store each time it is called. The suite closes some stores
// itself (to test Close), so whatever cleanup newStore registers must
// tolerate a store that is already closed.
func RunTests(t *testing.T, newStore func(t *testing.T) storage.Interface, opts Options) {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	s := &suite{newStore: newStore, opts: opts}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"Get/Missing", s.testGetMissing},
		{"Get/Present", s.testGetPresent},
		{"Put/Create", s.testPutCreate},
		{"Put/CreateExisting", s.testPutCreateExisting},
		{"Put/Update", s.testPutUpdate},
		{"Put/StaleRevision", s.testPutStale},
		{"Put/UpdateMissing", s.testPutUpdateMissing},
		{"Put/BinaryAndEmptyValues", s.testPutBinaryValues},
		{"Put/TooLarge", s.testPutTooLarge},
		{"Delete/Matching", s.testDeleteMatching},
		{"Delete/Mismatching", s.testDeleteMismatching},
		{"Delete/Missing", s.testDeleteMissing},
		{"Revision/GlobalCounter", s.testRevisionGlobal},
		{"Revision/CreateRevisionLifecycle", s.testCreateRevision},
		{"Revision/AfterAcknowledgedWrites", s.testRevisionLinearizable},
		{"List/PrefixBoundaries", s.testListPrefix},
		{"List/Revision", s.testListRevision},
		{"Watch/ReplayFromRevision", s.testWatchReplay},
		{"Watch/ReplayFromMiddle", s.testWatchReplayMiddle},
		{"Watch/Live", s.testWatchLive},
		{"Watch/PrefixFilter", s.testWatchPrefixFilter},
		{"Watch/ProgressAfterOtherPrefixes", s.testWatchProgress},
		{"Watch/CancelClosesChannel", s.testWatchCancel},
		{"Watch/Compacted", s.testWatchCompacted},
		{"TTL/Expires", s.testTTLExpires},
		{"TTL/Rewrite", s.testTTLRewrite},
		{"TTL/DeletedFirst", s.testTTLDeletedFirst},
		{"Concurrency/CASCounters", s.testConcurrentCounters},
		{"Close/ThenUnavailable", s.testClose},
	} {
		t.Run(tc.name, tc.run)
	}
}

type suite struct {
	newStore func(t *testing.T) storage.Interface
	opts     Options
}

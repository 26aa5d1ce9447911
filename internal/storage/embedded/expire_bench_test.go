package embedded

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/storage"
)

// BenchmarkReapRoundIdle is one round of the reaper while many keys
// expire later and none is due: its cost must not grow with them (compare
// -benchtime runs with pending=1000 and 50000).
func BenchmarkReapRoundIdle(b *testing.B) {
	for _, pending := range []int{1000, 50000} {
		b.Run(fmt.Sprint("pending=", pending), func(b *testing.B) {
			var mu sync.Mutex
			now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
			clock := func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				return now
			}
			s, err := Open(b.TempDir(), Options{Now: clock})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var wg sync.WaitGroup
			for w := range 64 {
				wg.Go(func() {
					for i := w; i < pending; i += 64 {
						if _, err := s.Put(context.Background(), fmt.Sprintf("/registry/events/ns/e-%06d", i), []byte("value"), 0, storage.WithTTL(time.Hour)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			watermark := clock().UnixMilli()
			b.ResetTimer()
			for b.Loop() {
				// A second passes between rounds, as in the reaper.
				mu.Lock()
				now = now.Add(time.Second)
				mu.Unlock()
				watermark, _ = s.reapRound(watermark)
			}
		})
	}
}

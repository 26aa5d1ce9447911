package bench

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestProgress(t *testing.T) {
	for _, tc := range []struct {
		name string
		live bool
		want string // plain output; live output is checked by counting
	}{
		{name: "plain lines every 10s", want: "done 1\ndone 2\n"},
		{name: "one line redrawn 4 times a second", live: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var out bytes.Buffer
				e := &Env{Progress: &out, Live: tc.live}
				var n atomic.Int64
				p := e.startProgress(func() string { return fmt.Sprintf("done %d", n.Add(1)) })
				time.Sleep(25 * time.Second)
				p.Stop()
				p.Stop() // twice is fine
				got := out.String()
				if !tc.live {
					if got != tc.want {
						t.Errorf("got %q, want %q", got, tc.want)
					}
					return
				}
				// 25 s at 4 redraws a second, then the line cleared.
				if c := strings.Count(got, "\r\033[Kdone "); c != 100 || !strings.HasSuffix(got, "done 100\r\033[K") {
					t.Errorf("%d redraws, ending %q", c, got[max(0, len(got)-30):])
				}
			})
		})
	}
}

func TestProgressNowhere(t *testing.T) {
	p := (&Env{}).startProgress(func() string { t.Error("status asked for with no Progress writer"); return "" })
	p.Stop()
}

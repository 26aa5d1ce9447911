package codec

import (
	"fmt"
	"testing"
)

func BenchmarkEncodeItem(b *testing.B) {
	c := newCodecs(b)
	for _, mt := range []string{JSON, Protobuf} {
		b.Run(mt, func(b *testing.B) {
			out := output(&testing.T{}, c, mt)
			obj := testLease("a")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.EncodeItem(out, obj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	_ = fmt.Sprint
}

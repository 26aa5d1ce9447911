package httpserver

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestWarningHeaders follows kube-apiserver's warning recorder
// (endpoints/filters/warning.go) case by case.
func TestWarningHeaders(t *testing.T) {
	repeat := func(n int, text string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = strings.Repeat("x", len(text)-3) + string(rune('a'+i/26)) + string(rune('a'+i%26)) + "!"
		}
		return out
	}
	long := strings.Repeat("é", 5000)
	for _, tc := range []struct {
		name     string
		in       []string
		count    int // texts sent
		maxRunes int // the longest
	}{
		{"few, duplicates once", []string{"a", "b", "a", "", "b"}, 2, 1},
		// 20 of 200 runes fit; the 21st overflows: all 21 are kept, cut
		// to 256 runes (so unchanged); the 22nd finds the limit full.
		{"many", repeat(30, strings.Repeat("y", 200)), 21, 200},
		{"one too long", []string{long}, 1, 256},
		// 16 of 256 fill the limit exactly; the 17th overflows and is
		// replayed with them.
		{"exactly full, then one more", repeat(17, strings.Repeat("y", 256)), 17, 256},
		// After the cut, short texts go on until 4096 runes are written:
		// 256 + 39·100 = 4156.
		{"cut, then short ones", append([]string{long}, repeat(100, strings.Repeat("y", 100))...), 40, 256},
		// A text that cannot be a header is left out and not counted.
		{"not a header", []string{"\x01" + strings.Repeat("a", 4000), strings.Repeat("b", 300)}, 1, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, h := range warningHeaders(tc.in) {
				text, ok := strings.CutPrefix(h, `299 - "`)
				if !ok || !strings.HasSuffix(text, `"`) {
					t.Fatalf("header %q", h)
				}
				got = append(got, strings.TrimSuffix(text, `"`))
			}
			longest := 0
			for _, text := range got {
				if !utf8.ValidString(text) {
					t.Errorf("invalid UTF-8: %q", text)
				}
				longest = max(longest, utf8.RuneCountInString(text))
			}
			if len(got) != tc.count || longest != tc.maxRunes {
				t.Errorf("%d texts, the longest %d runes; want %d, %d", len(got), longest, tc.count, tc.maxRunes)
			}
			for i, text := range got {
				if !strings.HasPrefix(tc.in[i], text) && tc.name != "few, duplicates once" && tc.name != "not a header" {
					t.Errorf("text %d is not a prefix of the warning it came from", i)
				}
			}
		})
	}
}

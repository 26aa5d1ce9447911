package embedded

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name        string
		create, mod int64
		value       []byte
	}{
		{"small", 1, 1, []byte("v")},
		{"empty value", 5, 9, nil},
		{"large revisions", 1 << 40, 1<<40 + 3, []byte{0, 1, 2}},
		{"varint boundary", 127, 128, []byte("x")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := appendRecord(nil, tc.create, tc.mod, tc.value)
			c, m, v, err := decodeRecord(rec)
			if err != nil || c != tc.create || m != tc.mod || !bytes.Equal(v, tc.value) {
				t.Errorf("decode = %d, %d, %q, %v; want %d, %d, %q", c, m, v, err, tc.create, tc.mod, tc.value)
			}
		})
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	for name, rec := range map[string][]byte{
		"empty":              nil,
		"zero create":        appendRecord(nil, 0, 1, nil),
		"mod below create":   appendRecord(nil, 5, 4, nil),
		"truncated varint":   {0x80},
		"missing mod":        {0x01},
		"overlong create":    appendRecord(nil, math.MaxInt64, math.MaxInt64, nil),
		"unterminated after": {0x01, 0xff},
	} {
		if _, _, _, err := decodeRecord(rec); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: decode %x = %v, want errCorrupt", name, rec, err)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	for prefix, want := range map[string]string{
		"/a":         "/b",
		"/a\xff":     "/b",
		"/\xff\xff":  "0",
		"\xff\xff":   "",
		"/registry/": "/registry0",
	} {
		if got := string(prefixEnd([]byte(prefix))); got != want {
			t.Errorf("prefixEnd(%q) = %q, want %q", prefix, got, want)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRecord(nil, 1, 1, []byte("v")))
	f.Add(appendRecord(nil, 300, 70000, []byte(`{"kind":"Lease"}`)))
	f.Add([]byte{0x80, 0x80})
	f.Fuzz(func(t *testing.T, rec []byte) {
		c, m, v, err := decodeRecord(rec)
		if err != nil {
			return
		}
		if c <= 0 || m < c {
			t.Fatalf("decoded revisions %d, %d from %x", c, m, rec)
		}
		// A record that decodes is canonical, or re-encodes to one that
		// decodes to the same thing.
		c2, m2, v2, err := decodeRecord(appendRecord(nil, c, m, v))
		if err != nil || c2 != c || m2 != m || !bytes.Equal(v2, v) {
			t.Fatalf("re-encoding %d, %d, %q does not round-trip: %v", c, m, v, err)
		}
	})
}

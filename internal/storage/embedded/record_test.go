package embedded

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  record
	}{
		{"small", record{createRev: 1, modRev: 1, value: []byte("v")}},
		{"empty value", record{createRev: 5, modRev: 9}},
		{"large revisions", record{createRev: 1 << 40, modRev: 1<<40 + 3, value: []byte{0, 1, 2}}},
		{"varint boundary", record{createRev: 127, modRev: 128, value: []byte("x")}},
		{"expiring", record{createRev: 3, modRev: 4, expires: 1795000000123, value: []byte("v")}},
		{"expiring, value starting with 0", record{createRev: 1, modRev: 1, expires: 1, value: []byte{0, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := appendRecord(nil, tc.rec)
			if len(enc) != recordLen(tc.rec.createRev, tc.rec.modRev, tc.rec.expires, len(tc.rec.value)) {
				t.Errorf("encoded %d bytes, recordLen says %d", len(enc), recordLen(tc.rec.createRev, tc.rec.modRev, tc.rec.expires, len(tc.rec.value)))
			}
			got, err := decodeRecord(enc)
			if err != nil || got.createRev != tc.rec.createRev || got.modRev != tc.rec.modRev || got.expires != tc.rec.expires || !bytes.Equal(got.value, tc.rec.value) {
				t.Errorf("decode = %+v, %v; want %+v", got, err, tc.rec)
			}
		})
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	for name, rec := range map[string][]byte{
		"empty":              nil,
		"zero create":        appendRecord(nil, record{createRev: 0, modRev: 1}),
		"mod below create":   appendRecord(nil, record{createRev: 5, modRev: 4}),
		"truncated varint":   {0x80},
		"missing mod":        {0x01},
		"overlong create":    appendRecord(nil, record{createRev: math.MaxInt64, modRev: math.MaxInt64}),
		"unterminated after": {0x01, 0xff},
		"zero expiry":        {0x00, 0x00, 0x01, 0x01},
		"expiry alone":       {0x00, 0x05},
		"truncated expiry":   {0x00, 0x80},
	} {
		if _, err := decodeRecord(rec); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: decode %x = %v, want errCorrupt", name, rec, err)
		}
	}
}

func TestExpiryKeyOrder(t *testing.T) {
	a, b := expiryKey(255, "/registry/events/ns/z"), expiryKey(256, "/registry/events/ns/a")
	if bytes.Compare(a, b) >= 0 {
		t.Errorf("index keys out of time order: %q >= %q", a, b)
	}
	expires, key, err := parseExpiryKey(b)
	if err != nil || expires != 256 || key != "/registry/events/ns/a" {
		t.Errorf("parseExpiryKey = %d, %q, %v", expires, key, err)
	}
	if _, _, err := parseExpiryKey(expiryKey(1, "")); !errors.Is(err, errCorrupt) {
		t.Errorf("an index key without a storage key: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRecord(nil, record{createRev: 1, modRev: 1, value: []byte("v")}))
	f.Add(appendRecord(nil, record{createRev: 300, modRev: 70000, value: []byte(`{"kind":"Lease"}`)}))
	f.Add(appendRecord(nil, record{createRev: 2, modRev: 3, expires: 1795000000000, value: []byte("k8s\x00")}))
	f.Add([]byte{0x80, 0x80})
	f.Fuzz(func(t *testing.T, enc []byte) {
		rec, err := decodeRecord(enc)
		if err != nil {
			return
		}
		if rec.createRev <= 0 || rec.modRev < rec.createRev || rec.expires < 0 {
			t.Fatalf("decoded %+v from %x", rec, enc)
		}
		// A record that decodes is canonical, or re-encodes to one that
		// decodes to the same thing.
		again, err := decodeRecord(appendRecord(nil, rec))
		if err != nil || again.createRev != rec.createRev || again.modRev != rec.modRev || again.expires != rec.expires || !bytes.Equal(again.value, rec.value) {
			t.Fatalf("re-encoding %+v does not round-trip: %+v, %v", rec, again, err)
		}
	})
}

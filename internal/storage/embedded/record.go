package embedded

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// On-disk layout. Every storage key is stored under itself; storage keys
// must begin with '/', so the bookkeeping keys below, which begin with 0x00,
// can never collide with them and sort before all of them.
var (
	// revisionKey holds the store revision as a uvarint. Every committed
	// batch rewrites it, so the revision survives restarts even when the
	// keys that used the last revisions have since been deleted.
	revisionKey = []byte("\x00leasehold/revision")
	// formatKey holds formatVersion; Open refuses other values.
	formatKey = []byte("\x00leasehold/format")
	// expiryPrefix starts the expiry index: one key per key that expires,
	// expiryPrefix + 8 bytes of its expiry (Unix milliseconds, big-endian,
	// so that the index is in time order) + the storage key, with an empty
	// value. See store_expire.go.
	expiryPrefix = []byte("\x00leasehold/expiry/")
)

// formatVersion is the version of the on-disk layout described here.
// Version 1 had no expiring records and no expiry index; Open upgrades it,
// since its records are version 2 records.
const (
	formatVersion   = "2"
	formatVersionV1 = "1"
)

// dataStart is the first possible data key: storage keys begin with '/'.
const dataStart = "/"

// errCorrupt marks a record or revision that does not decode.
var errCorrupt = errors.New("embedded: corrupt record")

// record is a data record: the revisions of a key's value, its expiry,
// and the value.
type record struct {
	createRev, modRev int64
	// expires is when the key expires, in Unix milliseconds; 0: never.
	expires int64
	value   []byte
}

// appendRecord encodes a data record: for a record that expires, a 0x00
// byte and the uvarint expiry (a record that does not expire starts with
// its create revision, never 0, whose uvarint never starts with 0x00);
// then uvarint CreateRevision, uvarint ModRevision, and the value bytes.
func appendRecord(dst []byte, r record) []byte {
	if r.expires > 0 {
		dst = append(dst, 0)
		dst = binary.AppendUvarint(dst, uint64(r.expires))
	}
	dst = binary.AppendUvarint(dst, uint64(r.createRev))
	dst = binary.AppendUvarint(dst, uint64(r.modRev))
	return append(dst, r.value...)
}

// recordLen is the length of the encoding of a record with these
// revisions and expiry and a value of valueLen bytes.
func recordLen(createRev, modRev, expires int64, valueLen int) int {
	n := uvarintLen(createRev) + uvarintLen(modRev) + valueLen
	if expires > 0 {
		n += 1 + uvarintLen(expires)
	}
	return n
}

// decodeRecord splits a data record. The returned value aliases rec.
func decodeRecord(rec []byte) (record, error) {
	var r record
	if len(rec) > 0 && rec[0] == 0 {
		e, n := binary.Uvarint(rec[1:])
		if n <= 0 || e == 0 || e > 1<<62 {
			return record{}, fmt.Errorf("%w: bad expiry", errCorrupt)
		}
		r.expires = int64(e)
		rec = rec[1+n:]
	}
	c, n := binary.Uvarint(rec)
	if n <= 0 || c == 0 || c > 1<<62 {
		return record{}, fmt.Errorf("%w: bad create revision", errCorrupt)
	}
	rec = rec[n:]
	m, n := binary.Uvarint(rec)
	if n <= 0 || m < c || m > 1<<62 {
		return record{}, fmt.Errorf("%w: bad modification revision", errCorrupt)
	}
	r.createRev, r.modRev, r.value = int64(c), int64(m), rec[n:]
	return r, nil
}

// expiryKey is the index key of key expiring at expires.
func expiryKey(expires int64, key string) []byte {
	b := make([]byte, 0, len(expiryPrefix)+8+len(key))
	b = append(b, expiryPrefix...)
	b = binary.BigEndian.AppendUint64(b, uint64(expires))
	return append(b, key...)
}

// parseExpiryKey splits an index key.
func parseExpiryKey(k []byte) (expires int64, key string, err error) {
	if !bytes.HasPrefix(k, expiryPrefix) || len(k) < len(expiryPrefix)+8+len(dataStart) {
		return 0, "", fmt.Errorf("%w: bad expiry index key %q", errCorrupt, k)
	}
	k = k[len(expiryPrefix):]
	return int64(binary.BigEndian.Uint64(k[:8])), string(k[8:]), nil
}

func encodeRevision(rev int64) []byte {
	return binary.AppendUvarint(nil, uint64(rev))
}

func decodeRevision(b []byte) (int64, error) {
	v, n := binary.Uvarint(b)
	if n != len(b) || v > 1<<62 {
		return 0, fmt.Errorf("%w: bad store revision %x", errCorrupt, b)
	}
	return int64(v), nil
}

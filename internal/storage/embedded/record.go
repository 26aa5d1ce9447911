package embedded

import (
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
)

// formatVersion is the version of the on-disk layout described here.
const formatVersion = "1"

// dataStart is the first possible data key: storage keys begin with '/'.
const dataStart = "/"

// errCorrupt marks a record or revision that does not decode.
var errCorrupt = errors.New("embedded: corrupt record")

// appendRecord encodes a data record: uvarint CreateRevision, uvarint
// ModRevision, then the value bytes.
func appendRecord(dst []byte, createRev, modRev int64, value []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(createRev))
	dst = binary.AppendUvarint(dst, uint64(modRev))
	return append(dst, value...)
}

// decodeRecord splits a data record. The returned value aliases rec.
func decodeRecord(rec []byte) (createRev, modRev int64, value []byte, err error) {
	c, n := binary.Uvarint(rec)
	if n <= 0 || c == 0 || c > 1<<62 {
		return 0, 0, nil, fmt.Errorf("%w: bad create revision", errCorrupt)
	}
	rec = rec[n:]
	m, n := binary.Uvarint(rec)
	if n <= 0 || m < c || m > 1<<62 {
		return 0, 0, nil, fmt.Errorf("%w: bad modification revision", errCorrupt)
	}
	return int64(c), int64(m), rec[n:], nil
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

// prefixEnd returns the smallest key above every key that starts with
// prefix, or nil when there is none (prefix is empty or all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

package embedded

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
)

// A snapshot file is a logical copy of every pebble key of a store at one
// revision, the bookkeeping keys (format, revision, expiry index)
// included, so that a restored store is the saved one key for key. It is
// a dump rather than pebble's own files (a checkpoint) because a dump is
// one stream (it goes through HTTP as it is read), is already compact, is
// read by any later pebble whatever its on-disk format, and carries one
// checksum over everything:
//
//	magic "leasehold-snapshot\n"
//	uvarint file version (snapshotVersion)
//	uvarint store revision
//	records: 0x01, uvarint key length, key, uvarint value length, value
//	end:     0x00, uvarint number of records
//	SHA-256 of every byte above (32 bytes), then nothing
//
// Keys come in pebble's order.
const (
	snapshotMagic   = "leasehold-snapshot\n"
	snapshotVersion = 1
	recordTag       = 1
	endTag          = 0
)

// maxSnapshotKey and maxSnapshotValue bound what a length in a snapshot
// may claim before it is allocated: a corrupt length must not exhaust
// memory. Values are at most MaxValueSize plus a record header; this
// leaves room for a store opened with a larger MaxValueSize.
const (
	maxSnapshotKey   = 64 << 10
	maxSnapshotValue = 64 << 20
)

// ErrBadSnapshot marks a snapshot file that is truncated, corrupt, or not
// a snapshot this build reads.
var ErrBadSnapshot = errors.New("not a valid leasehold snapshot")

// SnapshotInfo describes a snapshot.
type SnapshotInfo struct {
	// Revision is the store revision the snapshot was taken at: every
	// write acknowledged at or below it is in it, and nothing above it.
	Revision int64
	// Keys is the number of pebble keys (storage keys and bookkeeping).
	Keys int64
	// Bytes is the size of the snapshot file.
	Bytes int64
	// SHA256 is the checksum at the end of the file.
	SHA256 [sha256.Size]byte
}

// snapshotWriter writes the snapshot format, hashing as it goes.
type snapshotWriter struct {
	out  io.Writer
	w    *bufio.Writer // to out and sum
	sum  hash.Hash
	n    int64
	keys int64
	buf  []byte
}

func newSnapshotWriter(w io.Writer, rev int64) (*snapshotWriter, error) {
	sw := &snapshotWriter{out: w, sum: sha256.New()}
	sw.w = bufio.NewWriterSize(io.MultiWriter(w, sw.sum), 256<<10)
	sw.buf = append(sw.buf, snapshotMagic...)
	sw.buf = binary.AppendUvarint(sw.buf, snapshotVersion)
	sw.buf = binary.AppendUvarint(sw.buf, uint64(rev))
	return sw, sw.flushBuf()
}

func (sw *snapshotWriter) flushBuf() error {
	n, err := sw.w.Write(sw.buf)
	sw.n += int64(n)
	sw.buf = sw.buf[:0]
	return err
}

func (sw *snapshotWriter) record(key, value []byte) error {
	sw.buf = append(sw.buf, recordTag)
	sw.buf = binary.AppendUvarint(sw.buf, uint64(len(key)))
	sw.buf = append(sw.buf, key...)
	sw.buf = binary.AppendUvarint(sw.buf, uint64(len(value)))
	if err := sw.flushBuf(); err != nil {
		return err
	}
	n, err := sw.w.Write(value)
	sw.n += int64(n)
	sw.keys++
	return err
}

// finish writes the end marker and the checksum.
func (sw *snapshotWriter) finish() (SnapshotInfo, error) {
	sw.buf = append(sw.buf, endTag)
	sw.buf = binary.AppendUvarint(sw.buf, uint64(sw.keys))
	if err := sw.flushBuf(); err != nil {
		return SnapshotInfo{}, err
	}
	// Everything so far must reach the hash before it is summed.
	if err := sw.w.Flush(); err != nil {
		return SnapshotInfo{}, err
	}
	info := SnapshotInfo{Keys: sw.keys}
	copy(info.SHA256[:], sw.sum.Sum(nil))
	// The checksum itself is not hashed.
	if _, err := sw.out.Write(info.SHA256[:]); err != nil {
		return SnapshotInfo{}, err
	}
	info.Bytes = sw.n + sha256.Size
	return info, nil
}

// snapshotReader reads the snapshot format, hashing what it reads.
type snapshotReader struct {
	r   *bufio.Reader
	sum hash.Hash
	n   int64
	rev int64
}

// newSnapshotReader reads the header of the snapshot in r.
func newSnapshotReader(r io.Reader) (*snapshotReader, error) {
	sr := &snapshotReader{r: bufio.NewReaderSize(r, 256<<10), sum: sha256.New()}
	magic := make([]byte, len(snapshotMagic))
	if err := sr.full(magic); err != nil {
		return nil, err
	}
	if string(magic) != snapshotMagic {
		return nil, fmt.Errorf("%w: the file does not start as one", ErrBadSnapshot)
	}
	v, err := sr.uvarint()
	if err != nil {
		return nil, err
	}
	if v != snapshotVersion {
		return nil, fmt.Errorf("%w: file version %d, this build reads version %d", ErrBadSnapshot, v, snapshotVersion)
	}
	rev, err := sr.uvarint()
	if err != nil {
		return nil, err
	}
	if rev > 1<<62 {
		return nil, fmt.Errorf("%w: revision %d out of range", ErrBadSnapshot, rev)
	}
	sr.rev = int64(rev)
	return sr, nil
}

// truncated is the error of a file that ends early.
func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the file is truncated (a save that did not finish?)", ErrBadSnapshot)
	}
	return err
}

func (sr *snapshotReader) full(b []byte) error {
	n, err := io.ReadFull(sr.r, b)
	sr.sum.Write(b[:n])
	sr.n += int64(n)
	return truncated(err)
}

func (sr *snapshotReader) byte() (byte, error) {
	c, err := sr.r.ReadByte()
	if err != nil {
		return 0, truncated(err)
	}
	sr.sum.Write([]byte{c})
	sr.n++
	return c, nil
}

func (sr *snapshotReader) uvarint() (uint64, error) {
	var b [binary.MaxVarintLen64]byte
	for i := range b {
		c, err := sr.byte()
		if err != nil {
			return 0, err
		}
		b[i] = c
		if c < 0x80 {
			v, n := binary.Uvarint(b[:i+1])
			if n <= 0 {
				break
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: a malformed length", ErrBadSnapshot)
}

// next returns the next record's key and value (valid until the next
// call), or ok false at the end marker.
func (sr *snapshotReader) next(key, value []byte) (k, v []byte, ok bool, err error) {
	tag, err := sr.byte()
	if err != nil {
		return nil, nil, false, err
	}
	switch tag {
	case endTag:
		return nil, nil, false, nil
	case recordTag:
	default:
		return nil, nil, false, fmt.Errorf("%w: unknown record tag %#x at byte %d", ErrBadSnapshot, tag, sr.n-1)
	}
	kl, err := sr.uvarint()
	if err != nil {
		return nil, nil, false, err
	}
	if kl == 0 || kl > maxSnapshotKey {
		return nil, nil, false, fmt.Errorf("%w: a key of %d bytes at byte %d", ErrBadSnapshot, kl, sr.n)
	}
	k = slices.Grow(key[:0], int(kl))[:kl]
	if err := sr.full(k); err != nil {
		return nil, nil, false, err
	}
	vl, err := sr.uvarint()
	if err != nil {
		return nil, nil, false, err
	}
	if vl > maxSnapshotValue {
		return nil, nil, false, fmt.Errorf("%w: a value of %d bytes at byte %d", ErrBadSnapshot, vl, sr.n)
	}
	v = slices.Grow(value[:0], int(vl))[:vl]
	if err := sr.full(v); err != nil {
		return nil, nil, false, err
	}
	return k, v, true, nil
}

// finish reads what follows the end marker: the record count and the
// checksum, which must match, and then the end of the file.
func (sr *snapshotReader) finish(keys int64) (SnapshotInfo, error) {
	n, err := sr.uvarint()
	if err != nil {
		return SnapshotInfo{}, err
	}
	if n != uint64(keys) {
		return SnapshotInfo{}, fmt.Errorf("%w: it says %d records, it holds %d", ErrBadSnapshot, n, keys)
	}
	info := SnapshotInfo{Revision: sr.rev, Keys: keys}
	want := sr.sum.Sum(nil)
	if _, err := io.ReadFull(sr.r, info.SHA256[:]); err != nil {
		return SnapshotInfo{}, truncated(err)
	}
	if !bytes.Equal(want, info.SHA256[:]) {
		return SnapshotInfo{}, fmt.Errorf("%w: checksum mismatch (the file is corrupt)", ErrBadSnapshot)
	}
	if _, err := sr.r.ReadByte(); !errors.Is(err, io.EOF) {
		if err != nil {
			return SnapshotInfo{}, err
		}
		return SnapshotInfo{}, fmt.Errorf("%w: bytes after its checksum", ErrBadSnapshot)
	}
	info.Bytes = sr.n + sha256.Size
	return info, nil
}

// readSnapshot reads the snapshot in r to its end, checking it, and
// hands each record to fn with the snapshot's revision (key and value are
// valid during the call only).
// The checksum is known only at the end: fn sees records of a file that
// may yet turn out corrupt.
func readSnapshot(r io.Reader, fn func(rev int64, key, value []byte) error) (SnapshotInfo, error) {
	sr, err := newSnapshotReader(r)
	if err != nil {
		return SnapshotInfo{}, err
	}
	var key, value []byte
	var keys int64
	for {
		k, v, ok, err := sr.next(key, value)
		if err != nil {
			return SnapshotInfo{}, err
		}
		if !ok {
			break
		}
		key, value = k, v
		keys++
		if fn != nil {
			if err := fn(sr.rev, k, v); err != nil {
				return SnapshotInfo{}, err
			}
		}
	}
	return sr.finish(keys)
}

// CheckSnapshot reads the snapshot in r to its end and returns what it
// holds, or an error wrapping ErrBadSnapshot if it is truncated, corrupt
// or of another version. Reading a save through it (io.TeeReader) checks
// the bytes as they are written.
func CheckSnapshot(r io.Reader) (SnapshotInfo, error) {
	return readSnapshot(r, nil)
}

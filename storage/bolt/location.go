package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// Since layout 8 the values written for every uploaded row, the record of
// where an object is in evidence storage (bObjects) and an outbox entry
// (bOutbox), are written in a binary form of their own instead of JSON
// (compressed against the file's dictionary, for records): a mark byte
// (binaryMark, which neither JSON nor a zstd frame starts with), a byte of
// flags, then the fields: strings as their length (uvarint) and bytes,
// numbers as uvarints, times as Unix seconds (varint) and nanoseconds
// (uvarint). Values of earlier layouts still read. A money-moved row
// writes both; as JSON they cost more than the rest of the upload's
// bookkeeping (docs/design/026).
const binaryMark = 0x01

// Flags of an object record, in the order encodeLocation passes them to
// flagBits.
const (
	flagUploaded = 1 << iota
	flagLegalHold
	flagRetain
	locationFlags = flagUploaded | flagLegalHold | flagRetain
)

// flagBits is a byte of flags: bit i is set when set[i] is true.
func flagBits(set ...bool) byte {
	var b byte
	for i, on := range set {
		if on {
			b |= 1 << i
		}
	}
	return b
}

// appendStrings appends each of ss as its length and bytes.
func appendStrings(v []byte, ss ...string) []byte {
	for _, s := range ss {
		v = append(binary.AppendUvarint(v, uint64(len(s))), s...)
	}
	return v
}

// appendTime appends t, which is not zero, as seconds and nanoseconds.
func appendTime(v []byte, t time.Time) []byte {
	return binary.AppendUvarint(binary.AppendVarint(v, t.Unix()), uint64(t.Nanosecond()))
}

// reader reads a binary value; the first field it cannot read makes it
// bad, and every later read returns zero.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint(limit uint64) uint64 {
	n, m := binary.Uvarint(r.b)
	if r.bad || m <= 0 || n > limit {
		r.bad = true
		return 0
	}
	r.b = r.b[m:]
	return n
}

func (r *reader) str() string {
	n := r.uvarint(uint64(math.MaxInt))
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) time() time.Time {
	sec, m := binary.Varint(r.b)
	if r.bad || m <= 0 {
		r.bad = true
		return time.Time{}
	}
	r.b = r.b[m:]
	nsec := r.uvarint(999_999_999)
	if r.bad {
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

// end reports whether every field read and nothing is left.
func (r *reader) end() bool { return !r.bad && len(r.b) == 0 }

// header checks v's mark and flags (only those of known) and returns a
// reader of the fields after them.
func header(v []byte, known byte) (byte, *reader, bool) {
	if len(v) < 2 || v[0] != binaryMark || v[1]&^known != 0 {
		return 0, nil, false
	}
	return v[1], &reader{b: v[2:]}, true
}

// encodeLocation is loc's record: flags, store, bucket, key, version id,
// retain-until (when flagRetain), offset, length.
func encodeLocation(loc ledger.Location) []byte {
	flags := flagBits(loc.Uploaded, loc.LegalHold, !loc.RetainUntil.IsZero())
	v := make([]byte, 0, 2+4*binary.MaxVarintLen16+len(loc.Store)+len(loc.Bucket)+len(loc.Key)+len(loc.VersionID)+4*binary.MaxVarintLen64)
	v = appendStrings(append(v, binaryMark, flags), loc.Store, loc.Bucket, loc.Key, loc.VersionID)
	if flags&flagRetain != 0 {
		v = appendTime(v, loc.RetainUntil)
	}
	v = binary.AppendUvarint(v, uint64(loc.Offset))
	return binary.AppendUvarint(v, uint64(loc.Length))
}

var errLocation = errors.New("not an object record")

// parseLocation reads a record encodeLocation wrote.
func parseLocation(v []byte) (ledger.Location, error) {
	var loc ledger.Location
	flags, r, ok := header(v, locationFlags)
	if !ok {
		return loc, errLocation
	}
	loc.Store, loc.Bucket, loc.Key, loc.VersionID = r.str(), r.str(), r.str(), r.str()
	if flags&flagRetain != 0 {
		loc.RetainUntil = r.time()
	}
	loc.Offset, loc.Length = uint32(r.uvarint(math.MaxUint32)), uint32(r.uvarint(math.MaxUint32))
	if !r.end() {
		return ledger.Location{}, errLocation
	}
	loc.Uploaded, loc.LegalHold = flags&flagUploaded != 0, flags&flagLegalHold != 0
	return loc, nil
}

// decodeLocation reads object record v of key, in either form.
func decodeLocation(c *Codec, key string, v []byte) (ledger.Location, error) {
	if len(v) > 0 && v[0] == binaryMark {
		loc, err := parseLocation(v)
		if err != nil {
			return loc, fmt.Errorf("object record %s: %w", key, err)
		}
		return loc, nil
	}
	var loc ledger.Location
	raw, err := c.Decode(v)
	if err == nil {
		err = json.Unmarshal(raw, &loc)
	}
	if err != nil {
		return loc, fmt.Errorf("object record %s: %w", key, err)
	}
	return loc, nil
}

// recordJSON is object record v of key as JSON, the form of the export
// and of layouts before 8.
func recordJSON(c *Codec, key string, v []byte) ([]byte, error) {
	loc, err := decodeLocation(c, key, v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(loc)
}

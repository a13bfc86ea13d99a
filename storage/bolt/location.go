package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// An object record (bObjects) says where an object of evidence storage
// is. Since layout 8 it is written in a binary form of its own:
//
//	locationMark, flags,
//	store, bucket, key, version id (each its length, uvarint, and bytes),
//	retain-until (when flagRetain: seconds, varint, and nanoseconds, uvarint),
//	offset, length (uvarint)
//
// Records of earlier layouts are JSON, compressed against the file's
// dictionary or plain; they still read. A money-moved row writes one
// record when its evidence is uploaded, and compressing ~150 bytes of
// JSON against the dictionary cost more than the rest of the upload's
// bookkeeping (the encoder restores its table for every value).
const locationMark = 0x01

const (
	flagUploaded = 1 << iota
	flagLegalHold
	flagRetain
	flagsKnown = flagUploaded | flagLegalHold | flagRetain
)

// encodeLocation is loc's record.
func encodeLocation(loc ledger.Location) []byte {
	var flags byte
	if loc.Uploaded {
		flags |= flagUploaded
	}
	if loc.LegalHold {
		flags |= flagLegalHold
	}
	if !loc.RetainUntil.IsZero() {
		flags |= flagRetain
	}
	v := make([]byte, 0, 2+4*binary.MaxVarintLen16+len(loc.Store)+len(loc.Bucket)+len(loc.Key)+len(loc.VersionID)+3*binary.MaxVarintLen64)
	v = append(v, locationMark, flags)
	for _, s := range [...]string{loc.Store, loc.Bucket, loc.Key, loc.VersionID} {
		v = binary.AppendUvarint(v, uint64(len(s)))
		v = append(v, s...)
	}
	if flags&flagRetain != 0 {
		v = binary.AppendVarint(v, loc.RetainUntil.Unix())
		v = binary.AppendUvarint(v, uint64(loc.RetainUntil.Nanosecond()))
	}
	v = binary.AppendUvarint(v, uint64(loc.Offset))
	return binary.AppendUvarint(v, uint64(loc.Length))
}

var errLocation = errors.New("not an object record")

// parseLocation reads a record encodeLocation wrote.
func parseLocation(v []byte) (ledger.Location, error) {
	var loc ledger.Location
	if len(v) < 2 || v[0] != locationMark || v[1]&^flagsKnown != 0 {
		return loc, errLocation
	}
	flags, rest := v[1], v[2:]
	uvarint := func(limit uint64) (uint64, bool) {
		n, m := binary.Uvarint(rest)
		if m <= 0 || n > limit {
			return 0, false
		}
		rest = rest[m:]
		return n, true
	}
	for _, s := range [...]*string{&loc.Store, &loc.Bucket, &loc.Key, &loc.VersionID} {
		n, m := binary.Uvarint(rest)
		if m <= 0 || n > uint64(len(rest)-m) {
			return loc, errLocation
		}
		*s, rest = string(rest[m:m+int(n)]), rest[m+int(n):]
	}
	if flags&flagRetain != 0 {
		sec, m := binary.Varint(rest)
		if m <= 0 {
			return loc, errLocation
		}
		rest = rest[m:]
		nsec, ok := uvarint(999_999_999)
		if !ok {
			return loc, errLocation
		}
		loc.RetainUntil = time.Unix(sec, int64(nsec)).UTC()
	}
	off, ok := uvarint(1<<32 - 1)
	if !ok {
		return loc, errLocation
	}
	length, ok := uvarint(1<<32 - 1)
	if !ok || len(rest) != 0 {
		return loc, errLocation
	}
	loc.Offset, loc.Length = uint32(off), uint32(length)
	loc.Uploaded, loc.LegalHold = flags&flagUploaded != 0, flags&flagLegalHold != 0
	return loc, nil
}

// decodeLocation reads object record v of key, in either form.
func decodeLocation(c *Codec, key string, v []byte) (ledger.Location, error) {
	if len(v) > 0 && v[0] == locationMark {
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

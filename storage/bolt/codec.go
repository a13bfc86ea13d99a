package bolt

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/klauspost/compress/zstd"
	bolt "go.etcd.io/bbolt"
)

// Values and keys on disk (layout 2, docs/design/017-row-store-layout.md).
//
// Rows, log leaves and object locations are stored as zstd frames against
// a fixed dictionary of the text they repeat: field names, check names and
// the verifier's phrases, leaf lines. A 2 KB row takes about 250 bytes.
// A value without the zstd magic is one written before compression and is
// read as it is.
//
// Ids (row ids, request JWT hashes, JWKS snapshot ids: lowercase hex
// SHA-256) are keys of 32 bytes; any other text is kept as text behind a
// marker byte, so both kinds of key can share a bucket.

// dictV1 is the dictionary frames name with id 1. It is part of the file
// format: it never changes. Another dictionary would get another id, and
// the decoder would keep both.
//
//go:embed dict/v1.txt
var dictV1 []byte

const dictV1ID = 1

// maxValue bounds a decoded value: far above any row, leaf or location.
const maxValue = 16 << 20

// Codec compresses a file's values against its newest dictionary and
// decompresses them against any of its dictionaries. It is safe for
// concurrent use.
type Codec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

// newCodec returns the codec of dictionaries dicts (by id).
func newCodec(dicts map[uint32][]byte) (*Codec, error) {
	newest := uint32(0)
	dopts := []zstd.DOption{zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxValue)}
	for id, d := range dicts {
		dopts = append(dopts, zstd.WithDecoderDictRaw(id, d))
		newest = max(newest, id)
	}
	dec, err := zstd.NewReader(nil, dopts...)
	if err != nil {
		return nil, fmt.Errorf("row store: zstd decoder: %w", err)
	}
	// The fastest level: with a dictionary close to the values it is as
	// small as the default level's, and cheaper to encode.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
		zstd.WithSingleSegment(true), zstd.WithEncoderConcurrency(1), zstd.WithEncoderDictRaw(newest, dicts[newest]))
	if err != nil {
		return nil, fmt.Errorf("row store: zstd encoder: %w", err)
	}
	return &Codec{enc: enc, dec: dec}, nil
}

// Encode returns v compressed.
func (c *Codec) Encode(v []byte) []byte {
	return c.enc.EncodeAll(v, make([]byte, 0, len(v)/4+16))
}

// Decode returns the bytes v was encoded from: v itself when it is not a
// zstd frame (written before compression).
func (c *Codec) Decode(v []byte) ([]byte, error) {
	if !bytes.HasPrefix(v, zstdMagic) {
		return v, nil
	}
	return c.dec.DecodeAll(v, make([]byte, 0, 4*len(v)+256))
}

// A file's own dictionary is made from its newest row and leaf and an
// object record of a row's evidence once it holds trainAfter rows and
// one such record, or trainAlone rows (Store.maybeTrain): values written
// after that compress against text of the same deployment (its brand and
// agent URLs, key ids, snapshot ids): a row takes about a third of the
// bytes it takes against the built-in dictionary, and encodes faster. It
// is kept in the meta bucket under kDict and its id, and never changes.
const (
	trainAfter = 256
	trainAlone = 4096
	fileDictID = 2
	kDict      = "dict "
)

func dictKey(id uint32) []byte { return binary.BigEndian.AppendUint32([]byte(kDict), id) }

// fileDicts returns the dictionaries values of the file may use.
func fileDicts(btx *bolt.Tx) map[uint32][]byte {
	dicts := map[uint32][]byte{dictV1ID: dictV1}
	meta := btx.Bucket(bMeta)
	if meta == nil {
		return dicts
	}
	c := meta.Cursor()
	for k, v := c.Seek([]byte(kDict)); k != nil && bytes.HasPrefix(k, []byte(kDict)); k, v = c.Next() {
		if len(k) == len(kDict)+4 {
			dicts[binary.BigEndian.Uint32(k[len(kDict):])] = append([]byte(nil), v...)
		}
	}
	return dicts
}

// FileCodec returns the codec of the file btx reads, for tools that read
// or edit the file directly.
func FileCodec(btx *bolt.Tx) (*Codec, error) { return newCodec(fileDicts(btx)) }

// sampleDictionary is the content of a file's own dictionary: the
// built-in one, then the newest object record, leaf and row (the most
// common last: zstd finds near matches more cheaply). One of each: the
// encoder prepares its dictionary again for every value, so each sample
// more costs every write, and a second row makes values no smaller.
func (t *tx) sampleDictionary() ([]byte, error) {
	out := append([]byte(nil), dictV1...)
	var samples [3][]byte
	samples[0] = firstEvidenceRecord(t.b(bObjects))
	_, samples[1] = last(t.b(bLogLeaves).Cursor())
	_, samples[2] = last(t.b(bRowData).Cursor())
	for i, v := range samples {
		if v == nil {
			continue
		}
		var raw []byte
		var err error
		if i == 0 {
			// The record as JSON, whichever form the file keeps it in:
			// its field names are the row's too.
			raw, err = recordJSON(t.c, "of the dictionary's sample", v)
		} else {
			raw, err = t.c.Decode(v)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, raw...)
	}
	return out, nil
}

// Text keys: a marker byte, then the text. textMark32 marks text that
// would otherwise make a key of exactly 32 bytes, and is followed by a
// padding byte at the end.
const (
	textMark   = 0xff
	textMark32 = 0xfe
)

// hexVal is the value of each lowercase hex digit, and badHex for every
// other byte. Ids are random hex, so a per-byte table keeps the checks
// free of branches the processor cannot predict.
var hexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = badHex
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()

// badHex is hexVal's value for a byte that is not a lowercase hex digit:
// its high bits are set, a digit's never are.
const badHex = 0xff

// isHexID reports whether s is a lowercase hex SHA-256.
func isHexID(s string) bool {
	if len(s) != 64 {
		return false
	}
	var bad byte
	for i := range len(s) {
		bad |= hexVal[s[i]]
	}
	return bad&0xf0 == 0
}

// hexIDKey returns the 32 bytes s encodes when s is a lowercase hex
// SHA-256, and nil otherwise.
func hexIDKey(s string) []byte {
	if len(s) != 64 {
		return nil
	}
	var k [32]byte
	var bad byte
	for i := range k {
		hi, lo := hexVal[s[2*i]], hexVal[s[2*i+1]]
		bad |= hi | lo
		k[i] = hi<<4 | lo&0x0f
	}
	if bad&0xf0 != 0 {
		return nil
	}
	return k[:]
}

// idKey is the key of id: its 32 bytes when it is a lowercase hex
// SHA-256, else the marked text (never 32 bytes long).
func idKey(id string) []byte {
	if k := hexIDKey(id); k != nil {
		return k
	}
	if len(id)+1 == 32 {
		return append(append([]byte{textMark32}, id...), 0)
	}
	return append([]byte{textMark}, id...)
}

// idString is the id idKey made k from.
func idString(k []byte) string {
	switch {
	case len(k) == 32:
		return hex.EncodeToString(k)
	case len(k) == 33 && k[0] == textMark32:
		return string(k[1:32])
	case len(k) > 0 && k[0] == textMark:
		return string(k[1:])
	}
	return string(k) // not a key idKey makes
}

// IDKey is idKey, for tools that read or edit the file directly.
func IDKey(id string) []byte { return idKey(id) }

// seekKey is where a cursor over idKey keys starts for the ids that sort
// at or after key. Hex ids sort among themselves as their text does;
// text ids sort after every hex id.
func seekKey(key string) []byte {
	if key == "" {
		return nil
	}
	n := len(key)
	hexPart := n
	for i := range n {
		if hexVal[key[i]] == badHex {
			hexPart = i
			break
		}
	}
	switch {
	case hexPart == n && n <= 64:
		h := key
		if n%2 == 1 {
			h += "0"
		}
		k, _ := hex.DecodeString(h)
		return k
	case hexPart >= 64:
		// A hex id followed by more: just after that id.
		k, _ := hex.DecodeString(key[:64])
		return append(k, 0)
	}
	// Anything else: among the text ids.
	return append([]byte{textMark}, key...)
}

// IDString is idString, for tools that read the file directly.
func IDString(k []byte) string { return idString(k) }

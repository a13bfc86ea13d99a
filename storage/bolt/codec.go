package bolt

import (
	"bytes"
	_ "embed"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
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

var (
	valueEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(false),
			zstd.WithSingleSegment(true), zstd.WithEncoderConcurrency(1), zstd.WithEncoderDictRaw(dictV1ID, dictV1))
		if err != nil {
			panic(fmt.Sprintf("row store: zstd encoder: %v", err))
		}
		return e
	})
	valueDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxValue),
			zstd.WithDecoderDictRaw(dictV1ID, dictV1))
		if err != nil {
			panic(fmt.Sprintf("row store: zstd decoder: %v", err))
		}
		return d
	})
)

// maxValue bounds a decoded value: far above any row, leaf or location.
const maxValue = 16 << 20

// encodeValue returns v compressed.
func encodeValue(v []byte) []byte {
	return valueEncoder().EncodeAll(v, make([]byte, 0, len(v)/4+16))
}

// decodeValue returns the bytes v was encoded from: v itself when it is
// not a zstd frame (written before compression).
func decodeValue(v []byte) ([]byte, error) {
	if !bytes.HasPrefix(v, zstdMagic) {
		return v, nil
	}
	return valueDecoder().DecodeAll(v, make([]byte, 0, 4*len(v)+256))
}

// EncodeValue and DecodeValue are the value codec, for tools that read
// or edit the file directly.
func EncodeValue(v []byte) []byte { return encodeValue(v) }

// DecodeValue: see EncodeValue.
func DecodeValue(v []byte) ([]byte, error) { return decodeValue(v) }

// Text keys: a marker byte, then the text. textMark32 marks text that
// would otherwise make a key of exactly 32 bytes, and is followed by a
// padding byte at the end.
const (
	textMark   = 0xff
	textMark32 = 0xfe
)

// isHexID reports whether s is a lowercase hex SHA-256.
func isHexID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// idKey is the key of id: its 32 bytes when it is a lowercase hex
// SHA-256, else the marked text (never 32 bytes long).
func idKey(id string) []byte {
	if isHexID(id) {
		k, _ := hex.DecodeString(id)
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
		c := key[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
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

package bolt

import (
	"bytes"
	"fmt"

	"github.com/klauspost/compress/zstd"

	"github.com/pactledger/pactledger/ledger"
)

// A bundle stays in the file only until its write-once copy is recorded:
// a round or two of the uploader while evidence storage keeps up. It is
// stored as it is then, and zstd-compressed only once the outbox holds
// compressFromDepth objects, when evidence storage is down or behind and
// bundles pile up in the file (docs/design/027-bundles-compressed-when-they-stay.md).
// A bundle is JSON (it starts with '{'), a compressed one starts with the
// zstd frame magic, so either form reads whichever way it was written.

// compressFromDepth is the outbox depth from which a new bundle is stored
// compressed: sixteen rounds of the uploader's default batch behind.
const compressFromDepth = 8192

// zstdMagic starts every zstd frame (RFC 8878 §3.1.1).
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// maxBundleBytes bounds a decompressed bundle: a bundle is at most one
// request body (limits.maxBodyBytes, 1 MiB by default) re-encoded.
const maxBundleBytes = 16 << 20

var (
	// Both are safe for concurrent EncodeAll and DecodeAll calls. The
	// fastest level: a bundle (base64url tokens) compresses about 1.45x at
	// every level, and it is compressed on the write path.
	bundleEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	bundleDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxBundleBytes))
)

// compressBundle returns the stored form of a bundle.
func compressBundle(b []byte) []byte {
	return bundleEncoder.EncodeAll(b, make([]byte, 0, len(b)/2))
}

// decompressBundle returns the bundle of a stored value: decompressed, or
// the value itself when it was stored before compression. It is never nil:
// an empty value is a bundle of no bytes, not a missing one.
func decompressBundle(v []byte) ([]byte, error) {
	if !bytes.HasPrefix(v, zstdMagic) {
		return append(make([]byte, 0, len(v)), v...), nil
	}
	b, err := bundleDecoder.DecodeAll(v, nil)
	if err != nil {
		return nil, fmt.Errorf("decompress evidence bundle: %w", err)
	}
	return b, nil
}

// evidenceKey is where row rowID's bundle is kept: by the row's number
// (layout 4: bundles are appended, and dropped from the front as their
// segments are uploaded), or by the id for a row not stored.
func (t *tx) evidenceKey(rowID string) []byte {
	if seq := t.seqOf(rowID); seq != nil {
		return seq
	}
	return []byte(rowID)
}

func (t *tx) PutEvidence(rowID string, bundle []byte) error {
	return t.b(bEvidence).Put(t.evidenceKey(rowID), t.storedBundle(bundle))
}

// storedBundle is the form bundle is stored in: compressed when the
// outbox is deep, or when the bundle would read as compressed (it starts
// with zstd's magic, which no JSON does); as it is otherwise.
func (t *tx) storedBundle(bundle []byte) []byte {
	if t.outboxDepth() >= compressFromDepth || bytes.HasPrefix(bundle, zstdMagic) {
		return compressBundle(bundle)
	}
	return bundle
}

func (t *tx) Evidence(rowID string) ([]byte, error) {
	v := t.get(bEvidence, t.evidenceKey(rowID))
	if v == nil {
		return nil, ledger.ErrNotFound
	}
	b, err := decompressBundle(v)
	if err != nil {
		return nil, fmt.Errorf("evidence of %s: %w", rowID, err)
	}
	return b, nil
}

// The row store drops a bundle once its write-once copy is recorded.
var _ ledger.EvidenceDropper = (*tx)(nil)

func (t *tx) DropEvidence(rowID string) error {
	return t.b(bEvidence).Delete(t.evidenceKey(rowID))
}

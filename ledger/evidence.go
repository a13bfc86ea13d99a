package ledger

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// A row's evidence bundle is kept in the row store until its write-once
// copy is recorded (RecordUpload drops it there); from then on reads take
// the write-once copy, through a small cache of recent bundles. A bundle
// still in the row store (not uploaded yet, or put back by
// RestoreEvidence) is read from there.

// DefaultEvidenceCacheBytes is the default of Config.EvidenceCacheBytes.
const DefaultEvidenceCacheBytes = 8 << 20

// RangeReader is an ObjectStore that reads part of an object. With it the
// ledger reads one row's bundle out of its segment instead of the whole
// segment object.
type RangeReader interface {
	// GetRange returns length bytes of key from offset, or an error
	// wrapping ErrNotFound.
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
}

// VersionReader is an object store that keeps the versions of a key (S3
// with versioning): it reads the version a location records. Get and
// GetRange read the latest, and a holder of the bucket's credentials can
// write a newer version over a key whose recorded version is locked; the
// ledger reads what it recorded.
type VersionReader interface {
	GetVersion(ctx context.Context, key, version string) ([]byte, error)
	GetRangeVersion(ctx context.Context, key, version string, offset, length int64) ([]byte, error)
}

// LatestVersioner is an object store that keeps the versions of a key and
// tells which one a read of the key by its name alone answers with: what
// anyone who reads the bucket without the ledger's records sees.
type LatestVersioner interface {
	// LatestVersion returns the key's latest version, or an error
	// wrapping ErrNotFound when a read by name finds nothing (a delete
	// marker is its latest version, or it has none).
	LatestVersion(ctx context.Context, key string) (string, error)
}

// LegalHoldReader is an object store that says whether an object version
// is under legal hold: fsck compares the holds the ledger recorded with
// the store's (checkHolds).
type LegalHoldReader interface {
	// LegalHold reports whether the version at loc is under legal hold.
	LegalHold(ctx context.Context, loc Location) (bool, error)
}

// ErrFirstVersionUnknown: a key holds versions of different contents, so
// which the ledger put cannot be told (a store's times of versions are
// to the second, and some give a version the time it was kept aside).
// The ledger puts each of its objects once: a key holding a second
// version is itself a finding.
var ErrFirstVersionUnknown = errors.New("the first version cannot be told")

// FirstVersioner is an object store that keeps the versions of a key and
// tells which one was written first. The ledger puts each of its objects
// once, create-only, so the first version of a key is the ledger's; a
// later one was put by someone else holding the bucket's credentials.
type FirstVersioner interface {
	// FirstVersion returns the key's oldest version (delete markers
	// aside), or an error wrapping ErrNotFound when it has none, or
	// ErrFirstVersionUnknown when its versions hold different contents.
	FirstVersion(ctx context.Context, key string) (string, error)
}

// KeptLister is an object store that lists the keys it keeps under a
// prefix, hidden ones included: on S3 with versioning a plain DELETE of
// a locked object only puts a delete marker over it, so a read by name
// finds nothing while every version stays behind the marker, and a
// listing of the bucket's current objects leaves the key out. The ledger
// reads what is kept there, not only what reads by name.
type KeptLister interface {
	// ListKept calls fn with each key that starts with prefix and has
	// no "/" after it (the objects of one folder, not those of the
	// folders below), in no set order, with its newest version that is
	// not a delete marker; a key of delete markers alone is left out.
	// It stops at fn's first error and returns it.
	ListKept(ctx context.Context, prefix string, fn func(KeptKey) error) error
}

// KeptKey is a key a KeptLister found.
type KeptKey struct {
	Key string
	// Version is the key's newest version that is not a delete marker
	// (VersionReader reads it); "" in a store that keeps no versions,
	// where Get reads the key.
	Version string
	// Hidden reports that the key's latest version is a delete marker:
	// a read by name finds nothing, though Version is still kept.
	Hidden bool
}

// readRange reads loc's part of its segment in one ranged read, of the
// version loc records where the store keeps versions; false when loc is
// no part of a segment or the store reads no ranges.
func (l *Ledger) readRange(ctx context.Context, loc Location) ([]byte, bool, error) {
	if loc.Length == 0 {
		return nil, false, nil
	}
	var b []byte
	var err error
	if vr, ok := l.objects.(VersionReader); ok && loc.VersionID != "" {
		b, err = vr.GetRangeVersion(ctx, loc.Key, loc.VersionID, int64(loc.Offset), int64(loc.Length))
	} else if rr, ok := l.objects.(RangeReader); ok {
		b, err = rr.GetRange(ctx, loc.Key, int64(loc.Offset), int64(loc.Length))
	} else {
		return nil, false, nil
	}
	if err == nil && len(b) != int(loc.Length) {
		err = fmt.Errorf("segment %s holds %d bytes at %d, not %d", loc.Key, len(b), loc.Offset, loc.Length)
	}
	return b, true, err
}

// getObject returns the whole object at loc: the version it records where
// the store keeps versions, else the key's.
func (l *Ledger) getObject(ctx context.Context, loc Location) ([]byte, error) {
	if vr, ok := l.objects.(VersionReader); ok && loc.VersionID != "" {
		return vr.GetVersion(ctx, loc.Key, loc.VersionID)
	}
	return l.objects.Get(ctx, loc.Key)
}

// storedEvidence is what the row store holds of a row's evidence: the
// bundle, or, once it was dropped, where its write-once copy is.
type storedEvidence struct {
	bundle []byte
	loc    Location
}

// loadEvidence reads what the row store holds of row id's evidence. The
// error wraps ErrNotFound when it holds neither the bundle nor an
// uploaded write-once copy.
func loadEvidence(tx Tx, id string) (storedEvidence, error) {
	b, err := tx.Evidence(id)
	switch {
	case err == nil:
		return storedEvidence{bundle: b}, nil
	case !errors.Is(err, ErrNotFound):
		return storedEvidence{}, err
	}
	loc, err := tx.Object(EvidenceKey(id))
	if err != nil {
		return storedEvidence{}, fmt.Errorf("evidence of %s: %w", id, err)
	}
	if !loc.Uploaded {
		return storedEvidence{}, fmt.Errorf("evidence of %s: %w", id, ErrNotFound)
	}
	return storedEvidence{loc: loc}, nil
}

// EvidenceSource says where an evidence read took a row's bundle from.
type EvidenceSource string

const (
	// ReadFromRowStore: the row store's bundle (not uploaded yet, or put
	// back by RestoreEvidence).
	ReadFromRowStore EvidenceSource = "row store"
	// ReadFromWriteOnceCopy: the write-once copy, read again for this
	// answer.
	ReadFromWriteOnceCopy EvidenceSource = "write-once copy"
	// ReadFromCache: the ledger's cache of recent bundles, which holds a
	// bundle only as uploaded or as read when it hashed to its row's
	// write-time hash. The stored copy was not read: this says nothing
	// of it (VerifyRow and CheckIntegrity read it).
	ReadFromCache EvidenceSource = "cache"
)

// evidenceBytes returns the bundle of s and where it took it from: the row
// store's, else the write-once copy (from the cache when it holds it). A
// copy read is kept in the cache only when it hashes to want, the row's
// write-time hash: the cache never serves a bundle that differed.
func (l *Ledger) evidenceBytes(ctx context.Context, id, want string, s storedEvidence) ([]byte, EvidenceSource, error) {
	if s.bundle != nil {
		return s.bundle, ReadFromRowStore, nil
	}
	if b := l.recent.get(id); b != nil {
		return b, ReadFromCache, nil
	}
	b, err := l.storedBundle(ctx, id, s)
	if err != nil {
		return nil, ReadFromWriteOnceCopy, err
	}
	if sha256Hex(b) == want {
		l.recent.put(id, b)
	}
	return b, ReadFromWriteOnceCopy, nil
}

// storedBundle returns the bundle of s as it is stored now: the row
// store's, else the write-once copy read again, never the cache, so that
// a re-verification sees an edit of the copy as an integrity check does.
func (l *Ledger) storedBundle(ctx context.Context, id string, s storedEvidence) ([]byte, error) {
	if s.bundle != nil {
		return s.bundle, nil
	}
	b, err := l.readObject(ctx, s.loc)
	if err != nil {
		return nil, fmt.Errorf("evidence of %s from write-once storage: %w", id, err)
	}
	return b, nil
}

// readObject returns the bytes of the object at loc: its range of the
// segment when the object store reads ranges, else the whole object cut
// where loc says.
func (l *Ledger) readObject(ctx context.Context, loc Location) ([]byte, error) {
	if b, ok, err := l.readRange(ctx, loc); ok {
		return b, err
	}
	b, err := l.getObject(ctx, loc)
	if err != nil {
		return nil, err
	}
	if loc.Length > 0 && !bytes.HasPrefix(b, []byte(segmentHeader)) {
		return nil, fmt.Errorf("object %s is not a segment", loc.Key)
	}
	part, err := cut(b, loc)
	return slices.Clone(part), err
}

// bytesCache keeps recent values by key (evidence bundles by row id, the
// log's published tiles by path), the least recently used dropped first
// beyond max bytes. Values are shared and must not be modified. A nil
// cache keeps nothing.
type bytesCache struct {
	max int

	mu      sync.Mutex // guards the rest
	size    int
	order   *list.List // of *cachedBytes, most recently used first
	entries map[string]*list.Element
}

type cachedBytes struct {
	id     string
	bundle []byte
}

// newBytesCache returns a cache of at most max bytes, or nil when max
// is not positive.
func newBytesCache(max int) *bytesCache {
	if max <= 0 {
		return nil
	}
	return &bytesCache{max: max, order: list.New(), entries: map[string]*list.Element{}}
}

func (c *bytesCache) get(id string) []byte {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[id]
	if !ok {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*cachedBytes).bundle
}

// put keeps bundle as row id's; a bundle larger than the whole cache is
// not kept.
func (c *bytesCache) put(id string, bundle []byte) {
	if c == nil || len(bundle) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[id]; ok {
		c.size -= len(el.Value.(*cachedBytes).bundle)
		c.order.Remove(el)
	}
	c.entries[id] = c.order.PushFront(&cachedBytes{id: id, bundle: bundle})
	c.size += len(bundle)
	for c.size > c.max {
		last := c.order.Back()
		e := last.Value.(*cachedBytes)
		c.order.Remove(last)
		delete(c.entries, e.id)
		c.size -= len(e.bundle)
	}
}

package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/pactledger/pactledger/ledger"
)

// SwapVersion writes body as a new version of key: the one object that
// changes, such as the Merkle log's live checkpoint (C2SP tlog-tiles
// "checkpoint"), which a client reads by its fixed name. It is a put into
// the bucket, whose Object Lock keeps it versioned: each version is
// created with COMPLIANCE retention until retainUntil and stays locked, so
// no version can be removed or changed before then; the latest is what a
// plain GET reads. The location names the version written.
//
// The put is S3's conditional write: it succeeds only while the key's
// latest version holds prev (If-Match on its ETag, the MD5 of prev: the
// store's puts are single-part), or while the key has none when prev is
// nil (If-None-Match; a key whose latest version is a delete marker has
// none, see putOverDeleteMarker), so that two writers cannot each replace
// what the other wrote after reading it; otherwise it returns an error
// wrapping ledger.ErrObjectChanged.
func (s *Store) SwapVersion(ctx context.Context, key string, body []byte, retainUntil time.Time, prev []byte) (ledger.Location, error) {
	began := time.Now()
	loc, err := s.swapVersion(ctx, key, body, retainUntil, prev)
	s.observe(began, err)
	return loc, err
}

func (s *Store) swapVersion(ctx context.Context, key string, body []byte, retainUntil time.Time, prev []byte) (ledger.Location, error) {
	loc := ledger.Location{Store: "s3", Bucket: s.bucket, Key: key, RetainUntil: retainUntil.UTC()}
	if err := s.ready(); err != nil {
		return loc, err
	}
	opts := lockedPut(body, retainUntil, http.DetectContentType(body))
	if prev == nil {
		opts.SetMatchETagExcept("*")
	} else {
		sum := md5.Sum(prev)
		opts.SetMatchETag(hex.EncodeToString(sum[:]))
	}
	info, err := s.c.PutObject(ctx, s.bucket, key, bytes.NewReader(body), int64(len(body)), opts)
	if prev == nil && minio.ToErrorResponse(err).StatusCode == http.StatusPreconditionFailed {
		info, err = s.putOverDeleteMarker(ctx, key, body, retainUntil, err)
	}
	if err != nil {
		if code := minio.ToErrorResponse(err).StatusCode; code == http.StatusPreconditionFailed || (prev != nil && code == http.StatusNotFound) {
			return loc, fmt.Errorf("put a version of %s: %w", key, errors.Join(ledger.ErrObjectChanged, err))
		}
		return loc, fmt.Errorf("put a version of %s: %w", key, err)
	}
	loc.VersionID = info.VersionID
	return loc, nil
}

// putOverDeleteMarker is the put of a version of key whose conditional
// put while it has none (If-None-Match) failed with refused: S3 reads a
// key whose latest version is a delete marker as missing, but some
// servers (versitygw) refuse the condition there. When a read by name
// finds no version, the latest is a delete marker (the condition held
// nothing else), and the version is put without the condition: a writer
// putting one in the moment between the read and this put is replaced
// unchecked, which the condition alone rules out where the server
// honours it.
func (s *Store) putOverDeleteMarker(ctx context.Context, key string, body []byte, retainUntil time.Time, refused error) (minio.UploadInfo, error) {
	if _, err := s.latestVersion(ctx, key); !errors.Is(err, ledger.ErrNotFound) {
		return minio.UploadInfo{}, refused
	}
	return s.c.PutObject(ctx, s.bucket, key, bytes.NewReader(body), int64(len(body)), lockedPut(body, retainUntil, http.DetectContentType(body)))
}

// LatestVersion implements ledger.LatestVersioner: the version of key a
// GET by its name alone reads.
func (s *Store) LatestVersion(ctx context.Context, key string) (string, error) {
	began := time.Now()
	version, err := s.latestVersion(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		s.observe(began, nil) // an answer
	} else {
		s.observe(began, err)
	}
	return version, err
}

func (s *Store) latestVersion(ctx context.Context, key string) (string, error) {
	if err := s.ready(); err != nil {
		return "", err
	}
	info, err := s.c.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	switch {
	case err == nil:
		return info.VersionID, nil
	case info.IsDeleteMarker || minio.ToErrorResponse(err).Code == minio.NoSuchKey:
		return "", fmt.Errorf("latest version of %s: %w", key, ledger.ErrNotFound)
	}
	return "", fmt.Errorf("latest version of %s: %w", key, err)
}

// FirstVersion implements ledger.FirstVersioner: the oldest version of
// key that is not a delete marker, from a listing of its versions.
func (s *Store) FirstVersion(ctx context.Context, key string) (string, error) {
	began := time.Now()
	version, err := s.firstVersion(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrFirstVersionUnknown) {
		s.observe(began, nil) // an answer
	} else {
		s.observe(began, err)
	}
	return version, err
}

func (s *Store) firstVersion(ctx context.Context, key string) (string, error) {
	if err := s.ready(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var first minio.ObjectInfo
	found, versions, contents := false, 0, map[string]bool{}
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: key, WithVersions: true}) {
		if o.Err != nil {
			return "", fmt.Errorf("versions of %s: %w", key, o.Err)
		}
		if o.Key != key || o.IsDeleteMarker {
			continue
		}
		versions++
		contents[o.ETag] = true
		if !found || o.LastModified.Before(first.LastModified) {
			first, found = o, true
		}
	}
	switch {
	case !found:
		return "", fmt.Errorf("first version of %s: %w", key, ledger.ErrNotFound)
	case len(contents) > 1:
		// The ledger puts each of its objects once: versions of other
		// contents were put by someone else, and the store's times do
		// not tell which came first. They are to the second, and a
		// store may give a version the time it was kept aside when the
		// next was put (versitygw does), so an older version can read
		// as newer than the one put over it.
		return "", fmt.Errorf("%w: %d versions of %s hold different contents", ledger.ErrFirstVersionUnknown, versions, key)
	}
	return first.VersionID, nil
}

// maxKeptEntries bounds the versions and delete markers one ListKept
// reads: a listing of the log's checkpoints reads one per checkpoint
// published, and a bucket holding more is not listed whole (the listing
// fails) rather than read for ever.
const maxKeptEntries = 1 << 22

// ListKept implements ledger.KeptLister from a listing of the versions
// under prefix (ListObjectVersions): a key whose latest version is a
// delete marker is hidden, and what it keeps is its newest version that
// is not one. S3 lists a key's versions newest first; some servers list
// the delete markers of a page of the listing before its versions, so a
// key is passed to fn once both its latest version and its newest one
// that is not a marker were read, wherever they come.
func (s *Store) ListKept(ctx context.Context, prefix string, fn func(ledger.KeptKey) error) error {
	began := time.Now()
	var fnErr error
	err := s.listKept(ctx, prefix, func(k ledger.KeptKey) error {
		fnErr = fn(k)
		return fnErr
	})
	if fnErr != nil {
		s.observe(began, nil) // the bucket answered
		return fnErr
	}
	s.observe(began, err)
	return err
}

func (s *Store) listKept(ctx context.Context, prefix string, fn func(ledger.KeptKey) error) (err error) {
	if err := s.ready(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the listing's requests when it stops early
	type partial struct {
		latest, hidden bool   // the latest version was read, and is a delete marker
		version        string // the newest version read that is not one
	}
	// The keys not passed to fn yet. One passed is dropped: a version
	// of it read later starts another that never is (a key has one
	// latest version).
	pending := map[string]*partial{}
	read := 0
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, WithVersions: true}) {
		if o.Err != nil {
			return fmt.Errorf("list the versions under %s: %w", prefix, o.Err)
		}
		if read++; read > maxKeptEntries {
			return fmt.Errorf("list the versions under %s: more than %d", prefix, maxKeptEntries)
		}
		if strings.Contains(o.Key[min(len(prefix), len(o.Key)):], "/") {
			continue // a folder below prefix
		}
		p := pending[o.Key]
		if p == nil {
			p = &partial{}
			pending[o.Key] = p
		}
		if o.IsLatest {
			p.latest, p.hidden = true, o.IsDeleteMarker
		}
		if !o.IsDeleteMarker && p.version == "" {
			p.version = o.VersionID
		}
		if !p.latest || p.version == "" {
			continue
		}
		delete(pending, o.Key)
		if err := fn(ledger.KeptKey{Key: o.Key, Version: p.version, Hidden: p.hidden}); err != nil {
			return err
		}
	}
	return nil
}

// ListFolders implements ledger.FolderLister from a listing of the
// versions under prefix with "/" as delimiter: the common prefixes are
// the folders, those holding only delete markers included.
func (s *Store) ListFolders(ctx context.Context, prefix string, fn func(string) error) error {
	if err := s.ready(); err != nil {
		return err
	}
	began := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the listing's requests when it stops early
	seen := map[string]bool{}
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, WithVersions: true}) {
		if o.Err != nil {
			err := fmt.Errorf("list the folders under %s: %w", prefix, o.Err)
			s.observe(began, err)
			return err
		}
		rest := o.Key[min(len(prefix), len(o.Key)):]
		if !strings.HasPrefix(o.Key, prefix) || !strings.HasSuffix(rest, "/") || strings.Count(rest, "/") != 1 || seen[o.Key] {
			continue
		}
		seen[o.Key] = true
		if err := fn(o.Key); err != nil {
			s.observe(began, nil) // the bucket answered
			return err
		}
	}
	s.observe(began, nil)
	return nil
}

package ledger_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	lproof "github.com/pactledger/pactledger/ledger/proof"
	s3store "github.com/pactledger/pactledger/storage/s3"
)

// bucket reads the log as a tlog-tiles client does, straight from the
// bucket with its own S3 client.
type bucket struct {
	t      *testing.T
	c      *minio.Client
	name   string
	prefix string
}

func (b bucket) get(key string) ([]byte, error) {
	obj, err := b.c.GetObject(context.Background(), b.name, b.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return data, nil
}

func (b bucket) must(key string) []byte {
	b.t.Helper()
	data, err := b.get(key)
	if err != nil {
		b.t.Fatal(err)
	}
	return data
}

// The tlog.TileReader of the bucket: C2SP paths drop x/mod's height element.
func (bucket) Height() int { return ledger.TileHeight }

func (b bucket) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		d, err := b.get(strings.Replace(t.Path(), "tile/8/", "tile/", 1))
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

func (bucket) SaveTiles([]tlog.Tile, [][]byte) {}

// TestLogInTheBucket runs the integrator of a ledger whose evidence is on a
// real S3 server with Object Lock, and reads the log back from the bucket
// as any tlog-tiles client would: the live checkpoint (a new locked version
// at each size), the checkpoints by size, full and partial tiles and entry
// bundles, each the same bytes the ledger serves; the tiles alone rebuild
// the checkpoint's root, and the entry bundles hash to the level-0 tiles.
func TestLogInTheBucket(t *testing.T) {
	ctx := context.Background()
	name := s3test.Bucket()
	h := s3Harness(t, name)
	signer, vkey := logKeys(t)
	if err := h.l.EnableLog(ledger.LogConfig{Signer: signer, Interval: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c := rawS3(t)
	b := bucket{t: t, c: c, name: name, prefix: ledger.LogPrefix}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.l.RunIntegrator(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("integrator: %v", err)
		}
	}()
	// waitFor polls the bucket's live checkpoint until it is at size n.
	waitFor := func(n int64) lproof.Checkpoint {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if raw, err := b.get("checkpoint"); err == nil {
				cp, err := lproof.Open(raw, vkey)
				if err != nil {
					t.Fatalf("the bucket's checkpoint does not verify: %v\n%s", err, raw)
				}
				if cp.Size == n {
					return cp
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the bucket's checkpoint did not reach size %d", n)
			}
			runtime.Gosched()
		}
	}

	// Real rows first, then synthetic leaves past one full tile: 303
	// leaves are tile 0/000 (full), 0/001.p/47 and 1/000.p/1.
	var rows []*ledger.Row
	for i := range 3 {
		row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("S3LOG-%d", i)})))
		rows = append(rows, row)
	}
	h.queue(t, 3, 300)
	first := waitFor(303)
	// More leaves: the partial tile grows into a new write-once object,
	// and the live checkpoint gets a new version.
	h.queue(t, 303, 10)
	last := waitFor(313)

	// The ledger serves the bucket's checkpoint once the publication
	// that put it has recorded it in the row store.
	live := b.must("checkpoint")
	for deadline := time.Now().Add(20 * time.Second); ; runtime.Gosched() {
		served, err := h.l.Checkpoint(ctx)
		if err == nil && bytes.Equal(served, live) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bucket's checkpoint differs from the ledger's: %v\n%s\n%s", err, live, served)
		}
	}
	for _, cp := range []lproof.Checkpoint{first, last} {
		kept, err := lproof.Open(b.must(fmt.Sprintf("checkpoints/%d", cp.Size)), vkey)
		if err != nil || kept != cp {
			t.Fatalf("checkpoints/%d: %+v %v, want %+v", cp.Size, kept, err, cp)
		}
	}
	path, _, _, err := h.l.Consistency(ctx, first.Size, last.Size)
	if err != nil {
		t.Fatal(err)
	}
	if err := lproof.VerifyConsistency(first, last, path); err != nil {
		t.Fatal(err)
	}

	// Tiles in the bucket are the bytes the ledger serves.
	for _, p := range []string{"tile/0/000", "tile/0/001.p/57", "tile/1/000.p/1", "tile/entries/000", "tile/entries/001.p/57"} {
		want, err := h.l.TileData(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.must(p); !bytes.Equal(got, want) {
			t.Fatalf("%s: the bucket holds %d bytes, the ledger serves %d", p, len(got), len(want))
		}
	}
	if got := b.must("tile/0/000"); len(got) != 256*tlog.HashSize {
		t.Fatalf("full tile: %d bytes", len(got))
	}
	// The partial tile published at size 303 stays, a prefix of the wider one.
	if older, wider := b.must("tile/0/001.p/47"), b.must("tile/0/001.p/57"); len(older) != 47*tlog.HashSize || !bytes.HasPrefix(wider, older) {
		t.Fatalf("partial tiles: %d bytes, not a prefix of the %d-byte wider tile", len(older), len(wider))
	}

	// The tiles alone rebuild the root of the checkpoint.
	root, err := tlog.TreeHash(last.Size, tlog.TileHashReader(tlog.Tree{N: last.Size, Hash: last.Hash}, b))
	if err != nil || root != last.Hash {
		t.Fatalf("tree from the bucket's tiles: %v %v, want %v", root, err, last.Hash)
	}
	// Each entry in the bundles hashes to its place in the level-0 tiles,
	// and the real rows are the first leaves.
	for _, tile := range []struct {
		entries, hashes string
		from            int
	}{{"tile/entries/000", "tile/0/000", 0}, {"tile/entries/001.p/57", "tile/0/001.p/57", 256}} {
		bundle, hs := b.must(tile.entries), b.must(tile.hashes)
		for i := 0; len(bundle) > 0; i++ {
			n := int(binary.BigEndian.Uint16(bundle))
			entry := bundle[2 : 2+n]
			bundle = bundle[2+n:]
			if h := tlog.RecordHash(entry); !bytes.Equal(h[:], hs[i*tlog.HashSize:(i+1)*tlog.HashSize]) {
				t.Fatalf("%s entry %d does not hash to %s[%d]", tile.entries, i, tile.hashes, i)
			}
			if idx := tile.from + i; idx < len(rows) && !strings.Contains(string(entry), "\nrow "+rows[idx].ID+"\n") {
				t.Fatalf("leaf %d is not row %s:\n%s", idx, rows[idx].ID, entry)
			}
		}
	}

	// Every version of the live checkpoint is kept, the latest locked in
	// COMPLIANCE mode; none can be deleted.
	versions := 0
	for o := range c.ListObjects(ctx, name, minio.ListObjectsOptions{Prefix: ledger.LogPrefix + "checkpoint", WithVersions: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if o.Key != ledger.LogPrefix+"checkpoint" {
			continue
		}
		versions++
		if err := c.RemoveObject(ctx, name, o.Key, minio.RemoveObjectOptions{VersionID: o.VersionID}); err == nil {
			t.Fatalf("version %s of the live checkpoint was deleted", o.VersionID)
		}
	}
	if versions < 2 {
		t.Fatalf("%d versions of the live checkpoint, want one per published size (at least 2)", versions)
	}
	info, err := c.StatObject(ctx, name, ledger.LogPrefix+"checkpoint", minio.StatObjectOptions{})
	if err != nil || info.Metadata.Get("X-Amz-Object-Lock-Mode") != "COMPLIANCE" {
		t.Fatalf("live checkpoint lock: %v %v", info.Metadata, err)
	}
	if _, err := b.get("tile/0/002"); err == nil {
		t.Fatal("a tile beyond the tree is in the bucket")
	}
}

// rawS3 is a client of the test S3 server that goes past the ledger.
func rawS3(t *testing.T) *minio.Client {
	t.Helper()
	c, err := minio.New(s3srv.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3srv.AccessKey, s3srv.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// s3Harness is an open harness whose evidence goes to the test S3
// server's bucket name.
func s3Harness(t *testing.T, name string) *harness {
	t.Helper()
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: s3Objects(t, name)}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC())
	h.open(t)
	return h
}

// s3Objects is the test S3 server's bucket name (created if need be) as
// a ledger's evidence store.
func s3Objects(t *testing.T, name string) ledger.ObjectStore {
	t.Helper()
	objects, err := s3store.Open(context.Background(), s3store.Config{Endpoint: s3srv.Endpoint, Bucket: name, AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, Insecure: true, CreateBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	return objects
}

// Until the bucket's check as ledgerd starts has passed, the integrator
// and the uploader wait for it without a warning of their own (the check
// reports its failures); once it passes, the log is published and the
// evidence uploaded, with no "succeeded again" for a failure never had.
func TestNoWarningWhileTheBucketIsChecked(t *testing.T) {
	objects, err := s3store.New(s3store.Config{Endpoint: s3srv.Endpoint, Bucket: s3test.Bucket(), AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, Insecure: true, CreateBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: objects, logs: &syncbuf.Buffer{}, debug: true}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC())
	h.open(t)
	signer, _ := logKeys(t)
	runIntegrator(t, h.l, signer)
	h.uploading(t, ledger.UploaderConfig{})
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "O-1"})))

	waitUntil(t, "the uploader and the integrator waiting for the check, each more than once", func() bool {
		logs := h.logs.String()
		return strings.Count(logs, `msg="checking the log published to write-once storage `) >= 2 &&
			strings.Count(logs, `msg="evidence upload failed; will retry"`) >= 2
	})
	if err := objects.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.within(t, "the evidence uploaded once the check passed", h.drained)
	waitUntil(t, "the log published once the check passed", func() bool {
		raw, err := objects.Get(context.Background(), ledger.LogPrefix+"checkpoint")
		return err == nil && len(raw) > 0
	})
	for _, says := range []string{"level=WARN", "level=ERROR", "succeeded again"} {
		if strings.Contains(h.logs.String(), says) {
			t.Errorf("the ledger logged %q while the bucket's check had not passed:\n%s", says, h.logs.String())
		}
	}
}

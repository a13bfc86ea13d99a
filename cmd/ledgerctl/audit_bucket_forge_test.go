package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/proof"
	"github.com/pactledger/pactledger/storage/s3"
)

// memLog is a Merkle log in memory, signed with its own key: the log an
// operator holding the key can build and publish as they please.
type memLog struct {
	stored []tlog.Hash
	n      int64
	signer note.Signer
	key    string
}

func newMemLog(t *testing.T) *memLog {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, "localhost/pactledger")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return &memLog{signer: signer, key: vkey}
}

func (l *memLog) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		if x >= int64(len(l.stored)) {
			return nil, fmt.Errorf("no hash %d", x)
		}
		out[i] = l.stored[x]
	}
	return out, nil
}

// grow appends leaves named prefix and their number up to size n.
func (l *memLog) grow(t *testing.T, n int64, prefix string) *memLog {
	t.Helper()
	for l.n < n {
		hs, err := tlog.StoredHashes(l.n, []byte(prefix+strconv.FormatInt(l.n, 10)), l)
		if err != nil {
			t.Fatal(err)
		}
		l.stored = append(l.stored, hs...)
		l.n++
	}
	return l
}

// fork is the log's first n leaves, to grow another way.
func (l *memLog) fork(n int64) *memLog {
	return &memLog{stored: append([]tlog.Hash(nil), l.stored[:tlog.StoredHashCount(n)]...), n: n, signer: l.signer, key: l.key}
}

func (l *memLog) checkpoint(t *testing.T) (proof.Checkpoint, []byte) {
	t.Helper()
	h, err := tlog.TreeHash(l.n, l)
	if err != nil {
		t.Fatal(err)
	}
	cp := proof.Checkpoint{Origin: l.signer.Name(), Size: l.n, Hash: h}
	raw, err := proof.Sign(cp, l.signer)
	if err != nil {
		t.Fatal(err)
	}
	return cp, raw
}

// memBucket is a bucket with Object Lock on a real S3 server.
type memBucket struct {
	name string
	st   *s3.Store
	c    *minio.Client
}

func newMemBucket(t *testing.T) *memBucket {
	t.Helper()
	srv, err := s3test.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	name := s3test.Bucket()
	st, err := s3.Open(context.Background(), s3.Config{Endpoint: srv.Endpoint, Bucket: name, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true, CreateBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := minio.New(srv.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return &memBucket{name: name, st: st, c: c}
}

// put puts a version of key under COMPLIANCE, as the ledger puts its own.
func (b *memBucket) put(t *testing.T, key string, data []byte) {
	t.Helper()
	if _, err := b.c.PutObject(context.Background(), b.name, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{Mode: minio.Compliance, RetainUntilDate: time.Now().Add(ledger.DefaultTileRetention), SendContentMd5: true, DisableMultipart: true}); err != nil {
		t.Fatal(err)
	}
}

// publish puts l's tiles from size from on, level 0 first, then its
// checkpoints, as the ledger publishes; level0Only stops after the
// level-0 tiles (a publication cut short).
func (b *memBucket) publish(t *testing.T, l *memLog, from int64, level0Only bool) {
	t.Helper()
	tiles := tlog.NewTiles(tileHeight, from, l.n)
	for _, level := range []int{0, 1, 2} {
		for _, tl := range tiles {
			if tl.L != level {
				continue
			}
			data, err := tlog.ReadTileData(tl, l)
			if err != nil {
				t.Fatal(err)
			}
			b.put(t, tileKey(tl), data)
		}
		if level0Only {
			return
		}
	}
	_, raw := l.checkpoint(t)
	b.put(t, "log/checkpoints/"+strconv.FormatInt(l.n, 10), raw)
	b.put(t, "log/checkpoint", raw)
}

// witness compares the bucket with served, the log a ledger shows, from
// the kept checkpoint on, as the audit does around its reading of the
// leaves: the bucket read first, then the ledger's log.
func (b *memBucket) witness(t *testing.T, served *memLog, kept proof.Checkpoint) (string, []string) {
	t.Helper()
	w, out := b.read(t, kept, false)
	return b.compare(t, w, out, served, kept)
}

// read reads the bucket as the audit does before the ledger's latest
// checkpoint; all reads every checkpoint.
func (b *memBucket) read(t *testing.T, kept proof.Checkpoint, all bool) (*bucketWitness, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	w := &bucketWitness{}
	if err := w.read(&cli{out: &out, timeout: 30 * time.Second}, b.st, b.name, kept.Size, all, 0); err != nil {
		t.Fatal(err)
	}
	return w, &out
}

// compare holds the bucket w read to served, as the audit does once it
// read the ledger's latest checkpoint.
func (b *memBucket) compare(t *testing.T, w *bucketWitness, out *bytes.Buffer, served *memLog, kept proof.Checkpoint) (string, []string) {
	t.Helper()
	newer, _ := served.checkpoint(t)
	a := &auditor{c: &cli{out: out}, newer: newer, hashes: served, bucket: w}
	for n := int64(0); n<<tileHeight < newer.Size; n++ {
		var idx []int64
		for i := n << tileHeight; i < min((n+1)<<tileHeight, newer.Size); i++ {
			idx = append(idx, tlog.StoredHashIndex(0, i))
		}
		hs, err := served.ReadHashes(idx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.compareTile(n, hs); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.finishBucket(kept, served.key, true); err != nil {
		t.Fatal(err)
	}
	return out.String(), a.mismatches
}

func wantMismatch(t *testing.T, what, out string, mismatches []string, want string) {
	t.Helper()
	for _, m := range mismatches {
		if strings.Contains(m, want) {
			return
		}
	}
	t.Errorf("%s: mismatches %q\n%s\nwant one saying %q", what, mismatches, out, want)
}

// An operator holding the log's key forks its log past what it
// published, and publishes the fork over the old log: as new versions of
// the same keys, or under new keys alone (the keys a publication of a
// larger tree writes). The old versions stay, locked, and hold other
// leaf hashes than the log the ledger shows.
func TestBucketRewrittenUnderTheSameKeysOrNewOnes(t *testing.T) {
	t.Run("new versions", func(t *testing.T) {
		b := newMemBucket(t)
		honest := newMemLog(t).grow(t, 100, "leaf ")
		b.publish(t, honest, 0, false)
		kept, _ := honest.checkpoint(t)
		b.publish(t, honest.grow(t, 300, "leaf "), 100, false)
		if out, mm := b.witness(t, honest, kept); len(mm) != 0 {
			t.Fatalf("the honest log: %q\n%s", mm, out)
		}
		forked := honest.fork(200).grow(t, 350, "other ")
		b.publish(t, forked, 0, false)
		out, mm := b.witness(t, forked, kept)
		wantMismatch(t, "a fork at 200 published as new versions", out, mm, "log/tile/0/000 (version ")
		wantMismatch(t, "a fork at 200 published as new versions", out, mm, "holds another hash of leaf 200 than the ledger's log")
	})
	t.Run("new keys only", func(t *testing.T) {
		b := newMemBucket(t)
		honest := newMemLog(t).grow(t, 50, "leaf ")
		b.publish(t, honest, 0, false)
		kept, _ := honest.checkpoint(t)
		b.publish(t, honest.grow(t, 100, "leaf "), 50, false)
		forked := honest.fork(60).grow(t, 300, "other ")
		b.publish(t, forked, 100, false)
		out, mm := b.witness(t, forked, kept)
		wantMismatch(t, "a fork at 60 published under new keys", out, mm, "log/tile/0/000.p/100 (version ")
		wantMismatch(t, "a fork at 60 published under new keys", out, mm, "holds another hash of leaf 60 than the ledger's log")
	})
}

// An honest publication cut short after its level-0 tiles (before its
// level-1 tiles and checkpoints), or at any boundary of a tile, is no
// mismatch.
func TestBucketOfAnHonestLogAtEveryEdge(t *testing.T) {
	b := newMemBucket(t)
	l := newMemLog(t).grow(t, 200, "leaf ")
	b.publish(t, l, 0, false)
	kept, _ := l.checkpoint(t)
	b.publish(t, l.grow(t, 600, "leaf "), 200, true)
	if out, mm := b.witness(t, l, kept); len(mm) != 0 {
		t.Errorf("a publication cut short after its level-0 tiles: %q\n%s", mm, out)
	}
	for _, steps := range [][]int64{{256}, {100, 256}, {256, 257}, {255, 256, 512}} {
		b := newMemBucket(t)
		l := newMemLog(t)
		var kept proof.Checkpoint
		for i, n := range steps {
			from := l.n
			b.publish(t, l.grow(t, n, "leaf "), from, false)
			if i == 0 {
				kept, _ = l.checkpoint(t)
			}
		}
		if out, mm := b.witness(t, l, kept); len(mm) != 0 {
			t.Errorf("published at sizes %v: %q\n%s", steps, mm, out)
		}
	}
}

// Tiles put at sizes far past the log (one object for each power of
// two, to 2^50 leaves) are mismatches, the first named and the rest
// counted, found without memory in proportion to the leaves they name.
func TestBucketTilesFarPastTheLog(t *testing.T) {
	b := newMemBucket(t)
	l := newMemLog(t).grow(t, 100, "leaf ")
	b.publish(t, l, 0, false)
	kept, _ := l.checkpoint(t)
	garbage := make([]byte, maxTileBytes)
	for j := tileHeight; j <= 50; j++ {
		n := int64(1)<<j - 1
		b.put(t, tileKey(tlog.Tile{H: tileHeight, L: 0, N: n >> tileHeight, W: 1 << tileHeight}), garbage)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, mm := b.witness(t, l, kept)
	runtime.ReadMemStats(&after)
	wantMismatch(t, "tiles to 2^50 leaves", out, mm, "log/tile/0/001 (version ")
	wantMismatch(t, "tiles to 2^50 leaves", out, mm, "past the ledger's latest checkpoint (size 100)")
	wantMismatch(t, "tiles to 2^50 leaves", out, mm, "and 32 more versions of the bucket's tiles past the ledger's latest checkpoint")
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("comparing a bucket whose tiles cover 2^50 leaves allocated %d MiB", alloc>>20)
	}
}

// putTile puts level-0 tile n of l at width w, under key ("" for the
// ledger's key of it).
func (b *memBucket) putTile(t *testing.T, l *memLog, n int64, w int, key string) {
	t.Helper()
	tl := tlog.Tile{H: tileHeight, L: 0, N: n, W: w}
	data, err := tlog.ReadTileData(tl, l)
	if err != nil {
		t.Fatal(err)
	}
	if key == "" {
		key = tileKey(tl)
	}
	b.put(t, key, data)
}

// The leaves the bucket holds are those its tiles, named as the ledger
// names them, cover from leaf 0 without a gap: a partial tile whose width
// is written with a leading zero or a sign, or tiles past a missing one,
// hold nothing of a kept checkpoint's tree, which two forks past what
// was published could each extend.
func TestBucketCoversNoLeavesByOddNamesOrPastAGap(t *testing.T) {
	t.Run("odd names", func(t *testing.T) {
		for _, odd := range []string{"log/tile/0/001.p/0244", "log/tile/0/001.p/+244"} {
			b := newMemBucket(t)
			honest := newMemLog(t).grow(t, 300, "leaf ")
			b.publish(t, honest, 0, false)
			b.put(t, odd, []byte("anything"))
			fork := honest.fork(300).grow(t, 500, "B ")
			kept, _ := fork.checkpoint(t)
			out, mm := b.witness(t, fork, kept)
			wantMismatch(t, odd, out, mm, "the bucket's tiles cover 300 leaves from leaf 0, fewer than the kept checkpoint's 500")
		}
	})
	t.Run("a gap", func(t *testing.T) {
		b := newMemBucket(t)
		honest := newMemLog(t).grow(t, 256, "leaf ")
		b.publish(t, honest, 0, false)
		fork := honest.fork(256).grow(t, 1024, "leaf ")
		for _, n := range []int64{1, 3} {
			b.putTile(t, fork, n, 256, "")
		}
		kept, _ := fork.fork(1000).checkpoint(t)
		out, mm := b.witness(t, fork, kept)
		wantMismatch(t, "tiles 0, 1 and 3", out, mm, "the bucket's tiles cover 512 leaves from leaf 0 (it holds no tile of leaf 512, and holds tiles from leaf 768 on), fewer than the kept checkpoint's 1000")
	})
}

// Versions put after an audit, of tiles before its kept checkpoint's or
// of checkpoints of another tree, are compared by the next audit: every
// version of every tile, and every checkpoint listed (the newest
// maxCheckpointReads).
func TestBucketVersionsPutBeforeTheKeptCheckpoint(t *testing.T) {
	t.Run("tiles", func(t *testing.T) {
		b := newMemBucket(t)
		ledger := newMemLog(t).grow(t, 300, "leaf ")
		b.publish(t, ledger, 0, false)
		ledger.grow(t, 1000, "leaf ")
		kept, raw := ledger.checkpoint(t)
		other := ledger.fork(300).grow(t, 400, "other ").grow(t, 1000, "leaf ")
		for _, n := range []int64{1, 2} {
			b.putTile(t, other, n, 256, "")
		}
		b.putTile(t, ledger, 3, 1000-768, "")
		_, rawOther := other.checkpoint(t)
		b.put(t, "log/checkpoint", rawOther)
		b.put(t, "log/checkpoints/1000", raw)
		b.put(t, "log/checkpoint", raw)
		out, mm := b.witness(t, ledger, kept)
		wantMismatch(t, "another tree's tiles before the kept checkpoint's", out, mm, "log/tile/0/001 (version ")
		wantMismatch(t, "another tree's tiles before the kept checkpoint's", out, mm, "holds another hash of leaf 300 than the ledger's log")
		wantMismatch(t, "another tree's checkpoint", out, mm, "the ledger signed two histories")
	})
	t.Run("checkpoints", func(t *testing.T) {
		b := newMemBucket(t)
		ledger := newMemLog(t).grow(t, 300, "leaf ")
		b.publish(t, ledger, 0, false)
		kept, raw := ledger.checkpoint(t)
		other := ledger.fork(100).grow(t, 200, "other ")
		_, rawOther := other.checkpoint(t)
		b.put(t, "log/checkpoint", rawOther)
		b.put(t, "log/checkpoints/200", rawOther)
		b.put(t, "log/checkpoints/300", rawOther)
		b.put(t, "log/checkpoint", raw)
		out, mm := b.witness(t, ledger, kept)
		wantMismatch(t, "another tree's checkpoint of 200 leaves", out, mm, "at size 200, and the ledger's log")
		wantMismatch(t, "another version of log/checkpoints/300", out, mm, "the bucket's log/checkpoints/300 holds versions of other bytes")
	})
}

// A publication between the audit's reading of the bucket and of the
// ledger's latest checkpoint leaves the bucket behind what the audit
// holds it to: no mismatch. A tile put again and again is one.
func TestBucketReadBeforeTheLedgersLatest(t *testing.T) {
	b := newMemBucket(t)
	l := newMemLog(t).grow(t, 300, "leaf ")
	b.publish(t, l, 0, false)
	kept, _ := l.checkpoint(t)
	w, out := b.read(t, kept, false)
	b.publish(t, l.grow(t, 400, "leaf "), 300, false)
	if text, mm := b.compare(t, w, out, l, kept); len(mm) != 0 {
		t.Errorf("published between the two reads: %q\n%s", mm, text)
	}
	for range maxTileVersions + 2 {
		b.putTile(t, l, 1, 400-256, "")
	}
	out2, mm := b.witness(t, l, kept)
	wantMismatch(t, "a tile put again and again", out2, mm, "the bucket's log/tile/0/001.p/144 holds more than 8 versions (the first 8 compared): the ledger puts it once")
}

// Versions locked for less than the ledger locks what it publishes for
// can be removed once their lock ends and a rewritten log put in their
// place: the tiles and checkpoints the check relies on are mismatches
// when locked so.
func TestBucketLockedForLessThanTheLedgerLocks(t *testing.T) {
	b := newMemBucket(t)
	l := newMemLog(t).grow(t, 300, "leaf ")
	b.publish(t, l, 0, false)
	kept, raw := l.checkpoint(t)
	if _, err := b.c.PutObject(context.Background(), b.name, "log/checkpoint", bytes.NewReader(raw), int64(len(raw)), minio.PutObjectOptions{Mode: minio.Compliance, RetainUntilDate: time.Now().Add(time.Hour), SendContentMd5: true, DisableMultipart: true}); err != nil {
		t.Fatal(err)
	}
	out, mm := b.witness(t, l, kept)
	wantMismatch(t, "log/checkpoint locked for an hour", out, mm, "the bucket's log/checkpoint, put at ")
	wantMismatch(t, "log/checkpoint locked for an hour", out, mm, "not the 10 years the ledger retains what it publishes for")
}

// Without --all the newest checkpoints are read, the output says so, and
// an older checkpoint of another tree is left to --all, which reads
// every one.
func TestBucketReadsTheNewestCheckpoints(t *testing.T) {
	defer func(n int) { maxCheckpointReads = n }(maxCheckpointReads)
	maxCheckpointReads = 3
	b := newMemBucket(t)
	l := newMemLog(t).grow(t, 10, "leaf ")
	b.publish(t, l, 0, false)
	other := l.fork(5).grow(t, 8, "other ")
	_, raw := other.checkpoint(t)
	b.put(t, "log/checkpoints/8", raw)
	for n := int64(11); n <= 14; n++ {
		b.publish(t, l.grow(t, n, "leaf "), n-1, false)
	}
	kept, _ := l.checkpoint(t)
	out, mm := b.witness(t, l, kept)
	if len(mm) != 0 || !strings.Contains(out, "bucket: its newest 3 checkpoints read; older ones not read (--all reads every one)") {
		t.Errorf("without --all: %q\n%s", mm, out)
	}
	w, buf := b.read(t, kept, true)
	out, mm = b.compare(t, w, buf, l, kept)
	wantMismatch(t, "with --all", out, mm, "the bucket's log/checkpoints/8 (version ")
}

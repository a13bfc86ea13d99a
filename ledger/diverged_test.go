package ledger_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/mod/sumdb/note"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
)

// ledgerOn is a ledger with its own row store whose evidence and log go
// to objects, its log signed by signer (nil: the log left off).
func ledgerOn(t *testing.T, objects ledger.ObjectStore, signer note.Signer) *harness {
	t.Helper()
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: objects, logs: &syncbuf.Buffer{}}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC())
	h.open(t)
	if signer != nil {
		if err := h.l.EnableLog(ledger.LogConfig{Signer: signer}); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// ledgerOnBucket is ledgerOn the evidence directory dir.
func ledgerOnBucket(t *testing.T, dir string, signer note.Signer) *harness {
	t.Helper()
	objects, err := localdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ledgerOn(t, objects, signer)
}

// grow queues leaves from..from+n-1, integrates them and publishes the
// log, returning the publication's error.
func (h *harness) grow(t *testing.T, from, n int) error {
	t.Helper()
	h.queue(t, from, n)
	if _, err := h.l.Integrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h.l.PublishTiles(context.Background())
}

func readObject(t *testing.T, dir, key string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(key)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return b
}

// checkDiverged checks that err refuses the publication as another log's,
// saying what differs, and that the bucket's latest checkpoint is still
// want.
func checkDiverged(t *testing.T, err error, says, bucket string, want []byte) {
	t.Helper()
	if !errors.Is(err, ledger.ErrLogDiverged) || !strings.Contains(err.Error(), says) {
		t.Errorf("publishing over another log: %v; want ErrLogDiverged saying %q", err, says)
	}
	if got := readObject(t, bucket, ledger.LogPrefix+"checkpoint"); !bytes.Equal(got, want) {
		t.Errorf("the bucket's latest checkpoint was replaced:\n%s\nwant\n%s", got, want)
	}
}

// checkForeign checks that err refuses the publication over objects this
// ledger did not write (ErrForeignObject, no divergence), saying what they
// are, and that the bucket's latest checkpoint is still want.
func checkForeign(t *testing.T, err error, says, bucket string, want []byte) {
	t.Helper()
	if !errors.Is(err, ledger.ErrForeignObject) || errors.Is(err, ledger.ErrLogDiverged) || !strings.Contains(err.Error(), says) {
		t.Errorf("publishing over another log: %v; want ErrForeignObject saying %q", err, says)
	}
	if got := readObject(t, bucket, ledger.LogPrefix+"checkpoint"); !bytes.Equal(got, want) {
		t.Errorf("the bucket's latest checkpoint was replaced:\n%s\nwant\n%s", got, want)
	}
}

// A ledger never publishes its Merkle log over another log in its bucket:
// one of another origin, or a new log of the same origin under a new
// signing key (a lost row store or key), whatever its leaves. Its
// checkpoints and tiles stay out of the bucket, whose latest checkpoint
// stays the first ledger's, and that ledger goes on publishing. Another
// key's checkpoints are no evidence against the ledger's own log, so they
// refuse its publications (ErrForeignObject), not its signing.
func TestPublishingOverAnotherLogIsRefused(t *testing.T) {
	bucket := t.TempDir()
	signerA, _ := logKeys(t)
	a := ledgerOnBucket(t, bucket, signerA)
	if err := a.grow(t, 0, 5); err != nil {
		t.Fatal(err)
	}
	published := readObject(t, bucket, ledger.LogPrefix+"checkpoint")
	if len(published) == 0 {
		t.Fatal("the first ledger published no checkpoint")
	}

	other, _, err := pacttest.LogKey("other.test/log")
	if err != nil {
		t.Fatal(err)
	}
	b := ledgerOnBucket(t, bucket, other)
	checkForeign(t, b.grow(t, 0, 7), `the bucket's log/checkpoint (of the log "ledger.test/log", 5 leaves) is signed by ledger.test/log+`, bucket, published)

	newKey, _ := logKeys(t) // the same origin, a new key: a new log
	c := ledgerOnBucket(t, bucket, newKey)
	checkForeign(t, c.grow(t, 100, 3), "not by this ledger's log key ledger.test/log+", bucket, published)
	checkForeign(t, c.grow(t, 103, 4), "not by this ledger's log key ledger.test/log+", bucket, published)
	for _, key := range []string{"checkpoints/7", "tile/0/000.p/7", "tile/entries/000.p/7"} {
		if readObject(t, bucket, ledger.LogPrefix+key) != nil {
			t.Errorf("the bucket holds %s%s of the second log", ledger.LogPrefix, key)
		}
	}
	if size, err := c.l.TreeSize(context.Background()); err != nil || size != 7 {
		t.Errorf("the second ledger's log: %d leaves (%v), want 7 signed", size, err)
	}
	if _, err := c.l.Checkpoint(context.Background()); err != nil {
		t.Errorf("the second ledger serves no checkpoint: %v", err)
	}

	same := ledgerOnBucket(t, bucket, newKey) // the first log's leaves, signed anew
	checkForeign(t, same.grow(t, 0, 6), "not by this ledger's log key ledger.test/log+", bucket, published)
	if err := a.grow(t, 5, 3); err != nil {
		t.Errorf("the first ledger publishing after the others: %v", err)
	}
	if cp := readObject(t, bucket, ledger.LogPrefix+"checkpoints/8"); len(cp) == 0 {
		t.Error("the first ledger's checkpoint of size 8 is not in the bucket")
	}
}

// A row store restored from a backup older than what its ledger published
// is refused too: its log is behind the bucket's, then, once it takes
// other rows, holds other leaves.
func TestARestoredRowStoreDoesNotPublishOverItsOldLog(t *testing.T) {
	h, bucket, signer, backup := publishedPastABackup(t)
	published := readObject(t, bucket, ledger.LogPrefix+"checkpoint")

	h.store.Close()
	copyFile(t, backup, filepath.Join(h.dir, "ledger.db"))
	h.open(t)
	if err := h.l.EnableLog(ledger.LogConfig{Signer: signer}); err != nil {
		t.Fatal(err)
	}
	checkDiverged(t, h.l.PublishTiles(context.Background()), "has 6 leaves, this ledger's log 3", bucket, published)
	checkDiverged(t, h.grow(t, 50, 4), "of size 6 has root", bucket, published)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// The integrator reports a bucket holding another log as an error, not a
// warning, once, and publishes nothing over it; it goes on signing its
// own log, which the other log's checkpoints (another key's) say nothing
// against, serves it as far as it published it (here nothing: the empty
// tree), and publishes and serves the rest once they are gone.
func TestTheIntegratorReportsAnotherLog(t *testing.T) {
	bucket := t.TempDir()
	signerA, _ := logKeys(t)
	a := ledgerOnBucket(t, bucket, signerA)
	if err := a.grow(t, 0, 5); err != nil {
		t.Fatal(err)
	}
	objects, err := localdir.Open(bucket)
	if err != nil {
		t.Fatal(err)
	}
	h := ledgerOn(t, objects, nil)
	if _, err := h.l.LogDiverged(); err != nil {
		t.Fatalf("LogDiverged before the log is on: %v", err)
	}
	signerB, _ := logKeys(t)
	runIntegrator(t, h.l, signerB)
	h.queue(t, 100, 2)
	waitUntil(t, "the refused publication reported", func() bool {
		return strings.Contains(h.logs.String(), `level=ERROR msg="publishing log tiles failed; will retry" error="write-once storage holds objects under the Merkle log's keys that this ledger did not write: the bucket's log/checkpoint (of the log \"ledger.test/log\", 5 leaves) is signed by ledger.test/log+`)
	})
	waitUntil(t, "a second refused publication", func() bool {
		return strings.Count(h.logs.String(), `msg="publishing log tiles failed; will retry"`) >= 2
	})
	if n := strings.Count(h.logs.String(), `level=ERROR msg="write-once storage holds an object under the Merkle log's keys that this ledger did not write: `); n != 2 {
		t.Errorf("the other log's two checkpoints reported %d times, want each once", n)
	}
	for _, key := range []string{"log/checkpoint", "log/checkpoints/5"} {
		if !strings.Contains(h.logs.String(), "the bucket's "+key+" (of the log") {
			t.Errorf("%s not reported", key)
		}
	}
	if since, err := h.l.LogDiverged(); err != nil {
		t.Errorf("LogDiverged = %v, %v: another key's log says nothing against this one's", since, err)
	}
	if size, err := h.l.TreeSize(context.Background()); err != nil || size != 2 {
		t.Errorf("the log: %d leaves (%v), want both signed", size, err)
	}
	if cp, err := h.l.Checkpoint(context.Background()); err != nil || !strings.Contains(string(cp), "\n0\n") {
		t.Errorf("the checkpoint served before any publication: %v\n%s", err, cp)
	}

	// The other log's objects gone (a test can; a bucket would not let it),
	// the next publication succeeds.
	if err := os.RemoveAll(filepath.Join(bucket, "log")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the publication after the other log went", func() bool {
		return strings.Contains(h.logs.String(), "publishing log tiles succeeded again")
	})
	if cp := readObject(t, bucket, ledger.LogPrefix+"checkpoints/2"); len(cp) == 0 {
		t.Error("the ledger's checkpoint of size 2 is not in the bucket")
	}
	if cp, err := h.l.Checkpoint(context.Background()); err != nil || !strings.Contains(string(cp), "\n2\n") {
		t.Errorf("the checkpoint served once published: %v\n%s", err, cp)
	}
}

// On S3 with Object Lock too, a second log is refused before it writes
// anything, and the bucket's latest checkpoint stays the first log's.
func TestPublishingOverAnotherLogIsRefusedOnS3(t *testing.T) {
	ctx := context.Background()
	name := s3test.Bucket()
	signerA, _ := logKeys(t)
	a := ledgerOn(t, s3Objects(t, name), signerA)
	if err := a.grow(t, 0, 5); err != nil {
		t.Fatal(err)
	}
	published, err := a.objects.Get(ctx, ledger.LogPrefix+"checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	signerB, _ := logKeys(t)
	b := ledgerOn(t, s3Objects(t, name), signerB)
	if err := b.grow(t, 10, 7); !errors.Is(err, ledger.ErrForeignObject) || !strings.Contains(err.Error(), "not by this ledger's log key") {
		t.Errorf("a second log publishing to the bucket: %v", err)
	}
	if got, err := a.objects.Get(ctx, ledger.LogPrefix+"checkpoint"); err != nil || !bytes.Equal(got, published) {
		t.Errorf("the bucket's latest checkpoint after the second log: %v\n%s", err, got)
	}
	if _, err := a.objects.Get(ctx, ledger.LogPrefix+"checkpoints/7"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the second log's checkpoint of size 7 in the bucket: %v", err)
	}
	if err := a.grow(t, 5, 1); err != nil {
		t.Errorf("the first ledger publishing after the second: %v", err)
	}
}

// hookedStore runs before ahead of each read of the bucket's latest
// checkpoint, and beforePut ahead of each put.
type hookedStore struct {
	*localdir.Store
	before    func()
	beforePut func(key string)
}

func (s hookedStore) Put(ctx context.Context, key string, body []byte, until time.Time) (ledger.Location, error) {
	if s.beforePut != nil {
		s.beforePut(key)
	}
	return s.Store.Put(ctx, key, body, until)
}

func (s hookedStore) Get(ctx context.Context, key string) ([]byte, error) {
	if key == ledger.LogPrefix+"checkpoint" && s.before != nil {
		s.before()
	}
	return s.Store.Get(ctx, key)
}

// A publication that finds the bucket further along this same log than
// the head it read (another holder of the integrator's lease extended and
// published the log meanwhile) publishes nothing older over it, and is
// not taken for another log.
func TestAPublicationOvertakenByALaterOneLeavesIt(t *testing.T) {
	objects, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var h *harness
	var overtaken bool
	store := hookedStore{Store: objects}
	store.before = func() {
		if overtaken || h.l == nil {
			return
		}
		overtaken = true
		if err := h.grow(t, 7, 3); err != nil {
			t.Errorf("the later publication: %v", err)
		}
	}
	signer, _ := logKeys(t)
	overtaken = true // not yet
	h = ledgerOn(t, store, signer)
	if err := h.grow(t, 0, 5); err != nil {
		t.Fatal(err)
	}
	h.queue(t, 5, 2) // size 7, read by the publication below, then overtaken
	if _, err := h.l.Integrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	overtaken = false
	if err := h.l.PublishTiles(context.Background()); err != nil {
		t.Errorf("a publication overtaken by a later one: %v", err)
	}
	if !overtaken {
		t.Fatal("the later publication did not run")
	}
	cp, err := objects.Get(context.Background(), ledger.LogPrefix+"checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(cp), testOrigin+"\n10\n") {
		t.Errorf("the bucket's latest checkpoint after the overtaken publication:\n%s\nwant the later one, of size 10", cp)
	}
}

// A ledger that checked the bucket and found no log, while another ledger
// publishes its own log there before this one's puts are done, does not
// replace the other's latest checkpoint: its conditional write is refused,
// the publication fails as one to retry, and the next finds the other log.
func TestAnotherLogPublishedDuringAPublicationIsNotReplaced(t *testing.T) {
	bucket := t.TempDir()
	signerA, _ := logKeys(t)
	a := ledgerOnBucket(t, bucket, signerA)
	objects, err := localdir.Open(bucket)
	if err != nil {
		t.Fatal(err)
	}
	raced := false
	store := hookedStore{Store: objects, beforePut: func(key string) {
		if raced || !strings.HasPrefix(key, ledger.LogPrefix+"tile/") {
			return
		}
		raced = true
		if err := a.grow(t, 0, 5); err != nil {
			t.Errorf("the other ledger's publication: %v", err)
		}
	}}
	signerB, _ := logKeys(t)
	b := ledgerOn(t, store, signerB)
	err = b.grow(t, 100, 7)
	if !raced {
		t.Fatal("the other ledger did not publish during the publication")
	}
	if !errors.Is(err, ledger.ErrObjectChanged) || errors.Is(err, ledger.ErrLogDiverged) || !strings.Contains(err.Error(), "changed while this ledger published its log") {
		t.Errorf("a publication raced by another log's: %v; want ErrObjectChanged, to retry", err)
	}
	want := readObject(t, bucket, ledger.LogPrefix+"checkpoints/5")
	if got := readObject(t, bucket, ledger.LogPrefix+"checkpoint"); !bytes.Equal(got, want) {
		t.Errorf("the bucket's latest checkpoint:\n%s\nwant the other ledger's of size 5:\n%s", got, want)
	}
	checkForeign(t, b.l.PublishTiles(context.Background()), "not by this ledger's log key", bucket, want)
	if err := a.grow(t, 5, 1); err != nil {
		t.Errorf("the other ledger publishing on: %v", err)
	}
}

// A checkpoint no key of this ledger signed, put in the bucket by whoever
// may write there (the log's origin, a size far past the log's, any
// signature), says nothing of whose log this is: it stops neither signing
// nor serving what was published, restarted or not. Nothing is published
// over it (so what is signed since is not served), and fsck names it.
func TestACheckpointThisLedgerDidNotSignStopsNoSigning(t *testing.T) {
	ctx := context.Background()
	bucket := t.TempDir()
	signer, _ := logKeys(t)
	a := ledgerOnBucket(t, bucket, signer)
	if err := a.grow(t, 0, 5); err != nil {
		t.Fatal(err)
	}
	forged := forgedCheckpoint(1000000)
	if err := os.WriteFile(filepath.Join(bucket, "log", "checkpoint"), []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	checkForeign(t, a.grow(t, 5, 3), "the bucket's log/checkpoint (of the log \""+testOrigin+"\", 1000000 leaves) is signed by "+testOrigin+"+00000000, not by this ledger's log key", bucket, []byte(forged))

	// Restarted on the same row store and bucket, as ledgerd runs it.
	a.restartIntegrating(t, signer, 10)
	if _, err := a.l.LogDiverged(); err != nil {
		t.Errorf("LogDiverged: %v", err)
	}
	if size, err := a.l.TreeSize(ctx); err != nil || size != 10 {
		t.Errorf("the row store's log: %d leaves (%v), want 10 signed", size, err)
	}
	if cp, err := a.l.Checkpoint(ctx); err != nil || !strings.Contains(string(cp), "\n5\n") {
		t.Errorf("the checkpoint served: %v\n%s\nwant the one published, of size 5", err, cp)
	}
	if got := readObject(t, bucket, ledger.LogPrefix+"checkpoint"); string(got) != forged {
		t.Errorf("the bucket's latest checkpoint was replaced:\n%s", got)
	}
	page, err := a.l.CheckIntegrity(ctx, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range page.Findings {
		found = found || strings.Contains(f.Problem, "the bucket's log/checkpoint (of the log \""+testOrigin+"\", 1000000 leaves) is signed by")
		if strings.Contains(f.Problem, "is not the published log") || strings.Contains(f.Problem, "not the row store's") {
			t.Errorf("fsck takes the bucket's log for another: %s", f.Problem)
		}
	}
	if !found {
		t.Errorf("fsck does not name the checkpoint this ledger did not sign: %+v", page.Findings)
	}
}

// Tiles carry no signature: a tile put past the log's edge by whoever may
// write to the bucket, which no checkpoint this ledger signed vouches for,
// stops neither the signing of a new holder of the integrator's lease nor
// its serving. It is reported, and refuses the publications (nothing is
// put over it).
func TestAStrayTileStopsNoSigning(t *testing.T) {
	ctx := context.Background()
	bucket := t.TempDir()
	signer, _ := logKeys(t)
	a := ledgerOnBucket(t, bucket, signer)
	if err := a.grow(t, 0, 5); err != nil {
		t.Fatal(err)
	}
	if pending := readObject(t, bucket, ledger.PendingKey); !strings.HasPrefix(string(pending), testOrigin+"\n5\n") {
		t.Fatalf("the record of the publication begun: %q, want the checkpoint of 5 leaves", pending)
	}
	stray := filepath.Join(bucket, "log", "tile", "0", "000.p", "7")
	if err := os.WriteFile(stray, make([]byte, 7*32), 0o644); err != nil {
		t.Fatal(err)
	}
	a.restartIntegrating(t, signer, 7)
	if _, err := a.l.LogDiverged(); err != nil {
		t.Errorf("LogDiverged: %v", err)
	}
	if _, err := a.l.Checkpoint(ctx); err != nil {
		t.Errorf("the checkpoint served: %v", err)
	}
	if !strings.Contains(a.logs.String(), "the bucket's tiles cover 7 leaves, more than any checkpoint it keeps, and the latest publication this ledger began (log/pending) was of 5: tiles put outside this ledger") {
		t.Errorf("the stray tile is not reported:\n%s", a.logs.String())
	}
	waitUntil(t, "the publication refused", func() bool {
		_, err := a.l.LogPublicationRefused()
		return err != nil
	})
	if _, err := a.l.LogPublicationRefused(); !errors.Is(err, ledger.ErrForeignObject) {
		t.Errorf("LogPublicationRefused: %v", err)
	}
	if b, _ := os.ReadFile(stray); !bytes.Equal(b, make([]byte, 7*32)) {
		t.Error("the stray tile was written over")
	}
}

// Objects anyone may put in the bucket hide no fork of the published log
// from a row store restored from an older backup: a checkpoint put over
// the live one, a full tile past the log's edge, and the record of the
// publication begun put over too. The ledger's own checkpoints kept by
// size are found behind them, and the restored log, grown with other
// leaves, is not published over the one its key signed.
func TestForeignObjectsHideNoForkOfThePublishedLog(t *testing.T) {
	for _, overPending := range []bool{false, true} {
		t.Run(fmt.Sprintf("pending put over %v", overPending), func(t *testing.T) {
			h, bucket, signer, backup := publishedPastABackup(t)
			forged := forgedCheckpoint(1)
			over := []string{"checkpoint"}
			if overPending {
				over = append(over, "pending")
			}
			for _, key := range over {
				p := filepath.Join(bucket, "log", key)
				if err := os.Chmod(p, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(forged), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(bucket, "log", "tile", "0", "000"), make([]byte, 256*32), 0o444); err != nil {
				t.Fatal(err)
			}

			h.store.Close()
			copyFile(t, backup, filepath.Join(h.dir, "ledger.db"))
			h.open(t)
			if err := h.l.EnableLog(ledger.LogConfig{Signer: signer}); err != nil {
				t.Fatal(err)
			}
			if err := h.grow(t, 50, 4); !errors.Is(err, ledger.ErrLogDiverged) {
				t.Errorf("the restored row store's log, grown with other leaves, published over the log of 6: %v", err)
			}
		})
	}
}

// publishedPastABackup is a ledger on the evidence directory bucket that
// published 6 leaves, and a copy of its row store (backup) taken at 3.
func publishedPastABackup(t *testing.T) (h *harness, bucket string, signer note.Signer, backup string) {
	t.Helper()
	bucket = t.TempDir()
	signer, _ = logKeys(t)
	h = ledgerOnBucket(t, bucket, signer)
	if err := h.grow(t, 0, 3); err != nil {
		t.Fatal(err)
	}
	backup = filepath.Join(t.TempDir(), "ledger.db")
	h.store.Close()
	copyFile(t, filepath.Join(h.dir, "ledger.db"), backup)
	h.open(t)
	if err := h.l.EnableLog(ledger.LogConfig{Signer: signer}); err != nil {
		t.Fatal(err)
	}
	if err := h.grow(t, 3, 3); err != nil {
		t.Fatal(err)
	}
	return h, bucket, signer, backup
}

// forgedCheckpoint is a checkpoint of the test log's origin and size n
// whose signature no key made.
func forgedCheckpoint(n int) string {
	return fmt.Sprintf("%s\n%d\n%s\n\n— %s %s\n", testOrigin, n, base64.StdEncoding.EncodeToString(make([]byte, 32)), testOrigin, base64.StdEncoding.EncodeToString(make([]byte, 68)))
}

// restartIntegrating opens h's row store again with an integrator
// running under signer, as ledgerd restarts, queues two leaves and waits
// until the log holds size leaves.
func (h *harness) restartIntegrating(t *testing.T, signer note.Signer, size int64) {
	t.Helper()
	h.store.Close()
	h.open(t)
	runIntegrator(t, h.l, signer)
	h.queue(t, 100, 2)
	waitUntil(t, "the queued leaves signed", func() bool {
		n, _ := h.l.TreeSize(context.Background())
		return n == size
	})
}

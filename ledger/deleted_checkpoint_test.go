package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
)

// A deleted checkpoint is what these tests look for in a report.
const (
	deletedLive  = "a delete marker hides the bucket's latest checkpoint log/checkpoint"
	missingLive  = "the bucket's latest checkpoint log/checkpoint is missing, though the bucket keeps checkpoints of the log"
	deletedWarn  = `level=WARN msg="checkpoints of the Merkle log were deleted from write-once storage`
	deletedFsck  = "checkpoints of the log published to write-once storage were deleted: "
	divergedFsck = "the published checkpoint has 10 leaves"
	notRecreated = "the bucket's latest checkpoint was written again over the deletion while the log diverged"
)

// restoredAtSevenOn is restoredAtSeven on any object store: a ledger
// published a log of 10 leaves to objects, then had its row store
// restored from a backup taken at 7 leaves.
func restoredAtSevenOn(t *testing.T, objects ledger.ObjectStore) *harness {
	t.Helper()
	h := ledgerOn(t, objects, nil)
	backup := backedUpAtSeven(t, h)
	if err := h.grow(t, 7, 3); err != nil {
		t.Fatal(err)
	}
	if cp, err := objects.Get(context.Background(), ledger.LogPrefix+"checkpoint"); err != nil || !strings.HasPrefix(string(cp), testOrigin+"\n10\n") {
		t.Fatalf("the published checkpoint: %v\n%s\nwant one of size 10", err, cp)
	}
	h.store.Close()
	copyFile(t, backup, filepath.Join(h.dir, "ledger.db"))
	h.logs = &syncbuf.Buffer{}
	h.open(t)
	return h
}

// checkNoFork checks that l, its row store restored at 7 leaves under a
// published log of 10 whose latest checkpoint was deleted or replaced,
// signs no checkpoint and writes none to the bucket, and that the ledger
// says what was deleted (deleted; "" for nothing), and fsck too (with
// fsckSays besides).
func checkNoFork(t *testing.T, h *harness, deleted, fsckSays string) {
	t.Helper()
	ctx := context.Background()
	startIntegrator(t, h.l, h)
	h.queue(t, 50, 2) // rows recorded after the restore
	waitUntil(t, "the divergence found, or a fork signed", func() bool {
		_, err := h.l.LogDiverged()
		size, _ := h.l.TreeSize(ctx)
		return err != nil || size > 7
	})
	if _, err := h.l.Integrate(ctx); !errors.Is(err, ledger.ErrLogDiverged) {
		t.Errorf("Integrate while the log diverged: %v; want the divergence", err)
	}
	if size, err := h.l.TreeSize(ctx); err != nil || size != 7 {
		t.Errorf("the row store's tree: size %d (%v), want 7: a fork of the published log was signed", size, err)
	}
	if _, err := h.l.LogDiverged(); err == nil || !strings.Contains(err.Error(), "has 10 leaves, this ledger's log 7") || !strings.Contains(err.Error(), deleted) {
		t.Errorf("LogDiverged: %v; want the checkpoint of size 10 the bucket keeps, and that %q", err, deleted)
	}
	liveDeleted := deleted == deletedLive || deleted == missingLive
	if cp, err := h.objects.Get(ctx, ledger.LogPrefix+"checkpoint"); liveDeleted && !errors.Is(err, ledger.ErrNotFound) || strings.HasPrefix(string(cp), testOrigin+"\n9\n") {
		t.Errorf("%s: %v\n%s", notRecreated, err, cp)
	}
	for _, key := range []string{"checkpoints/8", "checkpoints/9"} {
		if _, err := h.objects.Get(ctx, ledger.LogPrefix+key); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("the bucket holds %s%s of a fork: %v", ledger.LogPrefix, key, err)
		}
	}
	if deleted != "" && (!strings.Contains(h.logs.String(), deletedWarn) || !strings.Contains(h.logs.String(), deleted)) {
		t.Errorf("the ledger did not warn that the checkpoints were deleted (%q):\n%s", deleted, h.logs)
	}
	page, err := h.l.CheckIntegrity(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	got := problems(page)
	if !strings.Contains(got, divergedFsck) || deleted != "" && (!strings.Contains(got, deletedFsck) || !strings.Contains(got, deleted)) || !strings.Contains(got, fsckSays) {
		t.Errorf("fsck's findings:\n%s\nwant the published checkpoint of size 10, and the deletion (%q, %q)", got, deleted, fsckSays)
	}
}

// A row store restored from a backup older than the log it published
// signs no fork of it when the bucket's latest checkpoint was deleted:
// the integrator finds the checkpoint of size 10 kept by size in the
// evidence directory, and recreates no latest checkpoint over the
// deletion.
func TestADeletedLatestCheckpointDoesNotLetARestoredLedgerFork(t *testing.T) {
	bucket := t.TempDir()
	objects := dirObjects(t, bucket)
	h := restoredAtSevenOn(t, objects)
	if err := os.Remove(filepath.Join(bucket, "log", "checkpoint")); err != nil {
		t.Fatal(err)
	}
	checkNoFork(t, h, missingLive, "")
}

// On S3 a plain DELETE of the latest checkpoint puts a delete marker over
// its locked versions: the restored row store signs no fork, whether the
// checkpoints kept by size are still in sight or hidden by delete
// markers too.
func TestADeleteMarkerOverTheLatestCheckpointDoesNotLetARestoredLedgerFork(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bySize   bool   // delete markers over log/checkpoints/N too
		fsckSays string // besides the deleted latest checkpoint
	}{
		{"latest checkpoint", false, ""},
		{"every checkpoint", true, "delete markers hide 2 of its checkpoints by size (log/checkpoints/7, log/checkpoints/10)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := s3test.Bucket()
			h := restoredAtSevenOn(t, s3Objects(t, name))
			keys := []string{"checkpoint"}
			if tc.bySize {
				keys = append(keys, "checkpoints/7", "checkpoints/10")
			}
			deleteMarkers(t, name, keys...)
			checkNoFork(t, h, deletedLive, tc.fsckSays)
		})
	}
}

// A latest checkpoint replaced by an older one of the same log (as
// someone who may write to the bucket can: a copy of a checkpoint kept by
// size, signed by the ledger) does not let a restored row store fork
// either: the tiles in the bucket cover 10 leaves, so the checkpoint of
// that size is read and compared, on S3 even behind a delete marker.
func TestAnOlderLatestCheckpointDoesNotLetARestoredLedgerFork(t *testing.T) {
	t.Run("directory", func(t *testing.T) {
		bucket := t.TempDir()
		h := restoredAtSevenOn(t, dirObjects(t, bucket))
		live := filepath.Join(bucket, "log", "checkpoint")
		if err := os.Remove(live); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(live, readObject(t, bucket, ledger.LogPrefix+"checkpoints/7"), 0o400); err != nil {
			t.Fatal(err)
		}
		checkNoFork(t, h, "", "")
	})
	t.Run("s3", func(t *testing.T) {
		ctx := context.Background()
		name := s3test.Bucket()
		h := restoredAtSevenOn(t, s3Objects(t, name))
		older, err := h.objects.Get(ctx, ledger.LogPrefix+"checkpoints/7")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rawS3(t).PutObject(ctx, name, ledger.LogPrefix+"checkpoint", bytes.NewReader(older), int64(len(older)), minio.PutObjectOptions{SendContentMd5: true}); err != nil {
			t.Fatal(err)
		}
		deleteMarkers(t, name, "checkpoints/10")
		checkNoFork(t, h, "delete markers hide 1 of its checkpoints by size (log/checkpoints/10)", "")
	})
}

// deleteMarkers deletes each of the log's keys from bucket name as a
// plain S3 DELETE does: a delete marker over its locked versions.
func deleteMarkers(t *testing.T, name string, keys ...string) {
	t.Helper()
	c := rawS3(t)
	for _, key := range keys {
		if err := c.RemoveObject(context.Background(), name, ledger.LogPrefix+key, minio.RemoveObjectOptions{}); err != nil {
			t.Fatalf("delete %s: %v", key, err)
		}
	}
}

// dirObjects is the evidence directory dir as an object store.
func dirObjects(t *testing.T, dir string) ledger.ObjectStore {
	t.Helper()
	objects, err := localdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return objects
}

// A deleted latest checkpoint does not stop a ledger whose log extends
// what the bucket keeps: fsck reports the deletion, the ledger warns of
// it at its next publication and writes the latest checkpoint again, of
// the log's new size.
func TestADeletedLatestCheckpointIsReportedAndWrittenAgain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objects func(t *testing.T) (ledger.ObjectStore, func(t *testing.T))
		says    string
	}{
		{"directory", func(t *testing.T) (ledger.ObjectStore, func(t *testing.T)) {
			dir := t.TempDir()
			return dirObjects(t, dir), func(t *testing.T) {
				if err := os.Remove(filepath.Join(dir, "log", "checkpoint")); err != nil {
					t.Fatal(err)
				}
			}
		}, missingLive},
		{"s3", func(t *testing.T) (ledger.ObjectStore, func(t *testing.T)) {
			name := s3test.Bucket()
			return s3Objects(t, name), func(t *testing.T) { deleteMarkers(t, name, "checkpoint") }
		}, deletedLive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			objects, remove := tc.objects(t)
			signer, _ := logKeys(t)
			h := ledgerOn(t, objects, signer)
			if err := h.grow(t, 0, 5); err != nil {
				t.Fatal(err)
			}
			remove(t)
			page, err := h.l.CheckIntegrity(ctx, 0, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := problems(page); !strings.Contains(got, deletedFsck) || !strings.Contains(got, tc.says) || strings.Contains(got, "the published checkpoint has") {
				t.Errorf("fsck's findings:\n%s\nwant the deletion (%q) and no divergence", got, tc.says)
			}
			if err := h.grow(t, 5, 2); err != nil {
				t.Fatalf("publishing after the latest checkpoint was deleted: %v", err)
			}
			if cp, err := objects.Get(ctx, ledger.LogPrefix+"checkpoint"); err != nil || !strings.HasPrefix(string(cp), testOrigin+"\n7\n") {
				t.Errorf("the latest checkpoint after the next publication: %v\n%s\nwant the one of size 7", err, cp)
			}
			if !strings.Contains(h.logs.String(), deletedWarn) || !strings.Contains(h.logs.String(), tc.says) {
				t.Errorf("the ledger did not warn that the latest checkpoint was deleted:\n%s", h.logs)
			}
			page, err = h.l.CheckIntegrity(ctx, 0, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := problems(page); strings.Contains(got, deletedFsck) {
				t.Errorf("fsck after the latest checkpoint was written again:\n%s", got)
			}
		})
	}
}

// listingStore counts the listings of the bucket's kept keys.
type listingStore struct {
	*localdir.Store
	listings *atomic.Int32
}

func (s listingStore) ListKept(ctx context.Context, prefix string, fn func(ledger.KeptKey) error) error {
	s.listings.Add(1)
	return s.Store.ListKept(ctx, prefix, fn)
}

// The checkpoints are listed by a ledger's first check of the bucket and
// when the latest checkpoint is found missing, not before each
// publication: those read the latest checkpoint alone.
func TestPublicationsDoNotListTheCheckpoints(t *testing.T) {
	var listings atomic.Int32
	dir := t.TempDir()
	objects := listingStore{Store: dirObjects(t, dir).(*localdir.Store), listings: &listings}
	signer, _ := logKeys(t)
	h := ledgerOn(t, objects, signer)
	if err := h.grow(t, 0, 5); err != nil {
		t.Fatal(err)
	}
	if n := listings.Load(); n == 0 {
		t.Fatal("the first check did not list the bucket's checkpoints")
	}
	listings.Store(0)
	for i := range 3 {
		if err := h.grow(t, 5+i, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := listings.Load(); n != 0 {
		t.Errorf("%d listings of the bucket by publications that found the latest checkpoint; want none", n)
	}
	if err := os.Remove(filepath.Join(dir, "log", "checkpoint")); err != nil {
		t.Fatal(err)
	}
	if err := h.grow(t, 8, 1); err != nil {
		t.Fatal(err)
	}
	if n := listings.Load(); n == 0 {
		t.Error("a publication that found no latest checkpoint did not list the bucket's checkpoints")
	}
}

// The first publication puts the log's checkpoints by size before its
// latest checkpoint: fsck run between the two finds no deletion, since no
// publication of the row store's log has ended yet.
func TestFsckDuringTheFirstPublicationFindsNoDeletion(t *testing.T) {
	ctx := context.Background()
	objects, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := logKeys(t)
	hooked := &swapHooked{Store: objects}
	h := ledgerOn(t, hooked, signer)
	var between string
	hooked.beforeSwap = func(key string) {
		if key != ledger.LogPrefix+"checkpoint" || between != "" {
			return
		}
		page, err := h.l.CheckIntegrity(ctx, 0, "")
		if err != nil {
			t.Error(err)
			return
		}
		between = problems(page) + "."
	}
	if err := h.grow(t, 0, 5); err != nil {
		t.Fatal(err)
	}
	if between == "" || strings.Contains(between, deletedFsck) || strings.Contains(between, missingLive) {
		t.Errorf("fsck between the checkpoints by size and the latest one of the first publication:\n%s", between)
	}
}

// swapHooked runs beforeSwap ahead of each version swap (the latest
// checkpoint's write).
type swapHooked struct {
	*localdir.Store
	beforeSwap func(key string)
}

func (s *swapHooked) SwapVersion(ctx context.Context, key string, body []byte, until time.Time, prev []byte) (ledger.Location, error) {
	if s.beforeSwap != nil {
		s.beforeSwap(key)
	}
	return s.Store.SwapVersion(ctx, key, body, until, prev)
}

// getHooked runs afterGet once a read of a key has its answer, before it
// returns it.
type getHooked struct {
	*swapHooked
	afterGet func(key string, err error)
}

func (s *getHooked) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := s.swapHooked.Get(ctx, key)
	if s.afterGet != nil {
		s.afterGet(key, err)
	}
	return b, err
}

// fsck that reads the latest checkpoint as missing while the first
// publication is under way, and reads the rest once that publication
// ended, finds no deletion: the publication put its latest checkpoint
// after fsck's read.
func TestFsckAcrossTheEndOfTheFirstPublicationFindsNoDeletion(t *testing.T) {
	ctx := context.Background()
	objects, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := logKeys(t)
	hooked := &getHooked{swapHooked: &swapHooked{Store: objects}}
	h := ledgerOn(t, hooked, signer)
	read, published := make(chan struct{}), make(chan struct{})
	var fsck atomic.Bool
	hooked.afterGet = func(key string, err error) {
		if fsck.Load() && key == ledger.LogPrefix+"checkpoint" && errors.Is(err, ledger.ErrNotFound) {
			close(read)
			<-published
		}
	}
	result := make(chan string, 1)
	started := false
	hooked.beforeSwap = func(key string) {
		if key != ledger.LogPrefix+"checkpoint" || started {
			return
		}
		started = true
		fsck.Store(true)
		go func() {
			page, err := h.l.CheckIntegrity(ctx, 0, "")
			if err != nil {
				result <- err.Error()
				return
			}
			result <- problems(page) + "."
		}()
		<-read
	}
	if err := h.grow(t, 0, 5); err != nil {
		t.Fatal(err)
	}
	close(published)
	if got := <-result; strings.Contains(got, deletedFsck) || strings.Contains(got, missingLive) {
		t.Errorf("fsck that read the latest checkpoint before the first publication put it:\n%s", got)
	}
}

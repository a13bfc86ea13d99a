package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	bbolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/proof"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/bolt"
)

// TestIntegratorCrashRestart kills ledgerd with SIGKILL several times while
// writers post receipts and the integrator extends the Merkle log every
// 20 ms (some kills right after a new checkpoint, while its tiles are being
// published to S3). After a restart every committed row has exactly one
// leaf, indexes run 0..N-1 without a gap or a double, each acknowledged
// row's proof names the leaf the entry bundles hold at its index, the
// leaves rebuild the root of the signed checkpoint, every checkpoint seen
// before a crash is consistent with the last, and the bucket's tiles
// rebuild it too.
func TestIntegratorCrashRestart(t *testing.T) {
	bin, sc, cfg, cfgPath := crashSetup(t, func(cfg *config.Config) {
		cfg.MerkleLog.Interval = config.Duration(20 * time.Millisecond)
	})
	bucket := cfg.Evidence.S3.Bucket
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)

	const trials, perTrial = 5, 250
	corpus := corpus(sc, trials*perTrial, "L-")
	wctx := authCtx(context.Background(), "writer")
	var (
		mu       sync.Mutex
		acked    []string             // row ids
		seen     []*proof.Checkpoint  // a checkpoint read before each crash
		seenRaw  = map[int64][]byte{} // its signed bytes
		logKey   string               // the verifier key, the same across restarts
		readCP   func(c ledgerv1.LedgerServiceClient) (*proof.Checkpoint, []byte, error)
		killedAt []int64
	)
	readCP = func(c ledgerv1.LedgerServiceClient) (*proof.Checkpoint, []byte, error) {
		rep, err := c.GetCheckpoint(context.Background(), &ledgerv1.GetCheckpointRequest{})
		if err != nil {
			return nil, nil, err
		}
		if logKey == "" {
			logKey = rep.GetVerifierKey()
		} else if rep.GetVerifierKey() != logKey {
			return nil, nil, fmt.Errorf("verifier key changed across a restart: %s, was %s", rep.GetVerifierKey(), logKey)
		}
		cp, err := proof.Open([]byte(rep.GetCheckpoint()), logKey)
		if err != nil {
			return nil, nil, err
		}
		return &cp, []byte(rep.GetCheckpoint()), nil
	}

	for trial := range trials {
		p := startLedgerd(t, bin, cfgPath, grpcAddr, httpAddr)
		conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		client := ledgerv1.NewLedgerServiceClient(conn)
		ackedNow, wait := postCorpus(wctx, client, corpus, trial*perTrial, (trial+1)*perTrial, func(rep *ledgerv1.AppendReceiptResponse) {
			mu.Lock()
			acked = append(acked, rep.GetRow().GetId())
			mu.Unlock()
		})
		deadline := time.Now().Add(30 * time.Second)
		waitAcked(ackedNow, perTrial/2, deadline)
		cp, signed, err := readCP(client)
		if err != nil {
			t.Fatal(err)
		}
		if trial%2 == 1 {
			// Kill right after the integrator signs a new checkpoint:
			// its tiles are then on their way to S3.
			for time.Now().Before(deadline) {
				next, nextSigned, err := readCP(client)
				if err != nil {
					t.Fatal(err)
				}
				if next.Size > cp.Size {
					cp, signed = next, nextSigned
					break
				}
			}
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = p.cmd.Wait()
		wait()
		conn.Close()
		seen = append(seen, cp)
		seenRaw[cp.Size] = signed
		killedAt = append(killedAt, ackedNow.Load())
	}
	t.Logf("acknowledged %d rows over %d crashes (per run %v); checkpoint sizes read before each crash: %v", len(acked), trials, killedAt, sizes(seen))

	// Restart: the integrator logs whatever the crashes left queued.
	p := startLedgerd(t, bin, cfgPath, grpcAddr, httpAddr)
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ledgerv1.NewLedgerServiceClient(conn)
	rctx := authCtx(context.Background(), "auditor")
	proofs := map[string]*ledgerv1.GetRowProofResponse{}
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range acked {
		for {
			rep, err := client.GetRowProof(rctx, &ledgerv1.GetRowProofRequest{Id: id})
			if err == nil {
				proofs[id] = rep
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("acknowledged row %s has no proof after the restart: %v", id, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	last, lastSigned, err := readCP(client)
	if err != nil {
		t.Fatal(err)
	}
	// Exactly one leaf index per acknowledged row, each under the latest
	// checkpoint, its bundle verifying offline.
	byIndex := map[int64]string{}
	for id, rep := range proofs {
		if other, dup := byIndex[rep.GetLeafIndex()]; dup {
			t.Fatalf("rows %s and %s share leaf %d", id, other, rep.GetLeafIndex())
		}
		byIndex[rep.GetLeafIndex()] = id
		b, err := proof.ParseBundle([]byte(rep.GetBundle()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Verify(logKey); err != nil {
			t.Fatalf("row %s: %v", id, err)
		}
	}

	// The leaves as a tlog-tiles client reads them: entry bundles for
	// 0..N-1, each row once, each acknowledged row at its proof's index.
	var leaves [][]byte
	for n := int64(0); n*256 < last.Size; n++ {
		path := fmt.Sprintf("/v1/log/%s", entriesTile(n, last.Size))
		leaves = append(leaves, entries(t, getOK(t, "http://"+p.httpAddr+path))...)
	}
	if int64(len(leaves)) != last.Size {
		t.Fatalf("entry bundles hold %d leaves, the checkpoint %d", len(leaves), last.Size)
	}
	rowAt := map[string]int64{}
	starts := 0
	for i, l := range leaves {
		f, err := ledger.ParseLeaf(l)
		if err != nil {
			t.Fatalf("leaf %d: %v", i, err)
		}
		if f["kind"] == ledger.LeafPolicy {
			starts++ // each start logs its retention policy
			continue
		}
		id := f["row"]
		if j, dup := rowAt[id]; dup {
			t.Fatalf("row %s has two leaves: %d and %d", id, j, i)
		}
		rowAt[id] = int64(i)
	}
	for id, rep := range proofs {
		if i, ok := rowAt[id]; !ok || i != rep.GetLeafIndex() || string(leaves[i]) != rep.GetLeaf() {
			t.Fatalf("row %s: proof says leaf %d, the entry bundles %d (found %v)", id, rep.GetLeafIndex(), i, ok)
		}
	}
	// The leaves, in order, are the tree the checkpoint signs.
	if root := treeOf(t, leaves); root != last.Hash {
		t.Fatalf("the %d leaves hash to %v, the checkpoint says %v", len(leaves), root, last.Hash)
	}
	// Every checkpoint read before a crash is a prefix of the last one.
	for _, old := range seen {
		rep, err := client.GetConsistencyProof(context.Background(), &ledgerv1.GetConsistencyProofRequest{From: old.Size, To: last.Size})
		if err != nil {
			t.Fatal(err)
		}
		var path []tlog.Hash
		for _, h := range rep.GetProof() {
			path = append(path, tlog.Hash(h))
		}
		if err := proof.VerifyConsistency(*old, *last, path); err != nil {
			t.Fatalf("checkpoint %d before a crash and %d after: %v\n%s", old.Size, last.Size, err, seenRaw[old.Size])
		}
	}

	// The bucket catches up: its live checkpoint reaches the last size and
	// its tiles (some re-put after a crash) rebuild the root.
	s3c, err := minio.New(s3srv.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3srv.AccessKey, s3srv.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	br := bucketTiles{c: s3c, bucket: bucket}
	for {
		live, err := br.get(ledger.LogPrefix + "checkpoint")
		if err == nil && bytes.Equal(live, lastSigned) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bucket's checkpoint did not reach size %d: %v\n%s", last.Size, err, live)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if root, err := tlog.TreeHash(last.Size, tlog.TileHashReader(tlog.Tree{N: last.Size, Hash: last.Hash}, br)); err != nil || root != last.Hash {
		t.Fatalf("tree from the bucket's tiles: %v %v", root, err)
	}

	// Stopped, the row store holds one leaf per row and one per start, and
	// nothing queued.
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	db, err := bbolt.Open(filepath.Join(cfg.DataDir, "ledger.db"), 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		rows := 0
		numbers, err := bolt.RowNumbers(tx)
		if err != nil {
			return err
		}
		for k := range numbers {
			if _, ok := rowAt[bolt.IDString(k)]; !ok {
				return fmt.Errorf("committed row %s has no leaf", bolt.IDString(k))
			}
			rows++
		}
		pending := tx.Bucket([]byte("log_pending")).Stats().KeyN
		if int64(rows+starts) != last.Size || pending != 0 {
			return fmt.Errorf("%d rows and %d policy leaves, %d leaves, %d leaves still queued", rows, starts, last.Size, pending)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows, %d acknowledged, %d starts, leaves 0..%d", last.Size-int64(starts), len(acked), starts, last.Size-1)
}

func sizes(cps []*proof.Checkpoint) []int64 {
	out := make([]int64, len(cps))
	for i, c := range cps {
		out[i] = c.Size
	}
	return out
}

// entriesTile is the C2SP path of the n-th entry bundle of a tree of size
// size: full, or partial for the last one.
func entriesTile(n, size int64) string {
	p := fmt.Sprintf("tile/entries/%s", strings.TrimPrefix(tlog.Tile{H: 8, L: 0, N: n, W: 256}.Path(), "tile/8/0/"))
	if w := size - n*256; w < 256 {
		p = fmt.Sprintf("tile/entries/%s", strings.TrimPrefix(tlog.Tile{H: 8, L: 0, N: n, W: int(w)}.Path(), "tile/8/0/"))
	}
	return p
}

// entries splits a C2SP entry bundle into its entries.
func entries(t *testing.T, bundle []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(bundle) > 0 {
		if len(bundle) < 2 {
			t.Fatal("entry bundle ends inside a length")
		}
		n := int(binary.BigEndian.Uint16(bundle))
		if len(bundle) < 2+n {
			t.Fatal("entry bundle ends inside an entry")
		}
		out = append(out, bundle[2:2+n])
		bundle = bundle[2+n:]
	}
	return out
}

func getOK(t *testing.T, url string) []byte {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %v: %s", url, res.StatusCode, err, b)
	}
	return b
}

// treeOf is the RFC 6962 root of leaves, computed with x/mod's stored
// hashes in memory, independently of the server.
func treeOf(t *testing.T, leaves [][]byte) tlog.Hash {
	t.Helper()
	var stored []tlog.Hash
	hr := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	for i, l := range leaves {
		hs, err := tlog.StoredHashes(int64(i), l, hr)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, hs...)
	}
	root, err := tlog.TreeHash(int64(len(leaves)), hr)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// bucketTiles reads the log's tiles from the bucket, as a tlog-tiles client.
type bucketTiles struct {
	c      *minio.Client
	bucket string
}

func (b bucketTiles) get(key string) ([]byte, error) {
	obj, err := b.c.GetObject(context.Background(), b.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	return io.ReadAll(obj)
}

func (bucketTiles) Height() int { return ledger.TileHeight }

func (b bucketTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		d, err := b.get(ledger.LogPrefix + strings.Replace(t.Path(), "tile/8/", "tile/", 1))
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

func (bucketTiles) SaveTiles([]tlog.Tile, [][]byte) {}

package server_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/bolt"
)

// TestCrashesLeaveNoOrphanObjects kills ledgerd with SIGKILL several times
// while writers post and the uploader puts segments into S3; after a
// restart drains the outbox, S3 holds exactly the objects the row store
// names: no segment put before a crash and then put again under another
// key, no dead letters.
func TestCrashesLeaveNoOrphanObjects(t *testing.T) {
	bin, sc, cfg, cfgPath := crashSetup(t, func(cfg *config.Config) {
		cfg.Uploader.Batch = 32 // many small rounds: many puts in flight at each kill
	})
	bucket := cfg.Evidence.S3.Bucket
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)

	const trials, perTrial = 5, 300
	corpus := corpus(sc, trials*perTrial, "O-")
	wctx := authCtx(context.Background(), "writer")
	for trial := range trials {
		p := startLedgerd(t, bin, cfgPath, grpcAddr, httpAddr)
		conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		client := ledgerv1.NewLedgerServiceClient(conn)
		acked, wait := postCorpus(wctx, client, corpus, trial*perTrial, (trial+1)*perTrial, nil)
		waitAcked(acked, perTrial/2, time.Now().Add(30*time.Second))
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = p.cmd.Wait()
		wait()
		conn.Close()
	}

	// Restart and let the outbox drain.
	p := startLedgerd(t, bin, cfgPath, grpcAddr, httpAddr)
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ledgerv1.NewLedgerServiceClient(conn)
	actx := authCtx(context.Background(), "admin")
	deadline := time.Now().Add(60 * time.Second)
	for {
		rep, err := client.GetOutbox(actx, &ledgerv1.GetOutboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.GetDepth() == 0 && rep.GetPlannedSegments() == 0 {
			if rep.GetDeadLetterCount() != 0 {
				t.Fatalf("dead letters after the crashes: %v", rep.GetDeadLetters())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox still holds %d entries, %d planned segments", rep.GetDepth(), rep.GetPlannedSegments())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()

	// The keys the row store names ...
	ex, err := bolt.OpenExport(filepath.Join(cfg.DataDir, "ledger.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for after := []byte(nil); ; {
		recs, err := ex.Records(bolt.ExportObjects, after, 1000)
		if err != nil {
			ex.Close()
			t.Fatal(err)
		}
		for _, r := range recs {
			var loc struct{ Key string }
			if err := json.Unmarshal(r.Body, &loc); err != nil {
				ex.Close()
				t.Fatal(err)
			}
			named[loc.Key] = true
			after = r.Key
		}
		if len(recs) < 1000 {
			break
		}
	}
	ex.Close()
	var want []string
	for k := range named {
		want = append(want, k)
	}
	slices.Sort(want)
	// ... are exactly the objects in S3.
	c, err := minio.New(s3srv.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3srv.AccessKey, s3srv.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for o := range c.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if strings.HasPrefix(o.Key, ledger.LogPrefix) {
			continue // the Merkle log's tiles and checkpoints: named by the tree, not by rows
		}
		got = append(got, o.Key)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		var orphans []string
		for _, k := range got {
			if !named[k] {
				orphans = append(orphans, k)
			}
		}
		t.Fatalf("S3 holds %d objects, the row store names %d; orphans: %v", len(got), len(want), orphans)
	}
	t.Logf("%d objects in S3, all named by the row store", len(got))
}

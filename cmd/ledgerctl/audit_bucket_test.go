package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger/proof"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// s3Fixture is ledgerd publishing to a bucket of a real S3 server with
// Object Lock, and the flags an auditor reads the bucket with.
type s3Fixture struct {
	*fixture
	srv    *s3test.Server
	bucket string
}

func startOnS3(t *testing.T) *s3Fixture {
	t.Helper()
	srv, err := s3test.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	bucket := s3test.Bucket()
	f := startWith(t, insecure.NewCredentials(), func(c *config.Config) {
		c.Evidence = config.Evidence{Type: "s3", S3: config.S3{Endpoint: srv.Endpoint, Bucket: bucket, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true, CreateBucket: true}}
	})
	return &s3Fixture{fixture: f, srv: srv, bucket: bucket}
}

// audit runs log audit from kept with the bucket's flags, the secret in
// the environment.
func (f *s3Fixture) audit(t *testing.T, role, kept, key, bucket string, more ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_HTTP": f.http, "PACTLEDGER_KEY": keys[role], "HOME": t.TempDir(), config.EnvS3SecretKey: f.srv.SecretKey}
	args := append([]string{"log", "audit", "--from", kept, "--log-key", key, "--s3-endpoint", f.srv.Endpoint, "--s3-bucket", bucket, "--s3-access-key", f.srv.AccessKey, "--s3-insecure"}, more...)
	code := run(args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func (f *s3Fixture) client(t *testing.T) *minio.Client {
	t.Helper()
	c, err := minio.New(f.srv.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(f.srv.AccessKey, f.srv.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// published waits until the bucket's log/checkpoint has at least the
// leaves of the ledger's latest checkpoint.
func (f *s3Fixture) published(t *testing.T, bucket, key string) {
	t.Helper()
	raw, err := os.ReadFile(f.keep(t))
	if err != nil {
		t.Fatal(err)
	}
	want, err := proof.Open(raw, key)
	if err != nil {
		t.Fatal(err)
	}
	c := f.client(t)
	for deadline := time.Now().Add(20 * time.Second); ; {
		obj, err := c.GetObject(context.Background(), bucket, "log/checkpoint", minio.GetObjectOptions{})
		if err == nil {
			var b bytes.Buffer
			if _, err := b.ReadFrom(obj); err == nil {
				if cp, err := proof.Open(b.Bytes(), key); err == nil && cp.Size >= want.Size {
					obj.Close()
					return
				}
			}
			obj.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bucket %s has not published the log to size %d", bucket, want.Size)
		}
		pauseTest(t, 50*time.Millisecond)
	}
}

// pauseTest waits d between two polls of a condition under a deadline.
func pauseTest(t *testing.T, d time.Duration) {
	t.Helper()
	if err := pause(t.Context(), d); err != nil {
		t.Fatal(err)
	}
}

// The audit reads the bucket itself: its checkpoints verify, match its
// tiles and are locked under COMPLIANCE, the kept checkpoint is a prefix
// of the log there, and the ledger's log extends it. A delete marker
// over its checkpoint is a mismatch, found with what it hides.
func TestAuditReadsTheLogInTheBucket(t *testing.T) {
	f := startOnS3(t)
	key := f.verifierKey(t)
	f.logged(t, f.rowID)
	kept := f.keep(t)
	f.logged(t, f.append(t, pacttest.Spec{User: "acct-3", Target: "C-3"}))
	f.published(t, f.bucket, key)

	code, out, errs := f.audit(t, "auditor", kept, key, f.bucket)
	for _, want := range []string{
		"bucket " + f.bucket + " (read here, Object Lock on): its level-0 tiles cover 4 leaves from leaf 0 without a gap",
		"bucket: its largest checkpoint read, of the ledger's log: size 4, root",
		"bucket: every version of its tiles holds the ledger's leaves, and every checkpoint read is of the ledger's log; it holds the log to 4 leaves, the largest checkpoint read 4, the ledger's latest checkpoint 4",
		"audit passed: the log only grew, extends the log in its bucket, and every row",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("audit with the bucket: %d\n%s%s\nwant exit 0 saying %q", code, out, errs, want)
		}
	}

	// A delete marker over log/checkpoint hides it from a read by name.
	if err := f.client(t).RemoveObject(context.Background(), f.bucket, "log/checkpoint", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errs = f.audit(t, "auditor", kept, key, f.bucket)
	for _, want := range []string{
		"MISMATCH a delete marker hides the bucket's log/checkpoint",
		"bucket: its largest checkpoint read, of the ledger's log: size 4, root",
		"audit FAILED: 1 mismatches",
	} {
		if code != exitCheckFailed || !strings.Contains(out, want) {
			t.Fatalf("audit with log/checkpoint hidden: %d\n%s%s\nwant exit %d saying %q", code, out, errs, exitCheckFailed, want)
		}
	}

	// A version put over it under GOVERNANCE, with its bytes: whoever may
	// bypass that lock can remove it, which the ledger never allows.
	c := f.client(t)
	var cp bytes.Buffer
	for o := range c.ListObjects(context.Background(), f.bucket, minio.ListObjectsOptions{Prefix: "log/checkpoint", WithVersions: true}) {
		if o.Key == "log/checkpoint" && !o.IsDeleteMarker && cp.Len() == 0 {
			obj, err := c.GetObject(context.Background(), f.bucket, o.Key, minio.GetObjectOptions{VersionID: o.VersionID})
			if err != nil {
				t.Fatal(err)
			}
			_, err = cp.ReadFrom(obj)
			obj.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := c.PutObject(context.Background(), f.bucket, "log/checkpoint", bytes.NewReader(cp.Bytes()), int64(cp.Len()), minio.PutObjectOptions{Mode: minio.Governance, RetainUntilDate: time.Now().Add(time.Hour), SendContentMd5: true}); err != nil {
		t.Fatal(err)
	}
	code, out, errs = f.audit(t, "auditor", kept, key, f.bucket)
	if want := "MISMATCH the bucket's log/checkpoint is under GOVERNANCE retention until "; code != exitCheckFailed || !strings.Contains(out, want) || strings.Contains(out, "delete marker") {
		t.Fatalf("audit with log/checkpoint under GOVERNANCE: %d\n%s%s\nwant exit %d saying %q", code, out, errs, exitCheckFailed, want)
	}

	// A delete marker over the tile at the log's right edge: read from
	// behind it, and named.
	var edge string
	for o := range c.ListObjects(context.Background(), f.bucket, minio.ListObjectsOptions{Prefix: "log/tile/0/", Recursive: true}) {
		if o.Key > edge {
			edge = o.Key
		}
	}
	if err := c.RemoveObject(context.Background(), f.bucket, edge, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errs = f.audit(t, "auditor", kept, key, f.bucket)
	for _, want := range []string{"MISMATCH a delete marker hides the bucket's " + edge + ":"} {
		if code != exitCheckFailed || !strings.Contains(out, want) || strings.Count(out, edge+":") != 1 {
			t.Fatalf("audit with %s hidden: %d\n%s%s\nwant exit %d saying %q once", edge, code, out, errs, exitCheckFailed, want)
		}
	}

	// A bucket without Object Lock witnesses nothing.
	unlocked := s3test.Bucket()
	if err := c.MakeBucket(context.Background(), unlocked, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	code, out, errs = f.audit(t, "auditor", kept, key, unlocked)
	if want := "so it witnesses nothing"; code != exitCheckFailed || !strings.Contains(out, "FAILED: ") || !strings.Contains(out, want) {
		t.Fatalf("audit against a bucket without Object Lock: %d\n%s%s\nwant exit %d saying %q", code, out, errs, exitCheckFailed, want)
	}

	// Flags that do not name a bucket whole, or no secret, are refused
	// before anything is read.
	if code, out, errs := f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", key, "--s3-bucket", f.bucket); code != exitUsage || !strings.Contains(errs, "--s3-endpoint, --s3-access-key missing") {
		t.Fatalf("audit with --s3-bucket alone: %d %s %s", code, out, errs)
	}
	if code, out, errs := f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", key, "--s3-endpoint", f.srv.Endpoint, "--s3-bucket", f.bucket, "--s3-access-key", f.srv.AccessKey, "--s3-insecure"); code != exitUsage || !strings.Contains(errs, "set PACTLEDGER_S3_SECRET_KEY") || strings.Contains(out+errs, f.srv.SecretKey) {
		t.Fatalf("audit without the secret: %d %s %s", code, out, errs)
	}
}

// A ledger whose row store is restored from a backup and which then
// publishes to a new bucket signs a log that extends a checkpoint kept
// before the backup: the audit of its own log passes. Read against the
// bucket it published to before, the audit finds the split view. (A
// ledger refuses a new bucket without the log it published; whoever holds
// the row store can clear its record of what it published, and so it
// does here.)
func TestAuditFindsALedgerThatShowsAnotherHistoryThanItsBucket(t *testing.T) {
	f := startOnS3(t)
	key := f.verifierKey(t)
	f.logged(t, f.rowID)
	kept := f.keep(t)
	f.stop()
	backup := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(backup, os.DirFS(f.cfg.DataDir)); err != nil {
		t.Fatal(err)
	}
	f.serve(t)
	for _, target := range []string{"LOST-1", "LOST-2"} {
		f.logged(t, f.append(t, pacttest.Spec{User: "acct-9", Target: target}))
	}
	f.published(t, f.bucket, key)
	f.stop()

	// The row store as it was, and another bucket.
	if err := os.RemoveAll(f.cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(f.cfg.DataDir, os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	if err := tamper.Apply(filepath.Join(f.cfg.DataDir, "ledger.db"), tamper.ForgetPublished()); err != nil {
		t.Fatal(err)
	}
	first := f.bucket
	f.cfg.Evidence.S3.Bucket = s3test.Bucket()
	f.serve(t)
	for _, target := range []string{"OTHER-1", "OTHER-2", "OTHER-3"} {
		f.logged(t, f.append(t, pacttest.Spec{User: "acct-9", Target: target}))
	}
	f.published(t, f.cfg.Evidence.S3.Bucket, key)

	// The ledger's own log extends the kept checkpoint, and so does the
	// new bucket's. (Without an API key: the rows written before the
	// move keep their evidence in the first bucket, under version ids no
	// copy into another bucket can have, so comparing rows would fail on
	// that; the log alone shows nothing wrong.)
	if code, out, errs := f.ctl(t, "nobody", "log", "audit", "--from", kept, "--log-key", key); code != 0 || !strings.Contains(out, "audit passed") {
		t.Fatalf("audit of the ledger's own log: %d\n%s%s\nwant it to pass: nothing it reads contradicts it", code, out, errs)
	}
	if code, out, errs := f.audit(t, "nobody", kept, key, f.cfg.Evidence.S3.Bucket); code != 0 || !strings.Contains(out, "audit passed: the log only grew, extends the log in its bucket") {
		t.Fatalf("audit against the new bucket: %d\n%s%s\nwant it to pass: the auditor must know the ledger's bucket", code, out, errs)
	}
	code, out, errs := f.audit(t, "nobody", kept, key, first)
	for _, want := range []string{
		"MISMATCH the bucket's log/tile/0/000.p/",
		"holds another hash of leaf 3 than the ledger's log: the ledger published another history than the one it shows",
		"signed with the log's key, has root",
		"the ledger signed two histories",
		"a split view",
		"audit FAILED",
	} {
		if code != exitCheckFailed || !strings.Contains(out, want) {
			t.Fatalf("audit against the bucket published to before the restore: %d\n%s%s\nwant exit %d saying %q", code, out, errs, exitCheckFailed, want)
		}
	}
}

// A ledger that serves an older checkpoint of its log than it published
// to the bucket (its row store restored from a backup, and the log's
// endpoints answering from it) fails the audit against the bucket: its
// log was rolled back.
func TestAuditFindsALedgerBehindItsBucket(t *testing.T) {
	f := startOnS3(t)
	key := f.verifierKey(t)
	f.logged(t, f.rowID)
	kept := f.keep(t)
	old, err := os.ReadFile(kept)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"LATER-1", "LATER-2"} {
		f.logged(t, f.append(t, pacttest.Spec{User: "acct-9", Target: target}))
	}
	f.published(t, f.bucket, key)
	s := f.split(t)
	s.checkpoint = func(ctx context.Context) (*ledgerv1.GetCheckpointResponse, error) {
		rep, err := s.c.GetCheckpoint(ctx, &ledgerv1.GetCheckpointRequest{})
		if err != nil {
			return nil, err
		}
		rep.Checkpoint = string(old)
		return rep, nil
	}
	code, out, errs := f.audit(t, "nobody", kept, key, f.bucket)
	for _, want := range []string{
		"MISMATCH the bucket's log/tile/0/000.p/4 (version ",
		"holds 4 leaves of tile 0, and the ledger's latest checkpoint (size 3) 3: the ledger's log was rolled back",
		"signed with the log's key, has 5 leaves, more than the ledger's latest checkpoint (3): the ledger's log was rolled back",
	} {
		if code != exitCheckFailed || !strings.Contains(out, want) {
			t.Fatalf("audit of a ledger behind its bucket: %d\n%s%s\nwant exit %d saying %q", code, out, errs, exitCheckFailed, want)
		}
	}
	if code, out, errs := f.ctl(t, "nobody", "log", "audit", "--from", kept, "--log-key", key); code != 0 {
		t.Fatalf("audit of the ledger's own log, behind its bucket: %d\n%s%s\nwant it to pass: nothing it reads contradicts it", code, out, errs)
	}
}

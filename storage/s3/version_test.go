package s3_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
)

// Each PutVersion of a key is a new version with COMPLIANCE retention: a
// plain GET reads the latest, every earlier version stays readable and
// locked, and none can be deleted.
func TestPutVersionKeepsEveryVersionLocked(t *testing.T) {
	ctx := context.Background()
	bucket := s3test.Bucket()
	st, err := open(t, bucket, true)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	bodies := []string{"origin\n1\nAAAA\n", "origin\n2\nBBBB\n", "origin\n3\nCCCC\n"}
	versions := map[string]string{} // version id -> body
	for _, b := range bodies {
		loc, err := st.PutVersion(ctx, "log/checkpoint", []byte(b), until)
		if err != nil {
			t.Fatal(err)
		}
		if loc.VersionID == "" || loc.Store != "s3" || loc.Bucket != bucket || loc.Key != "log/checkpoint" || !loc.RetainUntil.Equal(until) {
			t.Fatalf("location: %+v", loc)
		}
		if _, dup := versions[loc.VersionID]; dup {
			t.Fatalf("version %s written twice", loc.VersionID)
		}
		versions[loc.VersionID] = b
	}
	got, err := st.Get(ctx, "log/checkpoint")
	if err != nil || string(got) != bodies[len(bodies)-1] {
		t.Fatalf("latest: %q %v, want %q", got, err, bodies[len(bodies)-1])
	}
	c := rawClient(t)
	for id, want := range versions {
		obj, err := c.GetObject(ctx, bucket, "log/checkpoint", minio.GetObjectOptions{VersionID: id})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(obj)
		obj.Close()
		if err != nil || string(b) != want {
			t.Fatalf("version %s: %q %v, want %q", id, b, err, want)
		}
		// The bucket refuses to delete any version: each keeps its own
		// lock. (versitygw reports the lock headers on the latest version
		// only, checked below; it enforces them on every version.)
		if err := c.RemoveObject(ctx, bucket, "log/checkpoint", minio.RemoveObjectOptions{VersionID: id}); err == nil {
			t.Fatalf("version %s of a locked key was deleted", id)
		}
	}
	info, err := c.StatObject(ctx, bucket, "log/checkpoint", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Metadata.Get("X-Amz-Object-Lock-Mode"); mode != "COMPLIANCE" {
		t.Fatalf("lock mode %q", mode)
	}
	if ru, err := time.Parse(time.RFC3339, info.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date")); err != nil || !ru.Equal(until) {
		t.Fatalf("retained until %v (%v), want %v", ru, err, until)
	}
	n := 0
	for o := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "log/checkpoint", WithVersions: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if _, ok := versions[o.VersionID]; !ok {
			t.Fatalf("unknown version %s", o.VersionID)
		}
		n++
	}
	if n != len(bodies) {
		t.Fatalf("%d versions listed, want %d", n, len(bodies))
	}
	// The create-only put still refuses other bytes under a versioned key.
	if _, err := st.Put(ctx, "log/checkpoint", []byte("other"), until); err == nil {
		t.Fatal("create-only put over a versioned key accepted other bytes")
	}
}

// SwapVersion writes a new version only over the one the writer read: a
// second writer that read the same version is refused, and so is a
// writer that expected no object where one is.
func TestSwapVersionOnlyOverWhatWasRead(t *testing.T) {
	ctx := context.Background()
	st, err := open(t, s3test.Bucket(), true)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	if _, err := st.SwapVersion(ctx, "log/checkpoint", []byte("one"), until, nil); err != nil {
		t.Fatalf("the first version, over none: %v", err)
	}
	if _, err := st.SwapVersion(ctx, "log/checkpoint", []byte("two"), until, nil); !errors.Is(err, ledger.ErrObjectChanged) {
		t.Errorf("a version over none, where one is: %v, want ErrObjectChanged", err)
	}
	if _, err := st.SwapVersion(ctx, "log/checkpoint", []byte("two"), until, []byte("one")); err != nil {
		t.Fatalf("a version over the one read: %v", err)
	}
	if _, err := st.SwapVersion(ctx, "log/checkpoint", []byte("three"), until, []byte("one")); !errors.Is(err, ledger.ErrObjectChanged) {
		t.Errorf("a version over one replaced since it was read: %v, want ErrObjectChanged", err)
	}
	if got, err := st.Get(ctx, "log/checkpoint"); err != nil || string(got) != "two" {
		t.Errorf("the latest version: %q, %v; want two", got, err)
	}
	if _, err := st.SwapVersion(ctx, "log/other", []byte("x"), until, []byte("one")); !errors.Is(err, ledger.ErrObjectChanged) {
		t.Errorf("a version over one where none is: %v, want ErrObjectChanged", err)
	}
}

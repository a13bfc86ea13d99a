package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/pactledger/pactledger/internal/objecttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
)

// Each SwapVersion of a key is a new version with COMPLIANCE retention: a
// plain GET reads the latest, every earlier version stays readable and
// locked, and none can be deleted.
func TestSwapVersionKeepsEveryVersionLocked(t *testing.T) {
	ctx := context.Background()
	bucket := s3test.Bucket()
	st, err := open(t, bucket, true)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	bodies := []string{"origin\n1\nAAAA\n", "origin\n2\nBBBB\n", "origin\n3\nCCCC\n"}
	versions := map[string]string{} // version id -> body
	var prev []byte
	for _, b := range bodies {
		loc, err := st.SwapVersion(ctx, "log/checkpoint", []byte(b), until, prev)
		prev = []byte(b)
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

// SwapVersion writes a new version only over the one the writer read,
// with S3's conditional writes.
func TestSwapVersionOnlyOverWhatWasRead(t *testing.T) {
	st, err := open(t, s3test.Bucket(), true)
	if err != nil {
		t.Fatal(err)
	}
	objecttest.SwapVersion(t, st)
}

// The first version of a key is the one its only contents are in: a key
// holding a version of other contents, put over it by someone else, is
// ErrFirstVersionUnknown, however the store dates the two (versitygw
// gives the older the time it was kept aside, so by times it can read
// as the newer).
func TestFirstVersionOfAKeyPutOverIsUnknown(t *testing.T) {
	ctx := context.Background()
	bucket := s3test.Bucket()
	st, err := open(t, bucket, true)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := st.Put(ctx, "drills/d1.json", []byte(`{"passed":false}`), time.Now().Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := st.FirstVersion(ctx, "drills/d1.json"); err != nil || v != loc.VersionID {
		t.Fatalf("the first version of a key put once: %q, %v; want %q", v, err, loc.VersionID)
	}
	body := []byte(`{"passed":true}`)
	if _, err := rawClient(t).PutObject(ctx, bucket, "drills/d1.json", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if v, err := st.FirstVersion(ctx, "drills/d1.json"); !errors.Is(err, ledger.ErrFirstVersionUnknown) || !strings.Contains(err.Error(), "2 versions of drills/d1.json") {
		t.Fatalf("the first version of a key put over: %q, %v; want ErrFirstVersionUnknown naming 2 versions", v, err)
	}
}

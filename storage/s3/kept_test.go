package s3_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
)

// ListKept lists the keys of one folder with those a delete marker hides
// (a plain DELETE of a locked object), each with its newest version that
// is not a marker, which reads back; it leaves out the folders below and
// the keys of delete markers alone.
func TestListKeptFindsHiddenKeys(t *testing.T) {
	ctx := context.Background()
	bucket := s3test.Bucket()
	st, err := open(t, bucket, true)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	var prev []byte
	for i := range 40 { // a key of many versions, sorting before the folder below
		body := []byte(fmt.Sprintf("checkpoint %d\n", i))
		if _, err := st.SwapVersion(ctx, "log/checkpoint", body, until, prev); err != nil {
			t.Fatal(err)
		}
		prev = body
	}
	for _, n := range []string{"10", "7", "9", "8"} {
		if _, err := st.Put(ctx, "log/checkpoints/"+n, []byte("cp "+n), until); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Put(ctx, "log/checkpoints/sub/1", []byte("below"), until); err != nil {
		t.Fatal(err)
	}
	c := rawClient(t)
	for _, key := range []string{"log/checkpoint", "log/checkpoints/10", "log/checkpoints/9", "log/checkpoints/never"} {
		// A plain DELETE: a delete marker over the locked versions.
		if err := c.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{}); err != nil {
			t.Fatalf("delete %s: %v", key, err)
		}
	}
	if _, err := st.Get(ctx, "log/checkpoint"); err == nil {
		t.Fatal("log/checkpoint reads by name behind its delete marker")
	}

	list := func(prefix string) map[string]ledger.KeptKey {
		t.Helper()
		keys := map[string]ledger.KeptKey{}
		if err := st.ListKept(ctx, prefix, func(k ledger.KeptKey) error {
			if _, dup := keys[k.Key]; dup {
				t.Errorf("%s listed twice", k.Key)
			}
			keys[k.Key] = k
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return keys
	}
	keys := list("log/checkpoint")
	if k, ok := keys["log/checkpoint"]; len(keys) != 1 || !ok || !k.Hidden {
		t.Fatalf("ListKept(log/checkpoint) = %+v; want it alone, hidden", keys)
	}
	if b, err := st.GetVersion(ctx, "log/checkpoint", keys["log/checkpoint"].Version); err != nil || string(b) != "checkpoint 39\n" {
		t.Fatalf("the hidden key's newest version: %q %v, want the last one put", b, err)
	}

	var got []string
	for key, k := range list("log/checkpoints/") {
		b, err := st.GetVersion(ctx, key, k.Version)
		if err != nil || string(b) != "cp "+strings.TrimPrefix(key, "log/checkpoints/") {
			t.Errorf("%s version %s: %q %v", key, k.Version, b, err)
		}
		got = append(got, fmt.Sprintf("%s hidden=%v", strings.TrimPrefix(key, "log/checkpoints/"), k.Hidden))
	}
	slices.Sort(got)
	if want := "10 hidden=true,7 hidden=false,8 hidden=false,9 hidden=true"; strings.Join(got, ",") != want {
		t.Errorf("ListKept(log/checkpoints/) = %s, want %s", strings.Join(got, ","), want)
	}

	// A listing stops at fn's first error, which it returns.
	stop := errors.New("enough")
	calls := 0
	if err := st.ListKept(ctx, "log/checkpoints/", func(ledger.KeptKey) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Errorf("ListKept stopped by fn: %v after %d calls", err, calls)
	}
	var _ ledger.KeptLister = st
}

// SwapVersion over a key a delete marker hides (no version while it has
// none) writes a new latest version, which a read by name finds; over a
// live one it is still refused.
func TestSwapVersionOverADeleteMarker(t *testing.T) {
	ctx := context.Background()
	bucket := s3test.Bucket()
	st, err := open(t, bucket, true)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	if _, err := st.SwapVersion(ctx, "log/checkpoint", []byte("one"), until, nil); err != nil {
		t.Fatal(err)
	}
	if err := rawClient(t).RemoveObject(ctx, bucket, "log/checkpoint", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SwapVersion(ctx, "log/checkpoint", []byte("two"), until, nil); err != nil {
		t.Fatalf("a version over the delete marker: %v", err)
	}
	if b, err := st.Get(ctx, "log/checkpoint"); err != nil || string(b) != "two" {
		t.Fatalf("the key after: %q %v", b, err)
	}
	if _, err := st.SwapVersion(ctx, "log/checkpoint", []byte("three"), until, nil); !errors.Is(err, ledger.ErrObjectChanged) {
		t.Fatalf("a version as if there were none over a live one: %v; want ErrObjectChanged", err)
	}
}

package s3_test

import (
	"context"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
)

// On an Object Lock bucket a delete without a version writes a delete
// marker, which the lock allows: the key would read as gone while its
// version stays, and the sweep would record it deleted. A location
// without a version, or of another store or bucket (the evidence store
// changed under the ledger), deletes nothing and is refused.
func TestADeleteNamesAVersionOfThisBucket(t *testing.T) {
	ctx := context.Background()
	st, err := open(t, s3test.Bucket(), true)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	loc, err := st.Put(ctx, "rows/kept.json", []byte(`{"receiptJws":"y"}`), until)
	if err != nil {
		t.Fatal(err)
	}
	noVersion, otherBucket, otherStore := loc, loc, loc
	noVersion.VersionID = ""
	otherBucket.Bucket = "another-bucket"
	otherStore.Store, otherStore.VersionID = "dir", ""
	for name, del := range map[string]ledger.Location{"no version": noVersion, "other bucket": otherBucket, "other store": otherStore} {
		if err := st.Delete(ctx, del); err == nil {
			t.Errorf("%s: Delete succeeded, want refused", name)
		}
		if _, err := st.Get(ctx, loc.Key); err != nil {
			t.Fatalf("%s: after the refused delete, Get: %v", name, err)
		}
	}
	if err := st.Delete(ctx, loc); err == nil {
		t.Fatal("the retained version itself was deleted")
	}
}

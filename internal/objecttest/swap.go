// Package objecttest holds the checks every versioned write-once evidence
// store (storage/s3, storage/localdir) must pass, run by each store's
// tests against a real instance.
package objecttest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// Swapper is a store that writes a new version of a key only over the
// version the writer read (nil: only while the key has none).
type Swapper interface {
	Get(ctx context.Context, key string) ([]byte, error)
	SwapVersion(ctx context.Context, key string, body []byte, retainUntil time.Time, prev []byte) (ledger.Location, error)
}

// SwapVersion checks that s writes a new version only over the one the
// writer read: a second writer that read the same version is refused,
// and so are a writer that expected no object where one is and one that
// expected an object where none is; each refusal wraps
// ledger.ErrObjectChanged and leaves the latest version as it was.
func SwapVersion(t *testing.T, s Swapper) {
	t.Helper()
	ctx := context.Background()
	until := time.Now().Add(time.Hour)
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ledger.ErrObjectChanged) {
			t.Errorf("%s: %v, want ErrObjectChanged", what, err)
		}
	}
	if _, err := s.SwapVersion(ctx, "log/checkpoint", []byte("one"), until, nil); err != nil {
		t.Fatalf("the first version, over none: %v", err)
	}
	_, err := s.SwapVersion(ctx, "log/checkpoint", []byte("two"), until, nil)
	refused("a version over none, where one is", err)
	if _, err := s.SwapVersion(ctx, "log/checkpoint", []byte("two"), until, []byte("one")); err != nil {
		t.Fatalf("a version over the one read: %v", err)
	}
	_, err = s.SwapVersion(ctx, "log/checkpoint", []byte("three"), until, []byte("one"))
	refused("a version over one replaced since it was read", err)
	if got, err := s.Get(ctx, "log/checkpoint"); err != nil || string(got) != "two" {
		t.Errorf("the latest version: %q, %v; want two", got, err)
	}
	_, err = s.SwapVersion(ctx, "log/other", []byte("x"), until, []byte("one"))
	refused("a version over one where none is", err)
}

package cluster

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/internal/server"
)

// TestReplicaWithAnotherLogKeyIsRefused: once the database holds the
// log's checkpoints, a replica started without the shared
// merkleLog.keyFile makes no key of its own and does not start, and one
// given another key does not start either; each says to use the key
// file the other replicas use. The running replica's log goes on under
// the published key.
func TestReplicaWithAnotherLogKeyIsRefused(t *testing.T) {
	pgtest.Available(t)
	e := newEnv(t, pgtest.CreateDB(t), 1500*time.Millisecond, 2*time.Second)
	r1 := e.startInProcess("r1")
	if _, err := r1.client.AppendReceipt(as(t.Context(), writerKey), e.corpus(1, "logkey")[0]); err != nil {
		t.Fatal(err)
	}
	poll(t, "a checkpoint in the database", 30*time.Second, func() bool { return e.checkpoint(t, r1).Size > 0 })

	noKey := e.config("r3")
	noKey.MerkleLog.KeyFile = "" // <dataDir>/log/signing.key, not there
	other := e.config("r4")
	other.MerkleLog.KeyFile = filepath.Join(e.dir, "other", "signing.key")
	if _, _, _, err := config.EnsureLogKey(&other); err != nil {
		t.Fatal(err)
	}
	for _, c := range []config.Config{noKey, other} {
		srv, err := server.New(t.Context(), c, slog.New(slog.DiscardHandler))
		if err == nil {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			_ = srv.Serve(ctx)
			t.Fatalf("%s, with the log key %s, started on a database whose log another key signs", c.Leases.Holder, c.LogKeyFile())
		}
		t.Logf("%s refused: %v", c.Leases.Holder, err)
		if !strings.Contains(err.Error(), "merkleLog.keyFile") || !strings.Contains(err.Error(), "the other replicas use") {
			t.Errorf("%s refused with %q; want it to say to use the merkleLog.keyFile the other replicas use", c.Leases.Holder, err)
		}
	}
	if _, err := os.Stat(noKey.LogKeyFile()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a replica refused for want of the log's key made one at %s (%v)", noKey.LogKeyFile(), err)
	}
	if _, err := r1.client.AppendReceipt(as(t.Context(), writerKey), e.corpus(2, "logkey")[1]); err != nil {
		t.Fatal(err)
	}
	poll(t, "the log grows under the published key", 30*time.Second, func() bool { return e.checkpoint(t, r1).Size > 1 })
}

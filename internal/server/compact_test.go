package server_test

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/server"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/proof"
	"github.com/pactledger/pactledger/storage/bolt"
)

// TestCompactDropsPublishedTiles: a ledger kept its published tiles
// (merkleLog.keepPublished, or a file upgraded with a long log); stopped,
// ledgerd compact publishes what the integrator had not yet, drops the
// two full tiles from the file after reading them back from write-once
// storage, and copies the file. Started again,
// ledgerd serves the same proof and entry bundles from the dropped tiles.
// A second run has nothing left to drop, and a PostgreSQL store is
// refused.
func TestCompactDropsPublishedTiles(t *testing.T) {
	keep := true
	e := newEnv(t, jose.ES256, func(c *config.Config) { c.MerkleLog.KeepPublished = keep })
	var first appendReply
	const rows = 2*256 + 3
	for i := range rows {
		var rep appendReply
		e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "COMPACT-" + string(rune('A'+i%26))})), &rep)
		if i == 0 {
			first = rep
		}
	}
	// The log holds every row and the policy logged at start, so both
	// full tiles; whether they are
	// published yet or not, compact publishes what is missing first. The
	// proof below is read under the last checkpoint: one a row later would
	// change its bundle.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var cp struct{ Size string }
		if code := e.call(t, "GET", "/v1/log/checkpoint.json", "", nil, &cp); code == 200 {
			if n, err := strconv.ParseInt(cp.Size, 10, 64); err == nil && n >= rows+1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log did not reach %d leaves", rows+1)
		}
		runtime.Gosched()
	}
	var before struct{ Bundle string }
	if code := e.call(t, "GET", "/v1/rows/"+first.Row.ID+"/proof", "auditor", nil, &before); code != 200 {
		t.Fatalf("proof = %d", code)
	}
	_, entries := e.get(t, "/v1/log/tile/entries/000")
	e.stop()

	cfg := e.cfg
	cfg.MerkleLog.KeepPublished = false
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// As if ledgerd had stopped before it published the tiles.
	st, err := bolt.Open(cfg.Store.Path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(context.Background(), func(tx ledger.Tx) error { return tx.SetTilesPublished(0) }); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := server.Compact(context.Background(), cfg, &out)
	if err != nil {
		t.Fatalf("compact: %v\n%s", err, out.String())
	}
	if rep.Dropped != 512 || !strings.Contains(out.String(), "dropped 512 of 512 leaves") || rep.Before == 0 || rep.After == 0 {
		t.Fatalf("compact: %+v\n%s", rep, out.String())
	}
	if st, err = bolt.Open(cfg.Store.Path, bolt.Config{}); err != nil {
		t.Fatal(err)
	}
	var pruned int64
	err = st.View(context.Background(), func(tx ledger.Tx) error {
		pruned, err = tx.(ledger.PrunedLog).LogPruned()
		if err != nil {
			return err
		}
		if _, _, err := tx.Leaf(0); err == nil {
			t.Error("the file still holds leaf 0")
		}
		return nil
	})
	st.Close()
	if err != nil || pruned != 512 {
		t.Fatalf("the file counts %d leaves dropped, want 512: %v", pruned, err)
	}

	// Once more: nothing left to drop, the file is copied all the same.
	out.Reset()
	if rep, err := server.Compact(context.Background(), cfg, &out); err != nil || rep.Dropped != 0 || !strings.Contains(out.String(), "none") {
		t.Fatalf("second compact: %+v %v\n%s", rep, err, out.String())
	}

	e.start(t)
	// ledgerd logs its policy again at start, so the proof may now lead to
	// a later checkpoint: the same leaf at the same index, proven.
	var after struct{ Bundle string }
	if code := e.call(t, "GET", "/v1/rows/"+first.Row.ID+"/proof", "auditor", nil, &after); code != 200 {
		t.Fatalf("proof after compact = %d", code)
	}
	var cp struct{ VerifierKey string }
	if code := e.call(t, "GET", "/v1/log/checkpoint.json", "", nil, &cp); code != 200 {
		t.Fatalf("checkpoint after compact = %d", code)
	}
	was, err := proof.ParseBundle([]byte(before.Bundle))
	if err != nil {
		t.Fatal(err)
	}
	now, err := proof.ParseBundle([]byte(after.Bundle))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := now.Verify(cp.VerifierKey); err != nil || now.LeafIndex != was.LeafIndex || now.Leaf != was.Leaf {
		t.Fatalf("proof after compact: leaf %d (was %d), same leaf %v: %v", now.LeafIndex, was.LeafIndex, now.Leaf == was.Leaf, err)
	}
	if code, got := e.get(t, "/v1/log/tile/entries/000"); code != 200 || !bytes.Equal(got, entries) {
		t.Fatalf("entry bundle after compact = %d, same bytes %v", code, bytes.Equal(got, entries))
	}

	pg := cfg
	pg.Store = config.Store{Kind: config.StorePostgres, DSN: "postgres://127.0.0.1/none"}
	if _, err := server.Compact(context.Background(), pg, nil); err == nil || !strings.Contains(err.Error(), "bbolt") {
		t.Fatalf("compact of a postgres store: %v", err)
	}
}

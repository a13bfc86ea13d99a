package server_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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

// publishedThenCutOff runs a ledger on the evidence directory evDir, with
// merkleLog.keepPublished off, until its first checkpoint is published;
// then evDir stops taking the log's tiles (an outage of that part of the
// store) while 515 rows are recorded, and ledgerd stops: the row store
// holds every leaf, signed, and records a publication of the first leaf
// only, so the last row has no proof served (it is not in a checkpoint
// write-once storage holds). The outage is over when it returns. It
// returns the env (stopped), the first row's id and the last row's.
func publishedThenCutOff(t *testing.T, evDir string) (e *env, first, last string) {
	t.Helper()
	e = newEnv(t, jose.ES256, func(c *config.Config) {
		c.MerkleLog.KeepPublished = false
		c.Evidence = config.Evidence{Type: "dir", Dir: evDir}
	})
	waitProof := func(id string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for e.call(t, "GET", "/v1/rows/"+id+"/proof", "auditor", nil, nil) != 200 {
			if time.Now().After(deadline) {
				t.Fatalf("row %s has no proof", id)
			}
			runtime.Gosched()
		}
	}
	tiles := filepath.Join(evDir, "log", "tile")
	var firstRep, lastRep appendReply
	const rows = 2*256 + 3
	for i := range rows {
		if i == 1 {
			waitProof(firstRep.Row.ID)
			// A file stands where the tiles' folder goes.
			if err := os.Rename(tiles, tiles+".away"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(tiles, []byte("outage"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var rep appendReply
		e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "CUT-" + string(rune('A'+i%26))})), &rep)
		if i == 0 {
			firstRep = rep
		}
		lastRep = rep
	}
	first, last = firstRep.Row.ID, lastRep.Row.ID
	signedInRowStore(t, e, last)
	notServed(t, e, last, "during the outage")
	e.stop()
	st, err := bolt.Open(filepath.Join(e.cfg.DataDir, "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var published int64
	if err := st.View(context.Background(), func(tx ledger.Tx) error {
		var err error
		published, err = tx.(ledger.LogTx).TilesPublished()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if published == 0 || published >= 256 {
		t.Fatalf("setup: the row store records tiles published up to %d leaves, want a part of the first tile", published)
	}
	if err := os.Remove(tiles); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tiles+".away", tiles); err != nil {
		t.Fatal(err)
	}
	return e, first, last
}

// signedInRowStore waits until row id's leaf is in the row store's
// signed log: the ledger's own read, which does not wait for write-once
// storage.
func signedInRowStore(t *testing.T, e *env, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, err := e.srv.Ledger().RowLeafDiff(context.Background(), id)
		if err == nil {
			return
		}
		if !errors.Is(err, ledger.ErrNotLogged) {
			t.Fatalf("row %s against its leaf: %v", id, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("row %s is not in the row store's signed log", id)
		}
		runtime.Gosched()
	}
}

// notServed checks that ledgerd answers that row id is not yet in a
// signed checkpoint: its leaf is signed in the row store at most, and
// write-once storage holds no checkpoint that has it.
func notServed(t *testing.T, e *env, id, when string) {
	t.Helper()
	var rep struct{ Message string }
	if code := e.call(t, "GET", "/v1/rows/"+id+"/proof", "auditor", nil, &rep); code != 503 || !strings.Contains(rep.Message, "not yet in a signed checkpoint") {
		t.Fatalf("%s: row %s's proof answers %d %q, want 503 not yet in a signed checkpoint", when, id, code, rep.Message)
	}
}

// servesFirstTile checks that ledgerd, on its own evidence store, serves
// the proof of each row of ids and the log's first entry bundle, once it
// has published there what its row store holds (the outage is over).
func servesFirstTile(t *testing.T, e *env, when string, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		codes := map[string]int{}
		served := true
		for _, id := range ids {
			codes[id] = e.call(t, "GET", "/v1/rows/"+id+"/proof", "auditor", nil, nil)
			served = served && codes[id] == 200
		}
		tcode, _ := e.get(t, "/v1/log/tile/entries/000")
		if served && tcode == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the rows' proofs answer %v, entry tile 000 answers %d", when, codes, tcode)
		}
		runtime.Gosched()
	}
}

// TestCompactRefusesAnotherEvidenceStore: ledgerd runs with its evidence
// directory outside the data directory and stopped before it published
// its full tiles. ledgerd compact run without that directory (the
// default, <dataDir>/evidence, holds none of the log) publishes nothing
// there and drops no leaf, and says which store lacks the log. ledgerd,
// started then on its own directory, publishes there what the outage held
// back and serves it (the log is served only as far as it is published);
// run with merkleLog.keepPublished on, it keeps the published tiles in
// its row store, and ledgerd compact given the ledger's own directory
// drops them after reading them back from it. ledgerd serves the log's
// first tile from there.
func TestCompactRefusesAnotherEvidenceStore(t *testing.T) {
	evDir := t.TempDir()
	e, first, last := publishedThenCutOff(t, evDir)

	cc := config.Default()
	cc.DataDir = e.cfg.DataDir
	if err := cc.Validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := server.Compact(context.Background(), cc, &out)
	if !errors.Is(err, ledger.ErrPublishedLogMissing) || !strings.Contains(err.Error(), cc.Evidence.Dir) || !strings.Contains(err.Error(), "holds none of this ledger's published log") {
		t.Fatalf("compact with another evidence directory: %+v, %v\n%s", rep, err, out.String())
	}
	if rep.Dropped != 0 {
		t.Fatalf("compact dropped %d leaves", rep.Dropped)
	}
	if _, err := os.Stat(filepath.Join(cc.Evidence.Dir, "log", "checkpoint")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("compact published a checkpoint to %s: %v", cc.Evidence.Dir, err)
	}
	e.cfg.MerkleLog.KeepPublished = true
	e.start(t)
	servesFirstTile(t, e, "after a refused compact", first, last)
	e.stop()
	e.cfg.MerkleLog.KeepPublished = false

	cc.Evidence.Dir = evDir
	if rep, err = server.Compact(context.Background(), cc, &out); err != nil || rep.Dropped != 512 {
		t.Fatalf("compact with the ledger's evidence directory: %+v, %v\n%s", rep, err, out.String())
	}
	e.start(t)
	servesFirstTile(t, e, "after compact", first, last)
}

// TestLedgerdOnAnotherEvidenceStoreKeepsItsLeaves: the same ledger
// started on another, empty, evidence directory with
// merkleLog.keepPublished off publishes nothing there and drops no leaf
// from its row store, and /readyz says its log is not published. It goes
// on signing in the row store and serves the log only as far as its own
// directory holds it: the rows signed since are not yet in a signed
// checkpoint to a reader. Started again on its own directory it
// publishes them, and serves their proofs and the log's first tile.
func TestLedgerdOnAnotherEvidenceStoreKeepsItsLeaves(t *testing.T) {
	evDir := t.TempDir()
	e, first, last := publishedThenCutOff(t, evDir)
	wrong := t.TempDir()
	e.cfg.Evidence.Dir = wrong
	e.start(t)
	var rep appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "CUT-NEXT"})), &rep)
	signedInRowStore(t, e, rep.Row.ID)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ready struct {
			Log struct{ Status, Error string }
		}
		e.call(t, "GET", "/readyz", "auditor", nil, &ready)
		if _, err := os.Stat(filepath.Join(wrong, "log", "checkpoint")); err == nil {
			t.Fatalf("ledgerd published its log to %s, which holds none of what it published before", wrong)
		}
		if ready.Log.Status == "not published" {
			if !strings.Contains(ready.Log.Error, wrong) || !strings.Contains(ready.Log.Error, "An evidence store without the published log") {
				t.Fatalf("/readyz does not name the evidence directory: %s", ready.Log.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz log status %q, want not published", ready.Log.Status)
		}
		runtime.Gosched()
	}
	if code := e.call(t, "GET", "/v1/rows/"+first+"/proof", "auditor", nil, nil); code != 200 {
		t.Fatalf("on another evidence directory: row %s, published before, has its proof answered %d", first, code)
	}
	notServed(t, e, last, "on another evidence directory")
	notServed(t, e, rep.Row.ID, "on another evidence directory")
	e.stop()
	st, err := bolt.Open(filepath.Join(e.cfg.DataDir, "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var pruned int64
	if err := st.View(context.Background(), func(tx ledger.Tx) error {
		var err error
		pruned, err = tx.(ledger.PrunedLog).LogPruned()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if pruned != 0 {
		t.Fatalf("ledgerd on another evidence directory dropped %d leaves from its row store", pruned)
	}
	e.cfg.Evidence.Dir = evDir
	e.start(t)
	servesFirstTile(t, e, "started again on its own evidence directory", first, last, rep.Row.ID)
}

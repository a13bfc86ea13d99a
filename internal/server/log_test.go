package server_test

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger/proof"
)

func (e *env) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	res, err := http.Get(e.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// A row's proof bundle, fetched over REST with a reader's key, verifies
// offline with the public checkpoint key; checkpoints, tiles and
// consistency proofs need no key.
func TestLogOverREST(t *testing.T) {
	e := newEnv(t, jose.ES256)
	var rep appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "LOG-1"})), &rep)
	var cp struct {
		Checkpoint, Origin, VerifierKey string
		Size                            string
	}
	deadline := time.Now().Add(10 * time.Second)
	var pr struct {
		LeafIndex string
		Bundle    string
	}
	for {
		code := e.call(t, "GET", "/v1/rows/"+rep.Row.ID+"/proof", "auditor", nil, &pr)
		if code == 200 {
			break
		}
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("proof = %d", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := e.call(t, "GET", "/v1/log/checkpoint.json", "", nil, &cp); code != 200 || cp.VerifierKey == "" || cp.Origin != "localhost/pactledger" {
		t.Fatalf("checkpoint.json = %d %+v", code, cp)
	}
	b, err := proof.ParseBundle([]byte(pr.Bundle))
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.Verify(cp.VerifierKey)
	if err != nil || b.RowID != rep.Row.ID {
		t.Fatalf("bundle: %v %+v", err, b)
	}
	// The raw checkpoint, as a tlog-tiles client reads it, and a tile:
	// leaf 0 is the retention policy ledgerd logged at start, leaf 1 the
	// row.
	code, raw := e.get(t, "/v1/log/checkpoint")
	if code != 200 {
		t.Fatalf("checkpoint = %d", code)
	}
	if got, err := proof.Open(raw, cp.VerifierKey); err != nil || got.Size < c.Size {
		t.Fatalf("raw checkpoint: %v %+v", err, got)
	}
	if code, tile := e.get(t, "/v1/log/tile/0/000.p/2"); code != 200 || len(tile) != 64 {
		t.Fatalf("tile = %d, %d bytes", code, len(tile))
	}
	if code, entries := e.get(t, "/v1/log/tile/entries/000.p/2"); code != 200 || !strings.Contains(string(entries), "kind policy\n") || !strings.Contains(string(entries), "row "+rep.Row.ID) {
		t.Fatalf("entries = %d %q", code, entries)
	}
	if code, _ := e.get(t, "/v1/log/tile/0/001"); code != 404 {
		t.Fatalf("tile beyond the tree = %d", code)
	}
	var cons map[string]any
	// To a size a checkpoint was signed at: the row's proof's.
	if code := e.call(t, "GET", fmt.Sprintf("/v1/log/consistency?from=0&to=%d", c.Size), "", nil, &cons); code != 200 {
		t.Fatalf("consistency = %d %v", code, cons)
	}
	// Proofs of rows need a reader's key.
	if code := e.call(t, "GET", "/v1/rows/"+rep.Row.ID+"/proof", "", nil, nil); code != 401 {
		t.Fatalf("proof without a key = %d", code)
	}
	if code := e.call(t, "GET", "/v1/rows/"+rep.Row.ID+"/proof", "writer", nil, nil); code != 403 {
		t.Fatalf("proof with a writer key = %d", code)
	}
}

// Once a full tile is published, ledgerd's integrator drops it from the
// bbolt file: the metric says so, and the first row's proof, its tile
// and its entry bundle are served as before, now from write-once storage.
func TestFullTilesLeaveTheFile(t *testing.T) {
	e := newEnv(t, jose.ES256)
	// Leaf 0 is the retention policy ledgerd logged at start.
	var first appendReply
	for i := range 257 {
		var rep appendReply
		e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("TILE-%d", i)})), &rep)
		if i == 0 {
			first = rep
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for scrape(t, e)["pactledger_log_leaves_in_tiles_only"] != 256 {
		if time.Now().After(deadline) {
			t.Fatalf("pactledger_log_leaves_in_tiles_only %v, want 256", scrape(t, e)["pactledger_log_leaves_in_tiles_only"])
		}
		runtime.Gosched()
	}
	var cp struct{ VerifierKey string }
	if code := e.call(t, "GET", "/v1/log/checkpoint.json", "", nil, &cp); code != 200 {
		t.Fatalf("checkpoint.json = %d", code)
	}
	var pr struct{ Bundle string }
	if code := e.call(t, "GET", "/v1/rows/"+first.Row.ID+"/proof", "auditor", nil, &pr); code != 200 {
		t.Fatalf("proof = %d", code)
	}
	b, err := proof.ParseBundle([]byte(pr.Bundle))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(cp.VerifierKey); err != nil || b.RowID != first.Row.ID || b.LeafIndex != 1 {
		t.Fatalf("bundle: %v %+v", err, b)
	}
	if code, tile := e.get(t, "/v1/log/tile/0/000"); code != 200 || len(tile) != 256*32 {
		t.Fatalf("tile = %d, %d bytes", code, len(tile))
	}
	if code, entries := e.get(t, "/v1/log/tile/entries/000"); code != 200 || !strings.Contains(string(entries), "row "+first.Row.ID+"\n") {
		t.Fatalf("entries = %d, %d bytes", code, len(entries))
	}
}

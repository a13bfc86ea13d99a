package server_test

import (
	"context"
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
)

// unpublishedBody is what /readyz shows of the log and of the server.
type unpublishedBody struct {
	Status string
	Log    struct {
		Status, Publishing, Unpublished, Error string
		PublishedSize, SignedSize              *int64
	}
}

// TestReadyzSaysTheLogIsSignedPastWhatIsPublished: while the evidence
// directory takes none of the log's tiles (an outage of that part of the
// store), rows are acknowledged and signed in the row store, the proof
// of a row signed meanwhile is not yet served, and /readyz, still ready,
// says the log is not published (publishing "behind") with the size
// served and the size signed. Once the directory takes the tiles again,
// the row's proof is served and /readyz says no more of it.
func TestReadyzSaysTheLogIsSignedPastWhatIsPublished(t *testing.T) {
	server.SetLogWaitingShown(t, 0)
	evDir := t.TempDir()
	e := newEnv(t, jose.ES256, func(c *config.Config) {
		c.Evidence = config.Evidence{Type: "dir", Dir: evDir}
		c.MerkleLog.Interval = config.Duration(20 * time.Millisecond)
	})
	write := func(target string) string {
		t.Helper()
		var rep appendReply
		if code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: target})), &rep); code != 200 {
			t.Fatalf("append %s = %d", target, code)
		}
		return rep.Row.ID
	}
	// poll calls /readyz until ok accepts its answer or the deadline
	// passes; it is ready throughout.
	poll := func(what string, ok func(unpublishedBody) bool) unpublishedBody {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var r unpublishedBody
			if code := e.call(t, "GET", "/readyz", "", nil, &r); code != 200 || r.Status != "ready" {
				t.Fatalf("/readyz = %d %+v while waiting for %s, want 200 ready", code, r, what)
			}
			if ok(r) {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz never showed %s: %+v", what, r)
			}
			runtime.Gosched()
		}
	}
	served := func(id string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for e.call(t, "GET", "/v1/rows/"+id+"/proof", "auditor", nil, nil) != 200 {
			if time.Now().After(deadline) {
				t.Fatalf("row %s has no proof", id)
			}
			runtime.Gosched()
		}
	}

	before := write("PUB-1")
	served(before)
	poll("the log published", func(r unpublishedBody) bool { return r.Log.Status == "ok" })

	// A file stands where the tiles' folder goes.
	tiles := filepath.Join(evDir, "log", "tile")
	if err := os.Rename(tiles, tiles+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tiles, []byte("outage"), 0o600); err != nil {
		t.Fatal(err)
	}
	during := write("PUB-2")
	signedInRowStore(t, e, during)
	notServed(t, e, during, "during the outage")
	r := poll("the log not published", func(r unpublishedBody) bool {
		return r.Log.Status == "not published" && r.Log.PublishedSize != nil && r.Log.SignedSize != nil && *r.Log.SignedSize > *r.Log.PublishedSize
	})
	signed, err := e.srv.Ledger().TreeSize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var cp struct{ Size string }
	if code := e.call(t, "GET", "/v1/log/checkpoint.json", "", nil, &cp); code != 200 {
		t.Fatalf("checkpoint during the outage = %d", code)
	}
	published := *r.Log.PublishedSize
	if r.Log.Publishing != "behind" || *r.Log.SignedSize != signed || cp.Size != strconv.FormatInt(published, 10) || r.Log.Error != "" {
		t.Errorf("/readyz during the outage: %+v (signed %d, published %d, want signed %d and published the checkpoint served, of size %s)", r.Log, *r.Log.SignedSize, published, signed, cp.Size)
	}
	for _, want := range []string{
		"the log is signed in the row store up to " + strconv.FormatInt(*r.Log.SignedSize, 10) + " leaves, and write-once storage has held no more than " + strconv.FormatInt(published, 10) + " since ",
		"the checkpoint, proofs and tiles are served at " + strconv.FormatInt(published, 10) + " leaves until publication resumes",
	} {
		if !strings.Contains(r.Log.Unpublished, want) {
			t.Errorf("/readyz's unpublished: %q, want it to say %q", r.Log.Unpublished, want)
		}
	}

	// The outage is over.
	if err := os.Remove(tiles); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tiles+".away", tiles); err != nil {
		t.Fatal(err)
	}
	served(during)
	poll("the log published again", func(r unpublishedBody) bool {
		return r.Log.Status == "ok" && r.Log.Publishing == "" && r.Log.PublishedSize == nil && r.Log.Unpublished == ""
	})
}

package server_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/pact/store"
)

// ledgerd's Provider prunes its store while no request comes: a turn's
// action log that came due while ledgerd was stopped is gone soon after
// it starts again, with no turn, token or device authorization to carry
// it out.
func TestTheProviderPrunesItsStoreWithNoRequest(t *testing.T) {
	e := newEnv(t, jose.ES256)
	e.stop()
	st, err := store.Open(filepath.Join(e.cfg.DataDir, "provider.db"))
	if err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-store.ActionLogKept - time.Hour)
	conv := store.Conversation{ID: "c1", Brand: "acme", PA: "https://pa.example", Sub: "u1", Created: long}
	if _, _, err := st.BeginTurn(conv, true, "m1", long); err != nil {
		t.Fatal(err)
	}
	_, err = st.RecordTurn(store.TurnRecord{ContextID: "c1", MessageID: "m1", Reply: json.RawMessage(`{}`), ReceiptSHA256: "sha-1",
		ActionLog: []store.ActionLogEntry{{Tool: "lookup_order", Target: "A-1", ArgsJSON: `{}`, At: long}}}, long)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	e.start(t)
	p := e.srv.Provider()
	const within = 10 * time.Second
	deadline := time.Now().Add(within)
	for {
		got, err := p.ActionLog("sha-1")
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the action log due before ledgerd started is kept %s after it started, with no request", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

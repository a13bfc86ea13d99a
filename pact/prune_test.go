package pact_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/pact"
	"github.com/pactledger/pactledger/pact/store"
	"github.com/pactledger/pactledger/verifier"
)

// noKeys is a key source the pruner's tests never reach: no request comes.
type noKeys struct{}

func (noKeys) Brand(context.Context, string, bool) (verifier.Signer, error) {
	return verifier.Signer{}, errors.New("no keys")
}

func (noKeys) Agent(context.Context, string, bool) (verifier.Signer, error) {
	return verifier.Signer{}, errors.New("no keys")
}

// quietProvider opens a Provider over the store at path, served no
// request, pruning every interval, logging to log.
func quietProvider(t *testing.T, path string, interval time.Duration, log *syncbuf.Buffer) *pact.Provider {
	t.Helper()
	brands, err := pact.LoadBrands("")
	if err != nil {
		t.Fatal(err)
	}
	v, err := verifier.New(verifier.Config{Audience: "urn:pactledger:provider"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pact.New(pact.Config{BaseURL: "https://provider.example", Verifier: v, Keys: noKeys{}, Brands: brands, StorePath: path,
		PruneInterval: interval, Logger: slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A Provider that no request comes to prunes what comes due all the same:
// a turn's action log, due ActionLogKept after the turn, is kept until
// then and gone within an interval after, with no write in between.
func TestAQuietProviderPrunesWhatComesDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "provider.db")
		var log syncbuf.Buffer
		const interval = 6 * time.Hour
		// The Provider makes its signing key on its first start; the turn
		// is then stored as a turn of it would be.
		if err := quietProvider(t, path, interval, &log).Close(); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		st, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		conv := store.Conversation{ID: "c1", Brand: "acme", PA: "https://pa.example", Sub: "u1", Created: t0}
		if _, _, err := st.BeginTurn(conv, true, "m1", t0); err != nil {
			t.Fatal(err)
		}
		_, err = st.RecordTurn(store.TurnRecord{ContextID: "c1", MessageID: "m1", Reply: json.RawMessage(`{}`), ReceiptSHA256: "sha-1",
			ActionLog: []store.ActionLogEntry{{Tool: "lookup_order", Target: "A-1", ArgsJSON: `{}`, At: t0}}}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}

		p := quietProvider(t, path, interval, &log)
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		go func() { stopped <- p.RunPruner(ctx) }()

		time.Sleep(store.ActionLogKept - time.Second)
		synctest.Wait()
		if got, err := p.ActionLog("sha-1"); err != nil || got == nil {
			t.Fatalf("the action log before it is due: %v %v, want it kept", got, err)
		}
		time.Sleep(interval + 2*time.Second)
		synctest.Wait()
		if got, err := p.ActionLog("sha-1"); err != nil || got != nil {
			t.Fatalf("the action log an interval after it is due, with no write: %v %v, want it pruned", got, err)
		}
		if !strings.Contains(log.String(), `"level":"INFO","msg":"provider store pruned what came due"`) {
			t.Errorf("no pass logged at INFO what it removed; the log:\n%s", log.String())
		}

		cancel()
		if err := <-stopped; err != nil {
			t.Fatalf("RunPruner stopped by its context: %v", err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Close stops RunPruner and waits for it before it closes the store, and
// a RunPruner started after Close does not run.
func TestCloseStopsThePruner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log syncbuf.Buffer
		p := quietProvider(t, filepath.Join(t.TempDir(), "provider.db"), time.Minute, &log)
		stopped := make(chan error, 1)
		go func() { stopped <- p.RunPruner(context.Background()) }()
		synctest.Wait()
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatalf("RunPruner stopped by Close: %v", err)
			}
		default:
			t.Fatal("Close returned before RunPruner did")
		}
		if err := p.RunPruner(context.Background()); !errors.Is(err, pact.ErrClosed) {
			t.Fatalf("RunPruner after Close: %v, want ErrClosed", err)
		}
		if strings.Contains(log.String(), `"level":"ERROR"`) {
			t.Errorf("the pruner logged an error:\n%s", log.String())
		}
	})
}

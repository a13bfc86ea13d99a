package pact_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/pact"
	"github.com/pactledger/pactledger/pact/pipeline"
	"github.com/pactledger/pactledger/pact/store"
)

// A rotation leaves in the key file a retired key past its period while
// a receipt it signed waits for the ledger, so that the Provider still
// publishes it; once the receipt has reached the ledger, the next
// rotation drops it.
func TestARotationKeepsARetiredKeyWhileWhatItSignedWaits(t *testing.T) {
	path := startedOnce(t, "http://p.example").StorePath
	b, err := os.ReadFile(pact.SigningKeyPath(path))
	var key struct{ Kid string }
	if err != nil || json.Unmarshal(b, &key) != nil || key.Kid == "" {
		t.Fatalf("the key file: %s %v", b, err)
	}
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	head := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"` + key.Kid + `"}`))
	if err := st.Enqueue(pipeline.Item{Receipt: &pipeline.Receipt{ReceiptJWS: head + ".e30.c2ln"}}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	rotate := func(at time.Time) pact.Rotation {
		t.Helper()
		rot, err := pact.RotateSigningKey(pact.RotateConfig{StorePath: path, Now: func() time.Time { return at }, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return rot
	}
	if rot := rotate(t0); rot.Retired != key.Kid || rot.Waiting != 1 {
		t.Fatalf("the first rotation: %+v, want %s retired and 1 entry waiting", rot, key.Kid)
	}
	past := t0.Add(pact.DefaultRetiredKeyTTL + time.Minute)
	if rot := rotate(past); !slices.Equal(rot.Kept, []string{key.Kid}) || len(rot.Dropped) != 0 {
		t.Fatalf("a rotation past the period, the receipt waiting: kept %v, dropped %v; want %s kept", rot.Kept, rot.Dropped, key.Kid)
	}

	if st, err = store.Open(path); err != nil {
		t.Fatal(err)
	}
	if err := st.Remove(1); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if rot := rotate(past.Add(time.Minute)); !slices.Equal(rot.Dropped, []string{key.Kid}) || len(rot.Kept) != 0 {
		t.Fatalf("a rotation once the receipt has reached the ledger: kept %v, dropped %v; want %s dropped", rot.Kept, rot.Dropped, key.Kid)
	}
}

// A key lost for good and replaced on purpose (ReplaceLost) while a
// receipt it signed waits for the ledger: the Provider starts, saying at
// WARN that the ledger will record the receipt UNAUTHORIZED. The same
// store beside a key file that is not its own, and was not replaced as
// lost, does not start. A rotation keeps the lost kid while the receipt
// waits, and drops it once the receipt has reached the ledger.
func TestAKeyReplacedAsLostStartsWithWhatItSigned(t *testing.T) {
	cfg := startedOnce(t, "http://p.example")
	keyFile := pact.SigningKeyPath(cfg.StorePath)
	b, err := os.ReadFile(keyFile)
	var key struct{ Kid string }
	if err != nil || json.Unmarshal(b, &key) != nil || key.Kid == "" {
		t.Fatalf("the key file: %s %v", b, err)
	}
	st, err := store.Open(cfg.StorePath)
	if err != nil {
		t.Fatal(err)
	}
	head := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"` + key.Kid + `"}`))
	if err := st.Enqueue(pipeline.Item{Receipt: &pipeline.Receipt{ReceiptJWS: head + ".e30.c2ln"}}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	// Another store's key file in its place: refused.
	other := startedOnce(t, "http://p.example")
	theirs, err := os.ReadFile(pact.SigningKeyPath(other.StorePath))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, theirs, 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := pact.New(cfg); !errors.Is(err, pact.ErrKeyFileMismatch) || !strings.Contains(err.Error(), key.Kid+" (1 waiting for the ledger, 0 set aside)") {
		if err == nil {
			p.Close()
		}
		t.Fatalf("New beside another store's key file: %v, want pact.ErrKeyFileMismatch naming %s", err, key.Kid)
	}

	// Lost for good, replaced on purpose: it starts.
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	rotate := func(replaceLost bool) pact.Rotation {
		t.Helper()
		rot, err := pact.RotateSigningKey(pact.RotateConfig{StorePath: cfg.StorePath, ReplaceLost: replaceLost, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return rot
	}
	rotate(true)
	logs := &syncbuf.Buffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	p, err := pact.New(cfg)
	if err != nil {
		t.Fatalf("New after --replace-lost with a receipt of the lost key waiting: %v", err)
	}
	p.Close()
	if l := logs.String(); !strings.Contains(l, `"level":"WARN","msg":"entries signed by a Provider signing key replaced as lost wait for the ledger: it will record them UNAUTHORIZED","kid":"`+key.Kid+`","waiting_for_the_ledger":1`) {
		t.Errorf("a start with a receipt of the lost key waiting logged:\n%s", l)
	}

	if rot := rotate(false); !slices.Equal(rot.Lost, []string{key.Kid}) {
		t.Fatalf("a rotation with the receipt waiting keeps lost %v, want %s", rot.Lost, key.Kid)
	}
	if st, err = store.Open(cfg.StorePath); err != nil {
		t.Fatal(err)
	}
	if err := st.Remove(1); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if rot := rotate(false); len(rot.Lost) != 0 {
		t.Fatalf("a rotation once the receipt has reached the ledger keeps lost %v, want none", rot.Lost)
	}
}

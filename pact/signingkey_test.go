package pact_test

import (
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

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

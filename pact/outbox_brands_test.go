package pact_test

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/pact"
	"github.com/pactledger/pactledger/pact/pipeline"
	"github.com/pactledger/pactledger/pact/store"
	"github.com/pactledger/pactledger/verifier"
)

// receiptOf is an outbox entry of a receipt of the brand at interface URL
// brand (unsigned: the brand is read from its claims, not verified).
func receiptOf(brand, id string) pipeline.Item {
	claims := `{"brand":"` + brand + `","id":"` + id + `"}`
	jws := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".c2ln"
	return pipeline.Item{Receipt: &pipeline.Receipt{ReceiptJWS: jws}}
}

// startedOnce is the configuration of a Provider at baseURL with the
// built-in brands, its file in a new directory, started once (which makes
// its signing key) and stopped.
func startedOnce(t *testing.T, baseURL string) pact.Config {
	t.Helper()
	brands, err := pact.LoadBrands("")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: "https://ledger.example"})
	reg, _ := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{}), nil, nil)
	cfg := pact.Config{BaseURL: baseURL, Verifier: v, Keys: reg, Brands: brands, StorePath: filepath.Join(t.TempDir(), "provider.db"), Logger: slog.New(slog.DiscardHandler)}
	p, err := pact.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	return cfg
}

// inOutbox puts items in the outbox of the Provider's file at path, the
// Provider stopped, and sets them all aside when setAside.
func inOutbox(t *testing.T, path string, setAside bool, items ...pipeline.Item) {
	t.Helper()
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Enqueue(items...); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); setAside && seq <= uint64(len(items)); seq++ {
		if err := st.SetAside(seq, "rejected by the ledger"); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// An entry set aside of a brand no longer configured is not put back in
// the outbox: posted, the ledger would record it UNAUTHORIZED ("not a
// trusted brand") for good. Put back one by one it is refused, naming
// the brand; put back with all the others it is passed over, counted,
// and stays set aside.
func TestASetAsideEntryOfARemovedBrandIsNotPutBack(t *testing.T) {
	cfg := startedOnce(t, "http://p.example")
	inOutbox(t, cfg.StorePath, true, receiptOf("http://p.example/a2a/gone", "r1"), receiptOf("http://p.example/a2a/acme", "r2"))
	p, err := pact.New(cfg)
	if err != nil {
		t.Fatalf("start with a removed brand's entry set aside, not waiting: %v", err)
	}
	t.Cleanup(func() { p.Close() })

	_, err = p.RetryPipelineSetAside(1, false)
	if !errors.Is(err, pact.ErrBrandNotConfigured) || !strings.Contains(err.Error(), `"gone"`) {
		t.Fatalf("put back the entry of the removed brand: %v, want ErrBrandNotConfigured naming it", err)
	}
	got, err := p.RetryPipelineSetAside(0, true)
	if want := (pact.Retried{Retried: 1, Held: 1}); err != nil || got != want {
		t.Fatalf("put back all: %+v, %v; want %+v", got, err, want)
	}
	if n, d := p.PipelineSetAside(), p.PipelineDepth(); n != 1 || d != 1 {
		t.Fatalf("set aside %d, waiting %d; want the removed brand's entry set aside, the other waiting", n, d)
	}
}

// ledgerd does not start while the outbox holds a brand's receipts under
// the interface URL of another provider.baseUrl: the ledger trusts the
// brands at the new one only and would record them UNAUTHORIZED ("not a
// trusted brand") for good. It says which brand, under which URL, how
// many entries wait, and to set provider.baseUrl back until they drain;
// set back, it starts with the entries waiting as they were.
func TestNoStartWhenTheBaseURLChangedWithReceiptsWaiting(t *testing.T) {
	cfg := startedOnce(t, "http://old.example/")
	inOutbox(t, cfg.StorePath, false, receiptOf("http://old.example/a2a/acme", "r1"), receiptOf("http://old.example/a2a/acme", "r2"))

	cfg.BaseURL = "http://new.example"
	p, err := pact.New(cfg)
	if err == nil {
		p.Close()
		t.Fatal("started with receipts of http://old.example/a2a/acme waiting, while the ledger trusts http://new.example/a2a/acme")
	}
	for _, want := range []string{`2 entries of brand "acme" at http://old.example/a2a/acme`, "http://new.example/a2a/acme", "UNAUTHORIZED",
		"Set provider.baseUrl back to http://old.example"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal to start %q does not say %q", err, want)
		}
	}

	cfg.BaseURL = "http://old.example"
	if p, err = pact.New(cfg); err != nil {
		t.Fatalf("start with provider.baseUrl set back: %v", err)
	}
	defer p.Close()
	if n := p.PipelineDepth(); n != 2 {
		t.Fatalf("the outbox holds %d entries, want the 2 receipts", n)
	}
}

// An entry set aside under the interface URL of another provider.baseUrl
// is not put back: the ledger would record it UNAUTHORIZED for good.
func TestASetAsideEntryUnderAnotherBaseURLIsNotPutBack(t *testing.T) {
	cfg := startedOnce(t, "http://new.example")
	inOutbox(t, cfg.StorePath, true, receiptOf("http://old.example/a2a/acme", "r1"), receiptOf("http://new.example/a2a/acme", "r2"))
	p, err := pact.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })

	_, err = p.RetryPipelineSetAside(1, false)
	if !errors.Is(err, pact.ErrBrandNotConfigured) || !strings.Contains(err.Error(), "http://old.example/a2a/acme") {
		t.Fatalf("put back the entry under the old base URL: %v, want ErrBrandNotConfigured naming its URL", err)
	}
	got, err := p.RetryPipelineSetAside(0, true)
	if want := (pact.Retried{Retried: 1, Held: 1}); err != nil || got != want {
		t.Fatalf("put back all: %+v, %v; want %+v", got, err, want)
	}
}

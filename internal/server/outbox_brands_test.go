package server_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/server"
)

// ledgerd does not start while the Provider's outbox holds receipts of a
// brand whose file was removed: the ledger would record them UNAUTHORIZED
// for good. It says which brand, how many entries wait, and what to do;
// with the file back, it starts and the outbox drains.
func TestStartRefusedWhileTheOutboxHoldsARemovedBrandsReceipts(t *testing.T) {
	ledger := freeAddr(t)
	s := newShop(t, func(c *config.Config) { c.Provider.LedgerURL = "http://" + ledger }) // nothing listens: the receipts wait
	at := s.token(t)
	s.send(t, at, "m1", "what is the status of order A-88213?")
	s.send(t, at, "m2", "cancel order A-5531")
	s.stop()

	dir := s.cfg.Provider.BrandsDir
	shop, err := os.ReadFile(filepath.Join(dir, "shop.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "shop.yaml"), filepath.Join(t.TempDir(), "shop.yaml")); err != nil {
		t.Fatal(err)
	}
	acme := strings.Replace(string(shop), "id: shop", "id: acme", 1)
	if err := os.WriteFile(filepath.Join(dir, "acme.yaml"), []byte(acme), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := server.New(ctx, s.cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		cancel()
		_ = srv.Serve(ctx) // stops at once
		t.Fatal("ledgerd started with the removed brand's receipts in the Provider's outbox")
	}
	for _, want := range []string{`2 entries of brand "shop"`, "not among the configured brands", "UNAUTHORIZED", "Put the brand file back"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal to start %q does not say %q", err, want)
		}
	}

	// With the file back, it starts, its receipts waiting as they were.
	if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), shop, 0o600); err != nil {
		t.Fatal(err)
	}
	s.env.start(t)
	if n := s.srv.Provider().PipelineDepth(); n != 2 {
		t.Fatalf("the outbox holds %d entries, want the 2 receipts", n)
	}
}

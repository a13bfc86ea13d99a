package server_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/server"
)

// A ledgerd with the Merkle log off does not start on a row store that
// keeps a log, where it would acknowledge rows that never get a leaf; on
// a store that never kept one it starts.
func TestNoStartWithTheLogOffOnAStoreThatKeepsOne(t *testing.T) {
	e := newEnv(t, jose.ES256)
	e.stop()
	off := false
	cfg := e.cfg
	cfg.MerkleLog.Enabled = &off
	srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = srv.Serve(ctx) // stops at once
		t.Fatal("ledgerd started with the log off on a row store that keeps one")
	}
	if !strings.Contains(err.Error(), "merkleLog.enabled is false, but the row store keeps a Merkle log") {
		t.Fatalf("refused with %v", err)
	}

	fresh := newEnv(t, jose.ES256, func(c *config.Config) { c.MerkleLog.Enabled = &off })
	if code := fresh.call(t, "GET", "/readyz", "", nil, nil); code != 200 {
		t.Fatalf("a ledgerd with the log off on its own store: /readyz %d", code)
	}
}

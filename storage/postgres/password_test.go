package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/postgres"
)

// TestPasswordReadForEachConnection: with PasswordFunc reading a password
// file, Migrate and Open connect with the file's password; after the
// role's password changes (ALTER ROLE) and its sessions end, a new
// connection is refused and Ping says the credentials were rejected
// (ErrCredentials, and unavailable); once the file holds the new
// password, a new connection succeeds on the same store, no reopening.
func TestPasswordReadForEachConnection(t *testing.T) {
	cluster := pgtest.Shared(t)
	ctx := t.Context()
	role := fmt.Sprintf("rotate_%d", time.Now().UnixNano()%1_000_000_000)
	const first, second = "first-Pw-Rj3", "second-Pw-Vb8"
	if err := cluster.AddPasswordRole(ctx, role, first); err != nil {
		t.Fatal(err)
	}
	db := regexp.MustCompile(`dbname=(\S+)`).FindStringSubmatch(cluster.CreateDB(t))[1]
	file := filepath.Join(t.TempDir(), "password")
	write := func(pw string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(first)
	cfg := postgres.Config{DSN: cluster.DSNAs(role, db), PasswordFunc: func(context.Context) (string, error) {
		b, err := os.ReadFile(file)
		return strings.TrimSpace(string(b)), err
	}}
	if _, _, err := postgres.Migrate(ctx, cfg); err != nil {
		t.Fatalf("migrate with the file's password: %v", err)
	}
	s, err := postgres.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open with the file's password: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}

	if err := cluster.Exec(ctx, "postgres", "ALTER ROLE "+role+" PASSWORD '"+second+"'"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Exec(ctx, "postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role); err != nil {
		t.Fatal(err)
	}
	var last error
	poll(t, "ping refused for the old password", 30*time.Second, func() bool {
		last = s.Ping(ctx)
		return errors.Is(last, postgres.ErrCredentials)
	})
	if !errors.Is(last, ledger.ErrUnavailable) || !strings.Contains(last.Error(), "28P01") {
		t.Errorf("ping with the old password: %v, want unavailable, naming SQLSTATE 28P01", last)
	}
	if err := s.View(ctx, func(ledger.Tx) error { return nil }); !errors.Is(err, postgres.ErrCredentials) {
		t.Errorf("a read with the old password: %v, want ErrCredentials", err)
	}
	if strings.Contains(last.Error(), first) || strings.Contains(last.Error(), second) {
		t.Errorf("the error shows a password: %v", last)
	}

	write(second)
	poll(t, "ping with the new password", 30*time.Second, func() bool {
		last = s.Ping(ctx)
		return last == nil
	})
	if err := s.Update(ctx, func(tx ledger.Tx) error { return tx.CreateRow(row("after rotation")) }); err != nil {
		t.Errorf("a write with the new password: %v", err)
	}
}

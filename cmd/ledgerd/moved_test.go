package main

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/storage/bolt"
)

// TestTwoStoresAfterMigrate: after `ledgerd migrate --from bbolt:PATH`,
// the old ledgerd on the bbolt file is started again (a leftover service,
// a rollback, a second host) while the one on PostgreSQL runs, with the
// same data directory and bucket. It refuses to start, saying the file
// was moved to PostgreSQL, when, and to run ledgerd on that store; so
// does ledgerd compact on the file. Only the ledgerd on the database
// acknowledges writes, and its log stays healthy: every write gets its
// proof. The move run again (before the ledgerd on the database starts,
// as it must be) verifies and has nothing to do. The way
// back, `ledgerd unmark-moved PATH`, is refused while another process
// has the file, then clears the mark, and ledgerd serves the file again,
// saying that the bucket holds the database's longer log.
func TestTwoStoresAfterMigrate(t *testing.T) {
	pgtest.Available(t)
	cluster, err := pgtest.New("moved")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Remove() })
	dsn := cluster.CreateDB(t)
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	const writerKey, auditorKey = "moved-writer-key", "moved-auditor-key"
	dir := t.TempDir()
	off := false
	cfg := config.Default()
	cfg.Listen = config.Listen{GRPC: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Evidence.Dir = filepath.Join(dir, "evidence")
	cfg.Audience = sc.Audience
	cfg.AllowInsecureLoopbackJWKS = true
	cfg.Provider.Enabled = &off
	cfg.MerkleLog.Interval = config.Duration(50 * time.Millisecond)
	cfg.APIKeys = []config.APIKey{
		{Name: "writer", SHA256: config.HashKey(writerKey), Roles: []string{config.RoleWriter}},
		{Name: "auditor", SHA256: config.HashKey(auditorKey), Roles: []string{config.RoleAuditor}},
	}
	for _, b := range sc.Brands() {
		cfg.Brands = append(cfg.Brands, config.Brand{InterfaceURL: b.InterfaceURL, JWKSURI: b.JWKSURI, Issuer: b.Issuer})
	}
	for _, a := range sc.Agents() {
		cfg.Agents = append(cfg.Agents, config.Agent{Issuer: a.Issuer, JWKSURI: a.JWKSURI})
	}
	write := func(base, prefix string, n int) []string {
		t.Helper()
		var ids []string
		for i := range n {
			var rep struct{ Row struct{ ID string } }
			r := sc.Mint(pacttest.Spec{Target: prefix + "-" + string(rune('a'+i)), GrantID: "grant-" + prefix})
			if code := call(t, "POST", base+"/v1/receipts", writerKey, post(r), &rep); code != http.StatusOK {
				t.Fatalf("POST /v1/receipts = %d", code)
			}
			ids = append(ids, rep.Row.ID)
		}
		return ids
	}

	boltCfg := writeConfig(t, dir, "bbolt.yaml", cfg)
	file := filepath.Join(cfg.DataDir, "ledger.db")
	base, _, stop := runLedgerd(t, boltCfg)
	before := write(base, "before", 3)
	for _, id := range before {
		waitProof(t, base, id, auditorKey)
	}
	stop()

	var out bytes.Buffer
	migrateArgs := []string{"migrate", "--from", "bbolt:" + file, "--to", "postgres:" + dsn + " password=pw-not-kept"}
	if err := run(t.Context(), migrateArgs, &out, &out); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "move verified") || !strings.Contains(out.String(), "marked "+file+" as moved") {
		t.Errorf("migrate printed:\n%s", out.String())
	}
	out.Reset()
	if err := run(t.Context(), migrateArgs, &out, &out); err != nil || !strings.Contains(out.String(), "nothing to do") {
		t.Errorf("migrate run again: %v\n%s", err, out.String())
	}
	pgCfg := cfg
	pgCfg.Store = config.Store{Kind: config.StorePostgres, DSN: dsn}
	pgBase, _, pgStop := runLedgerd(t, writeConfig(t, dir, "postgres.yaml", pgCfg))

	// The old ledgerd, started again on the file, and ledgerd compact.
	err = startOn(t, boltCfg)
	if err == nil {
		t.Fatal("ledgerd on the moved bbolt file started")
	}
	t.Logf("ledgerd on the moved file: %v", err)
	for _, want := range []string{"open " + file + ": the bbolt file was moved to PostgreSQL (", "postgres://" + pgtest.User + "@127.0.0.1:", " at 20", "run ledgerd on that store", "ledgerd unmark-moved " + file} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ledgerd on the moved file: %q; want %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "pw-not-kept") {
		t.Errorf("the refusal names the database's password: %q", err)
	}
	var compactOut bytes.Buffer
	if err := run(t.Context(), []string{"compact", "--config", boltCfg}, &compactOut, &compactOut); err == nil || !strings.Contains(err.Error(), "was moved to PostgreSQL") {
		t.Errorf("ledgerd compact on the moved file: %v", err)
	}

	// The ledgerd on the database is the ledger: its writes get proofs.
	after := write(pgBase, "on-pg", 2)
	for _, id := range after {
		waitProof(t, pgBase, id, auditorKey)
	}
	var ready struct {
		Log struct{ Status, Signing, Error string } `json:"log"`
	}
	call(t, "GET", pgBase+"/readyz", auditorKey, nil, &ready)
	if ready.Log.Status == "diverged" || ready.Log.Signing == "stopped" {
		t.Errorf("readyz of the ledgerd on PostgreSQL: log %+v", ready.Log)
	}
	pgStop()

	// The way back: refused while another process has the file.
	unmarkLockWait = 100 * time.Millisecond
	t.Cleanup(func() { unmarkLockWait = 5 * time.Second })
	held, err := bolt.OpenExport(file, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = run(t.Context(), []string{"unmark-moved", file}, &out, &out)
	held.Close()
	if err == nil || !strings.Contains(err.Error(), "locked") || !strings.Contains(err.Error(), "the mark was left as it was") {
		t.Errorf("unmark-moved while the file is open elsewhere: %v", err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"unmark-moved", "bbolt:" + file}, &out, &out); err != nil || !strings.Contains(out.String(), "cleared the mark") {
		t.Fatalf("unmark-moved: %v\n%s", err, out.String())
	}
	base, _, stop = runLedgerd(t, boltCfg)
	defer stop()
	for _, id := range before {
		get(t, base+"/v1/rows/"+id, auditorKey)
	}
	deadline := time.Now().Add(10 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for ready.Log.Status != "diverged" && time.Now().Before(deadline) {
		call(t, "GET", base+"/readyz", auditorKey, nil, &ready)
		<-poll.C
	}
	// The database's ledgerd published its log beyond the file's to the
	// bucket: the file's ledgerd says so, as operations.md tells.
	if ready.Log.Status != "diverged" {
		t.Errorf("readyz after a rollback past writes on the database: log %+v, want diverged", ready.Log)
	}
}

// startOn runs ledgerd with the configuration at cfgPath and returns the
// error it stopped with at start; nil when it served instead (it is then
// stopped).
func startOn(t *testing.T, cfgPath string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--config", cfgPath}, logs, logs) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Millisecond):
		}
		if logs.servingAddr() != "" {
			cancel()
			<-done
			return nil
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("ledgerd neither served nor stopped:\n%s", logs)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"gopkg.in/yaml.v3"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger/proof"
)

// TestMigrateFromBbolt: rows written through a ledgerd on bbolt, then
// `ledgerd migrate --from bbolt:PATH --to postgres:DSN`, then a ledgerd on
// the database with the same data directory serves every row as the
// first one did, each row's proof is the one served before and verifies
// against the old checkpoint, and the integrity check (ledgerctl fsck)
// finds nothing. A second migrate has nothing to do.
func TestMigrateFromBbolt(t *testing.T) {
	pgtest.Available(t)
	cluster, err := pgtest.New("move")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Remove() })
	dsn := cluster.CreateDB(t)
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	const writerKey, auditorKey = "move-writer-key", "move-auditor-key"
	dir := t.TempDir()
	off := false
	cfg := config.Default()
	cfg.Listen = config.Listen{GRPC: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
	cfg.DataDir = filepath.Join(dir, "data")
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

	boltCfg := writeConfig(t, dir, "bbolt.yaml", cfg)
	base, _, stop := runLedgerd(t, boltCfg)
	var ids []string
	for i := range 12 {
		var rep struct{ Row struct{ ID string } }
		r := sc.Mint(pacttest.Spec{Target: "A-" + string(rune('a'+i)), GrantID: "grant-" + string(rune('a'+i%3))})
		if code := call(t, "POST", base+"/v1/receipts", writerKey, post(r), &rep); code != http.StatusOK {
			t.Fatalf("POST /v1/receipts = %d", code)
		}
		ids = append(ids, rep.Row.ID)
	}
	for _, id := range ids {
		waitProof(t, base, id, auditorKey)
	}
	// Every row is in the latest checkpoint now.
	rows, proofs := map[string]string{}, map[string]string{}
	for _, id := range ids {
		rows[id] = get(t, base+"/v1/rows/"+id, auditorKey)
		proofs[id] = get(t, base+"/v1/rows/"+id+"/proof", auditorKey)
	}
	stop()

	var out bytes.Buffer
	from, to := "bbolt:"+filepath.Join(cfg.DataDir, "ledger.db"), "postgres:"+dsn
	if err := run(t.Context(), []string{"migrate", "--from", from, "--to", to}, &out, &out); err != nil {
		t.Fatalf("ledgerd migrate --from: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "rows: 12 copied") || !strings.Contains(out.String(), "move verified") {
		t.Errorf("ledgerd migrate --from printed:\n%s", out.String())
	}
	out.Reset()
	if err := run(t.Context(), []string{"migrate", "--from", from, "--to", to}, &out, &out); err != nil || !strings.Contains(out.String(), "nothing to do") {
		t.Errorf("second ledgerd migrate --from: %v\n%s", err, out.String())
	}

	cfg.Store = config.Store{Kind: config.StorePostgres, DSN: dsn}
	base, _, stop = runLedgerd(t, writeConfig(t, dir, "postgres.yaml", cfg))
	defer stop()
	var checkpoint string
	for _, id := range ids {
		if got := get(t, base+"/v1/rows/"+id, auditorKey); got != rows[id] {
			t.Errorf("row %s on PostgreSQL:\n%s\nwas on bbolt:\n%s", id, got, rows[id])
		}
		// ledgerd logs its retention policy at start, so the proof may
		// lead to a later checkpoint than on bbolt: the same leaf at the
		// same index, proven below.
		got := get(t, base+"/v1/rows/"+id+"/proof", auditorKey)
		var p, was struct{ Bundle, Checkpoint string }
		if err := json.Unmarshal([]byte(got), &p); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(proofs[id]), &was); err != nil {
			t.Fatal(err)
		}
		b, err := proof.ParseBundle([]byte(p.Bundle))
		if err != nil {
			t.Fatal(err)
		}
		wb, err := proof.ParseBundle([]byte(was.Bundle))
		if err != nil {
			t.Fatal(err)
		}
		if b.LeafIndex != wb.LeafIndex || b.Leaf != wb.Leaf {
			t.Errorf("proof of %s on PostgreSQL: leaf %d, was %d on bbolt; same leaf %v", id, b.LeafIndex, wb.LeafIndex, b.Leaf == wb.Leaf)
		}
		vkey, err := os.ReadFile(filepath.Join(cfg.DataDir, "log", "verifier.key"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Verify(strings.TrimSpace(string(vkey))); err != nil {
			t.Errorf("proof of %s: %v", id, err)
		}
		checkpoint = p.Checkpoint
	}
	if checkpoint == "" {
		t.Error("no checkpoint in the proofs")
	}
	var fsck struct {
		RowsChecked int
		Findings    []any
	}
	if code := call(t, "POST", base+"/v1/integrity:check", auditorKey, map[string]any{}, &fsck); code != http.StatusOK || fsck.RowsChecked != len(ids) || len(fsck.Findings) != 0 {
		t.Errorf("integrity check on PostgreSQL = %d %+v, want %d rows and no finding", code, fsck, len(ids))
	}
}

// writeConfig writes cfg as YAML into dir/name and returns the path.
func writeConfig(t *testing.T, dir, name string, cfg config.Config) string {
	t.Helper()
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runLedgerd runs ledgerd with the configuration at cfgPath until the
// returned stop is called, and returns its REST base URL and its log.
func runLedgerd(t *testing.T, cfgPath string) (string, *syncBuffer, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--config", cfgPath}, logs, logs) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("ledgerd: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if addr := logs.servingAddr(); addr != "" {
			return "http://" + addr, logs, stop
		}
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("ledgerd stopped: %v\n%s", err, logs)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledgerd did not serve:\n%s", logs)
		}
	}
}

// get returns the body of a GET that must answer 200.
func get(t *testing.T, url, key string) string {
	t.Helper()
	var raw json.RawMessage
	if code := call(t, "GET", url, key, nil, &raw); code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", url, code, raw)
	}
	return string(raw)
}

// waitProof waits until the log includes row id.
func waitProof(t *testing.T, base, id, key string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var raw json.RawMessage
		if code := call(t, "GET", base+"/v1/rows/"+id+"/proof", key, nil, &raw); code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("row %s not in a checkpoint: %s", id, raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

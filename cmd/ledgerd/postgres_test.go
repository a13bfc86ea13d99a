package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"
	"gopkg.in/yaml.v3"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/storage/postgres"
)

// syncBuffer is a log sink the test reads while ledgerd writes it.
type syncBuffer struct{ syncbuf.Buffer }

// servingAddr returns the HTTP address of the "ledgerd serving" log line,
// or "" before it is written.
func (b *syncBuffer) servingAddr() string {
	for line := range strings.Lines(b.String()) {
		var rec struct{ Msg, HTTP string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "ledgerd serving" {
			return rec.HTTP
		}
	}
	return ""
}

// TestPostgresEndToEnd: ledgerd on a PostgreSQL store. Before `ledgerd
// migrate` it refuses to start and says to run it; migrate creates the
// schema (and says so), a second run has nothing to do; then ledgerd
// serves: /readyz names the store, a receipt posted over the API is read
// back, a resubmission is ALREADY_RECORDED, the row is in the database.
// With the database stopped, a post answers 503 (UNAVAILABLE) and /readyz
// is 503; once it is back, posts succeed without a restart. The database
// password never shows in the log.
func TestPostgresEndToEnd(t *testing.T) {
	pgtest.Available(t)
	cluster, err := pgtest.New("ledgerd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Remove() })
	dsn := cluster.CreateDB(t)
	const password = "pg-secret-Zq81"
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "db-password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	const writerKey, supportKey = "e2e-writer-key", "e2e-support-key"
	off := false
	cfg := config.Default()
	cfg.Listen = config.Listen{GRPC: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Store = config.Store{Kind: config.StorePostgres, DSN: dsn, PasswordFile: pwFile}
	cfg.Audience = sc.Audience
	cfg.AllowInsecureLoopbackJWKS = true
	cfg.Provider.Enabled = &off
	cfg.APIKeys = []config.APIKey{
		{Name: "writer", SHA256: config.HashKey(writerKey), Roles: []string{config.RoleWriter}},
		{Name: "support", SHA256: config.HashKey(supportKey), Roles: []string{config.RoleSupport}},
	}
	for _, b := range sc.Brands() {
		cfg.Brands = append(cfg.Brands, config.Brand{InterfaceURL: b.InterfaceURL, JWKSURI: b.JWKSURI, Issuer: b.Issuer})
	}
	for _, a := range sc.Agents() {
		cfg.Agents = append(cfg.Agents, config.Agent{Issuer: a.Issuer, JWKSURI: a.JWKSURI})
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "ledgerd.yaml")
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := run(t.Context(), []string{"--config", cfgPath}, &out, &out); !errors.Is(err, postgres.ErrNoSchema) || !strings.Contains(err.Error(), "ledgerd migrate") {
		t.Fatalf("ledgerd before migrate: %v, want a refusal that says to run ledgerd migrate", err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"migrate", "--config", cfgPath}, &out, &out); err != nil {
		t.Fatalf("ledgerd migrate: %v", err)
	}
	if want := fmt.Sprintf("migrated the database schema from version 0 to version %d\n", postgres.SchemaVersion()); out.String() != want {
		t.Errorf("ledgerd migrate printed %q, want %q", out.String(), want)
	}
	out.Reset()
	if err := run(t.Context(), []string{"migrate", "--config", cfgPath}, &out, &out); err != nil || !strings.Contains(out.String(), fmt.Sprintf("at version %d,", postgres.SchemaVersion())) || !strings.Contains(out.String(), "nothing to do") {
		t.Errorf("second ledgerd migrate: %v, %q", err, out.String())
	}

	base, logs, stop := runLedgerd(t, cfgPath)

	var ready struct {
		Status string
		Store  struct{ Kind, Status string }
	}
	if code := call(t, "GET", base+"/readyz", "", nil, &ready); code != http.StatusOK || ready.Status != "ready" || ready.Store.Kind != "postgres" || ready.Store.Status != "ok" {
		t.Fatalf("/readyz = %d %+v, want ready on a postgres store", code, ready)
	}
	body := post(sc.Mint(pacttest.Spec{}))
	var rep struct {
		Outcome string
		Row     struct{ ID, Status string }
	}
	if code := call(t, "POST", base+"/v1/receipts", writerKey, body, &rep); code != http.StatusOK || rep.Outcome != "APPEND_OUTCOME_CREATED" || len(rep.Row.ID) != 64 {
		t.Fatalf("POST /v1/receipts = %d %+v", code, rep)
	}
	var got struct {
		Row struct{ ID, Status, Principal string }
	}
	if code := call(t, "GET", base+"/v1/rows/"+rep.Row.ID, supportKey, nil, &got); code != http.StatusOK || got.Row.ID != rep.Row.ID || got.Row.Status != "ROW_STATUS_AUTHORIZED" {
		t.Fatalf("GET the row = %d %+v", code, got)
	}
	var again struct{ Outcome string }
	if call(t, "POST", base+"/v1/receipts", writerKey, body, &again); again.Outcome != "APPEND_OUTCOME_ALREADY_RECORDED" {
		t.Errorf("resubmission: %s, want ALREADY_RECORDED", again.Outcome)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM ledger_rows WHERE id = $1", rep.Row.ID).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows with the id in the database: %d, %v; want 1", n, err)
	}

	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	down := post(sc.Mint(pacttest.Spec{}))
	if code := call(t, "POST", base+"/v1/receipts", writerKey, down, nil); code != http.StatusServiceUnavailable {
		t.Errorf("POST with the database stopped = %d, want 503", code)
	}
	if code := call(t, "GET", base+"/readyz", "", nil, &ready); code != http.StatusServiceUnavailable || ready.Store.Kind != "postgres" || !strings.HasPrefix(ready.Store.Status, "not answering") {
		t.Errorf("/readyz with the database stopped = %d %+v, want 503 saying the store does not answer", code, ready)
	}
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for call(t, "GET", base+"/readyz", "", nil, nil) != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 after the database came back:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := call(t, "POST", base+"/v1/receipts", writerKey, down, &rep); code != http.StatusOK || rep.Outcome != "APPEND_OUTCOME_CREATED" {
		t.Errorf("POST after the database came back = %d %+v", code, rep)
	}
	stop()
	if strings.Contains(logs.String(), password) {
		t.Errorf("the log shows the database password:\n%s", logs)
	}
}

// post is the body of POST /v1/receipts for r.
func post(r *pacttest.Receipt) map[string]any {
	var actions []map[string]string
	for _, a := range r.Actions {
		actions = append(actions, map[string]string{"tool": a.Tool, "target": a.Target, "argsJson": a.ArgsJSON})
	}
	return map[string]any{"receiptJws": r.ReceiptJWS, "requestJwt": r.RequestJWT, "delegationToken": r.DelegationToken, "actions": actions}
}

// call sends a REST request with key ("" for none) and decodes the JSON
// reply into out. It returns the status code.
func call(t *testing.T, method, url, key string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, url, raw, err)
		}
	}
	return resp.StatusCode
}

// TestMigrateRefuses: migrate wants a postgres store and no stray
// arguments.
func TestMigrateRefuses(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "ledgerd.yaml")
	if err := os.WriteFile(cfgPath, []byte("dataDir: "+dir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"migrate", "--config", cfgPath}, {"migrate", "now"}, {"migrate", "--no-such-flag"}} {
		var out bytes.Buffer
		if err := run(t.Context(), args, &out, &out); err == nil {
			t.Errorf("ledgerd %s succeeded", strings.Join(args, " "))
		}
	}
}

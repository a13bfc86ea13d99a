package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	bbolt "go.etcd.io/bbolt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/server"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/bolt"
)

var keys = map[string]string{"writer": "w-key", "support": "s-key", "auditor": "a-key", "admin": "ad-key"}

type fixture struct {
	addr  string
	http  string // REST base, for the log's tiles
	sc    *pacttest.Scenario
	rowID string // the A-5531 cancel
	cfg   config.Config
	stop  func()
}

// serve starts ledgerd in process on f.cfg and sets f.addr and f.stop.
func (f *fixture) serve(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, f.cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- srv.Serve(ctx) }()
	stopped := false
	f.addr = srv.GRPCAddr()
	f.http = "http://" + srv.HTTPAddr()
	if f.cfg.TLS.On() {
		f.http = "https://" + srv.HTTPAddr()
	}
	f.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(f.stop)
}

func start(t *testing.T) *fixture {
	t.Helper()
	return startWith(t, insecure.NewCredentials())
}

// startWith starts ledgerd with the configuration changed by opts and
// records the fixture's rows through a gRPC client with creds.
func startWith(t *testing.T, creds credentials.TransportCredentials, opts ...func(*config.Config)) *fixture {
	t.Helper()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	cfg := config.Default()
	cfg.Listen = config.Listen{GRPC: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
	cfg.Provider.Listen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.Audience = sc.Audience
	cfg.AllowInsecureLoopbackJWKS = true
	for role, k := range keys {
		cfg.APIKeys = append(cfg.APIKeys, config.APIKey{Name: role, SHA256: config.HashKey(k), Roles: []string{role}})
	}
	for _, b := range sc.Brands() {
		cfg.Brands = append(cfg.Brands, config.Brand{InterfaceURL: b.InterfaceURL, JWKSURI: b.JWKSURI, Issuer: b.Issuer})
	}
	for _, a := range sc.Agents() {
		cfg.Agents = append(cfg.Agents, config.Agent{Issuer: a.Issuer, JWKSURI: a.JWKSURI})
	}
	for _, o := range opts {
		o(&cfg)
	}
	f := &fixture{sc: sc, cfg: cfg}
	f.serve(t)
	ctx := context.Background()
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := ledgerv1.NewLedgerServiceClient(conn)
	wctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+keys["writer"])
	for _, spec := range []pacttest.Spec{{User: "acct-48213", Target: "A-5531"}, {User: "acct-1", Target: "B-1", Tool: "change_address"}} {
		r := sc.Mint(spec)
		rep, err := c.AppendReceipt(wctx, &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
			Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}})
		if err != nil {
			t.Fatal(err)
		}
		if f.rowID == "" {
			f.rowID = rep.GetRow().GetId()
		}
	}
	return f
}

// keep saves the ledger's latest checkpoint, as an auditor keeps it, and
// returns its file.
func (f *fixture) keep(t *testing.T) string {
	t.Helper()
	kept := filepath.Join(t.TempDir(), "kept.checkpoint")
	if code, out, errs := f.ctl(t, "nobody", "log", "checkpoint", "--save", kept); code != 0 {
		t.Fatalf("log checkpoint: %d %s %s", code, out, errs)
	}
	return kept
}

func (f *fixture) ctl(t *testing.T, role string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_HTTP": f.http, "PACTLEDGER_KEY": keys[role], "HOME": t.TempDir()}
	code := run(args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func TestSupportLeadWorkflow(t *testing.T) {
	f := start(t)
	code, out, errs := f.ctl(t, "support", "lookup", "--order", "A-5531")
	if code != 0 || !strings.Contains(out, f.rowID[:12]) || !strings.Contains(out, "acct-48213") || !strings.Contains(out, "authorized") {
		t.Fatalf("lookup: %d %s %s", code, out, errs)
	}
	code, out, _ = f.ctl(t, "support", "show", f.rowID)
	if code != 0 || !strings.Contains(out, "receipt_signature") || !strings.Contains(out, "orders:read orders:cancel") {
		t.Fatalf("show: %d %s", code, out)
	}
	code, out, _ = f.ctl(t, "auditor", "evidence", f.rowID)
	if code != 0 || !strings.Contains(out, "JWKS snapshot") || !strings.Contains(out, "cancel_order A-5531") {
		t.Fatalf("evidence: %d %s", code, out)
	}
	code, out, _ = f.ctl(t, "auditor", "verify", f.rowID)
	if code != 0 || !strings.Contains(out, "same result as at write time") {
		t.Fatalf("verify: %d %s", code, out)
	}
	code, out, _ = f.ctl(t, "support", "dispute", "open", f.rowID, "--note", "customer says they never approved cancelling A-5531")
	if code != 0 || !strings.Contains(out, "dispute open") {
		t.Fatalf("dispute open: %d %s", code, out)
	}
	code, out, _ = f.ctl(t, "support", "drill", "A-5531")
	if code != 0 || !strings.Contains(out, "score: 6 of 6") || !strings.Contains(out, "reply to the customer") {
		t.Fatalf("drill: %d %s", code, out)
	}
	code, out, _ = f.ctl(t, "support", "dispute", "resolve", f.rowID, "--as", "customer-authorized", "--note", "grant shown")
	if code != 0 || !strings.Contains(out, "resolved customer authorized") {
		t.Fatalf("dispute resolve: %d %s", code, out)
	}
	code, out, _ = f.ctl(t, "support", "drill", "--monthly", "--sample", "2")
	if code != 0 || !strings.Contains(out, "score: 12 of 12") {
		t.Fatalf("monthly: %d %s", code, out)
	}
	code, out, _ = f.ctl(t, "auditor", "drills")
	if code != 0 || strings.Count(out, "drill-") != 2 || !strings.Contains(out, "12/12") {
		t.Fatalf("drills: %d %s", code, out)
	}
}

func TestJSONOutput(t *testing.T) {
	f := start(t)
	code, out, _ := f.ctl(t, "support", "--json", "lookup", "--principal", "acct-48213")
	var rep struct {
		Rows []struct{ ID string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Rows) != 1 || rep.Rows[0].ID != f.rowID {
		t.Fatalf("json lookup: %d %s", code, out)
	}
	code, out, _ = f.ctl(t, "support", "--json", "drill", "A-5531")
	var d struct {
		Report struct{ ChecksPassed, ChecksTotal int }
	}
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || d.Report.ChecksTotal != 6 {
		t.Fatalf("json drill: %d %s", code, out)
	}
}

func TestErrorsAndExitCodes(t *testing.T) {
	f := start(t)
	unknown := strings.Repeat("0", 64)
	tests := []struct {
		name string
		role string
		args []string
		code int
		msg  string
	}{
		{"no command", "support", nil, exitUsage, ""},
		{"unknown command", "support", []string{"frobnicate"}, exitUsage, "unknown command"},
		{"short row id", "support", []string{"show", "abc"}, exitUsage, "not a row id"},
		{"lookup without filter", "support", []string{"lookup"}, exitUsage, "needs --order"},
		{"dispute without note", "support", []string{"dispute", "open", f.rowID}, exitUsage, "--note"},
		{"unknown row", "support", []string{"show", unknown}, exitNotFound, "not found"},
		{"unknown incident", "support", []string{"incidents", "INC-99"}, exitNotFound, "ledgerctl incidents: incident INC-99"},
		{"bad key", "nobody", []string{"show", f.rowID}, exitAuth, "no API key"},
		{"writer cannot read", "writer", []string{"show", f.rowID}, exitAuth, "not allowed"},
		{"auditor cannot dispute", "auditor", []string{"dispute", "open", f.rowID, "--note", "x"}, exitAuth, "not allowed"},
		{"drill with failing pulls", "support", []string{"drill", "A-0000"}, exitCheckFailed, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := f.ctl(t, tc.role, tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.msg) {
				t.Fatalf("exit %d (%q), want %d with %q", code, errs, tc.code, tc.msg)
			}
		})
	}
	// A wrong key is rejected by the server.
	var out, errb bytes.Buffer
	env := map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": "wrong"}
	if code := run([]string{"show", f.rowID}, &out, &errb, func(k string) string { return env[k] }); code != exitAuth || !strings.Contains(errb.String(), "rejected the API key") {
		t.Fatalf("wrong key: %d %s", code, errb.String())
	}
}

func TestServerDownAndKeyFile(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "k")
	if err := os.WriteFile(keyFile, []byte("s-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "ledgerctl.yaml")
	if err := os.WriteFile(cfgFile, []byte("server: 127.0.0.1:1\nkeyFile: "+keyFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"--config", cfgFile, "--timeout", "2s", "show", strings.Repeat("a", 64)}, &out, &errb, func(string) string { return "" })
	if code != exitUnavailable || !strings.Contains(errb.String(), "cannot reach ledgerd at 127.0.0.1:1") {
		t.Fatalf("server down: %d %s", code, errb.String())
	}
}

// TestSettingsRefusedBeforeDialing: a key that is not a key's text, a
// server that is not a gRPC HOST:PORT, a timeout of zero and a --sample
// out of its range are usage or key errors in plain words, before any
// call (nothing listens on the address given).
func TestSettingsRefusedBeforeDialing(t *testing.T) {
	dir := t.TempDir()
	notAKey := filepath.Join(dir, "ledgerd.yaml")
	if err := os.WriteFile(notAKey, []byte("listen:\n  grpc: 127.0.0.1:9090\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"key file of another kind", []string{"--key-file", notAKey, "whoami"}, exitAuth, "--key-file " + notAKey + " does not hold an API key"},
		{"key file missing", []string{"--key-file", filepath.Join(dir, "nonexistent"), "whoami"}, exitAuth, "cannot read the key file (--key-file)"},
		{"key with a tab", []string{"--key", "a\tb", "whoami"}, exitAuth, "--key does not hold an API key"},
		{"server without a port", []string{"--key", "k", "--server", "127.0.0.1", "whoami"}, exitUsage, "want HOST:PORT, such as 127.0.0.1:9090"},
		{"IPv6 server without a port", []string{"--key", "k", "--server", "::1", "whoami"}, exitUsage, "such as [::1]:9090"},
		{"server as a URL", []string{"--key", "k", "--server", "http://127.0.0.1:1", "whoami"}, exitUsage, "not a URL"},
		{"timeout of zero", []string{"--key", "k", "--server", "127.0.0.1:1", "--timeout", "0s", "whoami"}, exitUsage, "--timeout 0s"},
		{"sample of zero", []string{"--key", "k", "--server", "127.0.0.1:1", "drill", "--monthly", "--sample", "0"}, exitUsage, "--sample 0: 1 to 100"},
		{"sample over 100", []string{"--key", "k", "--server", "127.0.0.1:1", "drill", "--monthly", "--sample", "101"}, exitUsage, "--sample 101"},
		{"sample without --monthly", []string{"--key", "k", "--server", "127.0.0.1:1", "drill", "A-1", "--sample", "3"}, exitUsage, "--sample is for drill --monthly"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tc.args, &out, &errb, func(string) string { return "" })
			if code != tc.code || !strings.Contains(errb.String(), tc.msg) {
				t.Fatalf("exit %d (%q), want %d with %q", code, errb.String(), tc.code, tc.msg)
			}
		})
	}
}

// A relative keyFile in the configuration file is read beside the file,
// wherever ledgerctl runs.
func TestConfigFileRelativeKeyFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "support.key"), []byte("s-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "ledgerctl.yaml")
	if err := os.WriteFile(cfgFile, []byte("server: 127.0.0.1:1\nkeyFile: support.key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // elsewhere
	var out, errb bytes.Buffer
	code := run([]string{"--config", cfgFile, "--timeout", "2s", "show", strings.Repeat("a", 64)}, &out, &errb, func(string) string { return "" })
	if code != exitUnavailable || !strings.Contains(errb.String(), "cannot reach ledgerd") {
		t.Fatalf("a relative keyFile: %d %s", code, errb.String())
	}
}

func TestGrantRevokeAndFsck(t *testing.T) {
	f := start(t)
	code, out, errs := f.ctl(t, "writer", "revoke", "a2agrant_7Q2F", "--at", "2026-10-07T13:10:00Z", "--note", "customer revoked")
	if code != 0 || !strings.Contains(out, "revoked as of 2026-10-07 13:10:00Z") {
		t.Fatalf("revoke: %d %s %s", code, out, errs)
	}
	code, out, _ = f.ctl(t, "auditor", "grant", "a2agrant_7Q2F")
	if code != 0 || !strings.Contains(out, "revoked") || !strings.Contains(out, "orders:read orders:cancel") {
		t.Fatalf("grant: %d %s", code, out)
	}
	code, out, _ = f.ctl(t, "auditor", "fsck")
	if code != 0 || !strings.Contains(out, "2 rows checked") || !strings.Contains(out, "no evidence differs") {
		t.Fatalf("fsck: %d %s", code, out)
	}
	if code, _, _ := f.ctl(t, "support", "fsck"); code != exitAuth {
		t.Fatalf("fsck as support: %d", code)
	}
}

func TestFsckFindsAndRestoresAnEditedRow(t *testing.T) {
	f := start(t)
	// Wait until the uploader has the evidence in write-once storage.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, out, _ := f.ctl(t, "auditor", "fsck")
		if strings.Contains(out, "0 still in the outbox") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("evidence never uploaded: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.stop()
	db, err := bbolt.Open(filepath.Join(f.cfg.DataDir, "ledger.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		// A bundle planted where the row's is kept (by its number): it
		// differs from the one hashed at the write.
		seq := bolt.RowNumber(tx, f.rowID)
		b := tx.Bucket([]byte("evidence"))
		v := append([]byte(nil), b.Get(seq)...)
		return b.Put(seq, bytes.Replace(v, []byte("A-5531"), []byte("A-5539"), 1))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	f.serve(t)

	code, out, _ := f.ctl(t, "auditor", "fsck")
	if code != exitCheckFailed || !strings.Contains(out, "DIFFERS "+f.rowID) || !strings.Contains(out, "restorable") {
		t.Fatalf("fsck after edit: %d %s", code, out)
	}
	if code, out, _ := f.ctl(t, "auditor", "verify", f.rowID); code != exitCheckFailed || !strings.Contains(out, "DIFFERENT") {
		t.Fatalf("verify after edit: %d %s", code, out)
	}
	if code, _, _ := f.ctl(t, "auditor", "fsck", "--restore"); code != exitAuth {
		t.Fatalf("auditor restoring: %d", code)
	}
	code, out, _ = f.ctl(t, "admin", "fsck", "--restore")
	if code != 0 || !strings.Contains(out, "RESTORED "+f.rowID) || !strings.Contains(out, "restored 1 row from") || strings.Contains(out, "DIFFERS") || strings.Contains(out, "cannot be mended") {
		t.Fatalf("fsck --restore: %d %s", code, out)
	}
	if code, out, _ := f.ctl(t, "auditor", "fsck"); code != 0 || !strings.Contains(out, "no evidence differs") {
		t.Fatalf("fsck after restore: %d %s", code, out)
	}
	if code, _, _ := f.ctl(t, "auditor", "verify", f.rowID); code != 0 {
		t.Fatalf("verify after restore: %d", code)
	}
}

func TestIncidents(t *testing.T) {
	f := start(t)
	if code, out, _ := f.ctl(t, "auditor", "incidents"); code != 0 || !strings.Contains(out, "no incidents") {
		t.Fatalf("incidents: %d %s", code, out)
	}
	if code, _, errs := f.ctl(t, "writer", "revoke", "a2agrant_7Q2F", "--at", "2026-10-07T13:00:00Z"); code != 0 {
		t.Fatalf("revoke: %s", errs)
	}
	// A receipt under the revoked grant opens an incident.
	rep := f.appendReply(t, f.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-7777"}))
	if rep.GetRow().GetIncidentId() == "" {
		t.Fatalf("append: no incident: %v", rep.GetRow())
	}
	id := rep.GetRow().GetIncidentId()
	code, out, _ := f.ctl(t, "support", "incidents")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "grant_not_revoked") {
		t.Fatalf("incidents: %d %s", code, out)
	}
	code, out, _ = f.ctl(t, "support", "incidents", id)
	if code != 0 || !strings.Contains(out, "under legal hold") || !strings.Contains(out, "2 other rows") {
		t.Fatalf("incident: %d %s", code, out)
	}
	if code, _, _ := f.ctl(t, "support", "incidents", "close", id, "--note", "x"); code != exitAuth {
		t.Fatalf("support closing: %d", code)
	}
	code, out, _ = f.ctl(t, "admin", "incidents", "close", id, "--note", "customer re-granted")
	if code != 0 || !strings.Contains(out, "closed") {
		t.Fatalf("close: %d %s", code, out)
	}
	// Closing it again is refused for the ledger's state, not the command line.
	code, _, errOut := f.ctl(t, "admin", "incidents", "close", id, "--note", "again")
	if code != exitError || !strings.Contains(errOut, "conflicts with the ledger's state: incident "+id+" was already closed at ") || strings.Contains(errOut, "FailedPrecondition") {
		t.Fatalf("closing a closed incident: %d %s", code, errOut)
	}
	if code, _, _ := f.ctl(t, "support", "incidents", "INC-99"); code != exitNotFound {
		t.Fatalf("unknown incident: %d", code)
	}
}

func TestSweepDryRun(t *testing.T) {
	f := start(t)
	code, out, _ := f.ctl(t, "auditor", "sweep", "--dry-run")
	if code != 0 || !strings.Contains(out, "would remove 0 rows") {
		t.Fatalf("dry run: %d %s", code, out)
	}
	if code, _, _ := f.ctl(t, "auditor", "sweep"); code != exitAuth {
		t.Fatalf("auditor sweeping: %d", code)
	}
	if code, out, _ := f.ctl(t, "admin", "sweep"); code != 0 || !strings.Contains(out, "removed 0 rows") {
		t.Fatalf("sweep: %d %s", code, out)
	}
	// A preview far ahead: the disputed row is kept, listed until the
	// preview's time plus the incident period, and the listing says why.
	if code, _, errs := f.ctl(t, "support", "dispute", "open", f.rowID, "--note", "chargeback"); code != 0 {
		t.Fatalf("dispute open: %d %s", code, errs)
	}
	at := time.Now().UTC().AddDate(3, 0, 0).Format("2006-01-02")
	code, out, errs := f.ctl(t, "auditor", "sweep", "--dry-run", "--at", at)
	if code != 0 || !strings.Contains(out+errs, "kept: its dispute is open") || !strings.Contains(out+errs, "each sweep moves it on while it stays open") {
		t.Fatalf("a preview at %s: %d\n%s%s", at, code, out, errs)
	}
	if code, out, errs := f.ctl(t, "admin", "sweep", "--at", at); code != exitUsage || !strings.Contains(out+errs, "--at is for --dry-run only") {
		t.Fatalf("a sweep with --at: %d %s%s", code, out, errs)
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 rows", 1: "1 row", 2: "2 rows"} {
		if got := plural(n, "row"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}

// A drill that had nothing to drill prints its note and no empty table
// or score of 0 of 0; one that ran prints both.
func TestPrintDrillWithNothingToDrill(t *testing.T) {
	var out bytes.Buffer
	c := &cli{out: &out}
	c.printDrill(&ledgerv1.DrillReport{Id: "d1", Kind: ledgerv1.DrillKind_DRILL_KIND_MONTHLY, Note: "nothing to drill: the ledger holds no eligible rows"}, false)
	if s := out.String(); strings.Contains(s, "PULL") || strings.Contains(s, "0 of 0") || !strings.Contains(s, "nothing to drill") || !strings.Contains(s, "score: nothing scored") {
		t.Errorf("a drill with nothing to drill:\n%s", s)
	}
	out.Reset()
	c.printDrill(&ledgerv1.DrillReport{Id: "d2", Rows: []string{"r1"}, ChecksPassed: 1, ChecksTotal: 1,
		Pulls: []*ledgerv1.DrillPull{{RowId: "r1", Name: "receipt_row", Passed: true}}}, false)
	if s := out.String(); !strings.Contains(s, "PULL") || !strings.Contains(s, "score: 1 of 1 checks passed") || !strings.Contains(s, ", 1 row, took") {
		t.Errorf("a drill of one row:\n%s", s)
	}
}

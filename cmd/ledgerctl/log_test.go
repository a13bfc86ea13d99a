package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/note"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/proof"
	"github.com/pactledger/pactledger/ledger/storetest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

// verifierKey is the log's published verifier key, as ledgerd wrote it.
func (f *fixture) verifierKey(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.cfg.DataDir, "log", "verifier.key"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// offline runs ledgerctl with no server reachable and no API key.
func offline(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	env := map[string]string{"PACTLEDGER_SERVER": "127.0.0.1:1", "HOME": os.TempDir()}
	code := run(args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

// logged waits until row id is in a signed checkpoint (ledgerctl proof
// waits for it) and returns its proof file.
func (f *fixture) logged(t *testing.T, id string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), id[:12]+".proof")
	if code, _, errs := f.ctl(t, "auditor", "proof", id, "--out", file, "--wait", "20s"); code != 0 {
		t.Fatalf("proof %s: %d %s", id, code, errs)
	}
	return file
}

// served is logged for a row whose leaf the ledger does not write: the
// proof's bundle is written as the server's answer, and ledgerctl proof
// says it is no proof of the row (exit 1).
func (f *fixture) served(t *testing.T, id string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), id[:12]+".proof")
	if code, _, errs := f.ctl(t, "auditor", "proof", id, "--out", file, "--wait", "20s"); code != exitCheckFailed || !strings.Contains(errs, "is NO proof of it") {
		t.Fatalf("proof %s of a leaf the ledger does not write: %d %s; want exit %d saying it is no proof", id, code, errs, exitCheckFailed)
	}
	return file
}

func TestLogCheckpointProofAndAudit(t *testing.T) {
	f := start(t)
	key := f.verifierKey(t)
	file := f.logged(t, f.rowID)
	kept := filepath.Join(t.TempDir(), "kept.checkpoint")

	// log checkpoint needs no API key; it says which key verified it.
	code, out, errs := f.ctl(t, "nobody", "log", "checkpoint", "--save", kept)
	if code != 0 || !strings.Contains(out, "localhost/pactledger") || !strings.Contains(out, "the key the server reports") || !strings.Contains(out, "size") {
		t.Fatalf("log checkpoint: %d %s %s", code, out, errs)
	}
	code, out, _ = f.ctl(t, "nobody", "log", "checkpoint", "--log-key", filepath.Join(f.cfg.DataDir, "log", "verifier.key"))
	if code != 0 || !strings.Contains(out, "the key you gave") {
		t.Fatalf("log checkpoint --log-key: %d %s", code, out)
	}
	_, otherKey, err := note.GenerateKey(rand.Reader, "localhost/pactledger")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errs := f.ctl(t, "nobody", "log", "checkpoint", "--log-key", otherKey); code != exitCheckFailed || !strings.Contains(errs, "does NOT verify") {
		t.Fatalf("checkpoint with another key: %d %s", code, errs)
	}

	// proof verify runs with no server and no API key.
	code, out, errs = offline("proof", "verify", file, "--log-key", key)
	if code != 0 || !strings.Contains(out, "verified: row "+f.rowID+" is leaf") || !strings.Contains(out, "status") {
		t.Fatalf("proof verify: %d %s %s", code, out, errs)
	}
	raw, _ := os.ReadFile(file)
	edited := filepath.Join(t.TempDir(), "edited.proof")
	if err := os.WriteFile(edited, bytes.Replace(raw, []byte(`status authorized`), []byte(`status incident`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"edited leaf", []string{"proof", "verify", edited, "--log-key", key}, exitCheckFailed, "NOT VERIFIED"},
		{"another key", []string{"proof", "verify", file, "--log-key", otherKey}, exitCheckFailed, "NOT VERIFIED"},
		{"no key", []string{"proof", "verify", file}, exitUsage, "needs --log-key"},
		{"not a key", []string{"proof", "verify", file, "--log-key", "nonsense"}, exitUsage, "neither a verifier key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := offline(tc.args...)
			if code != tc.code || !strings.Contains(out+errs, tc.msg) {
				t.Fatalf("exit %d %s %s, want %d with %q", code, out, errs, tc.code, tc.msg)
			}
		})
	}

	// The log grows: a dispute event and a new row. The audit proves the
	// kept checkpoint is a prefix and compares every new leaf with its row.
	if code, _, errs := f.ctl(t, "support", "dispute", "open", f.rowID, "--note", "never asked"); code != 0 {
		t.Fatalf("dispute: %s", errs)
	}
	f.logged(t, f.append(t, pacttest.Spec{User: "acct-3", Target: "C-3"}))
	code, out, errs = f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", key)
	if code != 0 || !strings.Contains(out, "consistent: the tree of size") || !strings.Contains(out, "audit passed") || !strings.Contains(out, "3 readable rows") {
		t.Fatalf("audit: %d %s %s", code, out, errs)
	}
	// Without an API key the audit checks the log against its tiles only.
	code, out, _ = f.ctl(t, "nobody", "log", "audit", "--from", kept)
	if code != 0 || !strings.Contains(out, "rows not compared") || !strings.Contains(out, "the key the server reports") {
		t.Fatalf("audit without a key: %d %s", code, out)
	}
	// A checkpoint of another log is refused.
	other := filepath.Join(t.TempDir(), "other.checkpoint")
	if err := os.WriteFile(other, []byte("localhost/pactledger\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— localhost/pactledger AAAAAA==\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := f.ctl(t, "auditor", "log", "audit", "--from", other, "--log-key", key); code != exitCheckFailed || !strings.Contains(out, "does not verify") {
		t.Fatalf("audit from a forged checkpoint: %d %s", code, out)
	}
}

// A proof bundle names its row itself, and comes from the ledger being
// checked: --row holds its leaf to the row the customer asked about, and
// --event to that row's event. A bundle whose rowId is left out, or
// shadowed by a case-variant key (encoding/json matches keys regardless
// of case), verifies another row's leaf only when no --row is given, and
// is then said to name its row itself.
func TestProofVerifyHoldsTheLeafToTheRowGiven(t *testing.T) {
	f := start(t)
	key := f.verifierKey(t)
	other := f.append(t, pacttest.Spec{User: "acct-3", Target: "C-3"})
	if code, _, errs := f.ctl(t, "support", "dispute", "open", f.rowID, "--note", "never asked"); code != 0 {
		t.Fatalf("dispute: %s", errs)
	}
	file, otherFile := f.logged(t, f.rowID), f.logged(t, other)
	event := filepath.Join(t.TempDir(), "d0.proof")
	if code, _, errs := f.ctl(t, "auditor", "proof", f.rowID, "--event", "dispute/0", "--out", event, "--wait", "20s"); code != 0 || !strings.Contains(errs, "--row "+f.rowID+" --event dispute/0") {
		t.Fatalf("proof --event dispute/0: %d %s", code, errs)
	}
	raw, err := os.ReadFile(otherFile)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The other row's bundle, its rowId shown as the customer's row and
	// shadowed by an empty ROWID; and without a rowId.
	shadowed := write("shadowed.proof", strings.Replace(string(raw), `"rowId": "`+other+`"`, `"rowId": "`+f.rowID+`", "ROWID": ""`, 1))
	unnamed := write("unnamed.proof", strings.Replace(string(raw), `"rowId": "`+other+`",`, "", 1))
	if !strings.Contains(string(raw), `"rowId": "`+other+`",`) {
		t.Fatalf("setup: the bundle does not name its row as expected: %s", raw)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"its row", []string{file, "--row", f.rowID}, 0, "verified: row " + f.rowID},
		{"another row", []string{file, "--row", other}, exitCheckFailed, "not row " + other},
		{"a case-variant rowId", []string{shadowed, "--row", f.rowID}, exitCheckFailed, `field "ROWID"`},
		{"a case-variant rowId, no --row", []string{shadowed}, exitCheckFailed, `field "ROWID"`},
		{"no rowId", []string{unnamed, "--row", f.rowID}, exitCheckFailed, "not row " + f.rowID},
		{"no rowId, no --row", []string{unnamed}, 0, "pass --row ID"},
		{"its event", []string{event, "--row", f.rowID, "--event", "dispute/0"}, 0, "verified: dispute event 0 of row " + f.rowID},
		{"another event", []string{event, "--row", f.rowID, "--event", "dispute/1"}, exitCheckFailed, "not of dispute/1"},
		{"the event as the row", []string{event, "--row", f.rowID}, exitCheckFailed, "not a row's (kind dispute)"},
		{"the row as an event", []string{file, "--row", f.rowID, "--event", "dispute/0"}, exitCheckFailed, "not a dispute event's"},
		{"an event without a row", []string{event, "--event", "dispute/0"}, exitUsage, "needs --row"},
		{"no such event", []string{event, "--row", f.rowID, "--event", "closure"}, exitUsage, "want dispute/N"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := offline(append([]string{"proof", "verify", "--log-key", key}, tc.args...)...)
			if code != tc.code || !strings.Contains(out+errs, tc.msg) {
				t.Fatalf("exit %d %s %s, want %d with %q", code, out, errs, tc.code, tc.msg)
			}
		})
	}
}

// append posts a receipt as the writer and returns its row id.
func (f *fixture) append(t *testing.T, spec pacttest.Spec) string {
	t.Helper()
	return f.appendMinted(t, f.sc.Mint(spec))
}

// appendMinted posts r, minted by f.sc, as the writer and returns its row
// id.
func (f *fixture) appendMinted(t *testing.T, r *pacttest.Receipt) string {
	t.Helper()
	return f.appendReply(t, r).GetRow().GetId()
}

// appendReply posts r, minted by f.sc, as the writer and returns
// ledgerd's reply.
func (f *fixture) appendReply(t *testing.T, r *pacttest.Receipt) *ledgerv1.AppendReceiptResponse {
	t.Helper()
	c, wctx := f.writer(t)
	rep, err := c.AppendReceipt(wctx, &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
		Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// writer is a gRPC client of f's ledgerd, closed when the test ends, and
// a context that calls it with the writer's key.
func (f *fixture) writer(t *testing.T) (ledgerv1.LedgerServiceClient, context.Context) {
	t.Helper()
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return ledgerv1.NewLedgerServiceClient(conn), metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+keys["writer"])
}

// edit stops ledgerd, edits its bbolt file directly and starts it again.
func (f *fixture) edit(t *testing.T, fn func(tx *bbolt.Tx) error) {
	t.Helper()
	f.stop()
	if err := tamper.Apply(filepath.Join(f.cfg.DataDir, "ledger.db"), fn); err != nil {
		t.Fatal(err)
	}
	f.serve(t)
}

// Dropping a row, inserting one or rewriting one in the bbolt file is
// caught by both log audit (from the kept checkpoint) and fsck.
func TestTamperingIsCaughtByAuditAndFsck(t *testing.T) {
	forged := strings.Repeat("f", 64)
	tests := []struct {
		name      string
		edit      func(f *fixture, later string) func(*bbolt.Tx) error
		audit     string // in the audit's output
		fsck      string // in fsck's output
		auditArgs []string
	}{
		{"drop a row", func(_ *fixture, later string) func(*bbolt.Tx) error { return tamper.DropRow(later) },
			"the ledger no longer holds row %s, and no retention sweep removed it",
			"names row %s, which the row store does not hold and no retention sweep removed", nil},
		{"insert a forged row", func(f *fixture, _ string) func(*bbolt.Tx) error { return tamper.ForgeRow(f.rowID, forged) },
			"row " + forged + ": the ledger holds it but the log has no leaf for it",
			"DIFFERS " + forged + ": row " + forged + " has no leaf in the log", []string{"--settle", "500ms"}},
		{"rewrite a row's status", func(f *fixture, _ string) func(*bbolt.Tx) error {
			return tamper.EditRow(f.rowID, func(r *ledger.Row) { r.Status = ledger.Incident })
		},
			`status is "incident" in the row, "authorized" in the leaf`,
			`status is "incident" in the row store, "authorized" in the leaf`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t)
			f.logged(t, f.rowID)
			kept := filepath.Join(t.TempDir(), "kept.checkpoint")
			if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", kept); code != 0 {
				t.Fatalf("checkpoint: %s", errs)
			}
			later := f.append(t, pacttest.Spec{User: "acct-9", Target: "L-9"})
			f.logged(t, later)
			key := f.verifierKey(t)
			if code, out, _ := f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", key); code != 0 {
				t.Fatalf("audit before tampering: %d %s", code, out)
			}
			if code, out, _ := f.ctl(t, "auditor", "fsck"); code != 0 {
				t.Fatalf("fsck before tampering: %d %s", code, out)
			}

			f.edit(t, tc.edit(f, later))
			want := func(s string) string { return strings.ReplaceAll(s, "%s", later) }
			args := append([]string{"log", "audit", "--from", kept, "--log-key", key}, tc.auditArgs...)
			code, out, errs := f.ctl(t, "auditor", args...)
			if code != exitCheckFailed || !strings.Contains(out, "MISMATCH") || !strings.Contains(out, want(tc.audit)) {
				t.Fatalf("audit after tampering: %d\n%s%s\nwant %q", code, out, errs, want(tc.audit))
			}
			code, out, errs = f.ctl(t, "auditor", "fsck")
			if code != exitCheckFailed || !strings.Contains(out, want(tc.fsck)) {
				t.Fatalf("fsck after tampering: %d\n%s%s\nwant %q", code, out, errs, want(tc.fsck))
			}
			// The write-once copy cannot mend a row edited against its
			// leaf: --restore restores nothing and says what is left.
			code, out, errs = f.ctl(t, "admin", "fsck", "--restore")
			if code != exitCheckFailed || !strings.Contains(out, "restored 0 rows from the write-once copy") ||
				!strings.Contains(out, "cannot be mended from the write-once copy") || !strings.Contains(out, want(tc.fsck)) {
				t.Fatalf("fsck --restore after tampering: %d\n%s%s", code, out, errs)
			}
		})
	}
}

// A row swept by retention keeps its leaf: its proof still verifies
// offline, and the audit and fsck count it as swept, not as missing.
func TestSweptRowsProofStillVerifies(t *testing.T) {
	f := start(t)
	f.stop()
	// Record a read-only row a year ago, through a ledger keeping the same
	// log; ledgerd sweeps it at start-up. The ledger starts over empty:
	// the log takes leaves in the order they commit, so a row recorded a
	// year ago comes before every leaf recorded since (the audit checks
	// it), the fixture's rows among them.
	if err := os.RemoveAll(f.cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().UTC().AddDate(-1, 0, 0)
	store, err := bolt.Open(filepath.Join(f.cfg.DataDir, "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	objects, err := localdir.Open(filepath.Join(f.cfg.DataDir, "evidence"))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: f.sc.Audience})
	l, err := ledger.New(store, objects, v, f.sc.Static(old), ledger.Config{Now: func() time.Time { return old }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	signer, _, _, err := config.EnsureLogKey(&f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.EnableLog(ledger.LogConfig{Signer: signer}); err != nil {
		t.Fatal(err)
	}
	r := f.sc.Mint(pacttest.Spec{Target: "OLD-1", At: old, Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})
	row, _, err := l.AppendReceipt(context.Background(), ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions})
	if err != nil {
		t.Fatal(err)
	}
	// A row recorded that long ago had its objects uploaded long since.
	if err := storetest.DrainOutbox(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(t.TempDir(), "kept.checkpoint")
	f.serve(t)
	if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", kept); code != 0 {
		t.Fatal(errs)
	}
	file := f.logged(t, row.ID)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, _ := f.ctl(t, "support", "show", row.ID)
		if code == exitNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("row not swept: show = %d", code)
		}
		_ = pause(context.Background(), 20*time.Millisecond)
	}
	key := f.verifierKey(t)
	if code, out, errs := offline("proof", "verify", file, "--log-key", key); code != 0 || !strings.Contains(out, "verified: row "+row.ID) {
		t.Fatalf("swept row's proof: %d %s %s", code, out, errs)
	}
	// A proof fetched after the sweep verifies too.
	after := f.logged(t, row.ID)
	if code, out, errs := offline("proof", "verify", after, "--log-key", key); code != 0 {
		t.Fatalf("swept row's proof fetched after the sweep: %d %s %s", code, out, errs)
	}
	code, out, errs := f.ctl(t, "auditor", "log", "audit", "--from", kept, "--all", "--log-key", key)
	if code != 0 || !strings.Contains(out, "1 rows swept by retention") {
		t.Fatalf("audit: %d %s %s", code, out, errs)
	}
	if code, out, _ := f.ctl(t, "auditor", "fsck"); code != 0 {
		t.Fatalf("fsck: %d %s", code, out)
	}
}

// A drill carries the checkpoint and each row's proof; --proof-dir writes
// the proof files, which verify offline.
func TestDrillProofFiles(t *testing.T) {
	f := start(t)
	f.logged(t, f.rowID)
	key := f.verifierKey(t)
	dir := filepath.Join(t.TempDir(), "proofs")
	code, out, errs := f.ctl(t, "support", "drill", "A-5531", "--proof-dir", dir)
	if code != 0 || !strings.Contains(out, "Merkle log: checkpoint of size") || !strings.Contains(out, "inclusion proofs for 1 of 1 row") ||
		!strings.Contains(out, "Attached is a proof file") || !strings.Contains(out, "in the Merkle log as leaf") || !strings.Contains(errs, "wrote 1 proof file to ") {
		t.Fatalf("drill: %d %s %s", code, out, errs)
	}
	if code, out, errs := offline("proof", "verify", filepath.Join(dir, f.rowID+".proof"), "--log-key", key); code != 0 {
		t.Fatalf("drill's proof file: %d %s %s", code, out, errs)
	}
	monthly := filepath.Join(t.TempDir(), "monthly")
	code, out, _ = f.ctl(t, "support", "drill", "--monthly", "--sample", "2", "--proof-dir", monthly)
	if code != 0 || !strings.Contains(out, "Merkle log: checkpoint of size") {
		t.Fatalf("monthly drill: %d %s", code, out)
	}
	files, _ := filepath.Glob(filepath.Join(monthly, "*.proof"))
	if len(files) == 0 {
		t.Fatalf("monthly drill wrote no proof files: %s", out)
	}
	for _, file := range files {
		if code, out, errs := offline("proof", "verify", file, "--log-key", key); code != 0 {
			t.Fatalf("%s: %d %s %s", file, code, out, errs)
		}
	}
	// The stored report keeps them.
	code, out, _ = f.ctl(t, "auditor", "--json", "drills")
	// protojson varies its whitespace from build to build: compare values.
	if code != 0 || !regexp.MustCompile(`"checkpoint":\s*"localhost/pactledger`).MatchString(out) || !strings.Contains(out, `"leafIndex"`) {
		t.Fatalf("drills --json: %d %.2000s", code, out)
	}
}

// A receipt posted with its signature's other (high-s) encoding is logged
// under the hash of its canonical form: proof verify says which bytes the
// leaf's receipt hash is of, so a customer holding the posted bytes is not
// left with two hashes. One posted canonical gets no such note.
func TestProofVerifySaysWhichReceiptBytesTheLeafHashes(t *testing.T) {
	f := start(t)
	key := f.verifierKey(t)
	for _, tc := range []struct {
		target string
		high   bool
	}{{"A-7001", true}, {"A-7002", false}} {
		r := f.sc.Mint(pacttest.Spec{Target: tc.target})
		r.ReceiptJWS = verifier.Canonical(r.ReceiptJWS)
		if tc.high {
			r.ReceiptJWS = pacttest.MalleateES256(r.ReceiptJWS)
		}
		code, out, errs := offline("proof", "verify", f.logged(t, f.appendMinted(t, r)), "--log-key", key)
		if code != 0 || strings.Contains(out, "the receipt in its canonical form") != tc.high {
			t.Fatalf("proof verify of a receipt posted %s (high-s %v): %d %s %s", tc.target, tc.high, code, out, errs)
		}
	}
}

// A whole data directory rolled back (the row store and the local
// evidence directory inside it restored together from a backup) leaves
// nothing local to contradict it: fsck passes. An audit from a
// checkpoint kept before the rollback fails, and says what that proves
// and that fsck cannot list the lost leaves when write-once storage was
// rolled back too.
func TestAuditAfterTheWholeDataDirectoryIsRolledBack(t *testing.T) {
	f := start(t)
	key := f.verifierKey(t)
	f.logged(t, f.rowID)
	f.stop()
	backup := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(backup, os.DirFS(f.cfg.DataDir)); err != nil {
		t.Fatal(err)
	}
	f.serve(t)
	f.logged(t, f.append(t, pacttest.Spec{User: "acct-9", Target: "LOST-9"}))
	kept := filepath.Join(t.TempDir(), "kept.checkpoint")
	if code, out, errs := f.ctl(t, "nobody", "log", "checkpoint", "--save", kept); code != 0 {
		t.Fatalf("log checkpoint: %d %s %s", code, out, errs)
	}
	f.stop()
	if err := os.RemoveAll(f.cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(f.cfg.DataDir, os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	f.serve(t)
	f.logged(t, f.rowID)

	if code, out, errs := f.ctl(t, "auditor", "fsck"); code != 0 {
		t.Errorf("fsck after the whole data directory was rolled back: %d\n%s%s\nwant it to pass: nothing local contradicts it", code, out, errs)
	}
	code, out, errs := f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", key)
	for _, want := range []string{
		"FAILED: ",
		"This proves the ledger's log is not an extension of a checkpoint the ledger signed earlier",
		"its history was rewritten or rolled back since",
		"but only when write-once storage was not rolled back with the row store",
		"The kept checkpoint, and any other checkpoint kept outside the ledger, is then the only witness",
	} {
		if code != exitCheckFailed || !strings.Contains(out, want) {
			t.Errorf("log audit from a checkpoint kept before the rollback: %d\n%s%s\nwant exit %d saying %q", code, out, errs, exitCheckFailed, want)
			break
		}
	}
	if strings.Contains(out, "lists each published leaf it lacks, with its row.") {
		t.Errorf("the audit still promises fsck lists the lost leaves:\n%s", out)
	}
}

// A ledgerd's answer to a proof is checked before it is written: one that
// is no bundle (here control sequences that would clear the screen and
// print a verdict) is refused, a bundle of another row is written as the
// server's answer but said to be no proof (exit 1), and a bundle is
// written with every character a terminal would act on or hide escaped.
func TestAProofAnswerIsWrittenOnlyAsABundle(t *testing.T) {
	f := start(t)
	f.logged(t, f.rowID)
	other := f.append(t, pacttest.Spec{User: "acct-3", Target: "C-3"})
	f.logged(t, other)
	s := f.split(t)
	s.rowProof = func(ctx context.Context, r *ledgerv1.GetRowProofRequest) (*ledgerv1.GetRowProofResponse, error) {
		return &ledgerv1.GetRowProofResponse{LeafIndex: 0, Bundle: "\x1b[2J\x1b[Hverified: row " + r.GetId() + " is leaf 0 of the log\n"}, nil
	}
	code, out, errs := f.ctl(t, "auditor", "proof", f.rowID)
	if code == 0 || strings.Contains(out+errs, "\x1b") || !strings.Contains(errs, "not a proof bundle") {
		t.Fatalf("an answer that is no bundle: exit %d, stdout %q, stderr %q; want it refused, nothing raw printed", code, out, errs)
	}

	// The real bundle of another row, handed out for this one.
	s.rowProof = nil
	_, bundleOfOther, _ := f.ctl(t, "auditor", "proof", other)
	s.rowProof = func(ctx context.Context, r *ledgerv1.GetRowProofRequest) (*ledgerv1.GetRowProofResponse, error) {
		return &ledgerv1.GetRowProofResponse{LeafIndex: 1, Bundle: bundleOfOther}, nil
	}
	if code, out, errs := f.ctl(t, "auditor", "proof", f.rowID); code != exitCheckFailed || !strings.Contains(errs, "is NO proof of it") || !strings.Contains(errs, "not row "+f.rowID) || out == "" {
		t.Fatalf("another row's bundle: exit %d, stderr %q; want it written and said to be no proof of the row", code, errs)
	}

	// A bundle whose text holds a bidirectional override is the same
	// JSON, escaped.
	b, err := proof.ParseBundle([]byte(bundleOfOther))
	if err != nil {
		t.Fatal(err)
	}
	b.Checkpoint = strings.Replace(b.Checkpoint, "\n", "\u202e\n", 1)
	raw, _ := json.Marshal(b)
	s.rowProof = func(ctx context.Context, r *ledgerv1.GetRowProofRequest) (*ledgerv1.GetRowProofResponse, error) {
		return &ledgerv1.GetRowProofResponse{LeafIndex: 1, Bundle: string(raw)}, nil
	}
	code, out, errs = f.ctl(t, "auditor", "proof", other)
	if code != 0 || strings.Contains(out, "\u202e") || !strings.Contains(out, `\u202e`) {
		t.Fatalf("a bundle holding U+202E: exit %d, stdout %q, stderr %q; want it written escaped", code, out, errs)
	}
}

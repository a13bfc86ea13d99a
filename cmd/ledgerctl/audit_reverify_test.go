package main

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/verifier"
)

// The audit runs each compared row's checks again with the keys of the
// JWKS snapshots its leaf names, and prints the keys the rows passed
// with, each with the thumbprint its signer publishes.
func TestAuditRunsTheChecksAgain(t *testing.T) {
	f := start(t)
	kept, _, key := f.keptAudit(t)
	code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, true)...)
	if code != 0 {
		t.Fatalf("audit: exit %d:\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "checks run again here: 3 rows, their signatures with the keys of the JWKS snapshots their leaves name") {
		t.Errorf("the audit does not say it ran the three rows' checks again:\n%s", out)
	}
	b := f.sc.Brands()[0]
	kid, tp := publishedKey(t, b.JWKSURI)
	for _, want := range []string{
		"receipts of brand " + b.InterfaceURL + ": kid " + kid + ", thumbprint " + tp + ", fetched from " + b.JWKSURI + ": 3 rows",
		"delegation tokens of brand " + b.InterfaceURL + ": kid " + kid + ", thumbprint " + tp + ", fetched from " + b.JWKSURI + ": 3 rows",
		"request JWTs of agent " + f.sc.Agents()[0].Issuer + ": kid ",
		"request JWTs for the audience " + f.sc.Audience + ": 3 rows",
		"delegation tokens of brand " + b.InterfaceURL + " issued by " + b.Issuer + ": 3 rows",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the audit's keys:\n%s", want, out)
		}
	}
}

// publishedKey is the kid and RFC 7638 thumbprint of the one key the
// JWKS at uri publishes.
func publishedKey(t *testing.T, uri string) (kid, thumbprint string) {
	t.Helper()
	res, err := http.Get(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("the JWKS at %s: %v, %d keys", uri, err, len(set.Keys))
	}
	tp, err := set.Keys[0].Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return set.Keys[0].KeyID, base64.RawURLEncoding.EncodeToString(tp)
}

// An operator who writes the row store, and holds no log signing key,
// can forge a row that says its receipt passed, with a leaf that says so
// too, from a receipt its brand never signed: its bundle and its leaf
// agree, every field agrees with its evidence. The audit's own run of
// the checks finds the signature that does not verify.
func TestAuditFindsARowWhoseSignatureDoesNotVerify(t *testing.T) {
	f := start(t)
	kept, _, key := f.keptAudit(t)
	r := f.sc.Mint(pacttest.Spec{User: "acct-31337", Target: "F-1"})
	parts := strings.Split(r.ReceiptJWS, ".")
	sig := []byte(parts[2])
	// Another base64url character inside the signature (not its last,
	// whose low bits must be zero): another signature, still canonical.
	if sig[10] == 'A' {
		sig[10] = 'B'
	} else {
		sig[10] = 'A'
	}
	r.ReceiptJWS = parts[0] + "." + parts[1] + "." + string(sig)
	refused := f.appendReply(t, r).GetRow()
	if refused.GetStatus() != ledgerv1.RowStatus_ROW_STATUS_UNAUTHORIZED {
		t.Fatalf("a receipt with another signature: %v, want unauthorized", refused.GetStatus())
	}
	leaf, _ := leafOf(t, f.logged(t, refused.GetId()))
	forged := strings.Repeat("f", 64)
	var lines []string
	for _, ln := range strings.Split(leaf, "\n") {
		switch {
		case ln == "row "+refused.GetId():
			ln = "row " + forged
		case ln == "status unauthorized":
			ln = "status authorized"
		}
		lines = append(lines, ln)
	}
	// The forged row's evidence is the refused one's, in the same
	// segment of write-once storage.
	sameEvidence := func(tx ledger.Tx) error {
		loc, err := tx.Object(ledger.EvidenceKey(refused.GetId()))
		if err != nil {
			return err
		}
		return tx.SetObject(ledger.EvidenceKey(forged), loc)
	}
	f.queueBehindWith(t, forged, strings.Join(lines, "\n"), sameEvidence,
		tamper.ForgeRow(refused.GetId(), forged),
		tamper.EditRow(forged, func(row *ledger.Row) {
			row.ReceiptID = refused.GetReceiptId()
			row.Status = ledger.Authorized
			for i := range row.Verifier.Checks {
				row.Verifier.Checks[i].Result = verifier.Pass
			}
		}))
	f.logged(t, forged)
	code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, true)...)
	want := "row " + forged + ") differs from the ledger: run again here with the keys of the JWKS snapshots its leaf names, receipt_signature was PASS at write time, now FAIL"
	if code != 1 || !strings.Contains(out, want) {
		t.Errorf("audit: exit %d, want 1 with %q:\n%s%s", code, want, out, errs)
	}
}

// The snapshots are bound to the leaf by their hashes: a server that
// gives other bytes for a snapshot, or none, is a mismatch, and the row's
// checks are not run with keys the leaf does not name; its fields are
// still compared with its evidence.
func TestAuditBindsTheSnapshotsToTheLeaf(t *testing.T) {
	f := start(t)
	kept, _, key := f.keptAudit(t)
	f.edit(t, tamper.EditRow(f.rowID, func(r *ledger.Row) { r.Principal = "acct-00000" }))
	s := f.split(t)
	for name, tc := range map[string]struct {
		answer func(context.Context, *ledgerv1.GetJwksSnapshotRequest) (*ledgerv1.GetJwksSnapshotResponse, error)
		says   string
	}{
		"other bytes": {func(ctx context.Context, r *ledgerv1.GetJwksSnapshotRequest) (*ledgerv1.GetJwksSnapshotResponse, error) {
			rep, err := s.c.GetJwksSnapshot(ctx, r)
			if err == nil {
				rep.Jwks = append(rep.Jwks, ' ')
			}
			return rep, err
		}, "is given as bytes that hash to "},
		"none": {func(context.Context, *ledgerv1.GetJwksSnapshotRequest) (*ledgerv1.GetJwksSnapshotResponse, error) {
			return nil, status.Error(codes.NotFound, "no such snapshot")
		}, "is not given by the ledger: its checks were not run again here"},
	} {
		t.Run(name, func(t *testing.T) {
			s.snapshot = tc.answer
			code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, true)...)
			want := "row " + f.rowID + ") differs from the ledger: the brand's JWKS snapshot "
			edited := "the row's principal is acct-00000; its evidence says acct-48213: the row was edited after it was written"
			if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, tc.says) || !strings.Contains(out, edited) {
				t.Errorf("audit: exit %d, want 1 with %q, %q and %q:\n%s%s", code, want, tc.says, edited, out, errs)
			}
		})
	}
}

// The key shown is the one that verifies the token, found by trying each
// key the snapshot holds under its kid: a snapshot holding the brand's
// key and another under the same kid shows the other's thumbprint for a
// token the other signed, to compare with what the brand publishes.
func TestSignedByShowsTheKeyThatVerifies(t *testing.T) {
	real := pacttest.MustKey("brand-k3", jose.ES256)
	other := pacttest.MustKey("brand-k3", jose.ES256)
	body, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{real.Public(), other.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	for name, k := range map[string]*pacttest.Key{"the brand's": real, "the other": other} {
		pub := k.Public()
		tp, err := pub.Thumbprint(crypto.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		kid, got := signedBy(k.Sign(map[string]any{"iss": "x"}), body)
		if want := base64.RawURLEncoding.EncodeToString(tp); kid != "brand-k3" || got != want {
			t.Errorf("a token %s key signed: kid %s, thumbprint %s; want brand-k3, %s", name, kid, got, want)
		}
	}
	stranger := pacttest.MustKey("brand-k3", jose.ES256)
	if kid, got := signedBy(stranger.Sign(map[string]any{"iss": "x"}), body); kid != "-" || got != "-" {
		t.Errorf("a token no key of the snapshot signed: kid %s, thumbprint %s; want -, -", kid, got)
	}
}

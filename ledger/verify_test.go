package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/verifier"
)

func TestVerifyRowAfterKeyRotation(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	good, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-1"})))
	incident, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-2", ScopesUsed: []string{"refunds:issue"}})))
	forged := h.sc.Mint(pacttest.Spec{Target: "A-3"})
	forged.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(forged.Claims)
	unauth, _ := h.append(t, in(forged))

	// Both signers rotate and withdraw the old keys; the JWKS servers even go away.
	h.sc.Brand.JWKS.Set(pacttest.MustKey("brand-k4", jose.ES256))
	h.sc.PA.JWKS.Set(pacttest.MustKey("pa-2026-12", jose.ES256))
	h.sc.Close()

	for _, row := range []*ledger.Row{good, incident, unauth} {
		rv, err := h.l.VerifyRow(ctx, row.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !rv.Same {
			t.Fatalf("row %v: same = false: %v", row.Status, rv.Differences)
		}
		if len(rv.Checks) != 9 {
			t.Fatalf("re-run has %d checks", len(rv.Checks))
		}
	}
	rv, _ := h.l.VerifyRow(ctx, good.ID)
	for _, c := range rv.Checks {
		if c.Result != verifier.Pass && c.Name != verifier.CheckWithinLimits {
			t.Fatalf("after rotation %s = %v (%s)", c.Name, c.Result, c.Detail)
		}
	}
}

// editEvidence puts edited evidence bytes for a row straight into the
// bbolt file, as someone with file access could: edit(orig), where orig is
// the row's evidence as written. Once uploaded the row store holds no
// bundle of its own (reads take the write-once copy), so the edit is a
// bundle slipped in, stored uncompressed as files written before
// compression hold them.
func editEvidence(t *testing.T, path, id string, orig []byte, edit func([]byte) []byte) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		// Kept by the row's number (storage/bolt, layout 4).
		seq := bolt.RowNumber(tx, id)
		b := tx.Bucket([]byte("evidence"))
		if b.Get(seq) != nil {
			return fmt.Errorf("the row store still holds the evidence of %s after upload", id)
		}
		return b.Put(seq, edit(append([]byte(nil), orig...)))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// writeOnce returns the write-once copy of a row's evidence.
func writeOnce(t *testing.T, h *harness, id string) []byte {
	t.Helper()
	b, err := h.l.WriteOnceCopy(context.Background(), ledger.EvidenceKey(id))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVerifyRowDetectsEditedEvidence(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	r := h.sc.Mint(pacttest.Spec{})
	row, _ := h.append(t, in(r))
	if _, err := h.l.UploadRound(ctx, 10, 2); err != nil {
		t.Fatal(err)
	}
	orig := writeOnce(t, h, row.ID)
	h.store.Close()
	// Change the logged args: the receipt still verifies, but the bytes changed.
	editEvidence(t, filepath.Join(h.dir, "ledger.db"), row.ID, orig, func(b []byte) []byte {
		return bytes.Replace(b, []byte(`A-5531`), []byte(`A-5532`), 1)
	})
	h.open(t)
	rv, err := h.l.VerifyRow(ctx, row.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rv.Same || len(rv.Differences) == 0 {
		t.Fatalf("edited evidence not detected: %+v", rv)
	}
	// The write-once copy still holds the original bytes.
	if !bytes.Contains(writeOnce(t, h, row.ID), []byte(`A-5531`)) {
		t.Fatalf("write-once copy changed too")
	}
}

func TestReadOnlyRowsKeepNoReceiptBytes(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "R-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})))
	if row.Class != retention.ReadOnly || row.EvidenceNotKept == "" || row.EvidenceSHA256 == "" {
		t.Fatalf("read-only row: %v %q", row.Class, row.EvidenceNotKept)
	}
	ev, err := h.l.Evidence(ctx, row.ID)
	if err != nil || ev.NotKept == "" || ev.Evidence.ReceiptJWS != "" || ev.Evidence.RequestJWT != "" || len(ev.Evidence.Actions) != 0 {
		t.Fatalf("evidence of a read-only row: %+v %v", ev, err)
	}
	if n, _ := h.l.OutboxDepth(ctx); n != 2 { // the two JWKS snapshots only
		t.Fatalf("outbox depth %d, want the 2 snapshots", n)
	}
	rv, err := h.l.VerifyRow(ctx, row.ID)
	if err != nil || !rv.Same {
		t.Fatalf("verify: %v %+v", err, rv)
	}
	for _, c := range rv.Checks {
		sig := c.Name == verifier.CheckReceiptSignature || c.Name == verifier.CheckRequestSignature || c.Name == verifier.CheckDelegationToken
		if sig && (c.Result != verifier.Skipped || !strings.Contains(c.Detail, "read-only")) {
			t.Fatalf("%s = %v %q, want SKIPPED with the reason", c.Name, c.Result, c.Detail)
		}
	}
}

// A snapshot is kept a day past what the latest row naming it needs: a
// row of the next day is covered as it is, and a row needing more extends
// it, again a day past its need. No row outlives a snapshot it names.
func TestSnapshotRetentionFollowsTheLongestRow(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	first, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-1"})))
	h.drain(t)
	retained := func() time.Time {
		t.Helper()
		_, loc, err := h.l.Snapshot(ctx, first.BrandKey.JWKSSnapshot)
		if err != nil {
			t.Fatal(err)
		}
		return loc.RetainUntil
	}
	need := func(r *ledger.Row) time.Time { return r.RetentionStart().AddDate(0, 18, 0) }
	r0 := retained()
	if want := need(first).Add(24 * time.Hour); !r0.Equal(want) {
		t.Fatalf("snapshot retained until %v, want a day past the row's need, %v", r0, want)
	}
	// A row 23 hours later: covered as it is.
	h.set(first.RecordedAt.Add(23 * time.Hour))
	next, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-2", At: first.IssuedAt.Add(23 * time.Hour)})))
	h.drain(t)
	if got := retained(); !got.Equal(r0) || got.Before(need(next)) {
		t.Fatalf("a row 23 hours later: snapshot retained until %v, want %v unchanged and past the row's need %v", got, r0, need(next))
	}
	// A row 3 days later: extended a day past its need.
	h.set(first.RecordedAt.AddDate(0, 0, 3))
	later, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-3", At: first.IssuedAt.AddDate(0, 0, 3)})))
	h.drain(t)
	if got, want := retained(), need(later).Add(24*time.Hour); !got.Equal(want) {
		t.Fatalf("a row 3 days later: snapshot retained until %v, want %v", got, want)
	}
}

// A writer's receipt under a made-up kid starts a refetch of the agent's
// keys; the agent then publishes a key and signs with it. Its valid
// receipt, within MinRefetch of that refetch, is not recorded as signed
// by an unknown key: nothing is stored and the writer is told to retry
// (keys unavailable), and a retry is decided by a refetch of its own.
func TestAMadeUpKidDoesNotDecideTheNextKeysReceipts(t *testing.T) {
	h := newHarness(t)
	if row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-1"}))); row.Status != ledger.Authorized {
		t.Fatalf("first row %v", row.Status)
	}
	madeUp := h.sc.Mint(pacttest.Spec{Target: "A-2"})
	madeUp.RequestJWT = pacttest.MustKey("pa-made-up", jose.ES256).Sign(madeUp.RequestClaims)
	if row, _ := h.append(t, in(madeUp)); row.Status != ledger.Unauthorized {
		t.Fatalf("a request JWT under a made-up kid: %v", row.Status)
	}

	k := pacttest.MustKey("pa-2026-12", jose.ES256)
	h.sc.PA.JWKS.Set(h.sc.PA.Key, k)
	h.sc.PA.Key = k
	good := h.sc.Mint(pacttest.Spec{Target: "A-3"})
	row, _, err := h.l.AppendReceipt(context.Background(), in(good))
	if !errors.Is(err, ledger.ErrKeysUnavailable) {
		t.Fatalf("a receipt under a key published after the latest refetch = %+v, %v; want keys unavailable", row, err)
	}
	rows, _, err := h.l.List(context.Background(), ledger.Query{Target: "A-3"})
	if err != nil || len(rows) != 0 {
		t.Fatalf("rows of A-3: %+v, %v; want none", rows, err)
	}
}

// The receipt and its delegation token are checked against one set of
// the brand's keys, the one kept with the row. A token signed with a key
// the brand published after the cached set was fetched brings a newer
// set; the receipt is checked again against it and that set is kept, so
// after the brand rotates, VerifyRow still finds the token's key and
// gives the write-time verdict.
func TestTheRowsBrandKeysHoldTheDelegationTokensKey(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	// Prime the cache: the brand publishes {brand-k3}.
	first, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-1"})))
	if first.Status != ledger.Authorized {
		t.Fatalf("priming row %v", first.Status)
	}

	// The brand adds a key; its delegation tokens are now signed with k4
	// while the receipt still carries k3 (both published: a normal overlap).
	k3 := h.sc.Brand.Key
	k4 := pacttest.MustKey("brand-k4", jose.ES256)
	h.sc.Brand.JWKS.Set(k3, k4)
	r := h.sc.Mint(pacttest.Spec{Target: "A-2"})
	r.DelegationToken = k4.Sign(r.TokenClaims)

	row, _ := h.append(t, in(r))
	if row.Status != ledger.Authorized {
		t.Fatalf("row %v: %+v", row.Status, row.Verifier.Checks)
	}
	snap, _, err := h.l.Snapshot(ctx, row.BrandKey.JWKSSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(snap.Body), `"brand-k4"`) {
		t.Errorf("the row's brand snapshot does not hold brand-k4, the key that verified its delegation token:\n%s", snap.Body)
	}

	// Rotation completes; the endpoints go away.
	h.sc.Brand.JWKS.Set(pacttest.MustKey("brand-k5", jose.ES256))
	h.sc.Close()
	rv, err := h.l.VerifyRow(ctx, row.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !rv.Same {
		for _, c := range rv.Checks {
			if c.Name == verifier.CheckDelegationToken {
				t.Logf("re-run %s = %v (%s)", c.Name, c.Result, c.Detail)
			}
		}
		t.Fatalf("VerifyRow of an untouched AUTHORIZED row: same = false: %v", rv.Differences)
	}
}

// A receipt naming another pa than the request JWT's iss fails bindings
// at write time, while the request JWT's signature passes against the keys
// fetched for its iss, which the row keeps as its agent's snapshot.
// VerifyRow checks the signature against that snapshot again: the same
// verdict, with no further difference.
func TestVerifyRowChecksTheRequestJWTAgainstTheSnapshotOfItsIssuer(t *testing.T) {
	h := newHarness(t)
	r := h.sc.Mint(pacttest.Spec{})
	r.Claims["pa"] = "https://another-agent.example"
	r.ReceiptJWS = h.sc.Brand.Key.Sign(r.Claims)
	row, _ := h.append(t, in(r))
	if c := check(row, verifier.CheckRequestSignature); c.Result != verifier.Pass || check(row, verifier.CheckBindings).Result != verifier.Fail || row.Agent.JWKSSnapshot == "" {
		t.Fatalf("at write time: request_signature %+v, bindings %+v, agent snapshot %q", c, check(row, verifier.CheckBindings), row.Agent.JWKSSnapshot)
	}
	rv, err := h.l.VerifyRow(t.Context(), row.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !rv.Same || len(rv.Differences) != 0 {
		t.Errorf("VerifyRow: same %v, differences %q; want the write-time verdict again", rv.Same, rv.Differences)
	}
}

package ledger_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	lproof "github.com/pactledger/pactledger/ledger/proof"
)

const testOrigin = "ledger.test/log"

func logKeys(t testing.TB) (note.Signer, string) {
	t.Helper()
	s, vkey, err := pacttest.LogKey(testOrigin)
	if err != nil {
		t.Fatal(err)
	}
	return s, vkey
}

func (h *harness) enableLog(t testing.TB, maxBatch int) string {
	t.Helper()
	if h.logSigner == nil {
		h.logSigner, h.logVKey = logKeys(t)
	}
	s, vkey := h.logSigner, h.logVKey
	if err := h.l.EnableLog(ledger.LogConfig{Signer: s, MaxBatch: maxBatch}); err != nil {
		t.Fatal(err)
	}
	return vkey
}

func hashes(in []tlog.Hash) [][]byte {
	out := make([][]byte, len(in))
	for i := range in {
		out[i] = in[i][:]
	}
	return out
}

// receiptLeaf is a synthetic leaf of a receipt row, with the lines the
// ledger writes in one: a row's proof holds its leaf to them.
func receiptLeaf(row, recorded string) []byte {
	return fmt.Appendf(nil, "%s\nkind %s\nrow %s\nreceipt -\nrequest -\ntoken -\nevidence sha256:-\njwks - -\ngrant -\nstatus authorized\nclass read_only\nduplicate-of -\nrecorded %s\n",
		ledger.LeafVersion, ledger.LeafReceipt, row, recorded)
}

// integrate integrates every queued leaf and publishes the log, as the
// integrator does each round: the ledger serves checkpoints, proofs and
// tiles only as far as write-once storage holds them.
func (h *harness) integrate(ctx context.Context) (int, error) {
	n, err := h.l.Integrate(ctx)
	if err != nil {
		return n, err
	}
	return n, h.l.PublishTiles(ctx)
}

// queue puts n synthetic leaves in the queue, as rows' transactions do.
func (h *harness) queue(t *testing.T, from, n int) {
	t.Helper()
	err := h.store.Update(context.Background(), func(tx ledger.Tx) error {
		for i := from; i < from+n; i++ {
			if err := tx.QueueLeaf(fmt.Sprintf("ref-%d", i), receiptLeaf(fmt.Sprintf("ref-%d", i), "-")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkpointOf(t *testing.T, h *harness, vkey string) lproof.Checkpoint {
	t.Helper()
	cp, err := h.l.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, err := lproof.Open(cp, vkey)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Inclusion and consistency proofs for thousands of leaves, across sizes
// 0, 1, powers of two and tile boundaries, checked by an independent RFC
// 6962 implementation (transparency-dev/merkle); tiles rebuild the tree.
func TestMerkleLogProofsAcrossSizes(t *testing.T) {
	h := newHarness(t)
	vkey := h.enableLog(t, 0)
	ctx := context.Background()
	// The empty tree's root is the hash of nothing (RFC 6962 §2.1), as an
	// independent client computes it.
	if c := checkpointOf(t, h, vkey); c.Size != 0 || !bytes.Equal(c.Hash[:], rfc6962.DefaultHasher.EmptyRoot()) {
		t.Fatalf("empty log checkpoint: size %d, root %x; want 0 and %x", c.Size, c.Hash[:], rfc6962.DefaultHasher.EmptyRoot())
	}
	sizes := []int{1, 2, 3, 4, 7, 8, 255, 256, 257, 511, 512, 513, 1000, 4096, 5000}
	var cps []lproof.Checkpoint
	done := 0
	for _, size := range sizes {
		h.queue(t, done, size-done)
		n, err := h.integrate(ctx)
		if err != nil || n != size-done {
			t.Fatalf("integrate to %d: %d %v", size, n, err)
		}
		done = size
		c := checkpointOf(t, h, vkey)
		if c.Size != int64(size) || c.Origin != testOrigin {
			t.Fatalf("checkpoint %+v, want size %d", c, size)
		}
		cps = append(cps, c)
	}
	last := cps[len(cps)-1]
	// Every leaf's bundle verifies, with ours and with the other library.
	for i := 0; i < done; i += 7 {
		b, err := h.l.Proof(ctx, fmt.Sprintf("ref-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Verify(vkey); err != nil {
			t.Fatalf("leaf %d: %v", i, err)
		}
		path, _ := lproof.Hashes(b.Inclusion)
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(b.LeafIndex), uint64(last.Size), rfc6962.DefaultHasher.HashLeaf([]byte(b.Leaf)), hashes(path), last.Hash[:]); err != nil {
			t.Fatalf("leaf %d, independent verifier: %v", i, err)
		}
	}
	// Consistency between every pair of checkpoints.
	for i, old := range cps {
		for _, newer := range cps[i:] {
			path, _, _, err := h.l.Consistency(ctx, old.Size, newer.Size)
			if err != nil {
				t.Fatalf("consistency %d→%d: %v", old.Size, newer.Size, err)
			}
			if err := lproof.VerifyConsistency(old, newer, path); err != nil {
				t.Fatal(err)
			}
			if old.Size != newer.Size {
				if err := proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(old.Size), uint64(newer.Size), hashes(path), old.Hash[:], newer.Hash[:]); err != nil {
					t.Fatalf("consistency %d→%d, independent verifier: %v", old.Size, newer.Size, err)
				}
			}
		}
	}
	// A wrong leaf or a wrong key fails.
	b, _ := h.l.Proof(ctx, "ref-300")
	b.Leaf = strings.Replace(b.Leaf, "ref-300", "ref-301", 1)
	if _, err := b.Verify(vkey); !errors.Is(err, lproof.ErrProof) {
		t.Fatalf("edited leaf: %v", err)
	}
	_, other := logKeys(t)
	b, _ = h.l.Proof(ctx, "ref-300")
	if _, err := b.Verify(other); !errors.Is(err, lproof.ErrCheckpoint) || !strings.Contains(err.Error(), "not signed by the log key given") {
		t.Fatalf("another key: %v", err)
	}

	// The tiles alone (as a tlog-tiles client reads them) give the root,
	// and the entry bundles give the leaves.
	tr := tileReader{t: t, l: h.l}
	root, err := tlog.TreeHash(last.Size, tlog.TileHashReader(tlog.Tree{N: last.Size, Hash: last.Hash}, tr))
	if err != nil || root != last.Hash {
		t.Fatalf("tree from tiles: %v %v", root, err)
	}
	bundle, err := h.l.TileData(ctx, "tile/entries/x019/531.p/136") // not a real tile path
	if err == nil {
		t.Fatalf("bad entries path answered %d bytes", len(bundle))
	}
	bundle, err = h.l.TileData(ctx, "tile/entries/019.p/136") // leaves 4864..4999
	if err != nil {
		t.Fatal(err)
	}
	for i := 4864; len(bundle) > 0; i++ {
		n := binary.BigEndian.Uint16(bundle)
		if got := string(bundle[2 : 2+n]); !strings.Contains(got, fmt.Sprintf("row ref-%d\n", i)) {
			t.Fatalf("entry %d: %q", i, got)
		}
		bundle = bundle[2+n:]
	}
	if err := h.l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
}

type tileReader struct {
	t *testing.T
	l *ledger.Ledger
}

func (tileReader) Height() int { return ledger.TileHeight }

func (r tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		d, err := r.l.TileData(context.Background(), strings.Replace(t.Path(), "tile/8/", "tile/", 1))
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

func (tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

// Rows, dispute events and incident closures are leaves; a row swept by
// retention keeps its proof.
func TestRowsAndEventsAreLeaves(t *testing.T) {
	h := newHarness(t)
	vkey := h.enableLog(t, 0)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	h.set(t0)
	ro, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "RO-1", At: t0, Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})))
	inc, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "INC-1", At: t0, ScopesUsed: []string{"plan:change"}})))
	if _, err := h.l.Proof(ctx, ro.ID); !errors.Is(err, ledger.ErrNotLogged) {
		t.Fatalf("proof before integration: %v", err)
	}
	if _, err := h.l.AppendDispute(ctx, ro.ID, ledger.DisputeOpen, "customer: never asked", "support-key"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.CloseIncident(ctx, inc.IncidentID, "fixed", "admin-key"); err != nil {
		t.Fatal(err)
	}
	if n, err := h.integrate(ctx); err != nil || n != 4 {
		t.Fatalf("integrate: %d %v", n, err)
	}
	kinds := map[string]string{}
	for _, ref := range []string{ro.ID, inc.ID, "dispute/" + ro.ID + "/0", "incident/" + inc.IncidentID + "/close"} {
		b, err := h.l.Proof(ctx, ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if _, err := b.Verify(vkey); err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		f, err := ledger.ParseLeaf([]byte(b.Leaf))
		if err != nil {
			t.Fatal(err)
		}
		kinds[ref] = f["kind"]
		if strings.Contains(b.Leaf, "acct-48213") || strings.Contains(b.Leaf, "never asked") || strings.Contains(b.Leaf, "a2agrant_") {
			t.Fatalf("leaf holds personal data or plain ids:\n%s", b.Leaf)
		}
	}
	if kinds[ro.ID] != "receipt" || kinds["dispute/"+ro.ID+"/0"] != "dispute" || kinds["incident/"+inc.IncidentID+"/close"] != "incident-close" {
		t.Fatalf("kinds %v", kinds)
	}
	// Sweep the read-only row (90 days, but of the closed incident's
	// platform and day, and disputed: kept until the close and the
	// dispute's resolution plus 12 months): its proof still verifies.
	if _, err := h.l.AppendDispute(ctx, ro.ID, ledger.DisputeResolvedOther, "answered", "support-key"); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	h.set(t0.AddDate(1, 0, 2))
	res, err := h.l.Sweep(ctx, false)
	if err != nil || len(res.Swept) == 0 {
		t.Fatalf("sweep: %v %+v", err, res)
	}
	if _, err := h.l.Get(ctx, ro.ID); err == nil {
		t.Fatal("row not swept")
	}
	b, err := h.l.Proof(ctx, ro.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(vkey); err != nil {
		t.Fatalf("swept row's proof: %v", err)
	}
}

// TestOneIntegratorAtATime: two ledgers sharing one store both run the
// integrator; only one runs at a time (the other waits for the lease), it
// extends the log, and when it stops the other takes over and goes on
// from the same tree.
// A round of the log is prepared outside the write transaction. When the
// tree grew in between (another integrator, as when the lease changed
// hands), the round is not stored over it: Integrate prepares again from
// the new head.
func TestIntegrateAfterTheHeadMoved(t *testing.T) {
	h := newHarness(t)
	vkey := h.enableLog(t, 0)
	ctx := context.Background()
	h.queue(t, 0, 5)
	fired := false
	defer ledger.SetIntegrateHook(func() {
		if fired {
			return
		}
		fired = true
		// Another integration runs to its end first; then more leaves come.
		if n, err := h.integrate(ctx); err != nil || n != 5 {
			t.Errorf("the other integration: %d, %v; want the 5 leaves", n, err)
		}
		h.queue(t, 5, 3)
	})()
	n, err := h.integrate(ctx)
	if err != nil || n != 3 {
		t.Fatalf("integrate after the head moved: %d, %v; want the 3 new leaves", n, err)
	}
	if !fired {
		t.Fatal("the hook never ran")
	}
	c := checkpointOf(t, h, vkey)
	if c.Size != 8 {
		t.Fatalf("checkpoint size %d, want 8", c.Size)
	}
	for i := range 8 {
		b, err := h.l.Proof(ctx, fmt.Sprintf("ref-%d", i))
		if err != nil {
			t.Fatalf("leaf ref-%d: %v", i, err)
		}
		if b.LeafIndex != int64(i) {
			t.Errorf("leaf ref-%d at index %d, want %d", i, b.LeafIndex, i)
		}
		if got, err := b.Verify(vkey); err != nil || got.Size != 8 {
			t.Errorf("leaf ref-%d: proof against %+v: %v", i, got, err)
		}
	}
}

// The integrator keeps the leaves it stored last and builds their entry
// bundles from them: the bundles are byte for byte those a ledger without
// them reads back from the store, full tiles and the partial one, across
// rounds (the partial tile of one round completed by the next).
func TestEntryBundlesFromRecentLeaves(t *testing.T) {
	h := newHarness(t)
	s, _ := logKeys(t)
	if err := h.l.EnableLog(ledger.LogConfig{Signer: s, MaxBatch: 300}); err != nil {
		t.Fatal(err)
	}
	other := h.another(t, h.store, ledger.LeaseConfig{})
	if err := other.EnableLog(ledger.LogConfig{Signer: s}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h.queue(t, 0, 700)
	if n, err := h.integrate(ctx); err != nil || n != 700 {
		t.Fatalf("integrate: %d, %v", n, err)
	}
	for _, path := range []string{"tile/entries/000", "tile/entries/001", "tile/entries/002.p/188"} {
		got, err := h.l.TileData(ctx, path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		want, err := other.TileData(ctx, path)
		if err != nil {
			t.Fatalf("%s, read back: %v", path, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s from the recent leaves differs from the store's (%d and %d bytes)", path, len(got), len(want))
		}
	}
}

func TestOneIntegratorAtATime(t *testing.T) {
	h := newHarness(t)
	w := watchLeases(t)
	s, vkey := logKeys(t)
	cfg := ledger.LeaseConfig{TTL: 600 * time.Millisecond}
	var ls [2]*ledger.Ledger
	var stops [2]context.CancelFunc
	var dones [2]chan error
	for i := range ls {
		cfg.Holder = fmt.Sprintf("ledger-%d", i)
		ls[i] = h.another(t, h.store, cfg)
		if err := ls[i].EnableLog(ledger.LogConfig{Signer: s, Interval: 10 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ls {
		var ctx context.Context
		ctx, stops[i] = context.WithCancel(context.Background())
		dones[i] = make(chan error, 1)
		go func() { dones[i] <- ls[i].RunIntegrator(ctx) }()
	}
	h.queue(t, 0, 3)
	waitTreeSize(t, ls[0], 3)
	_, started := w.get(ledger.LeaseLogIntegrator)
	if len(started) != 1 {
		t.Fatalf("integrators started: %v, want one", started)
	}
	first := 0
	if started[0] == ls[1].Holder() {
		first = 1
	}
	if _, held := ls[1-first].LeaseHeld(ledger.LeaseLogIntegrator); held {
		t.Fatalf("both ledgers hold the integrator lease")
	}

	stops[first]()
	if err := <-dones[first]; err != nil {
		t.Fatalf("the first integrator: %v", err)
	}
	h.queue(t, 3, 2)
	waitTreeSize(t, ls[1-first], 5)
	most, started := w.get(ledger.LeaseLogIntegrator)
	if most != 1 || len(started) != 2 || started[1] != ls[1-first].Holder() {
		t.Errorf("integrators: at most %d at once, started %v; want 1 at once, then the other ledger", most, started)
	}
	// The other ledger serves the checkpoint once the new holder has
	// published it.
	var c lproof.Checkpoint
	waitUntil(t, "the checkpoint of size 5 served after the takeover", func() bool {
		cp, err := ls[first].Checkpoint(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c, err = lproof.Open(cp, vkey); err != nil {
			t.Fatal(err)
		}
		return c.Size == 5
	})
	stops[1-first]()
	if err := <-dones[1-first]; err != nil {
		t.Fatalf("the second integrator: %v", err)
	}
}

// A ledger started with the log logs its retention policy as a leaf of
// its own, with a proof like any other; the leaf holds the periods.
func TestPolicyIsALeaf(t *testing.T) {
	h := newHarness(t)
	vkey := h.enableLog(t, 0)
	ctx := context.Background()
	ref, err := h.l.LogPolicy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref, "policy/") || ledger.ValidID(ref) {
		t.Fatalf("ref %q: want policy/… and not a row id", ref)
	}
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "T-1"})))
	if n, err := h.integrate(ctx); err != nil || n != 2 {
		t.Fatalf("integrate: %d %v", n, err)
	}
	b, err := h.l.Proof(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(vkey); err != nil {
		t.Fatal(err)
	}
	f, err := ledger.ParseLeaf([]byte(b.Leaf))
	if err != nil {
		t.Fatal(err)
	}
	if b.LeafIndex != 0 || f["kind"] != ledger.LeafPolicy || f["read_only"] != "90 days" || f["incident"] != "12 months" || f["at"] != "2026-10-07T13:12:45Z" {
		t.Fatalf("leaf %d:\n%s", b.LeafIndex, b.Leaf)
	}
	if rb, err := h.l.Proof(ctx, row.ID); err != nil || rb.LeafIndex != 1 {
		t.Fatalf("the row's proof after the policy's: %+v %v", rb, err)
	}
	if got := integrity(t, h); len(got.Findings) != 0 {
		t.Fatalf("findings:\n%s", problems(got))
	}
}

// A dispute event or an incident closure committed but not yet integrated
// is not yet logged, as a row is, so that a client waits for it; a ref to
// one that does not exist is not found at once.
func TestProofOfEventNotYetLogged(t *testing.T) {
	h := newHarness(t)
	vkey := h.enableLog(t, 0)
	ctx := context.Background()
	ro, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "RO-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})))
	closed, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "INC-1", ScopesUsed: []string{"plan:change"}})))
	open, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "INC-2", ScopesUsed: []string{"plan:change"}})))
	if closed.IncidentID == "" || open.IncidentID == "" {
		t.Fatalf("incident rows name no incident: %q %q", closed.IncidentID, open.IncidentID)
	}
	if _, err := h.integrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The integrator does not run again until the end: the event and the
	// closure stay queued.
	if _, err := h.l.AppendDispute(ctx, ro.ID, ledger.DisputeOpen, "customer: never asked", "support-key"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.CloseIncident(ctx, closed.IncidentID, "fixed", "admin-key"); err != nil {
		t.Fatal(err)
	}
	dispute0 := "dispute/" + ro.ID + "/0"
	closure := "incident/" + closed.IncidentID + "/close"
	for _, tc := range []struct {
		name, ref string
		want      error
	}{
		{"queued dispute event", dispute0, ledger.ErrNotLogged},
		{"queued incident closure", closure, ledger.ErrNotLogged},
		{"dispute event past the row's last", "dispute/" + ro.ID + "/1", ledger.ErrNotFound},
		{"dispute event of no row", "dispute/" + strings.Repeat("0", 64) + "/0", ledger.ErrNotFound},
		{"dispute event not a number", "dispute/" + ro.ID + "/x", ledger.ErrNotFound},
		{"closure of an open incident", "incident/" + open.IncidentID + "/close", ledger.ErrNotFound},
		{"closure of no incident", "incident/INC-999/close", ledger.ErrNotFound},
		{"closure of no incident id", "incident/nonsense/close", ledger.ErrNotFound},
		{"no row", strings.Repeat("0", 64), ledger.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.l.Proof(ctx, tc.ref)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Proof(%s): %v, want %v", tc.ref, err, tc.want)
			}
			if tc.want == ledger.ErrNotLogged && errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("Proof(%s): %v is also not found", tc.ref, err)
			}
		})
	}
	if n, err := h.integrate(ctx); err != nil || n != 2 {
		t.Fatalf("integrate: %d %v", n, err)
	}
	for _, ref := range []string{dispute0, closure} {
		b, err := h.l.Proof(ctx, ref)
		if err != nil {
			t.Fatalf("%s once integrated: %v", ref, err)
		}
		if _, err := b.Verify(vkey); err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
	}
}

// queueReads is a store that counts the queued leaves its transactions
// read (PendingLeaves).
type queueReads struct {
	ledger.Store
	n *atomic.Int64
}

type queueReadsTx struct {
	ledger.Tx
	n *atomic.Int64
}

func (t queueReadsTx) PendingLeaves(n int) ([]ledger.PendingLeaf, error) {
	pend, err := t.Tx.PendingLeaves(n)
	t.n.Add(int64(len(pend)))
	return pend, err
}

func (s queueReads) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.Store.Update(ctx, func(tx ledger.Tx) error { return fn(queueReadsTx{tx, s.n}) })
}

func (s queueReads) View(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.Store.View(ctx, func(tx ledger.Tx) error { return fn(queueReadsTx{tx, s.n}) })
}

// TestProofOfQueuedRowReadsNoQueue: a proof asked for a row whose leaf is
// queued (the normal case right after a write, and what proof --wait asks
// for again and again) says ErrNotLogged by looking the one ref up: it
// reads none of the queue, however long the queue grew while no
// integrator ran.
func TestProofOfQueuedRowReadsNoQueue(t *testing.T) {
	var reads atomic.Int64
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), now: time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC),
		wrap: func(s ledger.Store) ledger.Store { return queueReads{s, &reads} }}
	t.Cleanup(h.sc.Close)
	h.open(t)
	h.enableLog(t, 0)
	ctx := context.Background()
	h.queue(t, 0, 500) // a queue no integrator took
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	h.set(t0)
	ro, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "RO-1", At: t0, Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})))
	reads.Store(0)
	for range 3 {
		if _, err := h.l.Proof(ctx, ro.ID); !errors.Is(err, ledger.ErrNotLogged) {
			t.Fatalf("Proof of a row whose leaf is queued: %v, want ErrNotLogged", err)
		}
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("three proofs of a queued row read %d queued leaves, want none (the queue holds 501)", n)
	}
	// The integrity check counts it as not yet logged the same way, page
	// by page, without reading the queue.
	page, err := h.l.CheckIntegrity(ctx, 100, "")
	if err != nil || page.NotYetLogged != 1 {
		t.Fatalf("the integrity check of a ledger whose row is queued: %+v %v, want 1 not yet logged", page, err)
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("the integrity check read %d queued leaves, want none (the queue holds 501)", n)
	}
	// Integrated, its proof is there.
	if _, err := h.integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.Proof(ctx, ro.ID); err != nil {
		t.Fatalf("Proof of an integrated row: %v", err)
	}
}

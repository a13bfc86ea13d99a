package proof_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/ledger/proof"
)

// oneLeafBundle signs a tree of the one leaf given and returns the bundle
// naming rowID, and the verifier key.
func oneLeafBundle(t *testing.T, rowID, leaf string) (*proof.Bundle, string) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, "example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := proof.Sign(proof.Checkpoint{Origin: "example.com/log", Size: 1, Hash: tlog.RecordHash([]byte(leaf))}, signer)
	if err != nil {
		t.Fatal(err)
	}
	return proof.NewBundle(rowID, 0, []byte(leaf), nil, cp), vkey
}

const rowID = "0123456789abcdef0123456789abcdef"

// rowLeaf is a leaf of kind receipt or refusal of row id, with the lines
// the ledger writes in one (ledger/leaf.go); extra lines go before the
// status line.
func rowLeaf(kind, id string, extra ...string) string {
	var x string
	for _, ln := range extra {
		x += ln + "\n"
	}
	return "pactledger leaf v1\nkind " + kind + "\nrow " + id + "\nreceipt -\nrequest -\ntoken -\nevidence sha256:" + strings.Repeat("a", 64) +
		"\njwks - -\ngrant -\n" + x + "status authorized\nclass money_moved\nduplicate-of -\nrecorded 2026-10-07T13:12:45Z\n"
}

func TestARowsOwnLeafIsItsProof(t *testing.T) {
	for _, kind := range []string{"receipt", "refusal"} {
		b, key := oneLeafBundle(t, rowID, rowLeaf(kind, rowID))
		if _, err := b.Verify(key); err != nil {
			t.Errorf("%s leaf: %v", kind, err)
		}
	}
}

// One signed leaf must say one thing: a leaf that repeats a line (a
// "status refused" before the row's own "status authorized") reads as
// one status to a reader taking the first line and another to one taking
// the last, and the ledger never writes one. A row's proof holds the
// lines the ledger writes in a row's leaf, each once and in its order: a
// leaf of only its kind and row commits to nothing a customer relies on.
func TestARowProofHoldsTheLinesTheLedgerWrites(t *testing.T) {
	full := rowLeaf("receipt", rowID)
	for name, leaf := range map[string]string{
		"a repeated status":        rowLeaf("receipt", rowID, "status refused"),
		"a repeated line last":     full + "status refused\n",
		"only kind and row":        "pactledger leaf v1\nkind receipt\nrow " + rowID + "\n",
		"a line left out":          strings.Replace(full, "duplicate-of -\n", "", 1),
		"a line the ledger lacks":  rowLeaf("receipt", rowID, "verdict refused"),
		"two lines swapped":        strings.Replace(full, "status authorized\nclass money_moved\n", "class money_moved\nstatus authorized\n", 1),
		"no line break at the end": strings.TrimSuffix(full, "\n"),
		"a line without a value":   rowLeaf("receipt", rowID, "status"),
	} {
		b, key := oneLeafBundle(t, rowID, leaf)
		if _, err := b.Verify(key); !errors.Is(err, proof.ErrProof) {
			t.Errorf("%s: verified as the proof of row %s (err %v):\n%s", name, rowID, err, leaf)
		}
	}
	// A leaf that says a thing twice proves nothing, whoever it is of.
	b, key := oneLeafBundle(t, "", "pactledger leaf v1\nkind dispute\nrow "+rowID+"\nevent 0\nstatus open\nstatus closed\n")
	if _, err := b.Verify(key); !errors.Is(err, proof.ErrProof) || !strings.Contains(err.Error(), `two "status" lines`) {
		t.Errorf("a dispute leaf with two status lines, in a bundle naming no row: %v, want %v naming the repeated line", err, proof.ErrProof)
	}
}

// A customer holds a proof to the row (or its event) they asked about:
// the bundle's own rowId is the word of whoever handed it over.
func TestALeafIsHeldToTheRowAsked(t *testing.T) {
	other := strings.Repeat("f", 32)
	dispute := "pactledger leaf v1\nkind dispute\nrow " + rowID + "\nevent 1\nstatus open\nnote -\nby -\nat 2026-10-07T13:12:45Z\n"
	closure := "pactledger leaf v1\nkind incident-close\nincident inc-1\nrow " + rowID + "\nnote -\nby -\nat 2026-10-07T13:12:45Z\n"
	for _, tc := range []struct {
		leaf, row, event string
		ok               bool
	}{
		{rowLeaf("receipt", rowID), rowID, "", true},
		{rowLeaf("refusal", rowID), rowID, "", true},
		{rowLeaf("receipt", other), rowID, "", false},
		{rowLeaf("receipt", rowID), rowID, "dispute/0", false},
		{dispute, rowID, "dispute/1", true},
		{dispute, rowID, "dispute/0", false},
		{dispute, rowID, "dispute/01", false},
		{dispute, other, "dispute/1", false},
		{dispute, rowID, "", false},
		{dispute, rowID, "incident-close", false},
		{closure, rowID, "incident-close", true},
		{closure, other, "incident-close", false},
		{closure, rowID, "", false},
		{closure, rowID, "closure", false},
		{strings.Replace(dispute, "note -\n", "", 1), rowID, "dispute/1", false},
	} {
		err := proof.Proves(tc.leaf, tc.row, tc.event)
		if tc.ok && err != nil {
			t.Errorf("row %s event %q: %v\n%s", tc.row, tc.event, err, tc.leaf)
		}
		if !tc.ok && !errors.Is(err, proof.ErrProof) {
			t.Errorf("row %s event %q: the leaf proves it (err %v)\n%s", tc.row, tc.event, err, tc.leaf)
		}
	}
}

// A bundle names each field exactly, once. encoding/json matches names
// regardless of case and keeps the last: a file showing "rowId" as the
// customer's row to a person, and carrying "ROWID": "" after it, would
// otherwise verify with no check of whose leaf it holds.
func TestABundleNamesEachFieldOnceAndExactly(t *testing.T) {
	other := strings.Repeat("f", 32)
	b, key := oneLeafBundle(t, rowID, rowLeaf("receipt", other))
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.TrimSuffix(string(raw), "}")
	for name, doctored := range map[string]string{
		"a case-variant rowId": body + `,"ROWID":""}`,
		"rowId twice":          body + `,"rowId":""}`,
	} {
		if _, err := proof.ParseBundle([]byte(doctored)); !errors.Is(err, proof.ErrProof) {
			t.Errorf("%s: read as a bundle (err %v): %s", name, err, doctored)
		}
	}
	// A name of no field (one a later version may add) is ignored.
	if pb, err := proof.ParseBundle([]byte(body + `,"note":"x"}`)); err != nil || pb.RowID != rowID {
		t.Errorf("a bundle with a field of a later version: %v, %+v", err, pb)
	}
	for _, notObject := range []string{"null", "[]", `"x"`} {
		if _, err := proof.ParseBundle([]byte(notObject)); !errors.Is(err, proof.ErrProof) {
			t.Errorf("%s read as a bundle (err %v)", notObject, err)
		}
	}
	// The bundle as written reads back, and proves the row its leaf is of.
	pb, err := proof.ParseBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pb.Verify(key); !errors.Is(err, proof.ErrProof) {
		t.Errorf("a bundle naming row %s verified with the leaf of row %s (err %v)", rowID, other, err)
	}
	pb.RowID = ""
	if _, err := pb.Verify(key); err != nil {
		t.Fatal(err)
	}
	if err := proof.Proves(pb.Leaf, other, ""); err != nil {
		t.Errorf("the leaf of row %s: %v", other, err)
	}
}

func TestADisputeLeafIsNoRowProof(t *testing.T) {
	for name, leaf := range map[string]string{
		"dispute":        "pactledger leaf v1\nkind dispute\nrow " + rowID + "\nevent 0\nstatus open\n",
		"incident-close": "pactledger leaf v1\nkind incident-close\nincident inc-1\nrow " + rowID + "\nnote -\n",
		"two row lines":  "pactledger leaf v1\nkind receipt\nrow " + rowID + "\nrow ffff\nstatus verified\n",
		"row line twice": "pactledger leaf v1\nkind receipt\nrow ffff\nrow " + rowID + "\nstatus verified\n",
		"no kind line":   "pactledger leaf v1\nrow " + rowID + "\nstatus verified\n",
		"another row":    "pactledger leaf v1\nkind receipt\nrow ffff\nstatus verified\n",
	} {
		b, key := oneLeafBundle(t, rowID, leaf)
		if _, err := b.Verify(key); !errors.Is(err, proof.ErrProof) {
			t.Errorf("%s: a leaf not the row's own verified as the proof of row %s (err %v)", name, rowID, err)
		}
	}
	// Without a row named, the bundle proves the leaf, whatever it is.
	b, key := oneLeafBundle(t, "", "pactledger leaf v1\nkind dispute\nrow "+rowID+"\nevent 0\nstatus open\n")
	if _, err := b.Verify(key); err != nil {
		t.Errorf("a dispute leaf's own bundle: %v", err)
	}
}

func TestAnEmptyCheckpointWithAnotherRootIsRefused(t *testing.T) {
	newer := proof.Checkpoint{Origin: "o", Size: 5, Hash: tlog.Hash{2}}
	old := proof.Checkpoint{Origin: "o", Size: 0, Hash: tlog.Hash{1}}
	if err := proof.VerifyConsistency(old, newer, nil); !errors.Is(err, proof.ErrProof) {
		t.Errorf("a checkpoint of size 0 with root %x was taken as a prefix (err %v); the empty tree's root is SHA-256 of nothing", old.Hash[:4], err)
	}
	old.Hash = sha256.Sum256(nil)
	if err := proof.VerifyConsistency(old, newer, nil); err != nil {
		t.Errorf("the empty tree: %v", err)
	}
	// ledgerd signed the empty log with a root of 32 zero bytes before
	// 2026-12-05: a checkpoint an auditor kept then is no fork.
	old.Hash = tlog.Hash{}
	if err := proof.VerifyConsistency(old, newer, nil); err != nil {
		t.Errorf("the empty tree as ledgerd signed it before: %v", err)
	}
}

// A checkpoint is of a size some log can reach, or it is refused with its
// size named: tlog's proof checks loop forever on a tree of more than
// 2^62 leaves, so a checkpoint the log's key signed for one would hang
// `ledgerctl proof verify` and `ledgerctl log audit`. Each check returns
// at once.
func TestACheckpointOfASizeNoLogReachesIsRefused(t *testing.T) {
	skey, vkey, err := note.GenerateKey(rand.Reader, "example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{proof.MaxSize + 1, 1<<62 + 1, 1<<63 - 1} {
		t.Run(strconv.FormatInt(size, 10), func(t *testing.T) {
			huge := proof.Checkpoint{Origin: "example.com/log", Size: size}
			signed, err := proof.Sign(huge, signer)
			if err != nil {
				t.Fatal(err)
			}
			want := "size " + strconv.FormatInt(size, 10)
			if _, err := proof.ParseCheckpoint(string(huge.Marshal())); !errors.Is(err, proof.ErrCheckpoint) || !strings.Contains(err.Error(), want) {
				t.Errorf("ParseCheckpoint: %v, want %v naming %q", err, proof.ErrCheckpoint, want)
			}
			if _, err := proof.Open(signed, vkey); !errors.Is(err, proof.ErrCheckpoint) || !strings.Contains(err.Error(), want) {
				t.Errorf("Open: %v, want %v naming %q", err, proof.ErrCheckpoint, want)
			}
			old := proof.Checkpoint{Origin: "example.com/log", Size: 5, Hash: tlog.Hash{1}}
			if err := returns(t, func() error { return proof.VerifyConsistency(old, huge, make([]tlog.Hash, 64)) }); !errors.Is(err, proof.ErrProof) || !strings.Contains(err.Error(), want) {
				t.Errorf("VerifyConsistency to a tree of size %d: %v, want %v naming %q", size, err, proof.ErrProof, want)
			}
			b := &proof.Bundle{Format: proof.Format, LeafIndex: 3, Leaf: "x", Checkpoint: string(signed)}
			for range 63 {
				b.Inclusion = append(b.Inclusion, base64.StdEncoding.EncodeToString(make([]byte, 32)))
			}
			if err := returns(t, func() error { _, err := b.Verify(vkey); return err }); !errors.Is(err, proof.ErrCheckpoint) || !strings.Contains(err.Error(), want) {
				t.Errorf("Verify under a tree of size %d: %v, want %v naming %q", size, err, proof.ErrCheckpoint, want)
			}
		})
	}
	// The largest size allowed still parses.
	if _, err := proof.ParseCheckpoint(string(proof.Checkpoint{Origin: "example.com/log", Size: proof.MaxSize}.Marshal())); err != nil {
		t.Errorf("ParseCheckpoint of size MaxSize: %v", err)
	}
}

// returns runs fn and returns its error; a check that loops (as tlog's do
// past 2^62 leaves) fails the test after a minute instead of hanging it.
func returns(t *testing.T, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("the check did not return: it loops")
		return nil
	}
}

// A row's proof is of a leaf the ledger wrote: a leaf of another version
// line (or none) naming the row is no proof of it, as the audits read no
// such leaf.
func TestALeafOfAnotherVersionIsNoRowProof(t *testing.T) {
	for _, first := range []string{"pactledger leaf v2", "pactledger leaf v1 ", ""} {
		leaf := first + "\nkind receipt\nrow " + rowID + "\nstatus verified\n"
		b, key := oneLeafBundle(t, rowID, leaf)
		if _, err := b.Verify(key); !errors.Is(err, proof.ErrProof) || !strings.Contains(err.Error(), "version") {
			t.Errorf("leaf starting %q: %v, want %v naming the version line", first, err, proof.ErrProof)
		}
	}
}

// Package proof holds what a customer, an agent platform or an auditor
// needs to check the ledger's Merkle log without trusting the ledger: C2SP
// checkpoints signed as C2SP signed notes (Ed25519), and self-contained
// proof bundles for one row. It verifies offline, with nothing but the
// log's published verifier key. Hashing and proofs are RFC 6962, from
// golang.org/x/mod/sumdb/tlog.
package proof

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Format names the proof bundle format.
const Format = "pactledger-proof/v1"

// Errors of proof checking.
var (
	// ErrCheckpoint: the checkpoint is not a C2SP checkpoint signed by the
	// given key.
	ErrCheckpoint = errors.New("checkpoint rejected")
	// ErrProof: the proof does not prove the leaf (or the older tree) under
	// the checkpoint.
	ErrProof = errors.New("proof rejected")
)

// MaxSize is the most leaves a checkpoint may say its tree holds: 2^48,
// some 281 trillion. A checkpoint of a larger tree is refused, whatever
// signed it. The log grows by one leaf for each row, dispute event,
// incident closure and start, and an integrator extends it by at most
// 4,096 leaves a round: at a million leaves a second, a thousand times
// what one ledger is sized for, it takes nine years to reach 2^48. The
// bound is well below 2^62, past which the proof checks of
// golang.org/x/mod/sumdb/tlog (CheckTree, CheckRecord) loop forever, so a
// checkpoint signed for such a tree by whoever holds the log's key can
// never hang a verifier; and it keeps every index of the tree's stored
// hashes and tiles within int64.
const MaxSize = 1 << 48

// Checkpoint is the body of a C2SP tlog-checkpoint: the log's origin, its
// size and its RFC 6962 root hash.
type Checkpoint struct {
	Origin string
	Size   int64
	Hash   tlog.Hash
}

// Marshal returns the checkpoint body (three lines, each ending in \n).
func (c Checkpoint) Marshal() []byte {
	return fmt.Appendf(nil, "%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Hash[:]))
}

// ParseCheckpoint parses a checkpoint body; extension lines after the hash
// are allowed and ignored.
func ParseCheckpoint(text string) (Checkpoint, error) {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) < 3 || !strings.HasSuffix(text, "\n") {
		return Checkpoint{}, fmt.Errorf("%w: want origin, size and hash lines", ErrCheckpoint)
	}
	origin := strings.TrimSuffix(lines[0], "\n")
	size, err := strconv.ParseInt(strings.TrimSuffix(lines[1], "\n"), 10, 64)
	if origin == "" || err != nil || size < 0 || strconv.FormatInt(size, 10) != strings.TrimSuffix(lines[1], "\n") {
		return Checkpoint{}, fmt.Errorf("%w: bad origin or size line", ErrCheckpoint)
	}
	if err := checkSize(size); err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	h, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(lines[2], "\n"))
	if err != nil || len(h) != tlog.HashSize {
		return Checkpoint{}, fmt.Errorf("%w: bad root hash line", ErrCheckpoint)
	}
	c := Checkpoint{Origin: origin, Size: size}
	copy(c.Hash[:], h)
	return c, nil
}

// checkSize refuses a tree size above MaxSize.
func checkSize(size int64) error {
	if size > MaxSize {
		return fmt.Errorf("size %d is more than any log reaches (2^48 = %d leaves at most)", size, int64(MaxSize))
	}
	return nil
}

// Sign returns the checkpoint as a signed note. The signer's name must be
// the origin (C2SP tlog-checkpoint).
func Sign(c Checkpoint, s note.Signer) ([]byte, error) {
	if s.Name() != c.Origin {
		return nil, fmt.Errorf("sign checkpoint: key name %q is not the origin %q", s.Name(), c.Origin)
	}
	return note.Sign(&note.Note{Text: string(c.Marshal())}, s)
}

// Open checks a signed checkpoint against the verifier key (as printed by
// ledgerd: "<origin>+<hash>+<key>") and returns its body.
func Open(signed []byte, verifierKey string) (Checkpoint, error) {
	v, err := note.NewVerifier(strings.TrimSpace(verifierKey))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: log key: %v", ErrCheckpoint, err)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	var unsigned *note.UnverifiedNoteError
	if errors.As(err, &unsigned) {
		return Checkpoint{}, fmt.Errorf("%w: not signed by the log key given (%s): is it this log's published key?", ErrCheckpoint, v.Name())
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	c, err := ParseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, err
	}
	if c.Origin != v.Name() {
		return Checkpoint{}, fmt.Errorf("%w: origin %q is not the key's name %q", ErrCheckpoint, c.Origin, v.Name())
	}
	return c, nil
}

// Bundle proves that one leaf is in the log: the leaf's bytes (hashes
// only, never personal data), its index, the RFC 6962 inclusion path and
// the signed checkpoint the path leads to.
type Bundle struct {
	Format     string   `json:"format"`
	RowID      string   `json:"rowId,omitempty"`
	LeafIndex  int64    `json:"leafIndex"`
	Leaf       string   `json:"leaf"`
	Inclusion  []string `json:"inclusion"` // base64 hashes, leaf to root
	Checkpoint string   `json:"checkpoint"`
}

// NewBundle assembles a bundle.
func NewBundle(rowID string, index int64, leaf []byte, inclusion []tlog.Hash, signedCheckpoint []byte) *Bundle {
	b := &Bundle{Format: Format, RowID: rowID, LeafIndex: index, Leaf: string(leaf), Checkpoint: string(signedCheckpoint), Inclusion: []string{}}
	for _, h := range inclusion {
		b.Inclusion = append(b.Inclusion, base64.StdEncoding.EncodeToString(h[:]))
	}
	return b
}

// Hashes decodes base64 hashes.
func Hashes(in []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(in))
	for i, s := range in {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != tlog.HashSize {
			return nil, fmt.Errorf("%w: hash %d is not 32 bytes of base64", ErrProof, i)
		}
		copy(out[i][:], b)
	}
	return out, nil
}

// Verify checks the bundle offline against the log's verifier key: the
// checkpoint's signature, then the inclusion of the leaf under its root,
// that the leaf is one the ledger writes (ParseLeaf), and, when the bundle
// names its row, that the leaf is that row's own (Proves). It returns the
// checkpoint the leaf is proven against.
func (b *Bundle) Verify(verifierKey string) (Checkpoint, error) {
	if b.Format != Format {
		return Checkpoint{}, fmt.Errorf("%w: format %q, want %q", ErrProof, b.Format, Format)
	}
	c, err := Open([]byte(b.Checkpoint), verifierKey)
	if err != nil {
		return Checkpoint{}, err
	}
	// Open refused a size past MaxSize, on which tlog.CheckRecord loops.
	if b.LeafIndex < 0 || b.LeafIndex >= c.Size {
		return c, fmt.Errorf("%w: leaf %d is outside a tree of size %d", ErrProof, b.LeafIndex, c.Size)
	}
	path, err := Hashes(b.Inclusion)
	if err != nil {
		return c, err
	}
	if err := tlog.CheckRecord(path, c.Size, c.Hash, b.LeafIndex, tlog.RecordHash([]byte(b.Leaf))); err != nil {
		return c, fmt.Errorf("%w: leaf %d under checkpoint %d: %v", ErrProof, b.LeafIndex, c.Size, err)
	}
	// A leaf the ledger did not write proves nothing, named row or not:
	// of another version no check of the log reads it, and one that says
	// a thing twice says two things.
	if _, err := ParseLeaf(b.Leaf); err != nil {
		return c, fmt.Errorf("%w: %v: it is no leaf the ledger writes", ErrProof, err)
	}
	if b.RowID != "" {
		if err := Proves(b.Leaf, b.RowID, ""); err != nil {
			return c, err
		}
	}
	return c, nil
}

// LeafVersion is the first line of every leaf the ledger writes
// (ledger.LeafVersion).
const LeafVersion = "pactledger leaf v1"

// rowLeafLines are the names of the lines the ledger writes in the leaves
// about a row, by kind, in the order it writes them after the version
// line (ledger/leaf.go, which a test holds to these): a row's own leaf
// (receipt or refusal), a dispute event's and an incident closure's.
// Each has had these lines since the log began.
var rowLeafLines = map[string][]string{
	"receipt":        {"kind", "row", "receipt", "request", "token", "evidence", "jwks", "grant", "status", "class", "duplicate-of", "recorded"},
	"refusal":        {"kind", "row", "receipt", "request", "token", "evidence", "jwks", "grant", "status", "class", "duplicate-of", "recorded"},
	"dispute":        {"kind", "row", "event", "status", "note", "by", "at"},
	"incident-close": {"kind", "incident", "row", "note", "by", "at"},
}

// LeafLines returns the names of the lines the ledger writes in a leaf of
// kind receipt, refusal, dispute or incident-close, in order after the
// version line; nil for another kind.
func LeafLines(kind string) []string { return slices.Clone(rowLeafLines[kind]) }

// ParseLeaf splits a leaf into its values by name: the version line
// first, then "name value" lines. A leaf in which a name appears twice is
// refused: the ledger never writes one, and its readers would disagree
// on what it says (one taking the first line, another the last), so one
// signed leaf would say two things. The error says why in plain words;
// callers wrap it.
func ParseLeaf(leaf string) (map[string]string, error) {
	first, rest, _ := strings.Cut(leaf, "\n")
	if first != LeafVersion {
		return nil, fmt.Errorf("the leaf's first line is %q, not the version line %q", first, LeafVersion)
	}
	if rest == "" || !strings.HasSuffix(rest, "\n") {
		return nil, errors.New("the leaf has no lines after its version line, or its last line does not end in a line break")
	}
	out := map[string]string{}
	for ln := range strings.SplitSeq(strings.TrimSuffix(rest, "\n"), "\n") {
		name, value, ok := strings.Cut(ln, " ")
		if !ok || name == "" {
			return nil, fmt.Errorf("the leaf's line %q is not a name and a value", ln)
		}
		if _, twice := out[name]; twice {
			return nil, fmt.Errorf("the leaf has two %q lines: the ledger writes each line once", name)
		}
		out[name] = value
	}
	return out, nil
}

// lineNames are the names of the leaf's lines after the version line, in
// order.
func lineNames(leaf string) []string {
	_, rest, _ := strings.Cut(strings.TrimSuffix(leaf, "\n"), "\n")
	var names []string
	for ln := range strings.SplitSeq(rest, "\n") {
		name, _, _ := strings.Cut(ln, " ")
		names = append(names, name)
	}
	return names
}

// leafOf checks that leaf is a leaf the ledger writes about a row and
// holds the lines it writes for its kind, each once and in its order, and
// returns its values: a leaf that holds fewer lines commits to less than
// a customer relies on (the evidence, the status, when it was recorded),
// and the ledger never wrote it.
func leafOf(leaf, what string) (map[string]string, error) {
	f, err := ParseLeaf(leaf)
	if err != nil {
		return nil, fmt.Errorf("%w: %v, so it is no proof of %s", ErrProof, err, what)
	}
	want, ok := rowLeafLines[f["kind"]]
	if !ok {
		return f, nil
	}
	if got := lineNames(leaf); !slices.Equal(got, want) {
		return nil, fmt.Errorf("%w: the leaf's lines (%s) are not those the ledger writes in a %s leaf (%s), so it is no proof of %s",
			ErrProof, strings.Join(got, ", "), f["kind"], strings.Join(want, ", "), what)
	}
	return f, nil
}

// Proves checks that leaf is the leaf of row id itself (event ""), or of
// its event: "dispute/N", its N-th dispute event (from 0), or
// "incident-close", the closure of its incident; the names ledgerctl log
// proof --event takes. The leaf must be of the version the ledger writes,
// of the kind the row or event is, with the lines the ledger writes in
// one, naming id. A dispute event's or an incident closure's leaf also
// names the row, and proves that event, not the row; a leaf of another
// version is read by no check of the log (ledgerctl log audit reports
// it), so it proves nothing of the row either.
//
// A bundle names its row itself (rowId), and is handed over by the party
// being checked: Verify holds the leaf to that row, and a customer holds
// it to the row they asked about with Proves.
func Proves(leaf, id, event string) error {
	what := "row " + id
	if event != "" {
		what = event + " of row " + id
	}
	if event != "" && event != "incident-close" && !strings.HasPrefix(event, "dispute/") {
		return fmt.Errorf("%w: event %q is neither dispute/N nor incident-close", ErrProof, event)
	}
	f, err := leafOf(leaf, what)
	if err != nil {
		return err
	}
	kind := f["kind"]
	switch {
	case event == "" && kind != "receipt" && kind != "refusal":
		return fmt.Errorf("%w: the leaf is not a row's (kind %s), so it is no proof of row %s", ErrProof, kind, id)
	case event == "incident-close" && kind != "incident-close":
		return fmt.Errorf("%w: the leaf is not an incident's closure (kind %s), so it is no proof of %s", ErrProof, kind, what)
	case strings.HasPrefix(event, "dispute/") && kind != "dispute":
		return fmt.Errorf("%w: the leaf is not a dispute event's (kind %s), so it is no proof of %s", ErrProof, kind, what)
	}
	if f["row"] != id {
		return fmt.Errorf("%w: the leaf is about row %s, not row %s", ErrProof, f["row"], id)
	}
	// The event number as the ledger writes it: "dispute/00" names no
	// event, and the leaf of event 0 says "event 0".
	if n, ok := strings.CutPrefix(event, "dispute/"); ok && f["event"] != n {
		return fmt.Errorf("%w: the leaf is of dispute event %s of row %s, not of %s", ErrProof, f["event"], id, what)
	}
	return nil
}

// bundleFields are the names of a bundle's fields, as Bundle's json tags
// spell them.
var bundleFields = []string{"format", "rowId", "leafIndex", "leaf", "inclusion", "checkpoint"}

// ParseBundle decodes a bundle file. Each field is named exactly as the
// format spells it, and once: encoding/json matches names regardless of
// case and keeps the last of a name given twice, so a file whose "rowId"
// a person or another JSON reader sees would otherwise be read with the
// row of a later "ROWID" (or none), and prove another row's leaf.
func ParseBundle(data []byte) (*Bundle, error) {
	var b Bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("%w: not a proof bundle: %v", ErrProof, err)
	}
	if err := checkFields(data); err != nil {
		return nil, fmt.Errorf("%w: not a proof bundle: %v", ErrProof, err)
	}
	return &b, nil
}

// checkFields checks that data, JSON that decodes into a Bundle, is an
// object naming each of a bundle's fields exactly and once. A name that
// is a field's in another case is refused (encoding/json would read it
// as the field); other names are left for a later version of the format
// to give a meaning, and ignored.
func checkFields(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("it is not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		switch {
		case !slices.Contains(bundleFields, name) && slices.ContainsFunc(bundleFields, func(f string) bool { return strings.EqualFold(f, name) }):
			return fmt.Errorf("it has a field %q, which is a field's name in another case (names are matched exactly: %s)", name, strings.Join(bundleFields, ", "))
		case seen[name]:
			return fmt.Errorf("it has the field %q twice", name)
		}
		seen[name] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
	}
	return nil
}

// VerifyConsistency checks that the tree of old is a prefix of the tree of
// newer (RFC 6962 consistency), both already opened.
func VerifyConsistency(old, newer Checkpoint, path []tlog.Hash) error {
	if old.Origin != newer.Origin {
		return fmt.Errorf("%w: origins %q and %q differ", ErrProof, old.Origin, newer.Origin)
	}
	if old.Size > newer.Size {
		return fmt.Errorf("%w: the older checkpoint (%d) is larger than the newer (%d)", ErrProof, old.Size, newer.Size)
	}
	// Checkpoints from Open are within MaxSize already; these may have
	// been built otherwise, and tlog loops on a tree past 2^62.
	if err := checkSize(newer.Size); err != nil {
		return fmt.Errorf("%w: %v", ErrProof, err)
	}
	if old.Size == 0 {
		// The empty tree is a prefix of every tree; its root is the hash
		// of nothing (RFC 6962 §2.1), and a checkpoint of size 0 with
		// another root is of no tree. A root of 32 zero bytes is the
		// empty tree's as ledgerd signed it before 2026-12-05: an
		// auditor may have kept one from a new ledger.
		if old.Hash != sha256.Sum256(nil) && old.Hash != (tlog.Hash{}) {
			return fmt.Errorf("%w: the older checkpoint is of size 0 but its root is not the empty tree's", ErrProof)
		}
		return nil
	}
	if err := tlog.CheckTree(path, newer.Size, newer.Hash, old.Size, old.Hash); err != nil {
		return fmt.Errorf("%w: %d is not a prefix of %d: %v", ErrProof, old.Size, newer.Size, err)
	}
	return nil
}

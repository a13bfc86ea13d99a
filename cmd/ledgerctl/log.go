package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/termtext"
	"github.com/pactledger/pactledger/ledger/proof"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// logKeyArg reads a --log-key value: the verifier key itself
// ("<origin>+<hash>+<key>") or a file holding it (as ledgerd writes
// verifier.key).
func logKeyArg(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if _, err := note.NewVerifier(strings.TrimSpace(v)); err == nil {
		return strings.TrimSpace(v), nil
	}
	b, err := os.ReadFile(v)
	if err != nil {
		if why := keyHashMismatch(strings.TrimSpace(v)); why != "" {
			return "", usagef("--log-key %q is not a usable verifier key: %s", v, why)
		}
		// Most likely a path to the verifier key file, copied from an
		// example: say where ledgerd keeps it.
		return "", usagef("--log-key %q is neither a verifier key (<origin>+<hash>+<key>) nor a readable file (%v); ledgerd writes its verifier key to <dataDir>/log/verifier.key (beside merkleLog.keyFile when that is set): pass that file, a copy of it, or the key as published", v, err)
	}
	k := strings.TrimSpace(string(b))
	if _, err := note.NewVerifier(k); err != nil {
		if why := keyHashMismatch(k); why != "" {
			return "", usagef("--log-key file %s does not hold a usable verifier key: %s", v, why)
		}
		return "", usagef("--log-key file %s does not hold a verifier key: %v", v, err)
	}
	return k, nil
}

// keyHashMismatch says, of k shaped like a verifier key
// (<name>+<8 hex digits>+<base64 key>), that its hash is not the one of its
// name and key (note.NewVerifier's "invalid verifier hash": the first four
// bytes of SHA-256 of the name, a newline and the key); "" when k is not
// so shaped or its hash matches.
func keyHashMismatch(k string) string {
	name, rest, ok := strings.Cut(k, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	h, err1 := strconv.ParseUint(hash16, 16, 32)
	key, err2 := base64.StdEncoding.DecodeString(key64)
	if !ok || !ok2 || name == "" || len(hash16) != 8 || err1 != nil || err2 != nil || len(key) == 0 {
		return ""
	}
	sum := sha256.Sum256(append([]byte(name+"\n"), key...))
	if uint32(h) == binary.BigEndian.Uint32(sum[:4]) {
		return ""
	}
	return fmt.Sprintf("its hash %s does not match its name %q and its key: the name or the key was changed or mistyped since the log published it. "+
		"Copy the key again as the log publishes it, or pass ledgerd's <dataDir>/log/verifier.key", hash16, name)
}

// keySource says which key verified a checkpoint.
func keySource(given bool) string {
	if given {
		return "the key you gave (--log-key)"
	}
	return "the key the server reports (compare it with the published verifier key, or pass --log-key)"
}

// latest fetches the latest signed checkpoint and opens it with key, or
// with the key the server reports when key is "".
func (c *cli) latest(key string) (signed []byte, cp proof.Checkpoint, usedKey string, err error) {
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.GetCheckpoint(ctx, &ledgerv1.GetCheckpointRequest{})
	if err != nil {
		return nil, proof.Checkpoint{}, "", err
	}
	usedKey = key
	if usedKey == "" {
		usedKey = rep.GetVerifierKey()
	}
	cp, err = proof.Open([]byte(rep.GetCheckpoint()), usedKey)
	if err != nil {
		printf(c.errw, "ledgerctl: the latest checkpoint does NOT verify with %s: %v\n", keySource(key != ""), err)
		return nil, proof.Checkpoint{}, usedKey, errCheckFailed
	}
	return []byte(rep.GetCheckpoint()), cp, usedKey, nil
}

func rootText(h [32]byte) string {
	return base64.StdEncoding.EncodeToString(h[:]) + " (hex " + hex.EncodeToString(h[:]) + ")"
}

// logCheckpoint fetches the latest checkpoint, verifies its signature and
// prints origin, size and root; --save keeps the signed checkpoint for a
// later log audit.
func (c *cli) logCheckpoint(keyFlag, save string) error {
	key, err := logKeyArg(keyFlag)
	if err != nil {
		return err
	}
	signed, cp, used, err := c.latest(key)
	if err != nil {
		return err
	}
	if save != "" {
		if err := os.WriteFile(save, signed, 0o644); err != nil {
			return fmt.Errorf("save checkpoint: %w", err)
		}
	}
	if c.json {
		fmt.Fprintf(c.out, "{\n  \"origin\": %q,\n  \"size\": %d,\n  \"root\": %q,\n  \"verifierKey\": %q,\n  \"keyGiven\": %t,\n  \"checkpoint\": %q\n}\n",
			cp.Origin, cp.Size, base64.StdEncoding.EncodeToString(cp.Hash[:]), used, key != "", signed)
		return nil
	}
	w := c.table()
	printf(w, "origin\t%s\n", cp.Origin)
	printf(w, "size\t%d\n", cp.Size)
	printf(w, "root\t%s\n", rootText(cp.Hash))
	printf(w, "signature\tverified with %s\n", keySource(key != ""))
	printf(w, "key\t%s\n", used)
	if save != "" {
		printf(w, "saved\t%s (keep it: ledgerctl log audit --from %s proves the log only grew since)\n", save, save)
	}
	w.Flush()
	return nil
}

// proof writes a row's proof bundle (or one of its events') as JSON.
func (c *cli) proof(event, out string, wait time.Duration, pos []string) error {
	id, err := rowArg("proof", pos)
	if err != nil {
		return err
	}
	rep, err := c.rowProof(id, event, wait)
	if err != nil {
		return err
	}
	// The answer is the server's: it is written only once it reads as a
	// bundle, and with every character a terminal would act on or hide
	// escaped (the same JSON to a program).
	b, err := proof.ParseBundle([]byte(rep.GetBundle()))
	if err != nil {
		return fmt.Errorf("the server's answer for %s: %w", id, err)
	}
	// A row id may be given by its prefix: the leaf names the whole id.
	full := id
	if f, err := proof.ParseLeaf(b.Leaf); err == nil && strings.HasPrefix(f["row"], id) {
		full = f["row"]
	}
	bundle := termtext.EscapeJSON([]byte(rep.GetBundle()))
	if out != "" {
		if err := os.WriteFile(out, []byte(bundle), 0o644); err != nil {
			return fmt.Errorf("write proof: %w", err)
		}
	} else {
		fmt.Fprint(c.out, bundle)
	}
	// A bundle that is no proof of what was asked (another row's leaf, a
	// leaf the ledger does not write) is written all the same, as the
	// server's signed answer: it is evidence of what the ledger served.
	if err := proof.Proves(b.Leaf, full, event); err != nil {
		printf(c.errw, "the server's answer for %s is NO proof of it: %s; it is written as the server's answer, which its signed checkpoint ties to the ledger\n", id, err.Error())
		return errCheckFailed
	}
	id = full
	what := "row " + id
	if event != "" {
		what = event + " of row " + id
	}
	size := "?"
	if i := strings.IndexByte(rep.GetCheckpoint(), '\n'); i >= 0 {
		if rest := rep.GetCheckpoint()[i+1:]; strings.IndexByte(rest, '\n') >= 0 {
			size = rest[:strings.IndexByte(rest, '\n')]
		}
	}
	check := "--row " + id
	if event != "" {
		check += " --event " + event
	}
	printf(c.errw, "proof of %s: leaf %d under the signed checkpoint of size %s; check it offline with: ledgerctl proof verify FILE --log-key KEY %s\n", what, rep.GetLeafIndex(), size, check)
	return nil
}

// errNotLogged: a row, dispute event or incident closure is committed but
// not yet in a signed checkpoint.
var errNotLogged = errors.New("not yet in a signed checkpoint")

// rowProof asks for a proof, waiting up to wait while the row (or its
// event) is committed but not yet integrated into the log.
func (c *cli) rowProof(id, event string, wait time.Duration) (*ledgerv1.GetRowProofResponse, error) {
	deadline := time.Now().Add(wait)
	for {
		ctx, cancel := c.ctx()
		rep, err := c.c.GetRowProof(ctx, &ledgerv1.GetRowProofRequest{Id: id, Event: event})
		cancel()
		if !notLogged(err) {
			return rep, err
		}
		if !time.Now().Before(deadline) {
			what := id
			if event != "" {
				what = event + " of row " + id
			}
			return nil, fmt.Errorf("%s: %w after %s; the log is extended and published every half second while its write-once storage takes writes (when it does not, /readyz shows the log not published): retry shortly, or with a longer --wait", what, errNotLogged, wait)
		}
		if err := pause(context.Background(), 200*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// notLogged reports whether err says the row or event is not yet in a
// checkpoint.
func notLogged(err error) bool {
	st, ok := status.FromError(err)
	return ok && err != nil && st.Code() == codes.Unavailable && strings.Contains(st.Message(), errNotLogged.Error())
}

// noLeaf reports whether err says the ledger holds the row or event but
// the log has no leaf for it and none is queued: the row store was
// changed outside the ledger, and no wait brings the leaf.
func noLeaf(err error) bool { return hasReason(err, codes.FailedPrecondition, "LEAF_MISSING") }

// logDiverged reports whether err is the ledger's answer that its log
// diverged from the log it published to write-once storage (UNAVAILABLE,
// reason LOG_DIVERGED): ledgerd answers, but signs and serves no
// checkpoint or proof of its log until an operator acts, and no retry
// brings one.
func logDiverged(err error) bool { return hasReason(err, codes.Unavailable, "LOG_DIVERGED") }

// hasReason reports whether err is a gRPC status with code and an
// ErrorInfo of reason.
func hasReason(err error, code codes.Code, reason string) bool {
	st, ok := status.FromError(err)
	if !ok || err == nil || st.Code() != code {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == reason {
			return true
		}
	}
	return false
}

// pause waits d or until ctx is done.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// proofVerify checks a proof bundle offline: no server, no API key. With
// row (and event), the leaf must be that row's (or that event's): the
// bundle names its row itself, and it comes from the party being checked.
func (c *cli) proofVerify(keyFlag, row, event string, pos []string) error {
	if len(pos) != 1 {
		return usagef("proof verify FILE --log-key KEY [--row ID [--event dispute/N|incident-close]]")
	}
	if keyFlag == "" {
		return usagef("proof verify needs --log-key KEY: the log's published verifier key (a proof is only as good as the key it is checked with)")
	}
	if event != "" && row == "" {
		return usagef("proof verify --event %s needs --row ID: the row whose event the proof is of", event)
	}
	if event != "" && event != "incident-close" && !strings.HasPrefix(event, "dispute/") {
		return usagef("--event %q: want dispute/N (the row's N-th dispute event, from 0) or incident-close", event)
	}
	key, err := logKeyArg(keyFlag)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(pos[0])
	if err != nil {
		return fmt.Errorf("read proof: %w", err)
	}
	fail := func(err error) error {
		printf(c.out, "NOT VERIFIED: %s: %v\n", pos[0], err)
		return errCheckFailed
	}
	b, err := proof.ParseBundle(data)
	if err != nil {
		return fail(err)
	}
	cp, err := b.Verify(key)
	if err != nil {
		return fail(err)
	}
	if row != "" {
		if err := proof.Proves(b.Leaf, row, event); err != nil {
			return fail(err)
		}
	}
	f := parseLeaf(b.Leaf)
	what := "row " + f["row"]
	switch f["kind"] {
	case "dispute":
		what = fmt.Sprintf("dispute event %s of row %s", f["event"], f["row"])
	case "incident-close":
		what = fmt.Sprintf("the closure of incident %s (row %s)", f["incident"], f["row"])
	case "policy":
		what = fmt.Sprintf("the retention policy of %s", f["at"])
	}
	printf(c.out, "verified: %s is leaf %d of the log %s, under the checkpoint of size %d with root %s, signed by the key you gave\n",
		what, b.LeafIndex, cp.Origin, cp.Size, base64.StdEncoding.EncodeToString(cp.Hash[:]))
	w := c.table()
	for _, name := range []string{"kind", "status", "class", "recorded", "at", "evidence", "receipt", "grant", "money_moved", "account_changed", "read_only", "refused"} {
		if v, ok := f[name]; ok {
			printf(w, "  %s\t%s\n", name, v)
		}
	}
	w.Flush()
	if r, ok := f["receipt"]; ok && f["kind"] == "receipt" && r != "sha256:"+f["row"] {
		// A customer comparing the hash of the receipt they hold with
		// the proof's must know which bytes the leaf hashes.
		printf(c.out, "  (the leaf's receipt hash is of the receipt in its canonical form, its ECDSA signature's low-s encoding: a receipt held with the other encoding, as posted, hashes otherwise, as the row's receipt id may)\n")
	}
	if row == "" {
		// The leaf names its row, and the bundle came from the ledger:
		// only the row the customer asked about ties the proof to it.
		printf(c.errw, "(the proof names %s itself: pass --row ID, with the id of the row you asked about, to check it is that row's)\n", what)
	}
	return nil
}

// parseLeaf splits a leaf ("pactledger leaf v1" and "name value" lines)
// into its values; lines it does not understand are left out, and of a
// name given twice the last is kept. Every leaf it is given is checked
// strictly first (proof.ParseLeaf: by the audit's read of each leaf, by
// Verify of each bundle), and one that parses so is a finding.
func parseLeaf(leaf string) map[string]string {
	out := map[string]string{}
	lines := strings.Split(strings.TrimSuffix(leaf, "\n"), "\n")
	if len(lines) == 0 || lines[0] != leafVersion {
		return out
	}
	for _, ln := range lines[1:] {
		if name, value, ok := strings.Cut(ln, " "); ok {
			out[name] = value
		}
	}
	return out
}

// leafVersion is the first line of every leaf the ledger writes.
const leafVersion = proof.LeafVersion

// digest is "sha256:<hex>" of s, or "-" for an empty s, as a leaf writes
// hashed values.
func digest(s string) string {
	if s == "" {
		return "-"
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

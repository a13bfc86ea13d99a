package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/drill"
)

// The reply printed to send to the customer mentions an attached proof
// file only when the drill wrote one (--proof-dir); the server's answer
// carries the reply without it, and the reply to send with the proof
// beside it.
func TestDrillReplyMentionsAProofOnlyWhenOneIsWritten(t *testing.T) {
	f := start(t)
	f.logged(t, f.rowID) // the row has a proof to attach

	code, out, errs := f.ctl(t, "support", "drill", "A-5531")
	if code != 0 || !strings.Contains(out, "reply to the customer") {
		t.Fatalf("drill: %d %s %s", code, out, errs)
	}
	if strings.Contains(out, drill.ProofAttached) {
		t.Errorf("drill without --proof-dir wrote no proof file, but its reply says one is attached:\n%s", out)
	}

	dir := filepath.Join(t.TempDir(), "proofs")
	code, out, errs = f.ctl(t, "support", "drill", "A-5531", "--proof-dir", dir)
	if code != 0 || !strings.Contains(errs, "wrote 1 proof file to ") {
		t.Fatalf("drill --proof-dir: %d %s %s", code, out, errs)
	}
	if _, reply, _ := strings.Cut(out, "reply to the customer:\n"); !strings.HasSuffix(strings.TrimSpace(reply), drill.ProofAttached) {
		t.Errorf("drill --proof-dir wrote the proof file, but its reply does not say so:\n%s", out)
	}

	code, out, errs = f.ctl(t, "support", "--json", "drill", "A-5531")
	var d struct {
		Report struct{ Reply, ReplyWithProof string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil {
		t.Fatalf("json drill: %d %s %s", code, out, errs)
	}
	if strings.Contains(d.Report.Reply, drill.ProofAttached) || d.Report.ReplyWithProof != d.Report.Reply+" "+drill.ProofAttached {
		t.Errorf("json drill: reply %q, replyWithProof %q", d.Report.Reply, d.Report.ReplyWithProof)
	}

	// A stored report printed again writes no file: its reply claims none.
	id := ""
	if code, out, _ := f.ctl(t, "auditor", "drills", "--limit", "1"); code == 0 {
		if i := strings.Index(out, "drill-"); i >= 0 {
			id = strings.Fields(out[i:])[0]
		}
	}
	code, out, errs = f.ctl(t, "auditor", "drills", id)
	if code != 0 || !strings.Contains(out, "reply to the customer") || strings.Contains(out, drill.ProofAttached) {
		t.Errorf("drills %s: %d %s %s", id, code, out, errs)
	}
}

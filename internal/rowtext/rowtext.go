// Package rowtext says a row's fields in plain words, so that ledgerctl
// show and the console's row page say them alike.
package rowtext

import (
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"strings"
)

// TargetSource says what vouches for the target of action a of row r,
// and whether the target is the writer's word alone (its action log's,
// or a refusal's). It is empty for an action without a target.
func TargetSource(r *ledgerv1.Row, a *ledgerv1.RowAction) (words string, writerOnly bool) {
	if a.GetTarget() == "" {
		return "", false
	}
	switch a.GetTargetSource() {
	case ledgerv1.TargetSource_TARGET_SOURCE_SIGNED_ARGS:
		return "named in the signed args", false
	case ledgerv1.TargetSource_TARGET_SOURCE_WRITER:
		if r.GetKind() == ledgerv1.RowKind_ROW_KIND_REFUSAL {
			return "the refusal record's alone — a refusal has no signed args", true
		}
		return "the action log's alone — " + writerReason(r, a), true
	}
	return "where it comes from is not recorded (the row was written before the ledger recorded it)", false
}

// writerReason says why no signed args vouch for the target of action a
// of receipt row r.
func writerReason(r *ledgerv1.Row, a *ledgerv1.RowAction) string {
	switch a.GetArgsHashSource() {
	case ledgerv1.ArgsHashSource_ARGS_HASH_SOURCE_COMPUTED_BY_LEDGER:
		return "the agent did not sign its args"
	case ledgerv1.ArgsHashSource_ARGS_HASH_SOURCE_UNSPECIFIED:
		return "no args were signed"
	}
	// The args_hash check is the row's: it failed for this action when
	// its detail names the tool ("cancel_order: logged args hash …"),
	// not when another action's args failed.
	for _, c := range r.GetVerifier().GetChecks() {
		if c.GetName() == "args_hash" && c.GetResult() == ledgerv1.CheckResult_CHECK_RESULT_FAIL && strings.Contains(c.GetDetail(), a.GetTool()+": ") {
			return "the logged args are not the signed ones"
		}
	}
	return "the signed args do not name it"
}

// ClaimedAgent reports whether no signature vouches for r's agent
// platform, the writer's word: a refusal's, when it is the name the
// writer claimed or the iss of a request JWT whose signature did not
// verify; a receipt's, when the receipt's signature did not verify (its
// agent platform is a claim of the receipt).
func ClaimedAgent(r *ledgerv1.Row) bool {
	switch r.GetKind() {
	case ledgerv1.RowKind_ROW_KIND_REFUSAL:
		return !passed(r, "request_signature")
	case ledgerv1.RowKind_ROW_KIND_RECEIPT:
		return !passed(r, "receipt_signature")
	}
	return false
}

// ClaimedPrincipal reports whether r is a receipt whose customer no
// signature vouches for: its signature did not verify, so the customer
// it names is the writer's word. A refusal's customer is its claimed one
// (Refusal.ClaimedPrincipal), shown as such.
func ClaimedPrincipal(r *ledgerv1.Row) bool {
	return r.GetKind() == ledgerv1.RowKind_ROW_KIND_RECEIPT && !passed(r, "receipt_signature")
}

// passed reports whether r's check name passed; false when r has none.
func passed(r *ledgerv1.Row, name string) bool {
	for _, c := range r.GetVerifier().GetChecks() {
		if c.GetName() == name {
			return c.GetResult() == ledgerv1.CheckResult_CHECK_RESULT_PASS
		}
	}
	return false
}

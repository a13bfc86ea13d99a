package rowtext

import (
	"testing"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// Each target source is said in words, and a target the writer alone
// vouches for says why.
func TestTargetSource(t *testing.T) {
	receipt := &ledgerv1.Row{Kind: ledgerv1.RowKind_ROW_KIND_RECEIPT}
	mismatch := &ledgerv1.Row{Kind: ledgerv1.RowKind_ROW_KIND_RECEIPT, Verifier: &ledgerv1.Verifier{Checks: []*ledgerv1.Check{{Name: "args_hash", Result: ledgerv1.CheckResult_CHECK_RESULT_FAIL,
		Detail: "cancel_order: logged args hash AAAA != receipt argsHash BBBB"}}}}
	refusal := &ledgerv1.Row{Kind: ledgerv1.RowKind_ROW_KIND_REFUSAL}
	const (
		signed   = ledgerv1.TargetSource_TARGET_SOURCE_SIGNED_ARGS
		writer   = ledgerv1.TargetSource_TARGET_SOURCE_WRITER
		fromRc   = ledgerv1.ArgsHashSource_ARGS_HASH_SOURCE_RECEIPT
		computed = ledgerv1.ArgsHashSource_ARGS_HASH_SOURCE_COMPUTED_BY_LEDGER
	)
	for _, c := range []struct {
		row        *ledgerv1.Row
		action     *ledgerv1.RowAction
		words      string
		writerOnly bool
	}{
		{receipt, &ledgerv1.RowAction{Target: "A-5531", ArgsHashSource: fromRc, TargetSource: signed}, "named in the signed args", false},
		{receipt, &ledgerv1.RowAction{Target: "B-8888", ArgsHashSource: fromRc, TargetSource: writer}, "the action log's alone — the signed args do not name it", true},
		{mismatch, &ledgerv1.RowAction{Tool: "cancel_order", Target: "B-8888", ArgsHashSource: fromRc, TargetSource: writer}, "the action log's alone — the logged args are not the signed ones", true},
		// Another action's args failed: this one's are the signed ones.
		{mismatch, &ledgerv1.RowAction{Tool: "refund", Target: "B-8888", ArgsHashSource: fromRc, TargetSource: writer}, "the action log's alone — the signed args do not name it", true},
		{receipt, &ledgerv1.RowAction{Target: "B-8888", ArgsHashSource: computed, TargetSource: writer}, "the action log's alone — the agent did not sign its args", true},
		{receipt, &ledgerv1.RowAction{Target: "B-8888", TargetSource: writer}, "the action log's alone — no args were signed", true},
		{refusal, &ledgerv1.RowAction{Target: "B-8888", TargetSource: writer}, "the refusal record's alone — a refusal has no signed args", true},
		{receipt, &ledgerv1.RowAction{Target: "A-5531", ArgsHashSource: fromRc}, "where it comes from is not recorded (the row was written before the ledger recorded it)", false},
		{receipt, &ledgerv1.RowAction{ArgsHashSource: fromRc}, "", false},
	} {
		words, writerOnly := TargetSource(c.row, c.action)
		if words != c.words || writerOnly != c.writerOnly {
			t.Errorf("%v: %q %v; want %q %v", c.action, words, writerOnly, c.words, c.writerOnly)
		}
	}
}

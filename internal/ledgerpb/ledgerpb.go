// Package ledgerpb maps the ledger's enums to the API's and back, one
// table for each, so that ledgerd's answers and what ledgerctl reads of
// them name each value alike.
package ledgerpb

import (
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// The ledger's values as the API names them.
var (
	Outcome = map[ledger.Outcome]ledgerv1.AppendOutcome{
		ledger.Created:           ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED,
		ledger.AlreadyRecorded:   ledgerv1.AppendOutcome_APPEND_OUTCOME_ALREADY_RECORDED,
		ledger.DuplicateRecorded: ledgerv1.AppendOutcome_APPEND_OUTCOME_DUPLICATE,
	}
	Status = map[ledger.Status]ledgerv1.RowStatus{
		ledger.Authorized:   ledgerv1.RowStatus_ROW_STATUS_AUTHORIZED,
		ledger.Unauthorized: ledgerv1.RowStatus_ROW_STATUS_UNAUTHORIZED,
		ledger.Incident:     ledgerv1.RowStatus_ROW_STATUS_INCIDENT,
		ledger.Duplicate:    ledgerv1.RowStatus_ROW_STATUS_DUPLICATE,
	}
	Class = map[retention.Class]ledgerv1.RetentionClass{
		retention.MoneyMoved:     ledgerv1.RetentionClass_RETENTION_CLASS_MONEY_MOVED,
		retention.AccountChanged: ledgerv1.RetentionClass_RETENTION_CLASS_ACCOUNT_CHANGED,
		retention.ReadOnly:       ledgerv1.RetentionClass_RETENTION_CLASS_READ_ONLY,
		retention.Refused:        ledgerv1.RetentionClass_RETENTION_CLASS_REFUSED,
		retention.Incident:       ledgerv1.RetentionClass_RETENTION_CLASS_INCIDENT,
	}
	Dispute = map[ledger.DisputeStatus]ledgerv1.DisputeStatus{
		ledger.DisputeNone:                       ledgerv1.DisputeStatus_DISPUTE_STATUS_NONE,
		ledger.DisputeOpen:                       ledgerv1.DisputeStatus_DISPUTE_STATUS_OPEN,
		ledger.DisputeResolvedCustomerAuthorized: ledgerv1.DisputeStatus_DISPUTE_STATUS_RESOLVED_CUSTOMER_AUTHORIZED,
		ledger.DisputeResolvedIncident:           ledgerv1.DisputeStatus_DISPUTE_STATUS_RESOLVED_INCIDENT,
		ledger.DisputeResolvedOther:              ledgerv1.DisputeStatus_DISPUTE_STATUS_RESOLVED_OTHER,
	}
	Kind = map[ledger.Kind]ledgerv1.RowKind{
		ledger.KindReceipt: ledgerv1.RowKind_ROW_KIND_RECEIPT,
		ledger.KindRefusal: ledgerv1.RowKind_ROW_KIND_REFUSAL,
	}
	Check = map[verifier.Outcome]ledgerv1.CheckResult{
		verifier.Pass:    ledgerv1.CheckResult_CHECK_RESULT_PASS,
		verifier.Fail:    ledgerv1.CheckResult_CHECK_RESULT_FAIL,
		verifier.Skipped: ledgerv1.CheckResult_CHECK_RESULT_SKIPPED,
	}
	HashSource = map[verifier.HashSource]ledgerv1.ArgsHashSource{
		verifier.HashFromReceipt:      ledgerv1.ArgsHashSource_ARGS_HASH_SOURCE_RECEIPT,
		verifier.HashComputedByLedger: ledgerv1.ArgsHashSource_ARGS_HASH_SOURCE_COMPUTED_BY_LEDGER,
	}
	TargetSource = map[verifier.TargetSource]ledgerv1.TargetSource{
		verifier.TargetFromSignedArgs: ledgerv1.TargetSource_TARGET_SOURCE_SIGNED_ARGS,
		verifier.TargetFromWriter:     ledgerv1.TargetSource_TARGET_SOURCE_WRITER,
	}
)

// The API's values as the ledger names them: the tables above inverted.
// An unspecified value is in none.
var (
	StatusOf       = Invert(Status)
	ClassOf        = Invert(Class)
	KindOf         = Invert(Kind)
	CheckOf        = Invert(Check)
	HashSourceOf   = Invert(HashSource)
	TargetSourceOf = Invert(TargetSource)
	// DisputeOf leaves out DISPUTE_STATUS_NONE: no one sets a dispute
	// to none.
	DisputeOf = func() map[ledgerv1.DisputeStatus]ledger.DisputeStatus {
		m := Invert(Dispute)
		delete(m, ledgerv1.DisputeStatus_DISPUTE_STATUS_NONE)
		return m
	}()
)

// Invert is m with its keys and values swapped.
func Invert[K, V comparable](m map[K]V) map[V]K {
	out := make(map[V]K, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

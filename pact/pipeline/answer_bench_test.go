package pipeline

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// BenchmarkBatchAnswer reads the ledger's answer to a batch of eight
// receipts, each result with its row as the gateway writes it, both ways
// in the same run: the whole message with protojson (as the pipeline read
// it before) and the codes and messages alone (batchAnswer).
func BenchmarkBatchAnswer(b *testing.B) {
	h := strings.Repeat("ab", 32)
	at := timestamppb.New(time.Date(2026, 12, 3, 10, 11, 12, 345678000, time.UTC))
	rep := &ledgerv1.AppendReceiptsResponse{}
	for range 8 {
		var checks []*ledgerv1.Check
		for _, n := range []string{"receipt_signature", "request_jwt_signature", "delegation_token_signature", "token_valid_at_ts", "scopes", "bindings", "grant_not_revoked"} {
			checks = append(checks, &ledgerv1.Check{Name: n, Result: ledgerv1.CheckResult_CHECK_RESULT_PASS, Detail: "kid brand-key-1 in snapshot sha256:" + h[:16]})
		}
		row := &ledgerv1.Row{Id: h, ReceiptId: "sha256:" + h, Kind: ledgerv1.RowKind_ROW_KIND_RECEIPT, Status: ledgerv1.RowStatus_ROW_STATUS_AUTHORIZED,
			GrantId: "grant-1", Principal: "user-42", Brand: "https://brand.example/pact",
			Agent:        &ledgerv1.Agent{Platform: "https://agent.example", RequestJwtKid: "agent-key-1", JwksSnapshot: "sha256:" + h},
			BrandKey:     &ledgerv1.BrandKey{Kid: "brand-key-1", JwksSnapshot: "sha256:" + h},
			ScopeGranted: []string{"trips:read", "trips:rebook"}, ScopesUsed: []string{"trips:rebook"},
			Limits:   &ledgerv1.Limits{AmountMax: "50.00 EUR", CountMax: 3, GrantExpires: at},
			Actions:  []*ledgerv1.RowAction{{Tool: "rebook_flight", Target: "booking-991", ArgsHash: h}},
			IssuedAt: at, RecordedAt: at, Verifier: &ledgerv1.Verifier{CheckedBy: "pactledger", CheckedAt: at, Checks: checks},
			RetainUntil: at, EvidenceSha256: h}
		rep.Results = append(rep.Results, &ledgerv1.AppendReceiptResult{Response: &ledgerv1.AppendReceiptResponse{Row: row, Outcome: ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED}})
	}
	body, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(rep)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("protojson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r ledgerv1.AppendReceiptsResponse
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &r); err != nil || len(r.GetResults()) != 8 {
				b.Fatal(err)
			}
		}
	})
	b.Run("codes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r batchAnswer
			if err := json.Unmarshal(body, &r); err != nil || len(r.Results) != 8 {
				b.Fatal(err)
			}
		}
	})
}

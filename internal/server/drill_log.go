package server

import (
	"encoding/json"

	"github.com/pactledger/pactledger/drill"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// drillLogProto adds a report's Merkle log checkpoint and its rows' proof
// bundles to p.
func drillLogProto(r *drill.Report, p *ledgerv1.DrillReport) {
	p.Checkpoint = r.Checkpoint
	for _, rp := range r.Proofs {
		out := &ledgerv1.DrillRowProof{RowId: rp.RowID, Detail: answerText(rp.Detail)}
		if rp.Bundle != nil {
			j, err := json.MarshalIndent(rp.Bundle, "", "  ")
			if err != nil {
				out.Detail = "the proof bundle cannot be encoded"
			} else {
				out.Bundle = string(j) + "\n"
				out.LeafIndex = rp.Bundle.LeafIndex
			}
		}
		p.Proofs = append(p.Proofs, out)
	}
}

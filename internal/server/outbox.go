package server

import (
	"context"
	"log/slog"

	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

func outboxEntryProto(e ledger.OutboxEntry) *ledgerv1.OutboxEntry {
	return &ledgerv1.OutboxEntry{Seq: e.Seq, Key: e.Key, Kind: e.Kind, Ref: e.Ref, Op: e.Op, RetainUntil: ts(e.RetainUntil)}
}

// GetOutbox reports the evidence outbox and a page of its dead letters.
func (s *service) GetOutbox(ctx context.Context, req *ledgerv1.GetOutboxRequest) (*ledgerv1.GetOutboxResponse, error) {
	r, err := s.l.Outbox(ctx, int(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, s.toStatus(ctx, "GetOutbox", err)
	}
	out := &ledgerv1.GetOutboxResponse{Depth: int32(r.Depth), OldestQueuedAt: ts(r.OldestQueued), PlannedSegments: int32(r.Plans),
		DeadLetterCount: int32(r.DeadLetterCount), NextPageToken: r.Next}
	for _, d := range r.DeadLetters {
		out.DeadLetters = append(out.DeadLetters, &ledgerv1.DeadLetter{Entry: outboxEntryProto(d.Entry), Reason: d.Reason, Attempts: int32(d.Attempts),
			FirstFailure: ts(d.FirstFailure), LastFailure: ts(d.LastFailure)})
	}
	return out, nil
}

// RetryDeadLetters moves dead letters back to the outbox.
func (s *service) RetryDeadLetters(ctx context.Context, req *ledgerv1.RetryDeadLettersRequest) (*ledgerv1.RetryDeadLettersResponse, error) {
	n, err := s.l.RetryDeadLetters(ctx, req.GetKey(), req.GetAll())
	if err != nil {
		return nil, s.toStatus(ctx, "RetryDeadLetters", err)
	}
	s.log.InfoContext(ctx, "dead letters retried", slog.String("by", caller(ctx)), slog.String("key", req.GetKey()), slog.Bool("all", req.GetAll()), slog.Int("entries", n))
	return &ledgerv1.RetryDeadLettersResponse{Retried: int32(n)}, nil
}

package server

import (
	"context"
	"errors"
	"log/slog"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/pact"
	"github.com/pactledger/pactledger/pact/pipeline"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// errNoProvider answers the Provider's RPCs on a ledgerd that runs none.
var errNoProvider = status.Error(codes.FailedPrecondition, "this ledgerd runs no embedded Provider (provider.enabled is false)")

// GetProviderOutbox reports the embedded Provider's outbox and a page of
// the entries set aside.
func (s *service) GetProviderOutbox(ctx context.Context, req *ledgerv1.GetProviderOutboxRequest) (*ledgerv1.GetProviderOutboxResponse, error) {
	if s.provider == nil {
		return nil, errNoProvider
	}
	n := int(req.GetPageSize())
	switch {
	case n == 0:
		n = 100
	case n < 0 || n > pact.MaxSetAsidePage:
		return nil, status.Errorf(codes.InvalidArgument, "page size %d is not between 1 and %d", n, pact.MaxSetAsidePage)
	}
	var after uint64
	if t := req.GetPageToken(); t != "" {
		var err error
		if after, err = strconv.ParseUint(t, 10, 64); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "page token %q is not one this call returned", t)
		}
	}
	entries, more, err := s.provider.PipelineSetAsideEntries(after, n)
	if err != nil {
		return nil, s.toStatus(ctx, "GetProviderOutbox", err)
	}
	out := &ledgerv1.GetProviderOutboxResponse{Depth: int32(s.provider.PipelineDepth()), SetAsideCount: int32(s.provider.PipelineSetAside())}
	size := 0
	for i, e := range entries {
		p := setAsideProto(e)
		// A page ends early rather than pass answerRowBytes (a receipt
		// lists every tool of its action log); it holds at least one.
		if size += itemBytes(p); size > answerRowBytes && i > 0 {
			more, entries = true, entries[:i]
			break
		}
		out.SetAside = append(out.SetAside, p)
	}
	if more && len(entries) > 0 {
		out.NextPageToken = strconv.FormatUint(entries[len(entries)-1].Seq, 10)
	}
	return out, nil
}

// setAsideProto names an entry set aside, without its tokens.
func setAsideProto(e pact.SetAsideEntry) *ledgerv1.ProviderSetAsideEntry {
	p := &ledgerv1.ProviderSetAsideEntry{Seq: e.Seq, Why: e.Why, SizeBytes: int32(e.Size), SetAsideAt: ts(e.At)}
	it := e.Item
	switch {
	case e.Unreadable != "":
		p.Kind = "unreadable"
	case it.Receipt != nil:
		p.Kind, p.ReceiptId, p.ContextId, p.MessageId = "receipt", pipeline.ReceiptID(it.Receipt.ReceiptJWS), it.Receipt.ContextID, it.Receipt.MessageID
		for _, a := range it.Receipt.Actions {
			p.Tools = append(p.Tools, a.Tool)
		}
	case it.Refusal != nil:
		r := it.Refusal
		p.Kind, p.Tools, p.Target, p.ClaimedPrincipal, p.ClaimedAgent, p.At = "refusal", []string{r.Action.Tool}, r.Action.Target, r.ClaimedPrincipal, r.ClaimedAgent, ts(r.ObservedAt)
	case it.Revocation != nil:
		p.Kind, p.GrantId, p.At = "revocation", it.Revocation.GrantID, ts(it.Revocation.RevokedAt)
	default:
		p.Kind = "empty"
	}
	return p
}

// RetryProviderSetAside puts entries set aside back in the Provider's
// outbox.
func (s *service) RetryProviderSetAside(ctx context.Context, req *ledgerv1.RetryProviderSetAsideRequest) (*ledgerv1.RetryProviderSetAsideResponse, error) {
	if s.provider == nil {
		return nil, errNoProvider
	}
	if (req.GetSeq() != 0) == req.GetAll() {
		return nil, status.Error(codes.InvalidArgument, "name one entry set aside (seq) or all of them (all), not both")
	}
	r, err := s.provider.RetryPipelineSetAside(req.GetSeq(), req.GetAll())
	switch {
	case errors.Is(err, pact.ErrNotSetAside):
		return nil, status.Error(codes.NotFound, err.Error())
	case errors.Is(err, pact.ErrUnreadable), errors.Is(err, pact.ErrBrandNotConfigured):
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	case err != nil:
		return nil, s.toStatus(ctx, "RetryProviderSetAside", err)
	}
	s.log.InfoContext(ctx, "Provider entries set aside put back in its outbox", slog.String("by", caller(ctx)), slog.Uint64("seq", req.GetSeq()), slog.Bool("all", req.GetAll()),
		slog.Int("entries", r.Retried), slog.Int("unreadable", r.Unreadable), slog.Int("brand_not_configured", r.Held))
	return &ledgerv1.RetryProviderSetAsideResponse{Retried: int32(r.Retried), Unreadable: int32(r.Unreadable), BrandNotConfigured: int32(r.Held)}, nil
}

package server

import (
	"context"
	"errors"
	"fmt"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/ledgerpb"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/pact"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/verifier"
)

// service implements ledgerv1.LedgerServiceServer over a ledger.Ledger.
type service struct {
	ledgerv1.UnimplementedLedgerServiceServer
	// providerStops is from when a revocation stops the embedded Provider
	// (embeddedStops); nil when this ledgerd runs none.
	providerStops func(grant string, rev *ledger.Revocation) time.Time
	l             *ledger.Ledger
	drills        *drill.Runner
	log           *slog.Logger
	// logKey verifies the Merkle log's checkpoints ("" without a log).
	logKey string
	// lastCP is the latest checkpoint verified with logKey
	// (openCheckpoint).
	lastCP atomic.Pointer[openedCheckpoint]
	access *ledger.AccessLog
	// batchReceipts and streamReceipts count AppendReceipts' and
	// AppendReceiptStream's results by code.
	batchReceipts, streamReceipts *prometheus.CounterVec
	// workers runs the receipts of AppendReceipts calls and streams.
	workers *workers
	// streams bounds the bytes AppendReceiptStream streams hold.
	streams *streamBudget
	// draining is closed when ledgerd begins to shut down: streams stop
	// reading receipts (AppendReceiptStream).
	draining <-chan struct{}
	// provider is the embedded Provider, nil when ledgerd runs none.
	provider *pact.Provider
}

// reasonExpired marks a NotFound for a swept row; REST answers it with 410.
const reasonExpired = "ROW_EXPIRED"

// reasonNoLeaf marks a FailedPrecondition for a row or event the row
// store holds with no leaf in the log and none queued (ledger.ErrNoLeaf);
// REST answers it with 409.
const reasonNoLeaf = "LEAF_MISSING"

// reasonSweeperElsewhere is the ErrorInfo reason of a sweep refused because
// another ledgerd holds the sweeper's lease; its metadata names the holder
// and when its lease ends unless renewed.
const reasonSweeperElsewhere = "SWEEPER_LEASE_HELD"

// The ops toStatus is given for appends, whose answers read as written.
const (
	opAppendReceipt = "AppendReceipt"
	opAppendRefusal = "AppendRefusal"
)

// reasonLeaseLost is the ErrorInfo reason of a request stopped because
// this ledgerd lost the lease it ran under (a sweep).
const reasonLeaseLost = "LEASE_LOST"

// sweeperRetryDelay is the RetryInfo of a sweep refused for the sweeper's
// lease: another try may reach the replica that holds it.
const sweeperRetryDelay = time.Second

// toStatus maps ledger errors to gRPC status in one place. Internal detail
// is logged, never returned.
func (s *service) toStatus(ctx context.Context, op string, err error) error {
	var (
		expired *ledger.ExpiredError
		held    *ledger.LeaseHeldError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &expired):
		t := expired.Tombstone
		msg, meta := expired.Error(), map[string]string{
			"retentionClass": t.Class.String(), "status": t.Status.String(), "retainUntil": t.RetainUntil.Format(time.RFC3339), "sweptAt": t.SweptAt.Format(time.RFC3339)}
		if !mayRead(ctx) || op == opAppendReceipt || op == opAppendRefusal {
			// A writer posting a swept receipt again learns it was
			// recorded, not when the row went: a hold or an incident's
			// closing set that (asWritten), whatever other roles its key
			// holds: an append is not recorded as a read.
			msg = fmt.Sprintf("row %s was recorded, under retention class %s, and has since been removed by retention", t.ID, t.Class)
			delete(meta, "retainUntil")
			delete(meta, "sweptAt")
		}
		st := status.New(codes.NotFound, msg)
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reasonExpired, Domain: "pactledger", Metadata: meta}); derr == nil {
			st = d
		}
		return st.Err()
	case errors.Is(err, ledger.ErrInvalid), errors.Is(err, drill.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ledger.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ledger.ErrConflict):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ledger.ErrClosed):
		return status.Error(codes.Unavailable, "ledger is shutting down; retry")
	case errors.Is(err, ledger.ErrClockAhead):
		// The message holds only the two times and whose clock; the
		// operator must see it in the log too, whoever asked.
		s.log.ErrorContext(ctx, "retention sweep refused: the ledger's clock is ahead of a reference clock", slog.String("op", op), slog.String("error", err.Error()))
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ledger.ErrClockUnread):
		s.log.ErrorContext(ctx, "retention sweep refused: a reference clock could not be read", slog.String("op", op), slog.String("error", err.Error()))
		return status.Error(codes.Unavailable, "the sweep deleted nothing: the clock of the S3 evidence store or the PostgreSQL row store could not be read; retry")
	case errors.Is(err, ledger.ErrClockOff):
		// The times and whose clock only; the ledger logs the refusal at
		// ERROR once, when writes stop.
		return retryable(codes.Unavailable, err.Error(), clockRetryDelay)
	case errors.As(err, &held):
		// UNAVAILABLE, not FAILED_PRECONDITION: the holder's sweeper holds
		// the lease as long as it runs, so this replica will refuse again,
		// but behind a load balancer a retry may reach the holder, which
		// sweeps; nothing needs fixing first.
		st := status.New(codes.Unavailable, fmt.Sprintf("another ledgerd runs the retention sweeper: its lease %s is held by %s until %s unless renewed; retry (a retry that reaches that replica sweeps), or wait for its next sweep",
			held.Lease, held.Holder, held.Expires.UTC().Format(time.RFC3339)))
		if d, derr := st.WithDetails(
			&errdetails.ErrorInfo{Reason: reasonSweeperElsewhere, Domain: "pactledger", Metadata: map[string]string{"lease": held.Lease, "holder": held.Holder, "leaseExpires": held.Expires.UTC().Format(time.RFC3339)}},
			&errdetails.RetryInfo{RetryDelay: durationpb.New(sweeperRetryDelay)}); derr == nil {
			st = d
		}
		return st.Err()
	case errors.Is(err, ledger.ErrLeaseHeld):
		return retryable(codes.Unavailable, "another ledgerd holds the lease this needs; retry", sweeperRetryDelay)
	case errors.Is(err, ledger.ErrLeaseLost):
		s.log.WarnContext(ctx, "request stopped: this ledgerd lost the lease it ran under", slog.String("op", op), slog.String("error", err.Error()))
		st := status.New(codes.Unavailable, "this ledgerd lost the lease the request ran under, which stopped it; retry")
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reasonLeaseLost, Domain: "pactledger"}); derr == nil {
			st = d
		}
		return st.Err()
	case errors.Is(err, ledger.ErrUnavailable):
		return status.Error(codes.Unavailable, "a store is unavailable; retry")
	case errors.Is(err, ledger.ErrNoLog):
		return status.Error(codes.Unimplemented, "this ledger keeps no Merkle log")
	case errors.Is(err, ledger.ErrNoLeaf):
		st := status.New(codes.FailedPrecondition, err.Error())
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reasonNoLeaf, Domain: "pactledger"}); derr == nil {
			st = d
		}
		return st.Err()
	case errors.Is(err, ledger.ErrNotLogged):
		return retryable(codes.Unavailable, err.Error()+"; the log is extended and published to write-once storage every half second while that storage takes writes (/readyz shows the log not published while it does not)", time.Second)
	case errors.Is(err, ledger.ErrKeysUnavailable):
		return retryable(codes.Unavailable, err.Error(), keysRetryDelay)
	case errors.Is(err, ledger.ErrStoreEdited):
		// The message names the row and says to run fsck; the operator
		// must see it in the log too, whoever asked.
		s.log.ErrorContext(ctx, "the row store was edited outside the ledger", slog.String("op", op), slog.String("error", err.Error()))
		return status.Error(codes.DataLoss, err.Error())
	case errors.Is(err, ledger.ErrNoSpace):
		s.log.ErrorContext(ctx, "row store disk full", slog.String("op", op), slog.String("error", err.Error()))
		return retryable(codes.ResourceExhausted, err.Error(), noSpaceRetryDelay)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	}
	s.log.ErrorContext(ctx, "request failed", slog.String("op", op), slog.String("error", err.Error()))
	return status.Error(codes.Internal, "internal error; see the server log")
}

// Retry delays suggested to writers in RetryInfo.
const (
	keysRetryDelay    = 5 * time.Second
	noSpaceRetryDelay = 30 * time.Second
	clockRetryDelay   = 30 * time.Second
)

// retryable is a status with RetryInfo asking the caller to retry after delay.
func retryable(code codes.Code, msg string, delay time.Duration) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}); err == nil {
		st = d
	}
	return st.Err()
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func fromTS(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

func (s *service) AppendReceipt(ctx context.Context, req *ledgerv1.AppendReceiptRequest) (*ledgerv1.AppendReceiptResponse, error) {
	return s.appendReceipt(ctx, receiptInput(req), req.GetView())
}

// receiptInput is what req asks the ledger to record.
func receiptInput(req *ledgerv1.AppendReceiptRequest) ledger.ReceiptInput {
	in := ledger.ReceiptInput{
		ReceiptJWS:      req.GetReceiptJws(),
		RequestJWT:      req.GetRequestJwt(),
		DelegationToken: req.GetDelegationToken(),
		ContextID:       req.GetContextId(),
		MessageID:       req.GetMessageId(),
	}
	for _, a := range req.GetActions() {
		in.Actions = append(in.Actions, verifier.Action{Tool: a.GetTool(), Target: a.GetTarget(), ArgsJSON: a.GetArgsJson()})
	}
	if lim := req.GetLimits(); lim != nil {
		in.Limits = &ledger.Limits{AmountMax: lim.GetAmountMax(), CountMax: int(lim.GetCountMax())}
	}
	return in
}

// appendReceipt records in and answers its row in view.
func (s *service) appendReceipt(ctx context.Context, in ledger.ReceiptInput, view ledgerv1.RowView) (*ledgerv1.AppendReceiptResponse, error) {
	row, outcome, err := s.l.AppendReceipt(ctx, in)
	if err != nil {
		return nil, s.toStatus(ctx, opAppendReceipt, err)
	}
	p := basicRowProto(row)
	if view != ledgerv1.RowView_ROW_VIEW_BASIC {
		p = s.asWritten(row, rowProto(row))
	}
	return &ledgerv1.AppendReceiptResponse{Row: p, Outcome: outcomeProto[outcome]}, nil
}

// asWritten is p, the full view of row, as it was written, for the caller
// of an append, whatever roles its key holds: posting a receipt or refusal
// again answers the stored row, and would otherwise read what the ledger's
// readers recorded of it since, outside the access log (an append is a
// write, not a read). Its dispute (support's notes, the keys' names) reads
// none, and its retain-until the one its class gave it when it was
// written, not a hold's or an incident's closing. A key that may read
// rows reads the row as it is with GetRow, which is recorded.
func (s *service) asWritten(row *ledger.Row, p *ledgerv1.Row) *ledgerv1.Row {
	if len(row.DisputeEvents) > 0 { // its dispute status is theirs (Row.DisputeState)
		p.DisputeStatus, p.DisputeEvents = disputeProto[ledger.DisputeNone], nil
	}
	// A hold or an incident's closing only ever keeps a row longer: a
	// retain-until later than its class gives it (none, for an incident's
	// own row) is theirs. One earlier is the period as it was configured
	// when the row was written, kept.
	if written := s.l.Policy().RetainUntil(row.Class, row.RetentionStart()); written.IsZero() || written.Before(row.RetainUntil) {
		if !written.Equal(row.RetainUntil) {
			p.RetainUntil = ts(written)
		}
	}
	return p
}

// mayRead reports whether the caller holds a role that reads rows.
func mayRead(ctx context.Context) bool {
	return hasRole(ctx, config.RoleSupport) || hasRole(ctx, config.RoleAuditor) || hasRole(ctx, config.RoleAdmin)
}

func (s *service) AppendRefusal(ctx context.Context, req *ledgerv1.AppendRefusalRequest) (*ledgerv1.AppendRefusalResponse, error) {
	row, err := s.l.AppendRefusal(ctx, ledger.RefusalInput{
		ClaimedPrincipal: req.GetClaimedPrincipal(),
		ClaimedAgent:     req.GetClaimedAgent(),
		RequestJWT:       req.GetRequestJwt(),
		Tool:             req.GetAction().GetTool(),
		Target:           req.GetAction().GetTarget(),
		Reason:           req.GetReason(),
		ObservedAt:       fromTS(req.GetObservedAt()),
		DelegationToken:  req.GetDelegationToken(),
	})
	if err != nil {
		return nil, s.toStatus(ctx, opAppendRefusal, err)
	}
	return &ledgerv1.AppendRefusalResponse{Row: s.asWritten(row, rowProto(row))}, nil
}

func (s *service) GetRow(ctx context.Context, req *ledgerv1.GetRowRequest) (*ledgerv1.GetRowResponse, error) {
	row, err := s.l.Get(ctx, req.GetId())
	if err != nil {
		return nil, s.toStatus(ctx, "GetRow", err)
	}
	return &ledgerv1.GetRowResponse{Row: rowProto(row)}, nil
}

func (s *service) ListRows(ctx context.Context, req *ledgerv1.ListRowsRequest) (*ledgerv1.ListRowsResponse, error) {
	for name, at := range map[string]*timestamppb.Timestamp{"since": req.GetSince(), "until": req.GetUntil()} {
		// Year 1 would read as no bound at all.
		if at != nil && !verifier.InRange(at.AsTime()) {
			return nil, status.Errorf(codes.InvalidArgument, "%s %s: want a time from %s to %s, or none",
				name, at.AsTime().Format(time.RFC3339), verifier.MinTime.Format(time.RFC3339), verifier.MaxTime.Format(time.RFC3339))
		}
	}
	q := ledger.Query{
		Principal: req.GetPrincipal(),
		GrantID:   req.GetGrantId(),
		Target:    req.GetTarget(),
		Agent:     req.GetAgent(),
		Since:     fromTS(req.GetSince()),
		Until:     fromTS(req.GetUntil()),
		PageSize:  int(req.GetPageSize()),
		PageToken: req.GetPageToken(),
	}
	if req.GetStatus() != ledgerv1.RowStatus_ROW_STATUS_UNSPECIFIED {
		st, ok := statusFromProto[req.GetStatus()]
		if !ok {
			return nil, status.Error(codes.InvalidArgument, "unknown status")
		}
		q.Status = st
	}
	if req.GetRetentionClass() != ledgerv1.RetentionClass_RETENTION_CLASS_UNSPECIFIED {
		c, ok := classFromProto[req.GetRetentionClass()]
		if !ok {
			return nil, status.Error(codes.InvalidArgument, "unknown retentionClass")
		}
		q.Class = c
	}
	built := map[*ledger.Row]*ledgerv1.Row{}
	rows, next, err := s.l.ListWithin(ctx, q, answerRowBytes, func(r *ledger.Row) int {
		p := rowProto(r)
		built[r] = p
		return itemBytes(p)
	})
	if err != nil {
		return nil, s.toStatus(ctx, "ListRows", err)
	}
	out := &ledgerv1.ListRowsResponse{NextPageToken: next, Rows: make([]*ledgerv1.Row, len(rows))}
	for i, r := range rows {
		if out.Rows[i] = built[r]; out.Rows[i] == nil {
			out.Rows[i] = rowProto(r)
		}
	}
	return out, nil
}

// answerRowBytes bounds the encoded rows of one read answer: a ListRows
// page ends early, and GetGrant's and GetIncident's lists are cut, rather
// than pass it; a ListDrills or ListAccessLog page ends early rather than
// take its drill reports or access records past it. It lies well under the
// 4 MiB a gRPC client receives by default, whatever rows writers posted
// within the write limits.
var answerRowBytes = 2 << 20

// itemBytes is what m adds to an answer's encoding as one item of a
// repeated field numbered below 16 (a one-byte tag).
func itemBytes(m proto.Message) int {
	n := proto.Size(m)
	return n + 1 + protowire.SizeVarint(uint64(n))
}

// rowsWithin returns rows as answers carry them, from the first, as long
// as they fit within budget bytes (at least one, when keepOne).
func rowsWithin(rows []*ledger.Row, budget int, keepOne bool) []*ledgerv1.Row {
	var out []*ledgerv1.Row
	for _, r := range rows {
		p := rowProto(r)
		if budget -= itemBytes(p); budget < 0 && (len(out) > 0 || !keepOne) {
			break
		}
		out = append(out, p)
	}
	return out
}

func (s *service) GetEvidence(ctx context.Context, req *ledgerv1.GetEvidenceRequest) (*ledgerv1.GetEvidenceResponse, error) {
	v, err := s.l.Evidence(ctx, req.GetId())
	if err != nil {
		return nil, s.toStatus(ctx, "GetEvidence", err)
	}
	out := &ledgerv1.GetEvidenceResponse{
		RowId:             v.RowID,
		ReceiptJws:        v.Evidence.ReceiptJWS,
		RequestJwt:        v.Evidence.RequestJWT,
		DelegationToken:   v.Evidence.DelegationToken,
		JwksSnapshots:     v.Snapshots,
		EvidenceSha256:    v.SHA256,
		NotKept:           v.NotKept,
		RowEvidenceSha256: v.RowSHA256,
		ReadFrom:          evidenceReadFrom[v.ReadFrom],
	}
	if r := v.Evidence.Refusal; r != nil {
		out.RequestJwt, out.DelegationToken = r.RequestJWT, r.DelegationToken
	}
	for _, a := range v.Evidence.Actions {
		out.Actions = append(out.Actions, &ledgerv1.Action{Tool: a.Tool, Target: a.Target, ArgsJson: a.ArgsJSON})
	}
	for _, o := range v.Objects {
		out.Objects = append(out.Objects, objectProto(o.Name, o.Location))
	}
	return out, nil
}

// evidenceReadFrom is where GetEvidence read a bundle, in the API's words;
// a bundle not kept was read nowhere (unspecified).
var evidenceReadFrom = map[ledger.EvidenceSource]ledgerv1.EvidenceReadFrom{
	ledger.ReadFromRowStore:      ledgerv1.EvidenceReadFrom_EVIDENCE_READ_FROM_ROW_STORE,
	ledger.ReadFromWriteOnceCopy: ledgerv1.EvidenceReadFrom_EVIDENCE_READ_FROM_WRITE_ONCE_COPY,
	ledger.ReadFromCache:         ledgerv1.EvidenceReadFrom_EVIDENCE_READ_FROM_CACHE,
}

func objectProto(name string, l ledger.Location) *ledgerv1.EvidenceObject {
	return &ledgerv1.EvidenceObject{Name: name, Store: l.Store, Bucket: l.Bucket, Key: l.Key, VersionId: l.VersionID, RetainUntil: ts(l.RetainUntil), Uploaded: l.Uploaded, Offset: l.Offset, Length: l.Length, LegalHold: l.LegalHold}
}

func (s *service) GetJwksSnapshot(ctx context.Context, req *ledgerv1.GetJwksSnapshotRequest) (*ledgerv1.GetJwksSnapshotResponse, error) {
	snap, loc, err := s.l.Snapshot(ctx, req.GetId())
	if err != nil {
		return nil, s.toStatus(ctx, "GetJwksSnapshot", err)
	}
	return &ledgerv1.GetJwksSnapshotResponse{Id: snap.ID, Jwks: snap.Body, SourceUri: snap.URI, FetchedAt: ts(snap.FetchedAt), Object: objectProto(ledger.ObjectJWKS, loc)}, nil
}

func (s *service) VerifyRow(ctx context.Context, req *ledgerv1.VerifyRowRequest) (*ledgerv1.VerifyRowResponse, error) {
	rv, err := s.l.VerifyRow(ctx, req.GetId())
	if err != nil {
		return nil, s.toStatus(ctx, "VerifyRow", err)
	}
	out := &ledgerv1.VerifyRowResponse{RowId: rv.RowID, Checks: checksProto(rv.Checks), WriteTimeChecks: checksProto(rv.WriteTime), Same: rv.Same}
	for i, d := range rv.Differences {
		if i > 0 {
			out.Differences += "; "
		}
		out.Differences += detailText(d)
	}
	return out, nil
}

func (s *service) AppendDisputeEvent(ctx context.Context, req *ledgerv1.AppendDisputeEventRequest) (*ledgerv1.AppendDisputeEventResponse, error) {
	st, ok := disputeFromProto[req.GetStatus()]
	if !ok {
		return nil, status.Error(codes.InvalidArgument, "status must be DISPUTE_STATUS_OPEN or one of the DISPUTE_STATUS_RESOLVED_ values")
	}
	row, err := s.l.AppendDispute(ctx, req.GetId(), st, req.GetNote(), caller(ctx))
	if err != nil {
		return nil, s.toStatus(ctx, "AppendDisputeEvent", err)
	}
	return &ledgerv1.AppendDisputeEventResponse{Row: rowProto(row)}, nil
}

var (
	outcomeProto      = ledgerpb.Outcome
	statusProto       = ledgerpb.Status
	statusFromProto   = ledgerpb.StatusOf
	classProto        = ledgerpb.Class
	classFromProto    = ledgerpb.ClassOf
	disputeProto      = ledgerpb.Dispute
	disputeFromProto  = ledgerpb.DisputeOf
	kindProto         = ledgerpb.Kind
	checkProto        = ledgerpb.Check
	hashSourceProto   = ledgerpb.HashSource
	targetSourceProto = ledgerpb.TargetSource
)

func checksProto(cs []verifier.Check) []*ledgerv1.Check {
	out := make([]*ledgerv1.Check, len(cs))
	for i, c := range cs {
		out[i] = &ledgerv1.Check{Name: c.Name, Result: checkProto[c.Result], Detail: detailText(c.Detail)}
	}
	return out
}

// basicRowProto is r in ROW_VIEW_BASIC: what names and classifies it, and
// the row a duplicate names.
func basicRowProto(r *ledger.Row) *ledgerv1.Row {
	p := &ledgerv1.Row{
		Id:             r.ID,
		ReceiptId:      r.ReceiptID,
		Kind:           kindProto[r.Kind],
		Status:         statusProto[r.Status],
		GrantId:        r.GrantID,
		RecordedAt:     ts(r.RecordedAt),
		RetentionClass: classProto[r.Class],
	}
	if r.Verifier.DuplicateOf != "" {
		p.Verifier = &ledgerv1.Verifier{DuplicateOf: r.Verifier.DuplicateOf}
	}
	return p
}

// rowProto is r whole (ROW_VIEW_FULL): the basic view and every other
// field.
func rowProto(r *ledger.Row) *ledgerv1.Row {
	p := basicRowProto(r)
	p.Principal = r.Principal
	p.Brand = r.Brand
	p.Agent = &ledgerv1.Agent{Platform: r.Agent.Platform, RequestJwtKid: r.Agent.RequestJWTKid, JwksSnapshot: r.Agent.JWKSSnapshot}
	p.BrandKey = &ledgerv1.BrandKey{Kid: r.BrandKey.Kid, JwksSnapshot: r.BrandKey.JWKSSnapshot}
	p.ScopeGranted = r.ScopeGranted
	p.ScopesUsed = r.ScopesUsed
	p.Limits = &ledgerv1.Limits{AmountMax: r.Limits.AmountMax, CountMax: int32(r.Limits.CountMax), GrantExpires: ts(r.Limits.GrantExpires)}
	p.IssuedAt = ts(r.IssuedAt)
	p.Verifier = &ledgerv1.Verifier{
		CheckedBy:   r.Verifier.CheckedBy,
		CheckedAt:   ts(r.Verifier.CheckedAt),
		Checks:      checksProto(r.Verifier.Checks),
		DuplicateOf: r.Verifier.DuplicateOf,
	}
	p.RetainUntil = ts(r.RetainUntil)
	p.IncidentId = r.IncidentID
	p.DisputeStatus = disputeProto[r.DisputeState()]
	p.EvidenceSha256 = r.EvidenceSHA256
	p.ContextId = r.ContextID
	p.MessageId = r.MessageID
	p.UnclassifiedTools = r.UnclassifiedTools
	p.EvidenceNotKept = r.EvidenceNotKept
	for _, a := range r.Actions {
		p.Actions = append(p.Actions, &ledgerv1.RowAction{Tool: a.Tool, Target: a.Target, ArgsHash: a.ArgsHash, ArgsHashSource: hashSourceProto[a.HashSource], TargetSource: targetSourceProto[a.TargetSource]})
	}
	for _, e := range r.DisputeEvents {
		p.DisputeEvents = append(p.DisputeEvents, &ledgerv1.DisputeEvent{At: ts(e.At), Status: disputeProto[e.Status], Note: e.Note, By: e.By})
	}
	if r.Refusal != nil {
		p.Refusal = &ledgerv1.Refusal{ClaimedPrincipal: r.Refusal.ClaimedPrincipal, ClaimedAgent: r.Refusal.ClaimedAgent, Reason: r.Refusal.Reason}
	}
	return p
}

func (s *service) RunDrill(ctx context.Context, req *ledgerv1.RunDrillRequest) (*ledgerv1.RunDrillResponse, error) {
	dr := drill.Request{Target: req.GetTarget(), RowID: req.GetRowId(), Principal: req.GetPrincipal()}
	if m := req.GetMonthly(); m != nil {
		dr.Monthly, dr.Sample = true, int(m.GetSample())
	}
	// Looked up, then kept in the report and shown: bounded, and holding
	// nothing a terminal acts on or hides, as the names they match.
	for _, f := range []struct{ name, v string }{{"target", dr.Target}, {"principal", dr.Principal}} {
		if err := ledger.CheckName(f.name, f.v); err != nil {
			return nil, s.toStatus(ctx, "RunDrill", err)
		}
	}
	rep, err := s.drills.Run(ctx, dr, caller(ctx))
	if err != nil {
		return nil, s.toStatus(ctx, "RunDrill", err)
	}
	level := slog.LevelInfo
	if rep.ChecksPassed < rep.ChecksTotal {
		level = slog.LevelWarn
	}
	s.log.Log(ctx, level, "drill run", slog.String("drill", rep.ID), slog.String("kind", string(rep.Kind)), slog.String("by", rep.RunBy),
		slog.Int("checks_passed", rep.ChecksPassed), slog.Int("checks_total", rep.ChecksTotal))
	return &ledgerv1.RunDrillResponse{Report: drillProto(rep, ledger.Location{Key: ledger.DrillKey(rep.ID)})}, nil
}

func (s *service) GetDrill(ctx context.Context, req *ledgerv1.GetDrillRequest) (*ledgerv1.GetDrillResponse, error) {
	rep, loc, err := s.drills.Get(ctx, req.GetId())
	if err != nil {
		return nil, s.toStatus(ctx, "GetDrill", err)
	}
	return &ledgerv1.GetDrillResponse{Report: drillProto(rep, loc)}, nil
}

func (s *service) ListDrills(ctx context.Context, req *ledgerv1.ListDrillsRequest) (*ledgerv1.ListDrillsResponse, error) {
	built := map[*drill.Report]*ledgerv1.DrillReport{}
	reps, next, err := s.drills.ListWithin(ctx, int(req.GetPageSize()), req.GetPageToken(), answerRowBytes, func(r *drill.Report) int {
		p := drillProto(r, ledger.Location{})
		built[r] = p
		return itemBytes(p)
	})
	if err != nil {
		return nil, s.toStatus(ctx, "ListDrills", err)
	}
	out := &ledgerv1.ListDrillsResponse{NextPageToken: next, Reports: make([]*ledgerv1.DrillReport, len(reps))}
	for i, r := range reps {
		if out.Reports[i] = built[r]; out.Reports[i] == nil {
			out.Reports[i] = drillProto(r, ledger.Location{})
		}
	}
	return out, nil
}

// maxReplyBytes bounds a drill report's reply in an answer. A dispute
// drill's reply names each drilled row's action, its tools and targets
// taken from the receipt's claims: twenty rows of a writer's receipts with
// the longest claims make it hundreds of KB.
const maxReplyBytes = 64 << 10

// drillProto is a report as answers carry it: each detail and the note cut
// at maxDetailBytes and the reply at maxReplyBytes, saying so. With at
// most 100 rows of six pulls, a report answers in under 2 MiB, whatever
// rows writers posted; the stored report and its write-once object keep
// every detail whole.
func drillProto(r *drill.Report, loc ledger.Location) *ledgerv1.DrillReport {
	cut := false
	text := func(s string, max int) string {
		s, c := cutText(s, max)
		cut = cut || c
		return s
	}
	p := &ledgerv1.DrillReport{
		Id:             r.ID,
		Kind:           ledgerv1.DrillKind_DRILL_KIND_DISPUTE,
		StartedAt:      ts(r.StartedAt),
		FinishedAt:     ts(r.FinishedAt),
		Rows:           r.Rows,
		ChecksPassed:   int32(r.ChecksPassed),
		ChecksTotal:    int32(r.ChecksTotal),
		Reply:          text(r.Reply, maxReplyBytes),
		ReplyWithProof: text(r.ReplyWithProof(), maxReplyBytes),
		RunBy:          r.RunBy,
		Request:        &ledgerv1.RunDrillRequest{Target: r.Request.Target, RowId: r.Request.RowID, Principal: r.Request.Principal},
	}
	if r.Kind == drill.Monthly {
		p.Kind = ledgerv1.DrillKind_DRILL_KIND_MONTHLY
		p.Request.Monthly = &ledgerv1.MonthlyDrill{Sample: int32(r.Request.Sample)}
	}
	for _, pl := range r.Pulls {
		p.Pulls = append(p.Pulls, &ledgerv1.DrillPull{RowId: pl.RowID, Name: pl.Name, Passed: pl.Passed, ElapsedMs: pl.ElapsedMs, Detail: text(pl.Detail, maxDetailBytes)})
	}
	if loc.Key != "" {
		p.Object = objectProto(ledger.ObjectDrill, loc)
	}
	p.Note = text(r.Note, maxDetailBytes)
	for _, l := range r.Listed {
		p.Listed = append(p.Listed, &ledgerv1.DrillListedRow{RowId: l.RowID, Detail: text(l.Detail, maxDetailBytes)})
	}
	drillLogProto(r, p)
	for _, pr := range p.Proofs {
		pr.Detail = text(pr.Detail, maxDetailBytes)
	}
	p.DetailsTruncated = cut
	return p
}

// revocationProto is grant's revocation r as answers carry it, with
// whether it stops the embedded Provider when this ledgerd runs one.
func (s *service) revocationProto(grant string, r *ledger.Revocation) *ledgerv1.Revocation {
	if r == nil {
		return nil
	}
	out := &ledgerv1.Revocation{RevokedAt: ts(r.RevokedAt), By: r.By, Note: r.Note, RecordedAt: ts(r.RecordedAt)}
	if !r.AdminRevokedAt.IsZero() {
		out.AdminRevokedAt = ts(r.AdminRevokedAt)
	}
	out.AdminBy, out.AdminNote = r.AdminBy, r.AdminNote
	if !r.AdminRecordedAt.IsZero() {
		out.AdminRecordedAt = ts(r.AdminRecordedAt)
	}
	for _, st := range r.ProviderStatements {
		out.ProviderStatements = append(out.ProviderStatements, &ledgerv1.ProviderStatement{Brand: st.Brand, RevokedAt: ts(st.RevokedAt), Statement: st.Statement, RecordedAt: ts(st.RecordedAt)})
	}
	if s.providerStops != nil {
		out.EmbeddedProvider = true
		if at := s.providerStops(grant, r); !at.IsZero() {
			out.EmbeddedProviderStoppedAt = ts(at)
		}
	}
	return out
}

func (s *service) RevokeGrant(ctx context.Context, req *ledgerv1.RevokeGrantRequest) (*ledgerv1.RevokeGrantResponse, error) {
	if at := req.GetRevokedAt(); at != nil && !verifier.InRange(at.AsTime()) {
		// Year 1 among them, which would otherwise read as unset (now).
		return nil, status.Errorf(codes.InvalidArgument, "revokedAt %s: want a time from %s to %s, or none for now",
			at.AsTime().Format(time.RFC3339), verifier.MinTime.Format(time.RFC3339), verifier.MaxTime.Format(time.RFC3339))
	}
	// An admin's revocation also stops the embedded Provider; a writer's
	// (a Provider's pipeline reporting its own) makes receipts incidents
	// only (docs/design/038), unless it carries the Provider's signed
	// statement of it (docs/design/045).
	rev, err := s.l.RevokeGrantStated(ctx, req.GetGrantId(), fromTS(req.GetRevokedAt()), req.GetNote(), caller(ctx), hasRole(ctx, config.RoleAdmin),
		req.GetProviderStatement())
	if err != nil {
		return nil, s.toStatus(ctx, "RevokeGrant", err)
	}
	if rev.By != caller(ctx) && !canRead(ctx) {
		// The revocation in force is another key's: a writer, which may
		// not read the ledger, learns when it took effect, not who
		// recorded it or why.
		rev.By, rev.Note = "", ""
	}
	if !canRead(ctx) {
		// Nor an admin's: a key that may not read the ledger holds no
		// admin role.
		rev.AdminBy, rev.AdminNote, rev.AdminRecordedAt = "", "", time.Time{}
		// Nor which Provider revoked it, or when it signed that.
		rev.ProviderStatements = nil
	}
	out := &ledgerv1.RevokeGrantResponse{GrantId: req.GetGrantId(), Revocation: s.revocationProto(req.GetGrantId(), &rev)}
	if !canRead(ctx) {
		out.Revocation.EmbeddedProvider, out.Revocation.EmbeddedProviderStoppedAt = false, nil
	}
	return out, nil
}

// canRead reports whether the caller holds a role that reads the ledger.
func canRead(ctx context.Context) bool {
	return hasRole(ctx, config.RoleSupport) || hasRole(ctx, config.RoleAuditor) || hasRole(ctx, config.RoleAdmin)
}

func (s *service) GetGrant(ctx context.Context, req *ledgerv1.GetGrantRequest) (*ledgerv1.GetGrantResponse, error) {
	g, err := s.l.Grant(ctx, req.GetGrantId())
	if err != nil {
		return nil, s.toStatus(ctx, "GetGrant", err)
	}
	out := &ledgerv1.GetGrantResponse{GrantId: g.GrantID, Principals: g.Principals, Agents: g.Agents, ScopesGranted: g.ScopesGranted,
		ScopesUsed: g.ScopesUsed, Revocation: s.revocationProto(g.GrantID, g.Revocation), RowCount: int32(g.RowCount), ListsTruncated: g.ListsCut,
		RowCountTruncated: g.RowCountCut}
	out.Rows = rowsWithin(g.Rows, answerRowBytes, true)
	out.RowsTruncated = len(out.Rows) < g.RowCount
	return out, nil
}

func (s *service) CheckIntegrity(ctx context.Context, req *ledgerv1.CheckIntegrityRequest) (*ledgerv1.CheckIntegrityResponse, error) {
	p, err := s.l.CheckIntegrity(ctx, int(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, s.toStatus(ctx, "CheckIntegrity", err)
	}
	out := &ledgerv1.CheckIntegrityResponse{RowsChecked: int32(p.RowsChecked), WormCompared: int32(p.WormCompared), PendingUpload: int32(p.PendingUpload), NextPageToken: p.Next}
	for _, f := range p.Findings {
		out.Findings = append(out.Findings, &ledgerv1.IntegrityFinding{RowId: f.RowID, Problem: f.Problem, Restorable: f.Restorable})
	}
	if len(p.Findings) > 0 {
		s.log.WarnContext(ctx, "integrity check found edited evidence", slog.Int("rows", len(p.Findings)))
	}
	return out, nil
}

func (s *service) RestoreEvidence(ctx context.Context, req *ledgerv1.RestoreEvidenceRequest) (*ledgerv1.RestoreEvidenceResponse, error) {
	changed, row, err := s.l.RestoreEvidence(ctx, req.GetId())
	if err != nil {
		return nil, s.toStatus(ctx, "RestoreEvidence", err)
	}
	return &ledgerv1.RestoreEvidenceResponse{RowId: row.ID, EvidenceSha256: row.EvidenceSHA256, Changed: changed}, nil
}

func incidentProto(i *ledger.IncidentRecord) *ledgerv1.Incident {
	return &ledgerv1.Incident{Id: i.ID, RowId: i.RowID, Reason: i.Reason, Agent: i.Agent, OpenedAt: ts(i.OpenedAt), Open: i.Open(),
		ClosedAt: ts(i.ClosedAt), ClosedBy: i.ClosedBy, Note: i.Note, RetainUntil: ts(i.RetainUntil), HeldObjects: i.Held}
}

func (s *service) ListRevocations(ctx context.Context, req *ledgerv1.ListRevocationsRequest) (*ledgerv1.ListRevocationsResponse, error) {
	var since time.Time
	if at := req.GetSince(); at != nil {
		if !verifier.InRange(at.AsTime()) {
			return nil, status.Errorf(codes.InvalidArgument, "since %s: want a time from %s to %s, or none for every revocation",
				at.AsTime().Format(time.RFC3339), verifier.MinTime.Format(time.RFC3339), verifier.MaxTime.Format(time.RFC3339))
		}
		since = at.AsTime()
	}
	revs, next, err := s.l.ListRevocations(ctx, since, int(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, s.toStatus(ctx, "ListRevocations", err)
	}
	out := &ledgerv1.ListRevocationsResponse{NextPageToken: next}
	budget := answerRowBytes
	for _, r := range revs {
		p := &ledgerv1.GrantRevocation{GrantId: r.GrantID, Revocation: s.revocationProto(r.GrantID, &r.Revocation)}
		if budget -= itemBytes(p); budget < 0 && len(out.Revocations) > 0 {
			// Notes and statements make a revocation up to some 25 KiB:
			// the page ends early rather than pass the answer's bound.
			out.NextPageToken = ledger.RevocationsAfter(out.Revocations[len(out.Revocations)-1].GetGrantId())
			break
		}
		out.Revocations = append(out.Revocations, p)
	}
	return out, nil
}

func (s *service) ListIncidents(ctx context.Context, req *ledgerv1.ListIncidentsRequest) (*ledgerv1.ListIncidentsResponse, error) {
	incs, next, err := s.l.Incidents(ctx, int(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, s.toStatus(ctx, "ListIncidents", err)
	}
	out := &ledgerv1.ListIncidentsResponse{NextPageToken: next}
	for _, i := range incs {
		out.Incidents = append(out.Incidents, incidentProto(i))
	}
	return out, nil
}

func (s *service) GetIncident(ctx context.Context, req *ledgerv1.GetIncidentRequest) (*ledgerv1.GetIncidentResponse, error) {
	v, err := s.l.Incident(ctx, req.GetId())
	if err != nil {
		return nil, s.toStatus(ctx, "GetIncident", err)
	}
	out := &ledgerv1.GetIncidentResponse{Incident: incidentProto(&v.Incident), Row: rowProto(v.Row), SameDayCount: int32(v.SameDayN), SameDayCountTruncated: v.SameDayCut}
	out.SameDayRows = rowsWithin(v.SameDay, answerRowBytes-itemBytes(out.Row), false)
	out.SameDayRowsTruncated = len(out.SameDayRows) < v.SameDayN
	return out, nil
}

func (s *service) CloseIncident(ctx context.Context, req *ledgerv1.CloseIncidentRequest) (*ledgerv1.CloseIncidentResponse, error) {
	inc, err := s.l.CloseIncident(ctx, req.GetId(), req.GetNote(), caller(ctx))
	if err != nil {
		return nil, s.toStatus(ctx, "CloseIncident", err)
	}
	return &ledgerv1.CloseIncidentResponse{Incident: incidentProto(inc)}, nil
}

func (s *service) Sweep(ctx context.Context, req *ledgerv1.SweepRequest) (*ledgerv1.SweepResponse, error) {
	if !req.GetDryRun() && !hasRole(ctx, config.RoleAdmin) {
		return nil, status.Error(codes.PermissionDenied, "only an admin key may sweep; auditors may ask for a dry run")
	}
	var (
		res *ledger.SweepResult
		err error
	)
	switch {
	case req.GetAt() == nil:
		res, err = s.l.Sweep(ctx, req.GetDryRun())
	case !req.GetDryRun():
		return nil, status.Error(codes.InvalidArgument, "at is for a dry run only: a sweep removes what is due now")
	case req.GetAt().CheckValid() != nil:
		return nil, status.Errorf(codes.InvalidArgument, "at: %v", req.GetAt().CheckValid())
	default:
		res, err = s.l.SweepPreview(ctx, req.GetAt().AsTime())
	}
	if err != nil {
		return nil, s.toStatus(ctx, "Sweep", err)
	}
	item := func(i ledger.SweepItem) *ledgerv1.SweptRow {
		return &ledgerv1.SweptRow{RowId: i.RowID, RetentionClass: classProto[i.Class], RetainUntil: ts(i.RetainUntil), Kept: i.Kept}
	}
	out := &ledgerv1.SweepResponse{At: ts(res.At), DryRun: res.DryRun, ObjectsDeleted: int32(res.ObjectsDeleted), ObjectsPending: int32(res.ObjectsPending),
		DeletionErrors: res.DeletionErrors, Truncated: res.TruncatedReport, HoldsQueuedAgain: res.HoldsQueued}
	for _, i := range res.Swept {
		out.Swept = append(out.Swept, item(i))
	}
	for _, i := range res.Kept {
		out.Kept = append(out.Kept, item(i))
	}
	return out, nil
}

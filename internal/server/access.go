package server

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// accessRecorder logs every read of rows, evidence, snapshots, drills,
// incidents and the access log itself: a line in the log and a record in
// the access log. It runs after authentication (the key is known) and
// before row id prefixes are resolved (a prefix that matches nothing is
// recorded too).
type accessRecorder struct {
	access *ledger.AccessLog
	log    *slog.Logger
	// rows reads the row a read named by its id, for its principal.
	rows *ledger.Ledger
}

func (a accessRecorder) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	rec, ok := describeRead(req)
	if !ok {
		return handler(ctx, req)
	}
	resp, err := handler(ctx, req)
	rec = describeReply(rec, req, resp) // after the handler: prefixes resolved to full ids
	rec.RPC = info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	if p, ok := ctx.Value(principalKey{}).(principal); ok {
		rec.Key, rec.Roles = p.name, p.roles
	}
	rec.Result = "ok"
	if err != nil {
		rec.Result = strings.ToLower(codeWords(status.Code(err)))
	}
	if rec.Row != "" && rec.RowPrincipal == "" && err == nil && a.rows != nil {
		// Whose row was read: what "who looked up this customer's rows"
		// asks of reads by id.
		if r, gerr := a.rows.Get(ctx, rec.Row); gerr == nil {
			rec.RowPrincipal = r.Principal
		}
	}
	// The log line shows what the record keeps: a caller's value, however
	// long it sent it (a refused one too), is cut as the record's is.
	rec.Cut()
	attrs := []slog.Attr{slog.String("key", rec.Key), slog.String("rpc", rec.RPC),
		slog.String("principal", rec.Principal), slog.String("target", rec.Target), slog.String("grant", rec.Grant),
		slog.String("agent", rec.Agent), slog.String("row", rec.Row), slog.String("object", rec.Object),
		slog.Int("rows", rec.Rows), slog.String("result", rec.Result)}
	if rec.AboutKey != "" {
		attrs = append(attrs, slog.String("about_key", rec.AboutKey))
	}
	if rec.RowPrincipal != "" {
		attrs = append(attrs, slog.String("row_principal", rec.RowPrincipal))
	}
	a.log.LogAttrs(ctx, slog.LevelInfo, "read", attrs...)
	if rerr := a.access.Record(ctx, rec); rerr != nil {
		// A read the log cannot keep is not answered: with the row store
		// not taking writes and the memory queue full, it waited for room
		// until the caller's deadline.
		a.log.ErrorContext(ctx, "access log: read not recorded, not answered", slog.String("rpc", rec.RPC), slog.String("key", rec.Key), slog.String("error", rerr.Error()))
		return nil, status.Error(codes.Unavailable, "the read could not be recorded in the access log, so it is not answered; try again later")
	}
	return resp, err
}

// codeWords is a gRPC code as words ("NotFound" as "not found").
func codeWords(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// describeRead says whether req is a read the access log keeps, and what
// its query names.
func describeRead(req any) (ledger.Access, bool) {
	switch m := req.(type) {
	case *ledgerv1.GetRowRequest, *ledgerv1.GetEvidenceRequest, *ledgerv1.VerifyRowRequest, *ledgerv1.GetRowProofRequest,
		*ledgerv1.GetJwksSnapshotRequest, *ledgerv1.GetDrillRequest, *ledgerv1.ListDrillsRequest,
		*ledgerv1.ListIncidentsRequest, *ledgerv1.GetIncidentRequest, *ledgerv1.CheckIntegrityRequest,
		*ledgerv1.GetProviderOutboxRequest, *ledgerv1.GetOutboxRequest, *ledgerv1.SweepRequest:
		// A sweep's listing names the rows it removed or kept, a dry
		// run's those it would; the evidence outbox's dead letters name
		// rows' objects.
		return ledger.Access{}, true
	case *ledgerv1.ListRowsRequest:
		return ledger.Access{Principal: m.GetPrincipal(), Target: m.GetTarget(), Grant: m.GetGrantId(), Agent: m.GetAgent()}, true
	case *ledgerv1.GetGrantRequest:
		return ledger.Access{Grant: m.GetGrantId()}, true
	case *ledgerv1.RunDrillRequest:
		return ledger.Access{Principal: m.GetPrincipal(), Target: m.GetTarget()}, true
	case *ledgerv1.ListAccessLogRequest:
		return ledger.Access{Principal: m.GetPrincipal(), Target: m.GetTarget(), Grant: m.GetGrantId(), AboutKey: m.GetKey()}, true
	}
	return ledger.Access{}, false
}

// describeReply adds the ids the request named (resolved by then) and the
// rows the reply carried.
func describeReply(a ledger.Access, req, resp any) ledger.Access {
	switch m := req.(type) {
	case *ledgerv1.GetRowRequest:
		a.Row = m.GetId()
	case *ledgerv1.GetEvidenceRequest:
		a.Row = m.GetId()
	case *ledgerv1.VerifyRowRequest:
		a.Row = m.GetId()
	case *ledgerv1.GetRowProofRequest:
		a.Row = m.GetId()
	case *ledgerv1.RunDrillRequest:
		a.Row = m.GetRowId()
	case *ledgerv1.GetJwksSnapshotRequest:
		a.Object = m.GetId()
	case *ledgerv1.GetDrillRequest:
		a.Object = m.GetId()
	case *ledgerv1.GetIncidentRequest:
		a.Object = m.GetId()
	}
	switch r := resp.(type) {
	case *ledgerv1.GetRowResponse:
		a.Rows = one(r.GetRow() != nil)
		a.RowPrincipal = r.GetRow().GetPrincipal()
	case *ledgerv1.GetEvidenceResponse:
		a.Rows = one(r.GetRowId() != "")
	case *ledgerv1.VerifyRowResponse:
		a.Rows = one(r != nil)
	case *ledgerv1.GetRowProofResponse:
		a.Rows = one(r.GetBundle() != "")
	case *ledgerv1.ListRowsResponse:
		a.Rows = len(r.GetRows())
	case *ledgerv1.GetGrantResponse:
		a.Rows = len(r.GetRows())
	case *ledgerv1.SweepResponse:
		a.Rows = len(r.GetSwept()) + len(r.GetKept())
	case *ledgerv1.RunDrillResponse:
		a.Rows = len(r.GetReport().GetRows())
	case *ledgerv1.GetDrillResponse:
		a.Rows = len(r.GetReport().GetRows())
	case *ledgerv1.ListDrillsResponse:
		for _, d := range r.GetReports() {
			a.Rows += len(d.GetRows())
		}
	case *ledgerv1.GetIncidentResponse:
		a.Rows = one(r.GetRow() != nil) + len(r.GetSameDayRows())
	case *ledgerv1.ListIncidentsResponse:
		a.Rows = len(r.GetIncidents())
	case *ledgerv1.CheckIntegrityResponse:
		a.Rows = int(r.GetRowsChecked())
	}
	return a
}

func one(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ListAccessLog lists the read-access log (admin).
func (s *service) ListAccessLog(ctx context.Context, req *ledgerv1.ListAccessLogRequest) (*ledgerv1.ListAccessLogResponse, error) {
	q := ledger.AccessQuery{Limit: int(req.GetPageSize()), Since: fromTS(req.GetSince()), Key: req.GetKey(),
		Principal: req.GetPrincipal(), Target: req.GetTarget(), Grant: req.GetGrantId()}
	if t := req.GetPageToken(); t != "" {
		var err error
		if q.After, q.Before, err = parseAccessToken(t); err != nil {
			return nil, status.Error(codes.InvalidArgument, "page_token: not a token this server gave")
		}
	}
	built := map[uint64]*ledgerv1.AccessRecord{}
	page, err := s.access.ListWithin(ctx, q, answerRowBytes, func(a *ledger.Access) int {
		p := accessProto(a)
		built[a.Seq] = p
		return itemBytes(p)
	})
	if err != nil {
		return nil, s.toStatus(ctx, "list access log", err)
	}
	out := &ledgerv1.ListAccessLogResponse{Records: make([]*ledgerv1.AccessRecord, len(page.Records))}
	if n := page.Next; n.After != 0 {
		out.NextPageToken = strconv.FormatUint(n.After, 10) + "." + strconv.FormatInt(n.Before.UnixNano(), 10)
	}
	for i := range page.Records {
		if out.Records[i] = built[page.Records[i].Seq]; out.Records[i] == nil {
			out.Records[i] = accessProto(&page.Records[i])
		}
	}
	return out, nil
}

// accessProto is a record as answers carry it: each value the read named
// cut at ledger.MaxFieldLength, longer than any the ledger holds, saying
// so. The log cuts values so when it records them (ledger.Access.Truncated);
// records an earlier version kept whole may name values up to
// limits.maxBodyBytes long.
func accessProto(a *ledger.Access) *ledgerv1.AccessRecord {
	cut := false
	text := func(s string) string {
		s, c := cutText(s, ledger.MaxFieldLength)
		cut = cut || c
		return s
	}
	return &ledgerv1.AccessRecord{Seq: a.Seq, At: ts(a.At), Key: a.Key, Roles: a.Roles, Rpc: a.RPC,
		Principal: text(a.Principal), Target: text(a.Target), GrantId: text(a.Grant), Agent: text(a.Agent), RowId: text(a.Row), Object: text(a.Object),
		Rows: int32(min(a.Rows, 1<<31-1)), Result: a.Result, AboutKey: text(a.AboutKey), RowPrincipal: text(a.RowPrincipal), Truncated: cut || a.Truncated}
}

// parseAccessToken reads a page token: the last record's number and the
// time the listing began, "<seq>.<unix nanoseconds>".
func parseAccessToken(t string) (uint64, time.Time, error) {
	seq, at, ok := strings.Cut(t, ".")
	after, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || !ok {
		return 0, time.Time{}, fmt.Errorf("page token %q", t)
	}
	ns, err := strconv.ParseInt(at, 10, 64)
	if err != nil || ns <= 0 {
		return 0, time.Time{}, fmt.Errorf("page token %q", t)
	}
	return after, time.Unix(0, ns).UTC(), nil
}

package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
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
	rec, ids := describeReply(rec, req, resp) // after the handler: prefixes resolved to full ids
	rec.RPC = info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	if p, ok := ctx.Value(principalKey{}).(principal); ok {
		rec.Key, rec.Roles = p.name, p.roles
	}
	rec.Result = "ok"
	if err != nil {
		rec.Result = strings.ToLower(codeWords(status.Code(err)))
	}
	if rec.Row != "" && rec.RowPrincipal == "" && (err == nil || status.Code(err) == codes.FailedPrecondition) && a.rows != nil {
		// Whose row was read: what "who looked up this customer's rows"
		// asks of reads by id. A refusal for the row's state (a dispute
		// event it does not allow) names the row and its status. A row
		// whose principal cannot be read cuts the record, which is then
		// listed for every principal.
		if r, gerr := a.row(ctx, rec.Row); gerr == nil {
			rec.RowPrincipal = r.Principal
		} else {
			rec.RowPrincipalsCut = true
		}
	}
	if len(ids) > 0 && err == nil {
		a.principalsOf(ctx, &rec, ids)
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
	if len(rec.RowPrincipals) > 0 || rec.RowPrincipalsCut {
		attrs = append(attrs, slog.Any("row_principals", rec.RowPrincipals))
	}
	if rec.RowPrincipalsCut {
		attrs = append(attrs, slog.Bool("row_principals_truncated", true))
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

// rowLookupTimeout bounds a second look-up of a row's principal, made
// apart from the caller's context once the first failed.
const rowLookupTimeout = 5 * time.Second

// row reads the row with id for its principal. The read was answered
// already, so a caller that has gone since (its context cancelled, or
// its deadline past) does not keep it from its record: a look-up that
// fails is made again under a context of its own, for at most
// rowLookupTimeout.
func (a accessRecorder) row(ctx context.Context, id string) (*ledger.Row, error) {
	r, err := a.rows.Get(ctx, id)
	if err == nil {
		return r, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rowLookupTimeout)
	defer cancel()
	return a.rows.Get(ctx, id)
}

// maxPrincipalLookups bounds the rows one read's record looks up for
// their principals (rows a drill report names by id).
const maxPrincipalLookups = 256

// principals gathers the distinct principals of the rows a reply carried,
// at most ledger.MaxAccessPrincipals, saying when there were more.
type principals struct {
	list []string
	cut  bool
}

func (p *principals) add(s string) {
	if s == "" || slices.Contains(p.list, s) {
		return
	}
	if len(p.list) == ledger.MaxAccessPrincipals {
		p.cut = true
		return
	}
	p.list = append(p.list, s)
}

// principalsOf adds to rec the principals of the rows the reply named by
// id only (ids, distinct): each row is read for its principal, at most
// maxPrincipalLookups of them. A row swept since, not found, or that
// cannot be read, or one past the bound, cuts the list: the reply may
// still show its customer (a drill report's details and reply name them),
// and a cut record is listed for every principal.
func (a accessRecorder) principalsOf(ctx context.Context, rec *ledger.Access, ids []string) {
	p := principals{list: rec.RowPrincipals, cut: rec.RowPrincipalsCut}
	if a.rows == nil {
		p.cut = true
	}
	for i, id := range ids {
		if p.cut {
			break
		}
		if i == maxPrincipalLookups {
			p.cut = true
			break
		}
		r, err := a.row(ctx, id)
		if err != nil {
			p.cut = true
			break
		}
		p.add(r.Principal)
	}
	rec.RowPrincipals, rec.RowPrincipalsCut = p.list, p.cut
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
		*ledgerv1.GetProviderOutboxRequest, *ledgerv1.GetOutboxRequest, *ledgerv1.SweepRequest, *ledgerv1.ListRevocationsRequest,
		*ledgerv1.AppendDisputeEventRequest:
		// A sweep's listing names the rows it removed or kept, a dry
		// run's those it would; the evidence outbox's dead letters name
		// rows' objects. A dispute event answers with its row whole, and
		// its refusals name the row's full id and status: a read too.
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

// describeReply adds the ids the request named (resolved by then), the
// rows the reply carried and, for a read that did not name one row by its
// id, their principals: those of the rows the reply carried whole, and the
// ids of the rows it named by id only (a drill report's), whose
// principals are to be read.
func describeReply(a ledger.Access, req, resp any) (ledger.Access, []string) {
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
	case *ledgerv1.AppendDisputeEventRequest:
		a.Row = m.GetId()
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
	case *ledgerv1.AppendDisputeEventResponse:
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
	case *ledgerv1.GetProviderOutboxResponse:
		a.Rows = len(r.GetSetAside()) // entries, not rows yet
	}
	if a.Row != "" {
		return a, nil // rowPrincipal says whose row
	}
	var p principals
	var ids []string // at most one past maxPrincipalLookups: the list is cut then
	seen := map[string]bool{}
	rows := func(rs ...*ledgerv1.Row) {
		for _, row := range rs {
			p.add(row.GetPrincipal())
		}
	}
	named := func(id string) {
		if id != "" && !seen[id] && len(ids) <= maxPrincipalLookups {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	reports := func(ds ...*ledgerv1.DrillReport) {
		for _, d := range ds {
			p.add(d.GetRequest().GetPrincipal())
			for _, id := range d.GetRows() {
				named(id)
			}
			for _, l := range d.GetListed() {
				named(l.GetRowId())
			}
			for _, x := range d.GetProofs() {
				named(x.GetRowId())
			}
			for _, x := range d.GetPulls() {
				named(x.GetRowId())
			}
		}
	}
	switch r := resp.(type) {
	case *ledgerv1.ListRowsResponse:
		rows(r.GetRows()...)
	case *ledgerv1.GetGrantResponse:
		for _, s := range r.GetPrincipals() {
			p.add(s)
		}
		rows(r.GetRows()...)
	case *ledgerv1.GetIncidentResponse:
		rows(r.GetRow())
		rows(r.GetSameDayRows()...)
	case *ledgerv1.RunDrillResponse:
		reports(r.GetReport())
	case *ledgerv1.GetDrillResponse:
		reports(r.GetReport())
	case *ledgerv1.ListDrillsResponse:
		reports(r.GetReports()...)
	case *ledgerv1.CheckIntegrityResponse:
		// A finding names its row by id, and its problem may quote what
		// the row and its evidence say: the rows' customers are read.
		for _, f := range r.GetFindings() {
			named(f.GetRowId())
		}
	case *ledgerv1.GetProviderOutboxResponse:
		// A refusal set aside names its customer (and order) as the
		// Provider claimed them.
		for _, e := range r.GetSetAside() {
			p.add(e.GetClaimedPrincipal())
		}
	}
	a.RowPrincipals, a.RowPrincipalsCut = p.list, p.cut
	return a, ids
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
		tq, err := parseAccessToken(t)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, "page_token: not a token this server gave")
		}
		// The listing ends where its first page's did (Through), so its
		// pages hold no read made after it began.
		q.After, q.Before, q.Through = tq.After, tq.Before, tq.Through
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
		out.NextPageToken = strconv.FormatUint(n.After, 10) + "." + strconv.FormatInt(n.Before.UnixNano(), 10) + "." + strconv.FormatUint(n.Through, 10)
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
		Rows: int32(min(a.Rows, 1<<31-1)), Result: a.Result, AboutKey: text(a.AboutKey), RowPrincipal: text(a.RowPrincipal), RowPrincipals: a.RowPrincipals,
		RowPrincipalsTruncated: a.RowPrincipalsCut, Truncated: cut || a.Truncated}
}

// parseAccessToken reads a page token: the last record's number and the
// time the listing began, "<seq>.<unix nanoseconds>".
func parseAccessToken(t string) (ledger.AccessQuery, error) {
	var q ledger.AccessQuery
	parts := strings.Split(t, ".")
	if len(parts) != 2 && len(parts) != 3 {
		return q, fmt.Errorf("page token %q", t)
	}
	after, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil {
		return q, fmt.Errorf("page token %q", t)
	}
	ns, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || ns <= 0 {
		return q, fmt.Errorf("page token %q", t)
	}
	q.After, q.Before = after, time.Unix(0, ns).UTC()
	if len(parts) == 3 { // a token of an earlier release has no bound
		if q.Through, err = strconv.ParseUint(parts[2], 10, 64); err != nil {
			return q, fmt.Errorf("page token %q", t)
		}
	}
	return q, nil
}

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

func (c *cli) grant(pos []string) error {
	if len(pos) != 1 {
		return usagef("grant GRANT_ID")
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.GetGrant(ctx, &ledgerv1.GetGrantRequest{GrantId: pos[0]})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	w := c.table()
	printf(w, "grant\t%s\n", rep.GetGrantId())
	printf(w, "principal\t%s\n", orDash(strings.Join(rep.GetPrincipals(), ", ")))
	printf(w, "agent platform\t%s\n", orDash(strings.Join(rep.GetAgents(), ", ")))
	printf(w, "scopes granted\t%s\n", orDash(strings.Join(rep.GetScopesGranted(), " ")))
	printf(w, "scopes used\t%s\n", orDash(strings.Join(rep.GetScopesUsed(), " ")))
	if r := rep.GetRevocation(); r != nil {
		printf(w, "revoked\t%s (reported by %s at %s)%s\n", when(r.GetRevokedAt()), r.GetBy(), when(r.GetRecordedAt()), noted(r.GetNote()))
		printf(w, "at the Provider\t%s\n", providerStopped(r))
		if a := adminRevocation(r); a != "" {
			printf(w, "admin's revocation\t%s\n", a)
		}
	} else {
		printf(w, "revoked\tno\n")
	}
	if rep.GetRowCountTruncated() {
		printf(w, "rows\t%d or more (only the newest %d read)\n", rep.GetRowCount(), rep.GetRowCount())
	} else {
		printf(w, "rows\t%d\n", rep.GetRowCount())
	}
	w.Flush()
	if len(rep.GetRows()) > 0 {
		fmt.Fprintln(c.out)
		w = c.table()
		fmt.Fprintln(w, "ROW\tISSUED (UTC)\tSTATUS\tTARGET\tTOOL")
		marked := false
		for _, r := range rep.GetRows() {
			targets, m := rowTargets(r)
			marked = marked || m
			printf(w, "%s\t%s\t%s\t%s\t%s\n", short(r.GetId()), when(r.GetIssuedAt()), word(r.GetStatus(), "ROW_STATUS_"), targets, rowTools(r))
		}
		w.Flush()
		if marked {
			c.note("%s", writerOnlyNote)
		}
	}
	switch {
	case rep.GetRowCountTruncated():
		c.note("(%d shown of the newest %d rows read; the grant has more: lookup --grant %s --all lists every one)", len(rep.GetRows()), rep.GetRowCount(), rep.GetGrantId())
	case rep.GetRowsTruncated():
		c.note("(%d of %d rows shown: lookup --grant %s --all lists every one)", len(rep.GetRows()), rep.GetRowCount(), rep.GetGrantId())
	}
	switch {
	case rep.GetListsTruncated() && rep.GetRowCountTruncated():
		// The lists are drawn from the rows read and from the grant's
		// newest receipts whose signature passed, as many: older rows
		// may name more.
		c.note("(principals, agent platforms or scopes may be left out: they are drawn from the grant's newest %d rows and its newest %d receipts whose signature passed, and the grant has more rows)", rep.GetRowCount(), rep.GetRowCount())
	case rep.GetListsTruncated():
		c.note("(principals, agent platforms or scopes left out: a list passed the 128 KiB one answer carries)")
	}
	return nil
}

func (c *cli) revoke(at, note string, pos []string) error {
	if len(pos) != 1 {
		return usagef("revoke GRANT_ID [--at TIME] [--note TEXT]")
	}
	grant := pos[0]
	req := &ledgerv1.RevokeGrantRequest{GrantId: grant, Note: note}
	if at != "now" { // now: unset, the ledger's clock, as without --at
		var err error
		if req.RevokedAt, err = parseTime("at", at); err != nil {
			return err
		}
	}
	// What the ledger holds of the grant before this revocation: its rows
	// (none may mean a mistyped id) and a revocation already on record.
	// A key that may not read the ledger (a writer) does not ask: its
	// refusal would read as a key misused. The check is for the words
	// only: whatever becomes of it, the revocation is sent, under its own
	// deadline (a grant of many rows, which any writer can post, reads
	// slowly).
	held, readable, checkErr := c.grantBefore(grant)
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.RevokeGrant(ctx, req)
	if err != nil {
		return err
	}
	w := c.out
	if c.json {
		if err := c.printJSON(rep); err != nil {
			return err
		}
		w = c.errw
	} else {
		printf(w, "%s\n", revokedWords(grant, req.GetRevokedAt(), held.GetRevocation().GetRevokedAt(), rep.GetRevocation().GetRevokedAt()))
		printf(w, "the embedded Provider: %s\n", providerStopped(rep.GetRevocation()))
		if a := adminRevocation(rep.GetRevocation()); a != "" {
			printf(w, "the admin's revocation on record: %s\n", a)
		}
	}
	switch {
	case checkErr != nil:
		printf(w, "(whether the ledger holds rows of grant %s could not be checked: %v; ledgerctl grant %s shows them)\n", grant, status.Convert(checkErr).Message(), grant)
	case !readable:
		printf(w, "(this key may not read the ledger, so whether it holds rows of grant %s was not checked: ledgerctl grant %s, with a support, auditor or admin key, shows them)\n", grant, grant)
	case held.GetRowCount() == 0:
		printf(w, "the ledger holds no rows of grant %s yet: check the grant id (a revocation before any receipt under the grant is recorded all the same)\n", grant)
	}
	return nil
}

// grantChecked bounds how long revoke waits to read what the ledger holds
// of a grant before revoking it (a variable for tests).
var grantChecked = 10 * time.Second

// grantBefore reads what the ledger holds of grant, for revoke's words:
// nil and readable false for a key that may not read rows; err when the
// read failed or took over grantChecked (NotFound is no rows and no
// revocation, not an error).
func (c *cli) grantBefore(grant string) (held *ledgerv1.GetGrantResponse, readable bool, err error) {
	ctx, cancel := c.ctx()
	defer cancel()
	ctx, cancelCheck := context.WithTimeout(ctx, grantChecked)
	defer cancelCheck()
	who, err := c.c.WhoAmI(ctx, &ledgerv1.WhoAmIRequest{})
	if err != nil {
		return nil, false, err
	}
	if !slices.ContainsFunc(who.GetRoles(), func(r string) bool { return r == "support" || r == "auditor" || r == "admin" }) {
		return nil, false, nil
	}
	held, err = c.c.GetGrant(ctx, &ledgerv1.GetGrantRequest{GrantId: grant})
	if status.Code(err) == codes.NotFound {
		return nil, true, nil
	}
	return held, true, err
}

// providerStopped says whether, and from when, a revocation stops the
// embedded Provider serving the grant: an admin's does, a writer's does
// not (docs/design/038), unless it carries the Provider's own signed
// statement, which stops the Provider that signed it (docs/design/045).
func providerStopped(r *ledgerv1.Revocation) string {
	if at, admins, ok := embeddedVerdict(r); ok {
		switch {
		case at == nil:
			return "not stopped: it keeps serving the grant, if it issued it; only a revocation an admin key records, or one it signed itself, stops it"
		case admins:
			return "stopped from " + when(at) + " (an admin's revocation): it serves no request under the grant"
		default:
			return "stopped from " + when(at) + " (the revocation it signed and reported): it serves no request under the grant"
		}
	}
	admin := r.GetAdminRevokedAt()
	var clauses []string
	for _, st := range statementsByTime(r) {
		if admin != nil && !st.GetRevokedAt().AsTime().Before(admin.AsTime()) {
			break
		}
		clauses = append(clauses, "from "+when(st.GetRevokedAt())+" if it is the Provider of "+st.GetBrand()+" (the revocation it signed and reported)")
	}
	switch {
	case admin != nil && len(clauses) == 0:
		return "stopped from " + when(admin) + " (an admin's revocation): it serves no request under the grant"
	case admin != nil:
		clauses = append(clauses, "from "+when(admin)+" in any case (an admin's revocation)")
	case len(clauses) == 0:
		return "not stopped: it keeps serving the grant, if it issued it; only a revocation an admin key records, or one it signed itself, stops it"
	}
	return "stopped " + strings.Join(clauses, "; ") + ": it serves no request under the grant"
}

// embeddedVerdict is what the ledgerd that answered says of r when it
// runs the embedded Provider (ok): from when r stops it (nil: not at all)
// and whether that is an admin's revocation rather than its own
// statement.
func embeddedVerdict(r *ledgerv1.Revocation) (at *timestamppb.Timestamp, admins, ok bool) {
	if !r.GetEmbeddedProvider() {
		return nil, false, false
	}
	at, admin := r.GetEmbeddedProviderStoppedAt(), r.GetAdminRevokedAt()
	return at, at != nil && admin != nil && admin.AsTime().Equal(at.AsTime()), true
}

// statementsByTime are r's Provider statements, earliest first.
func statementsByTime(r *ledgerv1.Revocation) []*ledgerv1.ProviderStatement {
	sts := slices.Clone(r.GetProviderStatements())
	slices.SortStableFunc(sts, func(a, b *ledgerv1.ProviderStatement) int {
		return a.GetRevokedAt().AsTime().Compare(b.GetRevokedAt().AsTime())
	})
	return sts
}

// adminRevocation is the admin's own record of the revocation that stops
// the embedded Provider: from when, the key that recorded it, when, and
// its note; kept beside the revocation in force, which may be a
// writer's. Empty when no admin recorded one (or the answer leaves its
// record out).
func adminRevocation(r *ledgerv1.Revocation) string {
	at := r.GetAdminRevokedAt()
	if at == nil {
		return ""
	}
	if r.GetAdminBy() == "" {
		return "as of " + when(at) + " (recorded before the ledger kept an admin's key name and note)"
	}
	return fmt.Sprintf("as of %s (recorded by %s at %s)%s", when(at), r.GetAdminBy(), when(r.GetAdminRecordedAt()), noted(r.GetAdminNote()))
}

// noted is a revocation's note after its other words: ": NOTE", or
// nothing for none.
func noted(note string) string {
	if note == "" {
		return ""
	}
	return ": " + note
}

// revokedWords says what a revocation of grant asked for at (nil: now)
// left in force, given the time on record before it (nil: none).
func revokedWords(grant string, asked, before, inForce *timestamppb.Timestamp) string {
	stood := before != nil && !inForce.AsTime().Before(before.AsTime()) ||
		asked != nil && inForce.AsTime().Before(asked.AsTime())
	switch {
	case stood:
		return fmt.Sprintf("grant %s was already revoked as of %s; that earlier time stands (a later one never replaces it): receipts issued after it are incidents", grant, when(inForce))
	case before != nil:
		return fmt.Sprintf("grant %s revoked as of %s, replacing the later %s on record: receipts issued after that are incidents", grant, when(inForce), when(before))
	}
	return fmt.Sprintf("grant %s revoked as of %s: receipts issued after that are incidents", grant, when(inForce))
}

// fsck walks every row, page by page, and reports evidence that differs from
// its write-time hash, rows whose fields (principal, grant, targets, args
// hashes, ...) differ from what their evidence gives (read-only rows keep
// none to compare), and (with the Merkle log on) rows and dispute events
// that differ from their leaves, rows without a leaf, leaves whose row is
// gone, a tree that no longer matches the latest checkpoint, and a log
// that does not continue the one published to write-once storage (with
// each published leaf it lacks); with
// --restore it puts restorable rows back from the write-once copy.
func (c *cli) fsck(restore bool, pageSize int) error {
	if pageSize < 1 || pageSize > 1000 {
		return usagef("--page must be 1 to 1000")
	}
	if restore {
		if err := c.mayRestore(); err != nil {
			return err
		}
	}
	var (
		token                    string
		checked, compared, later int
		findings                 []*ledgerv1.IntegrityFinding
	)
	// Progress goes to a terminal only, over itself, and is erased at
	// the end: the summary on stdout says the count once.
	progress := c.terminalErr()
	shown := 0
	for {
		ctx, cancel := c.ctx()
		rep, err := c.c.CheckIntegrity(ctx, &ledgerv1.CheckIntegrityRequest{PageSize: int32(pageSize), PageToken: token})
		cancel()
		if err != nil {
			return err
		}
		checked += int(rep.GetRowsChecked())
		compared += int(rep.GetWormCompared())
		later += int(rep.GetPendingUpload())
		findings = append(findings, rep.GetFindings()...)
		token = rep.GetNextPageToken()
		if token == "" {
			break
		}
		if progress && !c.json {
			line := fmt.Sprintf("checked %s, %d differ", plural(checked, "row"), len(findings))
			printf(c.errw, "\r%-*s", shown, line)
			shown = len(line)
		}
	}
	if shown > 0 {
		printf(c.errw, "\r%*s\r", shown, "")
	}
	restored := make([]bool, len(findings))
	nrestored := 0
	for i, f := range findings {
		if !restore || !f.GetRestorable() {
			continue
		}
		ctx, cancel := c.ctx()
		_, err := c.c.RestoreEvidence(ctx, &ledgerv1.RestoreEvidenceRequest{Id: f.GetRowId()})
		cancel()
		if err != nil {
			return err
		}
		restored[i] = true
		nrestored++
	}
	if c.json {
		if err := c.printJSON(&ledgerv1.CheckIntegrityResponse{RowsChecked: int32(checked), WormCompared: int32(compared), PendingUpload: int32(later), Findings: findings}); err != nil {
			return err
		}
	} else {
		// A row is in one of the two counts unless it keeps no
		// evidence (the read-only class): nothing to compare.
		summary := fmt.Sprintf("%s checked: %d compared with their write-once copy, %d still in the outbox", plural(checked, "row"), compared, later)
		notKept := checked - compared - later
		if notKept > 0 {
			summary += fmt.Sprintf(", %d read-only, whose evidence is not kept (nothing to compare)", notKept)
		}
		fmt.Fprintln(c.out, summary)
		if kept := checked - notKept; kept > 0 {
			printf(c.out, "each row keeping evidence (%d) had its fields compared with it: principal, grant, brand, agent, scopes, issued-at, each action's target and args hash\n", kept)
		}
		switch {
		case notKept == 1:
			fmt.Fprintln(c.out, "the read-only row's fields are not compared (no evidence is kept): an edit of its principal or targets is not found; with the Merkle log on, its grant, status and class are checked against its leaf")
		case notKept > 1:
			printf(c.out, "the %d read-only rows' fields are not compared (no evidence is kept): an edit of their principal or targets is not found; with the Merkle log on, their grant, status and class are checked against their leaves\n", notKept)
		}
		for i, f := range findings {
			switch {
			case restored[i]:
				printf(c.out, "RESTORED %s: %s (put back from the write-once copy)\n", f.GetRowId(), f.GetProblem())
			case f.GetRestorable():
				printf(c.out, "DIFFERS %s: %s (restorable from the write-once copy: fsck --restore)\n", f.GetRowId(), f.GetProblem())
			default:
				printf(c.out, "DIFFERS %s: %s\n", findingOf(f), f.GetProblem())
			}
		}
		if restore {
			printf(c.out, "restored %s from the write-once copy\n", plural(nrestored, "row"))
			if left := len(findings) - nrestored; left > 0 {
				printf(c.out, "%s cannot be mended from the write-once copy (a row and the log, or a row and its evidence, disagree, or no matching copy is left): look into them as possible tampering; see \"Proving nothing was edited\" in docs/operations.md\n", plural(left, "finding"))
			}
		}
		if len(findings) == 0 {
			fmt.Fprintln(c.out, "no evidence differs from its write-time hash and no row's fields differ from its evidence; every row agrees with its leaf in the Merkle log, the tree rebuilt from the leaves matches the latest checkpoint, and the log continues the one published to write-once storage")
		}
	}
	if len(findings) > nrestored {
		return errCheckFailed
	}
	return nil
}

// restoreRole is the role RestoreEvidence needs (the server's method
// roles; docs/api.md's roles table).
const restoreRole = "admin"

// mayRestore refuses, before anything is checked, a key that may not
// restore, as the server would refuse its first RestoreEvidence: its
// roles as WhoAmI reports them. A server without WhoAmI leaves the
// refusal to RestoreEvidence.
func (c *cli) mayRestore() error {
	ctx, cancel := c.ctx()
	defer cancel()
	who, err := c.c.WhoAmI(ctx, &ledgerv1.WhoAmIRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return nil
	case err != nil:
		return err
	case !slices.Contains(who.GetRoles(), restoreRole):
		return status.Errorf(codes.PermissionDenied, "key %s (roles %s) may not call RestoreEvidence, which --restore needs", who.GetName(), strings.Join(who.GetRoles(), ", "))
	}
	return nil
}

// findingOf names what a finding is about: its row, a drill report, or
// the log as a whole.
func findingOf(f *ledgerv1.IntegrityFinding) string {
	switch {
	case f.GetRowId() != "":
		return f.GetRowId()
	case strings.HasPrefix(f.GetProblem(), "drill report"):
		return "drill"
	}
	return "log"
}

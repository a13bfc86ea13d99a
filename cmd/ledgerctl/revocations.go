package main

import (
	"context"
	"slices"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// revocations lists the revocations the ledger holds, by grant id:
//
//	revocations [--since T] [--not-stopping] [--limit N] [--all]
//
// --not-stopping keeps those that do not stop the embedded Provider
// (stopsProvider): after putting back an older provider.db, the grants to
// revoke again with an admin key.
func (c *cli) revocations(o listOpts, since string, notStopping bool, pos []string) error {
	if len(pos) != 0 {
		return usagef("revocations [--since T] [--not-stopping] [--limit N] [--all]")
	}
	if err := o.check(); err != nil {
		return err
	}
	req := &ledgerv1.ListRevocationsRequest{PageSize: int32(o.limit)}
	var err error
	if req.Since, err = parseTime("since", since); err != nil {
		return err
	}
	rep := &ledgerv1.ListRevocationsResponse{}
	if rep.NextPageToken, err = c.pagesUntil(o.all, o.page, o.limit, func(ctx context.Context, token string, want int) (int, string, error) {
		req.PageToken, req.PageSize = token, int32(min(max(want, 1), 1000))
		page, err := c.c.ListRevocations(ctx, req)
		n := 0
		for _, r := range page.GetRevocations() {
			if notStopping && stopsProvider(r.GetRevocation()) {
				continue
			}
			rep.Revocations = append(rep.Revocations, r)
			n++
		}
		return n, page.GetNextPageToken(), err
	}); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	l := listing{header: []string{"grant", "revoked (UTC)", "reported by", "the embedded Provider", "note"}}
	for _, gr := range rep.GetRevocations() {
		r := gr.GetRevocation()
		l.rows = append(l.rows, []string{gr.GetGrantId(), when(r.GetRevokedAt()), orDash(r.GetBy()), providerStops(r), orDash(r.GetNote())})
	}
	empty := "no revocations"
	if notStopping {
		empty = "no revocations that leave the embedded Provider serving"
	}
	if err := c.printList(l, empty); err != nil {
		return err
	}
	if rep.GetNextPageToken() != "" {
		c.note("(more revocations: --all lists every one, or --page %s)", rep.GetNextPageToken())
	}
	if notStopping && len(rep.GetRevocations()) > 0 {
		c.note("(the embedded Provider serves these grants if it issued them and its store holds them active: `ledgerctl revoke GRANT` with an admin key stops it)")
	}
	if notStopping && !slices.ContainsFunc(rep.GetRevocations(), func(r *ledgerv1.GrantRevocation) bool { return r.GetRevocation().GetEmbeddedProvider() }) && len(rep.GetRevocations()) > 0 {
		c.note("(this ledgerd runs no embedded Provider: every revocation without an admin's is listed, those with a Provider's statement too; ask the ledgerd that runs it to leave out those its statements stop)")
	}
	return nil
}

// providerStops is providerStopped in a table's few words.
func providerStops(r *ledgerv1.Revocation) string {
	if at, admins, ok := embeddedVerdict(r); ok {
		switch {
		case at == nil:
			return "not stopped"
		case admins:
			return "stopped from " + when(at) + " (an admin's)"
		default:
			return "stopped from " + when(at) + " (its own statement)"
		}
	}
	admin := r.GetAdminRevokedAt()
	if sts := statementsByTime(r); len(sts) > 0 && (admin == nil || sts[0].GetRevokedAt().AsTime().Before(admin.AsTime())) {
		return "stopped from " + when(sts[0].GetRevokedAt()) + " if it is the Provider of " + sts[0].GetBrand()
	}
	if admin != nil {
		return "stopped from " + when(admin) + " (an admin's)"
	}
	return "not stopped"
}

// stopsProvider reports whether r stops the embedded Provider, as the
// ledgerd that answered says when it runs it; else whether it is an
// admin's, which stops any: a statement stops only the Provider that
// signed it, which another ledgerd would have to say.
func stopsProvider(r *ledgerv1.Revocation) bool {
	if at, _, ok := embeddedVerdict(r); ok {
		return at != nil
	}
	return r.GetAdminRevokedAt() != nil
}

package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// revocationRef is the ref the ledger gives a revocation leaf: the
// grant's hash, the time in force, whether an admin recorded it and the
// hash of the brand whose Provider's statement it carried. The ledger
// logs each once.
func revocationRef(leaf map[string]string) string {
	ref := "revocation/" + strings.TrimPrefix(leaf["grant"], "sha256:") + "/" + leaf["revoked"]
	if leaf["admin"] == "yes" {
		ref += "/admin"
	}
	if b, ok := leaf["brand"]; ok {
		ref += "/stated/" + strings.TrimPrefix(b, "sha256:") + "/" + strings.TrimPrefix(leaf["statement"], "sha256:")
	}
	return ref
}

// loggedRevocation is the earliest revocation the log records of one
// grant (any), and the earliest an admin recorded (adm, when hasAdm).
type loggedRevocation struct {
	any, adm revocationAt
	hasAdm   bool
	// stated is the earliest revocation of each brand whose Provider's
	// signed statement the log records, by the brand URL's hash.
	stated map[string]statedAt
}

// statedAt is what the earliest revocation leaves of a brand's
// statements say: the grant was revoked as of at, by the statements whose
// hashes are in statements (one signed again after a restore lost the
// first is logged too).
type statedAt struct {
	revocationAt
	statements map[string]bool
}

// revocationAt is what one revocation leaf says: the grant was revoked as
// of at.
type revocationAt struct {
	index int64
	at    time.Time
}

// noteRevocation keeps a revocation leaf read from the tiles, before or
// after the kept checkpoint: a revocation is never taken back (the
// ledger only moves a grant's time earlier), so every one the log holds
// is compared with the ledger's answer (checkRevocations).
func (a *auditor) noteRevocation(index int64, leaf map[string]string) {
	at, err := time.Parse(time.RFC3339Nano, leaf["revoked"])
	if err != nil {
		a.mismatch("leaf %d (revocation of the grant whose id hashes to %s): its revoked line %q is not a time as the ledger writes one: the ledger did not write this leaf", index, leaf["grant"], leaf["revoked"])
		return
	}
	if a.revocations == nil {
		a.revocations = map[string]*loggedRevocation{}
	}
	g := strings.Clone(leaf["grant"])
	r := a.revocations[g]
	if r == nil {
		r = &loggedRevocation{any: revocationAt{index, at}}
		a.revocations[g] = r
	} else if at.Before(r.any.at) {
		r.any = revocationAt{index, at}
	}
	if leaf["admin"] == "yes" && (!r.hasAdm || at.Before(r.adm.at)) {
		r.adm, r.hasAdm = revocationAt{index, at}, true
	}
	if b, ok := leaf["brand"]; ok {
		switch prev, seen := r.stated[b]; {
		case !seen || at.Before(prev.at):
			if r.stated == nil {
				r.stated = map[string]statedAt{}
			}
			r.stated[strings.Clone(b)] = statedAt{revocationAt{index, at}, map[string]bool{strings.Clone(leaf["statement"]): true}}
		case at.Equal(prev.at):
			prev.statements[strings.Clone(leaf["statement"])] = true
		}
	}
}

// checkRevocations compares each grant's revocation the log records with
// what the ledger answers for the grant (GetGrant): none, a time in force
// later than the log's, or no admin's revocation as early as the one the
// log records (the one that stops the embedded Provider) is a mismatch:
// the row store was restored to before it, or edited. A leaf names a
// grant by its id's hash, so the audit finds the grant among the ids of
// the rows it read; a grant no readable row names is counted, not
// compared.
func (a *auditor) checkRevocations() error {
	if len(a.revocations) == 0 {
		return nil
	}
	ids := map[string]string{}
	for _, r := range a.rows {
		if g := r.GetGrantId(); g != "" {
			ids[digest(g)] = g
		}
	}
	compared, unnamed := 0, 0
	for _, h := range slices.Sorted(maps.Keys(a.revocations)) {
		lr := a.revocations[h]
		grant, ok := ids[h]
		if !ok {
			unnamed++
			continue
		}
		ctx, cancel := a.c.ctx()
		rep, err := a.c.c.GetGrant(ctx, &ledgerv1.GetGrantRequest{GrantId: grant})
		cancel()
		st, _ := status.FromError(err)
		switch {
		case err != nil && st.Code() == codes.NotFound:
		case err != nil:
			return fmt.Errorf("grant %s: %w", grant, err)
		}
		compared++
		rev := rep.GetRevocation()
		if rev == nil {
			a.mismatch("leaf %d records grant %s revoked as of %s, but the ledger answers no revocation of it: the row store was restored to before it, or edited%s",
				lr.any.index, grant, lr.any.at.Format(time.RFC3339Nano), providerServes(lr))
			continue
		}
		if got := rev.GetRevokedAt().AsTime(); got.After(lr.any.at) {
			a.mismatch("leaf %d records grant %s revoked as of %s, but the ledger answers it revoked as of %s, later: the row store was restored to before the revocation, or edited",
				lr.any.index, grant, lr.any.at.Format(time.RFC3339Nano), got.Format(time.RFC3339Nano))
		}
		for _, b := range slices.Sorted(maps.Keys(lr.stated)) {
			if p := statementMismatch(rev, b, lr.stated[b]); p != "" {
				a.mismatch("leaf %d records the Provider's signed statement of grant %s's revocation as of %s%s", lr.stated[b].index, grant, lr.stated[b].at.Format(time.RFC3339Nano), p)
			}
		}
		if !lr.hasAdm {
			continue
		}
		switch got := rev.GetAdminRevokedAt(); {
		case got == nil:
			a.mismatch("leaf %d records an admin's revocation of grant %s as of %s, but the ledger answers none: the row store was restored to before it, or edited, and the embedded Provider serves the grant",
				lr.adm.index, grant, lr.adm.at.Format(time.RFC3339Nano))
		case got.AsTime().After(lr.adm.at):
			a.mismatch("leaf %d records an admin's revocation of grant %s as of %s, but the ledger answers the admin's as of %s, later: the row store was restored to before it, or edited, and the embedded Provider serves the grant until then",
				lr.adm.index, grant, lr.adm.at.Format(time.RFC3339Nano), got.AsTime().Format(time.RFC3339Nano))
		}
	}
	printf(a.c.out, "revocations: %d revoked grants compared with the ledger's answer; %d not compared: no row the key reads names them (a leaf names a grant by its id's hash)\n", compared, unnamed)
	return nil
}

// providerServes says that the embedded Provider serves the grant again
// when the log records an admin's revocation of it.
func providerServes(lr *loggedRevocation) string {
	if lr.hasAdm {
		return fmt.Sprintf(", and the embedded Provider serves the grant again (leaf %d is an admin's)", lr.adm.index)
	}
	return ""
}

// statementMismatch says what is wrong with the ledger's answer rev
// against the leaves that record a Provider's statements of brand (the
// hash of its URL): "" when rev holds that brand's statement as of the
// leaves' time or earlier (one logged, when as of that time), or an
// admin's revocation as early, which stops the embedded Provider whatever
// became of the statement.
func statementMismatch(rev *ledgerv1.Revocation, brand string, claim statedAt) string {
	sts := rev.GetProviderStatements()
	i := slices.IndexFunc(sts, func(st *ledgerv1.ProviderStatement) bool { return digest(st.GetBrand()) == brand })
	admin := rev.GetAdminRevokedAt() != nil && !rev.GetAdminRevokedAt().AsTime().After(claim.at)
	switch {
	case i >= 0 && sts[i].GetRevokedAt().AsTime().Equal(claim.at) && !claim.statements[digest(sts[i].GetStatement())]:
		return fmt.Sprintf(" (brand %s), but the ledger answers another statement of that brand as of that time: edited", sts[i].GetBrand())
	case admin, i >= 0 && !sts[i].GetRevokedAt().AsTime().After(claim.at):
		return ""
	case i < 0:
		return fmt.Sprintf(" (the brand whose URL hashes to %s), but the ledger answers none of that brand, nor an admin's revocation as early: the row store was restored to before it, or edited", brand)
	}
	return fmt.Sprintf(" (brand %s), but the ledger answers that brand's as of %s, later, and no admin's revocation as early: the row store was restored to before it, or edited",
		sts[i].GetBrand(), sts[i].GetRevokedAt().AsTime().Format(time.RFC3339Nano))
}

package oauth

import (
	"context"
	"time"
)

// Revocations reads the revocation recorded for a grant outside the
// Provider: the ledger's, which its operators report with ledgerctl
// revoke (RevokeGrant at any replica of the row store). It is consulted
// at every use of a grant, so it must be cheap: a read of the ledger's
// row store, never a call across the network to a ledgerd.
type Revocations func(ctx context.Context, grant string) (Recorded, error)

// Recorded is the ledger's record of a grant's revocation, as the
// Provider honours it.
type Recorded struct {
	// At is from when it stops the Provider: the earlier of an admin's
	// revocation and one the Provider's own signed statement says it
	// made (docs/design/045); zero when neither is recorded.
	At time.Time
	// Admin is from when an admin's revocation is in force, zero when
	// none is recorded. Only an admin's revocation of a grant another
	// rests on (Grant.Carried) ends that one too: the Provider's own
	// statement of a grant it replaced says no more than that it did.
	Admin time.Time
}

// Ends reports whether a revocation rs records ends g, active at now, by
// now: one as of now or earlier, when it returns the time it took
// effect. A revocation as of a later time ends the grant from then (the
// ledger records a receipt issued after it as an incident). A nil rs
// records none.
func (rs Revocations) Ends(ctx context.Context, g *Grant, now time.Time) (time.Time, bool, error) {
	if rs == nil || !g.Active(now) {
		return time.Time{}, false, nil
	}
	r, err := rs(ctx, g.ID)
	if err != nil || r.At.IsZero() || now.Before(r.At) {
		return time.Time{}, false, err
	}
	return r.At, true, nil
}

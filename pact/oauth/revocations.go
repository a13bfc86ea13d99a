package oauth

import (
	"context"
	"time"
)

// Revocations reads the revocation recorded for a grant outside the
// Provider: the ledger's, which its operators report with ledgerctl
// revoke (RevokeGrant at any replica of the row store). at is the time
// the revocation takes effect; ok is false when none is recorded. It is
// consulted at every use of a grant, so it must be cheap: a read of the
// ledger's row store, never a call across the network to a ledgerd.
type Revocations func(ctx context.Context, grant string) (at time.Time, ok bool, err error)

// Ends reports whether a revocation rs records ends g, active at now, by
// now: one as of now or earlier, when it returns the time it took
// effect. A revocation as of a later time ends the grant from then (the
// ledger records a receipt issued after it as an incident). A nil rs
// records none.
func (rs Revocations) Ends(ctx context.Context, g *Grant, now time.Time) (time.Time, bool, error) {
	if rs == nil || !g.Active(now) {
		return time.Time{}, false, nil
	}
	at, ok, err := rs(ctx, g.ID)
	if err != nil || !ok || now.Before(at) {
		return time.Time{}, false, err
	}
	return at, true, nil
}

package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/pactledger/pactledger/retention"
)

// logRetention logs the retention periods in force, once at start, and
// warns of each shorter than the ledger's default for its class, read
// only aside: the
// defaults sit above the card dispute and chargeback windows the
// playbook names, and a row swept under a shorter period is gone for
// good, so a short period set by mistake ("90 days" for money moved) must
// not go unseen until rows go. The policy leaf of each start keeps the
// same periods in the Merkle log.
func logRetention(ctx context.Context, log *slog.Logger, p retention.Policy) {
	def := retention.DefaultPolicy()
	// Periods in months and days compare by the time they cover from one
	// instant; any instant orders them the same for whole months and days
	// as configured here.
	from := time.Date(2001, time.January, 31, 0, 0, 0, 0, time.UTC)
	var attrs []slog.Attr
	for _, c := range []retention.Class{retention.MoneyMoved, retention.AccountChanged, retention.ReadOnly, retention.Refused, retention.Incident} {
		attrs = append(attrs, slog.String(c.String(), p.Periods[c].String()))
		// Read-only rows keep no evidence of an action: a shorter period
		// there is privacy, not loss.
		if c != retention.ReadOnly && p.Periods[c].After(from).Before(def.Periods[c].After(from)) {
			log.WarnContext(ctx, "a retention period is shorter than the ledger's default for its class: rows of the class are swept, with their evidence, when it ends",
				slog.String("class", c.String()), slog.String("period", p.Periods[c].String()), slog.String("default", def.Periods[c].String()))
		}
	}
	log.LogAttrs(ctx, slog.LevelInfo, "retention periods in force", attrs...)
}

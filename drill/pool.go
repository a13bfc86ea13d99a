package drill

import (
	"context"
	"fmt"
	"strings"

	"github.com/pactledger/pactledger/ledger"
)

// Before it samples, the monthly drill holds the drill pool to its rule
// over poolRead rows read from a random point of the row store (all of
// them in a row store that small), or emptyPoolRead when the pool is
// empty and the first read found no eligible row: the pool lives in the
// row store, and whoever can write that can take rows out of it, which
// no sample then picks, or empty it (ledger.CheckDrillPool). Vars only
// for tests (SetPoolRead).
var (
	poolRead      = 1_000
	emptyPoolRead = 10_000
)

// maxNamed bounds the rows a pool's finding names.
const maxNamed = 5

// checkPool reads the row store against the drill pool.
func (r *Runner) checkPool(ctx context.Context) (*ledger.DrillPoolCheck, error) {
	c, err := r.l.CheckDrillPool(ctx, poolRead, r.cfg.Rand)
	if err != nil || c.Pool > 0 || c.All || c.Eligible > 0 {
		return c, err
	}
	return r.l.CheckDrillPool(ctx, emptyPoolRead, r.cfg.Rand)
}

// poolReadWords says what the rows read were: "the row store's 26 rows (all
// read)" or "1000 rows read from a random point of the row store".
func poolReadWords(c *ledger.DrillPoolCheck) string {
	if c.All {
		if c.Read == 1 {
			return "the row store's one row (read)"
		}
		return fmt.Sprintf("the row store's %d rows (all read)", c.Read)
	}
	return plural(c.Read, "row") + " read from a random point of the row store"
}

// poolWords states the drill pool's count against the rows read, for a
// report's note, when no eligible row read is missing from the pool.
func poolWords(c *ledger.DrillPoolCheck) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the drill pool holds %s", plural(c.Pool, "row"))
	switch c.Eligible {
	case 0:
		fmt.Fprintf(&b, ", and none of %s is eligible", poolReadWords(c))
	case 1:
		fmt.Fprintf(&b, ", and the one eligible row among %s is in it", poolReadWords(c))
	default:
		fmt.Fprintf(&b, ", and each of the %d eligible rows among %s is in it", c.Eligible, poolReadWords(c))
	}
	if n := len(c.Ineligible); n > 0 {
		var named []string
		failed := false
		for i, e := range c.Ineligible {
			failed = failed || e.SignatureFailed
			if i < maxNamed {
				named = append(named, "row "+e.ID+": "+e.Why)
			}
		}
		fmt.Fprintf(&b, "; it also holds %s the drill may not sample (%s%s), which ledgerctl fsck reports", plural(n, "row"), strings.Join(named, "; "), more(n))
		if failed {
			b.WriteString(" (versions before 2026-12-06 put receipts whose signature failed in the pool)")
		}
	}
	if c.Unheld > 0 {
		fmt.Fprintf(&b, "; %s of the pool hold no row", plural(c.Unheld, "position"))
	}
	return b.String()
}

// missingWords is the failure of a monthly drill that read eligible rows
// the drill pool does not hold.
func missingWords(c *ledger.DrillPoolCheck) string {
	named := c.Missing[:min(len(c.Missing), maxNamed)]
	return fmt.Sprintf("needs a person: the drill pool, which the monthly drill samples from, does not hold %s, so no monthly drill can pick %s: row %s%s. "+
		"The pool is kept in the row store, so it (or the rows) was edited there; ledgerctl fsck lists every row it leaves out. No row was drilled: a sample drawn from this pool leaves those rows out",
		missingCount(c), map[bool]string{true: "it", false: "them"}[len(c.Missing) == 1], strings.Join(named, ", row "), more(len(c.Missing)))
}

// missingCount says how many of the eligible rows read the drill pool
// does not hold: "the one eligible row among …", "3 of the 6 eligible
// rows among …".
func missingCount(c *ledger.DrillPoolCheck) string {
	if c.Eligible == 1 {
		return "the one eligible row among " + poolReadWords(c)
	}
	return fmt.Sprintf("%d of the %d eligible rows among %s", len(c.Missing), c.Eligible, poolReadWords(c))
}

// more is ", and N more" past maxNamed of n.
func more(n int) string {
	if n <= maxNamed {
		return ""
	}
	return fmt.Sprintf(", and %d more", n-maxNamed)
}

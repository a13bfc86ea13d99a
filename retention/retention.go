// Package retention decides how long the ledger keeps a row and its
// evidence: the retention classes of the receipt-ledger playbook (step 5),
// the tool-to-class table and retain-until.
package retention

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Class is a retention class.
type Class int

// Retention classes, in the order of the playbook table.
const (
	Unspecified Class = iota
	MoneyMoved
	AccountChanged
	ReadOnly
	Refused
	Incident
)

var classNames = map[Class]string{
	MoneyMoved:     "money_moved",
	AccountChanged: "account_changed",
	ReadOnly:       "read_only",
	Refused:        "refused",
	Incident:       "incident",
}

func (c Class) String() string {
	if n, ok := classNames[c]; ok {
		return n
	}
	return "unspecified"
}

// ParseClass parses a class name as written in configuration
// ("money_moved", "account_changed", "read_only", "refused", "incident").
func ParseClass(s string) (Class, error) {
	for c, n := range classNames {
		if n == s {
			return c, nil
		}
	}
	return Unspecified, fmt.Errorf("unknown retention class %q (want money_moved, account_changed, read_only, refused or incident)", s)
}

// Period is a retention period in calendar months and days.
type Period struct {
	Months int
	Days   int
}

// MaxYears bounds a period: no class is kept longer than this. A count of
// months or days far beyond it would overflow the date arithmetic and
// give a retain-until before the row was recorded.
const MaxYears = 100

// maxCount bounds a period's count of months or days as written.
const maxCount = MaxYears * 366

// tooLong says whether p is longer than MaxYears.
func (p Period) tooLong() bool {
	if p.Months > maxCount || p.Days > maxCount {
		return true
	}
	ref := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	return p.After(ref).After(ref.AddDate(MaxYears, 0, 0))
}

// After returns t plus the period.
func (p Period) After(t time.Time) time.Time { return t.AddDate(0, p.Months, p.Days) }

func (p Period) String() string {
	switch {
	case p.Months > 0 && p.Days > 0:
		return fmt.Sprintf("%d months %d days", p.Months, p.Days)
	case p.Months > 0:
		return fmt.Sprintf("%d months", p.Months)
	}
	return fmt.Sprintf("%d days", p.Days)
}

// ParsePeriod parses a period as String writes it: "18 months", "90 days"
// or "1 months 15 days".
func ParsePeriod(s string) (Period, error) {
	var p Period
	f := strings.Fields(s)
	if len(f) != 2 && len(f) != 4 {
		return Period{}, fmt.Errorf("period %q: want \"N months\", \"N days\" or \"N months M days\"", s)
	}
	for i := 0; i < len(f); i += 2 {
		n, err := strconv.Atoi(f[i])
		if err != nil || n < 0 {
			return Period{}, fmt.Errorf("period %q: %q is not a number of months or days", s, f[i])
		}
		if n > maxCount {
			return Period{}, fmt.Errorf("period %q: longer than %d years", s, MaxYears)
		}
		switch {
		case f[i+1] == "months" && i == 0:
			p.Months = n
		case f[i+1] == "days" && (i == 2 || len(f) == 2):
			p.Days = n
		default:
			return Period{}, fmt.Errorf("period %q: want \"N months\", \"N days\" or \"N months M days\"", s)
		}
	}
	return p, nil
}

// Policy is the tool-to-class and scope-to-class tables and the period of
// each class. Incident rows are held until the incident closes; the
// Incident period counts from the close.
type Policy struct {
	Periods map[Class]Period
	Tools   map[string]Class
	// Scopes maps a PACT scope id (PACT §5.2) to the class an action under
	// it takes: a row is never kept shorter than its scopes used imply.
	Scopes map[string]Class
}

// DefaultPolicy returns the playbook's periods and a tool table for the
// common support tools.
func DefaultPolicy() Policy {
	return Policy{
		Periods: map[Class]Period{
			MoneyMoved:     {Months: 18},
			AccountChanged: {Months: 12},
			ReadOnly:       {Days: 90},
			Refused:        {Months: 12},
			Incident:       {Months: 12}, // after the incident closes
		},
		Tools: map[string]Class{
			"cancel_order":    MoneyMoved,
			"issue_refund":    MoneyMoved,
			"refund_order":    MoneyMoved,
			"purchase":        MoneyMoved,
			"place_order":     MoneyMoved,
			"change_plan":     MoneyMoved,
			"downgrade_plan":  MoneyMoved,
			"upgrade_plan":    MoneyMoved,
			"change_address":  AccountChanged,
			"update_contact":  AccountChanged,
			"update_email":    AccountChanged,
			"set_preferences": AccountChanged,
			"lookup_orders":   ReadOnly,
			"get_order":       ReadOnly,
			"lookup_account":  ReadOnly,
			"track_shipment":  ReadOnly,
		},
		Scopes: map[string]Class{
			"orders:read":     ReadOnly,
			"orders:cancel":   MoneyMoved,
			"orders:refund":   MoneyMoved,
			"refunds:issue":   MoneyMoved,
			"plan:change":     MoneyMoved,
			"account:address": AccountChanged,
			"account:read":    ReadOnly,
			"account:write":   AccountChanged,
			"profile:read":    ReadOnly,
			"profile:write":   AccountChanged,
			"billing:read":    ReadOnly,
			"billing:change":  MoneyMoved,
		},
	}
}

// receiptClasses are the classes a tool or a scope maps to, in the order
// that breaks a tie between equal periods: money moved, then account
// changed, then read only.
var receiptClasses = []Class{MoneyMoved, AccountChanged, ReadOnly}

// tablesFrom is the start from which Longer ranks the classes of the
// tool and scope tables, which no row's start goes with (calendar months
// differ in length): a period of months and one of days that come within
// a day or two of each other may rank either way from another start.
var tablesFrom = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// keepsLonger reports whether class a keeps a row that starts at from
// longer than class b under p; between equal retain-untils, the class
// earlier in receiptClasses ranks higher, so that with the default
// periods a row that moved money and changed the account is money moved.
func (p Policy) keepsLonger(a, b Class, from time.Time) bool {
	ta, tb := p.Periods[a].After(from), p.Periods[b].After(from)
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return slices.Index(receiptClasses, a) < slices.Index(receiptClasses, b)
}

// Longer returns whichever of a and b p keeps longer, their periods
// ranked from a fixed start: between equal periods the earlier of money
// moved, account changed and read only. Unspecified gives way to any
// class. It ranks the classes of tables (brand files); a row's class is
// Classify's, ranked from the row's own start.
func (p Policy) Longer(a, b Class) Class {
	switch {
	case a == Unspecified:
		return b
	case b == Unspecified:
		return a
	case p.keepsLonger(b, a, tablesFrom):
		return b
	}
	return a
}

// Longest returns the receipt class (money moved, account changed or read
// only) whose period under p keeps a row that starts at from the longest:
// the class an unknown tool or scope takes, and what an open incident's
// objects are retained for.
func (p Policy) Longest(from time.Time) Class {
	c := receiptClasses[0]
	for _, rc := range receiptClasses[1:] {
		if p.keepsLonger(rc, c, from) {
			c = rc
		}
	}
	return c
}

// Classify returns the class of a receipt row that starts at start (its
// retention start) from its tools and the scopes it used: the class among
// them whose retain-until from start is the latest, read only when there
// are neither. Tools and scopes not in their tables take the longest of
// the classes that keep evidence (money moved, account changed) from
// start, never read only, and are returned in unknown (scopes prefixed
// "scope "). Scopes count
// because a receipt whose action list is empty or incomplete must not be
// kept shorter than what it was allowed to do. Read only gives way to any
// other class among them, whatever the start: a read-only row keeps no
// receipt, tokens or args (Validate has read only keep no longer than
// the others, ranked from a fixed start; from another it may come out a
// day or two longer, and the evidence is what the row is kept for).
func (p Policy) Classify(tools, scopes []string, start time.Time) (c Class, unknown []string) {
	c = ReadOnly
	longest := MoneyMoved
	if p.keepsLonger(AccountChanged, MoneyMoved, start) {
		longest = AccountChanged
	}
	take := func(tc Class) {
		if tc != ReadOnly && (c == ReadOnly || p.keepsLonger(tc, c, start)) {
			c = tc
		}
	}
	for _, t := range tools {
		tc, ok := p.Tools[t]
		if !ok {
			unknown = append(unknown, t)
			tc = longest
		}
		take(tc)
	}
	for _, s := range scopes {
		sc, ok := p.Scopes[s]
		if !ok {
			unknown = append(unknown, "scope "+s)
			sc = longest
		}
		take(sc)
	}
	return c, unknown
}

// RetainUntil returns issuedAt plus the class's period. For Incident it
// returns the zero time: the row is held until the incident closes.
func (p Policy) RetainUntil(c Class, issuedAt time.Time) time.Time {
	if c == Incident {
		return time.Time{}
	}
	return p.Periods[c].After(issuedAt).UTC()
}

// ObjectRetainUntil is the retain-until put on a write-once evidence object
// of a row: RetainUntil, or for an open incident the longest receipt period
// from issuedAt (p.Longest(issuedAt)), so that nothing an incident needs
// can expire while it is open.
func (p Policy) ObjectRetainUntil(c Class, issuedAt time.Time) time.Time {
	if c == Incident {
		return p.Periods[p.Longest(issuedAt)].After(issuedAt).UTC()
	}
	return p.RetainUntil(c, issuedAt)
}

// Validate checks that every class has a positive period, that read only
// keeps no longer than money moved and account changed, and that tools and
// scopes map to those three classes.
func (p Policy) Validate() error {
	for _, c := range []Class{MoneyMoved, AccountChanged, ReadOnly, Refused, Incident} {
		per, ok := p.Periods[c]
		if !ok || per.Months < 0 || per.Days < 0 || per.Months+per.Days == 0 {
			return fmt.Errorf("retention: class %s needs a positive period", c)
		}
		if per.tooLong() {
			return fmt.Errorf("retention: class %s: %s is longer than %d years", c, per, MaxYears)
		}
	}
	// A read-only row keeps less evidence than the others (no receipt,
	// tokens or args), so a row with a read-only action and another takes
	// the other class: read only keeping longer would drop evidence.
	for _, c := range []Class{MoneyMoved, AccountChanged} {
		if p.keepsLonger(ReadOnly, c, tablesFrom) {
			return fmt.Errorf("retention: read_only (%s) keeps longer than %s (%s); a read-only row keeps less evidence, never for longer", p.Periods[ReadOnly], c, p.Periods[c])
		}
	}
	for tool, c := range p.Tools {
		if !slices.Contains(receiptClasses, c) {
			return fmt.Errorf("retention: tool %q maps to %s; tools map to money_moved, account_changed or read_only", tool, c)
		}
	}
	for scope, c := range p.Scopes {
		if !slices.Contains(receiptClasses, c) {
			return fmt.Errorf("retention: scope %q maps to %s; scopes map to money_moved, account_changed or read_only", scope, c)
		}
	}
	return nil
}

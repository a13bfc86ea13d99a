package retention_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/retention"
)

func TestClassifyTakesTheLongestClass(t *testing.T) {
	p := retention.DefaultPolicy()
	tests := []struct {
		name    string
		tools   []string
		scopes  []string
		want    retention.Class
		unknown int
	}{
		{"none", nil, nil, retention.ReadOnly, 0},
		{"read", []string{"lookup_orders"}, []string{"orders:read"}, retention.ReadOnly, 0},
		{"read and address", []string{"lookup_orders", "change_address"}, nil, retention.AccountChanged, 0},
		{"address and cancel", []string{"change_address", "cancel_order"}, nil, retention.MoneyMoved, 0},
		{"unknown tool", []string{"lookup_orders", "teleport"}, nil, retention.MoneyMoved, 1},
		{"no actions, money scope", nil, []string{"orders:cancel"}, retention.MoneyMoved, 0},
		{"read tool, account scope", []string{"lookup_orders"}, []string{"account:address"}, retention.AccountChanged, 0},
		{"no actions, unknown scope", nil, []string{"flights:rebook"}, retention.MoneyMoved, 1},
	}
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	for _, tc := range tests {
		got, unknown := p.Classify(tc.tools, tc.scopes, at)
		if got != tc.want || len(unknown) != tc.unknown {
			t.Errorf("%s: %v %v, want %v with %d unknown", tc.name, got, unknown, tc.want, tc.unknown)
		}
	}
}

// TestClassifyTakesTheLongestConfiguredPeriod: with configured periods a
// row naming several classes takes the one whose period is the longest,
// and an unknown tool or scope the longest of all; an open incident's
// objects are retained for it too.
func TestClassifyTakesTheLongestConfiguredPeriod(t *testing.T) {
	with := func(periods map[retention.Class]retention.Period) retention.Policy {
		p := retention.DefaultPolicy()
		for c, per := range periods {
			p.Periods[c] = per
		}
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	accountLonger := with(map[retention.Class]retention.Period{retention.AccountChanged: {Months: 24}})
	equal := with(map[retention.Class]retention.Period{retention.AccountChanged: {Months: 18}})
	tests := []struct {
		name        string
		p           retention.Policy
		tools       []string
		scopes      []string
		want        retention.Class
		wantLongest retention.Class
	}{
		{"account changed 24 months: address and cancel", accountLonger, []string{"change_address", "cancel_order"}, []string{"account:address", "orders:cancel"}, retention.AccountChanged, retention.AccountChanged},
		{"account changed 24 months: unknown tool", accountLonger, []string{"wire_transfer"}, nil, retention.AccountChanged, retention.AccountChanged},
		{"account changed 24 months: unknown scope", accountLonger, []string{"cancel_order"}, []string{"flights:rebook"}, retention.AccountChanged, retention.AccountChanged},
		{"account changed 24 months: cancel alone", accountLonger, []string{"cancel_order"}, nil, retention.MoneyMoved, retention.AccountChanged},
		{"equal periods: money moved first", equal, []string{"change_address", "cancel_order"}, nil, retention.MoneyMoved, retention.MoneyMoved},
		{"equal periods: address alone", equal, []string{"change_address"}, nil, retention.AccountChanged, retention.MoneyMoved},
	}
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := tc.p.Classify(tc.tools, tc.scopes, at)
			if got != tc.want {
				t.Errorf("class %v, want %v", got, tc.want)
			}
			if got := tc.p.Longest(at); got != tc.wantLongest {
				t.Errorf("longest %v, want %v", got, tc.wantLongest)
			}
			want := tc.p.RetainUntil(tc.wantLongest, at)
			if got := tc.p.ObjectRetainUntil(retention.Incident, at); !got.Equal(want) {
				t.Errorf("an open incident's objects retained until %v, want %v", got, want)
			}
		})
	}
}

// TestClassifyRanksPeriodsFromTheRowsStart: with periods in months beside
// periods in days, which class keeps a row longer depends on when the row
// starts (months differ in length). A row takes the class whose
// retain-until from its own start is the latest, so it is never kept
// shorter than its actions and scopes imply; read only still gives way to
// a class that keeps the evidence.
func TestClassifyRanksPeriodsFromTheRowsStart(t *testing.T) {
	days := retention.DefaultPolicy()
	days.Periods[retention.AccountChanged] = retention.Period{Days: 548}
	quarter := retention.DefaultPolicy()
	quarter.Periods[retention.AccountChanged] = retention.Period{Months: 3}
	for _, p := range []retention.Policy{days, quarter} {
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		p         retention.Policy
		tools     []string
		start     time.Time
		want      retention.Class
		wantUntil time.Time
	}{
		{"548 days beside 18 months, from July 2027", days, []string{"issue_refund", "change_address"},
			time.Date(2027, 7, 1, 0, 0, 0, 0, time.UTC), retention.MoneyMoved, time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"548 days beside 18 months, from January 2027", days, []string{"issue_refund", "change_address"},
			time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), retention.AccountChanged, time.Date(2028, 7, 2, 0, 0, 0, 0, time.UTC)},
		{"an unknown tool, from July 2027", days, []string{"teleport"},
			time.Date(2027, 7, 1, 0, 0, 0, 0, time.UTC), retention.MoneyMoved, time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"read only 90 days beside 3 months, from February", quarter, []string{"lookup_orders", "change_address"},
			time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC), retention.AccountChanged, time.Date(2027, 5, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := tc.p.Classify(tc.tools, nil, tc.start)
			until := tc.p.RetainUntil(got, tc.start)
			if got != tc.want || !until.Equal(tc.wantUntil) {
				t.Errorf("class %v, kept until %v; want %v, until %v", got, until, tc.want, tc.wantUntil)
			}
		})
	}
}

// Longer ranks two classes by their configured periods, as Classify does.
func TestLongerFollowsThePeriods(t *testing.T) {
	p := retention.DefaultPolicy()
	if got := p.Longer(retention.AccountChanged, retention.MoneyMoved); got != retention.MoneyMoved {
		t.Errorf("defaults: %v", got)
	}
	if got := p.Longer(retention.Unspecified, retention.ReadOnly); got != retention.ReadOnly {
		t.Errorf("unspecified: %v", got)
	}
	p.Periods[retention.AccountChanged] = retention.Period{Months: 36}
	if got := p.Longer(retention.MoneyMoved, retention.AccountChanged); got != retention.AccountChanged {
		t.Errorf("account changed 36 months: %v", got)
	}
	p.Periods[retention.AccountChanged] = retention.Period{Months: 18}
	if got := p.Longer(retention.AccountChanged, retention.MoneyMoved); got != retention.MoneyMoved {
		t.Errorf("equal periods: %v", got)
	}
}

// TestValidateRefusesReadOnlyKeepingLonger: a read-only row keeps no
// receipt, tokens or args, so read only may not keep longer than a class
// that keeps them (a row with actions of both takes the other class).
func TestValidateRefusesReadOnlyKeepingLonger(t *testing.T) {
	for _, tc := range []struct {
		name    string
		periods map[retention.Class]retention.Period
		ok      bool
	}{
		{"defaults", nil, true},
		{"read only as long as account changed", map[retention.Class]retention.Period{retention.ReadOnly: {Months: 12}}, true},
		{"read only longer than account changed", map[retention.Class]retention.Period{retention.ReadOnly: {Days: 400}}, false},
		{"read only longer than money moved", map[retention.Class]retention.Period{retention.ReadOnly: {Months: 19}, retention.AccountChanged: {Months: 24}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := retention.DefaultPolicy()
			for c, per := range tc.periods {
				p.Periods[c] = per
			}
			if err := p.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestRetainUntil(t *testing.T) {
	p := retention.DefaultPolicy()
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	tests := []struct {
		class retention.Class
		want  time.Time
	}{
		{retention.MoneyMoved, time.Date(2028, 4, 7, 13, 12, 44, 0, time.UTC)},
		{retention.AccountChanged, time.Date(2027, 10, 7, 13, 12, 44, 0, time.UTC)},
		{retention.ReadOnly, time.Date(2027, 1, 5, 13, 12, 44, 0, time.UTC)},
		{retention.Refused, time.Date(2027, 10, 7, 13, 12, 44, 0, time.UTC)},
		{retention.Incident, time.Time{}},
	}
	for _, tc := range tests {
		if got := p.RetainUntil(tc.class, at); !got.Equal(tc.want) {
			t.Errorf("%v: %v, want %v", tc.class, got, tc.want)
		}
	}
	if got := p.ObjectRetainUntil(retention.Incident, at); !got.Equal(time.Date(2028, 4, 7, 13, 12, 44, 0, time.UTC)) {
		t.Errorf("incident objects retain until %v", got)
	}
}

func TestParseClassRoundTrips(t *testing.T) {
	for _, c := range []retention.Class{retention.MoneyMoved, retention.AccountChanged, retention.ReadOnly, retention.Refused, retention.Incident} {
		got, err := retention.ParseClass(c.String())
		if err != nil || got != c {
			t.Errorf("ParseClass(%q) = %v, %v", c.String(), got, err)
		}
	}
	if _, err := retention.ParseClass("forever"); err == nil {
		t.Error("ParseClass(forever) succeeded")
	}
}

func TestParsePeriodRoundTrips(t *testing.T) {
	for _, p := range []retention.Period{{Months: 18}, {Days: 90}, {Months: 1, Days: 15}, {}} {
		got, err := retention.ParsePeriod(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePeriod(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	for _, s := range []string{"", "18", "18 weeks", "90 days 1 months", "-1 days", "x months", "1 months 2 months"} {
		if got, err := retention.ParsePeriod(s); err == nil {
			t.Errorf("ParsePeriod(%q) = %v, want an error", s, got)
		}
	}
}

// A tool or scope not in the tables takes the longest class that keeps
// evidence, never read only: with read only in months and the others in
// days, read only comes out longest from some starts, and a row classed
// read only keeps no receipt, tokens or args.
func TestAnUnknownToolNeverTakesReadOnly(t *testing.T) {
	p := retention.DefaultPolicy()
	p.Periods[retention.MoneyMoved] = retention.Period{Days: 365}
	p.Periods[retention.AccountChanged] = retention.Period{Days: 365}
	p.Periods[retention.ReadOnly] = retention.Period{Months: 12}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2024, 1, 15, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ tools, scopes []string }{{[]string{"brand_new_refund_tool"}, nil}, {nil, []string{"refunds:issue-v2"}}} {
		if c, unknown := p.Classify(tc.tools, tc.scopes, start); c != retention.MoneyMoved || len(unknown) != 1 {
			t.Errorf("tools %v, scopes %v from %s: class %s, unknown %v; want money_moved, one unknown", tc.tools, tc.scopes, start.Format("2006-01-02"), c, unknown)
		}
	}
}

// A period long enough to overflow the date arithmetic would give a
// retain-until before the row was recorded, and the next sweep would
// remove the class's rows at once: beyond a hundred years a period is
// refused, as written and in a policy.
func TestPeriodsBeyondAHundredYearsAreRefused(t *testing.T) {
	for _, s := range []string{"9223372036854775807 months", "1000000000000000000 days", "300000000000 months", "36601 days"} {
		if p, err := retention.ParsePeriod(s); err == nil {
			t.Errorf("ParsePeriod(%q) = %v, want refused", s, p)
		}
	}
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for _, per := range []retention.Period{{Months: 1201}, {Days: 36600}, {Months: 1200, Days: 1}, {Months: 1 << 40}} {
		p := retention.DefaultPolicy()
		p.Periods[retention.Refused] = per
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "longer than 100 years") {
			t.Errorf("a refused class kept %s: Validate %v, want longer than 100 years (retain-until %s)", per, err, p.RetainUntil(retention.Refused, now))
		}
	}
	p := retention.DefaultPolicy()
	p.Periods[retention.Refused] = retention.Period{Months: 1200}
	if err := p.Validate(); err != nil {
		t.Errorf("a hundred years: %v", err)
	}
}

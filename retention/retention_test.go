package retention_test

import (
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
	for _, tc := range tests {
		got, unknown := p.Classify(tc.tools, tc.scopes)
		if got != tc.want || len(unknown) != tc.unknown {
			t.Errorf("%s: %v %v, want %v with %d unknown", tc.name, got, unknown, tc.want, tc.unknown)
		}
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

package server

import (
	"testing"
	"time"

	"github.com/pactledger/pactledger/drill"
)

func TestMissedMonthly(t *testing.T) {
	sched := drill.Schedule{Day: 1, Hour: 3, Minute: 0, Sample: 5}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name      string
		last      string // "" for no monthly report yet
		now       string
		wantPrev  string
		wantCatch bool
	}{
		{"never ran: nothing missed", "", "2026-10-07T12:00:00Z", "2026-10-01T03:00:00Z", false},
		{"ran at the last scheduled time", "2026-10-01T03:00:00Z", "2026-10-20T12:00:00Z", "2026-10-01T03:00:00Z", false},
		{"ran by hand after it", "2026-10-05T09:00:00Z", "2026-10-20T12:00:00Z", "2026-10-01T03:00:00Z", false},
		{"down over the 1st", "2026-09-01T03:00:00Z", "2026-10-02T08:00:00Z", "2026-10-01T03:00:00Z", true},
		{"down for months", "2026-06-01T03:00:00Z", "2026-10-20T12:00:00Z", "2026-10-01T03:00:00Z", true},
		{"before this month's time", "2026-09-01T03:00:00Z", "2026-10-01T02:59:00Z", "2026-09-01T03:00:00Z", false},
		{"at this month's time", "2026-09-01T03:00:00Z", "2026-10-01T03:00:00Z", "2026-10-01T03:00:00Z", true},
		{"across a year", "2026-11-01T03:00:00Z", "2027-01-15T00:00:00Z", "2027-01-01T03:00:00Z", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := at(tc.now)
			if got := lastScheduled(sched, now); !got.Equal(at(tc.wantPrev)) {
				t.Errorf("lastScheduled = %s, want %s", got, tc.wantPrev)
			}
			var last summary
			if tc.last != "" {
				last.startedAt = at(tc.last)
			}
			if got := missedMonthly(sched, last, tc.last != "", now); got != tc.wantCatch {
				t.Errorf("missedMonthly = %v, want %v", got, tc.wantCatch)
			}
		})
	}
}

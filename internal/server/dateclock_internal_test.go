package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// What one reading of a clock.references server gives, by its answer.
func TestDateClockReadsTheServersOwnDate(t *testing.T) {
	at := time.Date(2026, 12, 7, 9, 30, 15, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		status int
		date   string // "-" for none
		want   error  // nil: at plus half a second
	}{
		{"a 200 with a Date", 200, at.Format(http.TimeFormat), nil},
		{"a 405 of the server itself", 405, at.Format(http.TimeFormat), nil},
		{"a redirect, not followed", 302, at.Format(http.TimeFormat), nil},
		{"a 200 without a Date", 200, "-", ledger.ErrNoClock},
		{"a proxy's 503 with its own Date", 503, at.Format(http.TimeFormat), ledger.ErrUnavailable},
		{"a 404 without a Date", 404, "-", ledger.ErrUnavailable},
		{"a Date that is no date", 200, "yesterday", ledger.ErrUnavailable},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodHead {
				t.Errorf("%s: %s, want HEAD", tc.name, r.Method)
			}
			if tc.date == "-" {
				w.Header()["Date"] = nil
			} else {
				w.Header().Set("Date", tc.date)
			}
			if tc.status == 302 {
				w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
			}
			w.WriteHeader(tc.status)
		}))
		got, err := dateClock("clock.references[0]", srv.URL).Now(context.Background())
		srv.Close()
		switch {
		case tc.want == nil && (err != nil || !got.Equal(at.Add(500*time.Millisecond))):
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, at.Add(500*time.Millisecond))
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := dateClock("clock.references[0]", "http://127.0.0.1:1/?token=t0k3n").Now(context.Background()); !errors.Is(err, ledger.ErrUnavailable) || strings.Contains(err.Error(), "t0k3n") {
		t.Errorf("no answer: %v, want ErrUnavailable, without the URL's query", err)
	}
}

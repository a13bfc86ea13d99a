package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
)

// dateServer answers every request with its Date shifted by *shift from
// this machine's clock, or, while *noDate, with none.
func dateServer(t *testing.T, shift *atomic.Int64, noDate *atomic.Bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if noDate.Load() {
			w.Header()["Date"] = nil // net/http adds one otherwise
		} else {
			w.Header().Set("Date", time.Now().Add(time.Duration(shift.Load())).UTC().Format(http.TimeFormat))
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// With the embedded default (a bbolt file and an evidence directory), a
// server clock.references names is a clock the host's is checked against:
// while the host's is ten minutes behind it, receipts are refused
// UNAVAILABLE and /readyz says so; once they agree the retry is taken. A
// reference that stops giving a time after it gave one keeps its last
// reading.
func TestAClockReferenceChecksTheEmbeddedDefault(t *testing.T) {
	var shift atomic.Int64
	var noDate atomic.Bool
	shift.Store(int64(10 * time.Minute))
	ref := dateServer(t, &shift, &noDate)
	off := false
	e := newEnv(t, jose.ES256, func(c *config.Config) {
		c.Clock.References = []string{ref}
		c.Provider.Enabled = &off
	})
	type clockBody struct {
		Clock, Status, ReadAt string
	}
	var ready struct{ Clocks []clockBody }
	within(t, "the time reference read", func() bool {
		e.call(t, "GET", "/readyz", "", nil, &ready)
		return len(ready.Clocks) == 1 && ready.Clocks[0].ReadAt != ""
	})
	// Named by its place in the configuration: /readyz and /metrics,
	// which answer without a key, do not show the URL.
	if ready.Clocks[0].Clock != "clock.references[0]" || !strings.Contains(ready.Clocks[0].Status, "behind") {
		t.Fatalf("/readyz clocks %+v, want clock.references[0], the host's clock behind it", ready.Clocks)
	}
	if m := scrape(t, e); m[`pactledger_clock_offset_seconds{clock="clock.references[0]"}`] > -590 {
		t.Errorf("pactledger_clock_offset_seconds of clock.references[0]: %v, want about -600", m[`pactledger_clock_offset_seconds{clock="clock.references[0]"}`])
	}
	var st struct{ Message string }
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "C-1"})), &st); code != http.StatusServiceUnavailable ||
		!strings.Contains(st.Message, "behind the clock of clock.references[0]") {
		t.Fatalf("a receipt at a clock ten minutes behind the reference: %d %q, want 503 saying so", code, st.Message)
	}
	noDate.Store(true) // a reading now gives no time: the last stands
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "C-2"})), nil); code != http.StatusServiceUnavailable {
		t.Fatalf("a receipt while the reference gives no time after it gave one ten minutes ahead: %d, want 503", code)
	}
	noDate.Store(false)
	shift.Store(0)
	within(t, "the retry taken once the clocks agree", func() bool {
		return e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "C-1"})), nil) == http.StatusOK
	})
}

// clock.references takes https URLs, and plain http to loopback only with
// allowInsecureLoopbackJwks; at most four.
func TestClockReferencesAreChecked(t *testing.T) {
	for _, tc := range []struct {
		refs     []string
		loopback bool
		want     string
	}{
		{[]string{"http://time.example.com/"}, true, "plain http"},
		{[]string{"http://127.0.0.1:1/"}, false, "plain http"},
		{[]string{"ftp://time.example.com/"}, false, "scheme"},
		{[]string{"time.example.com"}, false, "not an absolute URL"},
		{[]string{"https://a.example/", "https://b.example/", "https://c.example/", "https://d.example/", "https://e.example/"}, false, "at most 4"},
		{[]string{"https://user:secret@time.example.com/"}, false, "user name or password"},
		{[]string{"https://time.example.com/", "http://127.0.0.1:1/"}, true, ""},
	} {
		sc := pacttest.NewScenario(jose.ES256, jose.ES256)
		cfg := testConfig(sc, t.TempDir())
		sc.Close()
		cfg.Clock.References, cfg.AllowInsecureLoopbackJWKS = tc.refs, tc.loopback
		err := cfg.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("clock.references %q (loopback %v): %v, want %q", tc.refs, tc.loopback, err, tc.want)
		}
	}
}

package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// dateClockTimeout bounds one reading of a clock.references server.
const dateClockTimeout = 10 * time.Second

// dateClock is the clock of the server at url (clock.references), read
// from the Date header of its answer to a HEAD request (RFC 9110 §6.6.1),
// as the S3 evidence store's is: a Date is in whole seconds, cut, so the
// server's time was in the second after it, and the middle of that second
// is taken. An answer of the server itself (below 500) with a Date gives
// its time. A 2xx without one says the server keeps no clock
// (ledger.ErrNoClock); any other answer, or none, says nothing of its
// clock: a proxy in front of a server that is down often answers without
// one (ledger.ErrUnavailable). Redirects are not followed: the time is
// the configured server's.
//
// The clock is named by its place in the configuration (name, such as
// "clock.references[0]"): the name is on /readyz and in a metric's label,
// which callers without a key read, and a URL may name the network's
// hosts. Errors, which those callers are not shown, name the URL without
// its query.
func dateClock(name, url string) ledger.ReferenceClock {
	client := &http.Client{Timeout: dateClockTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	what := name + " (" + withoutQuery(url) + ")"
	return ledger.ReferenceClock{Name: name, Now: func(ctx context.Context) (time.Time, error) {
		name := what
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: %s: not a URL to ask", ledger.ErrUnavailable, name)
		}
		res, err := client.Do(req)
		if err != nil {
			if ue := (*neturl.Error)(nil); errors.As(err, &ue) {
				err = ue.Err // its text quotes the whole URL
			}
			return time.Time{}, fmt.Errorf("%w: the time of %s: %w", ledger.ErrUnavailable, name, err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<10))
		res.Body.Close()
		date := res.Header.Get("Date")
		t, perr := http.ParseTime(date)
		switch {
		case date != "" && perr == nil && res.StatusCode < 500:
			return t.Add(500 * time.Millisecond), nil
		case date == "" && res.StatusCode >= 200 && res.StatusCode < 300:
			return time.Time{}, fmt.Errorf("%w: %s answers without a Date header", ledger.ErrNoClock, name)
		case date != "" && perr != nil:
			return time.Time{}, fmt.Errorf("%w: the time of %s: its Date header %q is not an HTTP date", ledger.ErrUnavailable, name, date)
		}
		return time.Time{}, fmt.Errorf("%w: the time of %s: it answered %s without a time of its own", ledger.ErrUnavailable, name, res.Status)
	}}
}

// withoutQuery is uri without its query or fragment, which may carry a
// token.
func withoutQuery(uri string) string {
	u, err := neturl.Parse(uri)
	if err != nil {
		return "(a URL that does not parse)"
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}

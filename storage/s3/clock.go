package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// ServerTime returns the S3 service's time: the Date header of its answer
// to one HEAD of the bucket, plus half a second (a Date is in whole
// seconds). Any answer carries one, an error too (such as
// RequestTimeTooSkewed, AWS's answer to a request signed by a clock more
// than 15 minutes off), so a clock far ahead is still measured. It
// returns an error wrapping ledger.ErrUnavailable when no answer with a
// Date came within the check timeout. The retention sweep checks the
// ledger's clock against it (ledger.ReferenceClock); Object Lock already
// keeps retention by this clock.
func (s *Store) ServerTime(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CheckTimeout)
	defer cancel()
	d := &serverDate{}
	began := time.Now()
	_, err := s.c.BucketExists(context.WithValue(ctx, serverDateKey{}, d), s.bucket)
	s.observe(began, err)
	t, ok, answered := d.get()
	switch {
	case ok:
		// A Date is in whole seconds, cut: the service's time was in the
		// second after it, the middle of which is the best guess.
		return t.Add(500 * time.Millisecond), nil
	case answered:
		// The service answers the HEAD without a Date (RFC 9110 §6.6.1
		// lets a server without a clock leave it out): it gives no time
		// to check.
		return time.Time{}, fmt.Errorf("%w: s3 bucket %s at %s answers without a Date header", ledger.ErrNoClock, s.bucket, s.cfg.Endpoint)
	case err == nil:
		err = errors.New("no answer with a Date, and none that took the request")
	}
	// No answer, or only failures without a Date: a proxy or load
	// balancer in front of a service that is down (its own 502 or 503
	// often has no Date) says nothing of the service's clock.
	return time.Time{}, fmt.Errorf("%w: the time of s3 bucket %s at %s: %w", ledger.ErrUnavailable, s.bucket, s.cfg.Endpoint, err)
}

// serverDateKey is the context key of the *serverDate a request's answer
// fills in (datedTransport).
type serverDateKey struct{}

// serverDate is the Date header of the last answer to a request made with
// it in its context.
type serverDate struct {
	mu sync.Mutex
	t  time.Time
	ok bool // t is set
	// answered: the service took a request (a 2xx answer), with a Date
	// or without one.
	answered bool
}

// set records an answer of status code, and its Date when it has one
// (ok). Only an answer that took the request (2xx) without a Date says
// the service has no clock.
func (d *serverDate) set(t time.Time, ok bool, code int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if code >= 200 && code < 300 {
		d.answered = true
	}
	if ok {
		d.t, d.ok = t, true
	}
}

func (d *serverDate) get() (t time.Time, ok, answered bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.t, d.ok, d.answered
}

// datedTransport hands the Date header of each answer to the serverDate in
// its request's context, when there is one.
type datedTransport struct{ next http.RoundTripper }

func (t datedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if resp != nil {
		if d, ok := req.Context().Value(serverDateKey{}).(*serverDate); ok {
			at, perr := http.ParseTime(resp.Header.Get("Date"))
			d.set(at.UTC(), perr == nil, resp.StatusCode)
		}
	}
	return resp, err
}

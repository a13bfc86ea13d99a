package client

import (
	"context"
	"testing"
	"time"
)

// A Brand's interval and expires_in past what a time.Duration holds are
// cut, not wrapped to negative waits: the client waits between polls,
// the code does not expire at once, the token is not expired on arrival.
func TestHugeIntervalsAndLifetimesAreCut(t *testing.T) {
	a := newAuthServer(t)
	a.token = "tok"
	a.pending.Store(2)
	var s sleeper
	c := newClient(&s, a.srv.URL)
	const huge = 9_300_000_000 // seconds: past int64 nanoseconds
	ts, err := c.WaitForToken(context.Background(), a.flow(), "u", &DeviceStart{DeviceCode: "d", Interval: huge, ExpiresIn: huge}, nil)
	if err != nil {
		t.Fatalf("after two pending polls: %v", err)
	}
	if len(s.waits) != 3 || s.waits[0] != maxPollInterval || s.waits[2] != maxPollInterval {
		t.Errorf("waits %v, want 3 of %s", s.waits, maxPollInterval)
	}
	now := time.Now()
	got, err := tokenReply{AccessToken: "tok", ExpiresIn: huge}.set(now)
	if err != nil || !got.Expires.Equal(now.Add(maxTokenLife)) {
		t.Errorf("expires_in %d: expires %v, want %v", huge, got.Expires, now.Add(maxTokenLife))
	}
	if ts.Expires.Before(time.Now()) {
		t.Errorf("token expires %v: in the past", ts.Expires)
	}
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sleeper records the waits asked of Client.Sleep and waits for none.
type sleeper struct{ waits []time.Duration }

func (s *sleeper) sleep(_ context.Context, d time.Duration) error {
	s.waits = append(s.waits, d)
	return nil
}

// newClient is a client whose JWTs are for the Provider at providers.
func newClient(s *sleeper, providers ...string) *Client {
	return &Client{Issuer: "https://pa.example", Token: func(string) (string, error) { return "pa-jwt", nil }, Sleep: s.sleep, Providers: providers}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, header string
		want         time.Duration
	}{
		{"seconds", "7", 7 * time.Second},
		{"zero", "0", 0},
		{"date", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"date passed", now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"missing", "", time.Second},
		{"unreadable", "soon", time.Second},
		{"negative", "-3", time.Second},
		{"huge", "9300000000000", 24 * time.Hour}, // would wrap past int64 nanoseconds
	} {
		if got := retryAfter(tc.header, now); got != tc.want {
			t.Errorf("%s: retryAfter(%q) = %s, want %s", tc.name, tc.header, got, tc.want)
		}
	}
}

// On 429 the client waits what Retry-After asks, says so, and sends the
// same message again (same messageId, a fresh personal-agent JWT), up to
// RateLimitRetries times; a wait longer than MaxRateLimitWait is not
// waited for (PACT §6).
func TestSendWaitsOutRateLimits(t *testing.T) {
	var calls, busyFor atomic.Int32
	retryAfter := "2"
	var mu sync.Mutex
	var ids []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Message struct{ MessageID string } `json:"message"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		ids = append(ids, body.Message.MessageID)
		mu.Unlock()
		if calls.Add(1) <= busyFor.Load() {
			w.Header().Set("Retry-After", retryAfter)
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = w.Write([]byte(`{"message":{"messageId":"r","contextId":"c1","role":"ROLE_AGENT","parts":[{"text":"hello"}]}}`))
	}))
	defer srv.Close()

	var s sleeper
	c := newClient(&s, srv.URL)
	var told []int
	c.OnRateLimited = func(_ time.Duration, retry int) { told = append(told, retry) }
	busyFor.Store(2)
	r, err := c.Send(context.Background(), srv.URL, "u", "", "", "hi")
	if err != nil || r.Message == nil || r.ContextID() != "c1" {
		t.Fatalf("after two 429s: %v %+v", err, r)
	}
	if want := []time.Duration{2 * time.Second, 2 * time.Second}; !slices.Equal(s.waits, want) || !slices.Equal(told, []int{1, 2}) {
		t.Errorf("waits %v, told %v; want %v, [1 2]", s.waits, told, want)
	}
	mu.Lock()
	sent := slices.Clone(ids)
	mu.Unlock()
	if len(sent) != 3 || sent[0] == "" || sent[1] != sent[0] || sent[2] != sent[0] {
		t.Errorf("messageIds sent: %q, want one id three times", sent)
	}

	calls.Store(0)
	busyFor.Store(100)
	s.waits = nil
	_, err = c.Send(context.Background(), srv.URL, "u", "", "", "hi")
	var rl *RateLimitedError
	if !errors.As(err, &rl) || rl.Tries != RateLimitRetries+1 || calls.Load() != RateLimitRetries+1 || len(s.waits) != RateLimitRetries {
		t.Fatalf("always 429: %v after %d calls and waits %v", err, calls.Load(), s.waits)
	}

	calls.Store(0)
	s.waits = nil
	retryAfter = "3600"
	_, err = c.Send(context.Background(), srv.URL, "u", "", "", "hi")
	if !errors.As(err, &rl) || rl.Tries != 1 || rl.RetryAfter != time.Hour || len(s.waits) != 0 {
		t.Fatalf("a wait of an hour: %v, waits %v", err, s.waits)
	}
}

// The token endpoint's expired_token is ErrExpired; slow_down makes the
// polls 5 s further apart (RFC 8628 §3.5).
func TestWaitForTokenExpired(t *testing.T) {
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := map[int32]string{1: "authorization_pending", 2: "slow_down"}[polls.Add(1)]
		if code == "" {
			code = "expired_token"
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"` + code + `"}`))
	}))
	defer srv.Close()
	var s sleeper
	c := newClient(&s, srv.URL)
	_, err := c.WaitForToken(context.Background(), &DeviceFlow{TokenURL: srv.URL}, "u", &DeviceStart{DeviceCode: "d", Interval: 5, ExpiresIn: 600}, nil)
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("expired_token: %v", err)
	}
	if want := []time.Duration{5 * time.Second, 5 * time.Second, 10 * time.Second}; !slices.Equal(s.waits, want) {
		t.Errorf("waits %v, want %v", s.waits, want)
	}
}

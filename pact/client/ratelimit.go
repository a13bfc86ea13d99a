package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RateLimitRetries is how many times a request the Brand answered 429 is
// sent again, each time after the wait its Retry-After asked for.
const RateLimitRetries = 3

// MaxRateLimitWait is the longest Retry-After the client waits for; a
// Brand that asks for longer gets a RateLimitedError at once.
const MaxRateLimitWait = time.Minute

// RateLimitedError is a request the Brand still answered 429 after
// RateLimitRetries retries, or asked to wait more than MaxRateLimitWait
// for (PACT §6).
type RateLimitedError struct {
	// Tries is how many times the request was sent.
	Tries int
	// RetryAfter is the wait the Brand's last answer asked for.
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("HTTP 429: the Brand limits how often this agent may send and is still refusing after %d tries; try again later (it asks to wait %s)",
		e.Tries, e.RetryAfter)
}

// do sends the request build returns (a new one each try, with a fresh
// personal-agent JWT) with hc, and while the Brand answers 429 waits what its
// Retry-After asks and sends it again, up to RateLimitRetries times (PACT
// §6: a personal agent SHOULD wait Retry-After before retrying). A 429
// spends nothing at the Provider, and a message is sent again with its
// messageId, so a retry never acts twice.
func (c *Client) do(ctx context.Context, hc *http.Client, build func() (*http.Request, error)) (*http.Response, error) {
	for try := 1; ; try++ {
		req, err := build()
		if err != nil {
			return nil, err
		}
		res, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		if res.StatusCode != http.StatusTooManyRequests {
			return res, nil
		}
		wait := retryAfter(res.Header.Get("Retry-After"), time.Now())
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
		res.Body.Close()
		if try > RateLimitRetries || wait > MaxRateLimitWait {
			return nil, &RateLimitedError{Tries: try, RetryAfter: wait}
		}
		if c.OnRateLimited != nil {
			c.OnRateLimited(wait, try)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// retryAfter reads a Retry-After header (RFC 9110 §10.2.3): seconds or an
// HTTP date. Missing or unreadable, it is one second.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		// Past a day it is no wait anyone waits for; capped before it is
		// multiplied, so that a huge value cannot wrap to a negative one.
		return time.Duration(min(s, 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now).Round(time.Second))
	}
	return time.Second
}

// sleep waits d, or until ctx ends (returning its error), with Sleep when
// it is set.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

package main

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Without --all a listing reads on through empty pages until it has its
// rows, but not for ever: after maxUntilCalls calls it stops and hands
// back the token to read on from. With --all it reads every page.
func TestPagesUntilBoundsTheCallsWithoutAll(t *testing.T) {
	c := &cli{timeout: time.Second}
	calls := 0
	empty := func(_ context.Context, token string, want int) (int, string, error) {
		calls++
		return 0, fmt.Sprint("page-", calls), nil
	}
	next, err := c.pagesUntil(false, "", 20, empty)
	if err != nil || calls != maxUntilCalls || next != fmt.Sprint("page-", maxUntilCalls) {
		t.Fatalf("without --all over empty pages: %d calls, next %q, %v", calls, next, err)
	}
	calls = 0
	ends := func(_ context.Context, token string, want int) (int, string, error) {
		calls++
		if calls == 3*maxUntilCalls {
			return 1, "", nil
		}
		return 0, "more", nil
	}
	if next, err := c.pagesUntil(true, "", 20, ends); err != nil || next != "" || calls != 3*maxUntilCalls {
		t.Fatalf("--all: %d calls, next %q, %v", calls, next, err)
	}
}

package main

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// outboxRetry moves dead letters back into the outbox (admin):
//
//	outbox retry KEY | outbox retry --all
func (c *cli) outboxRetry(all bool, pos []string) error {
	if (len(pos) == 1) == all || len(pos) > 1 {
		return usagef("outbox retry KEY | outbox retry --all")
	}
	req := &ledgerv1.RetryDeadLettersRequest{All: all}
	if len(pos) == 1 {
		req.Key = pos[0]
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.RetryDeadLetters(ctx, req)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	printf(c.out, "%d dead letters moved back to the outbox\n", rep.GetRetried())
	return nil
}

// outbox shows the evidence outbox and its dead letters (admin):
//
//	outbox [--limit N] [--page TOKEN] [--all]
func (c *cli) outbox(o listOpts) error {
	if err := o.check(); err != nil {
		return err
	}
	var rep *ledgerv1.GetOutboxResponse
	req := &ledgerv1.GetOutboxRequest{PageSize: int32(o.limit)}
	next, err := c.pages(o.all, o.page, func(ctx context.Context, token string) (string, error) {
		req.PageToken = token
		page, err := c.c.GetOutbox(ctx, req)
		if err != nil {
			return "", err
		}
		if rep == nil {
			rep = page
		} else {
			rep.DeadLetters = append(rep.DeadLetters, page.GetDeadLetters()...)
		}
		return page.GetNextPageToken(), nil
	})
	if err != nil {
		return err
	}
	rep.NextPageToken = next
	if c.json {
		return c.printJSON(rep)
	}
	if c.output != "csv" {
		w := c.table()
		printf(w, "outbox depth\t%d\n", rep.GetDepth())
		printf(w, "oldest entry\t%s\n", age(rep.GetOldestQueuedAt(), rep.GetDepth()))
		printf(w, "planned segments\t%d\n", rep.GetPlannedSegments())
		printf(w, "dead letters\t%d\n", rep.GetDeadLetterCount())
		w.Flush()
		if len(rep.GetDeadLetters()) == 0 {
			return nil
		}
		fmt.Fprintln(c.out)
	}
	l := listing{header: []string{"seq", "key", "what", "attempts", "first failure (UTC)", "last failure (UTC)", "reason"}}
	for _, d := range rep.GetDeadLetters() {
		e := d.GetEntry()
		what := "put " + e.GetKind()
		if e.GetOp() != "" {
			what = e.GetOp()
		}
		l.rows = append(l.rows, []string{fmt.Sprint(e.GetSeq()), e.GetKey(), what, fmt.Sprint(d.GetAttempts()), when(d.GetFirstFailure()), when(d.GetLastFailure()), d.GetReason()})
	}
	if err := c.printList(l, ""); err != nil {
		return err
	}
	if rep.GetNextPageToken() != "" {
		c.note("(more: --page %s, or --all)", rep.GetNextPageToken())
	}
	c.note("retry with: ledgerctl outbox retry KEY | ledgerctl outbox retry --all")
	return nil
}

// age says how long ago the oldest outbox entry was queued.
func age(t *timestamppb.Timestamp, depth int32) string {
	switch {
	case depth == 0:
		return "none (outbox empty)"
	case t == nil:
		return "unknown (queued before the time was recorded)"
	}
	d := max(time.Since(t.AsTime()), 0).Round(time.Second)
	return fmt.Sprintf("%s ago (queued %s)", d, when(t))
}

package main

import (
	"flag"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// outbox shows the evidence outbox and its dead letters, or moves dead
// letters back into the outbox (admin):
//
//	outbox [--limit N] [--page TOKEN]
//	outbox retry KEY | outbox retry --all
func (c *cli) outbox(args []string) error {
	fs := flag.NewFlagSet("outbox", flag.ContinueOnError)
	limit := fs.Int("limit", 100, "")
	page := fs.String("page", "", "")
	all := fs.Bool("all", false, "")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if len(pos) > 0 && pos[0] == "retry" {
		if (len(pos) == 2) == *all || len(pos) > 2 {
			return usagef("outbox retry KEY | outbox retry --all")
		}
		req := &ledgerv1.RetryDeadLettersRequest{All: *all}
		if len(pos) == 2 {
			req.Key = pos[1]
		}
		rep, err := c.c.RetryDeadLetters(ctx, req)
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(rep)
		}
		fmt.Fprintf(c.out, "%d dead letters moved back to the outbox\n", rep.GetRetried())
		return nil
	}
	if len(pos) > 0 || *all {
		return usagef("outbox [--limit N] [--page TOKEN] | outbox retry KEY | outbox retry --all")
	}
	if *limit < 1 || *limit > 1000 {
		return usagef("--limit must be 1 to 1000")
	}
	rep, err := c.c.GetOutbox(ctx, &ledgerv1.GetOutboxRequest{PageSize: int32(*limit), PageToken: *page})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	w := c.table()
	fmt.Fprintf(w, "outbox depth\t%d\n", rep.GetDepth())
	fmt.Fprintf(w, "oldest entry\t%s\n", age(rep.GetOldestQueuedAt(), rep.GetDepth()))
	fmt.Fprintf(w, "planned segments\t%d\n", rep.GetPlannedSegments())
	fmt.Fprintf(w, "dead letters\t%d\n", rep.GetDeadLetterCount())
	w.Flush()
	if len(rep.GetDeadLetters()) == 0 {
		return nil
	}
	fmt.Fprintln(c.out)
	w = c.table()
	fmt.Fprintln(w, "SEQ\tKEY\tWHAT\tATTEMPTS\tFIRST FAILURE (UTC)\tLAST FAILURE (UTC)\tREASON")
	for _, d := range rep.GetDeadLetters() {
		e := d.GetEntry()
		what := "put " + e.GetKind()
		if e.GetOp() != "" {
			what = e.GetOp()
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", e.GetSeq(), e.GetKey(), what, d.GetAttempts(), when(d.GetFirstFailure()), when(d.GetLastFailure()), d.GetReason())
	}
	w.Flush()
	if rep.GetNextPageToken() != "" {
		fmt.Fprintf(c.out, "(more: --page %s)\n", rep.GetNextPageToken())
	}
	fmt.Fprintln(c.out, "retry with: ledgerctl outbox retry KEY | ledgerctl outbox retry --all")
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

package main

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// incidentClose closes an incident (admin): incidents close ID --note TEXT.
func (c *cli) incidentClose(note string, pos []string) error {
	if len(pos) != 1 {
		return usagef("incidents close ID --note TEXT")
	}
	if note == "" {
		return usagef("incidents close ID --note TEXT: say how it was resolved")
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.CloseIncident(ctx, &ledgerv1.CloseIncidentRequest{Id: pos[0], Note: note})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	printf(c.out, "incident %s closed; its evidence is kept until %s and its legal holds are released\n", rep.GetIncident().GetId(), when(rep.GetIncident().GetRetainUntil()))
	return nil
}

// incidents lists incidents, newest first, or shows one:
//
//	incidents [--limit N] [--all]
//	incidents ID
func (c *cli) incidents(o listOpts, pos []string) error {
	ctx, cancel := c.ctx()
	defer cancel()
	switch {
	case len(pos) == 1:
		rep, err := c.c.GetIncident(ctx, &ledgerv1.GetIncidentRequest{Id: pos[0]})
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(rep)
		}
		if c.output == "csv" {
			return usagef("--output csv lists incidents; one incident prints as a table or JSON")
		}
		i := rep.GetIncident()
		w := c.table()
		state := "open (evidence under legal hold)"
		if !i.GetOpen() {
			state = fmt.Sprintf("closed %s by %s: %s; kept until %s", when(i.GetClosedAt()), i.GetClosedBy(), i.GetNote(), when(i.GetRetainUntil()))
		}
		printf(w, "incident\t%s\n", i.GetId())
		printf(w, "state\t%s\n", state)
		printf(w, "opened\t%s\n", when(i.GetOpenedAt()))
		printf(w, "row\t%s\n", i.GetRowId())
		printf(w, "agent platform\t%s\n", i.GetAgent())
		printf(w, "reason\t%s\n", i.GetReason())
		if rep.GetSameDayCountTruncated() {
			printf(w, "same platform that day\t%d or more other rows (only the day's newest rows were read)\n", rep.GetSameDayCount())
		} else {
			printf(w, "same platform that day\t%d other rows\n", rep.GetSameDayCount())
		}
		w.Flush()
		if len(rep.GetSameDayRows()) > 0 {
			fmt.Fprintln(c.out)
			w = c.table()
			fmt.Fprintln(w, "ROW\tISSUED (UTC)\tSTATUS\tPRINCIPAL\tTARGET\tTOOL")
			marked := false
			for _, r := range rep.GetSameDayRows() {
				targets, m := rowTargets(r)
				marked = marked || m
				printf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", short(r.GetId()), when(r.GetIssuedAt()), word(r.GetStatus(), "ROW_STATUS_"), orDash(r.GetPrincipal()), targets, rowTools(r))
			}
			w.Flush()
			if marked {
				c.note("%s", writerOnlyNote)
			}
		}
		switch {
		case rep.GetSameDayCountTruncated():
			c.note("(%d shown of the %d other rows read; the platform has more that day: lookup --agent with --since and --until for the day, and --all, lists every one)", len(rep.GetSameDayRows()), rep.GetSameDayCount())
		case rep.GetSameDayRowsTruncated():
			c.note("(%d of %d other rows shown: lookup --agent with --since and --until for the day lists every one)", len(rep.GetSameDayRows()), rep.GetSameDayCount())
		}
		return nil
	case len(pos) == 0:
		return c.listIncidents(o)
	}
	return usagef("incidents [--limit N] [--all] | incidents ID | incidents close ID --note TEXT")
}

func (c *cli) listIncidents(o listOpts) error {
	if err := o.check(); err != nil {
		return err
	}
	rep := &ledgerv1.ListIncidentsResponse{}
	req := &ledgerv1.ListIncidentsRequest{PageSize: int32(o.limit)}
	var err error
	if rep.NextPageToken, err = c.pages(o.all, o.page, func(ctx context.Context, token string) (string, error) {
		req.PageToken = token
		page, err := c.c.ListIncidents(ctx, req)
		rep.Incidents = append(rep.Incidents, page.GetIncidents()...)
		return page.GetNextPageToken(), err
	}); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	l := listing{header: []string{"incident", "opened (UTC)", "state", "row", "agent", "reason"}}
	for _, i := range rep.GetIncidents() {
		state := "open"
		if !i.GetOpen() {
			state = "closed"
		}
		reason, row := i.GetReason(), i.GetRowId()
		if c.output != "csv" {
			row = short(row)
			if len(reason) > 80 {
				cut := 80
				for cut > 0 && !utf8.RuneStart(reason[cut]) {
					cut--
				}
				reason = reason[:cut] + "…"
			}
		}
		l.rows = append(l.rows, []string{i.GetId(), when(i.GetOpenedAt()), state, row, i.GetAgent(), reason})
	}
	if err := c.printList(l, "no incidents"); err != nil {
		return err
	}
	if rep.GetNextPageToken() != "" {
		c.note("(more incidents: --all lists every one, or --page %s)", rep.GetNextPageToken())
	}
	return nil
}

// sweep runs the retention sweeper now (admin), or with --dry-run lists
// what it would remove (auditor, admin).
func (c *cli) sweep(dry bool, at string) error {
	req := &ledgerv1.SweepRequest{DryRun: dry}
	if at != "" {
		if !dry {
			return usagef("--at is for --dry-run only: a sweep removes what is due now")
		}
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			if t, err = time.Parse("2006-01-02", at); err != nil {
				return usagef("--at %q: want RFC 3339 (2027-06-01T00:00:00Z) or a date (2027-06-01)", at)
			}
		}
		req.At = timestamppb.New(t)
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.Sweep(ctx, req)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	verb := "removed"
	if rep.GetDryRun() {
		verb = "would remove"
	}
	c.note("sweep at %s %s %s; %s kept", when(rep.GetAt()), verb, plural(len(rep.GetSwept()), "row"), plural(len(rep.GetKept()), "due row"))
	l := listing{header: []string{"row", "class", "retain until", "outcome"}}
	for _, r := range rep.GetSwept() {
		l.rows = append(l.rows, []string{r.GetRowId(), word(r.GetRetentionClass(), "RETENTION_CLASS_"), when(r.GetRetainUntil()), verb})
	}
	open := false
	for _, r := range rep.GetKept() {
		l.rows = append(l.rows, []string{r.GetRowId(), word(r.GetRetentionClass(), "RETENTION_CLASS_"), when(r.GetRetainUntil()), "kept: " + r.GetKept()})
		open = open || strings.HasPrefix(r.GetKept(), "an open incident") || r.GetKept() == "its dispute is open"
	}
	if err := c.printList(l, ""); err != nil {
		return err
	}
	if open {
		c.note("(a row an open incident or an open dispute keeps is listed until the sweep's time plus the incident period: each sweep moves it on while it stays open)")
	}
	if !rep.GetDryRun() {
		c.note("write-once objects deleted: %d; refused or failed (retried next sweep): %d", rep.GetObjectsDeleted(), rep.GetObjectsPending())
		for _, e := range rep.GetDeletionErrors() {
			c.note("  %s", e)
		}
		if held := rep.GetHoldsQueuedAgain(); len(held) > 0 {
			c.note("legal holds queued again, %s an open incident holds that the object store held without one (a release applied late, or removed outside the ledger):", plural(len(held), "object"))
			for _, k := range held {
				c.note("  %s", k)
			}
		}
	}
	if rep.GetTruncated() {
		c.note("(more rows than listed)")
	}
	return nil
}

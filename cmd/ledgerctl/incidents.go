package main

import (
	"flag"
	"fmt"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// incidents lists incidents, shows one, or closes one:
//
//	incidents [--limit N]
//	incidents ID
//	incidents close ID --note TEXT
func (c *cli) incidents(args []string) error {
	fs := flag.NewFlagSet("incidents", flag.ContinueOnError)
	limit := fs.Int("limit", 50, "")
	note := fs.String("note", "", "")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	switch {
	case len(pos) == 2 && pos[0] == "close":
		if *note == "" {
			return usagef("incidents close ID --note TEXT: say how it was resolved")
		}
		rep, err := c.c.CloseIncident(ctx, &ledgerv1.CloseIncidentRequest{Id: pos[1], Note: *note})
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(rep)
		}
		fmt.Fprintf(c.out, "incident %s closed; its evidence is kept until %s and its legal holds are released\n", rep.GetIncident().GetId(), when(rep.GetIncident().GetRetainUntil()))
		return nil
	case len(pos) == 1:
		rep, err := c.c.GetIncident(ctx, &ledgerv1.GetIncidentRequest{Id: pos[0]})
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(rep)
		}
		i := rep.GetIncident()
		w := c.table()
		state := "open (evidence under legal hold)"
		if !i.GetOpen() {
			state = fmt.Sprintf("closed %s by %s: %s; kept until %s", when(i.GetClosedAt()), i.GetClosedBy(), i.GetNote(), when(i.GetRetainUntil()))
		}
		fmt.Fprintf(w, "incident\t%s\n", i.GetId())
		fmt.Fprintf(w, "state\t%s\n", state)
		fmt.Fprintf(w, "opened\t%s\n", when(i.GetOpenedAt()))
		fmt.Fprintf(w, "row\t%s\n", i.GetRowId())
		fmt.Fprintf(w, "agent platform\t%s\n", i.GetAgent())
		fmt.Fprintf(w, "reason\t%s\n", i.GetReason())
		fmt.Fprintf(w, "same platform that day\t%d other rows\n", rep.GetSameDayCount())
		w.Flush()
		if len(rep.GetSameDayRows()) > 0 {
			fmt.Fprintln(c.out)
			w = c.table()
			fmt.Fprintln(w, "ROW\tISSUED (UTC)\tSTATUS\tPRINCIPAL\tTARGET\tTOOL")
			for _, r := range rep.GetSameDayRows() {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", short(r.GetId()), when(r.GetIssuedAt()), word(r.GetStatus(), "ROW_STATUS_"), orDash(r.GetPrincipal()), rowTargets(r), rowTools(r))
			}
			w.Flush()
		}
		return nil
	case len(pos) == 0:
		if *limit < 1 || *limit > 1000 {
			return usagef("--limit must be 1 to 1000")
		}
		rep, err := c.c.ListIncidents(ctx, &ledgerv1.ListIncidentsRequest{PageSize: int32(*limit)})
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(rep)
		}
		if len(rep.GetIncidents()) == 0 {
			fmt.Fprintln(c.out, "no incidents")
			return nil
		}
		w := c.table()
		fmt.Fprintln(w, "INCIDENT\tOPENED (UTC)\tSTATE\tROW\tAGENT\tREASON")
		for _, i := range rep.GetIncidents() {
			state := "open"
			if !i.GetOpen() {
				state = "closed"
			}
			reason := i.GetReason()
			if len(reason) > 80 {
				reason = reason[:80] + "…"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", i.GetId(), when(i.GetOpenedAt()), state, short(i.GetRowId()), i.GetAgent(), reason)
		}
		w.Flush()
		return nil
	}
	return usagef("incidents [--limit N] | incidents ID | incidents close ID --note TEXT")
}

// sweep runs the retention sweeper now (admin), or with --dry-run lists
// what it would remove (auditor, admin).
func (c *cli) sweep(args []string) error {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	dry := fs.Bool("dry-run", false, "")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("sweep [--dry-run]")
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.Sweep(ctx, &ledgerv1.SweepRequest{DryRun: *dry})
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
	fmt.Fprintf(c.out, "sweep at %s %s %d rows; %d due rows kept\n", when(rep.GetAt()), verb, len(rep.GetSwept()), len(rep.GetKept()))
	if len(rep.GetSwept())+len(rep.GetKept()) > 0 {
		w := c.table()
		fmt.Fprintln(w, "ROW\tCLASS\tRETAIN UNTIL\tOUTCOME")
		for _, r := range rep.GetSwept() {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.GetRowId(), word(r.GetRetentionClass(), "RETENTION_CLASS_"), when(r.GetRetainUntil()), verb)
		}
		for _, r := range rep.GetKept() {
			fmt.Fprintf(w, "%s\t%s\t%s\tkept: %s\n", r.GetRowId(), word(r.GetRetentionClass(), "RETENTION_CLASS_"), when(r.GetRetainUntil()), r.GetKept())
		}
		w.Flush()
	}
	if !rep.GetDryRun() {
		fmt.Fprintf(c.out, "write-once objects deleted: %d; refused or failed (retried next sweep): %d\n", rep.GetObjectsDeleted(), rep.GetObjectsPending())
		for _, e := range rep.GetDeletionErrors() {
			fmt.Fprintf(c.out, "  %s\n", e)
		}
	}
	if rep.GetTruncated() {
		fmt.Fprintln(c.out, "(more rows than listed)")
	}
	return nil
}

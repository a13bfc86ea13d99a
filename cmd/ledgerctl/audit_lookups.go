package main

import (
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// maxLookups bounds the lookups of each kind checkLookups runs without
// --all: those of the newest rows' customers, orders and grants.
const maxLookups = 1000

// lookupKind is a lookup support or an auditor runs (ListRows by one
// field), and the values of it a row answers to.
type lookupKind struct {
	name   string
	values func(*ledgerv1.Row) []string
	ask    func(value string) *ledgerv1.ListRowsRequest
}

var lookupKinds = []lookupKind{
	{"customer", func(r *ledgerv1.Row) []string { return []string{r.GetPrincipal()} },
		func(v string) *ledgerv1.ListRowsRequest { return &ledgerv1.ListRowsRequest{Principal: v} }},
	{"order", func(r *ledgerv1.Row) []string {
		var out []string
		for _, act := range r.GetActions() {
			if t := act.GetTarget(); !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
		return out
	}, func(v string) *ledgerv1.ListRowsRequest { return &ledgerv1.ListRowsRequest{Target: v} }},
	{"grant", func(r *ledgerv1.Row) []string { return []string{r.GetGrantId()} },
		func(v string) *ledgerv1.ListRowsRequest { return &ledgerv1.ListRowsRequest{GrantId: v} }},
}

// checkLookups runs the lookups support runs in a dispute (by customer
// and by order) and auditors run (by grant), for the customers, orders
// and grants of the rows listed (everyRowHasALeaf; the newest rows'
// maxLookups of each kind, every one with all): each row listed must be
// found by the lookup of each of its values, and each row a lookup finds
// must answer to it. The rows are read through the unfiltered listing
// and by id, and the lookups through indexes of their own: an entry
// removed from one hides a row from support while every other read
// shows it. A row found by no lookup and since swept is no finding.
func (a *auditor) checkLookups(all bool) error {
	counts := make([]int, len(lookupKinds))
	left := 0
	for k, kind := range lookupKinds {
		groups := map[string][]string{} // value → the listed rows answering to it
		var order []string
		notRun := map[string]bool{}
		for _, id := range a.listed {
			for _, v := range kind.values(a.rows[id]) {
				if v == "" || notRun[v] {
					continue
				}
				if _, ok := groups[v]; !ok {
					if !all && len(order) == maxLookups {
						notRun[v] = true
						continue
					}
					order = append(order, v)
				}
				groups[v] = append(groups[v], id)
			}
		}
		left += len(notRun)
		for _, v := range order {
			found, err := a.lookup(kind, v)
			if err != nil {
				return err
			}
			if found == nil {
				continue // the lookup answered DATA_LOSS, a mismatch
			}
			for _, id := range groups[v] {
				if found[id] {
					continue
				}
				held, err := a.stillHeld(id)
				if err != nil {
					return err
				}
				if held {
					a.mismatch("row %s is not found by a lookup of its %s %q, though the listing and a read by its id show it: support's lookups miss it (an entry of the index the lookup reads was removed); run ledgerctl fsck", id, kind.name, v)
				}
			}
		}
		counts[k] = len(order)
	}
	line := fmt.Sprintf("lookups: %s, %s and %s looked up as support and auditors do (ListRows by each), every listed row of each checked to be found", plural(counts[0], "customer"), plural(counts[1], "order"), plural(counts[2], "grant"))
	if left > 0 {
		line += fmt.Sprintf("; %d customers, orders and grants of older rows not looked up (--all looks up every one)", left)
	}
	fmt.Fprintln(a.c.out, line)
	return nil
}

// lookup runs kind's lookup of v to its last page and returns the rows
// it finds; nil, with a mismatch, when the ledger answers that the row
// store was edited (DATA_LOSS), and a mismatch for each row found that
// does not answer to v.
func (a *auditor) lookup(kind lookupKind, v string) (map[string]bool, error) {
	found := map[string]bool{}
	token := ""
	for {
		req := kind.ask(v)
		req.PageSize, req.PageToken = 1000, token
		ctx, cancel := a.c.ctx()
		rep, err := a.c.c.ListRows(ctx, req)
		cancel()
		if status.Code(err) == codes.DataLoss {
			a.mismatch("a lookup of %s %q answers that the row store was edited: %s", kind.name, v, status.Convert(err).Message())
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("look up %s %q: %w", kind.name, v, err)
		}
		for _, r := range rep.GetRows() {
			found[r.GetId()] = true
			if !slices.Contains(kind.values(r), v) {
				a.mismatch("a lookup of %s %q finds row %s, which does not answer to it", kind.name, v, r.GetId())
			}
		}
		if token = rep.GetNextPageToken(); token == "" {
			return found, nil
		}
	}
}

// stillHeld reports whether the ledger still serves row id by its id
// (false: it was swept, or is gone, which other checks report).
func (a *auditor) stillHeld(id string) (bool, error) {
	ctx, cancel := a.c.ctx()
	defer cancel()
	_, err := a.c.c.GetRow(ctx, &ledgerv1.GetRowRequest{Id: id})
	switch status.Code(err) {
	case codes.OK:
		return true, nil
	case codes.NotFound, codes.DataLoss:
		return false, nil
	}
	return false, fmt.Errorf("read row %s: %w", id, err)
}

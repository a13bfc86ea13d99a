package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// accessOpts are access-log's flags.
type accessOpts struct {
	listOpts
	since, by, principal, target, grant string
}

// accessLog lists the read-access log, oldest first (admin).
func (c *cli) accessLog(o accessOpts) error {
	if err := o.check(); err != nil {
		return err
	}
	req := &ledgerv1.ListAccessLogRequest{PageSize: int32(o.limit), PageToken: o.page, Key: o.by, Principal: o.principal, Target: o.target, GrantId: o.grant}
	var err error
	if req.Since, err = parseTime("since", o.since); err != nil {
		return err
	}
	rep := &ledgerv1.ListAccessLogResponse{}
	if rep.NextPageToken, err = c.pagesUntil(o.all, req.PageToken, o.limit, func(ctx context.Context, token string, want int) (int, string, error) {
		req.PageToken, req.PageSize = token, int32(want)
		page, err := c.c.ListAccessLog(ctx, req)
		rep.Records = append(rep.Records, page.GetRecords()...)
		return len(page.GetRecords()), page.GetNextPageToken(), err
	}); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	l := listing{header: []string{"seq", "at (UTC)", "key", "roles", "rpc", "query", "rows", "result"}}
	for _, r := range rep.GetRecords() {
		l.rows = append(l.rows, []string{fmt.Sprint(r.GetSeq()), when(r.GetAt()), r.GetKey(), strings.Join(r.GetRoles(), " "), r.GetRpc(),
			c.accessQuery(r), accessRows(r), r.GetResult()})
	}
	empty := "no reads match"
	if rep.GetNextPageToken() != "" {
		empty = ""
	}
	if err := c.printList(l, empty); err != nil {
		return err
	}
	if slices.ContainsFunc(rep.GetRecords(), (*ledgerv1.AccessRecord).GetRowPrincipalsTruncated) {
		c.note("(of=…,… : the reply carried rows of more customers than the log lists; every --principal listing includes the read)")
	}
	if slices.ContainsFunc(rep.GetRecords(), (*ledgerv1.AccessRecord).GetTruncated) {
		c.note("(a value a read named longer than 512 bytes is cut at 512 bytes, ending \"… (N bytes more)\")")
	}
	if rep.GetNextPageToken() != "" {
		c.note("(more of the log to read: --all, or --page %s)", rep.GetNextPageToken())
	}
	return nil
}

// accessRows is how many rows a read's reply carried, or "-" for a read
// whose reply never carries rows (a JWKS snapshot, a listing of this log,
// which carries its records): a 0 there would read as "nothing came
// back". A listing of the Provider's entries set aside counts its entries;
// "-" for none, as records written before it counted them have it.
func accessRows(r *ledgerv1.AccessRecord) string {
	switch r.GetRpc() {
	case "GetJwksSnapshot", "ListAccessLog":
		return "-"
	case "GetProviderOutbox":
		if r.GetRows() == 0 {
			return "-"
		}
	}
	return fmt.Sprint(r.GetRows())
}

// accessQuery says what a read named, as name=value words.
func (c *cli) accessQuery(r *ledgerv1.AccessRecord) string {
	var q []string
	add := func(name, v string) {
		if v != "" {
			q = append(q, name+"="+v)
		}
	}
	row := r.GetRowId()
	if c.output != "csv" {
		row = short(row)
	}
	add("principal", r.GetPrincipal())
	add("target", r.GetTarget())
	add("grant", r.GetGrantId())
	add("agent", r.GetAgent())
	add("row", row)
	add("of", r.GetRowPrincipal())
	add("of", rowPrincipals(r, c.output != "csv"))
	add("id", r.GetObject())
	add("by", r.GetAboutKey())
	return orDash(strings.Join(q, " "))
}

// rowPrincipals says whose rows a read's reply carried, comma-separated,
// leaving out the principal its query named; short shows three and how
// many more. A list the log cut ends ",…".
func rowPrincipals(r *ledgerv1.AccessRecord, short bool) string {
	var of []string
	for _, p := range r.GetRowPrincipals() {
		if p != r.GetPrincipal() {
			of = append(of, p)
		}
	}
	if short && len(of) > 3 {
		of = append(of[:3:3], fmt.Sprintf("+%d", len(of)-3))
	}
	if r.GetRowPrincipalsTruncated() {
		of = append(of, "…")
	}
	return strings.Join(of, ",")
}

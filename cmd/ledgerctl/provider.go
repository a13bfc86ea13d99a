package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// providerOutbox shows the embedded Provider's outbox and the entries it
// set aside (admin):
//
//	provider outbox [--limit N] [--page TOKEN] [--all]
func (c *cli) providerOutbox(o listOpts) error {
	if err := o.check(); err != nil {
		return err
	}
	var rep *ledgerv1.GetProviderOutboxResponse
	req := &ledgerv1.GetProviderOutboxRequest{PageSize: int32(o.limit)}
	next, err := c.pages(o.all, o.page, func(ctx context.Context, token string) (string, error) {
		req.PageToken = token
		page, err := c.c.GetProviderOutbox(ctx, req)
		if err != nil {
			return "", err
		}
		if rep == nil {
			rep = page
		} else {
			rep.SetAside = append(rep.SetAside, page.GetSetAside()...)
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
		printf(w, "waiting for the ledger\t%d\n", rep.GetDepth())
		printf(w, "set aside\t%d\n", rep.GetSetAsideCount())
		w.Flush()
		if len(rep.GetSetAside()) == 0 {
			return nil
		}
		fmt.Fprintln(c.out)
	}
	l := listing{header: []string{"seq", "what", "names", "set aside (UTC)", "why"}}
	for _, e := range rep.GetSetAside() {
		why := e.GetWhy()
		if why == "" {
			why = "(not kept: set aside by an earlier version)"
		}
		l.rows = append(l.rows, []string{fmt.Sprint(e.GetSeq()), e.GetKind(), setAsideNames(e), when(e.GetSetAsideAt()), why})
	}
	if err := c.printList(l, ""); err != nil {
		return err
	}
	if rep.GetNextPageToken() != "" {
		c.note("(more: --page %s, or --all)", rep.GetNextPageToken())
	}
	c.note("once the cause is mended, post them again with: ledgerctl provider outbox retry SEQ | ledgerctl provider outbox retry --all")
	return nil
}

// setAsideNames says which receipt, refusal or revocation an entry is.
func setAsideNames(e *ledgerv1.ProviderSetAsideEntry) string {
	var parts []string
	add := func(name, v string) {
		if v != "" {
			parts = append(parts, name+" "+v)
		}
	}
	switch e.GetKind() {
	case "receipt":
		add("receipt", e.GetReceiptId())
		add("context", e.GetContextId())
		add("message", e.GetMessageId())
		add("tools", strings.Join(e.GetTools(), ","))
	case "refusal":
		add("tool", strings.Join(e.GetTools(), ","))
		add("target", e.GetTarget())
		add("principal", e.GetClaimedPrincipal())
		add("agent", e.GetClaimedAgent())
		add("observed", when(e.GetAt()))
	case "revocation":
		add("grant", e.GetGrantId())
		add("revoked", when(e.GetAt()))
	default:
		parts = append(parts, fmt.Sprintf("%d bytes", e.GetSizeBytes()))
	}
	return strings.Join(parts, "; ")
}

// providerOutboxRetry puts entries set aside back in the Provider's
// outbox (admin):
//
//	provider outbox retry SEQ | provider outbox retry --all
func (c *cli) providerOutboxRetry(all bool, pos []string) error {
	if (len(pos) == 1) == all || len(pos) > 1 {
		return usagef("provider outbox retry SEQ | provider outbox retry --all")
	}
	req := &ledgerv1.RetryProviderSetAsideRequest{All: all}
	if len(pos) == 1 {
		seq, err := strconv.ParseUint(pos[0], 10, 64)
		if err != nil || seq == 0 {
			return usagef("SEQ is the seq column of ledgerctl provider outbox, not %q", pos[0])
		}
		req.Seq = seq
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.RetryProviderSetAside(ctx, req)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	printf(c.out, "%s put back in the Provider's outbox, to be posted again\n", entries(rep.GetRetried()))
	if n := rep.GetUnreadable(); n > 0 {
		printf(c.out, "%s cannot be read and stay set aside\n", entries(n))
	}
	if n := rep.GetBrandNotConfigured(); n > 0 {
		printf(c.out, "%s of a brand no longer configured, or no longer delegating, stay set aside: the ledger would record them UNAUTHORIZED; put the brand file back to post them\n", entries(n))
	}
	return nil
}

// entries is "1 entry", "2 entries".
func entries(n int32) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}

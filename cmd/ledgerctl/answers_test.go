package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// largeAnswers answers as a ledger may: GetGrant past gRPC's default
// 4 MiB, and ListRows one row a page (a page ends early for its size).
type largeAnswers struct {
	ledgerv1.UnimplementedLedgerServiceServer
}

func (largeAnswers) GetGrant(_ context.Context, r *ledgerv1.GetGrantRequest) (*ledgerv1.GetGrantResponse, error) {
	out := &ledgerv1.GetGrantResponse{GrantId: r.GetGrantId(), RowCount: 1}
	for i := range 5 {
		out.ScopesUsed = append(out.ScopesUsed, fmt.Sprintf("%d:%s", i, strings.Repeat("s", 1<<20)))
	}
	return out, nil
}

func (largeAnswers) ListRows(_ context.Context, r *ledgerv1.ListRowsRequest) (*ledgerv1.ListRowsResponse, error) {
	n, _ := strconv.Atoi(r.GetPageToken())
	out := &ledgerv1.ListRowsResponse{Rows: []*ledgerv1.Row{{Id: fmt.Sprintf("%064x", n), Principal: fmt.Sprintf("acct-%d", n)}}}
	if n < 9 {
		out.NextPageToken = strconv.Itoa(n + 1)
	}
	return out, nil
}

// ledgerctl takes an answer past gRPC's default 4 MiB, and lookup reads
// pages that end early until it has --limit rows.
func TestLargeAnswersAndShortPages(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	ledgerv1.RegisterLedgerServiceServer(gs, largeAnswers{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	home := t.TempDir()
	ctl := func(args ...string) (int, string, string) {
		var out, errw bytes.Buffer
		env := map[string]string{"PACTLEDGER_SERVER": lis.Addr().String(), "PACTLEDGER_KEY": keys["support"], "HOME": home}
		code := run(args, &out, &errw, func(k string) string { return env[k] })
		return code, out.String(), errw.String()
	}
	if code, out, errs := ctl("grant", "a2agrant_large"); code != exitOK || !strings.Contains(out, "a2agrant_large") {
		t.Fatalf("grant: %d %.200s %s", code, out, errs)
	}
	code, out, errs := ctl("lookup", "--principal", "acct", "--limit", "3")
	if code != exitOK || strings.Count(out, "acct-") != 3 || !strings.Contains(out, "more rows") {
		t.Fatalf("lookup --limit 3: %d %s %s", code, out, errs)
	}
	if code, out, errs := ctl("lookup", "--principal", "acct", "--limit", "3", "--all"); code != exitOK || strings.Count(out, "acct-") != 10 {
		t.Fatalf("lookup --all: %d %s %s", code, out, errs)
	}
}

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

// ListDrills answers one report a page, as a ledger whose page ends early
// for its size may, each report's details cut.
func (largeAnswers) ListDrills(_ context.Context, r *ledgerv1.ListDrillsRequest) (*ledgerv1.ListDrillsResponse, error) {
	n, _ := strconv.Atoi(r.GetPageToken())
	out := &ledgerv1.ListDrillsResponse{Reports: []*ledgerv1.DrillReport{{Id: fmt.Sprintf("drill-%d", n), DetailsTruncated: true}}}
	if n < 9 {
		out.NextPageToken = strconv.Itoa(n + 1)
	}
	return out, nil
}

func (largeAnswers) GetDrill(_ context.Context, r *ledgerv1.GetDrillRequest) (*ledgerv1.GetDrillResponse, error) {
	return &ledgerv1.GetDrillResponse{Report: &ledgerv1.DrillReport{Id: r.GetId(), DetailsTruncated: true,
		Pulls:  []*ledgerv1.DrillPull{{Name: "action_log", Detail: "logged x… (9000 bytes more)"}},
		Object: &ledgerv1.EvidenceObject{Key: "drills/" + r.GetId() + ".json"}}}, nil
}

// ListAccessLog answers one record a page, its values cut.
func (largeAnswers) ListAccessLog(_ context.Context, r *ledgerv1.ListAccessLogRequest) (*ledgerv1.ListAccessLogResponse, error) {
	n, _ := strconv.Atoi(r.GetPageToken())
	out := &ledgerv1.ListAccessLogResponse{Records: []*ledgerv1.AccessRecord{{Seq: uint64(n + 1), Key: "support-key", Rpc: "ListRows",
		Principal: fmt.Sprintf("read-%d… (9000 bytes more)", n), Truncated: true}}}
	if n < 9 {
		out.NextPageToken = strconv.Itoa(n + 1)
	}
	return out, nil
}

// ledgerctl takes an answer past gRPC's default 4 MiB; lookup, drills and
// access-log read pages that end early until they have --limit items, and
// say when the ledger cut a drill's details or a read's values.
func TestLargeAnswersAndShortPages(t *testing.T) {
	as := ctlAgainst(t, largeAnswers{})
	ctl := func(args ...string) (int, string, string) { return as("support", args...) }
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
	code, out, errs = ctl("drills", "--limit", "3")
	if code != exitOK || strings.Count(out, "drill-") != 3 || !strings.Contains(out, "more drills") {
		t.Fatalf("drills --limit 3: %d %s %s", code, out, errs)
	}
	if code, out, errs := ctl("drills", "--limit", "3", "--all"); code != exitOK || strings.Count(out, "drill-") != 10 {
		t.Fatalf("drills --all: %d %s %s", code, out, errs)
	}
	if code, out, errs := ctl("drills", "drill-7"); code != exitOK || !strings.Contains(out, "details cut") || !strings.Contains(out, "drills/drill-7.json") {
		t.Fatalf("drills drill-7: %d %s %s", code, out, errs)
	}
	if code, out, errs := as("admin", "access-log", "--limit", "3"); code != exitOK || strings.Count(out, "read-") != 3 || !strings.Contains(out, "more of the log") || !strings.Contains(out, "cut at 512 bytes") {
		t.Fatalf("access-log --limit 3: %d %s %s", code, out, errs)
	}
}

// ctlAgainst serves srv on a loopback port and returns a ledgerctl run
// against it with the key of a role: its exit code, stdout and stderr.
func ctlAgainst(t *testing.T, srv ledgerv1.LedgerServiceServer) func(role string, args ...string) (int, string, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	ledgerv1.RegisterLedgerServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	home := t.TempDir()
	return func(role string, args ...string) (int, string, string) {
		var out, errw bytes.Buffer
		env := map[string]string{"PACTLEDGER_SERVER": lis.Addr().String(), "PACTLEDGER_KEY": keys[role], "HOME": home}
		code := run(args, &out, &errw, func(k string) string { return env[k] })
		return code, out.String(), errw.String()
	}
}

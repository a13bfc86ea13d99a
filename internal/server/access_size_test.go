package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pactledger/pactledger/internal/server"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// A read is recorded with what its query named as it was sent, refused
// or not: a support key's ListRows naming a principal, target, grant and
// agent of 200 KB each (refused, each over 512 bytes) made a record of
// 800 KB, and six of them an admin's ListAccessLog page of 4.8 MB, past
// the 4 MiB a gRPC client receives by default (RESOURCE_EXHAUSTED). The
// log now records, and an answer carries, each value up to 512 bytes,
// saying so in truncated,
// and a page ends before its records pass 2 MiB, with a token for the
// rest.
func TestAccessLogAnswersWithinBound(t *testing.T) {
	e := newEnv(t, jose.ES256)
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	support := authCtx(context.Background(), "support")
	long := func(c string, i int) string { return fmt.Sprintf("%d-%s", i, strings.Repeat(c, 200<<10)) }
	const hostile = 6
	for i := range hostile {
		_, err := c.ListRows(support, &ledgerv1.ListRowsRequest{Principal: long("p", i), Target: long("t", i), GrantId: long("g", i), Agent: long("a", i)})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("ListRows %d: %v, want INVALID_ARGUMENT", i, err)
		}
	}
	if _, err := c.ListRows(support, &ledgerv1.ListRowsRequest{Principal: "acct-48213"}); err != nil {
		t.Fatal(err)
	}
	admin := authCtx(context.Background(), "admin")

	page, err := c.ListAccessLog(admin, &ledgerv1.ListAccessLogRequest{})
	if err != nil {
		t.Fatalf("ListAccessLog: %v", err)
	}
	if n := proto.Size(page); n > 2<<20 {
		t.Errorf("the page is %d bytes, over 2 MiB", n)
	}
	recs := page.GetRecords()
	if len(recs) != hostile+1 || page.GetNextPageToken() != "" {
		t.Fatalf("%d records, next page %q; want %d, the whole log", len(recs), page.GetNextPageToken(), hostile+1)
	}
	for i, r := range recs[:hostile] {
		for _, v := range []struct{ name, got, want string }{{"principal", r.GetPrincipal(), long("p", i)}, {"target", r.GetTarget(), long("t", i)},
			{"grantId", r.GetGrantId(), long("g", i)}, {"agent", r.GetAgent(), long("a", i)}} {
			if len(v.got) > 512+32 || !strings.HasPrefix(v.got, v.want[:ledger.MaxFieldLength-32]) || !strings.HasSuffix(v.got, " bytes more)") {
				t.Errorf("record %d: %s answered as %d bytes: %.20q…%q", i, v.name, len(v.got), v.got, v.got[max(0, len(v.got)-24):])
			}
		}
		if !r.GetTruncated() || r.GetResult() != "invalid argument" {
			t.Errorf("record %d: truncated %v, result %q", i, r.GetTruncated(), r.GetResult())
		}
	}
	if r := recs[hostile]; r.GetTruncated() || r.GetPrincipal() != "acct-48213" {
		t.Errorf("the short record answered as principal %q, truncated %v", r.GetPrincipal(), r.GetTruncated())
	}

	// A budget below any record: a page of the one record, and a token
	// past it; the pages list the whole log once, in order.
	server.SetAnswerRowBytes(t, 1)
	var rpcs []string
	pages := 0
	for token := ""; ; {
		pages++
		page, err := c.ListAccessLog(admin, &ledgerv1.ListAccessLogRequest{PageSize: 5, PageToken: token})
		if err != nil {
			t.Fatalf("ListAccessLog page %d: %v", pages, err)
		}
		if len(page.GetRecords()) != 1 {
			t.Fatalf("page %d holds %d records, want the one that passes the budget alone", pages, len(page.GetRecords()))
		}
		rpcs = append(rpcs, page.GetRecords()[0].GetRpc())
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	var want []string
	for range hostile + 1 {
		want = append(want, "ListRows")
	}
	want = append(want, "ListAccessLog") // the first listing's own record
	if fmt.Sprint(rpcs) != fmt.Sprint(want) {
		t.Fatalf("pages listed %v, want %v", rpcs, want)
	}
}

package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/server"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// FuzzWriteThenRead posts fuzzed bodies to AppendReceipt (kind even) or
// AppendRefusal (kind odd) as a writer. The ledger never answers 5xx but a
// 503 with RetryInfo, and whatever it accepts reads back: GetRow, and
// ListRows by principal, each target and grant, over REST and gRPC.
//
// One ledgerd serves the whole fuzz process. Without -fuzz, `go test` runs
// the seeds: valid receipts and refusals and their hostile variants.
func FuzzWriteThenRead(f *testing.F) {
	e := newFuzzEnv(f)
	conn, err := grpc.NewClient(e.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close() })
	rpc := ledgerv1.NewLedgerServiceClient(conn)
	for _, s := range fuzzSeeds(e.sc) {
		f.Add(s.kind, s.body)
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		path := "/v1/receipts"
		if kind%2 == 1 {
			path = "/v1/refusals"
		}
		code, raw := rawPost(t, e, path, body)
		switch {
		case code == http.StatusServiceUnavailable:
			if !strings.Contains(string(raw), "RetryInfo") {
				t.Fatalf("POST %s = 503 without RetryInfo: %s", path, raw)
			}
			return
		case code >= 500:
			t.Fatalf("POST %s = %d: %s", path, code, raw)
		case code != http.StatusOK:
			return
		}
		var rep struct{ Row Row }
		if err := json.Unmarshal(raw, &rep); err != nil || rep.Row.ID == "" {
			t.Fatalf("POST %s = 200 with %q: %v", path, raw, err)
		}
		assertReadable(t, e, rpc, rep.Row)
	})
}

// newFuzzEnv starts one ledgerd for a fuzz process, as newEnv does for a
// test.
func newFuzzEnv(f *testing.F) *env {
	f.Helper()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	f.Cleanup(sc.Close)
	cfg := testConfig(sc, f.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		f.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	f.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			f.Errorf("serve: %v", err)
		}
	})
	return &env{sc: sc, srv: srv, base: "http://" + srv.HTTPAddr(), cfg: cfg}
}

// rawPost posts body as is, as writer.
func rawPost(t *testing.T, e *env, path string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", e.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+keys["writer"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

// assertReadable: row answers GetRow and is listed by its principal, each
// of its targets and its grant, over REST (as support) and gRPC.
func assertReadable(t *testing.T, e *env, rpc ledgerv1.LedgerServiceClient, row Row) {
	t.Helper()
	var got struct{ Row Row }
	if code := e.call(t, "GET", "/v1/rows/"+row.ID, "support", nil, &got); code != 200 || got.Row.ID != row.ID {
		t.Errorf("GET /v1/rows/%s = %d", row.ID, code)
	}
	ctx := authCtx(context.Background(), "support")
	if g, err := rpc.GetRow(ctx, &ledgerv1.GetRowRequest{Id: row.ID}); err != nil || g.GetRow().GetId() != row.ID {
		t.Errorf("gRPC GetRow %s: %v", row.ID, err)
	}
	filters := [][2]string{{"principal", row.Principal}, {"grantId", row.GrantID}}
	for _, a := range row.Actions {
		filters = append(filters, [2]string{"target", a.Target})
	}
	for _, fl := range filters {
		if fl[1] == "" {
			continue
		}
		if !restListed(t, e, fl[0], fl[1], row.ID) {
			t.Errorf("REST ListRows %s=%q does not return row %s", fl[0], fl[1], row.ID)
		}
		if !grpcListed(t, ctx, rpc, fl[0], fl[1], row.ID) {
			t.Errorf("gRPC ListRows %s=%q does not return row %s", fl[0], fl[1], row.ID)
		}
	}
}

// restListed pages through ListRows filter=value until id shows, wanting
// 200 on every page.
func restListed(t *testing.T, e *env, filter, value, id string) bool {
	t.Helper()
	token := ""
	for {
		q := url.Values{filter: {value}, "pageSize": {"1000"}}
		if token != "" {
			q.Set("pageToken", token)
		}
		var l struct {
			Rows          []Row  `json:"rows"`
			NextPageToken string `json:"nextPageToken"`
		}
		if code := e.call(t, "GET", "/v1/rows?"+q.Encode(), "support", nil, &l); code != 200 {
			t.Errorf("GET /v1/rows?%s = %d: support's lookup broken", q.Encode(), code)
			return false
		}
		for _, r := range l.Rows {
			if r.ID == id {
				return true
			}
		}
		if token = l.NextPageToken; token == "" {
			return false
		}
	}
}

// grpcListed is restListed over gRPC.
func grpcListed(t *testing.T, ctx context.Context, rpc ledgerv1.LedgerServiceClient, filter, value, id string) bool {
	t.Helper()
	req := &ledgerv1.ListRowsRequest{PageSize: 1000}
	switch filter {
	case "principal":
		req.Principal = value
	case "grantId":
		req.GrantId = value
	case "target":
		req.Target = value
	}
	for {
		l, err := rpc.ListRows(ctx, req)
		if err != nil {
			t.Errorf("gRPC ListRows %s=%q: %v", filter, value, err)
			return false
		}
		for _, r := range l.GetRows() {
			if r.GetId() == id {
				return true
			}
		}
		if req.PageToken = l.GetNextPageToken(); req.PageToken == "" {
			return false
		}
	}
}

type fuzzSeed struct {
	kind uint8
	body []byte
}

// fuzzSeeds are valid bodies signed by sc's keys and hostile variants of
// them.
func fuzzSeeds(sc *pacttest.Scenario) []fuzzSeed {
	var seeds []fuzzSeed
	add := func(kind uint8, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		seeds = append(seeds, fuzzSeed{kind, b})
	}
	receipt := func(edit func(r *pacttest.Receipt), editBody func(b map[string]any)) {
		r := sc.Mint(pacttest.Spec{ArgsJSON: `{"order":"A-5531","amount":50}`})
		if edit != nil {
			edit(r)
		}
		body := post(r)
		if editBody != nil {
			editBody(body)
		}
		add(0, body)
	}
	receipt(nil, nil)
	receipt(nil, func(b map[string]any) {
		b["limits"] = map[string]any{"amountMax": "NaN", "countMax": 1}
		b["contextId"], b["messageId"] = "ctx-1", "msg-1"
	})
	receipt(func(r *pacttest.Receipt) { r.ReceiptJWS = pacttest.MalleateES256(r.ReceiptJWS) }, nil)
	receipt(func(r *pacttest.Receipt) {
		r.RequestJWT, _ = pacttest.ReplaceSegment(r.RequestJWT, 2, pacttest.NonCanonicalTail)
	}, nil)
	receipt(func(r *pacttest.Receipt) {
		r.Claims["ts"] = "9999-12-31T23:59:59Z"
		r.ReceiptJWS = sc.Brand.Key.Sign(r.Claims)
	}, nil)
	receipt(func(r *pacttest.Receipt) {
		r.RequestClaims["exp"] = json.Number("1e300")
		sc.Resign(r)
	}, nil)
	receipt(func(r *pacttest.Receipt) {
		r.TokenClaims["exp"] = json.Number("253402300800")
		sc.Resign(r)
	}, nil)
	receipt(func(r *pacttest.Receipt) {
		r.Claims["actions"] = []any{}
		r.Actions = nil
		sc.Resign(r)
	}, nil)
	receipt(func(r *pacttest.Receipt) {
		r.Claims["user"] = "acct\u20104821"
		r.ReceiptJWS = pacttest.SignWith(map[string]any{"alg": "none"}, r.Claims, pacttest.Unsigned)
	}, nil)
	receipt(func(r *pacttest.Receipt) {
		r.Claims["ts"] = time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
		r.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(r.Claims)
	}, nil)
	receipt(nil, func(b map[string]any) {
		b["actions"].([]map[string]string)[0]["target"] = "A-5531\x00"
	})
	add(0, map[string]any{"receiptJws": "a.b.c"})
	add(0, map[string]any{})

	refusal := func(edit func(m map[string]any)) {
		m := map[string]any{
			"claimedPrincipal": "acct 30418", "claimedAgent": "assistant from MyHelper",
			"action": map[string]any{"tool": "change_address", "target": "acct-30418"},
			"reason": "no receipt; routed to human", "observedAt": "2026-10-06T17:20:10Z",
		}
		if edit != nil {
			edit(m)
		}
		add(1, m)
	}
	refusal(nil)
	refusal(func(m map[string]any) { m["requestJwt"] = sc.Mint(pacttest.Spec{}).RequestJWT })
	refusal(func(m map[string]any) { m["observedAt"] = "9999-12-31T23:59:59Z" })
	refusal(func(m map[string]any) { m["observedAt"] = "0001-01-01T00:00:00Z" })
	refusal(func(m map[string]any) { m["claimedPrincipal"] = "acct\x0030418" })
	return seeds
}

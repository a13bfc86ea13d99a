package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// withRawIat re-signs r's request JWT with iat as the JSON text given,
// bytes as they are.
func withRawIat(e *env, r *pacttest.Receipt, iat string) {
	claims := map[string]any{}
	for k, v := range r.RequestClaims {
		claims[k] = v
	}
	delete(claims, "iat")
	b, _ := json.Marshal(claims)
	r.RequestJWT = e.sc.PA.Key.Sign(json.RawMessage(append([]byte(`{"iat":`+iat+`,`), b[1:]...)))
}

// A request JWT whose iat holds bytes that are not UTF-8, or a long value
// the check's detail cuts short: the row is answered and reads back, over
// REST and gRPC.
func TestTimeClaimNotUTF8IsAnswered(t *testing.T) {
	e := newEnv(t, jose.ES256)
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	const user = "acct-utf8"
	for _, iat := range []string{"\"\xff\xfe\"", `"` + strings.Repeat("é", 40) + `"`} {
		r := e.sc.Mint(pacttest.Spec{User: user, GrantID: "a2agrant_utf8", Target: "U-1"})
		withRawIat(e, r, iat)
		var rep hostileReply
		if code := e.call(t, "POST", "/v1/receipts", "writer", post(r), &rep); code != 200 {
			t.Errorf("POST /v1/receipts with iat %q = %d", iat, code)
		}
		r2 := e.sc.Mint(pacttest.Spec{User: user, GrantID: "a2agrant_utf8", Target: "U-2"})
		r2.RequestJWT = r.RequestJWT
		if _, err := c.AppendReceipt(authCtx(context.Background(), "writer"), request(r2)); err != nil {
			t.Errorf("AppendReceipt with iat %q: %v", iat, err)
		}
	}
	list, err := c.ListRows(authCtx(context.Background(), "support"), &ledgerv1.ListRowsRequest{Principal: user})
	if err != nil || len(list.GetRows()) != 4 {
		t.Fatalf("ListRows(principal=%s) = %d rows, %v; want 4", user, len(list.GetRows()), err)
	}
	var out map[string]any
	if code := e.call(t, "GET", "/v1/rows?principal="+user, "support", nil, &out); code != 200 {
		t.Fatalf("GET /v1/rows = %d", code)
	}
}

// On AppendReceiptStream, such a receipt is answered like any other and
// the receipts read after it are answered too.
func TestTimeClaimNotUTF8KeepsStreamAnswering(t *testing.T) {
	e := newEnv(t, jose.ES256)
	s := openStream(t, e, "writer")
	bad := e.sc.Mint(pacttest.Spec{User: "acct-s", GrantID: "a2agrant_bad", Target: "S-0"})
	withRawIat(e, bad, "\"\xff\"")
	send(t, s, 1, request(bad))
	for i := 2; i <= 4; i++ {
		good := e.sc.Mint(pacttest.Spec{User: "acct-s", GrantID: "a2agrant_good" + string(rune('a'+i)), Target: "S-1"})
		send(t, s, uint64(i), request(good))
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got := answers(t, s, 4)
	for seq, res := range got {
		if res.GetCode() != 0 {
			t.Errorf("seq %d answered %d: %s", seq, res.GetCode(), res.GetMessage())
		}
	}
	if _, err := s.Recv(); err == nil {
		t.Fatal("a fifth answer")
	}
}

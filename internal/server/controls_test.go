package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/termtext"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// A writer's refusal or action log holding a control character in a name
// (a claimed principal or agent, a tool, a target) or one but a tab or a
// line break in a reason is refused with 400 / INVALID_ARGUMENT, the
// message naming the field and showing the character escaped; a reason
// or a dispute note of several lines is recorded.
func TestWriterTextWithControlCharactersIsRefused(t *testing.T) {
	e := newEnv(t, jose.ES256)
	refusal := func(edit func(m, action map[string]any)) map[string]any {
		action := map[string]any{"tool": "change_address", "target": "acct-30418"}
		m := map[string]any{"claimedPrincipal": "acct-30418", "claimedAgent": "MyHelper", "action": action, "reason": "no receipt", "observedAt": "2026-10-06T17:20:10Z"}
		edit(m, action)
		return m
	}
	type errBody struct {
		Message string `json:"message"`
	}
	for _, c := range []struct {
		field string
		edit  func(m, action map[string]any)
	}{
		{"claimedPrincipal", func(m, _ map[string]any) { m["claimedPrincipal"] = "acct-30418\n9999aaaa0000  authorized" }},
		{"claimedAgent", func(m, _ map[string]any) { m["claimedAgent"] = "RT\r\x1b[1A\x1b[2K" }},
		{"action.tool", func(_, a map[string]any) { a["tool"] = "change\taddress" }},
		{"action.target", func(_, a map[string]any) { a["target"] = "\u202e03481-tcca" }},
		{"reason", func(m, _ map[string]any) { m["reason"] = "no receipt\x1b[8m" }},
	} {
		var eb errBody
		code := e.call(t, "POST", "/v1/refusals", "writer", refusal(c.edit), &eb)
		if code != 400 || !strings.Contains(eb.Message, c.field+" contains a control character") || termtext.Find(eb.Message, false) >= 0 {
			t.Errorf("a refusal with a control character in %s = %d %q; want 400 naming it, the character escaped", c.field, code, eb.Message)
		}
	}
	var ref struct{ Row Row }
	if code := e.call(t, "POST", "/v1/refusals", "writer", refusal(func(m, _ map[string]any) { m["reason"] = "no receipt:\tchat said yes\r\nthen no" }), &ref); code != 200 {
		t.Fatalf("a reason of two lines = %d", code)
	}
	var d struct{ Row Row }
	if code := e.call(t, "POST", "/v1/rows/"+ref.Row.ID+"/disputes", "support", map[string]any{"status": "DISPUTE_STATUS_OPEN", "note": "customer says:\nnever approved"}, &d); code != 200 {
		t.Fatalf("a dispute note of two lines = %d", code)
	}
	var eb errBody
	if code := e.call(t, "POST", "/v1/rows/"+ref.Row.ID+"/disputes", "support", map[string]any{"status": "DISPUTE_STATUS_OPEN", "note": "never\x1b[2K approved"}, &eb); code != 400 || !strings.Contains(eb.Message, "note contains a control character") {
		t.Errorf("a dispute note with an escape sequence = %d %q; want 400 naming note", code, eb.Message)
	}

	// A receipt's action log, over REST and gRPC.
	r := e.sc.Mint(pacttest.Spec{User: "acct-ctl", Target: "A-5531"})
	body := post(r)
	body["actions"].([]map[string]string)[0]["target"] = "A-5531\n9999aaaa0000  authorized"
	eb = errBody{}
	if code := e.call(t, "POST", "/v1/receipts", "writer", body, &eb); code != 400 || !strings.Contains(eb.Message, `actions[0].target contains a control character (\n at byte 6)`) {
		t.Errorf("a receipt whose logged target holds a line feed = %d %q; want 400 naming actions[0].target", code, eb.Message)
	}
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	req := request(r)
	req.Actions[0].Tool = "cancel_order\x1b[8m"
	_, err := c.AppendReceipt(authCtx(context.Background(), "writer"), req)
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), `actions[0].tool contains a control character (\x1b at byte 12)`) {
		t.Errorf("a receipt whose logged tool holds an escape sequence: %v; want InvalidArgument naming actions[0].tool", err)
	}
	_, err = c.AppendRefusal(authCtx(context.Background(), "writer"), &ledgerv1.AppendRefusalRequest{ClaimedPrincipal: "acct-30418", ClaimedAgent: "MyHelper\u2028",
		Action: &ledgerv1.RefusalAction{Tool: "change_address"}, Reason: "r", ObservedAt: timestamppb.New(time.Date(2026, 10, 6, 17, 20, 10, 0, time.UTC))})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), `claimedAgent contains a control character (\u2028 at byte 8)`) {
		t.Errorf("a refusal whose claimed agent holds the line separator: %v; want InvalidArgument naming claimedAgent", err)
	}
	var list struct{ Rows []Row }
	if code := e.call(t, "GET", "/v1/rows?principal=acct-30418", "support", nil, &list); code != 200 || len(list.Rows) != 1 {
		t.Errorf("rows of acct-30418 = %d, %d rows; want the one refusal recorded", code, len(list.Rows))
	}
}

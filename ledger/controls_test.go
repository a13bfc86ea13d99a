package ledger_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// controls are text that a terminal acts on instead of showing: each is
// refused in a name a writer gives.
var controls = map[string]string{
	"a line feed":             "A-5531\n9999aaaa0000  authorized",
	"a carriage return":       "A-5531\r",
	"a tab":                   "A-5531\tx",
	"an escape sequence":      "A-5531\x1b[2K",
	"DEL":                     "A-5531\x7f",
	"a C1 control":            "A-5531\u009b2K",
	"a bidi override":         "\u202e1355-A",
	"a bidi isolate":          "A-\u20665531\u2069",
	"the line separator":      "A-5531\u2028",
	"the paragraph separator": "A-5531\u2029",
	// Invisible: a name holding one looks like another.
	"a zero-width space":  "A-55\u200b31",
	"a direction mark":    "A-5531\u200e",
	"a Hangul filler":     "A\u3164-5531",
	"the byte order mark": "\ufeffA-5531",
	"a tag character":     "A-5531\U000e0041",
}

// refusedNaming reports whether err refuses an input as invalid, naming
// field and saying that it holds a control character.
func refusedNaming(err error, field string) bool {
	return errors.Is(err, ledger.ErrInvalid) && (strings.Contains(err.Error(), field+" contains a control character") || strings.Contains(err.Error(), field+" contains an invisible character"))
}

// A refusal's claimed principal, claimed agent, tool and target are names
// a writer gives, and its reason free text: a control character in a name
// is refused, naming the field, and nothing is stored; a reason may hold
// tabs and line breaks and no other control character.
func TestARefusalsTextHoldsNoControlCharacter(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	base := ledger.RefusalInput{ClaimedPrincipal: "acct-48213", ClaimedAgent: "MyHelper", Tool: "cancel_order", Target: "A-5531", Reason: "refused", ObservedAt: h.clock()}
	for _, field := range []string{"claimedPrincipal", "claimedAgent", "action.tool", "action.target"} {
		for what, v := range controls {
			in := base
			switch field {
			case "claimedPrincipal":
				in.ClaimedPrincipal = v
			case "claimedAgent":
				in.ClaimedAgent = v
			case "action.tool":
				in.Tool = v
			case "action.target":
				in.Target = v
			}
			if row, err := h.l.AppendRefusal(ctx, in); !refusedNaming(err, field) {
				t.Errorf("%s holding %s: row %v, %v; want it refused, naming %s", field, what, row != nil, err, field)
			}
		}
	}
	for what, v := range map[string]string{
		"an escape sequence": "no receipt\x1b[1A\x1b[2K",
		"a lone CR":          "no receipt\rauthorized",
		"a bidi override":    "no receipt \u202e",
		"a C1 control":       "no receipt\u0085",
		"the line separator": "no receipt\u2028",
		"BEL":                "no receipt\x07",
	} {
		in := base
		in.Reason = v
		if row, err := h.l.AppendRefusal(ctx, in); !refusedNaming(err, "reason") {
			t.Errorf("a reason holding %s: row %v, %v; want it refused, naming reason", what, row != nil, err)
		}
	}
	// A request JWT's iss, which no check vouches for, stands for the
	// claimed agent.
	r := h.sc.Mint(pacttest.Spec{Target: "N-refusal"})
	r.RequestClaims["iss"] = "https://agent.example\x1b[8m"
	h.sc.Resign(r)
	in := base
	in.RequestJWT = r.RequestJWT
	if row, err := h.l.AppendRefusal(ctx, in); !refusedNaming(err, "requestJwt: its iss") {
		t.Errorf("a request JWT whose iss holds an escape sequence: row %v, %v; want it refused", row != nil, err)
	}
	if rows, _, err := h.l.List(ctx, ledger.Query{PageSize: 10}); err != nil || len(rows) != 0 {
		t.Fatalf("rows stored: %d, %v; want none", len(rows), err)
	}

	in = base
	in.Reason = "no receipt:\tthe chat said yes\r\nthen no\n"
	row, err := h.l.AppendRefusal(ctx, in)
	if err != nil || row.Refusal.Reason != in.Reason {
		t.Fatalf("a reason with a tab and line breaks: %v, %v; want it recorded as posted", row, err)
	}
}

// A receipt's action log gives a tool and a target for each action: a
// control character in either is refused, naming it, and nothing is
// stored. So are one in the writer's contextId, messageId and
// limits.amountMax.
func TestAnActionLogHoldsNoControlCharacter(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for what, v := range controls {
		for _, field := range []string{"actions[0].tool", "actions[0].target", "contextId", "messageId", "limits.amountMax"} {
			r := h.sc.Mint(pacttest.Spec{Target: "A-5531"})
			ri := in(r)
			switch field {
			case "actions[0].tool":
				ri.Actions[0].Tool = v
			case "actions[0].target":
				ri.Actions[0].Target = v
			case "contextId":
				ri.ContextID = v
			case "messageId":
				ri.MessageID = v
			case "limits.amountMax":
				ri.Limits = &ledger.Limits{AmountMax: v}
			}
			if row, _, err := h.l.AppendReceipt(ctx, ri); !refusedNaming(err, field) {
				t.Errorf("%s holding %s: row %v, %v; want it refused, naming %s", field, what, row != nil, err, field)
			}
			if strings.HasPrefix(field, "actions") {
				if err := ledger.CheckActions(ri.Actions); !refusedNaming(err, field) {
					t.Errorf("CheckActions with %s holding %s: %v", field, what, err)
				}
			}
		}
	}
	if rows, _, err := h.l.List(ctx, ledger.Query{PageSize: 10}); err != nil || len(rows) != 0 {
		t.Fatalf("rows stored: %d, %v; want none", len(rows), err)
	}
}

// A dispute event's note, a revocation's note and an incident's closing
// note are free text: tabs and line breaks are kept, an escape sequence
// or a bidi override is refused; a revoked grant's id is a name.
func TestNotesHoldNoEscapeSequence(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-5531"})))
	if _, err := h.l.AppendDispute(ctx, row.ID, ledger.DisputeOpen, "customer says\x1b[2K no", "support"); !refusedNaming(err, "note") {
		t.Errorf("a dispute note with an escape sequence: %v", err)
	}
	const twoLines = "customer says:\r\n\tnever approved it"
	if got, err := h.l.AppendDispute(ctx, row.ID, ledger.DisputeOpen, twoLines, "support"); err != nil || len(got.DisputeEvents) != 1 || got.DisputeEvents[0].Note != twoLines {
		t.Errorf("a dispute note of two lines: %v; want it the row's one event", err)
	}
	if _, err := h.l.RevokeGrant(ctx, "a2agrant_7Q2F", h.clock(), "revoked\u202e", "writer", false); !refusedNaming(err, "note") {
		t.Errorf("a revocation note with a bidi override: %v", err)
	}
	if _, err := h.l.RevokeGrant(ctx, "a2agrant_7Q2F\n", h.clock(), "", "writer", false); !refusedNaming(err, "grantId") {
		t.Errorf("a revoked grant id with a line feed: %v", err)
	}
	if rev, err := h.l.Revocation(ctx, "a2agrant_7Q2F"); err != nil || rev != nil {
		t.Errorf("a revocation was recorded: %v, %v", rev, err)
	}
	if _, err := h.l.CloseIncident(ctx, "INC-1", "closed\x1b]8;;x\x07", "admin"); !refusedNaming(err, "note") {
		t.Errorf("an incident's closing note with an escape sequence: %v", err)
	}
}

// withHeaderKid is compact token tok with its header's kid set to kid,
// its payload and signature kept (the signature no longer verifies).
func withHeaderKid(t *testing.T, tok, kid string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	h, err := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": kid})
	if err != nil || len(parts) != 3 {
		t.Fatalf("token %q: %v", tok, err)
	}
	return base64.RawURLEncoding.EncodeToString(h) + "." + parts[1] + "." + parts[2]
}

// A token's header kid is no signature's until its key is found, and the
// row keeps the receipt's and the request JWT's: a control character in it
// is refused, in a receipt, its request JWT and delegation token and in a
// refusal's.
func TestATokensHeaderKidHoldsNoControlCharacter(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const kid = "k1\x1b[2J\u202eGNISSIM"
	r := h.sc.Mint(pacttest.Spec{Target: "A-5531"})
	ri := in(r)
	ri.ReceiptJWS = withHeaderKid(t, r.ReceiptJWS, kid)
	if row, _, err := h.l.AppendReceipt(ctx, ri); !refusedNaming(err, "receiptJws: its header's kid") {
		t.Errorf("a receipt with a control character in its kid: row %v, %v", row != nil, err)
	}
	ri = in(r)
	ri.RequestJWT = withHeaderKid(t, r.RequestJWT, kid)
	if row, _, err := h.l.AppendReceipt(ctx, ri); !refusedNaming(err, "requestJwt: its header's kid") {
		t.Errorf("a receipt's request JWT with a control character in its kid: row %v, %v", row != nil, err)
	}
	ri = in(r)
	ri.DelegationToken = withHeaderKid(t, r.DelegationToken, "brand\u0085")
	if row, _, err := h.l.AppendReceipt(ctx, ri); !refusedNaming(err, "delegationToken: its header's kid") {
		t.Errorf("a receipt's delegation token with a control character in its kid: row %v, %v", row != nil, err)
	}
	ref := ledger.RefusalInput{ClaimedPrincipal: "acct-48213", ClaimedAgent: h.sc.PA.ID, RequestJWT: withHeaderKid(t, r.RequestJWT, kid),
		Tool: "cancel_order", Target: "A-5531", Reason: "no delegation token", ObservedAt: h.clock()}
	if row, err := h.l.AppendRefusal(ctx, ref); !refusedNaming(err, "requestJwt: its header's kid") {
		t.Errorf("a refusal's request JWT with a control character in its kid: row %v, %v", row != nil, err)
	}
	if rows, _, err := h.l.List(ctx, ledger.Query{PageSize: 10}); err != nil || len(rows) != 0 {
		t.Fatalf("rows stored: %d, %v; want none", len(rows), err)
	}
}

package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// The threat model (ARCHITECTURE.md): a writer key is not trusted. Nothing a
// writer sends may turn into a second authorization, shorten how long
// evidence is kept, or stop support from reading a customer's rows. Each
// case of TestHostileWriter is one thing a leaked writer key (or a buggy
// pipeline) could post.

// hostileRow is a row with the recording time the retention rules use.
type hostileRow struct {
	Row
	RecordedAt string `json:"recordedAt"`
}

type hostileReply struct {
	Row     hostileRow `json:"row"`
	Outcome string     `json:"outcome"`
}

// hostileEnv is one ledgerd trusting two brands (A, the scenario's, and B)
// and their personal agents. Brand A's JWKS also publishes a second EC key
// and an RSA key; the PA's JWKS a second key: kids to swap.
type hostileEnv struct {
	*env
	b   *pacttest.Scenario
	k4  *pacttest.Key // brand A, EC, kid brand-k4
	r1  *pacttest.Key // brand A, RSA, kid brand-r1
	pa2 *pacttest.Key // the PA, EC, kid pa-2026-10
	rpc ledgerv1.LedgerServiceClient
	n   int
}

func newHostileEnv(t *testing.T) *hostileEnv {
	t.Helper()
	b := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(b.Close)
	e := newEnv(t, jose.ES256, func(c *config.Config) {
		for _, br := range b.Brands() {
			c.Brands = append(c.Brands, config.Brand{InterfaceURL: br.InterfaceURL, JWKSURI: br.JWKSURI, Issuer: br.Issuer})
		}
		for _, a := range b.Agents() {
			c.Agents = append(c.Agents, config.Agent{Issuer: a.Issuer, JWKSURI: a.JWKSURI})
		}
	})
	h := &hostileEnv{env: e, b: b,
		k4:  pacttest.MustKey("brand-k4", jose.ES256),
		r1:  pacttest.MustKey("brand-r1", jose.RS256),
		pa2: pacttest.MustKey("pa-2026-10", jose.ES256),
	}
	e.sc.Brand.JWKS.Set(e.sc.Brand.Key, h.k4, h.r1)
	e.sc.PA.JWKS.Set(e.sc.PA.Key, h.pa2)
	h.rpc = ledgerv1.NewLedgerServiceClient(dial(t, e))
	return h
}

// hcase is one running case: its own principal, grant and target.
type hcase struct {
	t     *testing.T
	h     *hostileEnv
	id    string
	spec  pacttest.Spec
	legit *pacttest.Receipt // the legitimate receipt, when the case posts one first
	first hostileRow        // the first row the case stored, if any
	prev  hostileRow        // a row an attack stored on its way
	// stored counts the rows stored under the case's principal before the
	// hostile post.
	stored int
}

// hostilePost is what an attack posts.
type hostilePost struct {
	path string // default /v1/receipts
	body any
	jws  string // the receipt JWS posted, whose hash would be the row id
}

// hostileWant is what the ledger must answer.
type hostileWant struct {
	code       int    // default 200
	outcome    string // default CREATED, or DUPLICATE with dupOfFirst
	status     string
	anyStatus  bool // do not assert status (a boundary case whose checks may go either way)
	dupOfFirst bool // verifier.duplicateOf names the case's first row
	anyDup     bool // do not assert duplicateOf
	fail       []string
	pass       []string
	skipped    []string
	detail     string // in the detail of every check named in fail and skipped
	class      string
	// retainMonths, when set, is the class period the row keeps counted
	// from recordedAt.
	retainMonths int
	check        func(t *testing.T, c *hcase, row hostileRow)
}

type hostileCase struct {
	name string
	spec func(*pacttest.Spec)
	// legit posts a legitimate receipt first (minted to satisfy
	// legitWhere when set); it must be created AUTHORIZED and stay so.
	legit      bool
	legitWhere func(r *pacttest.Receipt) bool
	attack     func(c *hcase) hostilePost
	want       hostileWant
}

// TestHostileWriter runs every hostile case against one ledgerd.
func TestHostileWriter(t *testing.T) {
	h := newHostileEnv(t)
	cases := hostileCases()
	if len(cases) < 60 {
		t.Fatalf("%d cases; the table must hold at least 60", len(cases))
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("case name %q twice", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) { h.run(t, tc) })
	}
}

func (h *hostileEnv) run(t *testing.T, tc hostileCase) {
	h.n++
	id := fmt.Sprintf("h%03d", h.n)
	c := &hcase{t: t, h: h, id: id, spec: pacttest.Spec{User: "acct-" + id, GrantID: "a2agrant_" + id, Target: "H-" + id}}
	if tc.spec != nil {
		tc.spec(&c.spec)
	}
	if tc.legit {
		where := tc.legitWhere
		if where == nil {
			where = func(*pacttest.Receipt) bool { return true }
		}
		c.legit = c.mintWhere(where)
		c.first = c.mustCreate(post(c.legit))
	}
	p := tc.attack(c)
	if p.path == "" {
		p.path = "/v1/receipts"
	}
	w := tc.want
	if w.code == 0 {
		w.code = http.StatusOK
	}
	var rep hostileReply
	code := h.call(t, "POST", p.path, "writer", p.body, &rep)
	if code >= 500 {
		t.Fatalf("POST %s = %d: a hostile post must never answer 5xx", p.path, code)
	}
	if code != w.code {
		t.Fatalf("POST %s = %d, want %d (row %s %s)", p.path, code, w.code, rep.Row.Status, rep.Row.ID)
	}
	if code != http.StatusOK {
		c.nothingStored(p)
	} else {
		c.assertRow(w, rep)
	}
	if c.first.ID != "" {
		var got struct{ Row hostileRow }
		if code := h.call(t, "GET", "/v1/rows/"+c.first.ID, "support", nil, &got); code != 200 || got.Row.Status != c.first.Status || got.Row.Verifier.DuplicateOf != c.first.Verifier.DuplicateOf {
			t.Errorf("first row %s after the attack: %d %s (dup of %q), was %s", c.first.ID, code, got.Row.Status, got.Row.Verifier.DuplicateOf, c.first.Status)
		}
		if n := len(c.list("principal", c.spec.User, "ROW_STATUS_AUTHORIZED")); n > 1 {
			t.Errorf("%d AUTHORIZED rows for principal %s: one authorization counted twice", n, c.spec.User)
		}
	}
	// Support's lookups for the case's principal and target still answer.
	c.list("principal", c.spec.User, "")
	c.list("target", c.spec.Target, "")
	c.list("grantId", c.spec.GrantID, "")
}

// mint mints a receipt of the case's spec, edited.
func (c *hcase) mint(edit ...func(*pacttest.Spec)) *pacttest.Receipt {
	sp := c.spec
	for _, e := range edit {
		e(&sp)
	}
	return c.h.sc.Mint(sp)
}

// mintWhere mints receipts of the case's spec, varying the lengths of the
// grant id, the granted scope and the jti (and with them where each
// segment ends), until ok holds.
func (c *hcase) mintWhere(ok func(*pacttest.Receipt) bool) *pacttest.Receipt {
	c.t.Helper()
	for k := range 54 {
		sp := c.spec
		sp.GrantID += strings.Repeat("g", k%3)
		if sp.Granted == "" {
			sp.Granted = "orders:read orders:cancel"
		}
		sp.Granted += strings.Repeat(" z", k/3%3)
		sp.Jti = fmt.Sprintf("jti-%s-%s", c.id, strings.Repeat("j", k/9%3))
		r := c.h.sc.Mint(sp)
		if ok(r) {
			c.spec.GrantID = sp.GrantID
			return r
		}
	}
	c.t.Fatalf("no receipt of the shape the case needs")
	return nil
}

func (c *hcase) receipt(r *pacttest.Receipt) hostilePost {
	return hostilePost{body: post(r), jws: r.ReceiptJWS}
}

// mustCreate posts body as a receipt and wants it CREATED and AUTHORIZED.
func (c *hcase) mustCreate(body any) hostileRow {
	c.t.Helper()
	var rep hostileReply
	if code := c.h.call(c.t, "POST", "/v1/receipts", "writer", body, &rep); code != 200 || rep.Outcome != "APPEND_OUTCOME_CREATED" || rep.Row.Status != "ROW_STATUS_AUTHORIZED" {
		c.t.Fatalf("legitimate receipt: %d %s %s; checks %+v", code, rep.Outcome, rep.Row.Status, rep.Row.Verifier.Checks)
	}
	c.stored++
	return rep.Row
}

// postReceipt posts body and returns the reply.
func (c *hcase) postReceipt(body any) (int, hostileReply) {
	var rep hostileReply
	code := c.h.call(c.t, "POST", "/v1/receipts", "writer", body, &rep)
	if code == 200 && rep.Row.Principal == c.spec.User && rep.Outcome != "APPEND_OUTCOME_ALREADY_RECORDED" {
		c.stored++
	}
	return code, rep
}

// list lists rows by one filter (and a status when set) over REST as
// support, wanting 200.
func (c *hcase) list(filter, value, status string) []hostileRow {
	c.t.Helper()
	q := filter + "=" + url.QueryEscape(value)
	if status != "" {
		q += "&status=" + status
	}
	var l struct{ Rows []hostileRow }
	if code := c.h.call(c.t, "GET", "/v1/rows?"+q, "support", nil, &l); code != 200 {
		c.t.Errorf("GET /v1/rows?%s = %d: support's lookup broken", q, code)
	}
	return l.Rows
}

func ids(rows []hostileRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// nothingStored: a rejected post left no row.
func (c *hcase) nothingStored(p hostilePost) {
	c.t.Helper()
	if rows := c.list("principal", c.spec.User, ""); len(rows) != c.stored {
		c.t.Errorf("rejected post: %d rows under %s, want %d: %v", len(rows), c.spec.User, c.stored, ids(rows))
	}
	if rows := c.list("target", c.spec.Target, ""); len(rows) > c.stored {
		c.t.Errorf("rejected post: %d rows for target %s, want at most %d", len(rows), c.spec.Target, c.stored)
	}
	if p.jws != "" {
		if id := sha256Hex(p.jws); id != c.first.ID {
			if code := c.h.call(c.t, "GET", "/v1/rows/"+id, "support", nil, nil); code != http.StatusNotFound {
				c.t.Errorf("GET the rejected receipt's row id = %d, want 404", code)
			}
		}
	}
}

// periods are the default policy's class periods in months (read only:
// 90 days).
var periods = map[string]int{
	"RETENTION_CLASS_MONEY_MOVED":     18,
	"RETENTION_CLASS_ACCOUNT_CHANGED": 12,
	"RETENTION_CLASS_REFUSED":         12,
}

func parseTime(t *testing.T, what, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%s %q: %v", what, s, err)
	}
	return v
}

// near reports whether got is want within a second (the ledger may keep
// retain-until to the second).
func near(got, want time.Time) bool {
	d := got.Sub(want)
	return d > -time.Second && d < time.Second
}

func (c *hcase) assertRow(w hostileWant, rep hostileReply) {
	t := c.t
	t.Helper()
	row := rep.Row
	wantOutcome := w.outcome
	if wantOutcome == "" {
		wantOutcome = "APPEND_OUTCOME_CREATED"
		if w.dupOfFirst {
			wantOutcome = "APPEND_OUTCOME_DUPLICATE"
		}
	}
	if row.Kind == "ROW_KIND_REFUSAL" {
		wantOutcome = "" // AppendRefusal answers the row only
	}
	if w.anyDup && w.outcome == "" && rep.Outcome == "APPEND_OUTCOME_DUPLICATE" {
		wantOutcome = rep.Outcome // a replay of the case's request JWT may be named a duplicate too
	}
	if rep.Outcome != wantOutcome {
		t.Errorf("outcome %s, want %s", rep.Outcome, wantOutcome)
	}
	if !w.anyStatus && row.Status != w.status {
		t.Errorf("status %s, want %s; checks %+v", row.Status, w.status, row.Verifier.Checks)
	}
	if w.status == "ROW_STATUS_DUPLICATE" || w.dupOfFirst {
		if row.Status == "ROW_STATUS_AUTHORIZED" {
			t.Errorf("a replay was recorded as a second AUTHORIZED row")
		}
	}
	switch {
	case w.anyDup:
	case w.dupOfFirst:
		if row.Verifier.DuplicateOf != c.first.ID || c.first.ID == "" {
			t.Errorf("duplicateOf %q, want the first row %q", row.Verifier.DuplicateOf, c.first.ID)
		}
	case row.Verifier.DuplicateOf != "" && wantOutcome != "APPEND_OUTCOME_ALREADY_RECORDED":
		t.Errorf("duplicateOf %q, want none", row.Verifier.DuplicateOf)
	}
	for _, x := range []struct {
		names  []string
		result string
	}{{w.fail, "CHECK_RESULT_FAIL"}, {w.pass, "CHECK_RESULT_PASS"}, {w.skipped, "CHECK_RESULT_SKIPPED"}} {
		for _, n := range x.names {
			ch := row.check(n)
			if ch.Result != x.result {
				t.Errorf("check %s = %s (%s), want %s", n, ch.Result, ch.Detail, x.result)
			}
			if x.result != "CHECK_RESULT_PASS" && w.detail != "" && !strings.Contains(ch.Detail, w.detail) {
				t.Errorf("check %s detail %q lacks %q", n, ch.Detail, w.detail)
			}
		}
	}
	if w.class != "" && row.RetentionClass != w.class {
		t.Errorf("retention class %s, want %s", row.RetentionClass, w.class)
	}
	if row.RecordedAt == "" || row.RetainUntil == "" {
		if row.RetentionClass != "RETENTION_CLASS_INCIDENT" {
			t.Errorf("recordedAt %q retainUntil %q: both must be set", row.RecordedAt, row.RetainUntil)
		}
	} else {
		c.assertRetention(w, row)
	}
	if w.check != nil {
		w.check(t, c, row)
	}
	c.readBack(row)
}

// assertRetention: retention counts from the later of the verified issue
// time (at most an hour past recordedAt) and recordedAt; an unverified ts
// never counts.
func (c *hcase) assertRetention(w hostileWant, row hostileRow) {
	t := c.t
	t.Helper()
	recorded := parseTime(t, "recordedAt", row.RecordedAt)
	until := parseTime(t, "retainUntil", row.RetainUntil)
	if w.retainMonths > 0 {
		if want := recorded.AddDate(0, w.retainMonths, 0); !near(until, want) {
			t.Errorf("retainUntil %s, want recordedAt %s + %d months = %s", row.RetainUntil, row.RecordedAt, w.retainMonths, want.Format(time.RFC3339))
		}
	}
	if row.RetentionClass == "RETENTION_CLASS_INCIDENT" || row.IssuedAt == "" {
		return
	}
	start := recorded
	if issued, err := time.Parse(time.RFC3339Nano, row.IssuedAt); err == nil && issued.After(recorded) &&
		row.Kind == "ROW_KIND_RECEIPT" && row.check("receipt_signature").Result == "CHECK_RESULT_PASS" {
		start = issued
		if latest := recorded.Add(time.Hour); start.After(latest) {
			start = latest
		}
	}
	want := start.AddDate(0, 0, 90)
	if m, ok := periods[row.RetentionClass]; ok {
		want = start.AddDate(0, m, 0)
	}
	if !near(until, want) {
		t.Errorf("retainUntil %s for %s, want %s (from %s; issuedAt %s, recordedAt %s)", row.RetainUntil, row.RetentionClass,
			want.Format(time.RFC3339), start.Format(time.RFC3339), row.IssuedAt, row.RecordedAt)
	}
}

// readBack: the row answers by id and is listed by its principal, each
// target and its grant, over REST and gRPC.
func (c *hcase) readBack(row hostileRow) {
	c.t.Helper()
	assertReadable(c.t, c.h.env, c.h.rpc, row.Row)
}

// Wants shared by many cases.
// unauthorized is an UNAUTHORIZED row whose checks failed. One whose
// receipt signature held records an action that ran (a cancel_order): it
// keeps its actions' class, money moved; a forged one the refused class.
func unauthorized(checks ...string) hostileWant {
	if !slices.Contains(checks, "receipt_signature") {
		return hostileWant{status: "ROW_STATUS_UNAUTHORIZED", fail: checks, class: "RETENTION_CLASS_MONEY_MOVED", retainMonths: 18}
	}
	return hostileWant{status: "ROW_STATUS_UNAUTHORIZED", fail: checks, class: "RETENTION_CLASS_REFUSED", retainMonths: 12}
}

var (
	badRequest = hostileWant{code: http.StatusBadRequest}
	duplicate  = hostileWant{status: "ROW_STATUS_DUPLICATE", dupOfFirst: true}
	authorized = hostileWant{status: "ROW_STATUS_AUTHORIZED", class: "RETENTION_CLASS_MONEY_MOVED"}
)

// fresh is an attack on a newly minted receipt of the case's spec.
func fresh(edit func(c *hcase, r *pacttest.Receipt)) func(c *hcase) hostilePost {
	return func(c *hcase) hostilePost {
		r := c.mint()
		edit(c, r)
		return c.receipt(r)
	}
}

// withBody is an attack on a newly minted receipt's post body.
func withBody(edit func(c *hcase, r *pacttest.Receipt, body map[string]any)) func(c *hcase) hostilePost {
	return func(c *hcase) hostilePost {
		r := c.mint()
		body := post(r)
		edit(c, r, body)
		return hostilePost{body: body, jws: r.ReceiptJWS}
	}
}

// token selects one of a receipt's three compact tokens.
type token struct {
	name string
	get  func(r *pacttest.Receipt) *string
}

var (
	tokReceipt = token{"receipt", func(r *pacttest.Receipt) *string { return &r.ReceiptJWS }}
	tokRequest = token{"request JWT", func(r *pacttest.Receipt) *string { return &r.RequestJWT }}
	tokDeleg   = token{"delegation token", func(r *pacttest.Receipt) *string { return &r.DelegationToken }}
)

var segNames = []string{"header", "payload", "signature"}

// reencoding is a way to write a segment's bytes in another form.
type reencoding struct {
	name string
	f    func(string) (string, bool)
}

var (
	encTail  = reencoding{"non-zero unused bits in the last character", pacttest.NonCanonicalTail}
	encPad   = reencoding{"'=' padding", pacttest.Padded}
	encStd   = reencoding{"'+' and '/' for '-' and '_'", pacttest.StdAlphabet}
	encLF    = reencoding{"a line break inside", pacttest.Insert("\n")}
	encCRLF  = reencoding{"CRLF inside", pacttest.Insert("\r\n")}
	encSpace = reencoding{"a space inside", pacttest.Insert(" ")}
	encTab   = reencoding{"a tab inside", pacttest.Insert("\t")}
)

// reencoded: the case's legitimate receipt is recorded, then posted again
// with one segment of one token re-encoded: 400, nothing stored.
func reencoded(tok token, seg int, enc reencoding) hostileCase {
	return hostileCase{
		name:  fmt.Sprintf("re-encoded %s %s: %s", tok.name, segNames[seg], enc.name),
		legit: true,
		legitWhere: func(r *pacttest.Receipt) bool {
			_, ok := pacttest.ReplaceSegment(*tok.get(r), seg, enc.f)
			return ok
		},
		attack: func(c *hcase) hostilePost {
			r := *c.legit
			s, _ := pacttest.ReplaceSegment(*tok.get(&r), seg, enc.f)
			*tok.get(&r) = s
			return c.receipt(&r)
		},
		want: badRequest,
	}
}

// wholeToken: the legitimate receipt posted again with s around one whole
// token.
func wholeToken(tok token, name string, f func(string) string) hostileCase {
	return hostileCase{
		name:  fmt.Sprintf("re-encoded %s: %s", tok.name, name),
		legit: true,
		attack: func(c *hcase) hostilePost {
			r := *c.legit
			*tok.get(&r) = f(*tok.get(&r))
			return c.receipt(&r)
		},
		want: badRequest,
	}
}

// refusal is a refusal body for the case.
func (c *hcase) refusal(edit func(m map[string]any)) hostilePost {
	m := map[string]any{
		"claimedPrincipal": c.spec.User, "claimedAgent": "assistant from MyHelper",
		"action": map[string]any{"tool": "change_address", "target": c.spec.Target},
		"reason": "no receipt; routed to human", "observedAt": "2026-10-06T17:20:10Z",
	}
	if edit != nil {
		edit(m)
	}
	return hostilePost{path: "/v1/refusals", body: m}
}

// claimTimes are JWT time values a buggy signer could write, with the text
// the FAIL detail must carry.
var claimTimes = []struct {
	name string
	v    any
	raw  string
}{
	{"1e300", json.Number("1e300"), "1e300"},
	{"-1e300", json.Number("-1e300"), "-1e300"},
	{"year 10000", json.Number("253402300800"), "253402300800"},
	{"before year 1", json.Number("-62135596801"), "-62135596801"},
	{"a string", "next tuesday", "next tuesday"},
}

func hostileCases() []hostileCase {
	var cases []hostileCase

	// 1. Non-canonical base64url: 400, nothing stored.
	for _, x := range []struct {
		tok token
		seg int
		enc reencoding
	}{
		{tokReceipt, 0, encTail}, {tokReceipt, 1, encTail}, {tokReceipt, 2, encTail},
		{tokReceipt, 0, encPad}, {tokReceipt, 1, encPad}, {tokReceipt, 2, encPad},
		{tokReceipt, 2, encStd}, {tokReceipt, 1, encLF}, {tokReceipt, 2, encCRLF},
		{tokReceipt, 0, encSpace}, {tokReceipt, 2, encTab},
		{tokRequest, 1, encTail}, {tokRequest, 2, encTail}, {tokRequest, 2, encPad},
		{tokRequest, 2, encStd}, {tokRequest, 1, encLF}, {tokRequest, 0, encSpace},
		{tokDeleg, 0, encTail}, {tokDeleg, 1, encTail}, {tokDeleg, 2, encTail},
		{tokDeleg, 1, encPad}, {tokDeleg, 2, encStd}, {tokDeleg, 2, encLF},
	} {
		cases = append(cases, reencoded(x.tok, x.seg, x.enc))
	}
	cases = append(cases,
		wholeToken(tokReceipt, "a trailing line break", func(s string) string { return s + "\n" }),
		wholeToken(tokReceipt, "a leading space", func(s string) string { return " " + s }),
		wholeToken(tokRequest, "a trailing CRLF", func(s string) string { return s + "\r\n" }),
		wholeToken(tokDeleg, "a trailing space", func(s string) string { return s + " " }),
		hostileCase{
			name: "re-encoded receipt signature posted before the original",
			attack: func(c *hcase) hostilePost {
				r := c.mintWhere(func(r *pacttest.Receipt) bool { return true })
				r.ReceiptJWS, _ = pacttest.ReplaceSegment(r.ReceiptJWS, 2, pacttest.NonCanonicalTail)
				return c.receipt(r)
			},
			want: badRequest,
		},
		hostileCase{
			name: "refusal with a re-encoded request JWT signature",
			attack: func(c *hcase) hostilePost {
				jwt, _ := pacttest.ReplaceSegment(c.mint().RequestJWT, 2, pacttest.NonCanonicalTail)
				return c.refusal(func(m map[string]any) { m["requestJwt"] = jwt })
			},
			want: badRequest,
		},
		hostileCase{
			name: "refusal with a line break in its request JWT",
			attack: func(c *hcase) hostilePost {
				jwt, _ := pacttest.ReplaceSegment(c.mint().RequestJWT, 1, pacttest.Insert("\n"))
				return c.refusal(func(m map[string]any) { m["requestJwt"] = jwt })
			},
			want: badRequest,
		},
	)

	// 2. Malleated ES256 signatures and replays: never a second AUTHORIZED.
	cases = append(cases,
		hostileCase{
			name: "malleated receipt signature (r, n-s)", legit: true,
			attack: func(c *hcase) hostilePost {
				r := *c.legit
				r.ReceiptJWS = pacttest.MalleateES256(r.ReceiptJWS)
				return c.receipt(&r)
			},
			want: duplicate,
		},
		hostileCase{
			name: "malleated request JWT with the same receipt", legit: true,
			attack: func(c *hcase) hostilePost {
				r := *c.legit
				r.RequestJWT = pacttest.MalleateES256(r.RequestJWT)
				return c.receipt(&r)
			},
			want: duplicate,
		},
		hostileCase{
			name: "malleated delegation token with the same receipt", legit: true,
			attack: func(c *hcase) hostilePost {
				r := *c.legit
				r.DelegationToken = pacttest.MalleateES256(r.DelegationToken)
				return c.receipt(&r)
			},
			want: duplicate,
		},
		hostileCase{
			name: "malleated request JWT with a different valid receipt", legit: true,
			attack: func(c *hcase) hostilePost {
				r := c.mint(func(sp *pacttest.Spec) { sp.Target += "-2" })
				r.RequestJWT = pacttest.MalleateES256(c.legit.RequestJWT)
				return c.receipt(r)
			},
			want: duplicate,
		},
		hostileCase{
			name: "malleated receipt, request JWT and delegation token", legit: true,
			attack: func(c *hcase) hostilePost {
				r := *c.legit
				r.ReceiptJWS = pacttest.MalleateES256(r.ReceiptJWS)
				r.RequestJWT = pacttest.MalleateES256(r.RequestJWT)
				r.DelegationToken = pacttest.MalleateES256(r.DelegationToken)
				return c.receipt(&r)
			},
			want: duplicate,
		},
		hostileCase{
			name: "malleated receipt with a new valid request JWT", legit: true,
			attack: func(c *hcase) hostilePost {
				r := *c.legit
				r.ReceiptJWS = pacttest.MalleateES256(r.ReceiptJWS)
				r.RequestJWT = c.mint().RequestJWT
				return c.receipt(&r)
			},
			want: duplicate,
		},
		hostileCase{
			name: "byte-identical re-post", legit: true,
			attack: func(c *hcase) hostilePost { return c.receipt(c.legit) },
			want: hostileWant{outcome: "APPEND_OUTCOME_ALREADY_RECORDED", status: "ROW_STATUS_AUTHORIZED",
				check: func(t *testing.T, c *hcase, row hostileRow) {
					if row.ID != c.first.ID {
						t.Errorf("re-post answered row %s, want the original %s", row.ID, c.first.ID)
					}
				}},
		},
		hostileCase{
			name: "malleated receipt posted twice", legit: true,
			attack: func(c *hcase) hostilePost {
				r := *c.legit
				r.ReceiptJWS = pacttest.MalleateES256(r.ReceiptJWS)
				code, rep := c.postReceipt(post(&r))
				if code != 200 || rep.Row.Status == "ROW_STATUS_AUTHORIZED" {
					c.t.Errorf("first malleated post: %d %s %s", code, rep.Outcome, rep.Row.Status)
				}
				c.prev = rep.Row
				return c.receipt(&r)
			},
			want: hostileWant{outcome: "APPEND_OUTCOME_ALREADY_RECORDED", status: "ROW_STATUS_DUPLICATE", dupOfFirst: true,
				check: func(t *testing.T, c *hcase, row hostileRow) {
					if row.ID != c.prev.ID {
						t.Errorf("re-post answered row %s, want the malleated post's %s", row.ID, c.prev.ID)
					}
				}},
		},
		hostileCase{
			name: "original posted after its malleated form",
			attack: func(c *hcase) hostilePost {
				r := c.mint()
				m := *r
				m.ReceiptJWS = pacttest.MalleateES256(r.ReceiptJWS)
				c.first = c.mustCreate(post(&m))
				return c.receipt(r)
			},
			want: duplicate,
		},
		hostileCase{
			// A writer holding a real token ties a made-up refusal to
			// its grant: a refusal row under the grant, never more.
			name: "made-up refusal under a real delegation token",
			attack: func(c *hcase) hostilePost {
				r := c.mint()
				return c.refusal(func(m map[string]any) {
					m["delegationToken"], m["requestJwt"], m["observedAt"] = r.DelegationToken, r.RequestJWT, "2026-10-07T13:12:44Z"
				})
			},
			want: hostileWant{status: "ROW_STATUS_UNAUTHORIZED", class: "RETENTION_CLASS_REFUSED", fail: []string{"receipt_signature"},
				pass: []string{"request_signature", "delegation_token", "bindings", "grant_not_revoked"},
				check: func(t *testing.T, c *hcase, row hostileRow) {
					if row.GrantID != c.spec.GrantID || row.Principal != c.spec.User {
						t.Errorf("refusal under grant %q of %q, want the token's %s of %s", row.GrantID, row.Principal, c.spec.GrantID, c.spec.User)
					}
				}},
		},
		hostileCase{
			// A grant id is a claim until the Brand's signature vouches
			// for it: a token re-signed with another key ties nothing.
			name: "refusal naming a grant by a forged delegation token",
			attack: func(c *hcase) hostilePost {
				r := c.mint()
				forged := pacttest.MustKey("brand-k3", jose.ES256).Sign(r.TokenClaims)
				return c.refusal(func(m map[string]any) {
					m["delegationToken"], m["requestJwt"], m["observedAt"] = forged, r.RequestJWT, "2026-10-07T13:12:44Z"
				})
			},
			want: hostileWant{status: "ROW_STATUS_UNAUTHORIZED", class: "RETENTION_CLASS_REFUSED", fail: []string{"receipt_signature", "delegation_token"},
				skipped: []string{"bindings", "grant_not_revoked"},
				check: func(t *testing.T, c *hcase, row hostileRow) {
					if row.GrantID != "" || len(c.list("grantId", c.spec.GrantID, "")) != 0 {
						t.Errorf("a forged token tied the refusal to grant %q", row.GrantID)
					}
				}},
		},
		hostileCase{
			// Another agent's request JWT beside a real token: the token
			// names its own agent, so it ties nothing.
			name: "refusal with a real delegation token and another agent's request JWT",
			attack: func(c *hcase) hostilePost {
				r := c.mint()
				other := c.h.b.Mint(c.spec)
				return c.refusal(func(m map[string]any) {
					m["delegationToken"], m["requestJwt"], m["observedAt"] = r.DelegationToken, other.RequestJWT, "2026-10-07T13:12:44Z"
				})
			},
			want: hostileWant{status: "ROW_STATUS_UNAUTHORIZED", class: "RETENTION_CLASS_REFUSED", fail: []string{"receipt_signature", "bindings"},
				pass: []string{"request_signature", "delegation_token"},
				check: func(t *testing.T, c *hcase, row hostileRow) {
					if row.GrantID != "" {
						t.Errorf("a token of another agent tied the refusal to grant %q", row.GrantID)
					}
				}},
		},
		hostileCase{
			name: "refusal delegation token over 16 KiB",
			attack: func(c *hcase) hostilePost {
				r := c.mint()
				r.TokenClaims["note"] = strings.Repeat("a", 17<<10)
				c.h.sc.Resign(r)
				return c.refusal(func(m map[string]any) { m["delegationToken"] = r.DelegationToken })
			},
			want: badRequest,
		},
		hostileCase{
			name: "refusal with a re-encoded delegation token signature",
			attack: func(c *hcase) hostilePost {
				tok, _ := pacttest.ReplaceSegment(c.mint().DelegationToken, 2, pacttest.NonCanonicalTail)
				return c.refusal(func(m map[string]any) { m["delegationToken"] = tok })
			},
			want: badRequest,
		},
		hostileCase{
			name: "refusal replayed with a malleated request JWT",
			attack: func(c *hcase) hostilePost {
				jwt := c.mint().RequestJWT
				first := c.refusal(func(m map[string]any) { m["requestJwt"] = jwt })
				var rep hostileReply
				if code := c.h.call(c.t, "POST", "/v1/refusals", "writer", first.body, &rep); code != 200 {
					c.t.Fatalf("first refusal = %d", code)
				}
				c.stored++
				c.prev = rep.Row
				return c.refusal(func(m map[string]any) { m["requestJwt"] = pacttest.MalleateES256(jwt) })
			},
			want: hostileWant{status: "ROW_STATUS_UNAUTHORIZED", anyDup: true, class: "RETENTION_CLASS_REFUSED",
				check: func(t *testing.T, c *hcase, row hostileRow) {
					if row.ID != c.prev.ID {
						t.Errorf("malleated refusal is row %s, want the first refusal's %s", row.ID, c.prev.ID)
					}
				}},
		},
		hostileCase{
			name: "RS256 receipt with one signature byte changed",
			attack: func(c *hcase) hostilePost {
				r := c.mint()
				r.ReceiptJWS = c.h.r1.SignHeader(c.h.r1.HeaderOf(), r.Claims)
				c.first = c.mustCreate(post(r))
				r.ReceiptJWS = pacttest.TamperSignature(r.ReceiptJWS)
				return c.receipt(r)
			},
			want: hostileWant{status: "ROW_STATUS_UNAUTHORIZED", fail: []string{"receipt_signature"}, anyDup: true, class: "RETENTION_CLASS_REFUSED"},
		},
	)

	// 3. Unverified times never shorten retention.
	attacker := pacttest.MustKey("brand-k3", jose.ES256)
	forged := func(name string, at func() time.Time) hostileCase {
		return hostileCase{
			name: name,
			attack: fresh(func(c *hcase, r *pacttest.Receipt) {
				r.Claims["ts"] = at().UTC().Format(time.RFC3339)
				r.ReceiptJWS = attacker.Sign(r.Claims)
			}),
			want: unauthorized("receipt_signature"),
		}
	}
	cases = append(cases,
		forged("forged receipt backdated 400 days", func() time.Time { return time.Now().AddDate(0, 0, -400) }),
		forged("forged receipt backdated to 2019", func() time.Time { return time.Date(2019, 3, 1, 0, 0, 0, 0, time.UTC) }),
		forged("forged receipt backdated to the epoch", func() time.Time { return time.Unix(0, 0) }),
		hostileCase{
			name: "alg none receipt backdated 400 days",
			attack: fresh(func(c *hcase, r *pacttest.Receipt) {
				r.Claims["ts"] = time.Now().AddDate(0, 0, -400).UTC().Format(time.RFC3339)
				r.ReceiptJWS = pacttest.SignWith(map[string]any{"alg": "none"}, r.Claims, pacttest.Unsigned)
			}),
			want: unauthorized("receipt_signature"),
		},
		hostileCase{
			name: "valid receipt posted 400 days late",
			spec: func(sp *pacttest.Spec) { sp.At = time.Now().AddDate(0, 0, -400).UTC().Truncate(time.Second) },
			attack: func(c *hcase) hostilePost {
				return c.receipt(c.mint())
			},
			want: hostileWant{status: "ROW_STATUS_AUTHORIZED", class: "RETENTION_CLASS_MONEY_MOVED", retainMonths: 18},
		},
		hostileCase{
			name: "valid receipt dated years ahead keeps retention from an hour past its recording",
			spec: func(sp *pacttest.Spec) { sp.At = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) },
			attack: func(c *hcase) hostilePost {
				return c.receipt(c.mint())
			},
			want: hostileWant{status: "ROW_STATUS_AUTHORIZED", class: "RETENTION_CLASS_MONEY_MOVED",
				check: func(t *testing.T, _ *hcase, row hostileRow) {
					recorded := parseTime(t, "recordedAt", row.RecordedAt)
					if want := recorded.Add(time.Hour).AddDate(0, 18, 0); !near(parseTime(t, "retainUntil", row.RetainUntil), want) {
						t.Errorf("retainUntil %s, want an hour past recordedAt + 18 months %s, not ts + 18 months", row.RetainUntil, want.Format(time.RFC3339))
					}
				}},
		},
		hostileCase{
			name: "refusal observed in 2019",
			attack: func(c *hcase) hostilePost {
				return c.refusal(func(m map[string]any) { m["observedAt"] = "2019-01-01T00:00:00Z" })
			},
			want: hostileWant{status: "ROW_STATUS_UNAUTHORIZED", class: "RETENTION_CLASS_REFUSED", retainMonths: 12},
		},
		hostileCase{
			name: "refusal observed at the epoch",
			attack: func(c *hcase) hostilePost {
				return c.refusal(func(m map[string]any) { m["observedAt"] = "1970-01-01T00:00:00Z" })
			},
			want: hostileWant{status: "ROW_STATUS_UNAUTHORIZED", class: "RETENTION_CLASS_REFUSED", retainMonths: 12},
		},
	)

	// 4. Times at the edges: receipt ts and refusal observedAt out of range
	// are 400 with nothing stored; JWT times out of range are a FAIL check
	// carrying the raw value.
	for _, ts := range []any{"0000-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "9000-01-01T00:00:00Z",
		"9999-12-31T23:59:59Z", "+10000-01-01T00:00:00Z", "1e300", json.Number("1e300"), "2026-10-07 13:12:44"} {
		name := fmt.Sprintf("receipt ts %q", ts)
		if n, ok := ts.(json.Number); ok {
			name = "receipt ts the number " + n.String()
		}
		cases = append(cases, hostileCase{
			name: name,
			attack: fresh(func(c *hcase, r *pacttest.Receipt) {
				r.Claims["ts"] = ts
				r.ReceiptJWS = c.h.sc.Brand.Key.Sign(r.Claims)
			}),
			want: badRequest,
		})
	}
	cases = append(cases,
		hostileCase{
			name:   "receipt ts at the epoch",
			spec:   func(sp *pacttest.Spec) { sp.At = time.Unix(0, 0).UTC() },
			attack: func(c *hcase) hostilePost { return c.receipt(c.mint()) },
			want:   hostileWant{anyStatus: true},
		},
		hostileCase{
			name:   "receipt ts in 8999",
			spec:   func(sp *pacttest.Spec) { sp.At = time.Date(8999, 12, 1, 0, 0, 0, 0, time.UTC) },
			attack: func(c *hcase) hostilePost { return c.receipt(c.mint()) },
			want:   hostileWant{status: "ROW_STATUS_AUTHORIZED", class: "RETENTION_CLASS_MONEY_MOVED"},
		},
	)
	for _, at := range []struct{ name, v string }{
		{"year 0", "0000-01-01T00:00:00Z"}, {"year 1", "0001-01-01T00:00:00Z"}, {"1969", "1969-12-31T23:59:59Z"},
		{"year 9999", "9999-12-31T23:59:59Z"}, {"tomorrow", ""},
	} {
		cases = append(cases, hostileCase{
			name: "refusal observedAt " + at.name,
			attack: func(c *hcase) hostilePost {
				v := at.v
				if v == "" {
					v = time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
				}
				return c.refusal(func(m map[string]any) { m["observedAt"] = v })
			},
			want: badRequest,
		})
	}
	for _, tok := range []struct {
		name, check string
		claims      func(r *pacttest.Receipt) map[string]any
	}{
		{"request JWT", "request_signature", func(r *pacttest.Receipt) map[string]any { return r.RequestClaims }},
		{"delegation token", "delegation_token", func(r *pacttest.Receipt) map[string]any { return r.TokenClaims }},
	} {
		for _, claim := range []string{"iat", "exp", "nbf"} {
			for _, v := range claimTimes {
				w := unauthorized(tok.check)
				w.detail = v.raw
				cases = append(cases, hostileCase{
					name: fmt.Sprintf("%s %s %s", tok.name, claim, v.name),
					attack: fresh(func(c *hcase, r *pacttest.Receipt) {
						tok.claims(r)[claim] = v.v
						c.h.sc.Resign(r)
					}),
					want: w,
				})
			}
		}
	}

	// 5. Limits that cannot be evaluated are SKIPPED, never PASS.
	amountSpec := func(amount string) func(*pacttest.Spec) {
		return func(sp *pacttest.Spec) { sp.ArgsJSON = fmt.Sprintf(`{"order":%q,"amount":%s}`, sp.Target, amount) }
	}
	limit := func(max string) func(c *hcase) hostilePost {
		return withBody(func(_ *hcase, _ *pacttest.Receipt, body map[string]any) {
			body["limits"] = map[string]any{"amountMax": max}
		})
	}
	for _, max := range []string{"NaN", "nan", "Inf", "+Inf", "-Inf", "Infinity", "1e999", "0x10", "1_000"} {
		cases = append(cases, hostileCase{
			name:   "limits amountMax " + max,
			spec:   amountSpec("50"),
			attack: limit(max),
			want:   hostileWant{status: "ROW_STATUS_AUTHORIZED", skipped: []string{"within_limits"}, detail: "amountMax", class: "RETENTION_CLASS_MONEY_MOVED"},
		})
	}
	cases = append(cases,
		hostileCase{name: "limits amountMax 100, amount 50", spec: amountSpec("50"), attack: limit("100"),
			want: hostileWant{status: "ROW_STATUS_AUTHORIZED", pass: []string{"within_limits"}, class: "RETENTION_CLASS_MONEY_MOVED"}},
		hostileCase{name: "limits amountMax 100, amount 150", spec: amountSpec("150"), attack: limit("100"),
			want: hostileWant{status: "ROW_STATUS_INCIDENT", fail: []string{"within_limits"}, class: "RETENTION_CLASS_INCIDENT"}},
		hostileCase{name: "limits amountMax 100, amount 1e999", spec: amountSpec("1e999"), attack: limit("100"),
			want: hostileWant{status: "ROW_STATUS_AUTHORIZED", skipped: []string{"within_limits"}, class: "RETENTION_CLASS_MONEY_MOVED"}},
		hostileCase{name: "limits amountMax 100, amount a string", spec: amountSpec(`"NaN"`), attack: limit("100"),
			want: hostileWant{status: "ROW_STATUS_AUTHORIZED", skipped: []string{"within_limits"}, class: "RETENTION_CLASS_MONEY_MOVED"}},
	)

	// 6. The class is never shorter than the scopes used imply.
	noActions := func(c *hcase, r *pacttest.Receipt) {
		r.Claims["actions"] = []any{}
		r.Actions = nil
		c.h.sc.Resign(r)
	}
	cases = append(cases,
		hostileCase{name: "no actions, scope orders:cancel", attack: fresh(noActions), want: authorized},
		hostileCase{name: "no actions, unknown scope flights:rebook",
			spec: func(sp *pacttest.Spec) {
				sp.ScopesUsed, sp.Granted = []string{"flights:rebook"}, "orders:read flights:rebook"
			},
			attack: fresh(noActions), want: authorized},
		hostileCase{name: "no actions, scope orders:read only",
			spec:   func(sp *pacttest.Spec) { sp.ScopesUsed = []string{"orders:read"} },
			attack: fresh(noActions), want: hostileWant{status: "ROW_STATUS_AUTHORIZED", class: "RETENTION_CLASS_READ_ONLY"}},
		hostileCase{name: "read-only tool under scope orders:cancel",
			spec:   func(sp *pacttest.Spec) { sp.Tool = "lookup_orders" },
			attack: fresh(func(*hcase, *pacttest.Receipt) {}), want: authorized},
		hostileCase{name: "account tool under scope orders:cancel",
			spec:   func(sp *pacttest.Spec) { sp.Tool = "change_address" },
			attack: fresh(func(*hcase, *pacttest.Receipt) {}), want: authorized},
	)

	// 7. NUL bytes, oversized fields and lookalike ids.
	cases = append(cases,
		hostileCase{name: "NUL in action target", attack: withBody(func(_ *hcase, _ *pacttest.Receipt, b map[string]any) {
			b["actions"].([]map[string]string)[0]["target"] += "\x00"
		}), want: badRequest},
		hostileCase{name: "NUL in action tool", attack: withBody(func(_ *hcase, _ *pacttest.Receipt, b map[string]any) {
			b["actions"].([]map[string]string)[0]["tool"] = "cancel_order\x00"
		}), want: badRequest},
		hostileCase{name: "NUL in contextId", attack: withBody(func(_ *hcase, _ *pacttest.Receipt, b map[string]any) { b["contextId"] = "ctx-1\x00" }), want: badRequest},
		hostileCase{name: "NUL in messageId", attack: withBody(func(_ *hcase, _ *pacttest.Receipt, b map[string]any) { b["messageId"] = "\x00msg" }), want: badRequest},
	)
	for _, f := range []string{"claimedPrincipal", "claimedAgent", "reason", "action.tool", "action.target", "delegationToken"} {
		cases = append(cases, hostileCase{
			name: "NUL in refusal " + f,
			attack: func(c *hcase) hostilePost {
				return c.refusal(func(m map[string]any) {
					if a, ok := strings.CutPrefix(f, "action."); ok {
						act := m["action"].(map[string]any)
						act[a] = fmt.Sprint(act[a]) + "\x00"
						return
					}
					m[f] = fmt.Sprint(m[f]) + "\x00"
				})
			},
			want: badRequest,
		})
	}
	big := strings.Repeat("a", 17<<10)
	cases = append(cases,
		hostileCase{name: "receipt JWS over 16 KiB", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.Claims["note"] = big
			r.ReceiptJWS = c.h.sc.Brand.Key.Sign(r.Claims)
		}), want: badRequest},
		hostileCase{name: "request JWT over 16 KiB", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.RequestClaims["note"] = big
			c.h.sc.Resign(r)
		}), want: badRequest},
		hostileCase{name: "delegation token over 16 KiB", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.TokenClaims["note"] = big
			c.h.sc.Resign(r)
		}), want: badRequest},
		hostileCase{name: "65 actions", attack: withBody(func(_ *hcase, _ *pacttest.Receipt, b map[string]any) {
			one := b["actions"].([]map[string]string)[0]
			var many []map[string]string
			for range 65 {
				many = append(many, one)
			}
			b["actions"] = many
		}), want: badRequest},
		hostileCase{name: "argsJson over 16 KiB",
			spec:   func(sp *pacttest.Spec) { sp.ArgsJSON = `{"order":"x","pad":"` + strings.Repeat("p", 16<<10) + `"}` },
			attack: fresh(func(*hcase, *pacttest.Receipt) {}), want: badRequest},
	)
	for _, l := range []struct{ name, real, fake string }{
		{"hyphen U+2010", "acct-4821", "acct\u20104821"},
		{"Cyrillic a", "acct-4821", "\u0430cct-4821"},
		{"fullwidth digit", "acct-4821", "acct-\uff14821"},
		{"zero-width space", "acct-4821", "acct-48\u200b21"},
	} {
		cases = append(cases, hostileCase{
			name:  "lookalike principal, " + l.name,
			spec:  func(sp *pacttest.Spec) { sp.User = l.real + "-" + strings.TrimPrefix(sp.User, "acct-") },
			legit: true,
			attack: func(c *hcase) hostilePost {
				return c.receipt(c.mint(func(sp *pacttest.Spec) {
					sp.User = strings.Replace(sp.User, l.real, l.fake, 1)
					sp.GrantID += "-l"
				}))
			},
			want: hostileWant{status: "ROW_STATUS_AUTHORIZED", class: "RETENTION_CLASS_MONEY_MOVED",
				check: func(t *testing.T, c *hcase, row hostileRow) {
					fake := strings.Replace(c.spec.User, l.real, l.fake, 1)
					if row.Principal != fake {
						t.Errorf("principal %q, want the lookalike %q kept as signed", row.Principal, fake)
					}
					if got := ids(c.list("principal", c.spec.User, "")); !slices.Equal(got, []string{c.first.ID}) {
						t.Errorf("ListRows for the real principal: %v, want only %s", got, c.first.ID)
					}
					if got := ids(c.list("principal", fake, "")); !slices.Equal(got, []string{row.ID}) {
						t.Errorf("ListRows for the lookalike: %v, want only %s", got, row.ID)
					}
				}},
		})
	}
	cases = append(cases, hostileCase{
		name:  "lookalike target, hyphen U+2010",
		legit: true,
		attack: func(c *hcase) hostilePost {
			return c.receipt(c.mint(func(sp *pacttest.Spec) {
				sp.Target = strings.Replace(sp.Target, "-", "\u2010", 1)
				sp.User += "-l"
				sp.GrantID += "-l"
			}))
		},
		want: hostileWant{status: "ROW_STATUS_AUTHORIZED", class: "RETENTION_CLASS_MONEY_MOVED",
			check: func(t *testing.T, c *hcase, row hostileRow) {
				if got := ids(c.list("target", c.spec.Target, "")); !slices.Equal(got, []string{c.first.ID}) {
					t.Errorf("ListRows for the real target: %v, want only %s", got, c.first.ID)
				}
			}},
	})

	// 8. Keys, kids and algorithms a writer does not hold or should not
	// choose.
	cases = append(cases,
		hostileCase{name: "brand A receipt signed with brand B's key", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.ReceiptJWS = c.h.b.Brand.Key.Sign(r.Claims)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "brand A receipt with brand B's delegation token", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.DelegationToken = c.h.b.Mint(c.spec).DelegationToken
		}), want: unauthorized("delegation_token")},
		hostileCase{name: "receipt claiming brand B signed with brand A's key", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.Claims["brand"] = c.h.b.Brand.ID
			r.ReceiptJWS = c.h.sc.Brand.Key.Sign(r.Claims)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "brand B receipt with brand A's delegation token", attack: func(c *hcase) hostilePost {
			rb := c.h.b.Mint(c.spec)
			rb.DelegationToken = c.mint().DelegationToken
			return c.receipt(rb)
		}, want: unauthorized("delegation_token")},
		hostileCase{name: "request JWT signed with the other PA's key", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.RequestJWT = c.h.b.PA.Key.Sign(r.RequestClaims)
		}), want: unauthorized("request_signature")},
		hostileCase{name: "receipt from a brand not configured", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.Claims["brand"] = "https://brand.invalid/a2a/acme"
			r.ReceiptJWS = attacker.Sign(r.Claims)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "receipt with a swapped kid", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			hd := c.h.sc.Brand.Key.HeaderOf()
			hd["kid"] = "brand-k4"
			r.ReceiptJWS = c.h.sc.Brand.Key.SignHeader(hd, r.Claims)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "receipt signed by brand-k4 under kid brand-k3", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.ReceiptJWS = c.h.k4.SignHeader(c.h.sc.Brand.Key.HeaderOf(), r.Claims)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "request JWT with a swapped kid", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			hd := c.h.sc.PA.Key.HeaderOf()
			hd["kid"] = c.h.pa2.Kid
			r.RequestJWT = c.h.sc.PA.Key.SignHeader(hd, r.RequestClaims)
		}), want: unauthorized("request_signature")},
		hostileCase{name: "delegation token with a swapped kid", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			hd := c.h.sc.Brand.Key.HeaderOf()
			hd["kid"] = "brand-k4"
			r.DelegationToken = c.h.sc.Brand.Key.SignHeader(hd, r.TokenClaims)
		}), want: unauthorized("delegation_token")},
		hostileCase{name: "receipt kid path traversal", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			hd := c.h.sc.Brand.Key.HeaderOf()
			hd["kid"] = "../../jwks.json"
			r.ReceiptJWS = c.h.sc.Brand.Key.SignHeader(hd, r.Claims)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "receipt alg none", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.ReceiptJWS = pacttest.SignWith(map[string]any{"alg": "none", "kid": "brand-k3"}, r.Claims, pacttest.Unsigned)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "receipt alg none keeping the signature", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			segs := pacttest.Segments(r.ReceiptJWS)
			segs[0] = pacttest.Encode([]byte(`{"alg":"none","kid":"brand-k3","typ":"JWT"}`))
			r.ReceiptJWS = pacttest.Join(segs)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "request JWT alg none", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.RequestJWT = pacttest.SignWith(map[string]any{"alg": "none"}, r.RequestClaims, pacttest.Unsigned)
		}), want: unauthorized("request_signature")},
		hostileCase{name: "delegation token alg none", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.DelegationToken = pacttest.SignWith(map[string]any{"alg": "none"}, r.TokenClaims, pacttest.Unsigned)
		}), want: unauthorized("delegation_token")},
		hostileCase{name: "receipt HS256 keyed with the brand's public key PEM", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.ReceiptJWS = pacttest.SignWith(map[string]any{"alg": "HS256", "kid": "brand-k3"}, r.Claims, pacttest.HS256(c.h.sc.Brand.Key.PublicPEM()))
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "receipt HS256 keyed with the brand's JWK", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.ReceiptJWS = pacttest.SignWith(map[string]any{"alg": "HS256", "kid": "brand-k3"}, r.Claims, pacttest.HS256(c.h.sc.Brand.Key.PublicJWK()))
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "receipt HS256 keyed with the brand's JWKS bytes", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.ReceiptJWS = pacttest.SignWith(map[string]any{"alg": "HS256"}, r.Claims, pacttest.HS256(c.h.sc.Brand.JWKS.Body()))
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "request JWT HS256 keyed with the PA's public key PEM", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.RequestJWT = pacttest.SignWith(map[string]any{"alg": "HS256", "kid": c.h.sc.PA.Key.Kid}, r.RequestClaims, pacttest.HS256(c.h.sc.PA.Key.PublicPEM()))
		}), want: unauthorized("request_signature")},
		hostileCase{name: "delegation token HS256 keyed with the brand's public key PEM", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.DelegationToken = pacttest.SignWith(map[string]any{"alg": "HS256", "kid": "brand-k3"}, r.TokenClaims, pacttest.HS256(c.h.sc.Brand.Key.PublicPEM()))
		}), want: unauthorized("delegation_token")},
		hostileCase{name: "receipt alg ES384", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.ReceiptJWS = pacttest.SignWith(map[string]any{"alg": "ES384", "kid": "brand-k3"}, r.Claims, pacttest.ES384())
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "receipt alg RS256 under the EC key's kid", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.ReceiptJWS = c.h.r1.SignHeader(map[string]any{"alg": "RS256", "kid": "brand-k3", "typ": "JWT"}, r.Claims)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "receipt alg ES256 under the RSA key's kid", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.ReceiptJWS = c.h.sc.Brand.Key.SignHeader(map[string]any{"alg": "ES256", "kid": "brand-r1", "typ": "JWT"}, r.Claims)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "receipt alg PS256", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.ReceiptJWS = c.h.r1.SignHeader(map[string]any{"alg": "PS256", "kid": "brand-r1"}, r.Claims)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "receipt alg es256 in lower case", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.ReceiptJWS = c.h.sc.Brand.Key.SignHeader(map[string]any{"alg": "es256", "kid": "brand-k3"}, r.Claims)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "receipt with the attacker's key embedded as jwk", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.ReceiptJWS = attacker.SignHeader(map[string]any{"alg": "ES256", "kid": "brand-k3", "jwk": attacker.PublicJWKMap()}, r.Claims)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "receipt with a jku naming the attacker's JWKS", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			atk := pacttest.NewJWKS(attacker)
			c.t.Cleanup(atk.Close)
			r.ReceiptJWS = attacker.SignHeader(map[string]any{"alg": "ES256", "kid": "brand-k3", "jku": atk.URL()}, r.Claims)
		}), want: unauthorized("receipt_signature")},
		hostileCase{name: "receipt with two signatures joined", attack: fresh(func(c *hcase, r *pacttest.Receipt) {
			r.ReceiptJWS += "." + pacttest.Segments(attacker.Sign(r.Claims))[2]
		}), want: badRequest},
	)
	return cases
}

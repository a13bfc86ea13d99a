package ledger_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"golang.org/x/mod/sumdb/note"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

type harness struct {
	sc     *pacttest.Scenario
	l      *ledger.Ledger
	store  *bolt.Store
	dir    string
	now    time.Time
	nowMu  sync.Mutex
	objDir string
	// objects, when set, replaces the local evidence directory.
	objects ledger.ObjectStore
	// wrap, when set, wraps the store the ledger is given.
	wrap func(ledger.Store) ledger.Store
	span time.Duration
	// policy is the ledger's retention policy (zero: the default).
	policy retention.Policy
	// accessKept is the access log's retention the ledger is told of.
	accessKept retention.Period
	// logs, when set, receives the ledger's log; otherwise it is dropped.
	logs *syncbuf.Buffer
	// debug logs the ledger's DEBUG records too.
	debug bool
	// logSigner and logVKey are the log's key, made by the first
	// enableLog and kept across restarts, as ledgerd keeps its key file.
	logSigner note.Signer
	logVKey   string
	// metrics, when set, are the ledger's metrics.
	metrics *ledger.Metrics
	// clocks are the ledger's reference clocks.
	clocks []ledger.ReferenceClock
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), now: time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC), logs: &syncbuf.Buffer{}}
	t.Cleanup(h.sc.Close)
	h.open(t)
	return h
}

func (h *harness) open(t testing.TB) {
	t.Helper()
	var err error
	h.store, err = bolt.Open(filepath.Join(h.dir, "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.store.Close() })
	h.objDir = filepath.Join(h.dir, "evidence")
	var objects ledger.ObjectStore = h.objects
	if objects == nil {
		if objects, err = localdir.Open(h.objDir); err != nil {
			t.Fatal(err)
		}
	}
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true})
	reg, err := verifier.NewRegistry(f, h.sc.Brands(), h.sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: h.sc.Audience, CheckedBy: "pactledger test"})
	var store ledger.Store = h.store
	if h.wrap != nil {
		store = h.wrap(store)
	}
	logger := slog.New(slog.DiscardHandler)
	if h.logs != nil {
		opts := &slog.HandlerOptions{}
		if h.debug {
			opts.Level = slog.LevelDebug
		}
		logger = slog.New(slog.NewTextHandler(h.logs, opts))
	}
	h.l, err = ledger.New(store, objects, v, reg, ledger.Config{Now: h.clock, Logger: logger, SegmentSpan: h.span, Policy: h.policy, AccessRetention: h.accessKept, Metrics: h.metrics,
		ReferenceClocks: h.clocks})
	if err != nil {
		t.Fatal(err)
	}
}

func (h *harness) set(t time.Time) {
	h.nowMu.Lock()
	defer h.nowMu.Unlock()
	h.now = t
}

func (h *harness) clock() time.Time {
	h.nowMu.Lock()
	defer h.nowMu.Unlock()
	return h.now
}

func in(r *pacttest.Receipt) ledger.ReceiptInput {
	return ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions}
}

func (h *harness) append(t *testing.T, ri ledger.ReceiptInput) (*ledger.Row, ledger.Outcome) {
	t.Helper()
	row, o, err := h.l.AppendReceipt(context.Background(), ri)
	if err != nil {
		t.Fatalf("AppendReceipt: %v", err)
	}
	return row, o
}

func check(r *ledger.Row, name string) verifier.Check {
	for _, c := range r.Verifier.Checks {
		if c.Name == name {
			return c
		}
	}
	return verifier.Check{}
}

func TestRulesAndRetention(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name       string
		spec       pacttest.Spec
		edit       func(r *pacttest.Receipt)
		wantStatus ledger.Status
		wantClass  retention.Class
		wantUntil  time.Time
	}{
		{name: "authorized money moved", spec: pacttest.Spec{Target: "A-1"}, wantStatus: ledger.Authorized, wantClass: retention.MoneyMoved, wantUntil: time.Date(2028, 4, 7, 13, 12, 45, 0, time.UTC)},
		{name: "read only", spec: pacttest.Spec{Target: "A-2", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}, wantStatus: ledger.Authorized, wantClass: retention.ReadOnly, wantUntil: time.Date(2027, 1, 5, 13, 12, 45, 0, time.UTC)},
		{name: "account changed", spec: pacttest.Spec{Target: "acct", Tool: "change_address", Granted: "orders:read account:address", ScopesUsed: []string{"account:address"}}, wantStatus: ledger.Authorized, wantClass: retention.AccountChanged, wantUntil: time.Date(2027, 10, 7, 13, 12, 45, 0, time.UTC)},
		{name: "unknown tool takes the longest class", spec: pacttest.Spec{Target: "A-3", Tool: "teleport"}, wantStatus: ledger.Authorized, wantClass: retention.MoneyMoved, wantUntil: time.Date(2028, 4, 7, 13, 12, 45, 0, time.UTC)},
		{name: "bad signature is unauthorized and refused class", spec: pacttest.Spec{Target: "A-4"}, edit: func(r *pacttest.Receipt) {
			r.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(r.Claims)
		}, wantStatus: ledger.Unauthorized, wantClass: retention.Refused, wantUntil: time.Date(2027, 10, 7, 13, 12, 45, 0, time.UTC)},
		{name: "scope beyond grant is an incident", spec: pacttest.Spec{Target: "A-5", ScopesUsed: []string{"plan:change"}}, wantStatus: ledger.Incident, wantClass: retention.Incident},
		{name: "args mismatch is an incident", spec: pacttest.Spec{Target: "A-6"}, edit: func(r *pacttest.Receipt) {
			r.Actions[0].ArgsJSON = `{"order":"A-7"}`
		}, wantStatus: ledger.Incident, wantClass: retention.Incident},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.sc.Mint(tc.spec)
			if tc.edit != nil {
				tc.edit(r)
			}
			row, o := h.append(t, in(r))
			if o != ledger.Created {
				t.Fatalf("outcome = %v", o)
			}
			if row.Status != tc.wantStatus || row.Class != tc.wantClass || !row.RetainUntil.Equal(tc.wantUntil) {
				t.Fatalf("got %v %v until %v, want %v %v until %v; checks %+v", row.Status, row.Class, row.RetainUntil, tc.wantStatus, tc.wantClass, tc.wantUntil, row.Verifier.Checks)
			}
			if (row.Status == ledger.Incident) != (row.IncidentID != "") {
				t.Fatalf("incident id %q on a %v row", row.IncidentID, row.Status)
			}
			if len(row.Verifier.Checks) != 9 {
				t.Fatalf("want 9 checks, got %+v", row.Verifier.Checks)
			}
		})
	}
}

func TestDedupe(t *testing.T) {
	h := newHarness(t)
	r := h.sc.Mint(pacttest.Spec{})
	first, o := h.append(t, in(r))
	if o != ledger.Created || first.Status != ledger.Authorized {
		t.Fatalf("first: %v %v", o, first.Status)
	}

	// Byte-identical resubmission: the original row, nothing new.
	again, o := h.append(t, in(r))
	if o != ledger.AlreadyRecorded || again.ID != first.ID || !again.RecordedAt.Equal(first.RecordedAt) {
		t.Fatalf("resubmission: %v %s", o, again.ID)
	}

	// Same receipt JWS, another request JWT: its own row naming the first.
	r2 := *r
	r2.RequestClaims = map[string]any{}
	for k, v := range r.RequestClaims {
		r2.RequestClaims[k] = v
	}
	r2.RequestClaims["jti"] = "other"
	r2.RequestJWT = h.sc.PA.Key.Sign(r2.RequestClaims)
	dup, o := h.append(t, in(&r2))
	if o != ledger.DuplicateRecorded || dup.Status != ledger.Duplicate || dup.Verifier.DuplicateOf != first.ID || dup.ID == first.ID || dup.ReceiptID != first.ReceiptID {
		t.Fatalf("duplicate: %v %v of %q id %s", o, dup.Status, dup.Verifier.DuplicateOf, dup.ID)
	}
	if c := check(dup, "duplicate"); c.Result != verifier.Fail {
		t.Fatalf("duplicate check = %+v", c)
	}
	// Resubmitting the duplicate is idempotent too.
	if again, o := h.append(t, in(&r2)); o != ledger.AlreadyRecorded || again.ID != dup.ID {
		t.Fatalf("duplicate resubmission: %v %s", o, again.ID)
	}

	// The same request JWT reused for a different receipt.
	r3 := h.sc.Mint(pacttest.Spec{Target: "A-9", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})
	r3.RequestJWT = r.RequestJWT
	reuse, o := h.append(t, in(r3))
	if o != ledger.DuplicateRecorded || reuse.Verifier.DuplicateOf != first.ID {
		t.Fatalf("request JWT reuse: %v of %q", o, reuse.Verifier.DuplicateOf)
	}
}

// An input parsed by its caller is recorded from that parse, without
// parsing it again; a parse of other tokens, or of other actions, is not
// read: the input's own tokens are parsed and recorded.
func TestParsedInput(t *testing.T) {
	h := newHarness(t)
	r := h.sc.Mint(pacttest.Spec{})
	ri := in(r)
	ri.Parsed = ri.Parse()
	parses, restore := ledger.CountParses()
	row, o := h.append(t, ri)
	if o != ledger.Created || row.Status != ledger.Authorized {
		t.Fatalf("parsed by the caller: %v %v", o, row.Status)
	}
	if n := parses(); n != 0 {
		t.Fatalf("an input handed with its parse was parsed %d more times", n)
	}
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-1"})))
	if n := parses(); n != 1 {
		t.Fatalf("an input handed without a parse was parsed %d times, want once", n)
	}
	restore()

	// Each case's input is parsed with one part swapped for another
	// receipt's (a decoy); the row must be what the input's own parts make
	// of it.
	other := h.sc.Mint(pacttest.Spec{Target: "A-7"})
	for _, c := range []struct {
		name   string
		spec   pacttest.Spec
		swap   func(*ledger.ReceiptInput)
		scopes verifier.Outcome // the input's own scopes_within_grant
	}{
		{"another receipt", pacttest.Spec{Target: "A-2"}, func(x *ledger.ReceiptInput) { x.ReceiptJWS = other.ReceiptJWS }, verifier.Pass},
		{"another request", pacttest.Spec{Target: "A-3"}, func(x *ledger.ReceiptInput) { x.RequestJWT = other.RequestJWT }, verifier.Pass},
		{"other actions", pacttest.Spec{Target: "A-4"}, func(x *ledger.ReceiptInput) { x.Actions[0].Target = "A-7" }, verifier.Pass},
		// The input's token grants less than its receipt used; the
		// decoy's grants it all.
		{"another token", pacttest.Spec{Target: "A-5", Granted: "orders:read"}, func(x *ledger.ReceiptInput) { x.DelegationToken = other.DelegationToken }, verifier.Fail},
	} {
		r2 := h.sc.Mint(c.spec)
		want := in(r2)
		decoy := in(r2)
		decoy.Actions = append([]verifier.Action(nil), decoy.Actions...)
		c.swap(&decoy)
		want.Parsed = decoy.Parse()
		parses, restore := ledger.CountParses()
		row, o := h.append(t, want)
		restore()
		if n := parses(); n != 1 {
			t.Fatalf("%s: an input handed another's parse was parsed %d times, want once", c.name, n)
		}
		if got := check(row, "scopes_within_grant"); o != ledger.Created || got.Result != c.scopes || (c.scopes == verifier.Pass) != (row.Status == ledger.Authorized) {
			t.Fatalf("%s: %v %v, scopes_within_grant %+v, want %v", c.name, o, row.Status, got, c.scopes)
		}
		hash := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
		if row.ReceiptID != "sha256:"+hash(want.ReceiptJWS) || row.RequestJWTSHA256 != hash(want.RequestJWT) {
			t.Fatalf("%s: recorded receipt %s, request JWT %s: not the input's", c.name, row.ReceiptID, row.RequestJWTSHA256)
		}
		if len(row.Actions) != 1 || row.Actions[0].Target != want.Actions[0].Target {
			t.Fatalf("%s: recorded actions %+v, not the input's %+v", c.name, row.Actions, want.Actions)
		}
	}
}

func TestWithinLimits(t *testing.T) {
	h := newHarness(t)
	lim := &ledger.Limits{AmountMax: "order_value", CountMax: 1}
	r := h.sc.Mint(pacttest.Spec{Target: "A-1", GrantID: "g1"})
	ri := in(r)
	ri.Limits = lim
	row, _ := h.append(t, ri)
	if c := check(row, "within_limits"); c.Result != verifier.Skipped || row.Status != ledger.Authorized {
		t.Fatalf("first: %+v %v (amountMax not numeric must be SKIPPED, never PASS)", c, row.Status)
	}
	r = h.sc.Mint(pacttest.Spec{Target: "A-2", GrantID: "g1"})
	ri = in(r)
	ri.Limits = lim
	row, _ = h.append(t, ri)
	if c := check(row, "within_limits"); c.Result != verifier.Fail || row.Status != ledger.Incident {
		t.Fatalf("second cancel under countMax 1: %+v %v", c, row.Status)
	}

	r = h.sc.Mint(pacttest.Spec{Target: "R-1", GrantID: "g2", Tool: "issue_refund", ArgsJSON: `{"order":"R-1","amount":120.5}`})
	ri = in(r)
	ri.Limits = &ledger.Limits{AmountMax: "100"}
	row, _ = h.append(t, ri)
	if c := check(row, "within_limits"); c.Result != verifier.Fail || row.Status != ledger.Incident {
		t.Fatalf("amount over amountMax: %+v %v", c, row.Status)
	}
	r = h.sc.Mint(pacttest.Spec{Target: "R-2", GrantID: "g3", Tool: "issue_refund", ArgsJSON: `{"order":"R-2","amount":99}`})
	ri = in(r)
	ri.Limits = &ledger.Limits{AmountMax: "100", CountMax: 2}
	row, _ = h.append(t, ri)
	if c := check(row, "within_limits"); c.Result != verifier.Pass || row.Status != ledger.Authorized {
		t.Fatalf("within both limits: %+v %v", c, row.Status)
	}
}

func TestListByEveryIndexNewestFirstWithPages(t *testing.T) {
	h := newHarness(t)
	base := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 25 {
		spec := pacttest.Spec{Target: "A-5531", User: "acct-48213", GrantID: "g-list", At: base.Add(time.Duration(i) * time.Minute), Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}
		if i%5 == 0 {
			spec.Target, spec.User, spec.GrantID = "B-1", "acct-1", "g-other"
		}
		row, _ := h.append(t, in(h.sc.Mint(spec)))
		if i%5 != 0 {
			ids = append([]string{row.ID}, ids...) // newest first
		}
	}
	ctx := context.Background()
	for _, q := range []ledger.Query{{Target: "A-5531"}, {Principal: "acct-48213"}, {GrantID: "g-list"}, {Target: "A-5531", Principal: "acct-48213"}} {
		var got []string
		q.PageSize = 7
		for {
			rows, next, err := h.l.List(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				got = append(got, r.ID)
			}
			if next == "" {
				break
			}
			q.PageToken = next
		}
		if len(got) != len(ids) {
			t.Fatalf("query %+v: %d rows, want %d", q, len(got), len(ids))
		}
		for i := range ids {
			if got[i] != ids[i] {
				t.Fatalf("query %+v: row %d out of order", q, i)
			}
		}
	}
	rows, _, err := h.l.List(ctx, ledger.Query{Agent: h.sc.PA.ID, Since: base.Add(10 * time.Minute), Until: base.Add(20 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 10 {
		t.Fatalf("agent + since/until: %d rows, want 10", len(rows))
	}
	for _, r := range rows {
		if r.IssuedAt.Before(base.Add(10*time.Minute)) || !r.IssuedAt.Before(base.Add(20*time.Minute)) {
			t.Fatalf("row at %v outside the range", r.IssuedAt)
		}
	}
	if rows, _, _ := h.l.List(ctx, ledger.Query{Status: ledger.Authorized, Class: retention.ReadOnly}); len(rows) != 25 {
		t.Fatalf("status+class: %d rows", len(rows))
	}
	if _, _, err := h.l.List(ctx, ledger.Query{Target: "A-5531", PageToken: "garbage"}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("bad page token: %v", err)
	}
	if _, _, err := h.l.List(ctx, ledger.Query{PageSize: 1001}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("page size 1001: %v", err)
	}
}

func TestDisputesAppendAndEvidenceNeverChanges(t *testing.T) {
	h := newHarness(t)
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{})))
	ctx := context.Background()
	if _, err := h.l.AppendDispute(ctx, row.ID, ledger.DisputeOpen, "customer says they never approved", "support"); err != nil {
		t.Fatal(err)
	}
	got, err := h.l.AppendDispute(ctx, row.ID, ledger.DisputeResolvedCustomerAuthorized, "grant shown", "lead")
	if err != nil {
		t.Fatal(err)
	}
	if got.Dispute != ledger.DisputeResolvedCustomerAuthorized || len(got.DisputeEvents) != 2 || got.DisputeEvents[0].By != "support" {
		t.Fatalf("events: %+v", got.DisputeEvents)
	}
	a, _ := json.Marshal(struct {
		ID, Ev string
		C      any
	}{row.ID, row.EvidenceSHA256, row.Verifier})
	b, _ := json.Marshal(struct {
		ID, Ev string
		C      any
	}{got.ID, got.EvidenceSHA256, got.Verifier})
	if string(a) != string(b) {
		t.Fatalf("evidence fields changed by a dispute")
	}
	if _, err := h.l.AppendDispute(ctx, row.ID, ledger.DisputeNone, "", "x"); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("status NONE: %v", err)
	}
	other := "0" + row.ID[1:] // another id: the row's with its first digit changed
	if row.ID[0] == '0' {
		other = "1" + row.ID[1:]
	}
	if _, err := h.l.AppendDispute(ctx, other, ledger.DisputeOpen, "", "x"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("unknown row: %v", err)
	}
}

func TestRefusal(t *testing.T) {
	h := newHarness(t)
	ri := ledger.RefusalInput{ClaimedPrincipal: "acct 30418", ClaimedAgent: "assistant from MyHelper", Tool: "change_address", Target: "acct-30418", Reason: "no receipt; routed to human", ObservedAt: time.Date(2026, 10, 6, 17, 20, 10, 0, time.UTC)}
	row, err := h.l.AppendRefusal(context.Background(), ri)
	if err != nil {
		t.Fatal(err)
	}
	if row.Kind != ledger.KindRefusal || row.Status != ledger.Unauthorized || row.Class != retention.Refused || !row.RetainUntil.Equal(time.Date(2027, 10, 7, 13, 12, 45, 0, time.UTC)) {
		t.Fatalf("refusal row: %+v", row)
	}
	again, err := h.l.AppendRefusal(context.Background(), ri)
	if err != nil || again.ID != row.ID {
		t.Fatalf("refusal resubmission: %v %s", err, again.ID)
	}
	rows, _, _ := h.l.List(context.Background(), ledger.Query{Target: "acct-30418"})
	if len(rows) != 1 {
		t.Fatalf("refusal not found by target")
	}
	if _, err := h.l.AppendRefusal(context.Background(), ledger.RefusalInput{Tool: "x"}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("refusal without reason: %v", err)
	}
}

func TestUploaderDrainsOutbox(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for i := range 10 {
		h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-" + string(rune('a'+i))})))
	}
	depth, _ := h.l.OutboxDepth(ctx)
	if depth != 12 { // 10 bundles + 2 snapshots
		t.Fatalf("outbox depth = %d, want 12", depth)
	}
	n, err := h.l.UploadRound(ctx, 256, 4)
	if err != nil || n != 12 {
		t.Fatalf("upload round: %d %v", n, err)
	}
	if depth, _ := h.l.OutboxDepth(ctx); depth != 0 {
		t.Fatalf("outbox depth after upload = %d", depth)
	}
	rows, _, _ := h.l.List(ctx, ledger.Query{})
	for _, r := range rows {
		ev, err := h.l.Evidence(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range ev.Objects {
			if !o.Location.Uploaded {
				t.Fatalf("object %s not marked uploaded", o.Location.Key)
			}
		}
		if ev.Objects[0].Location.Length == 0 || !strings.HasPrefix(ev.Objects[0].Location.Key, "segments/") {
			t.Fatalf("row evidence not packed in a segment: %+v", ev.Objects[0].Location)
		}
		b, err := h.l.WriteOnceCopy(ctx, ledger.EvidenceKey(r.ID))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != r.EvidenceSHA256 {
			t.Fatalf("write-once copy of %s does not hash to the row's evidence hash", r.ID)
		}
		for _, s := range ev.Snapshots {
			b, err := h.l.WriteOnceCopy(ctx, ledger.SnapshotKey(s))
			if sum := sha256.Sum256(b); err != nil || hex.EncodeToString(sum[:]) != s {
				t.Fatalf("snapshot %s: %v", s, err)
			}
		}
	}
	// Incident evidence is never packed with other rows.
	inc, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "I-1", ScopesUsed: []string{"plan:change"}})))
	if _, err := h.l.UploadRound(ctx, 256, 4); err != nil {
		t.Fatal(err)
	}
	ev, err := h.l.Evidence(ctx, inc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if loc := ev.Objects[0].Location; loc.Key != ledger.EvidenceKey(inc.ID) || loc.Length != 0 {
		t.Fatalf("incident evidence location %+v", loc)
	}
}

func TestInvalidInputStoresNothing(t *testing.T) {
	h := newHarness(t)
	r := h.sc.Mint(pacttest.Spec{})
	bad := []ledger.ReceiptInput{
		{},
		{ReceiptJWS: "not a jws"},
		{ReceiptJWS: "a.b.c"},
		{ReceiptJWS: r.ReceiptJWS, Actions: []verifier.Action{{Tool: ""}}},
		{ReceiptJWS: r.ReceiptJWS, Actions: []verifier.Action{{Tool: "x", Target: "a\x00b"}}},
		{ReceiptJWS: r.ReceiptJWS, Actions: make([]verifier.Action, 65)},
		{ReceiptJWS: r.ReceiptJWS, Limits: &ledger.Limits{CountMax: -1}},
	}
	for i, ri := range bad {
		if _, _, err := h.l.AppendReceipt(context.Background(), ri); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("case %d: err = %v, want ErrInvalid", i, err)
		}
	}
	if rows, _, _ := h.l.List(context.Background(), ledger.Query{}); len(rows) != 0 {
		t.Fatalf("%d rows stored from invalid input", len(rows))
	}
}

func TestConcurrentAppendsGroupCommit(t *testing.T) {
	h := newHarness(t)
	var wg sync.WaitGroup
	receipts := make([]*pacttest.Receipt, 200)
	for i := range receipts {
		receipts[i] = h.sc.Mint(pacttest.Spec{Target: "C-" + time.Duration(i).String(), Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})
	}
	errs := make(chan error, len(receipts))
	for _, r := range receipts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := h.l.AppendReceipt(context.Background(), in(r))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rows, _, _ := h.l.List(context.Background(), ledger.Query{PageSize: 1000})
	if len(rows) != len(receipts) {
		t.Fatalf("%d rows, want %d", len(rows), len(receipts))
	}
}

// A request JWT reused for another turn is a duplicate row (API.md), but
// another action under the grant: it counts toward countMax, so reusing
// one request JWT cannot take a grant past its limit unseen. The same
// receipt posted again, re-encoded, still counts once.
func TestAnotherTurnOnOneRequestJWTCountsTowardLimits(t *testing.T) {
	h := newHarness(t)
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	first := h.sc.Mint(pacttest.Spec{Target: "A-1", GrantID: "g-reuse", At: at})
	ri := in(first)
	ri.Limits = &ledger.Limits{CountMax: 2}
	row, _ := h.append(t, ri)
	if row.Status != ledger.Authorized {
		t.Fatalf("first: %v %+v", row.Status, row.Verifier.Checks)
	}
	// The same receipt re-encoded: a duplicate, not counted.
	replay := *first
	replay.ReceiptJWS = pacttest.MalleateES256(first.ReceiptJWS)
	ri = in(&replay)
	ri.Limits = &ledger.Limits{CountMax: 1}
	dup, _ := h.append(t, ri)
	if dup.Status != ledger.Duplicate || check(dup, "within_limits").Result != verifier.Pass {
		t.Fatalf("the same receipt again under countMax 1: %v %+v", dup.Status, check(dup, "within_limits"))
	}
	// Another turn on the first turn's request JWT: a duplicate of it,
	// within countMax 2 as the second cancel.
	other := h.sc.Mint(pacttest.Spec{Target: "A-2", GrantID: "g-reuse", At: at.Add(30 * time.Second)})
	other.RequestJWT = first.RequestJWT
	ri = in(other)
	ri.Limits = &ledger.Limits{CountMax: 2}
	second, _ := h.append(t, ri)
	if second.Status != ledger.Duplicate || second.Verifier.DuplicateOf != row.ID || !strings.Contains(check(second, "within_limits").Detail, "cancel_order 2 of 2") {
		t.Fatalf("another turn on one request JWT under countMax 2: %v of %q, %+v", second.Status, second.Verifier.DuplicateOf, check(second, "within_limits"))
	}
	// A third, on the same request JWT, goes past countMax 2: an incident.
	third := h.sc.Mint(pacttest.Spec{Target: "A-3", GrantID: "g-reuse", At: at.Add(60 * time.Second)})
	third.RequestJWT = first.RequestJWT
	ri = in(third)
	ri.Limits = &ledger.Limits{CountMax: 2}
	row3, _ := h.append(t, ri)
	if c := check(row3, "within_limits"); c.Result != verifier.Fail || row3.Status != ledger.Incident {
		t.Fatalf("a third turn on one request JWT under countMax 2: %v %+v", row3.Status, c)
	}
	// A fresh request JWT sees the reused one's turns in the grant's count.
	fourth := h.sc.Mint(pacttest.Spec{Target: "A-4", GrantID: "g-reuse", At: at.Add(90 * time.Second)})
	ri = in(fourth)
	ri.Limits = &ledger.Limits{CountMax: 3}
	row4, _ := h.append(t, ri)
	if c := check(row4, "within_limits"); c.Result != verifier.Fail || row4.Status != ledger.Incident {
		t.Fatalf("a fourth cancel under countMax 3 after three turns: %v %+v", row4.Status, c)
	}
}

// What counts toward a grant's countMax is what the Brand's signature
// vouches for: a receipt whose signature fails names its grant as a mere
// claim, and the same receipt posted again counts once whatever its
// status.
func TestOnlyVouchedTurnsCountTowardLimits(t *testing.T) {
	h := newHarness(t)
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	forged := h.sc.Mint(pacttest.Spec{Target: "F-1", GrantID: "g-vouched", At: at})
	forged.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(forged.Claims)
	row, _ := h.append(t, in(forged))
	if row.Status != ledger.Unauthorized {
		t.Fatalf("forged receipt: %v", row.Status)
	}
	first := h.sc.Mint(pacttest.Spec{Target: "A-1", GrantID: "g-vouched", At: at.Add(time.Second)})
	ri := in(first)
	ri.Limits = &ledger.Limits{CountMax: 1}
	row, _ = h.append(t, ri)
	if c := check(row, "within_limits"); c.Result != verifier.Pass || row.Status != ledger.Authorized {
		t.Fatalf("the first vouched cancel under countMax 1, after a forged one: %v %+v", row.Status, c)
	}
	// The same receipt with a request JWT no agent key signed: a
	// duplicate that is unauthorized, and still the same turn.
	again := *first
	again.RequestJWT = pacttest.MustKey("pa-rogue", jose.ES256).Sign(first.RequestClaims)
	dup, _ := h.append(t, in(&again))
	if dup.Verifier.DuplicateOf != row.ID || dup.Status != ledger.Unauthorized {
		t.Fatalf("the same receipt with a forged request JWT: %v of %q", dup.Status, dup.Verifier.DuplicateOf)
	}
	second := h.sc.Mint(pacttest.Spec{Target: "A-2", GrantID: "g-vouched", At: at.Add(2 * time.Second)})
	ri = in(second)
	ri.Limits = &ledger.Limits{CountMax: 2}
	row2, _ := h.append(t, ri)
	if c := check(row2, "within_limits"); c.Result != verifier.Pass || !strings.Contains(c.Detail, "cancel_order 2 of 2") {
		t.Fatalf("the second vouched cancel under countMax 2: %v %+v", row2.Status, c)
	}
}

// A forged copy of a receipt posted first, with its request JWT, does not
// hide the real receipt from the grant's count: the real one, a row of its
// own, counts, once.
func TestAForgedCopyDoesNotHideTheRealTurnFromLimits(t *testing.T) {
	h := newHarness(t)
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	real := h.sc.Mint(pacttest.Spec{Target: "A-1", GrantID: "g-copied", At: at})
	forged := *real
	forged.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(real.Claims)
	if row, _ := h.append(t, in(&forged)); row.Status != ledger.Unauthorized {
		t.Fatalf("the forged copy: %v", row.Status)
	}
	ri := in(real)
	ri.Limits = &ledger.Limits{CountMax: 1}
	row, _ := h.append(t, ri)
	if row.Status != ledger.Authorized || check(row, "within_limits").Result != verifier.Pass {
		t.Fatalf("the real receipt after its forged copy: %v, %+v", row.Status, check(row, "within_limits"))
	}
	second := h.sc.Mint(pacttest.Spec{Target: "A-2", GrantID: "g-copied", At: at.Add(time.Second)})
	ri = in(second)
	ri.Limits = &ledger.Limits{CountMax: 1}
	row2, _ := h.append(t, ri)
	if c := check(row2, "within_limits"); c.Result != verifier.Fail || row2.Status != ledger.Incident {
		t.Fatalf("a second real cancel under countMax 1: %v %+v", row2.Status, c)
	}
}

// A forged copy of a receipt (its claims under a signature that fails)
// posted first with the real request JWT is never the original of the real
// receipt: the real one is recorded as a row of its own. Posted after the
// real receipt, the copy is a duplicate of it, as before.
func TestAForgedCopyPostedFirstIsNotTheOriginalOfTheRealReceipt(t *testing.T) {
	h := newHarness(t)
	real := h.sc.Mint(pacttest.Spec{Target: "A-5531"})
	forged := *real
	forged.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(real.Claims)
	copyRow, _ := h.append(t, in(&forged))
	if copyRow.Status != ledger.Unauthorized || copyRow.ReceiptVerified() {
		t.Fatalf("the forged copy: %v, receipt verified %v", copyRow.Status, copyRow.ReceiptVerified())
	}
	row, o := h.append(t, in(real))
	if o != ledger.Created || row.Status != ledger.Authorized || row.Verifier.DuplicateOf != "" || row.ID != strings.TrimPrefix(row.ReceiptID, "sha256:") {
		t.Fatalf("the real receipt after its forged copy: %v %v, duplicate of %q, id %s", o, row.Status, row.Verifier.DuplicateOf, row.ID)
	}
	if c := check(row, "duplicate"); c.Result != verifier.Pass {
		t.Errorf("duplicate check of the real receipt = %+v, want PASS", c)
	}

	// The other order: the copy posted after the real receipt is its
	// duplicate, and unauthorized.
	h2 := newHarness(t)
	real2 := h2.sc.Mint(pacttest.Spec{Target: "A-5532"})
	forged2 := *real2
	forged2.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(real2.Claims)
	first, _ := h2.append(t, in(real2))
	later, _ := h2.append(t, in(&forged2))
	if first.Status != ledger.Authorized || later.Status != ledger.Unauthorized || later.Verifier.DuplicateOf != first.ID {
		t.Errorf("a forged copy after the real receipt: %v, then %v duplicate of %q (want %s)", first.Status, later.Status, later.Verifier.DuplicateOf, first.ID)
	}
}

// A forged copy posted first takes no request JWT from the real receipt:
// a second turn served on the same request JWT after both is a duplicate
// of the real receipt's row (a request JWT reused for another receipt),
// not an AUTHORIZED row of its own.
func TestAForgedCopyIsNotTheFirstUseOfARequestJWT(t *testing.T) {
	h := newHarness(t)
	real := h.sc.Mint(pacttest.Spec{Target: "A-1"})
	forged := *real
	forged.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(real.Claims)
	h.append(t, in(&forged))
	g, _ := h.append(t, in(real))
	second := h.sc.Mint(pacttest.Spec{Target: "A-2"})
	second.RequestJWT = real.RequestJWT
	s, o := h.append(t, in(second))
	if o != ledger.DuplicateRecorded || s.Status != ledger.Duplicate || s.Verifier.DuplicateOf != g.ID {
		t.Errorf("a second turn on the request JWT: %v %v, duplicate of %q; want DUPLICATE of the real receipt's row %s", o, s.Status, s.Verifier.DuplicateOf, g.ID)
	}
}

// A forged copy that an earlier version recorded holds the request JWT's
// entry (versions before IndexesRequestJWT indexed every receipt). The
// real receipt posted after it is a row of its own and takes the entry
// over: another turn served on that request JWT is a duplicate of the
// real receipt's row, not measured against the copy again, and the entry
// stays the real receipt's once the copy is swept. The copy may have
// been posted with the request JWT as the real receipt carries it, or in
// its other ES256 encoding; its entry may still be pending in its row's
// record, or merged into the file's bucket.
func TestTheRealReceiptTakesTheRequestJWTFromAForgedCopyOfAnEarlierVersion(t *testing.T) {
	same := func(jwt string) string { return jwt }
	for _, c := range []struct {
		name   string
		copy   func(jwt string) string
		merged bool
	}{
		{"the same encoding", same, false},
		{"the same encoding, merged", same, true},
		{"the other encoding", pacttest.MalleateES256, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			ctx := t.Context()
			real := h.sc.Mint(pacttest.Spec{Target: "A-1"})
			forged := *real
			forged.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(real.Claims)
			forged.RequestJWT = c.copy(real.RequestJWT)
			f, _ := h.append(t, in(&forged))
			if f.Status != ledger.Unauthorized || f.ReceiptVerified() {
				t.Fatalf("the forged copy: %v, receipt verified %v", f.Status, f.ReceiptVerified())
			}
			// entries returns the rows the entries of the request JWT's
			// hashes (both encodings) name, "" for none.
			entries := func() []string {
				t.Helper()
				var ids []string
				if err := h.store.View(ctx, func(tx ledger.Tx) error {
					for _, sha := range verifier.Encodings(real.RequestJWT) {
						id, err := tx.RowByRequestJWT(sha)
						if err != nil {
							return err
						}
						ids = append(ids, id)
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return ids
			}
			if ids := entries(); slices.Contains(ids, f.ID) {
				t.Fatalf("this version indexed the forged copy: entries %q", ids)
			}

			// The file as an earlier version left it.
			h.store.Close()
			db, err := bbolt.Open(filepath.Join(h.dir, "ledger.db"), 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(func(tx *bbolt.Tx) error {
				if c.merged {
					// Keeping a row's number writes the pending keys
					// into their buckets first, as a merge does.
					if err := bolt.SetRowNumber(tx, f.ID, bolt.RowNumber(tx, f.ID)); err != nil {
						return err
					}
				}
				return bolt.SetRequestJWTRow(tx, f.RequestJWTSHA256, f.ID)
			}); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			h.open(t)
			if ids := entries(); !slices.Contains(ids, f.ID) {
				t.Fatalf("the forged copy holds no entry: %q", ids)
			}

			g, o := h.append(t, in(real))
			if o != ledger.Created || g.Status != ledger.Authorized || g.Verifier.DuplicateOf != "" {
				t.Fatalf("the real receipt after its forged copy: %v %v, duplicate of %q", o, g.Status, g.Verifier.DuplicateOf)
			}
			heldBy := func(when string) {
				t.Helper()
				ids := entries()
				if !slices.Contains(ids, g.ID) || slices.ContainsFunc(ids, func(id string) bool { return id != "" && id != g.ID }) {
					t.Errorf("%s: the request JWT's entries name %q; want the real receipt's row %s", when, ids, g.ID)
				}
			}
			heldBy("after the real receipt")
			h.store.Close()
			h.open(t)
			heldBy("after a restart")
			turn := func(when, target, jwt string) {
				t.Helper()
				next := h.sc.Mint(pacttest.Spec{Target: target})
				next.RequestJWT = jwt
				s, o := h.append(t, in(next))
				if o != ledger.DuplicateRecorded || s.Status != ledger.Duplicate || s.Verifier.DuplicateOf != g.ID {
					t.Errorf("%s: another turn on the request JWT: %v %v, duplicate of %q; want DUPLICATE of the real receipt's row %s",
						when, o, s.Status, s.Verifier.DuplicateOf, g.ID)
				}
			}
			turn("after the real receipt", "A-2", real.RequestJWT)

			// Sweeping the copy removes no entry of the real receipt's.
			if err := h.store.Update(ctx, func(tx ledger.Tx) error {
				cur, err := tx.Row(f.ID)
				if err != nil {
					return err
				}
				_, err = ledger.SweepRow(tx, cur, ledger.Tombstone{ID: cur.ID, Kind: cur.Kind, Status: cur.Status, Class: cur.Class, RetainUntil: cur.RetainUntil, SweptAt: h.clock()})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			heldBy("after the copy was swept")
			turn("after the copy was swept", "A-3", pacttest.MalleateES256(real.RequestJWT))
		})
	}
}

// A real receipt re-posted beside another turn's request JWT, which does
// not verify with it, takes no request-JWT entry: that turn's own receipt,
// posted after with its request JWT, is a row of its own and AUTHORIZED,
// not a duplicate of the re-post. A writer that has seen a request JWT
// cannot make the real turn a replay of an unrelated receipt.
func TestAReceiptBesideAnotherTurnsRequestJWTIsNotItsFirstUse(t *testing.T) {
	h := newHarness(t)
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	b := h.sc.Mint(pacttest.Spec{User: "acct-other", GrantID: "g-other", Target: "Z-1", At: at.Add(-30 * 24 * time.Hour)})
	if row, _ := h.append(t, in(b)); row.Status != ledger.Authorized {
		t.Fatalf("the unrelated receipt: %v", row.Status)
	}
	a := h.sc.Mint(pacttest.Spec{User: "acct-victim", GrantID: "g-victim", Target: "V-1", At: at})
	evil := *b
	evil.RequestJWT = a.RequestJWT
	row, _ := h.append(t, in(&evil))
	if row.Status == ledger.Authorized || check(row, "request_signature").Result != verifier.Fail {
		t.Fatalf("the re-post beside another turn's request JWT: %v, %+v", row.Status, check(row, "request_signature"))
	}
	real, o := h.append(t, in(a))
	if o != ledger.Created || real.Status != ledger.Authorized || real.Verifier.DuplicateOf != "" {
		t.Fatalf("the turn's own receipt after the re-post: %v %v, duplicate of %q (%s)", o, real.Status, real.Verifier.DuplicateOf, check(real, "duplicate").Detail)
	}
	// A second turn on the same request JWT is measured against the real
	// receipt's row.
	second := h.sc.Mint(pacttest.Spec{User: "acct-victim", GrantID: "g-victim", Target: "V-2", At: at.Add(time.Second)})
	second.RequestJWT = a.RequestJWT
	if row, _ := h.append(t, in(second)); row.Verifier.DuplicateOf != real.ID {
		t.Fatalf("another turn on the request JWT: duplicate of %q, want %s", row.Verifier.DuplicateOf, real.ID)
	}
}

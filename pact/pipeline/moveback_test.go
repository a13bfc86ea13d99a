package pipeline

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// movingOutbox is a memOutbox that moves an entry back (MoveBacker)
// alone, or answers mustWait.
type movingOutbox struct {
	*memOutbox
	next     uint64
	moves    []uint64
	mustWait bool
}

func (o *movingOutbox) MoveBack(seq uint64) ([]uint64, error) {
	if o.mustWait {
		return nil, ErrMustWait
	}
	i := slices.IndexFunc(o.entries, func(e Entry) bool { return e.Seq == seq })
	if i < 0 {
		return nil, nil
	}
	e := o.entries[i]
	o.entries = slices.Delete(o.entries, i, i+1)
	o.next++
	e.Seq = o.next
	o.entries = append(o.entries, e)
	o.moves = append(o.moves, seq)
	return []uint64{e.Seq}, nil
}

func moving(names ...string) *movingOutbox {
	o := outbox(names...)
	return &movingOutbox{memOutbox: o, next: uint64(len(names))}
}

// keysDown answers the entries named down undecided for keys, as the
// ledger does when a signer's keys cannot be fetched.
func keysDown(down ...string) func(string) error {
	return func(n string) error {
		if slices.Contains(down, n) {
			return fmt.Errorf("%w: UNAVAILABLE: signing keys unavailable; retry", ErrKeysUnavailable)
		}
		return nil
	}
}

// onlySink is a Sink without batches.
type onlySink struct{ Sink }

func (o *movingOutbox) names() []string {
	var out []string
	for _, e := range o.entries {
		out = append(out, name(e.Item))
	}
	return out
}

// A receipt or refusal the ledger answers undecided for keys moves to the
// outbox's end, and the entries after it are posted; the drain ends when
// it comes round to it, having posted it once, and it is recorded by a
// later drain once its keys can be fetched. Batched or not.
func TestDrainMovesBackWhatIsUndecidedForKeys(t *testing.T) {
	for _, batch := range []bool{true, false} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			o := moving("r1", "r2", "F3", "F4", "r5")
			bs := &batchSink{answer: keysDown("r1", "F3")}
			var sink Sink = bs
			if !batch {
				sink = onlySink{bs}
			}
			n, err := drain(context.Background(), o, sink, slog.New(slog.DiscardHandler))
			if !errors.Is(err, ErrKeysUnavailable) || n != 3 {
				t.Fatalf("drain: %d sent, %v; want 3 and the keys' error", n, err)
			}
			if got, want := o.names(), []string{"r1", "F3"}; !slices.Equal(got, want) {
				t.Fatalf("outbox %v, want %v", got, want)
			}
			if !slices.Equal(o.moves, []uint64{1, 3}) || len(o.aside) != 0 {
				t.Fatalf("moved %v, set aside %v", o.moves, o.aside)
			}
			posts := map[string]int{}
			for _, c := range bs.calls {
				for _, n := range c {
					posts[n]++
				}
			}
			if posts["r1"] != 1 || posts["F3"] != 1 {
				t.Fatalf("posted %v: each entry moved back once a drain", posts)
			}
			// The keys can be fetched again.
			bs.answer = nil
			if n, err := drain(context.Background(), o, sink, slog.New(slog.DiscardHandler)); err != nil || n != 2 || o.Depth() != 0 {
				t.Fatalf("drain: %d sent, %v, %d waiting", n, err, o.Depth())
			}
		})
	}
}

// A revocation is never moved back: undecided for keys, it waits at the
// head, and so does an entry the outbox may not move (ErrMustWait), and
// an entry answered otherwise (the ledger down) is not moved either.
func TestDrainMovesNoRevocation(t *testing.T) {
	o := moving("r1", "r2")
	o.entries = slices.Insert(o.entries, 0, Entry{Seq: 9, Item: Revoked("g1", time.Now(), "")})
	sink := &revocationSink{batchSink: batchSink{}, err: fmt.Errorf("%w: UNAVAILABLE", ErrKeysUnavailable)}
	if _, err := drain(context.Background(), o, sink, slog.New(slog.DiscardHandler)); !errors.Is(err, ErrKeysUnavailable) {
		t.Fatal(err)
	}
	if len(o.moves) != 0 || o.Depth() != 3 || len(sink.calls) != 0 {
		t.Fatalf("moved %v, %d waiting, posted %v", o.moves, o.Depth(), sink.calls)
	}

	o = moving("r1", "r2")
	o.mustWait = true
	bs := &batchSink{answer: keysDown("r1")}
	if _, err := drain(context.Background(), o, bs, slog.New(slog.DiscardHandler)); !errors.Is(err, ErrKeysUnavailable) {
		t.Fatal(err)
	}
	if o.Depth() != 2 {
		t.Fatalf("%d waiting: an entry that must wait was passed", o.Depth())
	}

	o = moving("F1", "F2", "r3")
	bs = &batchSink{answer: func(n string) error {
		if n == "F1" {
			return fmt.Errorf("%w: UNAVAILABLE", ErrKeysUnavailable)
		}
		if n == "F2" {
			return errors.New("ledger answered HTTP 502")
		}
		return nil
	}}
	if _, err := drain(context.Background(), o, bs, slog.New(slog.DiscardHandler)); err == nil || errors.Is(err, ErrKeysUnavailable) {
		t.Fatalf("drain: %v, want the other error", err)
	}
	if len(o.moves) != 0 || !slices.Equal(o.names(), []string{"F1", "F2", "r3"}) {
		t.Fatalf("moved %v, outbox %v", o.moves, o.names())
	}
}

// revocationSink answers revocations err.
type revocationSink struct {
	batchSink
	err error
}

func (s *revocationSink) Post(ctx context.Context, it Item) error {
	if it.Revocation != nil {
		return s.err
	}
	return s.batchSink.Post(ctx, it)
}

// claimsJWS is a compact JWS of claims, unsigned: what Grant and MayPass read.
func claimsJWS(claims map[string]any) string {
	raw, _ := json.Marshal(claims)
	return "e30." + base64.RawURLEncoding.EncodeToString(raw) + ".sig"
}

// An entry may pass a revocation of another grant, or of its own when
// the ledger's grant_not_revoked check passes against it: a receipt's ts
// before the revocation's second, a refusal observed not after it.
func TestMayPass(t *testing.T) {
	at := time.Date(2026, 10, 7, 12, 0, 5, 500_000_000, time.UTC)
	rev := &Revocation{GrantID: "g1", RevokedAt: at}
	rc := func(grant string, ts time.Time) Item {
		return Item{Receipt: &Receipt{ReceiptJWS: claimsJWS(map[string]any{"grantId": grant, "ts": ts.Format(time.RFC3339Nano)})}}
	}
	rf := func(grant string, obs time.Time) Item {
		return Item{Refusal: &Refusal{DelegationToken: claimsJWS(map[string]any{"grant_id": grant}), ObservedAt: obs}}
	}
	for _, c := range []struct {
		name string
		it   Item
		want bool
	}{
		{"receipt of another grant", rc("g2", at.Add(time.Hour)), true},
		{"receipt in the second before", rc("g1", at.Add(-time.Second)), true},
		{"receipt in the revocation's second, before it", rc("g1", at.Add(-100*time.Millisecond)), false},
		{"receipt after", rc("g1", at.Add(time.Second)), false},
		{"receipt without a readable ts", Item{Receipt: &Receipt{ReceiptJWS: claimsJWS(map[string]any{"grantId": "g1"})}}, false},
		{"refusal before", rf("g1", at.Add(-time.Millisecond)), true},
		{"refusal at", rf("g1", at), true},
		{"refusal after", rf("g1", at.Add(time.Millisecond)), false},
		{"refusal without a grant", Item{Refusal: &Refusal{ObservedAt: at.Add(time.Hour)}}, true},
		{"revocation", Revoked("g2", at, ""), false},
	} {
		if got := c.it.MayPass(rev); got != c.want {
			t.Errorf("%s: MayPass %v, want %v", c.name, got, c.want)
		}
	}
	if g := rc("g7", at).Grant(); g != "g7" {
		t.Errorf("receipt's grant %q", g)
	}
	if g := rf("g8", at).Grant(); g != "g8" {
		t.Errorf("refusal's grant %q", g)
	}
}

// The client reads the ledger's answer undecided for keys, in REST and
// in a batch's result, as ErrKeysUnavailable; a 503 of a proxy in the
// way, or the ledger's other UNAVAILABLE answers, are not.
func TestClientReadsKeysUnavailable(t *testing.T) {
	var status int
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	c := &LedgerClient{URL: srv.URL, Key: "k"}
	rc := Item{Receipt: &Receipt{ReceiptJWS: "a.b.c"}}
	for _, tc := range []struct {
		status int
		body   string
		keys   bool
	}{
		{503, `{"code":14,"message":"signing keys unavailable; retry: fetch https://pa.example/jwks: 500","details":[]}`, true},
		{503, `{"code":14,"message":"a store is unavailable; retry","details":[]}`, false},
		{503, `<html>Service Unavailable</html>`, false},
		{500, `{"code":13,"message":"signing keys unavailable; retry"}`, false},
	} {
		status, body = tc.status, tc.body
		err := c.Post(context.Background(), rc)
		if err == nil || errors.Is(err, ErrKeysUnavailable) != tc.keys || errors.Is(err, ErrRejected) {
			t.Errorf("%d %s: %v; keys unavailable %v", tc.status, tc.body, err, tc.keys)
		}
	}
	status = 200
	body = `{"results":[{"code":14,"message":"signing keys unavailable; retry: no keys"},{"code":14,"message":"ledger is shutting down; retry"}]}`
	errs, err := c.PostReceipts(context.Background(), []Item{rc, rc})
	if err != nil || len(errs) != 2 || !errors.Is(errs[0], ErrKeysUnavailable) || errs[1] == nil || errors.Is(errs[1], ErrKeysUnavailable) {
		t.Fatalf("batch: %v, %v", errs, err)
	}
}

// The refusals posted together that the ledger answers undecided for
// keys all move back, each posted once a drain.
func TestDrainMovesBackRefusalsTogether(t *testing.T) {
	o := moving("F1", "F2", "F3", "r4")
	bs := &batchSink{answer: keysDown("F1", "F3")}
	n, err := drain(context.Background(), o, bs, slog.New(slog.DiscardHandler))
	if !errors.Is(err, ErrKeysUnavailable) || n != 2 {
		t.Fatalf("drain: %d sent, %v", n, err)
	}
	if !slices.Equal(o.moves, []uint64{1, 3}) || !slices.Equal(o.names(), []string{"F1", "F3"}) || len(bs.calls) != 4 {
		t.Fatalf("moved %v, outbox %v, posted %v", o.moves, o.names(), bs.calls)
	}
}

// A drain moves at most MaxMovesPerRound entries back: each move may read
// the whole outbox, so the entries undecided past the bound wait at the
// head for the next round, and nothing is lost.
func TestDrainMovesABoundedNumberBack(t *testing.T) {
	var names []string
	for i := range MaxMovesPerRound + 10 {
		names = append(names, fmt.Sprintf("r%d", i+1))
	}
	o := moving(names...)
	sink := onlySink{&batchSink{answer: keysDown(names...)}}
	if _, err := drain(context.Background(), o, sink, slog.New(slog.DiscardHandler)); !errors.Is(err, ErrKeysUnavailable) {
		t.Fatalf("drain: %v, want the keys' error", err)
	}
	if len(o.moves) != MaxMovesPerRound || o.Depth() != len(names) {
		t.Fatalf("moved %d, %d waiting; want %d moved and every entry kept", len(o.moves), o.Depth(), MaxMovesPerRound)
	}
	if got := o.names()[0]; got != fmt.Sprintf("r%d", MaxMovesPerRound+1) {
		t.Fatalf("the head after the round: %s, want the first entry not moved", got)
	}
}

// heldIn tells the entries left undecided for keys from the other errors
// joined with them (a failed removal of what the ledger recorded), which
// settle returns rather than drop.
func TestHeldInKeepsTheOtherErrors(t *testing.T) {
	a, b := &keysHeld{Seq: 1, Err: ErrKeysUnavailable}, &keysHeld{Seq: 2, Err: ErrKeysUnavailable}
	removal := errors.New("remove: disk full")
	if hs, other := heldIn(errors.Join(a, fmt.Errorf("post: %w", b))); len(hs) != 2 || other != nil {
		t.Errorf("two held: %v, %v", hs, other)
	}
	if hs, other := heldIn(errors.Join(removal, a)); len(hs) != 1 || !errors.Is(other, removal) {
		t.Errorf("held with a failed removal: %v, %v; want the removal's error kept", hs, other)
	}
}

package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/bolt"
)

// accessStore opens a bbolt store that counts its commits.
func accessStore(t *testing.T) (*bolt.Store, *atomic.Int64) {
	t.Helper()
	var commits atomic.Int64
	s, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Config{OnCommit: func(int, time.Duration) { commits.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, &commits
}

// Reads queue their records; one transaction writes many, and stopping
// the log writes what is left.
func TestAccessLogBatchesAndFlushesOnStop(t *testing.T) {
	s, commits := accessStore(t)
	log := ledger.NewAccessLog(s, ledger.AccessLogConfig{Batch: 100, FlushInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- log.Run(ctx) }()

	const n = 1000
	var wg sync.WaitGroup
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n / 10 {
				if err := log.Record(context.Background(), ledger.Access{Key: "support", RPC: "ListRows", Principal: fmt.Sprintf("acct-%d-%d", w, i), Rows: 1, Result: "ok"}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if q := log.Queued(); q != 0 {
		t.Fatalf("%d records still queued after stopping", q)
	}
	if c := commits.Load(); c < 1 || c > n/10 {
		t.Fatalf("%d commits for %d reads: want them batched", c, n)
	}
	page, err := log.List(context.Background(), ledger.AccessQuery{Limit: 1000})
	got := page.Records
	if err != nil || len(got) != n {
		t.Fatalf("list: %d records, %v", len(got), err)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq || got[i].At.Before(got[i-1].At) {
			t.Fatalf("record %d (seq %d, %s) after %d (%s): not in order", i, got[i].Seq, got[i].At, got[i-1].Seq, got[i-1].At)
		}
	}
	if page.Next.After != got[len(got)-1].Seq {
		t.Fatalf("next page after %d, want the last seq %d", page.Next.After, got[len(got)-1].Seq)
	}
	if more, err := log.List(context.Background(), page.Next); err != nil || len(more.Records) != 0 || more.Next.After != 0 {
		t.Fatalf("after the last page: %d records, next after %d, %v", len(more.Records), more.Next.After, err)
	}
}

func TestAccessLogQuery(t *testing.T) {
	s, _ := accessStore(t)
	now := time.Date(2026, 10, 7, 13, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	log := ledger.NewAccessLog(s, ledger.AccessLogConfig{Now: clock})
	ctx := context.Background()
	rec := func(a ledger.Access) {
		t.Helper()
		if err := log.Record(ctx, a); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
	}
	rec(ledger.Access{Key: "support-lead", RPC: "ListRows", Principal: "acct-48213", Rows: 2, Result: "ok"})
	rec(ledger.Access{Key: "auditor", RPC: "GetGrant", Grant: "g-1", Rows: 3, Result: "ok"})
	rec(ledger.Access{Key: "support-lead", RPC: "ListRows", Target: "A-5531", Rows: 1, Result: "ok"})
	rec(ledger.Access{Key: "auditor", RPC: "ListRows", Principal: "acct-48213", Rows: 2, Result: "ok"})
	// Replies that carried a customer's rows without the query naming them.
	rec(ledger.Access{Key: "support-lead", RPC: "ListRows", Target: "A-5531", Rows: 1, Result: "ok", RowPrincipals: []string{"acct-48213"}})
	rec(ledger.Access{Key: "support-lead", RPC: "ListRows", Target: "B-1", Rows: 1, Result: "ok", RowPrincipals: []string{"acct-1"}})
	rec(ledger.Access{Key: "auditor", RPC: "ListRows", Rows: 1000, Result: "ok", RowPrincipals: []string{"acct-1"}, RowPrincipalsCut: true})
	tests := []struct {
		name string
		q    ledger.AccessQuery
		want []string // RPC/key of the records, in order
	}{
		{"all", ledger.AccessQuery{}, []string{"ListRows/support-lead", "GetGrant/auditor", "ListRows/support-lead", "ListRows/auditor",
			"ListRows/support-lead", "ListRows/support-lead", "ListRows/auditor"}},
		// Named by the query, or among the principals of the rows the
		// reply carried; a reply whose principals were cut may have
		// carried anyone's.
		{"who read a customer", ledger.AccessQuery{Principal: "acct-48213"}, []string{"ListRows/support-lead", "ListRows/auditor", "ListRows/support-lead", "ListRows/auditor"}},
		{"who read another", ledger.AccessQuery{Principal: "acct-1"}, []string{"ListRows/support-lead", "ListRows/auditor"}},
		{"one key", ledger.AccessQuery{Key: "auditor"}, []string{"GetGrant/auditor", "ListRows/auditor", "ListRows/auditor"}},
		{"a grant", ledger.AccessQuery{Grant: "g-1"}, []string{"GetGrant/auditor"}},
		{"an order", ledger.AccessQuery{Target: "A-5531"}, []string{"ListRows/support-lead", "ListRows/support-lead"}},
		{"since", ledger.AccessQuery{Since: time.Date(2026, 10, 7, 13, 2, 0, 0, time.UTC)}, []string{"ListRows/support-lead", "ListRows/auditor",
			"ListRows/support-lead", "ListRows/support-lead", "ListRows/auditor"}},
		{"a page", ledger.AccessQuery{Limit: 2}, []string{"ListRows/support-lead", "GetGrant/auditor"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := log.List(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, a := range got.Records {
				names = append(names, a.RPC+"/"+a.Key)
			}
			if fmt.Sprint(names) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", names, tc.want)
			}
		})
	}
	first, _ := log.List(ctx, ledger.AccessQuery{Limit: 2})
	// Records made after the listing began end it: paging stops even
	// while reads go on.
	rec(ledger.Access{Key: "auditor", RPC: "ListAccessLog", Result: "ok"})
	q := first.Next
	q.Limit = 100
	rest, _ := log.List(ctx, q)
	if len(first.Records) != 2 || len(rest.Records) != 5 || rest.Records[0].Seq <= first.Records[1].Seq || rest.Next.After != 0 {
		t.Fatalf("paging: %d then %d records (next after %d)", len(first.Records), len(rest.Records), rest.Next.After)
	}
	if all, _ := log.List(ctx, ledger.AccessQuery{}); len(all.Records) != 8 {
		t.Fatalf("a new listing: %d records, want 8", len(all.Records))
	}
	if _, err := log.List(ctx, ledger.AccessQuery{Limit: 1001}); err == nil {
		t.Fatal("a page of 1001 was accepted")
	}
}

// A page bounded by size ends before the record that would pass the
// budget (holding one record at least), and its Next lists the rest:
// together the pages hold every record the query selects once, in List's
// order, a filter and a page size included.
func TestAccessLogListWithinPagesBySize(t *testing.T) {
	s, _ := accessStore(t)
	now := time.Date(2026, 10, 7, 13, 0, 0, 0, time.UTC)
	log := ledger.NewAccessLog(s, ledger.AccessLogConfig{Now: func() time.Time { return now }})
	ctx := context.Background()
	for i := range 10 {
		if err := log.Record(ctx, ledger.Access{Key: "support", RPC: "ListRows", Principal: fmt.Sprintf("acct-%d", i%2), Result: "ok"}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
	}
	ten := func(*ledger.Access) int { return 10 }
	for _, c := range []struct {
		name   string
		q      ledger.AccessQuery
		budget int
		sizes  []int
	}{
		{"two a page", ledger.AccessQuery{}, 25, []int{2, 2, 2, 2, 2}},
		{"one over the budget", ledger.AccessQuery{}, 5, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
		{"all fit", ledger.AccessQuery{}, 100, []int{10}},
		{"page size first", ledger.AccessQuery{Limit: 3}, 35, []int{3, 3, 3, 1}},
		{"a filter", ledger.AccessQuery{Principal: "acct-1"}, 25, []int{2, 2, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			whole := c.q
			whole.Limit = 100
			all, err := log.List(ctx, whole)
			if err != nil {
				t.Fatal(err)
			}
			var sizes []int
			var got []ledger.Access
			for q := c.q; ; {
				page, err := log.ListWithin(ctx, q, c.budget, ten)
				if err != nil {
					t.Fatal(err)
				}
				sizes = append(sizes, len(page.Records))
				got = append(got, page.Records...)
				if page.Next.After == 0 {
					break
				}
				q = page.Next
			}
			if fmt.Sprint(sizes) != fmt.Sprint(c.sizes) || len(got) != len(all.Records) {
				t.Fatalf("pages of %v records; want %v", sizes, c.sizes)
			}
			for i := range got {
				if got[i].Seq != all.Records[i].Seq {
					t.Fatalf("record %d is seq %d, List's is %d", i, got[i].Seq, all.Records[i].Seq)
				}
			}
		})
	}
}

// Records older than the retention are removed; later ones stay.
func TestAccessLogRetention(t *testing.T) {
	s, _ := accessStore(t)
	now := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	log := ledger.NewAccessLog(s, ledger.AccessLogConfig{Retention: retention.Period{Months: 12}, Now: func() time.Time { return now }})
	ctx := context.Background()
	for _, at := range []time.Time{now, now.AddDate(0, 3, 0), now.AddDate(0, 11, 0)} {
		now = at
		if err := log.Record(ctx, ledger.Access{Key: "k", RPC: "GetRow", Row: at.Format("2006-01"), Result: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The batch is put in write-once storage: the uploader takes it out
	// of the outbox (a prune keeps the records of a batch still queued).
	if err := s.Update(ctx, func(tx ledger.Tx) error {
		queued, err := tx.Outbox(10)
		for _, e := range queued {
			if err == nil {
				_, err = tx.Dequeue(e.Seq)
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	now = time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC) // the first record is 13 months old
	n, err := log.Prune(ctx)
	if err != nil || n != 1 {
		t.Fatalf("prune: %d removed, %v; want the one past 12 months", n, err)
	}
	page, _ := log.List(ctx, ledger.AccessQuery{})
	got := page.Records
	if len(got) != 2 || got[0].Row != "2026-04" || got[1].Row != "2026-12" {
		t.Fatalf("kept %+v", got)
	}
	keep := ledger.NewAccessLog(s, ledger.AccessLogConfig{Now: func() time.Time { return now.AddDate(10, 0, 0) }})
	if n, err := keep.Prune(ctx); n != 0 || err != nil {
		t.Fatalf("no retention removed %d, %v", n, err)
	}
}

// A full queue makes a read wait for the next write, never drop its record.
func TestAccessLogFullQueueWaits(t *testing.T) {
	s, _ := accessStore(t)
	log := ledger.NewAccessLog(s, ledger.AccessLogConfig{MaxQueued: 2, FlushInterval: time.Hour})
	ctx := context.Background()
	for range 2 {
		if err := log.Record(ctx, ledger.Access{Key: "k", RPC: "GetRow", Result: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := log.Record(gone, ledger.Access{Key: "k", RPC: "GetRow"}); err == nil {
		t.Fatal("a third record was queued past MaxQueued")
	}
	recorded := make(chan error, 1)
	go func() { recorded <- log.Record(ctx, ledger.Access{Key: "k", RPC: "GetEvidence", Result: "ok"}) }()
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-recorded:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting read was not let through by the write")
	}
	page, err := log.List(ctx, ledger.AccessQuery{})
	got := page.Records
	if err != nil || len(got) != 3 || got[2].RPC != "GetEvidence" {
		t.Fatalf("records %+v %v", got, err)
	}
}

// A read naming values longer than any the ledger holds is recorded with
// each cut to MaxFieldLength bytes, between characters, saying how much
// was left out: a reading key's refused reads cannot fill the log's
// memory queue nor its store. Values within the bound are kept whole.
func TestAccessRecordsCutLongValues(t *testing.T) {
	s, _ := accessStore(t)
	log := ledger.NewAccessLog(s, ledger.AccessLogConfig{})
	ctx := context.Background()
	long := strings.Repeat("é", 100<<10) // two bytes a character
	short := strings.Repeat("a", ledger.MaxFieldLength)
	if err := log.Record(ctx, ledger.Access{Key: "support", RPC: "ListRows", Principal: short, Target: long, Grant: long, Agent: long, Row: long, Object: long, AboutKey: long, Result: "invalid"}); err != nil {
		t.Fatal(err)
	}
	if err := log.Record(ctx, ledger.Access{Key: "support", RPC: "ListRows", Principal: short, Result: "ok"}); err != nil {
		t.Fatal(err)
	}
	page, err := log.List(ctx, ledger.AccessQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 2 {
		t.Fatalf("%d records, want 2", len(page.Records))
	}
	a := page.Records[0]
	if !a.Truncated || a.Principal != short {
		t.Errorf("truncated %v, principal of %d bytes; want true and the %d-byte principal whole", a.Truncated, len(a.Principal), len(short))
	}
	for _, v := range []string{a.Target, a.Grant, a.Agent, a.Row, a.Object, a.AboutKey} {
		kept, _, _ := strings.Cut(v, "…")
		if len(v) > ledger.MaxFieldLength || !utf8.ValidString(v) || !strings.HasSuffix(v, fmt.Sprintf("… (%d bytes more)", len(long)-len(kept))) || !strings.HasPrefix(long, kept) {
			t.Errorf("a long value recorded as %d bytes: %q", len(v), v[max(0, len(v)-40):])
		}
	}
	if b := page.Records[1]; b.Truncated || b.Principal != short {
		t.Errorf("a record within bounds: truncated %v, principal of %d bytes", b.Truncated, len(b.Principal))
	}
}

// toggledWrites is a store whose writes fail while refuse is set: a
// PostgreSQL server put read-only, a full disk.
type toggledWrites struct {
	ledger.Store
	refuse *atomic.Bool
}

func (s toggledWrites) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	if s.refuse.Load() {
		return errors.New("cannot execute INSERT in a read-only transaction")
	}
	return s.Store.Update(ctx, fn)
}

// While the row store takes no writes, reads are recorded only until the
// oldest record not yet written has waited MaxUnwritten; then Record
// refuses (the read is not answered) rather than queue reads a stop would
// lose. Once a write succeeds, reads are recorded again, and none that
// Record took is missing.
func TestAccessRecordRefusedOnceTheOldestUnwrittenWaitedTooLong(t *testing.T) {
	s, _ := accessStore(t)
	var refuse atomic.Bool
	refuse.Store(true)
	var elapsed time.Duration
	log := ledger.NewAccessLog(toggledWrites{s, &refuse}, ledger.AccessLogConfig{Elapsed: func() time.Duration { return elapsed }})
	ctx := context.Background()
	read := ledger.Access{Key: "support", RPC: "GetRow", RowPrincipal: "acct-48213", Rows: 1, Result: "ok"}
	taken := 0
	for range 2 * int(ledger.DefaultMaxUnwritten/time.Second) {
		if err := log.Record(ctx, read); err != nil {
			if !errors.Is(err, ledger.ErrAccessUnwritten) || !errors.Is(err, ledger.ErrUnavailable) {
				t.Fatalf("refused with %v, want ErrAccessUnwritten and ErrUnavailable", err)
			}
			break
		}
		taken++
		if err := log.Flush(ctx); err == nil {
			t.Fatal("a write succeeded on a store refusing writes")
		}
		elapsed += time.Second
	}
	if want := int(ledger.DefaultMaxUnwritten/time.Second) + 1; taken != want {
		t.Fatalf("%d reads recorded over the outage, want %d (those within %s of the oldest)", taken, want, ledger.DefaultMaxUnwritten)
	}
	refuse.Store(false)
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := log.Record(ctx, read); err != nil {
		t.Fatalf("a read after the records were written: %v", err)
	}
	if got := accessRecords(t, log); got != taken+1 {
		t.Fatalf("%d records kept, want %d: every read recorded", got, taken+1)
	}
}

// A record stamped by a clock ahead (a clock stepped forward a day for a
// moment, then put right) neither ends a listing nor is left out of it:
// the listing goes by record number up to the last handed out when it
// began, so the reads made after it are listed, and a listing still ends
// while reads go on.
func TestAccessListingGoesPastARecordStampedAhead(t *testing.T) {
	ctx := context.Background()
	s, _ := accessStore(t)
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	log := ledger.NewAccessLog(s, ledger.AccessLogConfig{Now: func() time.Time { return now }})
	rec := func(key, principal string) {
		t.Helper()
		if err := log.Record(ctx, ledger.Access{Key: key, RPC: "GetRow", Row: "r", RowPrincipal: principal, Rows: 1, Result: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	rec("support-1", "acct-1")
	now = now.Add(24 * time.Hour) // the clock stepped ahead
	rec("support-2", "acct-2")
	now = time.Date(2026, 12, 7, 12, 0, 1, 0, time.UTC) // put right
	rec("support-3", "acct-48213")
	rec("support-3", "acct-48213")
	now = now.Add(5 * time.Minute)
	keys := func(p ledger.AccessPage) []string {
		var out []string
		for _, r := range p.Records {
			out = append(out, r.Key)
		}
		return out
	}
	all, err := log.List(ctx, ledger.AccessQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := keys(all), []string{"support-1", "support-2", "support-3", "support-3"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listing: got %v, want %v", got, want)
	}
	byP, err := log.List(ctx, ledger.AccessQuery{Principal: "acct-48213"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := keys(byP), []string{"support-3", "support-3"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reads of acct-48213: got %v, want %v", got, want)
	}
	// Paged: the first page's Next ends the listing at the records made
	// before it, though a record made since is stamped earlier than some.
	first, err := log.List(ctx, ledger.AccessQuery{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	rec("support-4", "acct-4")
	q := first.Next
	q.Limit = 100
	rest, err := log.List(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := keys(rest), []string{"support-3", "support-3"}; fmt.Sprint(got) != fmt.Sprint(want) || rest.Next.After != 0 {
		t.Errorf("second page: got %v (next after %d), want %v and the listing complete", got, rest.Next.After, want)
	}
}

package drill_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

// downStore is a row store whose writes fail until the bubble's clock
// reads up.
type downStore struct {
	ledger.Store
	up atomic.Pointer[time.Time]
}

var errStoreDown = errors.New("row store down")

func (s *downStore) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	if up := s.up.Load(); up != nil && time.Now().Before(*up) {
		return errStoreDown
	}
	return s.Store.Update(ctx, fn)
}

// newDownEnv is newEnvFor on a row store whose writes fail until its
// clock reads up, once set.
func newDownEnv(t *testing.T, sc *pacttest.Scenario) (*env, *downStore) {
	t.Helper()
	dir := t.TempDir()
	b, err := bolt.Open(filepath.Join(dir, "l.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	store := &downStore{Store: b}
	objects, _ := localdir.Open(filepath.Join(dir, "ev"))
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	l, err := ledger.New(store, objects, v, sc.Static(time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC)), ledger.Config{Logger: slog.New(slog.DiscardHandler), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &env{sc: sc, l: l, r: drill.New(l, drill.Config{Now: time.Now})}, store
}

// logRecords returns the records of a JSON log at level.
func logRecords(t *testing.T, log *bytes.Buffer, level string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(log.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["level"] == level {
			out = append(out, rec)
		}
	}
	return out
}

// The row store is down from before 03:00 to 03:05 on 1 January: the
// scheduled drill fails, is tried again a little later, and runs that
// morning rather than a month later. Each failure is logged with when it
// is tried again.
func TestSchedulerRetriesAFailedRun(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	synctest.Test(t, func(t *testing.T) {
		e, store := newDownEnv(t, sc)
		e.append(t, e.sc.Mint(pacttest.Spec{Target: "S-1"}))
		up := time.Date(2000, 1, 1, 3, 5, 0, 0, time.UTC)
		store.up.Store(&up)
		log, stop := runScheduler(t, e, time.Time{})
		time.Sleep(4 * time.Hour)
		synctest.Wait()

		got := startedAt(t, e)
		if len(got) != 1 || got[0].Before(up) || !got[0].Before(up.Add(30*time.Minute)) {
			t.Errorf("monthly drills started %v, want one between %s (the store back) and half an hour later", got, up)
		}
		errs := logRecords(t, log, "ERROR")
		if len(errs) == 0 {
			t.Errorf("no ERROR logged for the failed runs")
		}
		for _, rec := range errs {
			if _, ok := rec["retry_at"]; !ok {
				t.Errorf("ERROR %v does not say when the drill is tried again (retry_at)", rec)
			}
		}
		stop()
	})
}

// The row store is down from 03:00 on 1 January until 02:00 on 1 March:
// the scheduler keeps trying, without a busy loop, runs February's drill
// once the store is back and March's at its time, and stops when asked.
func TestSchedulerRetriesUntilStopped(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	synctest.Test(t, func(t *testing.T) {
		e, store := newDownEnv(t, sc)
		e.append(t, e.sc.Mint(pacttest.Spec{Target: "S-1"}))
		up := time.Date(2000, 3, 1, 2, 0, 0, 0, time.UTC)
		store.up.Store(&up)
		log, stop := runScheduler(t, e, time.Time{})
		time.Sleep(60*24*time.Hour + 2*time.Hour + 45*time.Minute) // 1 March 02:45: the store is back since 02:00
		synctest.Wait()
		if got := startedAt(t, e); len(got) != 1 || got[0].Before(up) {
			t.Errorf("monthly drills started %v, want one once the store is back at %s", got, up)
		}
		// A try at most every half hour is 2,880; one a minute would be
		// over 80,000.
		if n := len(logRecords(t, log, "ERROR")); n > 3000 {
			t.Errorf("%d failed tries logged in two months, want a backoff", n)
		}
		time.Sleep(time.Hour) // past 1 March 03:00
		synctest.Wait()
		if got := startedAt(t, e); len(got) != 2 {
			t.Errorf("monthly drills started %v, want March's too", got)
		}
		stop()
	})
}

// A catch-up of a slot missed while ledgerd was down (RunSchedulerFrom)
// is tried again when it fails, as a scheduled run is: the row store is
// down at the restart on 2 February and back at 09:00; February's drill
// runs then, not on 1 March.
func TestACatchUpThatFailsIsTriedAgain(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	synctest.Test(t, func(t *testing.T) {
		e, store := newDownEnv(t, sc)
		e.append(t, e.sc.Mint(pacttest.Spec{Target: "S-1"}))
		time.Sleep(32*24*time.Hour + 8*time.Hour) // 2 February 08:00
		up := time.Date(2000, 2, 2, 9, 0, 0, 0, time.UTC)
		store.up.Store(&up)
		missed := time.Date(2000, 2, 1, 3, 0, 0, 0, time.UTC)
		log, stop := runScheduler(t, e, missed)
		time.Sleep(3 * time.Hour) // 11:00
		synctest.Wait()
		got := startedAt(t, e)
		if len(got) != 1 || got[0].Before(up) || !got[0].Before(up.Add(time.Hour)) {
			t.Errorf("monthly drills started %v, want February's caught up once the store is back at %s; log:\n%s", got, up, log.String())
		}
		if len(logRecords(t, log, "ERROR")) == 0 {
			t.Errorf("no ERROR logged for the failed catch-up")
		}
		stop()
	})
}

// runScheduler runs e's scheduler, every 1st at 03:00, from missed
// (RunSchedulerFrom) until stop, which stops it and checks how it ended;
// log holds its JSON log.
func runScheduler(t *testing.T, e *env, missed time.Time) (log *bytes.Buffer, stop func()) {
	t.Helper()
	log = &bytes.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- e.r.RunSchedulerFrom(ctx, drill.Schedule{Day: 1, Hour: 3, Sample: 1}, missed, slog.New(slog.NewJSONHandler(log, nil)))
	}()
	return log, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunSchedulerFrom = %v", err)
		}
	}
}

package drill_test

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
)

// A monthly drill already stored for a slot is that slot's run: another
// ledgerd whose clock is three minutes ahead ran 1 January's drill at
// 03:00 by its clock and stopped; this one takes over at 02:59:59 by its
// own clock and does not run 1 January's drill again. Likewise a ledgerd
// restarted after its clock stepped back two minutes past its own run.
func TestSchedulerSkipsASlotAlreadyRun(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	for _, tc := range []struct {
		name string
		// other is how far ahead of this ledgerd's clock the clock that
		// ran 1 January's drill is.
		other time.Duration
	}{
		{"another ledgerd's clock ahead", 3 * time.Minute},
		{"this clock stepped back", 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnvFor(t, sc, time.Now)
				e.append(t, e.sc.Mint(pacttest.Spec{Target: "S-1"}))
				other := drill.New(e.l, drill.Config{Now: func() time.Time { return time.Now().Add(tc.other) }})
				slot := time.Date(2000, 1, 1, 3, 0, 0, 0, time.UTC)
				time.Sleep(time.Until(slot) - tc.other)
				ran, err := other.Run(context.Background(), drill.Request{Monthly: true, Sample: 1}, "scheduler")
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Until(slot.Add(-time.Second))) // 02:59:59 here
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				go func() {
					done <- e.r.RunScheduler(ctx, drill.Schedule{Day: 1, Hour: 3, Sample: 1}, slog.New(slog.DiscardHandler))
				}()
				time.Sleep(time.Hour)
				synctest.Wait()
				if got := startedAt(t, e); len(got) != 1 || !got[0].Equal(ran.StartedAt) {
					t.Errorf("monthly drills started %v, want only the one run at %s", got, ran.StartedAt)
				}
				time.Sleep(31 * 24 * time.Hour) // past 1 February 03:00
				synctest.Wait()
				if got := startedAt(t, e); len(got) != 2 || !got[0].Equal(slot.AddDate(0, 1, 0)) {
					t.Errorf("monthly drills started %v, want February's at %s too", got, slot.AddDate(0, 1, 0))
				}
				cancel()
				<-done
			})
		})
	}
}

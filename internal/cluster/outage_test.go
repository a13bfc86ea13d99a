package cluster

import (
	"flag"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/pgtest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// outage is how long TestDatabaseStopped keeps PostgreSQL stopped: short
// by default, so that `make test` stays quick; run it once with
// `go test ./internal/cluster -run TestDatabaseStopped -args -outage 30s`
// for the 30 s of the specification.
var outage = flag.Duration("outage", 3*time.Second, "how long TestDatabaseStopped keeps PostgreSQL stopped")

// TestDatabaseStopped: three replicas on one database, writers spread
// across them and retrying what fails. The database is stopped for the
// outage: every write fails fast with UNAVAILABLE, and so does every read
// (the ledger keeps no cache of rows), and /readyz is 503 on every
// replica. Once the database is started again every replica takes writes
// without a restart, every acknowledged write (before the outage and
// after) is stored, and the singletons' jobs run again (every row reaches
// the Merkle log). The times to fail and to recover are reported.
func TestDatabaseStopped(t *testing.T) {
	pgtest.Available(t)
	c, err := pgtest.New("outage")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Remove() })
	dsn := c.CreateDB(t)
	e := newEnv(t, dsn, 1500*time.Millisecond, 2*time.Second)
	rs := []*replica{e.startInProcess("r1"), e.startInProcess("r2"), e.startInProcess("r3")}
	w := startLoad(t, rs, e.corpus(3000, "outage"), 6, 50*time.Millisecond)
	poll(t, "writes before the outage", 60*time.Second, func() bool { n, _ := w.counts(); return n >= 100 })
	known := w.ids()[0]
	probes := e.corpus(1000, "probe")

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var writeLat, readLat []time.Duration
	for i := 0; time.Since(stopped) < *outage; i++ {
		r := rs[i%len(rs)]
		t0 := time.Now()
		_, err := r.client.AppendReceipt(as(t.Context(), writerKey), probes[i%len(probes)])
		writeLat = append(writeLat, time.Since(t0))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("%s: a write with the database stopped: %v, want UNAVAILABLE", r.name, err)
		}
		t0 = time.Now()
		_, err = r.client.GetRow(as(t.Context(), auditorKey), &ledgerv1.GetRowRequest{Id: known})
		readLat = append(readLat, time.Since(t0))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("%s: a read with the database stopped: %v, want UNAVAILABLE (no row cache)", r.name, err)
		}
		if code := readyz(r); code != http.StatusServiceUnavailable {
			t.Fatalf("%s: /readyz with the database stopped = %d, want 503", r.name, code)
		}
	}
	ackedDown, _ := w.counts()

	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	poll(t, "every replica takes writes again", 60*time.Second, func() bool {
		for _, r := range rs {
			if !w.lastAck(r.name).After(started) || readyz(r) != http.StatusOK {
				return false
			}
		}
		return true
	})
	recovered := time.Since(started)
	poll(t, "writes go on", 60*time.Second, func() bool { n, _ := w.counts(); return n >= ackedDown+100 })
	w.halt()
	for _, err := range w.failures() {
		if status.Code(err) != codes.Unavailable {
			t.Errorf("a write failed with %v, want UNAVAILABLE", err)
			break
		}
	}
	ids := w.ids()
	if n := missingRows(t, dsn, ids); n > 0 {
		t.Fatalf("%d of %d acknowledged rows are missing", n, len(ids))
	}
	poll(t, "every acknowledged row in the log (the integrator runs again)", 60*time.Second, func() bool {
		var n int
		queryRow(t, dsn, "SELECT count(*) FROM unnest($1::text[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM log_index x WHERE x.ref = a.id)", []any{ids}, &n)
		return n == 0
	})
	acked, failed := w.counts()
	t.Logf("database stopped for %s: %d probe writes and reads, all UNAVAILABLE: writes in %s, reads in %s; every replica took writes again %s after the start; %d writes acknowledged in all, %d attempts refused",
		outage.Round(time.Millisecond), len(writeLat), spread(writeLat), spread(readLat), recovered.Round(time.Millisecond), acked, failed)
}

// readyz returns the replica's /readyz status code (0 when it does not
// answer).
func readyz(r *replica) int {
	resp, err := http.Get("http://" + r.httpAddr + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// spread is the median and the largest of ds, for a report.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %s, max %s", s[len(s)/2].Round(100*time.Microsecond), s[len(s)-1].Round(100*time.Microsecond))
}

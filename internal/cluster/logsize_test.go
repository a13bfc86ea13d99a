package cluster

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pgtest"
)

// TestLogSizeFollowsTheCheckpointOnEveryReplica: pactledger_log_size is
// the size of the database's latest checkpoint on every replica, the one
// integrating the log and the others alike.
func TestLogSizeFollowsTheCheckpointOnEveryReplica(t *testing.T) {
	pgtest.Available(t)
	e := newEnv(t, pgtest.CreateDB(t), 1500*time.Millisecond, 2*time.Second)
	rs := []*replica{e.startInProcess("r1"), e.startInProcess("r2")}
	w := startLoad(t, rs, e.corpus(40, "logsize"), 4, 0)
	w.wait()
	if acked, failed := w.counts(); acked != 40 {
		t.Fatalf("%d writes acknowledged, %d failed: %v", acked, failed, w.failures())
	}
	// Every write and each start's policy leaf is a leaf: 42 in all.
	poll(t, "every leaf in a checkpoint", 30*time.Second, func() bool { return e.checkpoint(t, rs[0]).Size == 42 })
	for _, r := range rs {
		pollOr(t, r.name+"'s pactledger_log_size at the checkpoint's 42", 10*time.Second,
			func() bool { return logSize(t, r) == 42 },
			func() string {
				return r.name + "'s pactledger_log_size: " + strconv.FormatFloat(logSize(t, r), 'f', -1, 64)
			})
	}
}

// logSize reads pactledger_log_size from a replica's /metrics.
func logSize(t *testing.T, r *replica) float64 {
	t.Helper()
	res, err := http.Get("http://" + r.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "pactledger_log_size "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("%s: no pactledger_log_size in /metrics", r.name)
	return 0
}

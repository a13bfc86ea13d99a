package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
)

// BenchmarkBacklogDrain times the Provider's pipeline draining a backlog
// of receipts a ledger outage left in its outbox: ten grants' turns,
// interleaved, each grant of another User of the personal agent (a new
// grant of the same User replaces the one before, docs/design/036). They
// drain into the ledgerd it runs in: in AppendReceipts calls, and one
// receipt a call to the same ledger answering the batch route 404 (as
// one without AppendReceipts), in turn. Each drain is timed from the
// first post after the ledger is back to the ledger's answer that
// completes the backlog. It reports receipts a second both ways and
// their ratio; then, timed the same way, a backlog of as many refusals
// of account actions asked without a grant (PACT §3), which the pipeline
// posts RefusalsAtOnce at a time, each in a call of its own.
//
//	go test ./internal/server -run '^$' -bench BenchmarkBacklogDrain -benchtime 3x
func BenchmarkBacklogDrain(b *testing.B) {
	const backlog, grants = 300, 10
	var (
		mu           sync.Mutex
		down         = true
		noBatch      bool
		firstPost    time.Time
		answered     int           // receipts the ledger answered since it was back
		drained      chan struct{} // closed when it answered the whole backlog
		proxy        *httputil.ReverseProxy
		batchedRates []float64
		singleRates  []float64
		refusalRates []float64
	)
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		isDown, p := down, proxy
		if !isDown && firstPost.IsZero() {
			firstPost = time.Now()
		}
		refuse := noBatch && r.URL.Path == "/v1/receipts:batch"
		mu.Unlock()
		switch {
		case isDown || p == nil:
			http.Error(w, "down", http.StatusServiceUnavailable)
		case refuse:
			// As a ledger without the route answers: its status body,
			// which the pipeline reads as the ledger's own refusal (a
			// bare 404, as from a proxy in the way, is retried).
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"code":5,"message":"Not Found","details":[]}`)
		default:
			n := 0
			switch r.URL.Path {
			case "/v1/receipts", "/v1/refusals":
				n = 1
			case "/v1/receipts:batch":
				body, _ := io.ReadAll(r.Body)
				n = bytes.Count(body, []byte(`"receiptJws"`))
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
			p.ServeHTTP(sw, r) // the answer has been written when it returns
			mu.Lock()
			if sw.code == http.StatusOK {
				if answered += n; answered >= backlog && drained != nil {
					close(drained)
					drained = nil
				}
			}
			mu.Unlock()
		}
	}))
	defer gate.Close()
	s := newShop(b, func(c *config.Config) {
		c.Provider.LedgerURL = gate.URL
		c.Provider.RateLimits = config.RateLimits{}
		c.Provider.RefusalLimit.Rate = 0 // the backlog of refusals is queued at once
	})
	u, _ := url.Parse("http://" + s.srv.HTTPAddr())
	proxy = httputil.NewSingleHostReverseProxy(u)
	// Conversations of ten customers' grants interleave, as they do at a
	// support desk: a grant's receipts are recorded in order, different
	// grants' at once.
	var subs, tokens []string
	for i := range grants {
		subs = append(subs, fmt.Sprintf("u%d", i))
		tokens = append(tokens, s.tokenAs(b, subs[i]))
	}
	turn := 0
	drain := func(batched, refusals bool) float64 {
		done := make(chan struct{})
		mu.Lock()
		down, noBatch, firstPost, answered, drained = true, !batched, time.Time{}, 0, done
		mu.Unlock()
		for range backlog {
			turn++
			if refusals {
				if code, text := s.askWithoutGrant(b, subs[turn%grants], fmt.Sprintf("m%d", turn)); code != http.StatusOK {
					b.Fatalf("ask without a grant: %d %s", code, text)
				}
				continue
			}
			s.sendAs(b, subs[turn%grants], tokens[turn%grants], fmt.Sprintf("m%d", turn), "what is the status of order A-88213?")
		}
		mu.Lock()
		down = false
		mu.Unlock()
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			b.Fatalf("the ledger did not get the backlog: %d left in the outbox", s.p.PipelineDepth())
		}
		mu.Lock()
		took := time.Since(firstPost)
		mu.Unlock()
		return backlog / took.Seconds()
	}
	b.ResetTimer()
	for i := range b.N {
		// The order turns, so that a machine speeding up or slowing down
		// favours neither way.
		if i%2 == 0 {
			batchedRates = append(batchedRates, drain(true, false))
			singleRates = append(singleRates, drain(false, false))
		} else {
			singleRates = append(singleRates, drain(false, false))
			batchedRates = append(batchedRates, drain(true, false))
		}
		refusalRates = append(refusalRates, drain(true, true))
	}
	b.StopTimer()
	batched, single, refused := median(batchedRates), median(singleRates), median(refusalRates)
	b.ReportMetric(batched, "receipts/s-batched")
	b.ReportMetric(single, "receipts/s-one-a-call")
	b.ReportMetric(batched/single, "ratio")
	b.ReportMetric(refused, "refusals/s")
	b.Logf("backlog of %d receipts of %d grants, medians of %d drains each way: %.0f receipts/s in AppendReceipts calls (%v), %.0f one a call (%v): %.2f times; "+
		"%d refusals without a grant: %.0f refusals/s (%v)",
		backlog, grants, b.N, batched, rounded(batchedRates), single, rounded(singleRates), batched/single, backlog, refused, rounded(refusalRates))
}

// statusWriter notes the status code written through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rounded(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}

package server_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
)

// The Provider's ledgerUrl reaches the ledger through a front that
// answers plain http with a redirect to https, as fronts commonly do: an
// answer that is not the ledger's record of what was posted leaves the
// entry waiting, however it is coded, and it lands once the front passes
// posts through.
func TestPipelineKeepsWhatARedirectAnswered(t *testing.T) {
	var mu sync.Mutex
	var proxy *httputil.ReverseProxy
	var elsewhere string // where the front redirects to, while it does
	answered := 0        // posts the front redirected
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		p, to := proxy, elsewhere
		if to != "" && r.Method == http.MethodPost {
			answered++
		}
		mu.Unlock()
		if to != "" {
			http.Redirect(w, r, to+r.URL.Path, http.StatusMovedPermanently)
			return
		}
		p.ServeHTTP(w, r)
	}))
	defer front.Close()
	s := newShop(t, func(c *config.Config) { c.Provider.LedgerURL = front.URL })
	ledgerURL, _ := url.Parse("http://" + s.srv.HTTPAddr())
	mu.Lock()
	proxy = httputil.NewSingleHostReverseProxy(ledgerURL)
	elsewhere = ledgerURL.String() // the ledger itself, at the address the redirect names
	mu.Unlock()

	s.send(t, s.token(t), "m1", "cancel order A-5531")
	// Wait for two posts the front answered: the pipeline has had the
	// first answer, and acted on it, before it posts again.
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := answered
		mu.Unlock()
		if n >= 2 || (n >= 1 && s.p.PipelineDepth() == 0) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the front answered %d posts", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var list struct{ Rows []Row }
	s.call(t, "GET", "/v1/rows?target=A-5531", "support", nil, &list)
	if d := s.p.PipelineDepth(); d != 1 || len(list.Rows) != 0 {
		t.Fatalf("after a redirect's answer: outbox depth %d with %d ledger rows, want the receipt waiting (1, 0)", d, len(list.Rows))
	}

	mu.Lock()
	elsewhere = ""
	mu.Unlock()
	waitDepth(t, s, 0, 40*time.Second)
	s.call(t, "GET", "/v1/rows?target=A-5531", "support", nil, &list)
	if len(list.Rows) != 1 || list.Rows[0].Status != "ROW_STATUS_AUTHORIZED" {
		t.Fatalf("ledger rows: %+v", list.Rows)
	}
}

package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/server"
)

// providerOutbox is GET /v1/provider/outbox as an admin reads it.
type providerOutbox struct {
	Depth         int
	SetAsideCount int
	SetAside      []struct {
		Seq        string
		Kind       string
		ReceiptID  string `json:"receiptId"`
		Tools      []string
		Why        string
		SetAsideAt string
	}
	NextPageToken string
}

// A receipt the ledger refused is set aside: the agent holds a receipt the
// ledger has no row of. An operator learns of it from the metrics at once
// (the set-aside count), sees it, with the ledger's answer and without its
// tokens, and once the cause is mended puts it back: it is posted again
// and the ledger has its row. No role but admin may see or put back.
func TestAnAdminPutsAReceiptSetAsideBack(t *testing.T) {
	s, refuse := refusedShop(t)
	var out providerOutbox
	if code := s.call(t, "GET", "/v1/provider/outbox", "admin", nil, &out); code != 200 || out.SetAsideCount != 0 || len(out.SetAside) != 0 {
		t.Fatalf("before any turn: %d %+v", code, out)
	}
	if m := scrape(t, s.env); m["pactledger_provider_pipeline_set_aside"] != 0 {
		t.Fatalf("set aside before any turn: %v", m["pactledger_provider_pipeline_set_aside"])
	}
	s.send(t, s.token(t), "m1", "cancel order A-5531")
	waitDepth(t, s, 0, 20*time.Second)
	var list struct{ Rows []Row }
	s.call(t, "GET", "/v1/rows?target=A-5531", "support", nil, &list)
	m := scrape(t, s.env)
	if got, ok := m["pactledger_provider_pipeline_set_aside"]; len(list.Rows) != 0 || !ok || got != 1 {
		t.Fatalf("%d ledger rows; pactledger_provider_pipeline_set_aside %v (shown: %v), want 1", len(list.Rows), got, ok)
	}

	var raw json.RawMessage
	if code := s.call(t, "GET", "/v1/provider/outbox", "admin", nil, &raw); code != 200 {
		t.Fatalf("GET /v1/provider/outbox: %d %s", code, raw)
	}
	if strings.Contains(string(raw), "eyJ") {
		t.Fatalf("the listing carries a token or a JWS: %s", raw)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if out.Depth != 0 || out.SetAsideCount != 1 || len(out.SetAside) != 1 {
		t.Fatalf("after the refusal: %s", raw)
	}
	e := out.SetAside[0]
	if e.Kind != "receipt" || !strings.HasPrefix(e.ReceiptID, "sha256:") || fmt.Sprint(e.Tools) != "[cancel_order]" ||
		!strings.Contains(e.Why, "rejected by the ledger") || !strings.Contains(e.Why, "messageId") || e.SetAsideAt == "" {
		t.Fatalf("the entry set aside is listed as %+v", e)
	}

	for _, role := range []string{"support", "auditor", "writer"} {
		if code := s.call(t, "GET", "/v1/provider/outbox", role, nil, nil); code != http.StatusForbidden {
			t.Fatalf("%s reading the Provider's outbox: %d, want 403", role, code)
		}
		if code := s.call(t, "POST", "/v1/provider/outbox:retry", role, `{"all":true}`, nil); code != http.StatusForbidden {
			t.Fatalf("%s putting entries back: %d, want 403", role, code)
		}
	}
	for body, want := range map[string]int{`{}`: 400, `{"seq":"` + e.Seq + `","all":true}`: 400, `{"seq":"987654"}`: 404} {
		if code := s.call(t, "POST", "/v1/provider/outbox:retry", "admin", body, nil); code != want {
			t.Fatalf("retry %s: %d, want %d", body, code, want)
		}
	}

	refuse.Store(false) // the cause mended
	var rep struct{ Retried int }
	if code := s.call(t, "POST", "/v1/provider/outbox:retry", "admin", `{"seq":"`+e.Seq+`"}`, &rep); code != 200 || rep.Retried != 1 {
		t.Fatalf("retry %s: %d %+v", e.Seq, code, rep)
	}
	waitDepth(t, s, 0, 20*time.Second)
	s.call(t, "GET", "/v1/rows?target=A-5531", "support", nil, &list)
	if len(list.Rows) != 1 || list.Rows[0].Status != "ROW_STATUS_AUTHORIZED" {
		t.Fatalf("ledger rows after the retry: %+v", list.Rows)
	}
	if code := s.call(t, "GET", "/v1/provider/outbox", "admin", nil, &out); code != 200 || out.SetAsideCount != 0 || len(out.SetAside) != 0 {
		t.Fatalf("after the retry: %d %+v", code, out)
	}
	if m := scrape(t, s.env); m["pactledger_provider_pipeline_set_aside"] != 0 {
		t.Fatalf("pactledger_provider_pipeline_set_aside %v after the retry", m["pactledger_provider_pipeline_set_aside"])
	}
}

// refusedShop is a shop whose pipeline reaches the ledger through a front
// that, while refuse holds, makes every receipt one the ledger refuses: a
// messageId longer than the ledger takes.
func refusedShop(t *testing.T) (*shop, *atomic.Bool) {
	var ledgerURL atomic.Pointer[url.URL]
	refuse := new(atomic.Bool)
	refuse.Store(true)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() && (r.URL.Path == "/v1/receipts" || r.URL.Path == "/v1/receipts:batch") {
			b, _ := io.ReadAll(r.Body)
			b = bytes.Replace(b, []byte(`"messageId":"`), []byte(`"messageId":"`+strings.Repeat("m", 600)), -1)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}
		httputil.NewSingleHostReverseProxy(ledgerURL.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	s := newShop(t, func(c *config.Config) { c.Provider.LedgerURL = front.URL })
	u, _ := url.Parse("http://" + s.srv.HTTPAddr())
	ledgerURL.Store(u)
	return s, refuse
}

// A page of entries set aside ends early rather than pass the bound on an
// answer's bytes, and the next page goes on from it.
func TestProviderOutboxPagesStayWithinTheAnswerBound(t *testing.T) {
	s, _ := refusedShop(t)
	tok := s.token(t)
	for i, text := range []string{"cancel order A-5531", "where is order A-88213", "where is order A-5531"} {
		s.send(t, tok, fmt.Sprintf("m%d", i), text)
	}
	waitDepth(t, s, 0, 20*time.Second)
	server.SetAnswerRowBytes(t, 1)
	var seqs []string
	token := ""
	for range 4 {
		var out providerOutbox
		if code := s.call(t, "GET", "/v1/provider/outbox?pageToken="+token, "admin", nil, &out); code != 200 || len(out.SetAside) != 1 {
			t.Fatalf("page after %q: %d %+v, want one entry", token, code, out)
		}
		seqs = append(seqs, out.SetAside[0].Seq)
		if token = out.NextPageToken; token == "" {
			break
		}
	}
	if len(seqs) != 3 || seqs[0] == seqs[1] || seqs[1] == seqs[2] {
		t.Fatalf("pages of one entry each gave %v, want the three set aside once each", seqs)
	}
}

// A ledgerd that runs no Provider says so.
func TestProviderOutboxWithoutAProvider(t *testing.T) {
	e := newEnv(t, jose.ES256, func(c *config.Config) { off := false; c.Provider.Enabled = &off })
	if code := e.call(t, "GET", "/v1/provider/outbox", "admin", nil, nil); code != http.StatusBadRequest {
		t.Fatalf("GET /v1/provider/outbox without a Provider: %d, want 400 (FAILED_PRECONDITION)", code)
	}
}

// A refusal set aside names the customer the Provider claimed and the
// order: an admin's listing of the entries set aside is recorded with
// those customers and how many entries it listed, and
// `ledgerctl access-log --principal` finds it.
func TestAProviderOutboxListingIsFoundByTheClaimedPrincipal(t *testing.T) {
	var ledgerURL atomic.Pointer[url.URL]
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/refusals") {
			http.Error(w, `{"code":3,"message":"refused by the front"}`, http.StatusBadRequest)
			return
		}
		httputil.NewSingleHostReverseProxy(ledgerURL.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	s := newShop(t, func(c *config.Config) { c.Provider.LedgerURL = front.URL })
	u, _ := url.Parse("http://" + s.srv.HTTPAddr())
	ledgerURL.Store(u)

	// A turn without a delegation grant: the Provider records a refusal,
	// which the front refuses, so it is set aside.
	body, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": "m1", "role": "ROLE_USER", "parts": []map[string]any{{"text": "cancel order A-5531"}}}})
	req, _ := http.NewRequest("POST", s.base+"/message:send", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.paJWTAs("u1"))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	waitDepth(t, s, 0, 20*time.Second)
	var out struct {
		SetAside []struct {
			Kind             string
			ClaimedPrincipal string `json:"claimedPrincipal"`
		}
	}
	if code := s.call(t, "GET", "/v1/provider/outbox", "admin", nil, &out); code != 200 || len(out.SetAside) != 1 || out.SetAside[0].Kind != "refusal" || out.SetAside[0].ClaimedPrincipal == "" {
		t.Fatalf("GET /v1/provider/outbox: %d %+v, want one refusal naming its customer", code, out)
	}
	p := out.SetAside[0].ClaimedPrincipal
	var got []accessRecord
	for _, a := range s.accessLog(t, "?principal="+url.QueryEscape(p)) {
		if a.Rpc == "GetProviderOutbox" {
			got = append(got, a)
		}
	}
	if len(got) != 1 || got[0].Rows != 1 || len(got[0].RowPrincipals) != 1 || got[0].RowPrincipals[0] != p || got[0].RowPrincipalsTruncated {
		t.Errorf("the listing's records found by --principal %q: %+v; want one, of 1 entry, naming %q", p, got, p)
	}
}

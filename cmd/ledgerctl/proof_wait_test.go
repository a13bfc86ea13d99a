package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pactledger/pactledger/internal/config"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// restGet GETs url with the API key of role and returns the status code
// and body.
func (f *fixture) restGet(t *testing.T, role, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keys[role])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// ledgerctl proof of a dispute event or of an incident's closure that is
// committed but not yet in the log waits for its leaf (--wait), as it
// does for a row; one that does not exist is not found at once. REST
// answers the same: 503 with a retry delay, then the proof.
//
// ledgerd extends its log at start-up and then not for an hour, so what
// is written after start-up waits for the log until ledgerd starts again.
// A proxy in front of ledgerd says when ledgerctl has been told to wait;
// the test then restarts ledgerd, holding ledgerctl's requests meanwhile.
func TestProofWaitsForAnEventsLeaf(t *testing.T) {
	f := startWith(t, insecure.NewCredentials(), func(c *config.Config) { c.MerkleLog.Interval = config.Duration(time.Hour) })
	key := f.verifierKey(t)
	row, incident := f.incidentRow(t)
	if code, _, errs := f.ctl(t, "support", "dispute", "open", f.rowID, "--note", "test"); code != 0 {
		t.Fatalf("dispute open: %d %s", code, errs)
	}
	if code, _, errs := f.ctl(t, "admin", "incidents", "close", incident, "--note", "customer re-granted"); code != 0 {
		t.Fatalf("incidents close: %d %s", code, errs)
	}

	// What does not exist is not found, without waiting.
	for _, tc := range []struct{ name, row, event string }{
		{"a dispute event past the last", f.rowID, "dispute/1"},
		{"the closure of a row with no incident", f.rowID, "incident-close"},
		{"an event of no row", strings.Repeat("0", 64), "dispute/0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := f.ctl(t, "auditor", "proof", tc.row, "--event", tc.event, "--wait", "1h")
			if code != exitNotFound || !strings.Contains(errs, "not found") {
				t.Fatalf("proof %s --event %s: exit %d %s, want %d (not found)", tc.row, tc.event, code, errs, exitNotFound)
			}
		})
	}

	// Not logged within --wait: ledgerctl says which event it waited for.
	code, _, errs := f.ctl(t, "auditor", "proof", f.rowID, "--event", "dispute/0", "--wait", "300ms")
	if want := "dispute/0 of row " + f.rowID + ": not yet in a signed checkpoint after 300ms"; code != exitError || !strings.Contains(errs, want) {
		t.Fatalf("proof --event dispute/0 --wait 300ms: exit %d %s, want %d and %q", code, errs, exitError, want)
	}

	// REST: not yet logged, retry.
	for _, q := range []string{row + "/proof?event=incident-close", f.rowID + "/proof?event=dispute/0"} {
		code, body := f.restGet(t, "auditor", f.http+"/v1/rows/"+q)
		var st struct {
			Code    int
			Message string
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			}
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("GET %s: %d %s: %v", q, code, body, err)
		}
		if code != http.StatusServiceUnavailable || st.Code != int(codes.Unavailable) || !strings.Contains(st.Message, errNotLogged.Error()) ||
			len(st.Details) != 1 || !strings.HasSuffix(st.Details[0].Type, "RetryInfo") || st.Details[0].RetryDelay != "1s" {
			t.Fatalf("GET %s before the log has it: %d %s, want 503 not yet logged with a retry delay of 1s", q, code, body)
		}
	}

	// ledgerctl through the proxy: told to wait, it waits.
	var mu sync.RWMutex // held to write while ledgerd restarts
	ledgerd := f.addr
	conn := func() *grpc.ClientConn {
		c, err := grpc.NewClient(ledgerd, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	client := ledgerv1.NewLedgerServiceClient(conn())
	told := make(chan struct{})
	var once sync.Once
	p := f.split(t)
	p.rowProof = func(ctx context.Context, r *ledgerv1.GetRowProofRequest) (*ledgerv1.GetRowProofResponse, error) {
		mu.RLock()
		defer mu.RUnlock()
		rep, err := client.GetRowProof(ctx, r)
		if notLogged(err) {
			once.Do(func() { close(told) })
		}
		return rep, err
	}
	file := filepath.Join(t.TempDir(), "d0.proof")
	env := map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": keys["auditor"], "HOME": t.TempDir()}
	type result struct {
		code      int
		out, errs string
	}
	done := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run([]string{"proof", f.rowID, "--event", "dispute/0", "--out", file, "--wait", "1m"}, &out, &errb, func(k string) string { return env[k] })
		done <- result{code, out.String(), errb.String()}
	}()
	select {
	case <-told:
	case r := <-done:
		t.Fatalf("proof --event dispute/0 ended before the log had the event: exit %d %s%s", r.code, r.out, r.errs)
	}
	proxy := f.addr
	mu.Lock()
	f.stop()
	f.serve(t) // extends the log as it starts
	ledgerd = f.addr
	client = ledgerv1.NewLedgerServiceClient(conn())
	mu.Unlock()
	f.addr = proxy
	r := <-done
	if r.code != 0 || !strings.Contains(r.errs, "proof of dispute/0 of row "+f.rowID) {
		t.Fatalf("proof --event dispute/0 once logged: exit %d %s%s", r.code, r.out, r.errs)
	}
	code, out, errs := offline("proof", "verify", file, "--log-key", key)
	if code != 0 || !strings.Contains(out, "verified: dispute event 0 of row "+f.rowID) {
		t.Fatalf("proof verify: %d %s %s", code, out, errs)
	}
	code, out, errs = f.ctl(t, "auditor", "proof", row, "--event", "incident-close", "--wait", "1m")
	if code != 0 || !strings.Contains(out, `"leaf"`) {
		t.Fatalf("proof --event incident-close once logged: exit %d %s%s", code, out, errs)
	}
	if code, body := f.restGet(t, "auditor", f.http+"/v1/rows/"+f.rowID+"/proof?event=dispute/0"); code != http.StatusOK {
		t.Fatalf("GET proof of dispute/0 once logged: %d %s", code, body)
	}
}

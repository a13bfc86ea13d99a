package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// scrape reads /metrics as series (name and labels, as printed) to values.
func scrape(t *testing.T, e *env) map[string]float64 {
	t.Helper()
	res, err := http.Get(e.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, "#") || i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// rpc names a LedgerService series of the per-RPC metrics.
func rpc(metric, method, code string) string {
	labels := ""
	if code != "" {
		labels = `grpc_code="` + code + `",`
	}
	return metric + "{" + labels + `grpc_method="` + method + `",grpc_service="pactledger.ledger.v1.LedgerService",grpc_type="unary"}`
}

// streamRPC names a series of a LedgerService bidirectional stream.
func streamRPC(metric, method, code string) string {
	return strings.Replace(rpc(metric, method, code), `grpc_type="unary"`, `grpc_type="bidi_stream"`, 1)
}

// Every RPC is counted by method and code and timed, from REST and gRPC
// clients alike, refusals included.
func TestRPCMetrics(t *testing.T) {
	e := newEnv(t, jose.ES256)
	before := scrape(t, e)
	for _, s := range []string{rpc("grpc_server_handled_total", "WhoAmI", "OK"), rpc("grpc_server_handled_total", "AppendReceipt", "PermissionDenied"), rpc("grpc_server_handling_seconds_count", "GetRow", "")} {
		if v, ok := before[s]; !ok || v != 0 {
			t.Fatalf("before any call %s = %v (present %v), want 0", s, v, ok)
		}
	}
	e.call(t, "GET", "/v1/whoami", "support", nil, nil)
	e.call(t, "GET", "/v1/whoami", "auditor", nil, nil)
	e.call(t, "GET", "/v1/whoami", "not-a-key", nil, nil)
	e.call(t, "GET", "/v1/rows/"+strings.Repeat("0", 64), "support", nil, nil)
	e.call(t, "POST", "/v1/receipts", "support", post(e.sc.Mint(pacttest.Spec{})), nil)
	conn, err := grpc.NewClient(e.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+keys["admin"])
	if _, err := ledgerv1.NewLedgerServiceClient(conn).WhoAmI(ctx, &ledgerv1.WhoAmIRequest{}); err != nil {
		t.Fatal(err)
	}

	after := scrape(t, e)
	want := map[string]float64{
		rpc("grpc_server_handled_total", "WhoAmI", "OK"):                      3,
		rpc("grpc_server_handled_total", "WhoAmI", "Unauthenticated"):         1,
		rpc("grpc_server_handled_total", "GetRow", "NotFound"):                1,
		rpc("grpc_server_handled_total", "AppendReceipt", "PermissionDenied"): 1,
		rpc("grpc_server_handling_seconds_count", "WhoAmI", ""):               4,
		rpc("grpc_server_started_total", "GetRow", ""):                        1,
	}
	checkRose(t, before, after, want)
}

// checkRose fails t for each series of want that did not rise by its
// figure from before to after.
func checkRose(t *testing.T, before, after, want map[string]float64) {
	t.Helper()
	for s, n := range want {
		if got := after[s] - before[s]; got != n {
			t.Errorf("%s rose by %v, want %v", s, got, n)
		}
	}
}

type drillRun struct {
	Report struct {
		ID, Kind                  string
		FinishedAt                time.Time
		ChecksPassed, ChecksTotal int
		RunBy                     string
	}
}

// The latest drill of each kind is on /metrics, read from the stored
// reports: it survives a restart.
func TestDrillMetrics(t *testing.T) {
	e := newEnv(t, jose.ES256)
	if m := scrape(t, e); hasPrefix(m, "pactledger_drill_last_") {
		t.Fatal("drill metrics before any drill ran")
	}
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{User: "acct-1", Target: "A-1"})), nil)
	var dispute, missing, monthly drillRun
	e.call(t, "POST", "/v1/drills", "support", map[string]any{"target": "A-1"}, &dispute)
	e.call(t, "POST", "/v1/drills", "support", map[string]any{"monthly": map[string]any{"sample": 1}}, &monthly)
	checkDrillMetrics(t, scrape(t, e), "dispute", dispute)
	e.call(t, "POST", "/v1/drills", "support", map[string]any{"target": "NO-SUCH-ORDER"}, &missing)
	if missing.Report.ChecksPassed == missing.Report.ChecksTotal {
		t.Fatalf("a drill on an unknown order passed: %+v", missing.Report)
	}
	m := scrape(t, e)
	checkDrillMetrics(t, m, "dispute", missing)
	checkDrillMetrics(t, m, "monthly", monthly)
	e.stop()
	e.start(t)
	m = scrape(t, e)
	checkDrillMetrics(t, m, "dispute", missing)
	checkDrillMetrics(t, m, "monthly", monthly)
}

func checkDrillMetrics(t *testing.T, m map[string]float64, kind string, run drillRun) {
	t.Helper()
	r := run.Report
	score := 1.0
	if r.ChecksTotal > 0 {
		score = float64(r.ChecksPassed) / float64(r.ChecksTotal)
	}
	if got := m[`pactledger_drill_last_score{kind="`+kind+`"}`]; got != score {
		t.Errorf("%s score %v, want %v (%d of %d)", kind, got, score, r.ChecksPassed, r.ChecksTotal)
	}
	got := m[`pactledger_drill_last_run_timestamp_seconds{kind="`+kind+`"}`]
	if want := float64(r.FinishedAt.UnixNano()) / 1e9; got < want-0.001 || got > want+0.001 {
		t.Errorf("%s last run %v, want %v (drill %s)", kind, got, want, r.ID)
	}
}

func hasPrefix(m map[string]float64, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// A monthly drill missed while ledgerd was down runs when it starts again.
func TestMonthlyDrillCatchUp(t *testing.T) {
	e := newEnv(t, jose.ES256)
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{User: "acct-1", Target: "A-1"})), nil)
	// The last monthly report is from three months ago: runs were missed.
	old := time.Now().UTC().AddDate(0, -3, 0)
	id := ledger.NewDrillID(old)
	body, _ := json.Marshal(map[string]any{"id": id, "kind": "monthly", "startedAt": old, "finishedAt": old.Add(time.Second), "checksPassed": 6, "checksTotal": 6, "runBy": "scheduler"})
	if err := e.srv.Ledger().SaveDrill(context.Background(), id, old, body); err != nil {
		t.Fatal(err)
	}
	e.stop()
	e.start(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var list struct {
			Reports []struct{ ID, Kind, RunBy string }
		}
		e.call(t, "GET", "/v1/drills", "auditor", nil, &list)
		if len(list.Reports) == 2 {
			r := list.Reports[0]
			if r.ID == id || r.Kind != "DRILL_KIND_MONTHLY" || r.RunBy != "scheduler" {
				t.Fatalf("newest report %+v, want a monthly drill by the scheduler", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no catch-up drill: %d reports", len(list.Reports))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The bbolt store's key filter is on /readyz and /metrics once built, with
// the keys of the rows written: a row id and a request-JWT hash each.
func TestKeyFilterIsReported(t *testing.T) {
	e := newEnv(t, jose.ES256)
	for range 2 {
		e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{})), nil)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ready struct {
			Store struct {
				KeyFilter string `json:"keyFilter"`
			}
		}
		e.call(t, "GET", "/readyz", "", nil, &ready)
		keys := scrape(t, e)["pactledger_bbolt_key_filter_keys"]
		if strings.HasPrefix(ready.Store.KeyFilter, "ready, ") && keys >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz store.keyFilter %q, pactledger_bbolt_key_filter_keys %v; want ready with 4 keys or more", ready.Store.KeyFilter, keys)
		}
	}
}

// The signing key that signs every receipt gets a table once it has
// verified enough signatures, and /metrics shows it and the checks made
// through it.
func TestKeyTablesAreReported(t *testing.T) {
	e := newEnv(t, jose.ES256)
	before := scrape(t, e)
	if before["pactledger_signing_key_tables"] != 0 {
		t.Fatalf("pactledger_signing_key_tables %v before any receipt", before["pactledger_signing_key_tables"])
	}
	for range 70 { // the Provider's key signs each receipt and its delegation token: a table after 33 receipts
		e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{})), nil)
	}
	got := scrape(t, e)
	if got["pactledger_signing_key_tables"] < 1 || got["pactledger_signing_key_tables_made_total"] < 1 {
		t.Fatalf("tables %v, made %v; want a table for the Provider's key", got["pactledger_signing_key_tables"], got["pactledger_signing_key_tables_made_total"])
	}
	if n := got[`pactledger_signing_key_table_checks_total{verdict="accepted"}`]; n < 1 {
		t.Fatalf("%v signatures accepted through a table", n)
	}
	if n := got["pactledger_signing_key_table_failures_total"]; n != 0 {
		t.Fatalf("%v tables failed their self-check", n)
	}
}

// While ledgerd serves under load, the collector's heap floor
// (runtime.heapFloorMiB, 256 MiB at most by default) holds its
// percentage above GOGC's 100 over a test's small heap, and /metrics
// shows it.
func TestHeapFloorOnMetrics(t *testing.T) {
	e := newEnv(t, jose.ES256)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// A loaded ledgerd allocates about 65 KiB a row: here 64 MiB
		// between cycles.
		for range 64 {
			heapSink = make([]byte, 1<<20)
		}
		runtime.GC()
		got, ok := scrape(t, e)["go_gc_gogc_percent"]
		if ok && got > 100 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("go_gc_gogc_percent = %v (present %v), want above 100 under the heap floor", got, ok)
		}
	}
}

// heapSink keeps TestHeapFloorOnMetrics's allocations.
var heapSink []byte

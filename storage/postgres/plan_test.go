package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
)

// TestListPlansUseIndexes: on a table large enough that a full scan is
// not what the planner takes by default, every filter List offers (alone,
// combined, with a time window and a page position) is answered through
// an index, never by a scan of the whole row or target table: what keeps
// a lookup fast at a million rows. (A selective filter may be read through
// a bitmap of its index and its few rows sorted; a broad one is read in
// index order.)
func TestListPlansUseIndexes(t *testing.T) {
	dsn := pgtest.CreateDB(t)
	if _, _, err := Migrate(t.Context(), Config{DSN: dsn}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	const rows = 60000
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, sql := range []string{
		`INSERT INTO ledger_rows (id, principal, grant_id, agent, status, class, issued_ns, retain_ns, request_jwt, body)
		 SELECT md5(i::text) || md5((i + 1)::text), 'user-' || (i % 2000), 'grant-' || (i % 8000), 'https://pa-' || (i % 10) || '.example',
		        1 + i % 4, 1 + i % 5, $1::bigint + i::bigint * 1000000000, $1::bigint + i::bigint * 2000000000, '', '\x7b7d'
		 FROM generate_series(1, $2::int) AS i`,
		`INSERT INTO row_targets (target, issued_ns, row_id)
		 SELECT 'order-' || (i % 20000), $1::bigint + i::bigint * 1000000000, md5(i::text) || md5((i + 1)::text)
		 FROM generate_series(1, $2::int) AS i`,
		`ANALYZE`,
	} {
		args := []any{base, rows}
		if sql == "ANALYZE" {
			args = nil
		}
		if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
			t.Fatalf("fill: %v", err)
		}
	}
	at := func(sec int64) time.Time { return time.Unix(0, base+sec*int64(time.Second)).UTC() }
	page := &pageToken{issued: base + 30000*int64(time.Second), id: strings.Repeat("f", 64)}
	for _, c := range []struct {
		name  string
		q     ledger.Query
		after *pageToken
	}{
		{"newest rows", ledger.Query{}, nil},
		{"next page", ledger.Query{}, page},
		{"principal", ledger.Query{Principal: "user-7"}, nil},
		{"principal, next page", ledger.Query{Principal: "user-7"}, page},
		{"grant", ledger.Query{GrantID: "grant-70"}, nil},
		{"grant's rows that count", ledger.Query{GrantID: "grant-70", Signed: true}, nil},
		{"grant's rows that count, next page", ledger.Query{GrantID: "grant-70", Signed: true}, page},
		{"target", ledger.Query{Target: "order-77"}, nil},
		{"target and grant", ledger.Query{Target: "order-77", GrantID: "grant-77"}, nil},
		{"target and principal", ledger.Query{Target: "order-77", Principal: "user-77"}, nil},
		{"agent", ledger.Query{Agent: "https://pa-3.example"}, nil},
		{"status", ledger.Query{Status: ledger.Incident}, nil},
		{"class", ledger.Query{Class: retention.Incident}, nil},
		{"principal and status", ledger.Query{Principal: "user-7", Status: ledger.Authorized}, nil},
		{"time window", ledger.Query{Since: at(1000), Until: at(2000)}, nil},
		{"principal in a time window", ledger.Query{Principal: "user-7", Since: at(1000), Until: at(50000)}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := c.q
			q.PageSize = 50
			sql, args, _ := listSQL(q, c.after)
			var plan []byte
			if err := conn.QueryRow(t.Context(), "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
				t.Fatalf("explain %s: %v", sql, err)
			}
			var nodes []map[string]any
			if err := json.Unmarshal(plan, &nodes); err != nil {
				t.Fatal(err)
			}
			var bad []string
			walkPlan(nodes[0]["Plan"], func(n map[string]any) {
				switch n["Node Type"] {
				case "Seq Scan":
					bad = append(bad, n["Node Type"].(string)+" "+str(n["Relation Name"]))
				}
			})
			if len(bad) > 0 {
				t.Errorf("List %s: the plan has %v:\n%s", c.name, bad, plan)
			}
		})
	}
}

// TestListPlanBoundsTheScan: a query by several filters (a customer's
// order id and principal, the dispute drill's lookup) reads at most
// ledger.MaxListRead entries of one filter's index, under a Limit, and
// checks the others on the rows it found: EXPLAIN ANALYZE over a target
// with 30,000 rows of other principals shows the scan stopping one entry
// past the bound (which tells only that an entry follows), and rows
// fetched only for the entries within the bound.
func TestListPlanBoundsTheScan(t *testing.T) {
	dsn := pgtest.CreateDB(t)
	if _, _, err := Migrate(t.Context(), Config{DSN: dsn}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	const rows = 30000
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, sql := range []string{
		// Every row is under order A-5531; only the oldest is the customer's.
		`INSERT INTO ledger_rows (id, principal, grant_id, agent, status, class, issued_ns, retain_ns, request_jwt, body)
		 SELECT md5(i::text) || md5((i + 1)::text), CASE WHEN i = 1 THEN 'acct-48213' ELSE 'acct-' || i END, 'grant-' || i, 'https://pa.example',
		        3, 4, $1::bigint + i::bigint * 1000000000, NULL, '', '\x7b7d'
		 FROM generate_series(1, $2::int) AS i`,
		`INSERT INTO row_targets (target, issued_ns, row_id)
		 SELECT 'A-5531', $1::bigint + i::bigint * 1000000000, md5(i::text) || md5((i + 1)::text)
		 FROM generate_series(1, $2::int) AS i`,
		// And the customer's principal has as many rows under other
		// targets: neither index alone is selective.
		`INSERT INTO ledger_rows (id, principal, grant_id, agent, status, class, issued_ns, retain_ns, request_jwt, body)
		 SELECT md5((-i)::text) || md5((-i - 1)::text), 'acct-48213', 'grant-' || i, 'https://pa.example',
		        3, 4, $1::bigint + i::bigint * 1000000000, NULL, '', '\x7b7d'
		 FROM generate_series(1, $2::int) AS i`,
		`INSERT INTO row_targets (target, issued_ns, row_id)
		 SELECT 'B-' || i, $1::bigint + i::bigint * 1000000000, md5((-i)::text) || md5((-i - 1)::text)
		 FROM generate_series(1, $2::int) AS i`,
		`ANALYZE`,
	} {
		args := []any{base, rows}
		if sql == "ANALYZE" {
			args = nil
		}
		if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
			t.Fatalf("fill: %v", err)
		}
	}
	sql, args, bounded := listSQL(ledger.Query{Target: "A-5531", Principal: "acct-48213", PageSize: 1}, nil)
	if !bounded {
		t.Fatalf("a query by target and principal is not bounded:\n%s", sql)
	}
	var plan []byte
	if err := conn.QueryRow(t.Context(), "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	var nodes []map[string]any
	if err := json.Unmarshal(plan, &nodes); err != nil {
		t.Fatal(err)
	}
	var scans []string
	read, fetched := 0.0, 0.0
	walkPlan(nodes[0]["Plan"], func(n map[string]any) {
		typ := str(n["Node Type"])
		if !strings.Contains(typ, "Scan") || typ == "CTE Scan" {
			return
		}
		scans = append(scans, fmt.Sprintf("%s %s %s (%v rows x %v loops)", typ, str(n["Relation Name"]), str(n["Index Name"]), n["Actual Rows"], n["Actual Loops"]))
		if typ == "Seq Scan" {
			t.Errorf("the plan reads %s whole", str(n["Relation Name"]))
		}
		rows, _ := n["Actual Rows"].(float64)
		loops, _ := n["Actual Loops"].(float64)
		switch str(n["Relation Name"]) {
		case "row_targets":
			read = rows * loops
		case "ledger_rows":
			fetched += loops
		}
		if rows*loops > ledger.MaxListRead+1 {
			t.Errorf("%s on %s read %v entries, more than the bound %d and one", typ, str(n["Relation Name"]), rows*loops, ledger.MaxListRead)
		}
	})
	t.Logf("scans (rows x loops read): %s", strings.Join(scans, "; "))
	if read != ledger.MaxListRead+1 {
		t.Errorf("the scan of row_targets read %v entries, want %d (the bound and one), of %d under the target:\n%s", read, ledger.MaxListRead+1, rows, plan)
	}
	if fetched != ledger.MaxListRead {
		t.Errorf("the plan looked up %v rows, want %d (one an entry within the bound):\n%s", fetched, ledger.MaxListRead, plan)
	}
}

// TestSignedListPlanReadsOnlyTheRowsThatCount: a grant's rows that can
// count (List with Signed, the countMax check's listing) are read through
// the partial index of them, ledger_rows_counts_by_grant: EXPLAIN ANALYZE
// over a grant with 30,000 forged rows and 30 that count shows no scan
// reading more than those 30 and one.
func TestSignedListPlanReadsOnlyTheRowsThatCount(t *testing.T) {
	dsn := pgtest.CreateDB(t)
	if _, _, err := Migrate(t.Context(), Config{DSN: dsn}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	const rows, counting = 30000, 30
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, sql := range []string{
		// Every row is under the customer's grant; one in a thousand counts.
		`INSERT INTO ledger_rows (id, principal, grant_id, agent, status, class, issued_ns, retain_ns, request_jwt, body, counts)
		 SELECT md5(i::text) || md5((i + 1)::text), 'acct-' || i, 'a2agrant_7Q2F', 'https://pa.example',
		        2, 4, $1::bigint + i::bigint * 1000000000, NULL, '', '\x7b7d', i % 1000 = 0
		 FROM generate_series(1, $2::int) AS i`,
		`ANALYZE`,
	} {
		args := []any{base, rows}
		if sql == "ANALYZE" {
			args = nil
		}
		if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
			t.Fatalf("fill: %v", err)
		}
	}
	sql, args, _ := listSQL(ledger.Query{GrantID: "a2agrant_7Q2F", Signed: true, PageSize: 1000}, nil)
	var plan []byte
	if err := conn.QueryRow(t.Context(), "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	var nodes []map[string]any
	if err := json.Unmarshal(plan, &nodes); err != nil {
		t.Fatal(err)
	}
	var scans []string
	partial := false
	walkPlan(nodes[0]["Plan"], func(n map[string]any) {
		typ := str(n["Node Type"])
		if !strings.Contains(typ, "Scan") {
			return
		}
		scans = append(scans, fmt.Sprintf("%s %s %s (%v rows)", typ, str(n["Relation Name"]), str(n["Index Name"]), n["Actual Rows"]))
		partial = partial || str(n["Index Name"]) == "ledger_rows_counts_by_grant"
		if rows, _ := n["Actual Rows"].(float64); rows > counting+1 {
			t.Errorf("%s %s read %v rows, more than the %d that count and one", typ, str(n["Index Name"]), rows, counting)
		}
	})
	if !partial {
		t.Errorf("the plan does not read ledger_rows_counts_by_grant: %v\n%s", scans, plan)
	}
}

// walkPlan calls f on every node of an EXPLAIN (FORMAT JSON) plan.
func walkPlan(n any, f func(map[string]any)) {
	m, ok := n.(map[string]any)
	if !ok {
		return
	}
	f(m)
	if kids, ok := m["Plans"].([]any); ok {
		for _, k := range kids {
			walkPlan(k, f)
		}
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// TestSnapshotProbeUsesTheKey: with many links to a few snapshots,
// whether a snapshot is in use, and the removal of a row's links, are
// answered from row_snapshots' primary key (snapshot first), never by a
// scan of the table.
func TestSnapshotProbeUsesTheKey(t *testing.T) {
	dsn := pgtest.CreateDB(t)
	if _, _, err := Migrate(t.Context(), Config{DSN: dsn}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{
		`INSERT INTO row_snapshots (snapshot_id, row_id)
		 SELECT md5((i % 3)::text) || md5((i % 3 + 1)::text), md5(i::text) || md5((i + 1)::text)
		 FROM generate_series(1, 60000) AS i`,
		`ANALYZE`,
	} {
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatalf("fill: %v", err)
		}
	}
	snap := strings.Repeat("a", 64)
	for _, c := range []struct {
		name, sql string
		args      []any
	}{
		{"in use", snapshotInUseSQL, []any{snap}},
		{"remove a row's links", "DELETE FROM row_snapshots WHERE snapshot_id = ANY($1::text[]) AND row_id = $2", []any{[]string{snap, strings.Repeat("b", 64)}, strings.Repeat("c", 64)}},
	} {
		var plan []byte
		if err := conn.QueryRow(t.Context(), "EXPLAIN (FORMAT JSON) "+c.sql, c.args...).Scan(&plan); err != nil {
			t.Fatalf("explain %s: %v", c.sql, err)
		}
		var nodes []map[string]any
		if err := json.Unmarshal(plan, &nodes); err != nil {
			t.Fatal(err)
		}
		var scans []string
		probe := true
		walkPlan(nodes[0]["Plan"], func(n map[string]any) {
			if typ := str(n["Node Type"]); strings.Contains(typ, "Scan") {
				scans = append(scans, typ+" "+str(n["Index Name"]))
				probe = probe && str(n["Index Name"]) == "row_snapshots_pkey" && strings.Contains(str(n["Index Cond"]), "snapshot_id")
			}
		})
		if len(scans) == 0 || !probe {
			t.Errorf("%s: scans %v, want row_snapshots_pkey alone, looked up by snapshot:\n%s", c.name, scans, plan)
		}
	}
}

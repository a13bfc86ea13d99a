package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pgStatement is one normalised statement's share of PostgreSQL's work
// during a closed-loop phase (pg_stat_statements).
type pgStatement struct {
	query    string
	calls    int64
	totalMS  float64
	rowsRead int64
}

// topStatementsShown is how many statements the comparison lists.
const topStatementsShown = 14

// statsExtension is the server setting the store comparison starts its
// PostgreSQL cluster with, so that it can say which statements cost what.
const statsExtension = "shared_preload_libraries=pg_stat_statements"

// resetStatements creates the extension when missing and zeroes its
// counters.
func (b *storeBench) resetStatements(ctx context.Context) error {
	if err := b.pg.Exec(ctx, "postgres", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return fmt.Errorf("pg_stat_statements: %w", err)
	}
	return b.pg.Exec(ctx, "postgres", "SELECT pg_stat_statements_reset()")
}

// topStatements reads the statements of database db by total execution
// time, most first: all of them when n is 0.
func (b *storeBench) topStatements(ctx context.Context, db string, n int) ([]pgStatement, error) {
	conn, err := pgx.Connect(ctx, b.pg.DSN("postgres"))
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `
SELECT s.query, s.calls, s.total_exec_time, s.rows
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = $1
ORDER BY s.total_exec_time DESC LIMIT nullif($2, 0)`, db, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (pgStatement, error) {
		var s pgStatement
		err := r.Scan(&s.query, &s.calls, &s.totalMS, &s.rowsRead)
		return s, err
	})
}

// printStatements prints where PostgreSQL spent its CPU per row recorded,
// by kind of process, how many statements it ran per row in all, and the
// top statements by execution time: calls and time per row, each
// statement shortened to one line.
func (b *storeBench) printStatements(what string, load *storeLoad, st []pgStatement) {
	rows := load.ok
	if len(st) == 0 || rows == 0 {
		return
	}
	var calls int64
	var execMS float64
	for _, s := range st {
		calls, execMS = calls+s.calls, execMS+s.totalMS
	}
	kindsOf := len(st)
	st = st[:min(len(st), topStatementsShown)]
	kinds := slices.Sorted(maps.Keys(load.postgresByKind))
	slices.SortStableFunc(kinds, func(a, c string) int { return cmp.Compare(load.postgresByKind[c], load.postgresByKind[a]) })
	fmt.Fprintf(b.w, "\nPostgreSQL CPU, %s, by kind of process (ms per row):", what)
	for _, k := range kinds {
		if v := load.postgresByKind[k]; v > 0 {
			fmt.Fprintf(b.w, " %s %.3f;", k, v*1000/float64(rows))
		}
	}
	fmt.Fprintln(b.w)
	fmt.Fprintf(b.w, "PostgreSQL statements, %s, in all: %.1f a row (%d distinct), %.0f µs of execution a row\n",
		what, float64(calls)/float64(rows), kindsOf, execMS*1000/float64(rows))
	var total float64
	for _, s := range st {
		total += s.totalMS
	}
	fmt.Fprintf(b.w, "PostgreSQL statements, %s (pg_stat_statements, the %d with most execution time; parse, network and commit waits not included):\n", what, len(st))
	fmt.Fprintf(b.w, "  %10s %12s %7s  %s\n", "calls/row", "exec µs/row", "share", "statement")
	for _, s := range st {
		q := strings.Join(strings.Fields(s.query), " ")
		if len(q) > 110 {
			q = q[:107] + "..."
		}
		fmt.Fprintf(b.w, "  %10.2f %12.1f %6.1f%%  %s\n", float64(s.calls)/float64(rows), s.totalMS*1000/float64(rows), 100*s.totalMS/total, q)
	}
}

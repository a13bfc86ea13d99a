package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// migrations holds the schema, one forward-only migration per file.
//
//go:embed migrations/*.sql
var migrations embed.FS

// versionTable is where goose records the applied migrations.
const versionTable = "ledger_schema_version"

// Errors of the schema check.
var (
	// ErrNoSchema: the database has no pactledger schema yet.
	ErrNoSchema = errors.New("the database has no pactledger schema: run `ledgerd migrate` first")
	// ErrSchemaOld: the schema is older than this binary's.
	ErrSchemaOld = errors.New("the database schema is older than this ledgerd: run `ledgerd migrate`")
	// ErrSchemaNew: the schema is newer than this binary knows.
	ErrSchemaNew = errors.New("the database schema is newer than this ledgerd knows: run the ledgerd that migrated it, or a newer one")
	// ErrMoveUnfinished: a move of a bbolt file into the database
	// (storage/move) began and has not finished and verified, so the
	// database holds only part of the ledger.
	ErrMoveUnfinished = errors.New("the move of a bbolt ledger into this database has not finished")
	// ErrBackfillUnfinished: the rows stored before schema version 9 are
	// not all marked yet as counting toward their grant's countMax or
	// not (backfillCounts): until they are, a countMax check would miss
	// some of them.
	ErrBackfillUnfinished = errors.New("the rows stored before schema version 9 are not all marked yet: run `ledgerd migrate` again, which continues where it stopped")
)

// provider returns the goose provider of the embedded migrations over db.
func provider(cfg Config) (*goose.Provider, func() error, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, nil, err
	}
	pc, err := poolConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	var opts []stdlib.OptionOpenDB
	if hook := BeforeConnect(cfg); hook != nil {
		opts = append(opts, stdlib.OptionBeforeConnect(hook))
	}
	db := stdlib.OpenDB(*pc.ConnConfig, opts...)
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub,
		goose.WithTableName(versionTable), goose.WithDisableGlobalRegistry(true), goose.WithSlog(slog.New(slog.DiscardHandler)))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("schema migrations: %w", err)
	}
	return p, db.Close, nil
}

// SchemaVersion is the schema version this binary writes: the version of
// its newest migration.
var SchemaVersion = sync.OnceValue(func() int64 {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		panic(err) // the pattern is constant
	}
	var newest int64
	for _, name := range names {
		v, err := goose.NumericComponent(name)
		if err != nil {
			panic(fmt.Sprintf("embedded migration %s: %v", name, err)) // a build fault, caught by any test
		}
		newest = max(newest, v)
	}
	return newest
})

// Migrate applies every migration the database lacks, in order, each in a
// transaction of its own, and returns the schema version before and after.
// Run it from one place at a time (`ledgerd migrate`), before starting
// ledgerd replicas of a new version. A database that cannot be reached is
// an error wrapping ledger.ErrUnavailable.
func Migrate(ctx context.Context, cfg Config) (from, to int64, err error) {
	cfg.defaults()
	p, closeDB, err := provider(cfg)
	if err != nil {
		return 0, 0, err
	}
	defer closeDB()
	if from, err = p.GetDBVersion(ctx); err != nil {
		return 0, 0, classify("read the schema version", err, nil)
	}
	if known := SchemaVersion(); from > known {
		return from, from, fmt.Errorf("%w (database %d, this ledgerd %d)", ErrSchemaNew, from, known)
	}
	if _, err := p.Up(ctx); err != nil {
		return from, 0, classify("migrate the schema", err, nil)
	}
	to, err = p.GetDBVersion(ctx)
	if err != nil {
		return from, 0, classify("read the schema version", err, nil)
	}
	if err := backfillCounts(ctx, cfg, slog.Default()); err != nil {
		return from, to, err
	}
	return from, to, nil
}

// backfillBatch is how many rows one transaction of backfillCounts reads.
var backfillBatch = 2000

// afterBackfillBatch, when set (by tests), runs after each committed
// transaction of backfillCounts; an error stops the backfill there.
var afterBackfillBatch func() error

// backfillCounts marks the rows stored before schema version 9 that can
// count toward their grant's countMax (ledger_rows.counts, set where
// ledger.Row.ReceiptVerified holds for the stored body, as an insert sets
// it), in transactions of backfillBatch rows in id order. Each records
// in ledger_backfill the last id it read, so that a backfill stopped part
// way continues there at the next `ledgerd migrate`; the last removes the
// record, which migration 9 writes only for a database holding rows. It
// logs progress every 10 s, as the bbolt store's conversions do.
func backfillCounts(ctx context.Context, cfg Config, log *slog.Logger) error {
	pc, err := poolConfig(cfg)
	if err != nil {
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("postgres pool: %w", err)
	}
	defer pool.Close()
	var pending bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('ledger_backfill') IS NOT NULL AND EXISTS (SELECT FROM ledger_backfill WHERE name = 'counts')").Scan(&pending); err != nil {
		return classify("read the record of the backfill", err, nil)
	}
	if !pending {
		return nil
	}
	var about int64
	if err := pool.QueryRow(ctx, "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'ledger_rows'::regclass").Scan(&about); err != nil {
		return classify("estimate the rows", err, nil)
	}
	log.Info("row store (postgres): marking the rows stored before schema version 9 that count toward their grant's countMax (receipts whose signature passed); it resumes where it stopped if interrupted",
		slog.Int64("rows", about))
	start, logged := time.Now(), time.Now()
	read, marked, unreadable := 0, 0, 0
	for {
		var n, m int
		var bad []string
		done := false
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var after string
			err := tx.QueryRow(ctx, "SELECT after FROM ledger_backfill WHERE name = 'counts' FOR UPDATE").Scan(&after)
			if errors.Is(err, pgx.ErrNoRows) {
				done = true // another migrate finished it
				return nil
			}
			if err != nil {
				return err
			}
			rows, err := tx.Query(ctx, "SELECT id, body FROM ledger_rows WHERE id > $1 ORDER BY id LIMIT $2", after, backfillBatch)
			if err != nil {
				return err
			}
			var counting []string
			last := after
			for rows.Next() {
				var body []byte
				if err := rows.Scan(&last, &body); err != nil {
					rows.Close()
					return err
				}
				n++
				r, err := decodeRow(body)
				if err != nil {
					// A body that does not decode (damaged, or edited:
					// what ledgerctl fsck finds) cannot show a signature
					// passed: its row is left out of the count, as the
					// check before this schema could not read it either,
					// and the backfill goes on.
					bad = append(bad, last)
					continue
				}
				if r.ReceiptVerified() {
					counting = append(counting, last)
				}
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if len(counting) > 0 {
				if _, err := tx.Exec(ctx, "UPDATE ledger_rows SET counts = true WHERE id = ANY($1::text[])", counting); err != nil {
					return err
				}
			}
			m = len(counting)
			if n < backfillBatch {
				done = true
				_, err = tx.Exec(ctx, "DELETE FROM ledger_backfill WHERE name = 'counts'")
				return err
			}
			_, err = tx.Exec(ctx, "UPDATE ledger_backfill SET after = $1 WHERE name = 'counts'", last)
			return err
		})
		if err != nil {
			return classify("mark the rows that count toward countMax", err, nil)
		}
		read, marked, unreadable = read+n, marked+m, unreadable+len(bad)
		for _, id := range bad {
			log.Warn("row store (postgres): a row's body does not decode: it is not counted toward its grant's countMax; run ledgerctl fsck",
				slog.String("row", id))
		}
		if afterBackfillBatch != nil {
			if err := afterBackfillBatch(); err != nil {
				return err
			}
		}
		if done {
			log.Info("row store (postgres): marked the rows that count toward their grant's countMax",
				slog.Int("read", read), slog.Int("marked", marked), slog.Int("unreadable", unreadable), slog.Duration("took", time.Since(start).Round(time.Millisecond)))
			return nil
		}
		if time.Since(logged) >= 10*time.Second {
			log.Info("row store (postgres): marking the rows that count toward their grant's countMax",
				slog.Int("read", read), slog.Int("marked", marked), slog.Int64("of about", about))
			logged = time.Now()
		}
	}
}

// checkSchema returns nil when the database's schema version is the one
// this binary writes, no backfill of its rows (backfillCounts) and no move
// into it is unfinished, else an error saying what to do.
func checkSchema(ctx context.Context, pool *pgxpool.Pool) error {
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", versionTable).Scan(&exists); err != nil {
		return classify("read the schema version", err, nil)
	}
	if !exists {
		return ErrNoSchema
	}
	var version int64
	if err := pool.QueryRow(ctx, "SELECT coalesce(max(version_id), 0) FROM "+versionTable).Scan(&version); err != nil {
		return classify("read the schema version", err, nil)
	}
	switch known := SchemaVersion(); {
	case version == 0:
		return ErrNoSchema
	case version < known:
		return fmt.Errorf("%w (database %d, this ledgerd %d)", ErrSchemaOld, version, known)
	case version > known:
		return fmt.Errorf("%w (database %d, this ledgerd %d)", ErrSchemaNew, version, known)
	}
	var backfill bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM ledger_backfill)").Scan(&backfill); err != nil {
		return classify("read the record of the backfill", err, nil)
	}
	if backfill {
		return ErrBackfillUnfinished
	}
	return checkMove(ctx, pool)
}

// checkMove returns nil unless the database holds a move from a bbolt
// file that has not verified (an error wrapping ErrMoveUnfinished). The
// move (storage/move, `ledgerd migrate --from`) records itself in the
// table ledger_move, one row whose verified_ns it sets last; it copies
// the sequences and the log's head after every row and leaf, so until
// then a ledger on the database would number and sign a log of its own.
// The move itself never opens the database through Open, so it can
// always continue.
func checkMove(ctx context.Context, pool *pgxpool.Pool) error {
	var recorded bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('ledger_move') IS NOT NULL").Scan(&recorded); err != nil {
		return classify("read the record of a move", err, nil)
	}
	if !recorded {
		return nil
	}
	var source string
	err := pool.QueryRow(ctx, "SELECT source FROM ledger_move WHERE id = 1 AND verified_ns IS NULL").Scan(&source)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return classify("read the record of a move", err, nil)
	}
	return fmt.Errorf("%w: run `ledgerd migrate --from bbolt:%s` again, which continues it, until it says \"move verified\"", ErrMoveUnfinished, source)
}

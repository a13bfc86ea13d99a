package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/storage/s3"
)

// rowStore is the row store ledgerd runs on: bbolt or PostgreSQL.
type rowStore interface {
	ledger.Store
	Close() error
}

// openStore opens the row store cfg.Store selects. onCommit is told the
// size of each committed group-commit batch and how long it took.
func openStore(ctx context.Context, cfg config.Config, onCommit func(int, time.Duration)) (rowStore, error) {
	c := cfg.Store
	switch c.Kind {
	case config.StorePostgres:
		pc, err := PostgresConfig(c)
		if err != nil {
			return nil, err
		}
		pc.OnCommit = onCommit
		s, err := postgres.Open(ctx, pc)
		if err != nil {
			return nil, fmt.Errorf("row store (postgres): %w", err)
		}
		return s, nil
	default:
		if err := mkdirAll(filepath.Dir(c.Path)); err != nil {
			return nil, err
		}
		s, err := bolt.Open(c.Path, bolt.Config{OnCommit: onCommit, CommitDelay: defaultOrNone(c.CommitDelay)})
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// PostgresConfig is the PostgreSQL store c names: its DSN and password.
// The password is read now, so a missing or empty file is an error at
// start, and a store.passwordFile is read again before each new
// connection, so a password rotated in the database and the file takes
// effect without a restart.
func PostgresConfig(c config.Store) (postgres.Config, error) {
	pw, err := c.Password()
	if err != nil {
		return postgres.Config{}, err
	}
	pc := postgres.Config{DSN: c.DSN, Password: pw}
	if c.PasswordFile != "" {
		pc.PasswordFunc = func(context.Context) (string, error) { return c.Password() }
	}
	return pc, nil
}

// storeDown is what /readyz says of a row store that failed with err: a
// password the database rejected is named as such, since the database
// does answer.
func (s *Server) storeDown(err error, errorsShown bool) string {
	if errors.Is(err, postgres.ErrCredentials) {
		hint := "check the password ledgerd is given"
		if s.cfg.Store.PasswordFile != "" {
			hint = "put the database's password in store.passwordFile, which each new connection reads again"
		}
		return "password rejected: " + hint + ": " + errorText(err.Error(), errorsShown)
	}
	return "not answering: " + errorText(err.Error(), errorsShown)
}

// storeReadiness reports whether the row store would take a write now,
// with what /readyz shows of it: {"kind": …, "status": …}.
func (s *Server) storeReadiness(ctx context.Context, errorsShown bool) (bool, map[string]any) {
	body := map[string]any{"kind": s.cfg.Store.Kind, "status": "ok"}
	switch st := s.store.(type) {
	case *bolt.Store:
		// Lookups of new keys read the file until the key filter is built
		// (seconds at ten million rows); the store is ready meanwhile.
		if keys, ok := st.KeyFilter(); ok {
			body["keyFilter"] = fmt.Sprintf("ready, %d keys", keys)
		} else {
			body["keyFilter"] = "being built"
		}
		switch err := st.Writable(); {
		case err == nil:
		case errors.Is(err, ledger.ErrNoSpace):
			// The last commit failed for lack of space. Ready again once the
			// filesystem takes a small write, before any commit has succeeded
			// (a load balancer sends no writes to a replica that is not ready).
			if perr := probeWrite(filepath.Dir(st.Path())); perr != nil {
				return false, map[string]any{"kind": config.StoreBbolt, "status": "no space: the last commit failed for lack of space and the disk takes no write"}
			}
			body["status"] = "ok: space is free again after a commit failed for lack of space"
		default:
			return false, map[string]any{"kind": config.StoreBbolt, "status": errorText(err.Error(), errorsShown)}
		}
	case *postgres.Store:
		if err := st.Ping(ctx); err != nil {
			return false, map[string]any{"kind": config.StorePostgres, "status": s.storeDown(err, errorsShown)}
		}
	}
	return true, body
}

// openEvidence returns the configured evidence store, and the S3 store
// when it is one, whose bucket check has not run yet.
func openEvidence(cfg config.Config) (ledger.ObjectStore, *s3.Store, error) {
	if cfg.Evidence.Type != "s3" {
		objects, err := localdir.Open(cfg.Evidence.Dir)
		if err != nil {
			return nil, nil, fmt.Errorf("evidence store: %w", err)
		}
		return objects, nil, nil
	}
	c := cfg.Evidence.S3
	st, err := s3.New(s3.Config{Endpoint: c.Endpoint, Bucket: c.Bucket, Region: c.Region, AccessKey: c.AccessKey, SecretKey: c.SecretKey, Insecure: c.Insecure, CreateBucket: c.CreateBucket,
		CheckTimeout: time.Duration(c.CheckTimeout), CheckMaxBackoff: time.Duration(c.CheckMaxBackoff)})
	if err != nil {
		return nil, nil, fmt.Errorf("evidence store: %w", err)
	}
	return st, st, nil
}

// referenceClocks are the clocks writes and the retention sweep check the
// host's against: the S3 evidence store's (evidence is an *s3.Store, else
// nil), the PostgreSQL row store's, and those of the servers
// clock.references names (dateClock). A bbolt row store with a local
// evidence directory and no clock.references has none: the host's clock
// is the only one.
func referenceClocks(store rowStore, evidence *s3.Store, references []string) []ledger.ReferenceClock {
	var clocks []ledger.ReferenceClock
	if evidence != nil {
		clocks = append(clocks, ledger.ReferenceClock{Name: "the S3 evidence store", Now: evidence.ServerTime})
	}
	if pg, ok := store.(*postgres.Store); ok {
		clocks = append(clocks, ledger.ReferenceClock{Name: "the PostgreSQL row store", Now: pg.ServerTime})
	}
	for i, u := range references {
		clocks = append(clocks, dateClock(fmt.Sprintf("clock.references[%d]", i), u))
	}
	return clocks
}

// defaultOrNone is an optional duration setting as the setting's package
// takes it (such as bolt.Config.CommitDelay for store.commitDelay): 0, the
// default, when unset; negative, none, when 0s.
func defaultOrNone(d *config.Duration) time.Duration {
	switch {
	case d == nil:
		return 0
	case *d == 0:
		return -1
	}
	return time.Duration(*d)
}

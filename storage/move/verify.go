package move

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// verify counts and hashes every kind on both sides, table by table, and
// the sequences and log head, and fails with ErrMismatch when any differ.
func (m *mover) verify(ctx context.Context) error {
	m.say("verifying: counting and hashing every kind on both sides")
	var bad []string
	for _, k := range kinds {
		src, err := m.sourceDigests(k)
		if err != nil {
			return fmt.Errorf("verify %s: read the file: %w", k.name, err)
		}
		for i, d := range k.dests {
			dst, err := m.targetDigest(ctx, d)
			if err != nil {
				return fmt.Errorf("verify %s: read %s: %w", k.name, d.table, err)
			}
			c := Check{Kind: string(k.name), Table: d.table, Source: src[i].n, Target: dst.n, SourceHash: src[i].hex(), TargetHash: dst.hex()}
			m.rep.Checks = append(m.rep.Checks, c)
			m.sayCheck(c)
			if !c.Equal() {
				bad = append(bad, c.Kind+" ("+c.Table+")")
			}
		}
	}
	c, err := m.verifyState(ctx)
	if err != nil {
		return err
	}
	m.rep.Checks = append(m.rep.Checks, c)
	m.sayCheck(c)
	if !c.Equal() {
		bad = append(bad, c.Kind)
	}
	if len(bad) > 0 {
		if m.rep.AlreadyMoved {
			why := "the database has changed since the move verified: a ledgerd has written to it"
			if len(bad) == 1 && bad[0] == c.Kind && m.divergedMissing {
				// Versions before 2026-12-07 moved neither the log's
				// record of a divergence nor compared the row sequence.
				why += "; or the move was made by a version before 2026-12-07, which did not copy the log's record that the published log diverged: move the file again into an empty database"
			}
			return fmt.Errorf("%w: %s (%s)", ErrMismatch, strings.Join(bad, ", "), why)
		}
		return fmt.Errorf("%w: %s", ErrMismatch, strings.Join(bad, ", "))
	}
	return nil
}

// sayCheck prints one kind's counts and whether the hashes agree.
func (m *mover) sayCheck(c Check) {
	name := c.Kind
	if c.Table != "" {
		name += " (" + c.Table + ")"
	}
	if c.Equal() {
		m.say("  %s: %d on both sides, hashes equal", name, c.Source)
		return
	}
	m.say("  %s: DIFFERS: %d in the file, %d in the database; hashes %s and %s", name, c.Source, c.Target, c.SourceHash[:16], c.TargetHash[:16])
}

// sourceDigests reads every record of k from the file and digests the
// table rows each becomes, one digest per destination table.
func (m *mover) sourceDigests(k kind) ([]digest, error) {
	out := make([]digest, len(k.dests))
	var after []byte
	for {
		recs, err := m.src.Records(k.name, after, m.cfg.Chunk)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			per, err := k.rows(r)
			if err != nil {
				return nil, err
			}
			for i := range k.dests {
				for _, row := range per[i] {
					if err := out[i].add(row); err != nil {
						return nil, err
					}
				}
			}
		}
		if len(recs) < m.cfg.Chunk {
			return out, nil
		}
		after = recs[len(recs)-1].Key
	}
}

// targetDigest reads d's columns of every row of its table (or of its
// kind's part of a shared table) and digests them.
func (m *mover) targetDigest(ctx context.Context, d dest) (digest, error) {
	cols := make([]string, len(d.cols))
	for i, c := range d.cols {
		cols[i] = pgx.Identifier{c}.Sanitize()
	}
	sql := "SELECT " + strings.Join(cols, ", ") + " FROM " + pgx.Identifier{d.table}.Sanitize()
	if d.where != "" {
		sql += " WHERE " + d.where
	}
	var dg digest
	rows, err := m.pool.Query(ctx, sql)
	if err != nil {
		return dg, err
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return dg, err
		}
		if err := dg.add(vals); err != nil {
			return dg, err
		}
	}
	return dg, rows.Err()
}

// verifyState compares the sequences (the last number each handed out)
// and the log's head, published tile size, pruned leaves and record of a
// divergence on both sides.
func (m *mover) verifyState(ctx context.Context) (Check, error) {
	s, err := m.sourceState()
	if err != nil {
		return Check{}, err
	}
	var src, dst digest
	if err := src.add(stateValues(state{
		outbox: int64(s.counters.Outbox), incident: int64(s.counters.Incident), access: int64(s.counters.Access), leaf: int64(s.counters.Leaf), row: int64(s.counters.Row),
		size: s.log.Size, cp: s.log.Checkpoint, tiles: s.log.TilesPublished, pruned: s.log.Pruned, diverged: s.log.Diverged,
	})); err != nil {
		return Check{}, err
	}
	var t state
	err = m.pool.QueryRow(ctx, `
SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM outbox_seq),
       (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM incident_seq),
       (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM access_seq),
       (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM leaf_seq),
       (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM ledger_rows_pool_seq),
       coalesce((SELECT n FROM log_state WHERE name = 'head'), 0),
       (SELECT value FROM log_state WHERE name = 'head'),
       coalesce((SELECT n FROM log_state WHERE name = 'tiles'), 0),
       coalesce((SELECT n FROM log_state WHERE name = 'pruned'), 0),
       (SELECT value FROM log_state WHERE name = 'diverged')`).Scan(&t.outbox, &t.incident, &t.access, &t.leaf, &t.row, &t.size, &t.cp, &t.tiles, &t.pruned, &t.diverged)
	if err != nil {
		return Check{}, fmt.Errorf("verify the sequences and log head: %w", err)
	}
	if err := dst.add(stateValues(t)); err != nil {
		return Check{}, err
	}
	m.divergedMissing = s.log.Diverged != nil && t.diverged == nil
	return Check{Kind: stateKind, Source: src.n, Target: dst.n, SourceHash: src.hex(), TargetHash: dst.hex()}, nil
}

// state is the sequences and the log's state as one side holds them.
type state struct {
	outbox, incident, access, leaf, row int64
	size                                int64
	cp                                  []byte
	tiles, pruned                       int64
	diverged                            []byte
}

// stateValues is s as one row of values; an absent checkpoint or
// divergence record is NULL on both sides.
func stateValues(s state) []any {
	var c, d any
	if len(s.cp) > 0 {
		c = s.cp
	}
	if s.diverged != nil {
		d = s.diverged
	}
	return []any{s.outbox, s.incident, s.access, s.leaf, s.row, s.size, c, s.tiles, s.pruned, d}
}

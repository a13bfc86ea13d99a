package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// ObjectDrill is the object kind of a drill report.
const ObjectDrill = "drill"

// DrillKey is the object key of a drill report.
func DrillKey(id string) string { return "drills/" + id + ".json" }

// NewDrillID returns a new drill id that sorts by its start time.
func NewDrillID(startedAt time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "drill-" + startedAt.UTC().Format("20060102T150405.000000000Z") + "-" + hex.EncodeToString(b)
}

// SaveDrill stores a drill report and queues it for write-once storage,
// retained as long as the longest receipt class. The report is never
// changed afterwards.
func (l *Ledger) SaveDrill(ctx context.Context, id string, startedAt time.Time, body []byte) error {
	// A drill started by a clock behind the reference clocks is not kept
	// shorter for it.
	start := startedAt.Add(l.behindBy())
	retain := l.cfg.Policy.ObjectRetainUntil(l.cfg.Policy.Longest(start), start)
	now := l.cfg.Now()
	err := l.store.Update(ctx, func(tx Tx) error {
		if _, err := tx.Drill(id); err == nil {
			return fmt.Errorf("drill %s already stored", id)
		}
		if err := tx.PutDrill(id, body); err != nil {
			return err
		}
		return tx.Enqueue(OutboxEntry{Kind: ObjectDrill, Ref: id, Key: DrillKey(id), RetainUntil: retain}, now)
	})
	if err != nil {
		return fmt.Errorf("save drill %s: %w", id, err)
	}
	l.wake()
	return nil
}

// Drill returns a stored drill report and where its object is held.
func (l *Ledger) Drill(ctx context.Context, id string) ([]byte, Location, error) {
	if err := checkField("id", id, 128); err != nil {
		return nil, Location{}, err
	}
	var body []byte
	var loc Location
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		if body, err = tx.Drill(id); err != nil {
			return err
		}
		loc, err = l.location(tx, DrillKey(id), time.Time{})
		return err
	})
	if err != nil {
		return nil, loc, fmt.Errorf("drill %s: %w", id, err)
	}
	return body, loc, nil
}

// Drills returns stored drill reports, newest first.
func (l *Ledger) Drills(ctx context.Context, pageSize int, pageToken string) ([][]byte, string, error) {
	return l.DrillsWithin(ctx, pageSize, pageToken, 0, nil)
}

// DrillsWithin is Drills with a page that also ends before the report that
// would take the sizes of its reports, as size measures them, past budget:
// the page holds at least one report, and its token continues after its
// last report. A budget of 0 bounds nothing.
func (l *Ledger) DrillsWithin(ctx context.Context, pageSize int, pageToken string, budget int, size func([]byte) int) ([][]byte, string, error) {
	switch {
	case pageSize < 0 || pageSize > 1000:
		return nil, "", invalid("pageSize must be between 1 and 1000")
	case pageSize == 0:
		pageSize = 100
	}
	var out [][]byte
	var next string
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		if out, next, err = tx.Drills(pageSize, pageToken); err != nil || budget <= 0 {
			return err
		}
		n := fitting(out, budget, size)
		if n == len(out) {
			return nil
		}
		// The same page in the same transaction, n reports long: the
		// same first n reports, and the token that follows the last.
		out, next, err = tx.Drills(n, pageToken)
		return err
	})
	return out, next, err
}

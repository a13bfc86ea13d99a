package ledger

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// IncidentRecord is an incident the ledger opened for a row (rule 2).
type IncidentRecord struct {
	ID       string    `json:"id"`
	RowID    string    `json:"rowId"`
	Reason   string    `json:"reason"`
	Agent    string    `json:"agent"`
	OpenedAt time.Time `json:"openedAt"`
	// Held lists the object keys under legal hold for the incident.
	Held     []string  `json:"held"`
	ClosedAt time.Time `json:"closedAt,omitzero"`
	ClosedBy string    `json:"closedBy,omitempty"`
	Note     string    `json:"note,omitempty"`
	// RetainUntil is set at close: the row's retain-until from then on
	// (see CloseIncident).
	RetainUntil time.Time `json:"retainUntil,omitzero"`
	// Day and GrantSHA256 are what the incident holds beyond its row,
	// taken from the row when the incident opens (or, for one opened
	// before they were recorded, when it closes): its agent platform's
	// rows of Day (the row's UTC day, 2006-01-02), and the rows of its
	// grant (Sweep). The grant id is kept as its hash, as a leaf keeps
	// it: an incident outlives the rows, and a grant id is carried in
	// the customer's tokens. Day is empty on an incident that has not
	// recorded them.
	Day         string `json:"day,omitempty"`
	GrantSHA256 string `json:"grantSha256,omitempty"`
	// HoldsUntil is set at close: the close plus the incident period in
	// force then, when the hold on Day and the grant ends. An incident
	// closed before it was recorded holds until RetainUntil, never
	// earlier than that.
	HoldsUntil time.Time `json:"holdsUntil,omitzero"`
}

// Open reports whether the incident is still open.
func (i *IncidentRecord) Open() bool { return i.ClosedAt.IsZero() }

// holdEnd is when the closed incident's hold on its day and grant ends:
// as recorded at its close (HoldsUntil; RetainUntil for an incident
// closed before it was recorded), never sooner for the period in force
// now, which a restart may have shortened.
//
// A period longer now than at the close holds longer: the end is the
// later of the recorded one and the close plus period, the period in
// force now, so that neither a shorter period nor a longer one set
// since the close ends the hold sooner than it says.
func (i *IncidentRecord) holdEnd(period retention.Period) time.Time {
	end := period.After(i.ClosedAt)
	switch {
	case i.HoldsUntil.After(end):
		end = i.HoldsUntil
	case i.HoldsUntil.IsZero() && i.RetainUntil.After(end):
		end = i.RetainUntil
	}
	return end
}

// recordHolds records on inc what it holds beyond row r, its row.
func (inc *IncidentRecord) recordHolds(r *Row) {
	inc.Day, inc.GrantSHA256 = rowDay(r), digest(r.GrantID)
}

// openIncident records the incident of row r (already classified) and
// places legal holds on its evidence and the JWKS snapshots it names.
func (l *Ledger) openIncident(tx Tx, r *Row) error {
	var reasons []string
	for _, c := range r.Verifier.Checks {
		if c.Result == verifier.Fail {
			reasons = append(reasons, c.Name+": "+c.Detail)
		}
	}
	inc := IncidentRecord{ID: r.IncidentID, RowID: r.ID, Reason: strings.Join(reasons, "; "), Agent: r.Agent.Platform, OpenedAt: r.RecordedAt}
	inc.recordHolds(r)
	inc.Held = append(inc.Held, EvidenceKey(r.ID)) // put with a hold by the uploader
	for _, s := range []string{r.BrandKey.JWKSSnapshot, r.Agent.JWKSSnapshot} {
		key := SnapshotKey(s)
		if s == "" || contains(inc.Held, key) {
			continue
		}
		inc.Held = append(inc.Held, key)
		n, err := tx.Count(RefHold, key, 1)
		if err != nil {
			return err
		}
		if n == 1 {
			if err := tx.Enqueue(OutboxEntry{Op: OpHold, Key: key}, l.cfg.Now()); err != nil {
				return err
			}
		}
	}
	return putIncident(tx, inc)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// IncidentView is an incident with its row and the same agent platform's
// other rows that day.
type IncidentView struct {
	Incident IncidentRecord
	Row      *Row
	SameDay  []*Row // newest first, at most 1000
	SameDayN int
	// SameDayCut is true when the platform has more rows that day than
	// the MaxIncidentDayRows newest Incident reads: SameDayN is then a
	// lower bound.
	SameDayCut bool
	DayStart   time.Time
	DayFinish  time.Time
}

// MaxIncidentDayRows is the most of an agent platform's rows of a day that
// one Incident call reads. Any writer can post rows naming any platform
// and day, so without a bound one look at an incident could read all of
// them in one transaction.
const MaxIncidentDayRows = 10_000

// maxIncidentDayRows is MaxIncidentDayRows, a var only for tests.
var maxIncidentDayRows = MaxIncidentDayRows

// Incidents lists incidents, newest first.
func (l *Ledger) Incidents(ctx context.Context, pageSize int, pageToken string) ([]*IncidentRecord, string, error) {
	switch {
	case pageSize < 0 || pageSize > 1000:
		return nil, "", invalid("pageSize must be between 1 and 1000")
	case pageSize == 0:
		pageSize = 100
	}
	var out []*IncidentRecord
	var next string
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		out, next, err = incidentPage(tx, pageSize, pageToken)
		return err
	})
	return out, next, err
}

// Incident returns an incident with its row and the platform's other rows
// on the row's UTC day (from the agent index), the newest
// MaxIncidentDayRows of them at most (SameDayCut says it stopped there).
func (l *Ledger) Incident(ctx context.Context, id string) (*IncidentView, error) {
	if err := checkField("id", id, 64); err != nil {
		return nil, err
	}
	v := &IncidentView{}
	err := l.store.View(ctx, func(tx Tx) error {
		inc, err := incident(tx, id)
		if err != nil {
			return err
		}
		v.Incident = *inc
		if v.Row, err = tx.Row(inc.RowID); err != nil {
			return err
		}
		v.DayStart = v.Row.IssuedAt.UTC().Truncate(24 * time.Hour)
		v.DayFinish = v.DayStart.Add(24 * time.Hour)
		q := Query{Agent: inc.Agent, Since: v.DayStart, Until: v.DayFinish, PageSize: 1000}
		read := 0
		q.Read = &read
		for {
			// Each entry read is a row of the platform's day.
			q.MaxRead = maxIncidentDayRows - read
			rows, next, err := tx.List(q)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if r.ID == inc.RowID {
					continue
				}
				v.SameDayN++
				if len(v.SameDay) < 1000 {
					v.SameDay = append(v.SameDay, r)
				}
			}
			if next == "" {
				return nil
			}
			if read >= maxIncidentDayRows {
				v.SameDayCut = true
				return nil
			}
			q.PageToken = next
		}
	})
	if err != nil {
		return nil, fmt.Errorf("incident %s: %w", id, err)
	}
	return v, nil
}

// IncidentRecord returns the incident with id alone: whether it is open,
// and when and by whom it was closed, without reading its row or the
// platform's other rows of its day (Incident reads those).
func (l *Ledger) IncidentRecord(ctx context.Context, id string) (*IncidentRecord, error) {
	if err := checkField("id", id, 64); err != nil {
		return nil, err
	}
	var out *IncidentRecord
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		out, err = incident(tx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("incident %s: %w", id, err)
	}
	return out, nil
}

// CloseIncident closes an open incident: the row's retain-until becomes the
// latest of the close time plus the incident period and what the row's
// tools and scopes used would keep it for had it not been an incident
// (extended only, never shortened), its write-once objects' retention is
// extended to match and their legal holds are released. What made the row
// an incident (limits, for one) may come from the writer, who is not
// trusted: an incident closed early never keeps a row shorter than its
// actions do.
func (l *Ledger) CloseIncident(ctx context.Context, id, note, by string) (*IncidentRecord, error) {
	if err := checkText("note", note, MaxNoteLength, true); err != nil {
		return nil, err
	}
	now := l.cfg.Now().UTC()
	if err := l.checkWriteClock(ctx, now); err != nil {
		return nil, err
	}
	var out IncidentRecord
	err := l.store.Update(ctx, func(tx Tx) error {
		inc, err := incident(tx, id)
		if err != nil {
			return err
		}
		if !inc.Open() {
			return fmt.Errorf("%w: incident %s was already closed at %s by %s", ErrConflict, id, inc.ClosedAt.Format(time.RFC3339), inc.ClosedBy)
		}
		row, err := tx.Row(inc.RowID)
		if err != nil {
			return err
		}
		holds := l.cfg.Policy.Periods[retention.Incident].After(now)
		until := holds
		if c := l.receiptRetainUntil(row); c.After(until) {
			until = c
		}
		if row.RetainUntil.After(until) {
			until = row.RetainUntil
		}
		inc.ClosedAt, inc.ClosedBy, inc.Note, inc.RetainUntil, inc.HoldsUntil = now, by, note, until, holds
		if inc.Day == "" {
			inc.recordHolds(row)
		}
		row.RetainUntil = until // never earlier than it was: see above
		if err := tx.UpdateRetention(row.ID, until); err != nil {
			return err
		}
		for _, key := range inc.Held {
			if err := tx.Enqueue(OutboxEntry{Op: OpExtend, Key: key, RetainUntil: until}, now); err != nil {
				return err
			}
			n := 0
			if key != EvidenceKey(row.ID) {
				if n, err = tx.Count(RefHold, key, -1); err != nil {
					return err
				}
			}
			if n == 0 {
				if err := tx.Enqueue(OutboxEntry{Op: OpRelease, Key: key}, now); err != nil {
					return err
				}
			}
		}
		out = *inc
		if err := l.queueLeaf(tx, incidentRef(inc.ID), incidentCloseLeaf(inc)); err != nil {
			return err
		}
		return putIncident(tx, *inc)
	})
	if err != nil {
		return nil, fmt.Errorf("close incident %s: %w", id, err)
	}
	l.wake()
	l.wakeLog()
	l.cfg.Logger.InfoContext(ctx, "incident closed", "incident", id, "by", by, "retain_until", out.RetainUntil)
	return &out, nil
}

// receiptRetainUntil is the retain-until row r would have by its actions'
// tools and its scopes used alone (rule 2 aside).
func (l *Ledger) receiptRetainUntil(r *Row) time.Time {
	tools := make([]string, len(r.Actions))
	for i, a := range r.Actions {
		tools[i] = a.Tool
	}
	start := r.RetentionStart()
	c, _ := l.cfg.Policy.Classify(tools, r.ScopesUsed, start)
	return l.cfg.Policy.RetainUntil(c, start)
}

package ledger

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The rules about references, outbox bookkeeping and incident numbers that
// every backend would otherwise have to repeat: a Store only stores, and
// these functions decide, inside the caller's transaction.

// SnapshotsOf returns the distinct JWKS snapshots row r names: its brand
// key's and its agent's. A store links a row to each of them (CreateRow)
// and answers SnapshotInUse from those links.
func SnapshotsOf(r *Row) []string {
	var out []string
	for _, s := range []string{r.BrandKey.JWKSSnapshot, r.Agent.JWKSSnapshot} {
		if s != "" && (len(out) == 0 || out[0] != s) {
			out = append(out, s)
		}
	}
	return out
}

// AddRow writes new row r to tx. The store links it to the JWKS snapshots
// it names; the caller puts those snapshots (PutSnapshot) after AddRow in
// the same transaction, so that a sweep deleting one of them either sees
// the row or makes PutSnapshot store the snapshot again (see
// SnapshotInUse).
func AddRow(tx Tx, r *Row) error {
	return tx.CreateRow(r)
}

// SweepRow removes row r from tx, leaving tomb, and queues for deletion
// (and returns) the write-once objects no remaining row needs: the row's
// own evidence object at once; the segment its evidence was packed in
// (the whole object: offset and length zero) once no row in it is left;
// and each JWKS snapshot it names once no row names it (SnapshotInUse,
// asked after the row's own links are gone), with the snapshot's record
// and retain-until.
func SweepRow(tx Tx, r *Row, tomb Tombstone) ([]Location, error) {
	if err := tx.RemoveRow(r, tomb); err != nil {
		return nil, err
	}
	var deletable []Location
	loc, err := tx.Object(EvidenceKey(r.ID))
	switch {
	case err == nil:
		own, err := releaseEvidence(tx, r.ID, loc)
		if err != nil {
			return nil, err
		}
		deletable = append(deletable, own...)
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	for _, s := range SnapshotsOf(r) {
		used, err := tx.SnapshotInUse(s)
		if err != nil {
			return nil, fmt.Errorf("is snapshot %s in use: %w", s, err)
		}
		if used {
			continue
		}
		gone, err := dropSnapshot(tx, s)
		if err != nil {
			return nil, err
		}
		deletable = append(deletable, gone...)
	}
	for _, loc := range deletable {
		if err := tx.QueueDeletion(loc); err != nil {
			return nil, fmt.Errorf("queue %s for deletion: %w", loc.Key, err)
		}
	}
	return deletable, nil
}

// releaseEvidence forgets where row id's evidence is held and returns the
// object that became deletable: its own, or its segment once the last
// member is gone.
func releaseEvidence(tx Tx, id string, loc Location) ([]Location, error) {
	if err := tx.DeleteObject(EvidenceKey(id)); err != nil {
		return nil, err
	}
	if loc.Length == 0 {
		return []Location{loc}, nil
	}
	return leaveSegment(tx, loc)
}

// leaveSegment counts one member fewer in the segment loc is part of and
// returns the segment's whole object when no member is left.
func leaveSegment(tx Tx, loc Location) ([]Location, error) {
	n, err := tx.Count(RefSegment, loc.Key, -1)
	if err != nil {
		return nil, fmt.Errorf("count members of segment %s: %w", loc.Key, err)
	}
	if n > 0 {
		return nil, nil
	}
	loc.Offset, loc.Length = 0, 0
	return []Location{loc}, nil
}

// dropSnapshot removes snapshot id, which no row names any more, and
// returns its object when it was uploaded.
func dropSnapshot(tx Tx, id string) ([]Location, error) {
	if err := tx.DeleteSnapshot(id); err != nil {
		return nil, err
	}
	loc, err := tx.Object(SnapshotKey(id))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := tx.DeleteObject(SnapshotKey(id)); err != nil {
		return nil, err
	}
	return []Location{loc}, nil
}

// RecordUpload records that outbox entry e is done, its object held at
// loc: the entry leaves the outbox (with its failure record) and, for an
// entry packed in a segment, counts as one more member of the segment. A
// row's evidence bundle leaves the row store once its write-once copy is
// recorded, where the store drops bundles (EvidenceDropper). It does
// nothing when e has already left the outbox.
func RecordUpload(tx Tx, e OutboxEntry, loc Location) error {
	return RecordUploads(tx, []OutboxEntry{e}, []Location{loc})
}

// RecordUploads is RecordUpload for each entry of es, held at the location
// of the same index in locs, with the members each segment gained counted
// once per segment. An extension that left a row's bundle in an object of
// its own, copied out of the segment it was packed in (see
// Ledger.UploadRound), records that object and counts one member fewer in
// the segment, whose deletion is queued when it was the last.
func RecordUploads(tx Tx, es []OutboxEntry, locs []Location) error {
	if len(es) != len(locs) {
		return fmt.Errorf("%d uploads with %d locations", len(es), len(locs))
	}
	// Where the store removes many entries in one round trip, it removes
	// them first; the rest of each entry's record does not depend on the
	// others' removal. They go in Seq order, the order in which Claim and
	// HoldsClaim lock outbox entries on a shared store, so that these
	// locks are not taken in opposite orders.
	var queued []bool
	if d, ok := tx.(Dequeuer); ok {
		order := make([]int, len(es))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(es[a].Seq, es[b].Seq) })
		seqs := make([]uint64, len(es))
		for i, o := range order {
			seqs[i] = es[o].Seq
		}
		inOrder, err := d.DequeueAll(seqs)
		if err != nil {
			return err
		}
		if len(inOrder) != len(es) {
			return fmt.Errorf("dequeued %d outbox entries, got %d answers", len(es), len(inOrder))
		}
		queued = make([]bool, len(es))
		for i, o := range order {
			queued[o] = inOrder[i]
		}
	}
	gained := map[string]int{}
	var segments []string // in the order first seen
	for i, e := range es {
		loc := locs[i]
		var ok bool
		if queued != nil {
			ok = queued[i]
		} else {
			var err error
			if ok, err = tx.Dequeue(e.Seq); err != nil {
				return err
			}
		}
		if !ok {
			continue
		}
		if e.Op != "" {
			// An operation changes the record of the object it was
			// applied to; it never makes one. A sweep may have dropped
			// the object since the round read it (a snapshot no row names
			// any more: its deletion is queued), or a new upload may have
			// replaced it: the record stays as that left it.
			cur, err := tx.Object(e.Key)
			switch {
			case errors.Is(err, ErrNotFound) && e.Op == OpExtend && loc.Key == e.Key && loc.Length == 0:
				// Swept meanwhile, its deletion queued as the sweep
				// found it. An extension applied since may have put a
				// copy of a row's bundle out of its segment (see
				// operate), or retained the object longer: the object as
				// it is now is queued for deletion (a key's queued
				// deletion is replaced), so no object outlives its row.
				if err := tx.QueueDeletion(loc); err != nil {
					return fmt.Errorf("queue %s for deletion: %w", loc.Key, err)
				}
				continue
			case errors.Is(err, ErrNotFound):
				continue
			case err != nil:
				return err
			case cur.Length > 0 && e.Op == OpExtend && loc.Length == 0 && loc.Key == e.Key:
				// The extension copied a row's bundle out of its segment
				// into an object of its own (see operate): the segment
				// has one member fewer, and goes with its last.
				gone, err := leaveSegment(tx, cur)
				if err != nil {
					return err
				}
				for _, g := range gone {
					if err := tx.QueueDeletion(g); err != nil {
						return fmt.Errorf("queue %s for deletion: %w", g.Key, err)
					}
				}
			case cur.Key != loc.Key || cur.VersionID != loc.VersionID:
				continue
			}
		}
		if e.Op == "" && loc.Length > 0 {
			if gained[loc.Key] == 0 {
				segments = append(segments, loc.Key)
			}
			gained[loc.Key]++
		}
		if err := tx.SetObject(e.Key, loc); err != nil {
			return err
		}
		if d, ok := tx.(EvidenceDropper); ok && e.Op == "" && e.Kind == ObjectEvidence {
			if err := d.DropEvidence(e.Ref); err != nil {
				return fmt.Errorf("drop the evidence of %s, now in write-once storage: %w", e.Ref, err)
			}
		}
	}
	for _, key := range segments {
		if _, err := tx.Count(RefSegment, key, gained[key]); err != nil {
			return fmt.Errorf("count members of segment %s: %w", key, err)
		}
	}
	return nil
}

// CountFailure counts one more failure of the outbox entry seq, at at,
// and returns its failure record so far. The caller counts only entries it
// read (or claimed) in the same round.
func CountFailure(tx Tx, seq uint64, reason string, at time.Time) (OutboxFailure, error) {
	f, err := tx.Failure(seq)
	if err != nil {
		return f, err
	}
	f.Attempts++
	if f.First.IsZero() {
		f.First = at.UTC()
	}
	f.Last, f.Reason = at.UTC(), reason
	return f, tx.SetFailure(seq, f)
}

// MoveToDeadLetters moves outbox entry e to the dead letters with reason
// and the failures counted for it (at least one, at at). It does nothing
// when e has already left the outbox.
func MoveToDeadLetters(tx Tx, e OutboxEntry, reason string, at time.Time) error {
	f, err := tx.Failure(e.Seq)
	if err != nil {
		return err
	}
	ok, err := tx.Dequeue(e.Seq)
	if err != nil || !ok {
		return err
	}
	d := DeadLetter{Entry: e, Reason: reason, Attempts: max(f.Attempts, 1), FirstFailure: f.First, LastFailure: f.Last}
	if f.Attempts == 0 {
		d.FirstFailure, d.LastFailure = at.UTC(), at.UTC()
	}
	return tx.PutDeadLetter(d)
}

// incidentPrefix starts every incident id.
const incidentPrefix = "INC-"

// IncidentID formats the id of incident number seq.
func IncidentID(seq uint64) string { return incidentPrefix + strconv.FormatUint(seq, 10) }

// IncidentSeq parses an incident id into its number.
func IncidentSeq(id string) (uint64, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(id, incidentPrefix), 10, 64)
	if err != nil || n == 0 || !strings.HasPrefix(id, incidentPrefix) {
		return 0, fmt.Errorf("%w: %q is not an incident id", ErrInvalid, id)
	}
	return n, nil
}

// incident reads the incident with id; an id that is not one is not found.
func incident(tx Tx, id string) (*IncidentRecord, error) {
	seq, err := IncidentSeq(id)
	if err != nil {
		return nil, fmt.Errorf("%w: no incident %q", ErrNotFound, id)
	}
	return tx.Incident(seq)
}

// putIncident writes inc under the number its id carries.
func putIncident(tx Tx, inc IncidentRecord) error {
	seq, err := IncidentSeq(inc.ID)
	if err != nil {
		return err
	}
	return tx.PutIncident(seq, inc)
}

// incidentPage reads up to n incidents, newest first, after pageToken (the
// id of the last incident of the page before; "" from the newest), and
// returns the token of the next page ("" at the end).
func incidentPage(tx Tx, n int, pageToken string) ([]*IncidentRecord, string, error) {
	var before uint64
	if pageToken != "" {
		var err error
		if before, err = IncidentSeq(pageToken); err != nil {
			return nil, "", fmt.Errorf("%w: bad pageToken", ErrInvalid)
		}
	}
	out, err := tx.Incidents(n+1, before)
	if err != nil || len(out) <= n {
		return out, "", err
	}
	return out[:n], out[n-1].ID, nil
}

package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/ledger/proof"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// Finding is one row whose evidence is not as it was written, or whose
// fields differ from its evidence, or one place where the row store and
// the Merkle log disagree. A finding about the log
// as a whole (a tree root that does not match its checkpoint) has no RowID.
type Finding struct {
	RowID      string
	Problem    string
	Restorable bool
}

// IntegrityPage is the result of checking one page of rows.
type IntegrityPage struct {
	RowsChecked   int
	WormCompared  int
	PendingUpload int
	// LeavesChecked counts the log's leaves rebuilt into a tree (first
	// page only); NotYetLogged counts rows and dispute events committed but
	// not yet integrated into the log (not findings).
	LeavesChecked int64
	NotYetLogged  int
	Findings      []Finding
	Next          string
}

// CheckIntegrity walks up to pageSize rows in id order after token and, for
// each, recomputes the hash of the evidence kept in the row store and of its
// write-once copy and compares both with the write-time evidence hash.
// Each row's fields the write path took from its evidence (principal,
// grant, brand, agent, scopes, issued-at, limits, each action's tool,
// target, target source and args hash; a refusal's claims and reason) are
// read from that evidence again, with no signature checked, and compared
// with the row ("the row's target of cancel_order is A-7777; its evidence
// says A-5531").
// A read-only row keeps no evidence: its fields are compared with nothing
// (its leaf, below, still holds its grant, status and class).
// Each row is also held to the drill pool's rule: a row Drillable holds
// for that the pool does not hold, and a row the pool holds that
// Drillable does not hold for, are findings (the pool asked in the page's
// own read, about the page's rows alone).
//
// With the Merkle log on, it also compares each row, and each of its
// dispute events, with its leaf ("leaf N differs from row X", "row X has no
// leaf"; rows committed but not yet integrated are counted, not findings),
// and on the first page (an empty token) rebuilds the tree from every
// stored leaf and compares its root with the latest checkpoint, and checks
// that every leaf's row is still held or was swept by retention (a
// tombstone from before the leaf's class or incident close let the row go
// is a finding). The first
// page also compares every uploaded drill report with its write-once copy,
// and checks that every incident is the incident of the row it names; each
// incident row's incident is compared with the row and, once closed, with
// the leaf of its closure. The first page also names each row whose
// evidence a segment in write-once storage holds and that the row store
// holds neither as a row nor as a tombstone (checkSegments), and each
// place where the row store's indexes and its rows disagree
// (checkIndexes).
func (l *Ledger) CheckIntegrity(ctx context.Context, pageSize int, token string) (*IntegrityPage, error) {
	switch {
	case pageSize < 0 || pageSize > 10000:
		return nil, invalid("pageSize must be between 1 and 10000")
	case pageSize == 0:
		pageSize = 1000
	}
	if token != "" && !ValidID(token) {
		return nil, invalid("pageToken is not a row id")
	}
	var items []integrityItem
	page := &IntegrityPage{}
	err := l.store.View(ctx, func(tx Tx) error {
		rows, next, err := tx.RowsByID(token, pageSize)
		if err != nil {
			return err
		}
		page.Next = next
		pooled, err := poolMembers(tx, rows)
		if err != nil {
			return err
		}
		for _, r := range rows {
			it := integrityItem{row: r}
			_, it.pooled = pooled[r.ID]
			if it.bundle, err = tx.Evidence(r.ID); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			loc, err := tx.Object(EvidenceKey(r.ID))
			switch {
			case err == nil:
				it.loc, it.hasLoc = loc, true
			case !errors.Is(err, ErrNotFound):
				return err
			}
			items = append(items, it)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Rows whose bundle the row store dropped after upload are checked
	// against their write-once copy alone; every copy is read here, each
	// segment object once per page.
	l.readCopies(ctx, items)
	if token == "" {
		if err := l.checkDrills(ctx, page); err != nil {
			return nil, err
		}
		if err := l.checkIncidents(ctx, page); err != nil {
			return nil, err
		}
		if err := l.checkHolds(ctx, page); err != nil {
			return nil, err
		}
		if err := l.checkAccess(ctx, page); err != nil {
			return nil, err
		}
		if err := l.checkSegments(ctx, page); err != nil {
			return nil, err
		}
		if err := l.checkIndexes(ctx, page); err != nil {
			return nil, err
		}
	}
	if l.log != nil {
		if token == "" {
			if err := l.checkTree(ctx, page); err != nil {
				return nil, err
			}
			if err := l.checkPublishedLog(ctx, page); err != nil {
				return nil, err
			}
		}
		if err := l.checkLeaves(ctx, items, page); err != nil {
			return nil, err
		}
	}
	for _, it := range items {
		r := it.row
		page.RowsChecked++
		if d := statusEdited(r); d != "" {
			page.Findings = append(page.Findings, Finding{RowID: r.ID, Problem: d})
		}
		if d := disputeEdited(r); d != "" {
			page.Findings = append(page.Findings, Finding{RowID: r.ID, Problem: d})
		}
		if p := poolProblem(r, it.pooled); p != "" {
			page.Findings = append(page.Findings, Finding{RowID: r.ID, Problem: p})
		}
		// A read-only receipt keeps no evidence: nothing in the row
		// store to compare. The row's word for it is taken only when
		// the row is one and its leaf says so; else the row is checked
		// as any other, and a write-once copy is compared in either case.
		notKept := r.EvidenceNotKept != ""
		if notKept {
			if p := notKeptProblem(r, it.leaf, it.leafIdx); p != "" {
				page.Findings = append(page.Findings, Finding{RowID: r.ID, Problem: p})
				notKept = false
			} else if !it.hasLoc {
				continue
			}
		}
		var problems []string
		storeOK := it.bundle != nil && sha256Hex(it.bundle) == r.EvidenceSHA256
		switch {
		case it.bundle == nil && !it.dropped() && !notKept:
			problems = append(problems, "the row store holds no evidence for it")
		case it.bundle != nil && !storeOK:
			problems = append(problems, fmt.Sprintf("the row store's evidence hashes to %s, not the write-time %s", sha256Hex(it.bundle), r.EvidenceSHA256))
		}
		wormOK := false
		if !it.hasLoc {
			page.PendingUpload++
		} else {
			page.WormCompared++
			switch {
			case it.copyErr != nil:
				problems = append(problems, it.copyErr.Error())
			case sha256Hex(it.copy) != r.EvidenceSHA256:
				problems = append(problems, fmt.Sprintf("the write-once copy %s hashes to %s, not the write-time %s", it.loc.Key, sha256Hex(it.copy), r.EvidenceSHA256))
			default:
				wormOK = true
			}
		}
		if it.shadowed != "" {
			problems = append(problems, it.shadowed)
		}
		if len(problems) > 0 {
			// A dropped bundle has nothing in the row store to restore.
			f := Finding{RowID: r.ID, Restorable: !storeOK && wormOK && !it.dropped()}
			for i, p := range problems {
				if i > 0 {
					f.Problem += "; "
				}
				f.Problem += p
			}
			page.Findings = append(page.Findings, f)
		}
		// The row's fields against the evidence as written (either copy
		// that still hashes to the write-time hash), read with no
		// signature checked. Putting the evidence back mends none.
		if ev, written := it.parsed(); written {
			if diffs := editedFields(ctx, r, ev, r.EvidenceSHA256, nil); len(diffs) > 0 {
				page.Findings = append(page.Findings, Finding{RowID: r.ID, Problem: strings.Join(diffs, "; ")})
			}
		}
	}
	return page, nil
}

// checkIndexes names each entry of the row store's indexes that leads to
// another record than the row's id does, each record no id leads to, and
// each record an id leads to that no listing shows (Indexes): the marks
// of an edit of the store outside the ledger, such as a copy of a row
// that lookups show while reads by id show the row, or the reverse.
func (l *Ledger) checkIndexes(ctx context.Context, page *IntegrityPage) error {
	return l.store.View(ctx, func(tx Tx) error {
		return tx.CheckIndexes(func(f IndexFinding) error {
			var p string
			switch f.Problem {
			case IndexOtherRecord:
				p = fmt.Sprintf("the row store's index %s has an entry for row %s that points at another record than its id: the row store was edited outside the ledger", f.Index, f.RowID)
			case IndexUnnamedRecord:
				p = fmt.Sprintf("the row store holds a record of row %s that its index of ids (%s) does not lead to: a copy written outside the ledger", f.RowID, f.Index)
			case IndexUnlistedRecord:
				p = fmt.Sprintf("the row store's record of row %s has no entry in its index %s, which lists every row: the row store was edited outside the ledger, and no listing shows the row", f.RowID, f.Index)
			case IndexMissingEntry:
				p = fmt.Sprintf("the row store's record of row %s has no entry in its index %s for its value: the row store was edited outside the ledger, and lookups by that value (support's, of a customer, an order or a grant) miss the row", f.RowID, f.Index)
			default:
				p = fmt.Sprintf("the row store's index %s disagrees with row %s", f.Index, f.RowID)
			}
			page.Findings = append(page.Findings, Finding{RowID: f.RowID, Problem: p})
			return nil
		})
	})
}

// integrityItem is one row under check with what the row store holds for
// it and its write-once copy.
type integrityItem struct {
	row    *Row
	bundle []byte
	loc    Location
	hasLoc bool
	// copy is the write-once copy's bytes (when hasLoc), or copyErr why
	// they could not be read.
	copy    []byte
	copyErr error
	// shadowed says what a read of the copy's key by name gets instead
	// of the version recorded, when that is something else.
	shadowed string
	// ev is the evidence as written, decoded, and written whether there
	// is evidence as written (parsed).
	ev               *Evidence
	decoded, written bool
	// leaf is the row's leaf, parsed, when the log holds one (read by
	// checkLeaves), at index leafIdx.
	leaf    map[string]string
	leafIdx int64
	// pooled says the drill pool holds the row.
	pooled bool
}

// poolProblem says how the drill pool's word on row r (pooled: the pool
// holds it) differs from the rule, Drillable, or "" when it does not. The
// stores put a row in the pool when they create it, by the rule, and take
// it out only with the row; the pool lives in the row store, so whoever
// can write that can take a row out, and no monthly drill will ever pick
// it, or empty the pool, and the drill finds nothing to drill.
func poolProblem(r *Row, pooled bool) string {
	why := undrillable(r)
	switch {
	case why == "" && !pooled:
		return "the monthly drill may sample the row, but the drill pool does not hold it, so no monthly drill can pick it: " + poolEdited
	case why != "" && pooled && r.Kind == KindReceipt && (&verifier.Result{Checks: r.Verifier.Checks}).Failed(verifier.CheckReceiptSignature):
		// Versions before 2026-12-06 put receipts whose signature failed
		// in the pool, and so does PostgreSQL's migration 00003 for the
		// rows stored before it: an honest ledger holds such rows there,
		// and a drill that draws one decides it by rule 1, so it is no
		// finding.
		return ""
	case why != "" && pooled:
		return "the drill pool holds the row, but the monthly drill may not sample it (" + why + "): " + poolEdited
	}
	return ""
}

// poolEdited ends the words of a row the drill pool disagrees about.
const poolEdited = "the pool or the row was edited in the row store"

// notKeptProblem says why row r's word that its evidence is not kept is
// not taken ("" when it is): only a read-only receipt keeps none
// (commitRow), so the row must be one, and so must its leaf say (leaf,
// at index idx: nil when the log holds none, as without a log or before
// the row is logged). Setting the flag on another row would otherwise
// stop every comparison of its evidence, its write-once copy and its
// leaf's token hashes, and let its fields be changed unseen.
func notKeptProblem(r *Row, leaf map[string]string, idx int64) string {
	const says = "the row says its evidence is not kept, as only a read-only receipt's may be, but "
	switch {
	case r.Kind != KindReceipt:
		return says + "it is a refusal: " + editedRow
	case r.Class != retention.ReadOnly:
		return says + "the row's class is " + r.Class.String() + ": " + editedRow
	case leaf != nil && (leaf["kind"] != LeafReceipt || leaf["class"] != retention.ReadOnly.String()):
		return fmt.Sprintf("%sits leaf %d logs a %s of class %s: %s", says, idx, leaf["kind"], leaf["class"], editedRow)
	}
	return ""
}

// parsed returns the row's evidence as written (evidence), decoded once
// for the checks that read it (nil when it does not decode), and whether
// there is evidence as written.
func (it *integrityItem) parsed() (*Evidence, bool) {
	if !it.decoded {
		it.decoded = true
		if b := it.evidence(); b != nil {
			it.written = true
			var ev Evidence
			if json.Unmarshal(b, &ev) == nil {
				it.ev = &ev
			}
		}
	}
	return it.ev, it.written
}

// dropped reports whether the row store dropped the bundle after its
// write-once copy was recorded, as it does for every uploaded bundle.
func (it *integrityItem) dropped() bool { return it.bundle == nil && it.hasLoc && it.loc.Uploaded }

// evidence returns the row's evidence as written (the row store's bundle,
// else the write-once copy, whichever hashes to the write-time hash), or
// nil.
func (it *integrityItem) evidence() []byte {
	for _, b := range [][]byte{it.bundle, it.copy} {
		if b != nil && sha256Hex(b) == it.row.EvidenceSHA256 {
			return b
		}
	}
	return nil
}

// readCopies reads the write-once copy of each item that has one, each
// segment object once.
func (l *Ledger) readCopies(ctx context.Context, items []integrityItem) {
	objects := map[string][]byte{}
	failed := map[string]error{}
	shadows := map[string]string{}
	for i := range items {
		it := &items[i]
		// A row that keeps no evidence has no copy recorded; one that
		// has is compared whatever the row says.
		if !it.hasLoc {
			continue
		}
		obj := it.loc.Key + "\x00" + it.loc.VersionID
		b, ok := objects[obj]
		if !ok && failed[obj] == nil {
			var err error
			if b, err = l.getObject(ctx, it.loc); err != nil {
				failed[obj] = fmt.Errorf("the write-once copy %s cannot be read: %v", it.loc.Key, err)
			} else {
				objects[obj] = b
			}
		}
		if it.copyErr = failed[obj]; it.copyErr != nil {
			continue
		}
		it.shadowed = l.shadowed(ctx, it.loc, shadows)
		it.copy, it.copyErr = cut(b, it.loc)
	}
}

// shadowed says what stands over loc's recorded version where the store
// keeps versions: a newer version of its key, or a delete marker, which
// whoever reads the bucket by key without the ledger's records gets
// instead of the locked copy ("" when the recorded version is the
// latest). Object Lock keeps versions, not keys: anyone with the bucket's
// credentials can write either. Each key is asked once a page (seen).
func (l *Ledger) shadowed(ctx context.Context, loc Location, seen map[string]string) string {
	lv, ok := l.objects.(LatestVersioner)
	if !ok || loc.VersionID == "" {
		return ""
	}
	if p, ok := seen[loc.Key]; ok {
		return p
	}
	var p string
	switch latest, err := lv.LatestVersion(ctx, loc.Key); {
	case errors.Is(err, ErrNotFound):
		p = fmt.Sprintf("a read of the write-once copy %s by name finds nothing (a delete marker stands over version %s)", loc.Key, loc.VersionID)
	case err != nil:
		p = fmt.Sprintf("the latest version of the write-once copy %s cannot be read: %v", loc.Key, err)
	case latest != loc.VersionID:
		p = fmt.Sprintf("a newer version (%s) stands over the write-once copy %s (version %s): a read of the key by name gets it, not the copy recorded", latest, loc.Key, loc.VersionID)
	}
	seen[loc.Key] = p
	return p
}

// checkDrills compares every stored drill report with its write-once copy
// (first page only): the reports GetDrill and ListDrills serve are the
// row store's, which whoever can write the database could edit. No leaf
// of the log holds a report, so the copy is what it is checked against:
// the one the ledger put, create-only. Where the store keeps versions
// (FirstVersioner), that is the key's first version, whatever version the
// row store records; a report whose copy the row store does not record is
// compared with what the store holds under its key, unless its upload is
// still queued or was given up (a dead letter).
func (l *Ledger) checkDrills(ctx context.Context, page *IntegrityPage) error {
	type report struct {
		id   string
		body []byte
		loc  Location
		ok   bool
	}
	var reports []report
	waiting := map[string]bool{} // keys whose put is queued or dead
	for token := ""; ; {
		var next string
		err := l.store.View(ctx, func(tx Tx) error {
			bodies, n, err := tx.Drills(1000, token)
			if err != nil {
				return err
			}
			next = n
			var unrecorded []string
			for _, b := range bodies {
				var head struct {
					ID string `json:"id"`
				}
				r := report{body: b}
				if json.Unmarshal(b, &head) != nil || head.ID == "" {
					page.Findings = append(page.Findings, Finding{Problem: fmt.Sprintf("a stored drill report names no id: %.80q", b)})
					continue
				}
				r.id = head.ID
				loc, err := tx.Object(DrillKey(r.id))
				switch {
				case err == nil:
					r.loc, r.ok = loc, true
				case errors.Is(err, ErrNotFound):
					unrecorded = append(unrecorded, DrillKey(r.id))
				default:
					return err
				}
				reports = append(reports, r)
			}
			if len(unrecorded) == 0 {
				return nil
			}
			queued, err := tx.QueuedPuts(unrecorded)
			if err != nil {
				return err
			}
			for _, e := range queued {
				waiting[e.Key] = true
			}
			for after := uint64(0); ; {
				dead, err := tx.DeadLetters(after, 1000)
				if err != nil || len(dead) == 0 {
					return err
				}
				for _, d := range dead {
					waiting[d.Entry.Key] = true
					after = d.Entry.Seq
				}
			}
		})
		if err != nil {
			return err
		}
		if token = next; token == "" {
			break
		}
	}
	fv, versioned := l.objects.(FirstVersioner)
	for _, r := range reports {
		key := DrillKey(r.id)
		if !r.ok && waiting[key] {
			continue // not uploaded yet
		}
		loc := r.loc
		what := "its write-once copy " + key
		if !r.ok {
			loc = Location{Key: key}
			what += " (which the row store does not record)"
		}
		if versioned && (!r.ok || loc.VersionID != "") {
			first, err := fv.FirstVersion(ctx, key)
			switch {
			case errors.Is(err, ErrNotFound) && !r.ok:
				page.Findings = append(page.Findings, Finding{Problem: fmt.Sprintf("drill report %s: the row store records no write-once copy, none is queued for upload, and the store holds none under %s", r.id, key)})
				continue
			case errors.Is(err, ErrFirstVersionUnknown):
				page.Findings = append(page.Findings, Finding{Problem: fmt.Sprintf("drill report %s: %v; the ledger put one, so the others were put by someone else", r.id, err)})
				continue
			case err != nil:
				page.Findings = append(page.Findings, Finding{Problem: fmt.Sprintf("drill report %s: the versions of %s cannot be listed: %v", r.id, key, err)})
				continue
			case r.ok && first != loc.VersionID:
				page.Findings = append(page.Findings, Finding{Problem: fmt.Sprintf("drill report %s: the row store records version %s of %s as its copy, but the first version, the one the ledger put, is %s", r.id, loc.VersionID, key, first)})
			}
			loc.VersionID = first
			what = fmt.Sprintf("its write-once copy %s (the first version, %s)", key, first)
		}
		kept, err := l.getObject(ctx, loc)
		switch {
		case errors.Is(err, ErrNotFound) && !r.ok:
			page.Findings = append(page.Findings, Finding{Problem: fmt.Sprintf("drill report %s: the row store records no write-once copy, none is queued for upload, and the store holds none under %s", r.id, key)})
		case err != nil:
			page.Findings = append(page.Findings, Finding{Problem: fmt.Sprintf("drill report %s: %s cannot be read: %v", r.id, what, err)})
		case !bytes.Equal(kept, r.body):
			page.Findings = append(page.Findings, Finding{Problem: fmt.Sprintf("drill report %s: the row store's report (SHA-256 %s) differs from %s (%s): GetDrill and ListDrills serve the row store's", r.id, sha256Hex(r.body), what, sha256Hex(kept))})
		}
	}
	return nil
}

// checkAccess compares the access records the row store holds with every
// uploaded access object (first page only): each object holds the records
// one write appended, numbered first to last, as they were stored. A
// record an object holds that the row store does not, unless it is older
// than the access log's retention (pruned), a record that differs from
// the object's, and a record the row store numbers within an object's
// range that the object does not hold are findings. Objects still queued
// for upload or given up (dead letters) have no recorded copy and are not
// compared. Where the store keeps versions (FirstVersioner) the copy read
// is the key's first version, the one the ledger put. The batches
// recorded, queued and given up must hold every record number from the
// oldest record kept to the last handed out (accessCover).
func (l *Ledger) checkAccess(ctx context.Context, page *IntegrityPage) error {
	var cutoff time.Time // records written before it may have been pruned
	if p := l.cfg.AccessRetention; p.Months > 0 || p.Days > 0 {
		cutoff = l.cfg.Now().UTC().Add(sweepSkew).AddDate(0, -p.Months, -p.Days)
	}
	// Objects retained until before it are past the log's retention: not
	// read, so that fsck's cost follows the records kept, not every
	// object ever put.
	expired := l.cfg.Now().UTC().Add(-sweepSkew)
	finding := func(format string, args ...any) {
		page.Findings = append(page.Findings, Finding{Problem: fmt.Sprintf(format, args...)})
	}
	fv, versioned := l.objects.(FirstVersioner)
	var cover *accessCover
	if err := l.store.View(ctx, func(tx Tx) error {
		var err error
		cover, err = readAccessCover(tx)
		return err
	}); err != nil {
		return err
	}
	for after := ""; ; {
		var locs []Location
		err := l.store.View(ctx, func(tx Tx) error {
			var err error
			locs, err = tx.ObjectsUnder(accessPrefix, after, 1000)
			return err
		})
		if err != nil {
			return err
		}
		if len(locs) == 0 {
			cover.end()
			l.reportAccessGaps(cover, finding)
			return l.unrecordedAccessBatches(ctx, finding)
		}
		for _, loc := range locs {
			after = loc.Key
			first, last, sum, ok := parseAccessKey(loc.Key)
			if !ok {
				finding("the row store records an access object %s that names no range of access records", loc.Key)
				continue
			}
			cover.see(first, last)
			if !loc.RetainUntil.IsZero() && loc.RetainUntil.Before(expired) {
				// Past its retention: its records were pruned with it
				// (or, where the log keeps records for ever, are past
				// the months accessObjectKeep keeps their object, which
				// the bucket may since have let go). The retain-until is
				// the row store's record of it.
				continue
			}
			what := "the write-once copy " + loc.Key
			if versioned && loc.VersionID != "" {
				v, err := fv.FirstVersion(ctx, loc.Key)
				switch {
				case errors.Is(err, ErrFirstVersionUnknown):
					finding("access records %d–%d: %v; the ledger put one, so the others were put by someone else", first, last, err)
					continue
				case err != nil:
					finding("access records %d–%d: the versions of %s cannot be listed: %v", first, last, loc.Key, err)
					continue
				}
				if v != loc.VersionID {
					finding("access records %d–%d: the row store records version %s of %s as their copy, but the first version, the one the ledger put, is %s", first, last, loc.VersionID, loc.Key, v)
					loc.VersionID = v
				}
			}
			b, err := l.getObject(ctx, loc)
			if err != nil {
				finding("access records %d–%d: %s cannot be read: %v", first, last, what, err)
				continue
			}
			if sum != "" && sha256Hex(b) != sum {
				finding("access records %d–%d: %s hashes to %s, not the hash its key names", first, last, what, sha256Hex(b))
			}

			kept, err := parseAccessObject(b)
			if err != nil {
				finding("access records %d–%d: %s cannot be read: %v", first, last, what, err)
				continue
			}
			var stored []AccessEntry
			err = l.store.View(ctx, func(tx Tx) error {
				var err error
				stored, err = tx.AccessLog(first-1, int(last-first+1))
				return err
			})
			if err != nil {
				return err
			}
			held := map[uint64]AccessEntry{}
			for _, e := range stored {
				if e.Seq <= last {
					held[e.Seq] = e
				}
			}
			for _, k := range kept {
				e, ok := held[k.Seq]
				delete(held, k.Seq)
				switch {
				case k.Seq < first || k.Seq > last:
					finding("access records %d–%d: %s holds record %d, outside its range", first, last, what, k.Seq)
				case !ok && !cutoff.IsZero() && k.At.Before(cutoff):
					// pruned by the access log's retention
				case !ok:
					finding("access record %d (written %s) is missing from the row store; %s holds it: %s", k.Seq, k.At.Format(time.RFC3339Nano), what, k.Body)
				case !e.At.Equal(k.At) || string(e.Body) != k.Body:
					finding("access record %d differs from %s: the row store holds %s written %s, the copy %s written %s", k.Seq, what, e.Body, e.At.Format(time.RFC3339Nano), k.Body, k.At.Format(time.RFC3339Nano))
				}
			}
			for _, seq := range slices.Sorted(maps.Keys(held)) {
				finding("access record %d is in the row store but not in %s, which holds every record from %d to %d", seq, what, first, last)
			}
		}
	}
}

// checkTree rebuilds the tree from every stored leaf (with
// transparency-dev/merkle, independently of the stored hashes proofs are
// served from) and compares its root, and the stored hashes' root, with the
// latest checkpoint; it also checks that every leaf is where its ref says
// and that the row each leaf names is still held or was swept.
func (l *Ledger) checkTree(ctx context.Context, page *IntegrityPage) error {
	return l.store.View(ctx, func(tx Tx) error {
		size, cp, err := tx.LogHead()
		if err != nil || size == 0 {
			return err
		}
		logFinding := func(format string, args ...any) {
			page.Findings = append(page.Findings, Finding{Problem: fmt.Sprintf(format, args...)})
		}
		rowFinding := func(id, format string, args ...any) {
			page.Findings = append(page.Findings, Finding{RowID: id, Problem: fmt.Sprintf(format, args...)})
		}
		want, err := checkpointBody(cp)
		if err != nil {
			logFinding("the latest checkpoint cannot be read: %v", err)
			return nil
		}
		if want.Size != size {
			logFinding("the latest checkpoint is for %d leaves but the log holds %d", want.Size, size)
		}
		lr, err := l.logReader(ctx, tx)
		if err != nil {
			return err
		}
		now := l.cfg.Now().UTC()
		rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
		tree := rf.NewEmptyRange(0)
		rows := map[string]*Row{}
		// edited holds the rows the row store does not serve
		// (ErrStoreEdited), each named once.
		edited := map[string]bool{}
		// The periods the policy leaves read so far record, by class: a
		// leaf is checked against the shortest, the periods in force when
		// it was logged or shorter (another replica's, an earlier start's).
		periods := map[retention.Class][]retention.Period{}
		// The periods a dispute event keeps its row, from the policy
		// leaves read so far that record one; and for each swept row with
		// dispute leaves logged under such a policy, its latest one.
		var disputeHolds []retention.Period
		type sweptDispute struct {
			leaf   int64
			status string
			t      *Tombstone
		}
		lastDispute := map[string]sweptDispute{}
		// The revocations the log records, by the grant's hash: the
		// earliest of each grant's, and the earliest an admin recorded.
		revoked := revocationLog{}
		// What incidents hold, as the log records it (see grantHolds).
		holds, err := newGrantHolds(tx)
		if err != nil {
			return err
		}
		for i := range size {
			if i%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			ref, data, err := lr.Leaf(i)
			if err != nil {
				logFinding("leaf %d cannot be read: %v", i, err)
				return nil // the tree cannot be rebuilt past a missing leaf
			}
			if err := tree.Append(rfc6962.DefaultHasher.HashLeaf(data), nil); err != nil {
				return err
			}
			page.LeavesChecked++
			f, perr := ParseLeaf(data)
			// A leaf read back from write-once storage names its ref in
			// its lines; one of a kind this version does not write names
			// none.
			unnamed := i < lr.pruned && (perr != nil || !slices.Contains(leafKinds, f["kind"]))
			if idx, err := tx.LeafIndex(ref); !unnamed && (err != nil || idx != i) {
				logFinding("leaf %d is not where the log's index of %s points", i, ref)
			}
			if perr != nil {
				// The ledger writes every leaf with LeafVersion first: this
				// one parses to nothing, so no check reads it (its hash
				// still counts), and it proves nothing.
				logFinding("leaf %d (%s) is not a leaf this version of the ledger writes (%v): no check reads it; it was queued outside the ledger", i, ref, perr)
				continue
			}
			switch f["kind"] {
			case LeafPolicy:
				if p := policyLeafProblems(f); len(p) > 0 {
					logFinding("leaf %d (policy %s) is not a policy the ledger writes: %s; the ledger starts only with a positive period for every class, so it did not write this leaf (a period that does not parse or is not positive is not used)",
						i, f["policy"], strings.Join(p, "; "))
				}
				for c, per := range policyPeriods(f) {
					if !positivePeriod(per) {
						continue
					}
					if !slices.Contains(periods[c], per) {
						periods[c] = append(periods[c], per)
					}
				}
				if per, ok := policyDisputeHold(f); ok && positivePeriod(per) && !slices.Contains(disputeHolds, per) {
					disputeHolds = append(disputeHolds, per)
				}
			case LeafIncidentClose:
				// The incident's row is kept the incident period past the
				// close at least (CloseIncident).
				id := f["row"]
				holds.closed(id, f["at"], periods[retention.Incident])
				if _, ok := rows[id]; ok && rows[id] != nil {
					break
				}
				t, err := tx.Tombstone(id)
				if errors.Is(err, ErrNotFound) {
					break // the row is held, or its own leaf says it is missing
				} else if err != nil {
					return err
				}
				at, err := time.Parse(time.RFC3339Nano, f["at"])
				if err != nil {
					break
				}
				if per, keep, ok := shortestKeep(periods[retention.Incident], at, false); ok && t.SweptAt.Before(keep) {
					rowFinding(id, "leaf %d closes incident %s of row %s at %s, which keeps the row until %s (%s from the close), but its tombstone says it was swept on %s",
						i, f["incident"], id, f["at"], keep.Format(time.RFC3339), per, t.SweptAt.UTC().Format(time.RFC3339))
				}
			case LeafRevocation:
				if p := noteRevocation(revoked, i, f); p != "" {
					logFinding("leaf %d records a revocation %s: the ledger did not write this leaf", i, p)
				}
			case LeafReceipt, LeafRefusal, LeafDispute:
				id := f["row"]
				if f["kind"] == LeafReceipt && f["status"] == Incident.String() {
					holds.opened(i, f)
				}
				r, ok := rows[id]
				if !ok {
					if edited[id] {
						continue
					}
					r, err = tx.Row(id)
					switch {
					case errors.Is(err, ErrStoreEdited):
						// The row is compared with its leaf as its id
						// leads to it, in the pages of rows by id.
						edited[id] = true
						rowFinding(id, "leaf %d names row %s, which the row store holds but does not serve: %v", i, id, err)
						continue
					case err != nil && !errors.Is(err, ErrNotFound):
						return err
					}
					rows[id] = r
				}
				if r == nil {
					t, err := tx.Tombstone(id)
					switch {
					case errors.Is(err, ErrNotFound):
						rowFinding(id, "leaf %d names row %s, which the row store does not hold and no retention sweep removed", i, id)
					case err != nil:
						return err
					case f["kind"] != LeafDispute:
						if p := earlyTombstone(t, f, periods[t.Class], now); p != "" {
							rowFinding(id, "leaf %d names row %s, %s", i, id, p)
						}
						holds.swept(i, f, t)
					case len(disputeHolds) > 0:
						// A dispute event keeps its row the period past
						// the event, and while the dispute is open.
						if at, err := time.Parse(time.RFC3339Nano, f["at"]); err == nil {
							if per, keep, ok := shortestKeep(disputeHolds, at, false); ok && t.SweptAt.Before(keep) {
								rowFinding(id, "leaf %d records dispute event %s of row %s at %s, which keeps the row until %s (%s past the event), but its tombstone says it was swept on %s",
									i, f["event"], id, f["at"], keep.Format(time.RFC3339), per, t.SweptAt.UTC().Format(time.RFC3339))
							}
						}
						if len(lastDispute) < 4096 {
							lastDispute[id] = sweptDispute{leaf: i, status: f["status"], t: t}
						}
					}
					continue
				}
				if f["kind"] == LeafDispute {
					if n, err := strconv.Atoi(f["event"]); err != nil || n < 0 || strconv.Itoa(n) != f["event"] {
						// "event 00" reads as event 0 everywhere: a second
						// leaf of it, which the ledger does not write.
						rowFinding(id, "leaf %d records dispute event %q of row %s, not a number as the ledger writes it (decimal, without sign or leading zero): the ledger did not write this leaf", i, f["event"], id)
					} else if n >= len(r.DisputeEvents) {
						rowFinding(id, "leaf %d records dispute event %s of row %s, which the row does not have", i, f["event"], id)
					}
				}
			}
			if len(rows) > 4096 {
				clear(rows) // a cache, not a set: keep it small
			}
		}
		holds.check(rowFinding)
		for _, id := range slices.Sorted(maps.Keys(lastDispute)) {
			if d := lastDispute[id]; d.status == DisputeOpen.String() {
				rowFinding(id, "leaf %d, the last dispute event of row %s, leaves its dispute open, but its tombstone says it was swept on %s: a row is kept while its dispute is open",
					d.leaf, id, d.t.SweptAt.UTC().Format(time.RFC3339))
			}
		}
		if err := checkRevocations(tx, revoked, logFinding); err != nil {
			return err
		}
		root, err := tree.GetRootHash(nil)
		if err != nil {
			return err
		}
		if !bytes.Equal(root, want.Hash[:]) {
			logFinding("tree root does not match checkpoint: the %d stored leaves hash to %x, the checkpoint for %d says %x", size, root, want.Size, want.Hash[:])
		}
		stored, err := tlog.TreeHash(size, lr)
		switch {
		case err != nil:
			logFinding("the stored tree hashes cannot be read: %v", err)
		case stored != want.Hash:
			logFinding("the stored tree hashes (which proofs are served from) give root %x, not the checkpoint's %x", stored[:], want.Hash[:])
		}
		return nil
	})
}

// revocationClaim is what one revocation leaf says: the grant was
// revoked as of at, from leaf on.
type revocationClaim struct {
	leaf int64
	at   time.Time
}

// revocationClaims are the earliest revocation the log records of one
// grant, and the earliest an admin recorded (zero leaf and time: none).
type revocationClaims struct {
	any, adm revocationClaim
	hasAdmin bool
	// stated is the earliest revocation of each brand whose Provider's
	// signed statement the log records, by the brand URL's hash.
	stated map[string]statedClaim
}

// statedClaim is what the earliest revocation leaves of a brand's
// statements say: the grant was revoked as of at, by the statements
// whose hashes are in statements (one signed again after a restore lost
// the first is logged too).
type statedClaim struct {
	revocationClaim
	statements map[string]bool
}

// revocationLog holds the revocations the log records, by the grant id's
// hash.
type revocationLog = map[string]*revocationClaims

// noteRevocation keeps what revocation leaf i, whose lines are f, says;
// it returns what is wrong with a leaf the ledger did not write ("" when
// nothing).
func noteRevocation(m revocationLog, i int64, f map[string]string) string {
	g := f["grant"]
	if h, ok := strings.CutPrefix(g, "sha256:"); !ok || len(h) != 64 || strings.ToLower(h) != h {
		return fmt.Sprintf("of grant %q, not a hash as the ledger writes one", g)
	}
	at, err := time.Parse(time.RFC3339Nano, f["revoked"])
	if err != nil || stamp(at) != f["revoked"] {
		return fmt.Sprintf("of grant %s as of %q, not a time as the ledger writes one", g, f["revoked"])
	}
	c := m[g]
	if c == nil {
		c = &revocationClaims{any: revocationClaim{leaf: i, at: at}}
		m[g] = c
	} else if at.Before(c.any.at) {
		c.any = revocationClaim{leaf: i, at: at}
	}
	if f["admin"] == "yes" && (!c.hasAdmin || at.Before(c.adm.at)) {
		c.adm, c.hasAdmin = revocationClaim{leaf: i, at: at}, true
	}
	if b, ok := f["brand"]; ok {
		if h, ok := strings.CutPrefix(b, "sha256:"); !ok || len(h) != 64 || strings.ToLower(h) != h {
			return fmt.Sprintf("of grant %s with the statement of brand %q, not a hash as the ledger writes one", g, b)
		}
		switch prev, seen := c.stated[b]; {
		case !seen || at.Before(prev.at):
			if c.stated == nil {
				c.stated = map[string]statedClaim{}
			}
			c.stated[b] = statedClaim{revocationClaim{leaf: i, at: at}, map[string]bool{f["statement"]: true}}
		case at.Equal(prev.at):
			prev.statements[f["statement"]] = true
		}
	}
	return ""
}

// RevocationLister is a row store transaction that lists every
// revocation it holds: fsck matches the log's revocation leaves, which
// name a grant by its id's hash, with them.
type RevocationLister interface {
	// Revocations calls fn with each grant's revocation.
	Revocations(fn func(grant string, r *Revocation) error) error
	// RevocationsAfter calls fn with the revocations of at most limit
	// grants whose ids sort after after, in the store's order of grant
	// ids.
	RevocationsAfter(after string, limit int, fn func(grant string, r *Revocation) error) error
}

// checkRevocations compares the revocations the log records with the row
// store's: a revocation the log records is never taken back (RevokeGrant
// only moves a grant's time earlier), so a grant the row store holds no
// revocation of, or one in force later than the log says, or without the
// admin's revocation the log records (the one that stops the embedded
// Provider), lost it to a restore of the row store or an edit; the
// Provider then serves the grant again.
func checkRevocations(tx Tx, logged revocationLog, finding func(format string, args ...any)) error {
	if len(logged) == 0 {
		return nil
	}
	rl, ok := tx.(RevocationLister)
	if !ok {
		finding("the log records revocations of %d grants, but this row store cannot list its revocations: they were not compared", len(logged))
		return nil
	}
	err := rl.Revocations(func(grant string, r *Revocation) error {
		c, ok := logged[digest(grant)]
		if !ok {
			return nil
		}
		delete(logged, digest(grant))
		if r.RevokedAt.After(c.any.at) {
			finding("leaf %d records grant %s revoked as of %s, but the row store holds it revoked as of %s, later: the row store was restored to before the revocation, or edited",
				c.any.leaf, grant, stamp(c.any.at), stamp(r.RevokedAt))
		}
		switch {
		case !c.hasAdmin:
		case r.AdminRevokedAt.IsZero():
			finding("leaf %d records an admin's revocation of grant %s as of %s, but the row store holds none: the row store was restored to before it, or edited, and the embedded Provider serves the grant",
				c.adm.leaf, grant, stamp(c.adm.at))
		case r.AdminRevokedAt.After(c.adm.at):
			finding("leaf %d records an admin's revocation of grant %s as of %s, but the row store holds the admin's as of %s, later: the row store was restored to before it, or edited, and the embedded Provider serves the grant until then",
				c.adm.leaf, grant, stamp(c.adm.at), stamp(r.AdminRevokedAt))
		}
		for _, b := range slices.Sorted(maps.Keys(c.stated)) {
			if p := statementFinding(r, b, c.stated[b].at, c.stated[b].statements); p != "" {
				finding("leaf %d records the Provider's signed statement of grant %s's revocation as of %s%s", c.stated[b].leaf, grant, stamp(c.stated[b].at), p)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list revocations: %w", err)
	}
	for _, g := range slices.Sorted(maps.Keys(logged)) {
		c := logged[g]
		who := ""
		if c.hasAdmin {
			who = fmt.Sprintf(" (an admin's from leaf %d: the embedded Provider serves the grant again)", c.adm.leaf)
		}
		finding("leaf %d records a revocation of the grant whose id hashes to %s, as of %s%s, but the row store holds no revocation of that grant: the row store was restored to before it, or the revocation deleted",
			c.any.leaf, g, stamp(c.any.at), who)
	}
	return nil
}

// statementFinding says what is wrong with revocation r against the
// leaves that record a Provider's statements of brand (the hash of its
// URL) as of at, whose digests are logged: "" when r holds that brand's
// statement as of at or earlier (one logged, when as of at), or an
// admin's revocation as of at or earlier, which stops the embedded
// Provider whatever became of the statement (what an operator records
// after a restore lost it).
func statementFinding(r *Revocation, brand string, at time.Time, logged map[string]bool) string {
	i := slices.IndexFunc(r.ProviderStatements, func(st ProviderStatement) bool { return digest(st.Brand) == brand })
	admin := !r.AdminRevokedAt.IsZero() && !r.AdminRevokedAt.After(at)
	switch {
	case i >= 0 && r.ProviderStatements[i].RevokedAt.Equal(at) && !logged[digest(r.ProviderStatements[i].Statement)]:
		return fmt.Sprintf(" (brand %s), but the row store holds another statement of that brand as of that time: edited", r.ProviderStatements[i].Brand)
	case admin, i >= 0 && !r.ProviderStatements[i].RevokedAt.After(at):
		return ""
	case i < 0:
		return fmt.Sprintf(" (the brand whose URL hashes to %s), but the row store holds none of that brand, nor an admin's revocation as early: the row store was restored to before it, or edited, and a copy of the Provider's store from before the revocation would serve the grant again (`ledgerctl revoke GRANT --at` that time with an admin key stops it)", brand)
	}
	return fmt.Sprintf(" (brand %s), but the row store holds that brand's as of %s, later, and no admin's revocation as early: the row store was restored to before it, or edited",
		r.ProviderStatements[i].Brand, stamp(r.ProviderStatements[i].RevokedAt))
}

// positivePeriod reports whether p is a period the ledger starts with
// (retention.Policy.Validate): positive.
func positivePeriod(p retention.Period) bool {
	return p.Months >= 0 && p.Days >= 0 && p.Months+p.Days > 0
}

// policyLeafProblems says what is wrong with a policy leaf the ledger
// would not have written (policyLeaf): a class without its line, a period
// that does not parse or is not positive, a line of another name.
func policyLeafProblems(f map[string]string) []string {
	var p []string
	known := []string{"kind", "policy", "at", policyDisputeLine}
	for _, c := range policyClasses {
		known = append(known, c.String())
		v, ok := f[c.String()]
		if !ok {
			p = append(p, fmt.Sprintf("it has no %s line", c))
			continue
		}
		switch per, err := retention.ParsePeriod(v); {
		case err != nil:
			p = append(p, fmt.Sprintf("its %s line %q is no period", c, v))
		case !positivePeriod(per):
			p = append(p, fmt.Sprintf("its %s period %q is not positive", c, v))
		}
	}
	if v, ok := f[policyDisputeLine]; ok {
		if per, err := retention.ParsePeriod(v); err != nil || !positivePeriod(per) {
			p = append(p, fmt.Sprintf("its %s line %q is no positive period", policyDisputeLine, v))
		}
	}
	var unknown []string
	for name := range f {
		if !slices.Contains(known, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		p = append(p, fmt.Sprintf("it has lines a policy leaf does not have (%s)", strings.Join(unknown, ", ")))
	}
	return p
}

// heldStatuses are the statuses of the receipts an incident holds with
// its grant: receipts whose signature passed (Row.ReceiptVerified,
// keepReasons). An unauthorized receipt's signature may have passed too,
// which its leaf does not say: such a row is not checked against its
// grant's incidents.
var heldStatuses = []string{Authorized.String(), Incident.String(), Duplicate.String()}

// maxHeldSwept bounds the swept rows grantHolds keeps to check: the
// first the log holds of grants an incident holds. Those past it are
// counted, and the check says how many it did not check.
const maxHeldSwept = 1 << 16

// IncidentSweepSkew is how long after the recording of the row that
// opened an incident a receipt of its grant may be swept without fsck or
// the log audit taking it as swept while the incident held it: the sweep
// may have run before the incident existed. The sweep's time is read from
// the sweeping replica's clock and the incident row's recording time from
// the recording replica's, each up to ClockTolerance off the reference
// clocks (a clock stepped back within it does the same), so the two
// differ by up to twice ClockTolerance; and a row's recording time is
// read before its transaction commits, so a sweep that committed first,
// and did not see the incident, can be dated after it by that wait too
// (incidentCommitMargin). A row swept that little early changes nothing
// retention decides: its periods are days and months.
const IncidentSweepSkew = 2*ClockTolerance + incidentCommitMargin

// incidentCommitMargin is the part of IncidentSweepSkew for the time
// between a row's recording time and its commit: a busy database, a
// lock, a transaction retried until its commit timeout.
const incidentCommitMargin = 5 * time.Minute

// grantHolds checks swept rows against what incidents hold, as the log
// records it: an incident's own row until its incident closes and the
// incident period past the close (CloseIncident), and the receipts of
// its grant whose signature passed from its opening (its row's
// recording, give or take IncidentSweepSkew) while it is open, and
// until its close plus the incident period in force then (keepReasons,
// incidentHolds). The rows an incident holds for sharing its agent
// platform and day are not checked: no leaf names a row's platform.
//
// A row of a grant can be logged before the incident that holds it, so
// the grants of every incident the row store holds are read first, and
// only the swept rows of those grants, and of the incidents' leaves read
// so far, are kept for the check at the end.
type grantHolds struct {
	grants    map[string]bool              // grants some incident holds
	incidents map[string]incidentOpened    // incident rows' leaves, by row
	closes    map[string]incidentClosed    // closure leaves, by row
	open      map[string]sweptIncidentRow  // swept incident rows whose closure has not been read
	held      map[string][]sweptGrantedRow // swept rows of held grants, by grant
	nSwept    int
	unchecked int // swept rows of held grants past maxHeldSwept, not kept
}

type incidentOpened struct {
	leaf     int64
	grant    string
	recorded time.Time
}

type incidentClosed struct {
	at      string
	keep    time.Time // the close plus the shortest incident period logged before it (at without one)
	per     retention.Period
	hasKeep bool
}

type sweptIncidentRow struct {
	leaf    int64
	sweptAt time.Time
}

type sweptGrantedRow struct {
	leaf    int64
	id      string
	sweptAt time.Time
}

func newGrantHolds(tx Tx) (*grantHolds, error) {
	h := &grantHolds{grants: map[string]bool{}, incidents: map[string]incidentOpened{}, closes: map[string]incidentClosed{},
		open: map[string]sweptIncidentRow{}, held: map[string][]sweptGrantedRow{}}
	var before uint64
	for {
		incs, err := tx.Incidents(1000, before)
		if err != nil {
			return nil, err
		}
		for _, inc := range incs {
			if inc.GrantSHA256 != "" {
				h.grants[inc.GrantSHA256] = true
			}
			seq, err := IncidentSeq(inc.ID)
			if err != nil {
				return nil, err
			}
			before = seq
		}
		if len(incs) < 1000 || before <= 1 {
			return h, nil
		}
	}
}

// opened notes leaf i of a row that opened an incident.
func (h *grantHolds) opened(i int64, f map[string]string) {
	id := f["row"]
	if _, ok := h.incidents[id]; ok {
		return
	}
	o := incidentOpened{leaf: i, grant: f["grant"]}
	o.recorded, _ = time.Parse(time.RFC3339Nano, f["recorded"])
	h.incidents[id] = o
	if o.grant != "" && o.grant != "-" {
		h.grants[o.grant] = true
	}
}

// closed notes the closure leaf of row id's incident, closed at, under
// the incident periods logged so far.
func (h *grantHolds) closed(id, at string, periods []retention.Period) {
	if _, ok := h.closes[id]; ok {
		return
	}
	delete(h.open, id)
	c := incidentClosed{at: at}
	if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
		c.keep, c.hasKeep = t.UTC(), true
		if per, keep, ok := shortestKeep(periods, t, false); ok {
			c.per, c.keep = per, keep
		}
	}
	h.closes[id] = c
}

// swept notes the receipt or refusal leaf i of a row removed with
// tombstone t.
func (h *grantHolds) swept(i int64, f map[string]string, t *Tombstone) {
	if f["kind"] != LeafReceipt {
		return
	}
	id := f["row"]
	if f["status"] == Incident.String() {
		if _, ok := h.closes[id]; !ok {
			h.open[id] = sweptIncidentRow{leaf: i, sweptAt: t.SweptAt}
		}
	}
	g := f["grant"]
	if !slices.Contains(heldStatuses, f["status"]) || !h.grants[g] {
		return
	}
	if h.nSwept >= maxHeldSwept {
		h.unchecked++
		return
	}
	h.held[g] = append(h.held[g], sweptGrantedRow{leaf: i, id: id, sweptAt: t.SweptAt})
	h.nSwept++
}

// check reports what the swept rows noted break, and how many swept rows
// of held grants it did not check (maxHeldSwept).
func (h *grantHolds) check(finding func(id, format string, args ...any)) {
	if h.unchecked > 0 {
		finding("", "%d swept receipts of grants an incident holds were not checked against their grants' incidents: fsck checks the first %d the log holds, and the log holds %d in all; a receipt swept while its grant's incident held it may be among those not checked",
			h.unchecked, maxHeldSwept, maxHeldSwept+h.unchecked)
	}
	for _, id := range slices.Sorted(maps.Keys(h.open)) {
		o := h.open[id]
		finding(id, "leaf %d names row %s, which opened an incident, but the log holds no closure of it and its tombstone says it was swept on %s: an incident's row is kept while its incident is open, and the incident period past its close",
			o.leaf, id, o.sweptAt.UTC().Format(time.RFC3339))
	}
	byGrant := map[string][]string{}
	for id, o := range h.incidents {
		byGrant[o.grant] = append(byGrant[o.grant], id)
	}
	for _, g := range slices.Sorted(maps.Keys(h.held)) {
		incs := byGrant[g]
		slices.Sort(incs)
		for _, s := range h.held[g] {
			for _, inc := range incs {
				o := h.incidents[inc]
				if inc == s.id || o.recorded.IsZero() || !s.sweptAt.After(o.recorded.Add(IncidentSweepSkew)) {
					continue
				}
				c, ok := h.closes[inc]
				switch {
				case !ok || !c.hasKeep:
					finding(s.id, "leaf %d names row %s, whose tombstone says it was swept on %s, while the incident row %s (leaf %d) opened under the same grant has no closure in the log: an open incident holds the receipts of its grant",
						s.leaf, s.id, s.sweptAt.UTC().Format(time.RFC3339), inc, o.leaf)
				case s.sweptAt.Before(c.keep):
					finding(s.id, "leaf %d names row %s, whose tombstone says it was swept on %s, before %s: the incident of row %s (leaf %d), opened under the same grant and closed at %s, holds the receipts of its grant until its close plus the incident period (%s)",
						s.leaf, s.id, s.sweptAt.UTC().Format(time.RFC3339), c.keep.Format(time.RFC3339), inc, o.leaf, c.at, c.per)
				}
			}
		}
	}
}

// sweepSkew is how far ahead of the check's clock a tombstone's sweep
// time may be: another process's clock.
const sweepSkew = 5 * time.Minute

// earlyTombstone says what is wrong with tombstone t of the row whose
// leaf is f, "" when a retention sweep could have left it: the sweep
// removes a row only once its retain-until has passed, and retain-until
// is never before the class's period in force when the row was recorded,
// counted from then (the leaf's class and recorded lines, which the row
// store cannot change). A tombstone left by whoever removed a row before
// then is not a sweep's. periods are those the policy leaves before the
// row's leaf record for its class; with none (a row logged before the
// ledger logged its policy) the period is not checked.
func earlyTombstone(t *Tombstone, f map[string]string, periods []retention.Period, now time.Time) string {
	if t.Class.String() != f["class"] || t.Status.String() != f["status"] {
		return fmt.Sprintf("whose tombstone says class %s and status %s, the leaf says class %s and status %s", t.Class, t.Status, f["class"], f["status"])
	}
	recorded, err := time.Parse(time.RFC3339Nano, f["recorded"])
	if err != nil {
		return ""
	}
	if t.SweptAt.After(now.Add(sweepSkew)) {
		return fmt.Sprintf("whose tombstone says it was swept on %s, after the time of this check (%s)", t.SweptAt.UTC().Format(time.RFC3339), now.Format(time.RFC3339))
	}
	per, keep, ok := shortestKeep(periods, recorded, true)
	if ok && (t.SweptAt.Before(keep) || t.RetainUntil.Before(keep)) {
		return fmt.Sprintf("whose tombstone says it was retained until %s and swept on %s, before its class keeps it (%s from %s: at least until %s)",
			t.RetainUntil.UTC().Format(time.RFC3339), t.SweptAt.UTC().Format(time.RFC3339), per, f["recorded"], keep.Format(time.RFC3339))
	}
	return ""
}

// shortestKeep is the earliest end of the periods counted from start,
// and the period that ends then; ok is false with no period. With slack,
// a period of months ends three days earlier: retention counts from the
// receipt's ts when that is later, and months end on different days
// (January 31 plus a month is March 3, February 1 plus a month March 1);
// a later start never ends more than three days earlier.
func shortestKeep(periods []retention.Period, start time.Time, slack bool) (per retention.Period, keep time.Time, ok bool) {
	for _, p := range periods {
		k := p.After(start).UTC()
		if slack && p.Months > 0 {
			k = k.AddDate(0, 0, -3)
		}
		if !ok || k.Before(keep) {
			per, keep, ok = p, k, true
		}
	}
	return per, keep, ok
}

// checkpointBody parses the body of a signed checkpoint the ledger signed
// itself (its signature is the ledger's own).
func checkpointBody(signed []byte) (proof.Checkpoint, error) {
	i := bytes.Index(signed, []byte("\n\n"))
	if i < 0 {
		return proof.Checkpoint{}, fmt.Errorf("%w: not a signed note", ErrInvalid)
	}
	return proof.ParseCheckpoint(string(signed[:i+1]))
}

// checkLeaves compares each row of a page, and each of its dispute events,
// with its leaf.
func (l *Ledger) checkLeaves(ctx context.Context, items []integrityItem, page *IntegrityPage) error {
	return l.store.View(ctx, func(tx Tx) error {
		lr, err := l.logReader(ctx, tx)
		if err != nil {
			return err
		}
		// check compares the leaf of ref with want and returns the leaf
		// and its index (nil when the log holds none or it cannot be
		// read).
		check := func(r *Row, ref, what string, want []byte, skip ...string) ([]byte, int64, error) {
			idx, err := tx.LeafIndex(ref)
			switch {
			case errors.Is(err, ErrNotFound):
				// Committed but not yet integrated, or never logged.
				queued, err := tx.LeafQueued(ref)
				switch {
				case err != nil:
					return nil, 0, err
				case queued:
					page.NotYetLogged++
				default:
					page.Findings = append(page.Findings, Finding{RowID: r.ID, Problem: fmt.Sprintf("%s has no leaf in the log", what)})
				}
				return nil, 0, nil
			case err != nil:
				return nil, 0, err
			}
			_, got, err := lr.Leaf(idx)
			if err != nil {
				page.Findings = append(page.Findings, Finding{RowID: r.ID, Problem: fmt.Sprintf("leaf %d of %s cannot be read: %v", idx, what, err)})
				return nil, 0, nil
			}
			if d := leafDiff(got, want, skip); d != "" {
				page.Findings = append(page.Findings, Finding{RowID: r.ID, Problem: fmt.Sprintf("leaf %d differs from %s: %s", idx, what, d)})
			}
			return got, idx, nil
		}
		for i := range items {
			r := items[i].row
			var skip []string
			ev, _ := items[i].parsed()
			if ev == nil {
				// Not kept (read-only class) or itself a finding above: the
				// token hashes cannot be recomputed from the row store.
				skip = evidenceLeafKeys
			}
			leaf, idx, err := check(r, r.ID, "row "+r.ID, rowLeaf(r, ev), skip...)
			if err != nil {
				return err
			}
			if leaf != nil {
				// A leaf that does not parse is a finding of its own
				// (leafDiff); it vouches for no class.
				if items[i].leaf, _ = ParseLeaf(leaf); items[i].leaf == nil {
					items[i].leaf = map[string]string{}
				}
				items[i].leafIdx = idx
			}
			for n, e := range r.DisputeEvents {
				if _, _, err := check(r, disputeRef(r.ID, n), fmt.Sprintf("dispute event %d of row %s", n, r.ID), disputeLeaf(r.ID, n, e)); err != nil {
					return err
				}
			}
			if r.Status != Incident && r.IncidentID == "" {
				continue
			}
			inc, p, err := rowIncident(tx, r)
			if err != nil {
				return err
			}
			if p != "" {
				page.Findings = append(page.Findings, Finding{RowID: r.ID, Problem: p})
				continue
			}
			what := "the closure of incident " + inc.ID
			if !inc.Open() {
				if _, _, err := check(r, incidentRef(inc.ID), what, incidentCloseLeaf(inc)); err != nil {
					return err
				}
				continue
			}
			// An open incident has no closure in the log, logged or queued.
			switch idx, err := tx.LeafIndex(incidentRef(inc.ID)); {
			case err == nil:
				page.Findings = append(page.Findings, Finding{RowID: r.ID, Problem: fmt.Sprintf("incident %s is open, but leaf %d records its closure", inc.ID, idx)})
			case !errors.Is(err, ErrNotFound):
				return err
			default:
				queued, err := tx.LeafQueued(incidentRef(inc.ID))
				if err != nil {
					return err
				}
				if queued {
					page.Findings = append(page.Findings, Finding{RowID: r.ID, Problem: fmt.Sprintf("incident %s is open, but its closure waits for the log", inc.ID)})
				}
			}
		}
		return nil
	})
}

// rowIncident reads the incident of an incident row and says what does
// not match the row ("" when the incident is the row's own): the row names
// none, the row store holds no such incident, or the incident names
// another row or another agent platform (the platform whose rows of that
// day the sweep keeps while it holds).
func rowIncident(tx Tx, r *Row) (*IncidentRecord, string, error) {
	if r.Status != Incident {
		return nil, fmt.Sprintf("the row names incident %s, but its status is %s", r.IncidentID, r.Status), nil
	}
	if r.IncidentID == "" {
		return nil, "the row's status is incident, but it names no incident", nil
	}
	inc, err := incident(tx, r.IncidentID)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, fmt.Sprintf("the row store holds no incident %s, which the row's status opened", r.IncidentID), nil
	case err != nil:
		return nil, "", err
	case inc.RowID != r.ID:
		return nil, fmt.Sprintf("incident %s names row %s, not this row", inc.ID, inc.RowID), nil
	case inc.Agent != r.Agent.Platform:
		return nil, fmt.Sprintf("incident %s names agent platform %q, the row %q", inc.ID, inc.Agent, r.Agent.Platform), nil
	}
	return inc, "", nil
}

// checkIncidents checks that every incident the row store lists is the
// incident of the row it names (first page): an incident no row opened
// would stand in the incident list, and hold rows from the sweep, for
// nothing in the log. The rows' side, and each closure against its
// leaf, is checkLeaves'.
func (l *Ledger) checkIncidents(ctx context.Context, page *IntegrityPage) error {
	for token := ""; ; {
		var next string
		err := l.store.View(ctx, func(tx Tx) error {
			incs, n, err := incidentPage(tx, 1000, token)
			if err != nil {
				return err
			}
			next = n
			for _, inc := range incs {
				r, err := tx.Row(inc.RowID)
				switch {
				case errors.Is(err, ErrNotFound):
					t, terr := tx.Tombstone(inc.RowID)
					switch {
					case errors.Is(terr, ErrNotFound):
						page.Findings = append(page.Findings, Finding{RowID: inc.RowID, Problem: fmt.Sprintf("incident %s names row %s, which the row store does not hold and no retention sweep removed", inc.ID, inc.RowID)})
					case terr != nil:
						return terr
					case t.Status != Incident:
						page.Findings = append(page.Findings, Finding{RowID: inc.RowID, Problem: fmt.Sprintf("incident %s names row %s, which was swept as a %s row", inc.ID, inc.RowID, t.Status)})
					}
				case errors.Is(err, ErrStoreEdited):
					page.Findings = append(page.Findings, Finding{RowID: inc.RowID, Problem: fmt.Sprintf("incident %s names row %s, which the row store holds but does not serve: %v", inc.ID, inc.RowID, err)})
				case err != nil:
					return err
				case r.IncidentID != inc.ID:
					page.Findings = append(page.Findings, Finding{RowID: inc.RowID, Problem: fmt.Sprintf("incident %s names row %s, which is not its row (the row's status is %s, its incident %q)", inc.ID, inc.RowID, r.Status, r.IncidentID)})
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if token = next; token == "" {
			return nil
		}
	}
}

// maxHoldsRead is the most objects checkHolds asks the store about, of
// each kind: those open incidents hold, and those queued for deletion.
const maxHoldsRead = 1000

// checkHolds compares the legal holds the ledger recorded with the
// object store's (first page; a store that cannot say is not asked). An
// object an open incident holds, recorded held, must be held in the
// store; an object queued for deletion, recorded released, must not be.
// Holds and releases of one object are applied in their order, each
// under its uploader's claim, but a call can land late: a replica that
// was paused, or a store that took longer than the claim, after another
// replica applied the operation and the next one. A hold lost so leaves
// an incident's evidence unprotected once its retention passes; a hold
// kept so keeps an object past its retention, and the sweep's deletion is
// refused at every sweep.
func (l *Ledger) checkHolds(ctx context.Context, page *IntegrityPage) error {
	lh, ok := l.objects.(LegalHoldReader)
	if !ok {
		return nil
	}
	var want []heldObject
	var queued []Location
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		want, queued, err = recordedHolds(tx)
		return err
	})
	if err != nil {
		return err
	}
	for _, h := range want {
		on, err := lh.LegalHold(ctx, h.loc)
		switch {
		case errors.Is(err, ErrNotFound):
			// Gone from the store: the segment and evidence checks say so.
		case err != nil:
			page.Findings = append(page.Findings, Finding{Problem: fmt.Sprintf("the legal hold of %s, which open incident %s holds, could not be read: %v", h.loc.Key, h.incident, err)})
		case !on:
			page.Findings = append(page.Findings, Finding{Problem: fmt.Sprintf("open incident %s holds %s, and the ledger recorded its legal hold, but the object store holds it without one: a release applied late (a replica whose claim ran out while its call was on the way) or removed outside the ledger; once its retention passes it can be deleted (the next retention sweep queues the hold again)", h.incident, h.loc.Key)})
		}
	}
	for _, loc := range queued { // a snapshot queued held is released by the sweep first
		on, err := lh.LegalHold(ctx, loc)
		if err == nil && on {
			page.Findings = append(page.Findings, Finding{Problem: fmt.Sprintf("%s is queued for deletion, released by the ledger, but the object store holds it under a legal hold, which no incident records: a hold applied late (a replica whose claim ran out while its call was on the way) or placed outside the ledger; the sweep cannot delete it until the hold is released", loc.Key)})
		}
	}
	return nil
}

// heldObject is an object open incident incident holds, which the
// ledger recorded held.
type heldObject struct {
	loc      Location
	incident string
}

// recordedHolds reads in tx up to maxHoldsRead objects open incidents hold
// that the ledger recorded held, and up to maxHoldsRead objects queued for
// deletion that it recorded released (those in use again aside).
func recordedHolds(tx Tx) ([]heldObject, []Location, error) {
	var want []heldObject
	for token := ""; len(want) < maxHoldsRead; {
		incs, next, err := incidentPage(tx, 1000, token)
		if err != nil {
			return nil, nil, err
		}
		if want, err = appendHeld(tx, want, incs); err != nil {
			return nil, nil, err
		}
		if token = next; token == "" {
			break
		}
	}
	all, err := tx.Deletions(maxHoldsRead)
	if err != nil {
		return nil, nil, err
	}
	var queued []Location
	for _, loc := range all {
		// One in use again (a snapshot named by a new row, held for its
		// incident) leaves the queue at the next sweep.
		inUse, err := backInUse(tx, loc)
		if err != nil {
			return nil, nil, err
		}
		if !inUse && !loc.LegalHold {
			queued = append(queued, loc)
		}
	}
	return want, queued, nil
}

// appendHeld appends to want, up to maxHoldsRead in all, the objects the
// open incidents among incs hold that the ledger recorded held.
func appendHeld(tx Tx, want []heldObject, incs []*IncidentRecord) ([]heldObject, error) {
	for _, inc := range incs {
		if !inc.Open() {
			continue
		}
		for _, key := range inc.Held {
			loc, err := tx.Object(key)
			switch {
			case errors.Is(err, ErrNotFound):
			case err != nil:
				return nil, err
			case loc.LegalHold && len(want) < maxHoldsRead:
				want = append(want, heldObject{loc, inc.ID})
			}
		}
	}
	return want, nil
}

// evidenceLeafKeys are the leaf's values recomputed from the row's
// evidence bundle, not from the row: the hashes of the receipt, the
// request JWT and the delegation token.
var evidenceLeafKeys = []string{"receipt", "request", "token"}

// leafDiff names the values that differ between a stored leaf and the leaf
// recomputed from the row store, "" when they agree; values named in skip
// are not compared.
//
// The stored leaf is read as its lines, not only as its values: values
// read last-wins can agree with the row's while the bytes the log commits
// to differ, as in a leaf that repeats a line (a "status refused" before
// the row's own "status authorized") or holds its lines in another order.
// The ledger writes each line once, in one order, so such a leaf was not
// the ledger's, and a reader taking the first of two lines reads another
// row in it.
func leafDiff(stored, recomputed []byte, skip []string) string {
	if bytes.Equal(stored, recomputed) {
		return ""
	}
	sNames, s, ok1 := leafFields(stored)
	rNames, r, ok2 := leafFields(recomputed)
	if !ok1 || !ok2 {
		return "the stored leaf is not a leaf of this version"
	}
	names := map[string]bool{}
	for k := range s {
		names[k] = true
	}
	for k := range r {
		names[k] = true
	}
	var diffs []string
	for k := range names {
		if s[k] != r[k] && !slices.Contains(skip, k) {
			where := "the row store"
			if slices.Contains(evidenceLeafKeys, k) {
				where = "the stored evidence"
			}
			diffs = append(diffs, fmt.Sprintf("%s is %q in %s, %q in the leaf", k, r[k], where, s[k]))
		}
	}
	sort.Strings(diffs)
	// A line left out or added is named above; the lines both hold must
	// be there once each, in the row's order. With no value differing,
	// only a skipped value may tell the bytes apart.
	both := func(ns []string, other map[string]string) []string {
		return slices.DeleteFunc(slices.Clone(ns), func(n string) bool { _, ok := other[n]; return !ok })
	}
	if !slices.Equal(both(sNames, r), both(rNames, s)) || len(diffs) == 0 && !bytes.Equal(masked(stored, skip), masked(recomputed, skip)) {
		diffs = append(diffs, "the leaf's lines differ from the row's (a repeated or reordered line)")
	}
	return strings.Join(diffs, "; ")
}

// leafFields reads a leaf of this version as the names of its lines, in
// order, and its values, the last of a name repeated; false when it is
// not such a leaf. Only leafDiff reads a leaf so, to name how it differs:
// every other reader refuses a repeated name (ParseLeaf).
func leafFields(data []byte) ([]string, map[string]string, bool) {
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 2 || lines[0] != LeafVersion {
		return nil, nil, false
	}
	var names []string
	values := map[string]string{}
	for _, ln := range lines[1:] {
		name, value, ok := strings.Cut(ln, " ")
		if !ok {
			return nil, nil, false
		}
		names = append(names, name)
		values[name] = value
	}
	return names, values, true
}

// masked is a leaf with the values of the lines named in skip left out.
func masked(data []byte, skip []string) []byte {
	if len(skip) == 0 {
		return data
	}
	lines := strings.Split(string(data), "\n")
	for i, ln := range lines {
		if name, _, ok := strings.Cut(ln, " "); ok && slices.Contains(skip, name) {
			lines[i] = name
		}
	}
	return []byte(strings.Join(lines, "\n"))
}

// cut returns an object's bytes, cut out of its segment where it was packed.
func cut(b []byte, loc Location) ([]byte, error) {
	if loc.Length == 0 {
		return b, nil
	}
	end := int(loc.Offset) + int(loc.Length)
	if end > len(b) {
		return nil, fmt.Errorf("segment %s is shorter than the row's bytes at %d+%d", loc.Key, loc.Offset, loc.Length)
	}
	return b[loc.Offset:end], nil
}

// RestoreEvidence puts a row's evidence back into the row store from its
// write-once copy, when that copy still hashes to the write-time hash and
// the row store holds other bytes. It reports whether the stored evidence
// changed.
func (l *Ledger) RestoreEvidence(ctx context.Context, id string) (bool, *Row, error) {
	row, err := l.Get(ctx, id)
	if err != nil {
		return false, nil, err
	}
	orig, err := l.WriteOnceCopy(ctx, EvidenceKey(id))
	if err != nil {
		return false, nil, fmt.Errorf("restore %s: %w", id, err)
	}
	if sha256Hex(orig) != row.EvidenceSHA256 {
		return false, nil, fmt.Errorf("restore %s: %w: the write-once copy does not match the write-time hash either", id, ErrInvalid)
	}
	changed := false
	err = l.store.Update(ctx, func(tx Tx) error {
		// The row first (locked where the store locks what a write
		// reads): a sweep removing it has ended, and it is expired, or it
		// waits for this transaction and removes the bundle restored.
		if _, err := tx.Row(id); errors.Is(err, ErrNotFound) {
			if err := sweptRow(tx, id); err != nil {
				return err
			}
			return err
		} else if err != nil {
			return err
		}
		cur, err := tx.Evidence(id)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		// No bundle: the row store dropped it once the write-once copy was
		// recorded, and reads take that copy. Nothing to restore.
		changed = cur != nil && sha256Hex(cur) != row.EvidenceSHA256
		if !changed {
			return nil
		}
		return tx.PutEvidence(id, orig)
	})
	if err != nil {
		return false, nil, fmt.Errorf("restore %s: %w", id, err)
	}
	if changed {
		l.cfg.Logger.WarnContext(ctx, "evidence restored from the write-once copy", "row", id)
	}
	return changed, row, nil
}

// RowLeafDiff compares row id, as the row store holds it now (with its
// stored evidence), with the row's leaf in the Merkle log: it returns the
// leaf's index and the values that differ, "" when they agree. A row
// rewritten after its leaf was logged (its status, class, duplicate, grant
// or evidence) differs. It returns ErrNoLog without a log and ErrNotLogged
// for a row not yet in a signed checkpoint.
func (l *Ledger) RowLeafDiff(ctx context.Context, id string) (int64, string, error) {
	if l.log == nil {
		return 0, "", ErrNoLog
	}
	if err := checkID(id); err != nil {
		return 0, "", err
	}
	var (
		r    *Row
		idx  int64
		data []byte
	)
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		if r, err = row(tx, id); err != nil {
			return err
		}
		lf, err := l.signedLeaf(ctx, tx, id, false)
		switch {
		case errors.Is(err, ErrNotFound):
			return fmt.Errorf("%w: %s", ErrNotLogged, id)
		case err != nil:
			return err
		}
		idx, data = lf.idx, lf.data
		return nil
	})
	if err != nil {
		return 0, "", err
	}
	var ev *Evidence
	var skip []string
	if r.EvidenceNotKept == "" {
		v, err := l.Evidence(ctx, id)
		if err != nil {
			return idx, "", err
		}
		ev = &v.Evidence
	} else {
		// Not kept (read-only class): the token hashes cannot be
		// recomputed from the row store. Only a read-only receipt,
		// logged as one, keeps none.
		skip = evidenceLeafKeys
		leaf, err := ParseLeaf(data)
		if err != nil {
			leaf = map[string]string{}
		}
		if p := notKeptProblem(r, leaf, idx); p != "" {
			if d := leafDiff(data, rowLeaf(r, nil), skip); d != "" {
				p += "; " + d
			}
			return idx, p, nil
		}
	}
	return idx, leafDiff(data, rowLeaf(r, ev), skip), nil
}

// The row's fields, read again from its evidence.
//
// A row's evidence fields (its principal, grant, brand, agent, actions
// with their targets and args hashes, scopes, limits, issued-at) are what
// the write path took from the tokens and actions it kept in the row's
// evidence bundle. Neither the evidence hash nor the row's leaf holds
// them, so an edit of the row alone leaves both intact: VerifyRow and
// CheckIntegrity read the fields from the evidence again, the way the
// write path did (newReceiptRow over the verifier's reading of the
// tokens), and compare. A row without kept evidence (the read-only
// class) has nothing to read them from.

// editedRow ends the words of a row whose fields differ from its evidence.
const editedRow = "the row was edited after it was written"

// statusEdited says how receipt row r's status differs from the one its
// write-time checks give (statusOf), or "" when it does not: the status
// is set from them once, when the row is written, and never changes.
// Refusals are recorded UNAUTHORIZED whatever their checks.
func statusEdited(r *Row) string {
	if r.Kind == KindRefusal {
		return ""
	}
	want := statusOf(r.Verifier)
	if r.Status == want || (want == Incident && r.Status == Duplicate && r.Verifier.DuplicateOf != "") {
		// A repeat that failed a check of rule 2 is an INCIDENT when it
		// opened its receipt's incident, else a DUPLICATE (firstIncident).
		return ""
	}
	return fmt.Sprintf("the row's status is %s; its write-time checks give %s: %s", r.Status, want, editedRow)
}

// disputeEdited says, when row r's dispute status is not the one its
// events give (Row.DisputeState), that the row was edited; "" when it
// is. A row written before it had any dispute holds none or DisputeNone.
func disputeEdited(r *Row) string {
	held := r.Dispute
	if held == 0 {
		held = DisputeNone
	}
	if want := r.DisputeState(); held != want {
		return fmt.Sprintf("the row's dispute status is %s; its dispute events give %s: %s", held, want, editedRow)
	}
	return ""
}

// noKeys is a key source that holds no keys: a verifier asked against it
// checks no signature (each check fails before any is tried) and reads
// the tokens' claims as it does on the write path.
type noKeys struct{}

var errFieldsOnly = errors.New("no keys: the row's fields are read from its evidence, no signature is checked")

func (noKeys) Brand(context.Context, string, bool) (verifier.Signer, error) {
	return verifier.Signer{}, errFieldsOnly
}

func (noKeys) Agent(context.Context, string, bool) (verifier.Signer, error) {
	return verifier.Signer{}, errFieldsOnly
}

// fieldsReader reads a bundle's tokens for their fields (with noKeys): a
// verifier of its own, without the signature cache, so that a check of
// every row neither counts in the cache's metrics nor reorders it.
var fieldsReader = func() *verifier.Verifier {
	v, err := verifier.New(verifier.Config{Audience: "pactledger: fields only"})
	if err != nil {
		panic(err)
	}
	return v
}()

// fromEvidence is row r as the write path built it from its evidence ev
// as written (its bundle hashing to evSHA, the write-time hash; nil when
// it does not decode). A receipt row is built by newReceiptRow from what
// the verifier reads of ev's tokens and actions: res when set
// (VerifyRow's re-run of the checks, with the key ids and the grant's
// expiry it gives), else the claims read with no signature checked. A
// refusal row is built as AppendRefusal builds it; whether its delegation
// token vouched for its grant is the word of the row's write-time checks
// (VerifyRow tells a re-run that differs from them).
func fromEvidence(ctx context.Context, r *Row, ev *Evidence, evSHA string, res *verifier.Result) (*Row, error) {
	if ev == nil {
		return nil, errors.New("its evidence is not readable")
	}
	if ev.Refusal != nil {
		return refusalFromEvidence(ctx, ev.Refusal, evSHA, r.Verifier.Checks)
	}
	in := ReceiptInput{ReceiptJWS: ev.ReceiptJWS, RequestJWT: ev.RequestJWT, DelegationToken: ev.DelegationToken, Actions: ev.Actions, Limits: ev.Limits}
	p := verifier.Parse(in.verifierInput())
	rc, err := p.Receipt()
	if err != nil {
		return nil, fmt.Errorf("the receipt in its evidence does not parse: %v", err)
	}
	if res == nil {
		if res, err = fieldsReader.VerifyParsed(ctx, p, noKeys{}); err != nil {
			return nil, fmt.Errorf("the receipt in its evidence cannot be read: %v", err)
		}
	}
	// The ids as AppendReceipt gives them: the receipt's and the request
	// JWT's hashes as posted (the bundle keeps them so).
	return receiptRowOf(rc, res, in, sha256Hex([]byte(ev.ReceiptJWS)), evSHA, sha256Hex([]byte(ev.RequestJWT))), nil
}

// refusalFromEvidence is the row AppendRefusal builds from refusal record
// in, whose bundle hashes to id: the claimed principal and agent (the
// request JWT's iss before it), the action, observedAt, and, when its
// delegation token vouched (checks: delegation_token passed, bindings did
// not fail; underGrant), the token's grant, brand, subject, scopes and
// expiry. It repeats what AppendRefusal and underGrant set (they build
// the row inside the write's transaction); a refusal of each shape in
// TestUntouchedRowsAgreeWithTheirEvidence holds the two together.
func refusalFromEvidence(ctx context.Context, in *RefusalInput, id string, checks []verifier.Check) (*Row, error) {
	agent, kid := refusalAgent(in)
	d := newRefusalRow(in, id, agent, kid)
	if in.DelegationToken == "" {
		return d, nil
	}
	tok, err := fieldsReader.VerifyRefusalToken(ctx, verifier.ParseToken(in.DelegationToken), verifier.ParseToken(in.RequestJWT), in.ObservedAt, noKeys{})
	if err != nil {
		return nil, fmt.Errorf("the delegation token in its evidence cannot be read: %v", err)
	}
	for _, c := range checks {
		switch c.Name {
		case verifier.CheckDelegationToken:
			tok.Token = c
		case verifier.CheckBindings:
			tok.Bindings = c
		}
	}
	if !holdable(tok).Vouches() {
		return d, nil
	}
	vouchedFields(d, tok)
	return d, nil
}

// StrictTargetsFrom is when the ledger began to read signed args
// strictly for a target (verifier.NamesTarget: a string value, in args
// no two decoders read differently). A row recorded before it may hold
// TARGET_SOURCE_SIGNED_ARGS where the reading before gave it
// (verifier.NamesTargetAsBefore), and VerifyRow and CheckIntegrity find
// that as written; a row recorded from it may not. The row's recorded
// time is in its leaf of the Merkle log, so moving it is found there.
var StrictTargetsFrom = time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)

// fieldDiffs says, one a field, where stored row r differs from d, the
// row its evidence gives (fromEvidence). signed says d was built from a
// re-run of the signature checks: a receipt row's key ids and grant
// expiry, which only a signature check gives, are compared too.
// namedBefore(i, target) says the signed args of the evidence's action i
// name target as the ledger read them before it held ambiguous args and
// numbers to name nothing (verifier.NamesTargetAsBefore).
func fieldDiffs(r, d *Row, signed bool, namedBefore func(i int, target string) bool) []string {
	var out []string
	differs := func(name, row, ev string) {
		if row != ev {
			out = append(out, fmt.Sprintf("the row's %s is %s; its evidence says %s", name, shown(row), shown(ev)))
		}
	}
	list := func(name string, row, ev []string) {
		if !slices.Equal(row, ev) {
			differs(name, strings.Join(row, " "), strings.Join(ev, " "))
		}
	}
	if r.Kind != d.Kind {
		what := map[Kind]string{KindReceipt: "a receipt", KindRefusal: "a refusal"}
		out = append(out, fmt.Sprintf("the row is %s; its evidence is %s's", orWord(what[r.Kind], "of no kind"), what[d.Kind]))
		return out
	}
	differs("receipt id", r.ReceiptID, d.ReceiptID)
	differs("principal", r.Principal, d.Principal)
	differs("grant id", r.GrantID, d.GrantID)
	differs("brand", r.Brand, d.Brand)
	differs("agent platform", r.Agent.Platform, d.Agent.Platform)
	list("scopes granted", r.ScopeGranted, d.ScopeGranted)
	list("scopes used", r.ScopesUsed, d.ScopesUsed)
	if !r.IssuedAt.Equal(d.IssuedAt) {
		differs("issued-at", stamp(r.IssuedAt), stamp(d.IssuedAt))
	}
	differs("request JWT hash", r.RequestJWTSHA256, d.RequestJWTSHA256)
	differs("amountMax limit", r.Limits.AmountMax, d.Limits.AmountMax)
	differs("countMax limit", strconv.Itoa(r.Limits.CountMax), strconv.Itoa(d.Limits.CountMax))
	if (signed || d.Kind == KindRefusal) && !r.Limits.GrantExpires.Equal(d.Limits.GrantExpires) {
		differs("grant expiry", stampOrNone(r.Limits.GrantExpires), stampOrNone(d.Limits.GrantExpires))
	}
	if signed && d.Kind == KindReceipt {
		differs("brand key id", r.BrandKey.Kid, d.BrandKey.Kid)
		differs("request JWT key id", r.Agent.RequestJWTKid, d.Agent.RequestJWTKid)
	}
	if d.Refusal != nil {
		var rf Refusal
		if r.Refusal != nil {
			rf = *r.Refusal
		}
		differs("claimed principal", rf.ClaimedPrincipal, d.Refusal.ClaimedPrincipal)
		differs("claimed agent", rf.ClaimedAgent, d.Refusal.ClaimedAgent)
		differs("refusal reason", rf.Reason, d.Refusal.Reason)
	}
	if len(r.Actions) != len(d.Actions) {
		out = append(out, fmt.Sprintf("the row records %s; its evidence says %d", plural(len(r.Actions), "action"), len(d.Actions)))
		return out
	}
	for i, a := range r.Actions {
		e := d.Actions[i]
		of := e.Tool
		if slices.IndexFunc(d.Actions, func(o verifier.RowAction) bool { return o.Tool == e.Tool }) != i ||
			slices.IndexFunc(d.Actions[i+1:], func(o verifier.RowAction) bool { return o.Tool == e.Tool }) >= 0 {
			of = fmt.Sprintf("%s (action %d)", e.Tool, i+1)
		}
		if a.Tool != e.Tool {
			differs(fmt.Sprintf("tool of action %d", i+1), a.Tool, e.Tool)
			continue
		}
		differs("target of "+of, a.Target, e.Target)
		differs("args hash of "+of, a.ArgsHash, e.ArgsHash)
		if a.HashSource != e.HashSource {
			differs("args hash source of "+of, hashSource(a.HashSource), hashSource(e.HashSource))
		}
		// A row written before the write path recorded where a target
		// comes from has none, and nothing to compare: readers work it out
		// from the evidence (the dispute drill) or say it is not recorded.
		// A row recorded while the signed args vouched for any value equal
		// to the target (a number, args holding a key twice or trailing
		// bytes) holds the signed args' word where that reading gave it:
		// as written, not edited, so it is read as then. An edit to the
		// signed args' word that the args never gave is still found, as
		// is one to the action log's word.
		// Only a row recorded before the stricter reading can hold it
		// (its recorded time is in its leaf): on a row recorded since, it
		// is an edit that makes the drill trust the target.
		asBefore := r.RecordedAt.Before(StrictTargetsFrom) && namedBefore(i, e.Target)
		if a.TargetSource != verifier.TargetNotRecorded && a.TargetSource != e.TargetSource &&
			!(a.TargetSource == verifier.TargetFromSignedArgs && e.TargetSource == verifier.TargetFromWriter && asBefore) {
			differs("target source of "+of, targetSource(a.TargetSource), targetSource(e.TargetSource))
		}
	}
	return out
}

// maxShown bounds a field's value quoted in a difference.
const maxShown = 160

// shown is a field's value in a difference: quoted when it is empty or
// holds spaces or characters that are not printable, cut past maxShown
// bytes.
func shown(v string) string {
	if v == "" {
		return "empty"
	}
	if len(v) > maxShown {
		cut := maxShown
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut] + "…"
	}
	if q := strconv.Quote(v); q[1:len(q)-1] != v || strings.ContainsAny(v, " ;") {
		return q
	}
	return v
}

func orWord(v, none string) string {
	if v == "" {
		return none
	}
	return v
}

func stampOrNone(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return stamp(t)
}

func hashSource(s verifier.HashSource) string {
	switch s {
	case verifier.HashFromReceipt:
		return "the receipt"
	case verifier.HashComputedByLedger:
		return "computed by the ledger"
	}
	return "none"
}

func targetSource(s verifier.TargetSource) string {
	switch s {
	case verifier.TargetFromSignedArgs:
		return "the signed args"
	case verifier.TargetFromWriter:
		return "the action log alone"
	}
	return "none"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// notKeptFields says, beside a read-only row's skipped checks, what no
// evidence leaves unchecked.
const notKeptFields = "the row's fields cannot be compared with its evidence (its principal, targets and args hashes are as the row store holds them)"

// edited records the differences between the row's fields and its
// evidence (editedFields).
func (rv *Reverification) edited(diffs []string) {
	for _, d := range diffs {
		rv.Same = false
		rv.Differences = append(rv.Differences, d)
		rv.Edited = append(rv.Edited, d)
	}
}

// editedFields lists where row r's fields differ from those its evidence
// ev (as written: hashing to evSHA, the write-time hash) gives, one a
// field, each ending in editedRow; res is fromEvidence's. Evidence the
// fields cannot be read from is one difference, saying why: the evidence
// is as written, so that proves no edit (a version that read tokens more
// leniently may have written it).
func editedFields(ctx context.Context, r *Row, ev *Evidence, evSHA string, res *verifier.Result) []string {
	d, err := fromEvidence(ctx, r, ev, evSHA, res)
	if err != nil {
		return []string{"the row's fields cannot be compared with its evidence: " + err.Error() +
			"; the evidence hashes to its write-time hash, so it is as written and this alone shows no edit: a person must check the row against it"}
	}
	diffs := fieldDiffs(r, d, res != nil, func(i int, target string) bool {
		if ev.Refusal != nil {
			return false
		}
		rc, _, err := verifier.ParseReceipt(ev.ReceiptJWS)
		if err != nil {
			return false
		}
		args := verifier.SignedArgs(rc.Actions, ev.Actions)
		return i < len(args) && args[i] != "" && verifier.NamesTargetAsBefore(args[i], target)
	})
	for i := range diffs {
		diffs[i] += ": " + editedRow
	}
	return diffs
}

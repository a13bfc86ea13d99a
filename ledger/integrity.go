package ledger

import (
	"context"
	"errors"
	"fmt"
)

// Finding is one row whose evidence is not as it was written.
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
	Findings      []Finding
	Next          string
}

// CheckIntegrity walks up to pageSize rows in id order after token and, for
// each, recomputes the hash of the evidence kept in the row store and of its
// write-once copy and compares both with the write-time evidence hash.
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
	type item struct {
		row    *Row
		bundle []byte
		loc    Location
		hasLoc bool
	}
	var items []item
	page := &IntegrityPage{}
	err := l.store.View(ctx, func(tx Tx) error {
		rows, next, err := tx.RowsByID(token, pageSize)
		if err != nil {
			return err
		}
		page.Next = next
		for _, r := range rows {
			it := item{row: r}
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
	objects := map[string][]byte{} // segment objects, fetched once per page
	for _, it := range items {
		r := it.row
		page.RowsChecked++
		if r.EvidenceNotKept != "" {
			continue // nothing kept to compare (read-only class)
		}
		var problems []string
		storeOK := it.bundle != nil && sha256Hex(it.bundle) == r.EvidenceSHA256
		switch {
		case it.bundle == nil:
			problems = append(problems, "the row store holds no evidence for it")
		case !storeOK:
			problems = append(problems, fmt.Sprintf("the row store's evidence hashes to %s, not the write-time %s", sha256Hex(it.bundle), r.EvidenceSHA256))
		}
		wormOK := false
		if !it.hasLoc {
			page.PendingUpload++
		} else {
			page.WormCompared++
			b, ok := objects[it.loc.Key]
			if !ok {
				var err error
				if b, err = l.objects.Get(ctx, it.loc.Key); err != nil {
					problems = append(problems, fmt.Sprintf("the write-once copy %s cannot be read: %v", it.loc.Key, err))
				}
				objects[it.loc.Key] = b
			}
			if b != nil {
				copyBytes, err := cut(b, it.loc)
				switch {
				case err != nil:
					problems = append(problems, err.Error())
				case sha256Hex(copyBytes) != r.EvidenceSHA256:
					problems = append(problems, fmt.Sprintf("the write-once copy %s hashes to %s, not the write-time %s", it.loc.Key, sha256Hex(copyBytes), r.EvidenceSHA256))
				default:
					wormOK = true
				}
			}
		}
		if len(problems) > 0 {
			f := Finding{RowID: r.ID, Restorable: !storeOK && wormOK}
			for i, p := range problems {
				if i > 0 {
					f.Problem += "; "
				}
				f.Problem += p
			}
			page.Findings = append(page.Findings, f)
		}
	}
	return page, nil
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
// write-once copy, when that copy still hashes to the write-time hash. It
// reports whether the stored evidence changed.
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
		cur, err := tx.Evidence(id)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		changed = cur == nil || sha256Hex(cur) != row.EvidenceSHA256
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

package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pactledger/pactledger/internal/retry"
)

// UploaderConfig tunes RunUploader. The zero value is the default.
type UploaderConfig struct {
	// Batch is how many outbox entries one round takes; default 512.
	Batch int
	// Workers is how many uploads run at once; default 8.
	Workers int
	// Idle is how long to wait for new rows when the outbox is empty; default 1 s.
	Idle time.Duration
	// MaxBackoff caps the wait after a failed round; default 30 s.
	MaxBackoff time.Duration
}

// MaxSegmentBytes caps one evidence segment object.
const MaxSegmentBytes = 32 << 20

// MinRetention is the retention an object gets when its own retain-until is
// already past (or due within seconds): S3 refuses a retain-until in the
// past, which a receipt posted after its class's period (or an incident
// opened long after the action) would otherwise ask for.
const MinRetention = 24 * time.Hour

// RunUploader drains the outbox into evidence storage until ctx is done.
// Each round packs the row bundles due the same UTC day into one segment
// object (retained until the end of that day), puts JWKS snapshots and
// incident evidence as objects of their own, then removes the entries from
// the outbox together with their recorded locations. Failures are retried
// with exponential backoff; nothing leaves the outbox before the store has
// it.
func (l *Ledger) RunUploader(ctx context.Context, cfg UploaderConfig) error {
	if cfg.Batch <= 0 {
		cfg.Batch = 512
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	retry.Drain(ctx, retry.Config{Idle: cfg.Idle, MaxBackoff: cfg.MaxBackoff}, l.notify,
		func(ctx context.Context) (int, error) { return l.UploadRound(ctx, cfg.Batch, cfg.Workers) },
		func(err error, wait time.Duration) {
			l.cfg.Logger.WarnContext(ctx, "evidence upload failed; will retry", slog.String("error", err.Error()), slog.Duration("retry_in", wait))
		})
	return nil
}

// upload is one object to put: a single entry, or a segment of entries.
type upload struct {
	key     string
	retain  time.Time
	entries []OutboxEntry
	bodies  [][]byte
	segment bool
}

// segmentEnd is the retain-until of a segment holding objects due at t:
// the end of t's span (a UTC day by default).
func segmentEnd(t time.Time, span time.Duration) time.Time {
	d := t.UTC().Truncate(span)
	if d.Equal(t.UTC()) {
		return d
	}
	return d.Add(span)
}

// SegmentKey is the object key of the segment holding outbox entries
// first..last that are due on day.
func SegmentKey(day time.Time, first, last uint64) string {
	name := day.UTC().Format("2006-01-02")
	if !day.Equal(day.Truncate(24 * time.Hour)) {
		name = day.UTC().Format("2006-01-02T150405Z")
	}
	return "segments/" + name + "/" + strconv.FormatUint(first, 10) + "-" + strconv.FormatUint(last, 10) + ".seg"
}

// segmentHeader starts every segment object. Each row follows as
// "<row id> <length>\n", its bundle bytes, and "\n".
const segmentHeader = "pactledger-segment v1\n"

// UploadRound uploads up to batch outbox entries and returns how many left
// the outbox. It returns an error when any upload failed.
func (l *Ledger) UploadRound(ctx context.Context, batch, workers int) (int, error) {
	var entries []OutboxEntry
	var depth int
	bodies := map[uint64][]byte{}
	locs := map[uint64]Location{} // for operations on stored objects
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		if entries, err = tx.Outbox(batch); err != nil {
			return err
		}
		if depth, err = tx.OutboxDepth(); err != nil {
			return err
		}
		// A round does either the puts at the head of the outbox or the
		// operations at its head, so an operation always finds its object
		// already stored.
		for i, e := range entries {
			if (e.Op != "") != (entries[0].Op != "") {
				entries = entries[:i]
				break
			}
			if e.Op != "" {
				loc, err := tx.Object(e.Key)
				if err != nil {
					return fmt.Errorf("outbox %s of %s: %w", e.Op, e.Key, err)
				}
				locs[e.Seq] = loc
				continue
			}
			b, err := entryBody(tx, e)
			if err != nil {
				return err
			}
			bodies[e.Seq] = b
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	l.cfg.Metrics.depth(depth)
	if len(entries) == 0 {
		return 0, nil
	}
	if entries[0].Op != "" {
		return l.operate(ctx, entries, locs, depth)
	}
	now := l.cfg.Now()
	for i := range entries {
		if entries[i].RetainUntil.Before(now.Add(5 * time.Second)) {
			entries[i].RetainUntil = now.Add(MinRetention)
		}
	}
	ups := plan(entries, bodies, l.cfg.SegmentSpan)

	type done struct {
		e   OutboxEntry
		loc Location
	}
	var (
		mu       sync.Mutex
		finished []done
		errs     []error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, workers)
	)
	for _, u := range ups {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			locs, err := l.put(ctx, u)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for i, e := range u.entries {
				finished = append(finished, done{e, locs[i]})
			}
		}()
	}
	wg.Wait()
	if len(finished) > 0 {
		err := l.store.Update(ctx, func(tx Tx) error {
			for _, d := range finished {
				if err := tx.Uploaded(d.e, d.loc); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("record uploads: %w", err)
		}
	}
	l.cfg.Metrics.uploaded("ok", len(finished))
	l.cfg.Metrics.uploaded("error", len(entries)-len(finished))
	l.cfg.Metrics.depth(depth - len(finished))
	return len(finished), errors.Join(errs...)
}

// operate applies legal holds, releases and retention extensions to stored
// objects, in outbox order, and records each in the object's location.
func (l *Ledger) operate(ctx context.Context, entries []OutboxEntry, locs map[uint64]Location, depth int) (int, error) {
	var done []OutboxEntry
	var doneLocs []Location
	var opErr error
	current := map[string]Location{} // each object's location as the round changes it
	for _, e := range entries {
		loc, ok := current[e.Key]
		if !ok {
			loc = locs[e.Seq]
		}
		var err error
		switch e.Op {
		case OpHold, OpRelease:
			if err = l.objects.SetLegalHold(ctx, loc, e.Op == OpHold); err == nil {
				loc.LegalHold = e.Op == OpHold
			}
		case OpExtend:
			if err = l.objects.ExtendRetention(ctx, loc, e.RetainUntil); err == nil && e.RetainUntil.After(loc.RetainUntil) {
				loc.RetainUntil = e.RetainUntil
			}
		default:
			err = fmt.Errorf("outbox entry %d: unknown operation %q", e.Seq, e.Op)
		}
		if err != nil {
			opErr = fmt.Errorf("%s %s: %w", e.Op, e.Key, err)
			break // keep the order: later operations wait for this one
		}
		current[e.Key] = loc
		for i := range done {
			if done[i].Key == e.Key {
				doneLocs[i] = loc
			}
		}
		done = append(done, e)
		doneLocs = append(doneLocs, loc)
	}
	if len(done) > 0 {
		err := l.store.Update(ctx, func(tx Tx) error {
			for i, e := range done {
				if err := tx.Uploaded(e, doneLocs[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("record object operations: %w", err)
		}
	}
	l.cfg.Metrics.depth(depth - len(done))
	return len(done), opErr
}

func entryBody(tx Tx, e OutboxEntry) ([]byte, error) {
	switch e.Kind {
	case ObjectEvidence:
		return tx.Evidence(e.Ref)
	case ObjectJWKS:
		s, err := tx.Snapshot(e.Ref)
		return s.Body, err
	case ObjectDrill:
		return tx.Drill(e.Ref)
	}
	return nil, fmt.Errorf("outbox entry %d: unknown kind %q", e.Seq, e.Kind)
}

// plan groups packable entries by retention day into segments of at most
// MaxSegmentBytes; the rest are single objects.
func plan(entries []OutboxEntry, bodies map[uint64][]byte, span time.Duration) []*upload {
	var ups []*upload
	open := map[time.Time]*upload{}
	size := map[*upload]int{}
	for _, e := range entries {
		b := bodies[e.Seq]
		if !e.Segment {
			ups = append(ups, &upload{key: e.Key, retain: e.RetainUntil, entries: []OutboxEntry{e}, bodies: [][]byte{b}})
			continue
		}
		day := segmentEnd(e.RetainUntil, span)
		u := open[day]
		if u == nil || size[u]+len(b) > MaxSegmentBytes {
			u = &upload{retain: day, segment: true}
			open[day] = u
			ups = append(ups, u)
		}
		u.entries = append(u.entries, e)
		u.bodies = append(u.bodies, b)
		size[u] += len(b) + 100
	}
	for _, u := range ups {
		if u.segment {
			u.key = SegmentKey(u.retain, u.entries[0].Seq, u.entries[len(u.entries)-1].Seq)
		}
	}
	return ups
}

// put writes one upload and returns the location of each of its entries.
func (l *Ledger) put(ctx context.Context, u *upload) ([]Location, error) {
	if !u.segment {
		loc, err := l.objects.Put(ctx, u.key, u.bodies[0], u.retain)
		if err != nil {
			return nil, fmt.Errorf("put %s: %w", u.key, err)
		}
		if u.entries[0].Hold {
			if err := l.objects.SetLegalHold(ctx, loc, true); err != nil {
				return nil, fmt.Errorf("hold %s: %w", u.key, err)
			}
			loc.LegalHold = true
		}
		loc.Uploaded = true
		return []Location{loc}, nil
	}
	var buf bytes.Buffer
	buf.WriteString(segmentHeader)
	locs := make([]Location, len(u.entries))
	for i, e := range u.entries {
		fmt.Fprintf(&buf, "%s %d\n", e.Ref, len(u.bodies[i]))
		locs[i] = Location{Offset: uint32(buf.Len()), Length: uint32(len(u.bodies[i]))}
		buf.Write(u.bodies[i])
		buf.WriteByte('\n')
	}
	loc, err := l.objects.Put(ctx, u.key, buf.Bytes(), u.retain)
	if err != nil {
		return nil, fmt.Errorf("put segment %s: %w", u.key, err)
	}
	for i := range locs {
		off, n := locs[i].Offset, locs[i].Length
		locs[i] = loc
		locs[i].Offset, locs[i].Length, locs[i].Uploaded = off, n, true
	}
	return locs, nil
}

// OutboxDepth returns the number of objects waiting for evidence storage.
func (l *Ledger) OutboxDepth(ctx context.Context) (int, error) {
	var n int
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		n, err = tx.OutboxDepth()
		return err
	})
	return n, err
}

// Ready reports whether the row store and evidence storage answer.
func (l *Ledger) Ready(ctx context.Context) error {
	if _, err := l.OutboxDepth(ctx); err != nil {
		return fmt.Errorf("row store: %w", err)
	}
	if err := l.objects.Ping(ctx); err != nil {
		return errors.Join(ErrUnavailable, fmt.Errorf("evidence store: %w", err))
	}
	return nil
}

// WriteOnceCopy returns the bytes of an object (a row's evidence bundle,
// named by EvidenceKey, or a snapshot, by SnapshotKey) as the write-once
// store holds them, cut out of its segment where it was packed in one.
// It returns an error wrapping ErrNotFound while the object waits in the
// outbox.
func (l *Ledger) WriteOnceCopy(ctx context.Context, key string) ([]byte, error) {
	var loc Location
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		loc, err = tx.Object(key)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("object %s is not in write-once storage (still in the outbox, or unknown): %w", key, err)
	}
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", key, err)
	}
	b, err := l.objects.Get(ctx, loc.Key)
	if err != nil {
		return nil, err
	}
	if loc.Length > 0 && !bytes.HasPrefix(b, []byte(segmentHeader)) {
		return nil, fmt.Errorf("object %s is not a segment", loc.Key)
	}
	part, err := cut(b, loc)
	return slices.Clone(part), err
}

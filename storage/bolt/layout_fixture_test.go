package bolt_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// This file is the same in the version that wrote testdata/layout1.db:
// populateFixture writes the records the layout test compares, through
// the store's own interface, so a layout-1 file and a layout-2 file hold
// the same thing.

// fixtureID is a 64-hex id made from s.
func fixtureID(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// fixtureRows are n rows over a few principals, grants, agents, targets,
// statuses and classes, with times that tie in pairs.
func fixtureRows(n int) []*ledger.Row {
	base := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	snaps := []string{fixtureID("snap-a"), fixtureID("snap-b"), fixtureID("snap-c")}
	var out []*ledger.Row
	for i := range n {
		r := &ledger.Row{
			ID:               fixtureID(fmt.Sprint("row ", i)),
			Kind:             ledger.KindReceipt,
			Status:           []ledger.Status{ledger.Authorized, ledger.Authorized, ledger.Incident, ledger.Unauthorized}[i%4],
			Class:            []retention.Class{retention.MoneyMoved, retention.ReadOnly, retention.AccountChanged}[i%3],
			GrantID:          fmt.Sprint("grant-", i%7),
			Principal:        fmt.Sprint("acct-", i%11),
			Agent:            ledger.Agent{Platform: fmt.Sprint("https://pa-", i%2, ".example"), JWKSSnapshot: snaps[i%3]},
			BrandKey:         ledger.BrandKey{Kid: "k1", JWKSSnapshot: snaps[(i+1)%3]},
			Actions:          []verifier.RowAction{{Tool: "cancel_order", Target: fmt.Sprint("A-", i%13)}},
			IssuedAt:         base.Add(time.Duration(i/2) * time.Second),
			RecordedAt:       base.Add(time.Duration(i) * time.Second),
			RetainUntil:      base.Add(time.Duration(24*(i%3+1)) * time.Hour),
			RequestJWTSHA256: fixtureID(fmt.Sprint("request ", i%(n-3))), // the last three reuse earlier request JWTs
			EvidenceSHA256:   fixtureID(fmt.Sprint("evidence ", i)),
			Dispute:          ledger.DisputeNone,
		}
		out = append(out, r)
	}
	return out
}

// populateFixture writes the fixture: rows and their request-JWT
// entries, snapshot links, evidence and object records, a swept row, a
// disputed row, a held row's new retention, leaves with their index, and
// refs that are not row ids.
func populateFixture(tx ledger.Tx) error {
	rows := fixtureRows(60)
	for _, r := range rows {
		if err := ledger.AddRow(tx, r); err != nil {
			return err
		}
		if err := tx.SetObject(ledger.EvidenceKey(r.ID), ledger.Location{Store: "s3", Bucket: "evidence", Key: "segments/2026-09-01/1.seg", Offset: 10, Length: 20, RetainUntil: r.RetainUntil, Uploaded: true}); err != nil {
			return err
		}
		if err := tx.QueueLeaf(r.ID, []byte("leaf of "+r.ID)); err != nil {
			return err
		}
	}
	for _, ref := range []string{"dispute/" + rows[4].ID + "/1", "incident/INC-1/close", "short ref"} {
		if err := tx.QueueLeaf(ref, []byte("leaf of "+ref)); err != nil {
			return err
		}
	}
	if err := tx.SetObject("segments/2026-09-01/1.seg", ledger.Location{Store: "s3", Bucket: "evidence", Key: "segments/2026-09-01/1.seg", VersionID: "v7", Uploaded: true}); err != nil {
		return err
	}
	if err := tx.SetObject(ledger.SnapshotKey(fixtureID("snap-a")), ledger.Location{Store: "s3", Bucket: "evidence", Key: ledger.SnapshotKey(fixtureID("snap-a")), Uploaded: true}); err != nil {
		return err
	}
	pending, err := tx.PendingLeaves(1000)
	if err != nil {
		return err
	}
	for i, p := range pending[:len(pending)-2] { // two stay queued
		if err := tx.SequenceLeaf(p, int64(i), int64(i), []tlog.Hash{tlog.RecordHash(p.Data)}); err != nil {
			return err
		}
	}
	if err := tx.UpdateDispute(rows[5].ID, ledger.DisputeOpen, []ledger.DisputeEvent{{Status: ledger.DisputeOpen, Note: "customer says no"}}); err != nil {
		return err
	}
	if err := tx.UpdateRetention(rows[6].ID, time.Time{}); err != nil { // held
		return err
	}
	if err := tx.UpdateRetention(rows[7].ID, rows[7].RetainUntil.Add(time.Hour)); err != nil {
		return err
	}
	swept := rows[8]
	return tx.RemoveRow(swept, ledger.Tombstone{ID: swept.ID, Kind: swept.Kind, Status: swept.Status, Class: swept.Class, SweptAt: swept.RetainUntil})
}

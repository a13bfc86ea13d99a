// Package tamper edits a bbolt row store behind the ledger's back, as a
// hostile operator with the file could: the edits the Merkle log's audit
// and fsck must catch. For tests only.
package tamper

import (
	"bytes"
	"encoding/json"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// DropRow deletes a row and its index entries, as an operator hiding a row
// would.
func DropRow(id string) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		if err := tx.Bucket([]byte("rows")).Delete([]byte(id)); err != nil {
			return err
		}
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			if !bytes.HasPrefix(name, []byte("ix_")) {
				return nil
			}
			var del [][]byte
			_ = b.ForEach(func(k, _ []byte) error {
				if bytes.HasSuffix(k, []byte(id)) {
					del = append(del, append([]byte(nil), k...))
				}
				return nil
			})
			for _, k := range del {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// ForgeRow inserts a row that was never written through the ledger: a
// copy of row id under another id, with its evidence and index entries.
func ForgeRow(id, forged string) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		var r ledger.Row
		if err := json.Unmarshal(tx.Bucket([]byte("rows")).Get([]byte(id)), &r); err != nil {
			return err
		}
		r.ID, r.ReceiptID = forged, "sha256:"+forged
		v, err := json.Marshal(&r)
		if err != nil {
			return err
		}
		if err := tx.Bucket([]byte("rows")).Put([]byte(forged), v); err != nil {
			return err
		}
		if ev := tx.Bucket([]byte("evidence")).Get([]byte(id)); ev != nil {
			if err := tx.Bucket([]byte("evidence")).Put([]byte(forged), append([]byte(nil), ev...)); err != nil {
				return err
			}
		}
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			if !bytes.HasPrefix(name, []byte("ix_")) || string(name) == "ix_expiry" {
				return nil
			}
			var add [][]byte
			_ = b.ForEach(func(k, _ []byte) error {
				if bytes.HasSuffix(k, []byte(id)) {
					add = append(add, append(bytes.TrimSuffix(append([]byte(nil), k...), []byte(id)), forged...))
				}
				return nil
			})
			for _, k := range add {
				if err := b.Put(k, nil); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// EditRow rewrites one stored row, indexes untouched. The result is put
// under the row's id after fn: an fn that changes the id inserts a copy.
func EditRow(id string, fn func(r *ledger.Row)) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("rows"))
		var r ledger.Row
		if err := json.Unmarshal(b.Get([]byte(id)), &r); err != nil {
			return err
		}
		fn(&r)
		v, err := json.Marshal(&r)
		if err != nil {
			return err
		}
		return b.Put([]byte(r.ID), v)
	}
}

// Package records is the record book one turn sees: a brand's records (its
// data or its source) with the changes stored over them, and the turn's
// own changes, held until the turn's reply commits and then applied only
// over what the turn saw. The business's data source is only read.
package records

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/pactledger/pactledger/pact/brand"
)

// Key names one record of a brand.
type Key struct{ Brand, Type, ID string }

// String is the key as the store keeps it: brand/type/id.
func (k Key) String() string { return k.Brand + "/" + k.Type + "/" + k.ID }

// Legacy is the key a record's status had before brands defined their
// record types: brand/id.
func (k Key) Legacy() string { return k.Brand + "/" + k.ID }

// Stored reads the fields stored over a record's data.
type Stored interface {
	// Fields returns the fields stored over the record k, or nil.
	Fields(k Key) (map[string]string, error)
}

// ErrChanged: another turn changed a field this turn changed too, since
// this turn read it.
var ErrChanged = errors.New("the record changed during the turn")

// Change is what a turn changed in one record: per field, the value in the
// brand's data, the value the turn saw, and the new value.
type Change struct {
	Default map[string]string
	From    map[string]string
	To      map[string]string
}

// Apply applies the change to cur, the fields stored over the record now
// (nil for none), and returns the fields to store. It refuses with
// ErrChanged when a field differs from what the turn saw.
func (c Change) Apply(cur map[string]string) (map[string]string, error) {
	out := maps.Clone(cur)
	if out == nil {
		out = map[string]string{}
	}
	for f, to := range c.To {
		v, ok := out[f]
		if !ok {
			v = c.Default[f]
		}
		if v != c.From[f] {
			return nil, fmt.Errorf("field %s: %w", f, ErrChanged)
		}
		out[f] = to
	}
	return out, nil
}

// Book is one turn's record book: it implements the agent's RecordBook.
type Book struct {
	stored  Stored
	brand   string
	source  map[Key]brand.Record // as the brand's data had them
	changed map[Key]Change
	// user, when set, is the Brand user a delegated turn acts as: the
	// book shows the agent that user's records only (HoldTo).
	user     string
	withheld []Key
}

// NewBook is an empty record book of brandID over stored.
func NewBook(brandID string, stored Stored) *Book { return &Book{stored: stored, brand: brandID} }

func (b *Book) key(rt *brand.RecordType, id string) Key { return Key{b.brand, rt.Type, id} }

// HoldTo shows the agent the records of Brand user user only: a delegated
// turn acts as that user (PACT §5.5), and an agent steered by the text it
// is sent (an LLM) must not read another customer's records into its
// reply. Get gives nil, as for no record, for any other account's.
func (b *Book) HoldTo(user string) { b.user = user }

// Withheld are the records Get did not show the agent, being another
// account's than the one the book is held to.
func (b *Book) Withheld() []Key { return b.withheld }

// Get returns the record of type rt with id: the brand's data, the fields
// stored over it, and this turn's changes; nil when there is none.
func (b *Book) Get(ctx context.Context, rt *brand.RecordType, id string) (brand.Record, error) {
	src, err := rt.Lookup(ctx, id)
	if err != nil || src == nil {
		return nil, err
	}
	k := b.key(rt, src.ID())
	if b.user != "" && src.Account() != b.user {
		if !slices.Contains(b.withheld, k) {
			b.withheld = append(b.withheld, k)
		}
		return nil, nil
	}
	if b.source == nil {
		b.source = map[Key]brand.Record{}
	}
	b.source[k] = src
	stored, err := b.stored.Fields(k)
	if err != nil {
		return nil, fmt.Errorf("stored fields of %s: %w", k, err)
	}
	rec := maps.Clone(src)
	maps.Copy(rec, stored)
	if c, ok := b.changed[k]; ok {
		maps.Copy(rec, c.To)
	}
	return rec, nil
}

// Set changes fields of a record Get returned; the change is kept with the
// turn's reply.
func (b *Book) Set(_ context.Context, rt *brand.RecordType, rec brand.Record, changes map[string]string) error {
	k := b.key(rt, rec.ID())
	src, ok := b.source[k]
	if !ok {
		return fmt.Errorf("set %s %s: not read in this turn", rt.Type, rec.ID())
	}
	c, ok := b.changed[k]
	if !ok {
		c = Change{Default: map[string]string{}, From: map[string]string{}, To: map[string]string{}}
	}
	for f, v := range changes {
		if _, seen := c.From[f]; !seen {
			c.Default[f], c.From[f] = src[f], rec[f]
		}
		c.To[f] = v
	}
	if b.changed == nil {
		b.changed = map[Key]Change{}
	}
	b.changed[k] = c
	return nil
}

// Changes are the turn's changes, by record.
func (b *Book) Changes() map[Key]Change { return b.changed }

// Account is the account the brand's data gives record k, which this
// turn read: whose record a change to it is.
func (b *Book) Account(k Key) string { return b.source[k].Account() }

// Changed reports whether the change sets some field to a value other
// than the one the turn saw.
func (c Change) Changed() bool {
	for f, to := range c.To {
		if c.From[f] != to {
			return true
		}
	}
	return false
}

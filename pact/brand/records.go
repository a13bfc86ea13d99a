package brand

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode"
)

// RecordType is a kind of record the agent answers about: its name, the
// pattern its ids follow (how the agent finds one in a message), its
// fields, and the records themselves (Items) or where to read them
// (Source).
type RecordType struct {
	// Type names it in sentences ("order", "booking") and is the default
	// argument name of the tools that act on it.
	Type string `yaml:"type"`
	// Plural is the plural of Type; default Type + "s".
	Plural string `yaml:"plural"`
	// IDPattern is an RE2 regular expression that a record id matches
	// whole, such as [A-Z]-[0-9]{3,}; the agent finds ids in messages
	// with it, in any letter case.
	IDPattern string `yaml:"idPattern"`
	// Fields are the record's fields besides id and account.
	Fields []string `yaml:"fields"`
	// Items are the records, for a demo.
	Items []Record `yaml:"items"`
	// Source is where the records are instead: a JSON or YAML file (a
	// list of records; a relative path is read beside the brand file), or
	// an https URL of the business with {id} in it, answering GET with one
	// record as a JSON object (404 when there is none).
	Source string `yaml:"source"`

	whole, find *regexp.Regexp
	http        string            // URL template, when Source is a URL
	byID        map[string]Record // Items by foldID of their id
}

// foldID is id with each rune replaced by the least rune it equals under
// Unicode simple case folding: two ids are strings.EqualFold exactly when
// their foldIDs are equal.
func foldID(id string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, id)
}

// Record is one record: id, account (the Brand user it belongs to) and the
// type's fields, all text.
type Record map[string]string

// ID is the record's id.
func (r Record) ID() string { return r["id"] }

// Account is the Brand user the record belongs to.
func (r Record) Account() string { return r["account"] }

// PluralName is the plural of the type.
func (rt *RecordType) PluralName() string {
	if rt.Plural != "" {
		return rt.Plural
	}
	return rt.Type + "s"
}

// maxSourceBytes bounds a record read from a business's endpoint.
const maxSourceBytes = 64 << 10

// sourceClient reads records from a business's endpoint.
var sourceClient = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// ErrSource: the record source could not be read; the agent cannot answer.
var ErrSource = errors.New("record source unavailable")

// Lookup returns the record with id (any letter case), with the fields of
// its type ("" where the source has none), or nil when there is none.
func (rt *RecordType) Lookup(ctx context.Context, id string) (Record, error) {
	if !rt.whole.MatchString(id) {
		return nil, nil
	}
	if rt.http == "" {
		return rt.byID[foldID(id)], nil
	}
	u := strings.ReplaceAll(rt.http, "{id}", url.PathEscape(id))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := sourceClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSource, rt.Type, err)
	}
	defer res.Body.Close()
	switch {
	case res.StatusCode == http.StatusNotFound:
		return nil, nil
	case res.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: %s: HTTP %d", ErrSource, rt.Type, res.StatusCode)
	}
	dec := json.NewDecoder(io.LimitReader(res.Body, maxSourceBytes))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: %s: not a JSON object: %v", ErrSource, rt.Type, err)
	}
	rec := rt.normal(raw)
	if !strings.EqualFold(rec.ID(), id) || rec.Account() == "" {
		return nil, fmt.Errorf("%w: %s: the answer for %s has another id or no account", ErrSource, rt.Type, id)
	}
	return rec, nil
}

// normal keeps id, account and the type's fields of raw, as text.
func (rt *RecordType) normal(raw map[string]any) Record {
	rec := Record{}
	for _, f := range append([]string{"id", "account"}, rt.Fields...) {
		switch v := raw[f].(type) {
		case string:
			rec[f] = v
		case nil:
			rec[f] = ""
		default:
			rec[f] = fmt.Sprint(v)
		}
	}
	return rec
}

package ledger

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/verifier"
)

// oddStrings are strings whose JSON needs escapes of each kind.
var oddStrings = []string{
	"", "a", "plain text", `q"uote`, `back\slash`, "<script>&amp;</script>",
	"tab\tnew\nline\rcr\bbs\fff", "\x00\x01\x1f\x7f", "é ü 漢字 🙂",
	"line\u2028sep\u2029par", "bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate",
	"https://agent.example/pa?x=1&y=<2>", strings.Repeat("f", 64),
}

// fill sets v (addressable) from rng: every field, recursively. With
// full, no field is left at its zero value, so every field is written;
// otherwise a field is zero about one time in three, and a slice is nil
// or empty as often as it holds elements.
func fill(t *testing.T, v reflect.Value, rng *rand.Rand, full bool) {
	zero := !full && rng.IntN(3) == 0
	switch v.Kind() {
	case reflect.String:
		if !zero {
			v.SetString(oddStrings[1+rng.IntN(len(oddStrings)-1)])
		}
	case reflect.Int:
		if !zero {
			v.SetInt(int64(1 + rng.IntN(5)))
		}
	case reflect.Pointer:
		if !zero {
			v.Set(reflect.New(v.Type().Elem()))
			fill(t, v.Elem(), rng, full)
		}
	case reflect.Slice:
		n := 1 + rng.IntN(3)
		switch {
		case zero && rng.IntN(2) == 0:
			return // nil
		case zero:
			n = 0 // empty, not nil
		}
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fill(t, v.Index(i), rng, full)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			if !zero {
				v.Set(reflect.ValueOf(randomTime(rng)))
			}
			return
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); !f.IsExported() || f.Tag.Get("json") == "-" {
				continue // never written: the JSON has the exported fields kept with the row
			}
			fill(t, v.Field(i), rng, full)
		}
	default:
		t.Fatalf("fill: a field of kind %s (%s): teach fill and Row.AppendJSON about it", v.Kind(), v.Type())
	}
}

func randomTime(rng *rand.Rand) time.Time {
	t := time.Date(1990+rng.IntN(60), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), 0, time.UTC)
	switch rng.IntN(4) {
	case 1:
		t = t.Add(time.Duration(rng.IntN(1e9)))
	case 2:
		t = t.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
	case 3:
		t = t.In(time.FixedZone("", (rng.IntN(27)-13)*3600+rng.IntN(4)*15*60))
	}
	return t
}

func TestRowAppendJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		var r Row
		fill(t, reflect.ValueOf(&r).Elem(), rng, i < 100)
		want, werr := json.Marshal(&r)
		got, gerr := r.AppendJSON([]byte("prefix"))
		if werr != nil || gerr != nil {
			t.Fatalf("row %d: json.Marshal error %v, AppendJSON error %v", i, werr, gerr)
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("row %d:\n got %s\nwant prefix%s", i, got, want)
		}
	}
}

// TestRowAppendJSONEveryField checks that the full rows above reach every
// field: each of Row's JSON keys, and its nested types', is written.
func TestRowAppendJSONEveryField(t *testing.T) {
	var r Row
	fill(t, reflect.ValueOf(&r).Elem(), rand.New(rand.NewPCG(3, 4)), true)
	got, err := r.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys func(reflect.Type)
	keys = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[time.Time]() {
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() { // not kept with the row
				continue
			}
			if !bytes.Contains(got, []byte(`"`+name+`":`)) {
				t.Errorf("%s.%s: key %q not written", typ.Name(), f.Name, name)
			}
			keys(f.Type)
		}
	}
	keys(reflect.TypeFor[Row]())
}

func TestRowAppendJSONRefusedTimes(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600)),
	} {
		r := Row{ID: "x", RecordedAt: at}
		_, werr := json.Marshal(&r)
		got, gerr := r.AppendJSON([]byte("kept"))
		if werr == nil || gerr == nil || gerr.Error() != werr.Error() {
			t.Errorf("%v: AppendJSON error %v, json.Marshal error %v", at, gerr, werr)
		}
		if string(got) != "kept" {
			t.Errorf("%v: dst after an error = %q, want it unchanged", at, got)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range oddStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

// benchRow is a row as the write path makes one: an authorized receipt
// with its checks, one action and a grant's limits.
func benchRow() *Row {
	at := time.Date(2026, 12, 3, 8, 26, 14, 353123456, time.UTC)
	hex := strings.Repeat("3f9a", 16)
	return &Row{
		ID: hex, ReceiptID: "sha256:" + hex, Kind: KindReceipt, Status: Authorized,
		GrantID: "grant-7c1e0d2a-5b4f-4e8a-9c3d-2f6b8a1e4d90", Principal: "user-000123", Brand: "https://shop.example",
		Agent:        Agent{Platform: "https://agent.example", RequestJWTKid: "pa-key-2026-11", JWKSSnapshot: hex},
		BrandKey:     BrandKey{Kid: "brand-key-2026-11", JWKSSnapshot: hex},
		ScopeGranted: []string{"orders:read", "orders:refund"}, ScopesUsed: []string{"orders:refund"},
		Limits:   Limits{AmountMax: "EUR 200.00", CountMax: 5, GrantExpires: at.Add(720 * time.Hour)},
		Actions:  []verifier.RowAction{{Tool: "refund_order", Target: "order-88123", ArgsHash: hex, HashSource: 1}},
		IssuedAt: at, RecordedAt: at.Add(3 * time.Millisecond),
		Verifier: Record{CheckedBy: "pactledger 1.0", CheckedAt: at.Add(2 * time.Millisecond), Checks: []verifier.Check{
			{Name: "receipt_signature", Result: 1}, {Name: "request_signature", Result: 1}, {Name: "delegation_token", Result: 1},
			{Name: "bindings", Result: 1}, {Name: "scopes_within_grant", Result: 1}, {Name: "limits", Result: 1, Detail: "EUR 42.00 of EUR 200.00"},
		}},
		Class: 1, RetainUntil: at.Add(18 * 30 * 24 * time.Hour), Dispute: DisputeNone,
		EvidenceSHA256: hex, RequestJWTSHA256: hex,
	}
}

func BenchmarkRowJSON(b *testing.B) {
	r := benchRow()
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.AppendJSON(make([]byte, 0, 2048)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// An evidence bundle's JSON is json.Marshal's, byte for byte: its hash
// identifies a resubmission of the same evidence.
func TestEvidenceAppendJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 3000 {
		var e Evidence
		fill(t, reflect.ValueOf(&e).Elem(), rng, i < 100)
		if i%2 == 0 {
			e.Refusal = nil // every other field written, not json.Marshal's
		}
		want, werr := json.Marshal(&e)
		got, gerr := e.AppendJSON([]byte("prefix"))
		if werr != nil || gerr != nil {
			t.Fatalf("bundle %d: json.Marshal error %v, AppendJSON error %v", i, werr, gerr)
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("bundle %d:\n got %s\nwant prefix%s", i, got, want)
		}
	}
	var empty Evidence
	if got, _ := empty.AppendJSON(nil); string(got) != "{}" {
		t.Errorf("empty bundle: %s", got)
	}
	bad := Evidence{Limits: &Limits{GrantExpires: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}
	_, werr := json.Marshal(&bad)
	if got, gerr := bad.AppendJSON([]byte("kept")); werr == nil || gerr == nil || gerr.Error() != werr.Error() || string(got) != "kept" {
		t.Errorf("a time json.Marshal refuses: %q, %v; json.Marshal %v", got, gerr, werr)
	}
}

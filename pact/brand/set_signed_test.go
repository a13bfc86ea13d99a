package brand_test

// A receipt's action carries the tool and the hash of its args (PACT
// argsHash). A tool's set may so write only fixed text and the signed
// args: a value from a pattern's group that no arg holds, or from the
// record's other fields, would change the record to what neither the
// signed receipt nor the ledger's action log records.

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/pact/brand"
)

// setShop is shop with a note field the cancel tool sets to set, and the
// cancel intent's pattern and args.
func setShop(t *testing.T, set, args string) string {
	t.Helper()
	b := shop
	for _, r := range [][2]string{
		{"fields: [status]", "fields: [status, note]"},
		{"    set: {status: cancelled}", "    set: {status: cancelled, note: " + set + "}"},
		{"    words: [cancel]\n", "    patterns: ['cancel (?P<why>.*)']\n    args: " + args + "\n"},
	} {
		if !strings.Contains(b, r[0]) {
			t.Fatalf("shop has no %q", r[0])
		}
		b = strings.Replace(b, r[0], r[1], 1)
	}
	return b
}

func TestSetFromAMatchGroupNoArgHoldsIsRefused(t *testing.T) {
	_, err := load(t, map[string]string{"shop.yaml": setShop(t, `"{{.match.why}}"`, `{order: "{{.id}}"}`)})
	if err == nil {
		t.Fatal("a brand whose tool sets a field from a match group that no arg holds loaded: a delegated turn changes the record to a value its signed receipt does not cover")
	}
	t.Logf("refused: %v", err)
	// The file, the tool and the field, in plain words.
	for _, want := range []string{"shop.yaml:", "tools[1].set.note:", "the tool cancel writes note", "argsHash"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestSetValuesNotFromTheArgsAreRefused(t *testing.T) {
	for _, set := range []string{
		`"{{.match.why}}"`,                // held by an arg, but the rule is the args
		`"{{.status}}"`,                   // the record's own field: no signature covers it
		`"{{.account}}"`,                  // likewise
		`"{{.brand.name}}"`,               // not in the args
		`"{{printf \"%.3s\" .args.why}}"`, // a function of an arg
		`"{{.args.why | len}}"`,
		`"{{if .args.why}}yes{{end}}"`,
		`"{{with .args.why}}{{.}}{{end}}"`,
		`"{{$x := .args.why}}{{$x}}"`,
		`"{{.args}}"`,
	} {
		_, err := load(t, map[string]string{"shop.yaml": setShop(t, set, `{order: "{{.id}}", why: "{{.match.why}}"}`)})
		if err == nil || !strings.Contains(err.Error(), "tools[1].set.note:") {
			t.Errorf("set: {note: %s}: %v; want refused at tools[1].set.note", set, err)
		}
	}
}

func TestSetValuesFromTheArgsLoad(t *testing.T) {
	for _, set := range []string{
		`"{{.args.why}}"`,
		`"why: {{.args.why}} ({{.args.order}})"`,
		`"{{- .args.why -}}"`,
		`"{{/* the reason */}}{{.args.why}}"`,
		`fixed`,
		`""`,
	} {
		if _, err := load(t, map[string]string{"shop.yaml": setShop(t, set, `{order: "{{.id}}", why: "{{.match.why}}"}`)}); err != nil {
			t.Errorf("set: {note: %s}: %v", set, err)
		}
	}
}

// The demo brands set fixed text and args alone, and load.
func TestTheDemoBrandsSetFromTheirArgs(t *testing.T) {
	brands, err := brand.Load(filepath.Join("..", "brands"))
	if err != nil || brands["acme"] == nil || brands["skyways"] == nil {
		t.Fatalf("%v, %v", brands, err)
	}
}

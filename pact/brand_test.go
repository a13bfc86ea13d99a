package pact_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pactledger/pactledger/pact"
)

func TestBrandsAreData(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("shop.yaml", "id: shop\nname: Shop Support\nskills: [{id: orders, name: Orders, description: x, tags: [orders]}]\naccounts: [{id: a1, email: a@x.io}]\norders: [{id: S-100, account: a1, status: shipped, total: '1.00'}]\n")
	brands, err := pact.LoadBrands(dir)
	if err != nil || brands["shop"] == nil || brands["shop"].Version != "0.1.0" {
		t.Fatalf("load: %v %+v", err, brands)
	}
	for name, body := range map[string]string{
		"bad-id.yaml":    "id: Bad_ID\nname: x\n",
		"unknown.yaml":   "id: x\nname: x\ncolour: red\n",
		"orphan.yaml":    "id: x\nname: x\norders: [{id: O-1, account: nobody, status: s, total: '1'}]\n",
		"duplicate.yaml": "id: shop\nname: again\n",
		// An intent names a scope on the brand's card (PACT §5.2), a tool the
		// scripted agent runs, and at most one intent answers by default.
		"intent-scope.yaml":   "id: x\nname: x\nscopes: [{id: a:read, description: d}]\nintents: [{tool: lookup_orders, scope: orders:read}]\n",
		"intent-tool.yaml":    "id: x\nname: x\nintents: [{tool: launch_rocket, words: [launch]}]\n",
		"intent-default.yaml": "id: x\nname: x\nintents: [{tool: lookup_orders}, {tool: cancel_order}]\n",
		"intent-blank.yaml":   "id: x\nname: x\nintents: [{tool: cancel_order, words: [' ']}]\n",
	} {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if name == "duplicate.yaml" {
			d = dir
			write(name, body)
		}
		if _, err := pact.LoadBrands(d); err == nil {
			t.Errorf("%s loaded", name)
		}
		if name == "duplicate.yaml" {
			os.Remove(filepath.Join(dir, name))
		}
	}
	builtin, err := pact.LoadBrands("")
	if err != nil || len(builtin["acme"].Intents) == 0 {
		t.Fatalf("the demo brand's intents: %v", err)
	}
	for _, in := range builtin["acme"].Intents {
		if in.Scope == "" || !slices.ContainsFunc(builtin["acme"].Scopes, func(s pact.Scope) bool { return s.ID == in.Scope }) {
			t.Errorf("demo intent %s needs %q, not on the card", in.Tool, in.Scope)
		}
	}
	if _, err := pact.LoadBrands(t.TempDir()); err == nil {
		t.Error("an empty brands directory loaded")
	}
}

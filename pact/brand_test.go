package pact_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/pact"
)

// The built-in demo brands are files like any other; every intent's tool
// needs a scope on the brand's card.
func TestBuiltinBrandsAreData(t *testing.T) {
	builtin, err := pact.LoadBrands("")
	if err != nil || builtin["acme"] == nil || len(builtin["acme"].Intents) == 0 {
		t.Fatalf("the demo brands: %v", err)
	}
	for id, b := range builtin {
		for _, in := range b.Intents {
			scope := in.ToolDef().Scope
			if scope == "" || !slices.ContainsFunc(b.Scopes, func(s pact.Scope) bool { return s.ID == scope }) {
				t.Errorf("%s: intent %s needs %q, not on the card", id, in.Tool, scope)
			}
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte("id: x\nname: x\ncolour: red\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pact.LoadBrands(dir); err == nil || !strings.Contains(err.Error(), "x.yaml:3") {
		t.Fatalf("a bad brand file: %v", err)
	}
}

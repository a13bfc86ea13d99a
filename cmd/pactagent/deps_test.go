package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/pactledger/pactledger"

// clientSide are the packages of the pact tree a personal agent may link.
var clientSide = []string{module + "/pact/a2a", module + "/pact/client"}

// providerSide lists the packages among deps that a personal agent must not
// link: bbolt, bcrypt, and the Provider's packages (anything under pact/
// but the wire types and the client).
func providerSide(deps []string) []string {
	var out []string
	for _, d := range deps {
		pactTree := d == module+"/pact" || strings.HasPrefix(d, module+"/pact/")
		switch {
		case d == "go.etcd.io/bbolt" || strings.HasPrefix(d, "go.etcd.io/bbolt/"),
			d == "golang.org/x/crypto/bcrypt",
			pactTree && !slices.Contains(clientSide, d):
			out = append(out, d)
		}
	}
	return out
}

// deps is the packages pkg links, as go list -deps reports them.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list what pactagent links: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// pactagent links only the client side of PACT: no store, no password
// hashing, no Provider. The same check run on the embedded Provider finds
// all three, so it looks where it should.
func TestPactagentLinksOnlyTheClientSide(t *testing.T) {
	agent := deps(t, module+"/cmd/pactagent")
	if bad := providerSide(agent); len(bad) > 0 {
		t.Errorf("pactagent links the Provider side: %s", strings.Join(bad, ", "))
	}
	if !slices.Contains(agent, module+"/pact/client") {
		t.Errorf("pactagent does not link pact/client: the dependency list is not what it seems")
	}
	bad := providerSide(deps(t, module+"/pact"))
	for _, want := range []string{"go.etcd.io/bbolt", "golang.org/x/crypto/bcrypt", module + "/pact/provider", module + "/pact/store"} {
		if !slices.Contains(bad, want) {
			t.Errorf("the check does not find %s in the Provider's dependencies: %v", want, bad)
		}
	}
}

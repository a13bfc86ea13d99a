package server

import (
	"testing"

	"github.com/pactledger/pactledger/internal/config"
)

// A replica that runs no Provider but names the Provider's public URL
// loads the same brand files, and its drills use their words: the
// business's name and, for each tool, what the consent page showed.
func TestDrillNamesOnAReplicaWithoutTheProvider(t *testing.T) {
	cfg := config.Default()
	off := false
	cfg.Provider.Enabled = &off
	cfg.Provider.BaseURL = "https://pact.example/"
	n := drillNames(cfg, nil)
	b := n.Brands["https://pact.example/a2a/skyways"]
	if b.Name != "SkyWays Airlines" || b.Tools["rebook_flight"] != "Rebook a flight, paying the change fee with your card on file" {
		t.Fatalf("skyways on a replica: %+v (all: %v)", b, n.Brands)
	}

	cfg.Provider.BaseURL = ""
	if n := drillNames(cfg, nil); len(n.Brands) != 0 {
		t.Fatalf("without the Provider or its URL: %v", n.Brands)
	}
}

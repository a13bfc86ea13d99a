package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
)

// TestLeases: the leases block and uploader.claimTTL load, and a
// negative or too short time is refused.
func TestLeases(t *testing.T) {
	load := func(t *testing.T, y string) (config.Config, error) {
		p := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(p)
		if err == nil {
			err = c.Validate()
		}
		return c, err
	}
	c, err := load(t, "leases: {holder: replica-2, ttl: 2s}\nuploader: {claimTTL: 3s}\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Leases.Holder != "replica-2" || time.Duration(c.Leases.TTL) != 2*time.Second || time.Duration(c.Uploader.ClaimTTL) != 3*time.Second {
		t.Errorf("loaded %+v, uploader %+v", c.Leases, c.Uploader)
	}
	for y, want := range map[string]string{
		"leases: {ttl: -1s}\n":        "leases.ttl",
		"leases: {ttl: 100ms}\n":      "leases.ttl",
		"uploader: {claimTTL: -1s}\n": "uploader.claimTTL",
	} {
		if _, err := load(t, y); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", y, err, want)
		}
	}
}

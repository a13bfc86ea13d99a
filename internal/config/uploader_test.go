package config_test

import (
	"strings"
	"testing"
	"time"
)

// TestUploaderInterval: uploader.interval is unset by default (the
// ledger's default applies), takes 0s (back to back) up to a minute, and
// refuses a negative or longer one.
func TestUploaderInterval(t *testing.T) {
	c, err := load(t, "dataDir: /srv/ledger\n")
	if err != nil || c.Uploader.Interval != nil {
		t.Fatalf("unset: uploader = %+v, %v; want no interval", c.Uploader, err)
	}
	for yaml, want := range map[string]time.Duration{"uploader: {interval: 0s}\n": 0, "uploader: {interval: 1s}\n": time.Second, "uploader: {interval: 1m}\n": time.Minute} {
		c, err := load(t, yaml)
		if err != nil || c.Uploader.Interval == nil || time.Duration(*c.Uploader.Interval) != want {
			t.Errorf("%q: uploader = %+v, %v; want interval %v", yaml, c.Uploader, err, want)
		}
	}
	for _, yaml := range []string{"uploader: {interval: -1ms}\n", "uploader: {interval: 61s}\n"} {
		if _, err := load(t, yaml); err == nil || !strings.Contains(err.Error(), "want 0s (back to back) to 1m0s") {
			t.Errorf("%q: error %v", yaml, err)
		}
	}
}

// TestUploaderBounds: uploader.workers and uploader.batch take their
// bounds (the refusals are in TestValidateRejects); unset, the ledger's
// defaults apply.
func TestUploaderBounds(t *testing.T) {
	for _, yaml := range []string{"uploader: {}\n", "uploader: {workers: 1, batch: 1}\n", "uploader: {workers: 64, batch: 10000}\n"} {
		if _, err := load(t, yaml); err != nil {
			t.Errorf("%q: %v", yaml, err)
		}
	}
}

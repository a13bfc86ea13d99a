package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A receipt whose ts is far from this machine's clock is the user's
// evidence all the same: the action happened at the Brand. send keeps it,
// saying which way the clocks differ, in its text and its --json output.
func TestAReceiptFarFromThisClockIsKeptWithAWarning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset time.Duration // the Brand's clock against this machine's
		warn   string
	}{
		{name: "this clock 40 s slow", offset: 40 * time.Second, warn: "ahead of this machine's clock"},
		{name: "this clock 10 min fast", offset: -10 * time.Minute, warn: "behind this machine's clock"},
		{name: "the same time", offset: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newDelegatingBrand(t)
			b.clock = tc.offset
			dir := b.agentFor(t, "jane", time.Now().Add(time.Hour))
			var out bytes.Buffer
			if err := run([]string{"send", "--dir", dir, "--card", b.card(), "--user", "jane", "status of A-1"}, &out); err != nil {
				t.Fatalf("send: %v\n%s", err, &out)
			}
			m := receiptRe.FindStringSubmatch(out.String())
			if m == nil || !strings.Contains(out.String(), "receipt verified") {
				t.Fatalf("no receipt kept:\n%s", &out)
			}
			if _, err := os.Stat(filepath.Join(dir, "receipts", m[1]+".json")); err != nil {
				t.Fatal(err)
			}
			gotWarn := strings.Contains(out.String(), "warning: ")
			if tc.warn == "" && gotWarn || tc.warn != "" && !strings.Contains(out.String(), tc.warn) {
				t.Fatalf("want a warning saying %q:\n%s", tc.warn, &out)
			}

			out.Reset()
			if err := run([]string{"send", "--dir", dir, "--card", b.card(), "--user", "jane", "--json", "status of A-1"}, &out); err != nil {
				t.Fatalf("send --json: %v\n%s", err, &out)
			}
			var got struct {
				Receipt *struct {
					SHA256       string `json:"sha256"`
					ClockWarning string `json:"clockWarning"`
				} `json:"receipt"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Receipt == nil || got.Receipt.SHA256 == "" {
				t.Fatalf("send --json: %v\n%s", err, &out)
			}
			if !strings.Contains(got.Receipt.ClockWarning, tc.warn) || tc.warn == "" && got.Receipt.ClockWarning != "" {
				t.Fatalf("send --json: clockWarning %q, want one saying %q", got.Receipt.ClockWarning, tc.warn)
			}
		})
	}
}

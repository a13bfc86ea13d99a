package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/pipeline"
	"github.com/pactledger/pactledger/pact/store"
)

// ledgerd provider rotate-key: with no key there is nothing to retire and
// it says how to go on; --replace-lost makes one, only where none is; a
// rotation names the new key and the retired one, and logs both; and
// while a ledgerd holds the Provider's store it refuses.
func TestProviderRotateKey(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "provider.db")) // the store a ledgerd made
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	rotate := func(args ...string) (string, string, error) {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), append([]string{"provider", "rotate-key", "--data-dir", dir}, args...), &stdout, &stderr)
		return stdout.String(), stderr.String(), err
	}
	if _, _, err := rotate(); err == nil || !strings.Contains(err.Error(), "restore it from the backup") || !strings.Contains(err.Error(), "--replace-lost") {
		t.Fatalf("rotate-key without a key: %v", err)
	}
	out, logs, err := rotate("--replace-lost")
	if err != nil || !strings.Contains(out, "in place of a lost one") || !strings.Contains(logs, `"level":"WARN"`) {
		t.Fatalf("rotate-key --replace-lost: %v\n%s%s", err, out, logs)
	}
	if _, _, err := rotate("--replace-lost"); err == nil || !strings.Contains(err.Error(), "without --replace-lost") {
		t.Fatalf("rotate-key --replace-lost over a key: %v", err)
	}
	out, logs, err = rotate()
	if err != nil || !strings.Contains(out, "is retired and stays published for verification until") || !strings.Contains(out, "0 grants") ||
		!strings.Contains(logs, `"msg":"rotated the Provider's signing key`) || !strings.Contains(logs, `"retired_kid":"provider-`) {
		t.Fatalf("rotate-key: %v\n%s%s", err, out, logs)
	}
	if !strings.Contains(out, "Back up the key file "+filepath.Join(dir, "provider-signing-key.json")) || strings.Contains(out, "are to reach it before") {
		t.Errorf("rotate-key with nothing waiting printed:\n%s", out)
	}

	// With a receipt waiting for the ledger, it says by when the ledger
	// must have it.
	st, err = store.Open(filepath.Join(dir, "provider.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Enqueue(pipeline.Item{Receipt: &pipeline.Receipt{ReceiptJWS: "e30.e30.c2ln"}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out, _, err = rotate()
	until := regexp.MustCompile(`stays published for verification until (\S+)\.`).FindStringSubmatch(out)
	if err != nil || until == nil || !strings.Contains(out, "1 entries waiting for the ledger") ||
		!strings.Contains(out, "The entries waiting for the ledger, and those set aside, are to reach it before "+until[1]) {
		t.Fatalf("rotate-key with a receipt waiting: %v\n%s", err, out)
	}

	db, err := bbolt.Open(filepath.Join(dir, "provider.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before, _ := os.ReadFile(filepath.Join(dir, "provider-signing-key.json"))
	if _, _, err := rotate(); err == nil || !strings.Contains(err.Error(), "stop ledgerd first") {
		t.Fatalf("rotate-key while the store is held: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "provider-signing-key.json")); !bytes.Equal(before, after) {
		t.Fatal("a refused rotation changed the key file")
	}
}

// ledgerd provider rotate-key run where there is no Provider store (the
// wrong directory, without --config) says where it looked and how to
// point it at the right place, and leaves nothing behind.
func TestProviderRotateKeyInTheWrongDirectory(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	wd := t.TempDir()
	t.Chdir(wd)
	for _, tc := range []struct {
		name string
		args []string
		dir  string
	}{
		{"no data directory", nil, filepath.Join(wd, "data")},
		{"a data directory with no store", []string{"--data-dir", wd}, wd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"provider", "rotate-key"}, tc.args...), &stdout, &stderr)
			if err == nil {
				t.Fatalf("rotate-key found a store:\n%s", stdout.String())
			}
			for _, want := range []string{"no Provider store at", "looked in the data directory " + tc.dir + ";", "--config FILE", "--data-dir DIR"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error %q does not say %q", err, want)
				}
			}
			if _, err := os.Stat(filepath.Join(tc.dir, "provider.db")); !os.IsNotExist(err) {
				t.Errorf("it left a store behind: %v", err)
			}
		})
	}
}

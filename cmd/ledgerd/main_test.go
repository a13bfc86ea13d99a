package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/buildinfo"
	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/s3"
)

func TestConfigExample(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"config", "example"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), config.Example) {
		t.Fatal("config example printed something else")
	}
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{{"config"}, {"--no-such-flag"}, {"serve"}, {"--config", "/does/not/exist.yaml"}, {"--log-level", "loud", "--data-dir", t.TempDir()}} {
		var out bytes.Buffer
		if err := run(t.Context(), args, &out, &out); err == nil {
			t.Errorf("run(%q) succeeded", strings.Join(args, " "))
		}
	}
}

// --help, -h and help print the usage to stdout, and exit with status 0:
// every command ledgerd dispatches on one line of its own, then the flags.
// A command's --help prints its flags.
func TestHelp(t *testing.T) {
	commands := []string{"migrate", "compact", "unmark-moved", "healthcheck", "provider rotate-key", "config example", "version", "help"}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"usage: ledgerd", "-config FILE", "-data-dir DIR", "-log-level LEVEL"}},
		{[]string{"-h"}, []string{"usage: ledgerd", "-grpc-addr ADDRESS"}},
		{[]string{"help"}, []string{"usage: ledgerd", "-http-addr ADDRESS"}},
		{[]string{"compact", "--help"}, []string{"usage: ledgerd compact", "-data-dir DIR", "-evidence-dir DIR"}},
		{[]string{"migrate", "-h"}, []string{"usage: ledgerd migrate", "-from"}},
		{[]string{"healthcheck", "--help"}, []string{"usage: ledgerd healthcheck", "-url URL"}},
		{[]string{"config", "--help"}, []string{"usage: ledgerd config example"}},
		{[]string{"provider", "rotate-key", "--help"}, []string{"usage: ledgerd provider rotate-key", "-replace-lost"}},
		{[]string{"provider", "--help"}, []string{"usage: ledgerd provider rotate-key"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tc.args, &stdout, &stderr)
			if code := exitStatus(err, &stderr); code != 0 {
				t.Errorf("exit status %d (%v), want 0", code, err)
			}
			if stderr.Len() > 0 {
				t.Errorf("stderr: %s", stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("usage lacks %q:\n%s", w, stdout.String())
				}
			}
			if tc.args[0] != "-h" && tc.args[0] != "--help" && tc.args[0] != "help" {
				return
			}
			for _, c := range commands {
				if n := strings.Count(stdout.String(), "\n  "+c+" "); n != 1 {
					t.Errorf("usage has %d lines for the command %q, want 1:\n%s", n, c, stdout.String())
				}
			}
		})
	}
	var stderr bytes.Buffer
	if code := exitStatus(run(t.Context(), []string{"--no-such-flag"}, io.Discard, &stderr), &stderr); code != 1 || !strings.Contains(stderr.String(), "ledgerd: flag provided but not defined: -no-such-flag") {
		t.Errorf("a bad flag: exit status %d, stderr:\n%s", code, stderr.String())
	}
}

// Errors name the flag, setting or directory that is wrong and what it
// wants, in the configuration's words.
func TestErrorMessages(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	if err := os.WriteFile(file, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// brands writes a configuration whose provider.brandsDir is dir.
	brands := func(dir string) string {
		p := filepath.Join(t.TempDir(), "ledgerd.yaml")
		yaml := "listen: {grpc: 127.0.0.1:0, http: 127.0.0.1:0}\ndataDir: " + t.TempDir() + "\nprovider: {listen: 127.0.0.1:0, brandsDir: " + dir + "}\n"
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing, empty := filepath.Join(dir, "missing"), t.TempDir()
	busy := t.TempDir() // a data dir whose bbolt file a running ledgerd holds
	st, err := bolt.Open(filepath.Join(busy, "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"data dir a file", []string{"--data-dir", file, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, "data dir " + file + ": not a directory"},
		{"log level", []string{"--log-level", "verbose", "--data-dir", dir}, `log level "verbose": want debug, info, warn or error`},
		{"brandsDir missing", []string{"--config", brands(missing)}, "provider: brands directory " + missing + ": no such directory"},
		{"brandsDir a file", []string{"--config", brands(file)}, "provider: brands directory " + file + ": not a directory"},
		{"brandsDir without brand files", []string{"--config", brands(empty)}, "provider: no brand files (*.yaml or *.yml) in " + empty},
		{"a second ledgerd on a data dir in use", []string{"--data-dir", busy, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"},
			"open " + filepath.Join(busy, "ledger.db") + ": bbolt file is locked by another process: another ledgerd (or ledgerd compact, or migrate --from) is using it: stop that one, or give this one another --data-dir (dataDir in the configuration; store.path when set)"},
		{"compact while ledgerd runs", []string{"compact", "--data-dir", busy},
			"open " + filepath.Join(busy, "ledger.db") + ": bbolt file is locked by another process: stop ledgerd first (compact needs the file to itself)"},
		{"log level in capitals", []string{"--log-level", "DEBUG", "--data-dir", dir}, `log level "DEBUG": want debug, info, warn or error`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(t.Context(), tc.args, &out, &out)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("run(%q): %v, want %s", strings.Join(tc.args, " "), err, tc.want)
			}
		})
	}
	// A start the ledger refuses is in the JSON log too, where a log
	// pipeline looks.
	var out bytes.Buffer
	if err := run(t.Context(), []string{"--config", brands(empty)}, &out, &out); err == nil {
		t.Fatal("started without brand files")
	}
	var line struct{ Level, Msg, Error string }
	for _, l := range strings.Split(out.String(), "\n") {
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "ledgerd did not start" {
			break
		}
	}
	if line.Level != "ERROR" || line.Msg != "ledgerd did not start" || !strings.Contains(line.Error, "no brand files") {
		t.Fatalf("no ERROR line in the JSON log for a refused start:\n%s", out.String())
	}
}

// A bucket without Object Lock is a definite misconfiguration: ledgerd
// stops with an error naming it, which main turns into exit status 1.
func TestRefusesBucketWithoutObjectLock(t *testing.T) {
	srv, err := s3test.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	bucket := s3test.Bucket()
	c, err := minio.New(srv.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MakeBucket(context.Background(), bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ledgerd.yaml")
	yaml := "listen: {grpc: 127.0.0.1:0, http: 127.0.0.1:0}\ndataDir: " + filepath.Join(dir, "data") + "\nprovider: {enabled: false}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PACTLEDGER_S3_SECRET_KEY", srv.SecretKey)
	var out bytes.Buffer
	err = run(t.Context(), []string{"--config", cfg, "--s3-endpoint", srv.Endpoint, "--s3-bucket", bucket, "--s3-access-key", srv.AccessKey, "--s3-insecure"}, &out, &out)
	if !errors.Is(err, s3.ErrNoObjectLock) || !strings.Contains(err.Error(), bucket) {
		t.Fatalf("run with a bucket without object lock: %v, want ErrNoObjectLock naming %s", err, bucket)
	}
	if !strings.Contains(out.String(), "evidence store misconfigured") || strings.Contains(out.String(), srv.SecretKey) {
		t.Fatalf("log does not say why ledgerd stopped, or holds the secret: %s", out.String())
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var out bytes.Buffer
		if err := run(t.Context(), args, &out, &out); err != nil {
			t.Fatal(err)
		}
		if got, want := out.String(), "ledgerd "+buildinfo.Read().String()+"\n"; got != want {
			t.Errorf("%v printed %q, want %q", args, got, want)
		}
	}
}

// ledgerd compact on the default store: a data directory without a file
// is an error naming the path; a file of layout 5 whose log never ran is
// brought to this layout and copied, and the command says so in words.
func TestCompactCommand(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"compact", "--data-dir", dir}, &out, &out); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "ledger.db")) {
		t.Fatalf("compact without a file: %v", err)
	}
	if err := run(t.Context(), []string{"compact", "now"}, &out, &out); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Fatalf("compact with an argument: %v", err)
	}
	path := filepath.Join(dir, "ledger.db")
	st, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// An empty file of layout 5: compact brings it to this layout first.
	layout := func(set []byte) []byte {
		t.Helper()
		db, err := bbolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var v []byte
		if err := db.Update(func(tx *bbolt.Tx) error {
			meta := tx.Bucket([]byte("meta"))
			if set == nil {
				v = append(v, meta.Get([]byte("layout"))...)
				return nil
			}
			if _, err := tx.CreateBucket([]byte("row_leaf_index")); err != nil {
				return err
			}
			return meta.Put([]byte("layout"), set)
		}); err != nil {
			t.Fatal(err)
		}
		return v
	}
	layout([]byte{0, 0, 0, 0, 0, 0, 0, 5})
	out.Reset()
	if err := run(t.Context(), []string{"compact", "--data-dir", dir}, &out, &out); err != nil {
		t.Fatalf("compact: %v\n%s", err, out.String())
	}
	if s := out.String(); !strings.Contains(s, "no Merkle log key") || !strings.Contains(s, "done in") || !strings.Contains(s, "0 leaves of published tiles left the file, 0 entries of rows that are gone were removed and 0 of their leaf indexes moved") ||
		!strings.Contains(s, "copied without its free pages when it was brought to this layout") {
		t.Fatalf("compact printed:\n%s", s)
	}
	if v := layout(nil); !bytes.Equal(v, []byte{0, 0, 0, 0, 0, 0, 0, 11}) {
		t.Fatalf("layout after compact: %x, want 11", v)
	}
}

// ledgerd compact --evidence-dir DIR publishes the log's tiles to, and
// reads them back from, DIR, as ledgerd --evidence-dir keeps its evidence
// there; without it, the configuration's evidence store (by default
// <dataDir>/evidence).
func TestCompactEvidenceDir(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	dir, ev := t.TempDir(), filepath.Join(t.TempDir(), "evidence")
	st, err := bolt.Open(filepath.Join(dir, "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = dir
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := config.EnsureLogKey(&cfg); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"compact", "--data-dir", dir, "--evidence-dir", ev}, &stdout, &stderr); err != nil {
		t.Fatalf("compact: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if s := stdout.String(); !strings.Contains(s, "published to and read back from the evidence directory "+ev) {
		t.Fatalf("compact --evidence-dir %s printed:\n%s", ev, s)
	}
	if _, err := os.Stat(filepath.Join(dir, "evidence")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("compact --evidence-dir made the data directory's evidence folder: %v", err)
	}
	stdout.Reset()
	if err := run(t.Context(), []string{"compact", "--data-dir", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("compact: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if s := stdout.String(); !strings.Contains(s, "published to and read back from the evidence directory "+filepath.Join(dir, "evidence")) {
		t.Fatalf("compact without --evidence-dir printed:\n%s", s)
	}
}

// ledgerd compact with store.path at another program's bbolt file (the
// Provider's provider.db) refuses it, says so plainly, and leaves it as
// it was.
func TestCompactRefusesAnotherProgramsFile(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	dir := t.TempDir()
	other := filepath.Join(dir, "provider.db")
	db, err := bbolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		for _, name := range []string{"contexts", "replies", "grants", "pipeline"} {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "wrong.yaml")
	if err := os.WriteFile(cfgFile, []byte("dataDir: "+dir+"\nstore:\n  path: "+other+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"compact", "--config", cfgFile}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "not a ledger's row store") || strings.Contains(stdout.String(), "Nothing is wrong") {
		t.Fatalf("compact of another program's file: %v\n%s", err, stdout.String())
	}
	if after, err := os.ReadFile(other); err != nil || !bytes.Equal(before, after) {
		t.Fatalf("compact changed the file it refused (%d bytes, was %d): %v", len(after), len(before), err)
	}
}

// ledgerd compact logs JSON lines on stderr, as ledgerd does, and says
// plainly when a small file could not shrink.
func TestCompactLogsAndSmallFiles(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"compact", "--data-dir", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("compact: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatalf("compact logged nothing; stdout:\n%s", stdout.String())
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("log line is not JSON: %s", l)
		}
	}
	if s := stdout.String(); !strings.Contains(s, "did not shrink") || !strings.Contains(s, "16 MiB") || !strings.Contains(s, "Nothing is wrong") {
		t.Errorf("compact of a new, near-empty file printed:\n%s", s)
	}
}

// Durations in the log read as durations, not nanoseconds.
func TestLogDurations(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: readableDurations})).
		Info("x", slog.Duration("took", 1500*time.Microsecond), slog.Group("g", slog.Duration("retry_in", 2*time.Minute)), slog.Int("n", 3))
	if s := buf.String(); !strings.Contains(s, `"took":"1.5ms"`) || !strings.Contains(s, `"retry_in":"2m0s"`) || !strings.Contains(s, `"n":3`) {
		t.Errorf("log line %s", s)
	}
}

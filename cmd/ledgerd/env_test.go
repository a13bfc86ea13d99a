package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/storage/bolt"
)

// s3Evidence is evidence on S3 with the secret key left out of the
// file, as an operator configures it when PACTLEDGER_S3_SECRET_KEY
// holds the secret. Nothing here talks to S3.
func s3Evidence(cfg *config.Config) {
	cfg.Evidence = config.Evidence{Type: "s3", S3: config.S3{Endpoint: "127.0.0.1:1", Bucket: "evidence", AccessKey: "AKIAEXAMPLE", Insecure: true}}
}

// TestCommandsReadTheSecretKeyFromTheEnvironment: every command that
// loads the configuration takes evidence.s3.secretKey from
// PACTLEDGER_S3_SECRET_KEY, as serving does, so a file without the secret
// passes validation: migrate, migrate --from (the move) and compact.
// Without the variable they refuse and name it.
func TestCommandsReadTheSecretKeyFromTheEnvironment(t *testing.T) {
	prev := slog.Default() // compact makes its log the default
	t.Cleanup(func() { slog.SetDefault(prev) })
	dir := t.TempDir()
	var cluster *pgtest.Cluster
	postgresDSN := func(t *testing.T) string {
		t.Helper()
		if cluster == nil {
			pgtest.Available(t)
			c, err := pgtest.New("env")
			if err != nil {
				t.Fatal(err)
			}
			cluster = c
		}
		return cluster.CreateDB(t)
	}
	t.Cleanup(func() {
		if cluster != nil {
			_ = cluster.Remove()
		}
	})
	boltCfg := config.Default()
	boltCfg.DataDir = filepath.Join(dir, "bolt")
	s3Evidence(&boltCfg)
	if err := os.MkdirAll(boltCfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(boltCfg.DataDir, "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	type command struct {
		name string
		args func(t *testing.T) []string
		want string // in what it prints
	}
	commands := []command{
		{"compact", func(t *testing.T) []string {
			return []string{"compact", "--config", writeConfig(t, dir, "bolt.yaml", boltCfg)}
		}, "done in"},
		{"migrate", func(t *testing.T) []string {
			cfg := config.Default()
			cfg.DataDir = filepath.Join(dir, "pg")
			cfg.Store = config.Store{Kind: config.StorePostgres, DSN: postgresDSN(t)}
			s3Evidence(&cfg)
			return []string{"migrate", "--config", writeConfig(t, dir, "migrate.yaml", cfg)}
		}, "migrated the database schema"},
		{"migrate --from", func(t *testing.T) []string {
			cfg := config.Default()
			cfg.DataDir = filepath.Join(dir, "moved")
			cfg.Store = config.Store{Kind: config.StorePostgres, DSN: postgresDSN(t)}
			s3Evidence(&cfg)
			return []string{"migrate", "--from", "bbolt:" + filepath.Join(boltCfg.DataDir, "ledger.db"), "--config", writeConfig(t, dir, "move.yaml", cfg)}
		}, "done in"},
	}
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			args := c.args(t)
			var out bytes.Buffer
			t.Setenv(config.EnvS3SecretKey, "")
			if err := run(t.Context(), args, &out, &out); err == nil || !strings.Contains(err.Error(), config.EnvS3SecretKey) {
				t.Fatalf("ledgerd %s without %s: %v, want a refusal naming it", c.name, config.EnvS3SecretKey, err)
			}
			out.Reset()
			t.Setenv(config.EnvS3SecretKey, "s3-secret-from-the-environment")
			if err := run(t.Context(), args, &out, &out); err != nil {
				t.Fatalf("ledgerd %s with %s set and no secretKey in the file: %v\n%s", c.name, config.EnvS3SecretKey, err, out.String())
			}
			if !strings.Contains(out.String(), c.want) {
				t.Errorf("ledgerd %s printed:\n%s\nwant %q in it", c.name, out.String(), c.want)
			}
		})
	}
}

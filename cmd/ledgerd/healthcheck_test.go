package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/server"
	"github.com/pactledger/pactledger/internal/tlstest"
)

// serve starts a ledgerd on loopback with cfg changed by opt, and writes
// a configuration file naming where it listens, as an operator's would.
func serve(t *testing.T, opt func(*config.Config)) (cfgFile string) {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = config.Listen{GRPC: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
	cfg.DataDir = t.TempDir()
	off := false
	cfg.Provider.Enabled = &off
	if opt != nil {
		opt(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	cfgFile = filepath.Join(t.TempDir(), "ledgerd.yaml")
	yaml := fmt.Sprintf("listen: {grpc: %q, http: %q}\n", srv.GRPCAddr(), srv.HTTPAddr())
	if cfg.TLS.On() {
		yaml += fmt.Sprintf("tls: {certFile: %q, keyFile: %q}\n", cfg.TLS.CertFile, cfg.TLS.KeyFile)
	}
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgFile
}

func check(args ...string) (string, error) {
	var out, errb bytes.Buffer
	err := run(context.Background(), append([]string{"healthcheck"}, args...), &out, &errb)
	return out.String() + errb.String(), err
}

func TestHealthcheck(t *testing.T) {
	cfg := serve(t, nil)
	if out, err := check("--config", cfg); err != nil || !strings.HasPrefix(out, "ready: http://127.0.0.1:") {
		t.Fatalf("a ready ledgerd: %q %v", out, err)
	}
	notReady := serve(t, func(c *config.Config) { c.Readiness.MinFreeDiskBytes = 1 << 62 })
	if _, err := check("--config", notReady); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("a ledgerd short of disk: %v", err)
	}
	if _, err := check("--url", "http://127.0.0.1:1/readyz", "--timeout", "2s"); err == nil {
		t.Fatal("nothing listening, yet healthy")
	}
	if _, err := check("--config", cfg, "extra"); err == nil {
		t.Fatal("an extra argument was accepted")
	}
}

// Over TLS the check trusts exactly the configured certificate, or a CA
// it is given, and presents a client certificate when ledgerd asks.
func TestHealthcheckOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "server CA")
	clients := tlstest.NewCA(t, "client CA")
	pair := ca.Server(t, "ledgerd")
	cfg := serve(t, func(c *config.Config) {
		c.TLS = config.TLS{CertFile: pair.CertFile, KeyFile: pair.KeyFile}
	})
	if out, err := check("--config", cfg); err != nil || !strings.HasPrefix(out, "ready: https://") {
		t.Fatalf("pinned to tls.certFile: %q %v", out, err)
	}
	if _, err := check("--config", cfg, "--ca", ca.File); err != nil {
		t.Fatalf("with --ca: %v", err)
	}
	if _, err := check("--config", cfg, "--ca", clients.File); err == nil {
		t.Fatal("a CA that did not sign the certificate was trusted")
	}
	other := ca.Server(t, "another")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wrongPin := filepath.Join(t.TempDir(), "ledgerd.yaml")
	if err := os.WriteFile(wrongPin, []byte(strings.Replace(string(b), pair.CertFile, other.CertFile, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := check("--config", wrongPin); err == nil || !strings.Contains(err.Error(), "another certificate") {
		t.Fatalf("a certificate other than tls.certFile: %v", err)
	}

	mutual := serve(t, func(c *config.Config) {
		c.TLS = config.TLS{CertFile: pair.CertFile, KeyFile: pair.KeyFile, ClientCAFile: clients.File}
	})
	if _, err := check("--config", mutual); err == nil {
		t.Fatal("no client certificate, yet healthy under mutual TLS")
	}
	cc := clients.Client(t, "healthcheck")
	if _, err := check("--config", mutual, "--cert", cc.CertFile, "--key", cc.KeyFile); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
}

func TestReadyURL(t *testing.T) {
	tests := []struct {
		listen string
		tls    bool
		want   string
	}{
		{"127.0.0.1:8080", false, "http://127.0.0.1:8080/readyz"},
		{"0.0.0.0:8080", false, "http://127.0.0.1:8080/readyz"},
		{"[::]:9000", true, "https://127.0.0.1:9000/readyz"},
		{":8080", false, "http://127.0.0.1:8080/readyz"},
		{"ledger.internal:8443", true, "https://ledger.internal:8443/readyz"},
	}
	for _, tc := range tests {
		cfg := config.Default()
		cfg.Listen.HTTP = tc.listen
		if tc.tls {
			cfg.TLS.CertFile = "x"
		}
		if got := readyURL(cfg); got != tc.want {
			t.Errorf("readyURL(%s) = %s, want %s", tc.listen, got, tc.want)
		}
	}
}

// The health check sends the key in --api-key-file, so that a ledgerd
// that is not ready says why; without one it sends none (never a key it
// finds, to whatever --url names).
func TestHealthcheckSendsTheKeyItIsGiven(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"not ready"}`))
	}))
	t.Cleanup(srv.Close)
	dataDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dataDir, config.KeysDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, config.KeysDir, "support.key"), []byte("support-key-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	given := filepath.Join(t.TempDir(), "auditor.key")
	if err := os.WriteFile(given, []byte("auditor-key-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "ledgerd.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("dataDir: %q\n", dataDir)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"--api-key-file", []string{"--config", cfg, "--api-key-file", given}, "Bearer auditor-key-2"},
		{"no key given, one in the data directory", []string{"--config", cfg}, ""},
	} {
		got.Store("unset")
		_, err := check(append(c.args, "--url", srv.URL+"/readyz")...)
		if err == nil || !strings.Contains(err.Error(), "not ready") {
			t.Fatalf("%s: %v, want not ready with /readyz's answer", c.name, err)
		}
		if a := got.Load().(string); a != c.want {
			t.Errorf("%s: sent Authorization %q, want %q", c.name, a, c.want)
		}
	}
	if _, err := check("--config", cfg, "--url", srv.URL+"/readyz", "--api-key-file", filepath.Join(t.TempDir(), "none.key")); err == nil || !strings.Contains(err.Error(), "--api-key-file") {
		t.Errorf("a key file that cannot be read: %v, want an error naming --api-key-file", err)
	}
}

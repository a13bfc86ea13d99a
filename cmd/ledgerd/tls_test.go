package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/tlstest"
)

// logBuffer collects ledgerd's JSON log lines and wakes waiters on each.
type logBuffer struct {
	mu    sync.Mutex
	buf   strings.Builder
	grown chan struct{}
}

func newLogBuffer() *logBuffer { return &logBuffer{grown: make(chan struct{})} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	close(b.grown)
	b.grown = make(chan struct{})
	return len(p), nil
}

// wait returns the first log line whose msg is msg after skip such lines,
// decoded, waiting for it until the deadline.
func (b *logBuffer) wait(t *testing.T, msg string, skip int) map[string]any {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		b.mu.Lock()
		text, grown := b.buf.String(), b.grown
		b.mu.Unlock()
		n := 0
		sc := bufio.NewScanner(strings.NewReader(text))
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
				if n == skip {
					return m
				}
				n++
			}
		}
		select {
		case <-grown:
		case <-deadline:
			t.Fatalf("no log line %q (#%d) in:\n%s", msg, skip+1, text)
		}
	}
}

// SIGHUP makes a running ledgerd serve the renewed certificate; a renewal
// that does not load keeps the one in use and the log says why.
func TestSighupReloadsTheCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	ca.Server(t, "before").CopyTo(t, certFile, keyFile)
	cfg := filepath.Join(dir, "ledgerd.yaml")
	yaml := fmt.Sprintf("listen: {grpc: 127.0.0.1:0, http: 127.0.0.1:0}\ndataDir: %s\nprovider: {enabled: false}\ntls: {certFile: %s, keyFile: %s}\n",
		filepath.Join(dir, "data"), certFile, keyFile)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := newLogBuffer()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--config", cfg}, logs, logs) }()
	serving := logs.wait(t, "ledgerd serving", 0)
	addr, _ := serving["http"].(string)
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool()})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "before" {
		t.Fatalf("serves %q, want before", got)
	}

	ca.Server(t, "after").CopyTo(t, certFile, keyFile)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logs.wait(t, "tls certificate reloaded", 0)
	if got := served(); got != "after" {
		t.Fatalf("after SIGHUP serves %q, want after", got)
	}

	if err := os.WriteFile(certFile, []byte("-----BEGIN CERTIFICATE-----\ngarbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	failed := logs.wait(t, "tls reload failed; still serving the previous certificate", 0)
	if e, _ := failed["error"].(string); !strings.Contains(e, certFile) {
		t.Fatalf("the failed reload's log does not name the file: %v", failed)
	}
	if got := served(); got != "after" {
		t.Fatalf("after a failed reload serves %q, want after", got)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("ledgerd stopped with %v", err)
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A key goes without TLS only to a ledgerd on this machine, unless
// --plaintext (or the config file's plaintext) says otherwise: a remote
// --server without TLS is a usage error (exit 2), said before any call.
func TestAKeyCrossesTheNetworkOnlyUnderTLS(t *testing.T) {
	for server, want := range map[string]bool{
		"127.0.0.1:9090":              true,
		"127.1.2.3:9090":              true,
		"[::1]:9090":                  true,
		"localhost:9090":              true,
		"LOCALHOST:9090":              true,
		"dns:///localhost:9090":       true,
		"unix:///run/ledgerd.sock":    true,
		"unix:ledgerd.sock":           true,
		"unix-abstract:ledgerd":       true,
		"ledger.internal:9090":        false,
		"10.0.0.7:9090":               false,
		"dns:///ledger.internal:9090": false,
		"[2001:db8::1]:9090":          false,
		"localhost.evil.example:9090": false,
	} {
		if got := local(server); got != want {
			t.Errorf("local(%q) = %v, want %v", server, got, want)
		}
	}

	cases := []struct {
		name    string
		c       cli
		plain   bool
		refused bool
	}{
		{"remote, no TLS", cli{key: "k", server: "10.0.0.7:9090", keySource: "--key"}, false, true},
		{"remote, --plaintext", cli{key: "k", server: "10.0.0.7:9090"}, true, false},
		{"remote, TLS", cli{key: "k", server: "10.0.0.7:9090", tls: true}, false, false},
		{"remote, no key", cli{server: "10.0.0.7:9090"}, false, false},
		{"loopback, no TLS", cli{key: "k", server: "127.0.0.1:9090"}, false, false},
	}
	for _, tc := range cases {
		err := tc.c.checkTransport(tc.plain)
		if (err != nil) != tc.refused {
			t.Errorf("%s: %v", tc.name, err)
		}
	}

	var out, errw bytes.Buffer
	code := run([]string{"whoami", "--server", "10.0.0.7:9090", "--key", "pl_admin_secret"}, &out, &errw, func(string) string { return "" })
	if code != 2 || !strings.Contains(errw.String(), "past this machine and TLS is off") || !strings.Contains(errw.String(), "--plaintext") {
		t.Fatalf("exit %d, stderr %q", code, errw.String())
	}
	if strings.Contains(errw.String()+out.String(), "pl_admin_secret") {
		t.Fatalf("the key is printed: %q", errw.String())
	}

	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "PACTLEDGER_PLAINTEXT" {
				return v
			}
			return ""
		}
	}
	// A flag given beats the environment, which beats the config file.
	for _, tc := range []struct {
		name      string
		flagGiven bool
		flag      bool
		env       string
		file      bool
		want      bool
	}{
		{"nothing", false, false, "", false, false},
		{"--plaintext", true, true, "", false, true},
		{"PACTLEDGER_PLAINTEXT=1", false, false, "1", false, true},
		{"PACTLEDGER_PLAINTEXT=true", false, false, "true", false, true},
		{"the config file", false, false, "", true, true},
		{"--plaintext=false over the environment", true, false, "1", false, false},
		{"--plaintext=false over the config file", true, false, "", true, false},
		{"PACTLEDGER_PLAINTEXT=0 over the config file", false, false, "0", true, false},
		{"--plaintext over PACTLEDGER_PLAINTEXT=0", true, true, "0", false, true},
	} {
		got, err := (&cli{getenv: env(tc.env), g: globals{plaintext: tc.flag}}).plaintext(tc.flagGiven, fileConfig{Plaintext: tc.file})
		if err != nil || got != tc.want {
			t.Errorf("%s: plaintext %v (%v), want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := (&cli{getenv: env("yes please")}).plaintext(false, fileConfig{}); err == nil {
		t.Error("PACTLEDGER_PLAINTEXT=\"yes please\" is taken")
	}
	errw.Reset()
	code = run([]string{"whoami", "--server", "10.0.0.7:9090", "--key", "pl_admin_secret", "--plaintext=false"}, &out, &errw, env("1"))
	if code != 2 || !strings.Contains(errw.String(), "past this machine and TLS is off") {
		t.Fatalf("--plaintext=false with PACTLEDGER_PLAINTEXT=1: exit %d, stderr %q", code, errw.String())
	}

	// A key file others may read is warned of, and still used.
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "admin.key")
	if err := os.WriteFile(keyFile, []byte("pl_admin_secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	errw.Reset()
	run([]string{"whoami", "--server", "10.0.0.7:9090", "--key-file", keyFile}, &out, &errw, func(string) string { return "" })
	if !strings.Contains(errw.String(), "warning: the API key is read from "+keyFile) || !strings.Contains(errw.String(), "(mode 0644") {
		t.Fatalf("stderr %q: no warning of the loose key file", errw.String())
	}
}

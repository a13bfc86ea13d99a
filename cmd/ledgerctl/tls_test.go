package main

import (
	"crypto/tls"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/tlstest"
)

// ledgerctl reaches a ledgerd serving TLS with --tls --ca, and one asking
// for client certificates with --tls-cert and --tls-key.
func TestTLSThroughTheBinary(t *testing.T) {
	ca := tlstest.NewCA(t, "server CA")
	clients := tlstest.NewCA(t, "client CA")
	cert := clients.Client(t, "support lead")
	f := startWith(t, credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cert.TLS(t)}}), func(c *config.Config) {
		srv := ca.Server(t, "ledgerd")
		c.TLS = config.TLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: clients.File}
	})
	env := map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": keys["support"]}
	certArgs := []string{"--tls-cert", cert.CertFile, "--tls-key", cert.KeyFile}

	code, out, errs := exe(t, env, append([]string{"--tls", "--ca", ca.File, "show", f.rowID[:12]}, certArgs...)...)
	if code != exitOK || !strings.Contains(out, f.rowID) {
		t.Fatalf("show over mutual TLS: %d\n%s%s", code, out, errs)
	}
	// The CA alone implies --tls; the certificate can come from the environment.
	withCert := map[string]string{"PACTLEDGER_TLS_CERT": cert.CertFile, "PACTLEDGER_TLS_KEY": cert.KeyFile}
	for k, v := range env {
		withCert[k] = v
	}
	if code, out, errs := exe(t, withCert, "whoami", "--ca", ca.File); code != exitOK || !strings.Contains(out, "key     support") {
		t.Fatalf("whoami with --ca and the certificate from the environment: %d\n%s%s", code, out, errs)
	}
	refused := []struct {
		name string
		args []string
		want string
	}{
		{"no client certificate", []string{"--ca", ca.File, "whoami"}, "pass --tls-cert and --tls-key"},
		{"plaintext", []string{"whoami"}, "If it serves TLS, pass --tls and --ca FILE"},
		{"another CA", append([]string{"--ca", clients.File, "whoami"}, certArgs...), "certificate"},
	}
	for _, r := range refused {
		if code, out, errs := exe(t, env, r.args...); code != exitUnavailable || !strings.HasPrefix(errs, "ledgerctl whoami: ") || !strings.Contains(errs, r.want) {
			t.Errorf("%s: %d\n%s%s", r.name, code, out, errs)
		}
	}
	if code, _, errs := exe(t, env, "--ca", ca.File, "--tls-cert", cert.CertFile, "whoami"); code != exitUsage || !strings.Contains(errs, "go together") {
		t.Errorf("--tls-cert without --tls-key: %d %s", code, errs)
	}
}

// A plaintext client meets a TLS listener's close as EOF or as a reset,
// depending on timing: both get the TLS hint, other errors do not.
func TestClosedAtPreface(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want bool
	}{
		{`connection error: desc = "error reading server preface: EOF"`, true},
		{`connection error: desc = "error reading server preface: read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"`, true},
		{`connection error: desc = "error reading server preface: connection reset by peer"`, true},
		{`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`, false},
	} {
		if got := closedAtPreface(c.msg); got != c.want {
			t.Errorf("closedAtPreface(%q) = %v, want %v", c.msg, got, c.want)
		}
	}
}

// --tls against a ledgerd that serves plaintext says to drop it.
func TestTLSAgainstPlaintext(t *testing.T) {
	f := start(t)
	env := map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": keys["support"]}
	if code, out, errs := exe(t, env, "--tls", "--timeout", "10s", "whoami"); code != exitUnavailable || !strings.Contains(errs, "answers without TLS") || !strings.Contains(errs, "Drop --tls") {
		t.Errorf("--tls against plaintext: %d\n%s%s", code, out, errs)
	}
}

// A handshake a server ended (for want of a client certificate) reads as
// such however the client met it; a refused connection does not.
func TestClosedMidHandshake(t *testing.T) {
	for msg, want := range map[string]bool{
		`connection error: desc = "error reading server preface: remote error: tls: certificate required"`:             true,
		`connection error: desc = "transport: write tcp 127.0.0.1:1->127.0.0.1:2: write: broken pipe"`:                 true,
		`connection error: desc = "transport: write tcp 127.0.0.1:1->127.0.0.1:2: write: connection reset by peer"`:    true,
		`connection error: desc = "error reading server preface: EOF"`:                                                 true,
		`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`: false,
	} {
		if got := closedMidHandshake(msg); got != want {
			t.Errorf("closedMidHandshake(%q) = %v, want %v", msg, got, want)
		}
	}
}

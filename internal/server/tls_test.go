package server_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/tlstest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// withTLS serves both listeners with the certificate in files; with
// clientCA, client certificates of clientCA are required.
func withTLS(cert tlstest.Pair, clientCA *tlstest.CA) envOpt {
	return func(c *config.Config) {
		c.TLS = config.TLS{CertFile: cert.CertFile, KeyFile: cert.KeyFile}
		if clientCA != nil {
			c.TLS.ClientCAFile = clientCA.File
		}
	}
}

// clientConfig trusts ca and presents cert, if any.
func clientConfig(t *testing.T, ca *tlstest.CA, cert *tlstest.Pair) *tls.Config {
	tc := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		tc.Certificates = []tls.Certificate{cert.TLS(t)}
	}
	return tc
}

func httpsClient(t *testing.T, ca *tlstest.CA, cert *tlstest.Pair) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientConfig(t, ca, cert), ForceAttemptHTTP2: true}}
}

// servedName opens a new TLS connection to addr and returns the common
// name of the certificate it presents.
func servedName(t *testing.T, addr string, ca *tlstest.CA) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, clientConfig(t, ca, nil))
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// whoami calls WhoAmI over gRPC with creds and the support key.
func whoami(t *testing.T, addr string, creds credentials.TransportCredentials) (string, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+keys["support"])
	rep, err := ledgerv1.NewLedgerServiceClient(conn).WhoAmI(ctx, &ledgerv1.WhoAmIRequest{})
	return rep.GetName(), err
}

// Both listeners speak TLS with the configured certificate; plaintext and
// clients that do not trust its CA get nothing.
func TestTLSListeners(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	e := newEnv(t, jose.ES256, withTLS(ca.Server(t, "ledgerd"), nil))
	e.client = httpsClient(t, ca, nil)
	if !strings.HasPrefix(e.base, "https://") {
		t.Fatalf("base %s", e.base)
	}
	var who struct{ Name string }
	if code := e.call(t, "GET", "/v1/whoami", "support", nil, &who); code != http.StatusOK || who.Name != "support-key" {
		t.Fatalf("whoami over https: %d %+v", code, who)
	}
	if res, err := http.Get("http://" + e.srv.HTTPAddr() + "/healthz"); err == nil {
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Fatal("plaintext HTTP answered 200 on the TLS listener")
		}
	}
	if _, err := httpsClient(t, tlstest.NewCA(t, "other CA"), nil).Get(e.base + "/healthz"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client trusting another CA: %v", err)
	}
	if name, err := whoami(t, e.srv.GRPCAddr(), credentials.NewTLS(clientConfig(t, ca, nil))); err != nil || name != "support-key" {
		t.Fatalf("gRPC over TLS: %q %v", name, err)
	}
	if _, err := whoami(t, e.srv.GRPCAddr(), insecure.NewCredentials()); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext gRPC on the TLS listener: %v", err)
	}
}

// A reload serves the new certificate to new connections; a file that
// does not load keeps the previous certificate and says why.
func TestTLSReload(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	files := tlstest.Pair{CertFile: filepath.Join(dir, "server.crt"), KeyFile: filepath.Join(dir, "server.key")}
	ca.Server(t, "first").CopyTo(t, files.CertFile, files.KeyFile)
	e := newEnv(t, jose.ES256, withTLS(files, nil))
	e.client = httpsClient(t, ca, nil)
	ctx := context.Background()
	for _, addr := range []string{e.srv.HTTPAddr(), e.srv.GRPCAddr()} {
		if got := servedName(t, addr, ca); got != "first" {
			t.Fatalf("%s serves %q, want first", addr, got)
		}
	}

	second := ca.Server(t, "second")
	second.CopyTo(t, files.CertFile, files.KeyFile)
	if err := e.srv.ReloadTLS(ctx); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{e.srv.HTTPAddr(), e.srv.GRPCAddr()} {
		if got := servedName(t, addr, ca); got != "second" {
			t.Fatalf("after the reload %s serves %q, want second", addr, got)
		}
	}

	bad := []struct {
		name  string
		write func()
		want  string
	}{
		{"not PEM", func() { writeFile(t, files.CertFile, "not a certificate") }, "tls.certFile"},
		{"key of another certificate", func() { copyFile(t, ca.Server(t, "third").CertFile, files.CertFile) }, "private key does not match"},
		{"missing", func() { os.Remove(files.KeyFile) }, "tls.keyFile"},
	}
	for _, b := range bad {
		b.write()
		err := e.srv.ReloadTLS(ctx)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Fatalf("reload with %s: %v, want an error naming %q", b.name, err, b.want)
		}
		if got := servedName(t, e.srv.HTTPAddr(), ca); got != "second" {
			t.Fatalf("after a failed reload (%s) ledgerd serves %q, want second", b.name, got)
		}
	}
	if code := e.call(t, "GET", "/v1/whoami", "support", nil, nil); code != http.StatusOK {
		t.Fatalf("whoami after failed reloads: %d", code)
	}
}

// Under mutual TLS a client without a certificate of the client CA is
// refused on both listeners; one with it is served.
func TestMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "server CA")
	clients := tlstest.NewCA(t, "client CA")
	good := clients.Client(t, "provider")
	stranger := ca.Client(t, "stranger") // a valid certificate of another CA
	e := newEnv(t, jose.ES256, withTLS(ca.Server(t, "ledgerd"), clients))

	e.client = httpsClient(t, ca, &good)
	if code := e.call(t, "GET", "/v1/whoami", "support", nil, nil); code != http.StatusOK {
		t.Fatalf("with a client certificate: %d", code)
	}
	for name, cert := range map[string]*tlstest.Pair{"no certificate": nil, "another CA's certificate": &stranger} {
		if res, err := httpsClient(t, ca, cert).Get(e.base + "/healthz"); err == nil {
			res.Body.Close()
			t.Errorf("REST with %s: %s, want the handshake refused", name, res.Status)
		}
		if _, err := whoami(t, e.srv.GRPCAddr(), credentials.NewTLS(clientConfig(t, ca, cert))); status.Code(err) != codes.Unavailable {
			t.Errorf("gRPC with %s: %v, want UNAVAILABLE", name, err)
		}
	}
	if name, err := whoami(t, e.srv.GRPCAddr(), credentials.NewTLS(clientConfig(t, ca, &good))); err != nil || name != "support-key" {
		t.Fatalf("gRPC with a client certificate: %q %v", name, err)
	}
}

// The embedded Provider's receipts reach this ledgerd while its listeners
// require client certificates: the pipeline posts in memory.
func TestProviderPipelineUnderMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "server CA")
	clients := tlstest.NewCA(t, "client CA")
	s := newShop(t, withTLS(ca.Server(t, "ledgerd"), clients))
	cert := clients.Client(t, "support")
	s.client = httpsClient(t, ca, &cert)
	s.send(t, s.token(t), "m1", "cancel order A-5531")
	waitRows(t, s, "A-5531", 1)
}

// The Provider posts to a ledger at an https ledgerUrl that requires a
// client certificate, with provider.ledgerTls.
func TestProviderPostsOverMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "server CA")
	clients := tlstest.NewCA(t, "client CA")
	var mu sync.Mutex
	var seen []string // client certificate names the ledger's front saw
	var target *httputil.ReverseProxy
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.TLS.PeerCertificates[0].Subject.CommonName)
		proxy := target
		mu.Unlock()
		if proxy == nil {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	frontCert := ca.Server(t, "ledger front")
	front.TLS = &tls.Config{Certificates: []tls.Certificate{frontCert.TLS(t)}, ClientCAs: clients.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
	front.StartTLS()
	defer front.Close()

	pc := clients.Client(t, "provider-pipeline")
	s := newShop(t, func(c *config.Config) {
		c.Provider.LedgerURL = front.URL
		c.Provider.LedgerTLS = config.ClientTLS{CAFile: ca.File, CertFile: pc.CertFile, KeyFile: pc.KeyFile}
	})
	u, _ := url.Parse(s.env.base)
	mu.Lock()
	target = httputil.NewSingleHostReverseProxy(u)
	mu.Unlock()
	s.send(t, s.token(t), "m1", "cancel order A-5531")
	waitRows(t, s, "A-5531", 1)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[0] != "provider-pipeline" {
		t.Fatalf("client certificates seen: %v", seen)
	}
}

// waitRows polls until target has n rows.
func waitRows(t *testing.T, s *shop, target string, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var list struct{ Rows []Row }
		s.call(t, "GET", "/v1/rows?target="+target, "support", nil, &list)
		if len(list.Rows) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows for %s, want %d (pipeline depth %d)", len(list.Rows), target, n, s.p.PipelineDepth())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, string(b))
}

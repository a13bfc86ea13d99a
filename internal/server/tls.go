package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/pactledger/pactledger/internal/config"
)

// maxPEMBytes bounds a certificate, key or CA file.
const maxPEMBytes = 1 << 20

// certs serves the TLS configuration of the gRPC and REST listeners and
// reloads it from its files: every new connection gets the latest one that
// loaded, connections already open keep theirs.
type certs struct {
	files config.TLS
	cur   atomic.Pointer[served]
}

// served is one loaded configuration, per listener (ALPN differs).
type served struct {
	grpc, http *tls.Config
	leaf       *x509.Certificate
}

// newCerts loads the files once; an error stops start-up.
func newCerts(files config.TLS) (*certs, error) {
	c := &certs{files: files}
	if _, err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads the files again. On an error the configuration in use is
// kept and the error says which file did not load. It returns the served
// certificate.
func (c *certs) reload() (*x509.Certificate, error) {
	s, err := loadServed(c.files)
	if err != nil {
		return nil, err
	}
	c.cur.Store(s)
	return s.leaf, nil
}

func loadServed(f config.TLS) (*served, error) {
	certPEM, err := readPEM("tls.certFile", f.CertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readPEM("tls.keyFile", f.KeyFile)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls.certFile %s with tls.keyFile %s: %w", f.CertFile, f.KeyFile, err)
	}
	if now := time.Now(); now.After(pair.Leaf.NotAfter) {
		return nil, fmt.Errorf("tls.certFile %s expired at %s", f.CertFile, pair.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if f.ClientCAFile != "" {
		caPEM, err := readPEM("tls.clientCaFile", f.ClientCAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("tls.clientCaFile %s holds no PEM certificate", f.ClientCAFile)
		}
		base.ClientCAs = pool
		base.ClientAuth = tls.RequireAndVerifyClientCert
		if f.ClientAuth == "verify-if-given" {
			base.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	base.NextProtos = []string{"h2"}
	h := base.Clone()
	h.NextProtos = []string{"h2", "http/1.1"}
	return &served{grpc: base, http: h, leaf: pair.Leaf}, nil
}

func readPEM(field, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", field, path, err)
	}
	if len(b) > maxPEMBytes {
		return nil, fmt.Errorf("%s %s: larger than %d bytes", field, path, maxPEMBytes)
	}
	return b, nil
}

// grpcConfig is the listener configuration for gRPC (HTTP/2 only): each
// handshake takes the latest loaded one.
func (c *certs) grpcConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return c.cur.Load().grpc, nil
	}}
}

// httpConfig is the listener configuration for REST, HTTP/2 and HTTP/1.1.
func (c *certs) httpConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return c.cur.Load().http, nil
	}}
}

// listener wraps l in TLS with cfg, or returns l when cfg is nil.
func tlsListener(l net.Listener, cfg *tls.Config) net.Listener {
	if cfg == nil {
		return l
	}
	return tls.NewListener(l, cfg)
}

// clientTLS is the configuration a client of a ledger uses: the CA in
// c.CAFile (else the system roots) and the client certificate, if any.
func clientTLS(c config.ClientTLS) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		b, err := readPEM("caFile", c.CAFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("caFile %s holds no PEM certificate", c.CAFile)
		}
	}
	if c.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s: %w", c.CertFile, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

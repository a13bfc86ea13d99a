package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/pactledger/pactledger/internal/config"
)

// healthcheckUsage heads `ledgerd healthcheck --help`.
const healthcheckUsage = `usage: ledgerd healthcheck [--config FILE] [--url URL] [--api-key-file FILE] [--ca FILE] [--cert FILE --key FILE]

Exit 0 when a running ledgerd is ready (GET /readyz answers 200). Else
exit 1 with /readyz's answer, whose errors' text is shown to a support,
auditor or admin key only: pass one in --api-key-file to have it.

flags:
`

// healthcheck asks a running ledgerd whether it is ready (GET /readyz) and
// returns nil when it answers 200. Container images without a shell or
// curl run it as their health check:
//
//	ledgerd healthcheck [--config FILE] [--url URL] [--api-key-file FILE] [--ca FILE] [--cert FILE --key FILE]
func healthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ledgerd healthcheck", flag.ContinueOnError)
	var (
		cfgPath = fs.String("config", "", "ledgerd's configuration `FILE`: where it listens and its TLS certificate")
		target  = fs.String("url", "", "the readiness `URL` (default from listen.http: http://127.0.0.1:8080/readyz, https with tls)")
		caFile  = fs.String("ca", "", "trust the CA in `FILE` (PEM) for ledgerd's certificate (default: exactly the configured tls.certFile)")
		cert    = fs.String("cert", "", "client certificate `FILE` (PEM), for a ledgerd that requires one")
		key     = fs.String("key", "", "the client certificate's key `FILE`")
		timeout = fs.Duration("timeout", 5*time.Second, "give up after `DURATION`")
		keyFile = fs.String("api-key-file", "", "a support, auditor or admin key's `FILE`, sent so that /readyz shows its errors' text (default: none sent)")
	)
	if err := parseFlags(fs, args, healthcheckUsage, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("healthcheck: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	url := *target
	if url == "" {
		url = readyURL(cfg)
	}
	tc, err := healthTLS(cfg.TLS, *caFile, *cert, *key)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	if *keyFile != "" {
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			return fmt.Errorf("healthcheck: --api-key-file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s is not ready: %s %s", url, res.Status, bytes.TrimSpace(body))
	}
	_, err = fmt.Fprintf(stdout, "ready: %s\n", url)
	return err
}

// readyURL is /readyz on listen.http, reached on loopback when ledgerd
// listens on every address.
func readyURL(cfg config.Config) string {
	host, port, err := net.SplitHostPort(cfg.Listen.HTTP)
	if err != nil {
		host, port = "127.0.0.1", "8080"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	scheme := "http"
	if cfg.TLS.On() {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/readyz"
}

// healthTLS trusts caFile's CAs, or else exactly the certificate ledgerd
// is configured to serve (the health check runs beside it and reads the
// same file), and presents a client certificate when given one.
func healthTLS(t config.TLS, caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case caFile != "":
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read --ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--ca %s holds no PEM certificate", caFile)
		}
	case t.On():
		leaf, err := firstCert(t.CertFile)
		if err != nil {
			return nil, err
		}
		// The name is not checked: the certificate itself is.
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, leaf) {
				return errors.New("ledgerd presented another certificate than tls.certFile (pass --ca to trust a CA instead)")
			}
			return nil
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--cert and --key go together")
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// firstCert is the DER of the first certificate in a PEM file.
func firstCert(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tls.certFile: %w", err)
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("tls.certFile %s holds no PEM certificate", path)
		}
		if strings.EqualFold(blk.Type, "CERTIFICATE") {
			return blk.Bytes, nil
		}
	}
}

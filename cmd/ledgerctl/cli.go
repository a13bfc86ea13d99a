package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// answersHTTP reports whether a transport error says the server spoke
// HTTP/1 where gRPC (HTTP/2) was expected.
func answersHTTP(msg string) bool {
	for _, s := range []string{"frame too large", "malformed HTTP", "http2: failed reading the frame"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// clientTLS is the TLS configuration for ledgerd: the system roots, or
// only the CA in caFile when one is given, and the client certificate in
// certFile and keyFile when ledgerd asks for one.
func clientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if (certFile == "") != (keyFile == "") {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	if caFile == "" {
		return tc, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
	}
	tc.RootCAs = pool
	return tc, nil
}

var relative = regexp.MustCompile(`^([0-9]+)([smhdw])$`)

// parseTime reads a time flag's value: RFC 3339, a date, "now", or a time
// before now ("90m", "1h", "7d", "2w", or any Go duration).
func parseTime(name, v string) (*timestamppb.Timestamp, error) {
	return parseTimeAt(name, v, time.Now())
}

func parseTimeAt(name, v string, now time.Time) (*timestamppb.Timestamp, error) {
	if v == "" {
		return nil, nil
	}
	if v == "now" {
		return timestamppb.New(now), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return timestamppb.New(t), nil
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		return timestamppb.New(t), nil
	}
	if m := relative.FindStringSubmatch(v); m != nil {
		n, err := strconv.Atoi(m[1])
		if err == nil && n <= 100*365*24*3600 {
			unit := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour}[m[2]]
			if d := time.Duration(n) * unit; d/unit == time.Duration(n) {
				return timestamppb.New(now.Add(-d)), nil
			}
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return timestamppb.New(now.Add(-d)), nil
	}
	return nil, usagef("--%s %q: want RFC 3339 (2026-10-07T13:00:00Z), a date (2026-10-07), now or a time ago (90m, 1h, 7d, 2w)", name, v)
}

// whoami prints the name and roles of the key in use.
func (c *cli) whoami() error {
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.WhoAmI(ctx, &ledgerv1.WhoAmIRequest{})
	if err != nil {
		return err
	}
	switch c.output {
	case "json":
		return c.printJSON(rep)
	case "csv":
		return c.printList(listing{header: []string{"key", "roles", "from", "server", "server version"},
			rows: [][]string{{rep.GetName(), strings.Join(rep.GetRoles(), " "), c.keySource, c.server, rep.GetServerVersion()}}}, "")
	}
	w := c.table()
	printf(w, "key\t%s\n", rep.GetName())
	printf(w, "roles\t%s\n", strings.Join(rep.GetRoles(), ", "))
	printf(w, "from\t%s\n", c.keySource)
	printf(w, "server\t%s (ledgerd %s)\n", c.server, orDash(rep.GetServerVersion()))
	return w.Flush()
}

package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// globalValueFlags and globalBoolFlags are the global flags, recognized
// anywhere on the line (before a "--").
var (
	globalValueFlags = map[string]bool{"server": true, "http": true, "key": true, "key-file": true, "config": true, "ca": true, "timeout": true, "tls-cert": true, "tls-key": true}
	globalBoolFlags  = map[string]bool{"tls": true, "json": true, "version": true}
	// commandValueFlags take a value that must not be read as a global
	// flag (--note --json is a note reading "--json").
	commandValueFlags = map[string]bool{"order": true, "target": true, "principal": true, "grant": true, "agent": true, "status": true,
		"since": true, "until": true, "limit": true, "note": true, "as": true, "row": true, "sample": true, "proof-dir": true,
		"at": true, "page": true, "from": true, "log-key": true, "settle": true, "event": true, "out": true, "wait": true, "save": true}
)

// flagName returns the name of a flag argument ("--json", "-json",
// "--server=x") and whether it carries its value after "=".
func flagName(arg string) (name string, inline bool) {
	if len(arg) < 2 || arg[0] != '-' || arg == "--" {
		return "", false
	}
	name = strings.TrimLeft(arg, "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		return name[:i], true
	}
	return name, false
}

// splitGlobals takes the global flags out of args wherever they stand, so
// "ledgerctl lookup --order A-1 --json" works as "ledgerctl --json lookup
// --order A-1". Everything after "--" is left alone.
func splitGlobals(args []string) (globals, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return globals, append(rest, args[i:]...)
		}
		name, inline := flagName(a)
		switch {
		case globalBoolFlags[name]:
			globals = append(globals, a)
		case globalValueFlags[name]:
			globals = append(globals, a)
			if !inline && i+1 < len(args) {
				i++
				globals = append(globals, args[i])
			}
		case commandValueFlags[name] && !inline && i+1 < len(args):
			rest = append(rest, a, args[i+1])
			i++
		default:
			rest = append(rest, a)
		}
	}
	return globals, rest
}

// wantsHelp reports whether a command's arguments ask for its help.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// printHelp prints one command's lines of the usage, and the global flags.
func printHelp(stdout, stderr io.Writer, cmd string) int {
	var lines []string
	in := false
	for _, l := range strings.Split(usage, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   ") && f[0] == cmd:
			in = true
			lines = append(lines, l)
		case in && strings.HasPrefix(l, "   "):
			lines = append(lines, l)
		default:
			in = false
		}
	}
	if len(lines) == 0 {
		fmt.Fprintf(stderr, "ledgerctl: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	fmt.Fprintf(stdout, "usage: ledgerctl %s ...\n\n%s\n", cmd, strings.Join(lines, "\n"))
	if roles, ok := commandRoles[cmd]; ok {
		fmt.Fprintf(stdout, "\nRole: %s.\n", roles)
	}
	_, globalsHelp, _ := strings.Cut(usage, "\nGlobal flags")
	fmt.Fprintf(stdout, "\nGlobal flags%s", globalsHelp)
	return exitOK
}

// commandRoles names the roles each command needs (API.md), for help and
// for a refused call.
var commandRoles = map[string]string{
	"lookup": "support, auditor or admin", "show": "support, auditor or admin", "evidence": "support, auditor or admin",
	"verify": "support, auditor or admin", "dispute": "support or admin", "drill": "support or admin",
	"drills": "support, auditor or admin", "grant": "support, auditor or admin", "revoke": "writer or admin",
	"incidents": "support, auditor or admin (closing: admin)", "sweep": "admin (a dry run: auditor too)",
	"fsck": "auditor or admin (--restore: admin)", "outbox": "admin", "proof": "support, auditor or admin (proof verify: none)",
	"log": "none (log audit compares rows with a support, auditor or admin key)", "whoami": "any valid key",
}

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

// parseTime reads a --since/--until value: RFC 3339, a date, or a time
// before now ("90m", "1h", "7d", "2w", or any Go duration).
func parseTime(name, v string) (*timestamppb.Timestamp, error) {
	return parseTimeAt(name, v, time.Now())
}

func parseTimeAt(name, v string, now time.Time) (*timestamppb.Timestamp, error) {
	if v == "" {
		return nil, nil
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
	return nil, usagef("--%s %q: want RFC 3339 (2026-10-07T13:00:00Z), a date (2026-10-07) or a time ago (90m, 1h, 7d, 2w)", name, v)
}

// whoami prints the name and roles of the key in use.
func (c *cli) whoami(args []string) error {
	if len(args) > 0 {
		return usagef("whoami takes no arguments")
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.WhoAmI(ctx, &ledgerv1.WhoAmIRequest{})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	w := c.table()
	fmt.Fprintf(w, "key\t%s\n", rep.GetName())
	fmt.Fprintf(w, "roles\t%s\n", strings.Join(rep.GetRoles(), ", "))
	fmt.Fprintf(w, "from\t%s\n", c.keySource)
	fmt.Fprintf(w, "server\t%s (ledgerd %s)\n", c.server, orDash(rep.GetServerVersion()))
	return w.Flush()
}

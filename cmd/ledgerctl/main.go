// Command ledgerctl is the support lead's and auditor's tool: it finds rows,
// shows their evidence, re-runs the verifier, appends dispute events and
// runs dispute drills, talking to ledgerd over gRPC.
//
//	ledgerctl COMMAND [flags] [args]   (global flags anywhere)
//
// Run `ledgerctl help` for the commands, `ledgerctl help COMMAND` for one,
// and `ledgerctl completion bash|zsh|fish` for shell completion.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	"github.com/pactledger/pactledger/internal/config"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// Exit codes.
const (
	exitOK          = 0
	exitCheckFailed = 1 // a drill pull failed, or a verification differs
	exitUsage       = 2
	exitNotFound    = 3
	exitAuth        = 4 // bad key, or a key without the role
	exitUnavailable = 5 // ledgerd unreachable
	exitError       = 6
	exitNoLeaf      = 7 // the row store holds a row or event the log has no leaf for, and none is queued
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// fileConfig is the optional ledgerctl configuration file.
type fileConfig struct {
	Server  string `yaml:"server"`
	HTTP    string `yaml:"http"`
	Key     string `yaml:"key"`
	KeyFile string `yaml:"keyFile"`
	TLS     bool   `yaml:"tls"`
	// Plaintext lets the key go to a ledgerd past this machine without
	// TLS (--plaintext).
	Plaintext bool   `yaml:"plaintext"`
	CA        string `yaml:"ca"`
	TLSCert   string `yaml:"tlsCert"`
	TLSKey    string `yaml:"tlsKey"`
	Output    string `yaml:"output"`
}

// globals are the global flags' values.
type globals struct {
	server, http, key, keyFile, config, ca, tlsCert, tlsKey, output string
	tls, plaintext, json                                            bool
	timeout                                                         time.Duration
}

type cli struct {
	out, errw io.Writer
	getenv    func(string) string
	g         globals
	output    string // table, json or csv
	json      bool   // output is json
	timeout   time.Duration
	server    string
	httpBase  string
	tls       bool
	tlsConf   *tls.Config // nil without TLS
	key       string
	keySource string // where the key came from
	cmd       string // the command being run, for error messages
	roles     string // the roles it needs
	conn      *grpc.ClientConn
	c         ledgerv1.LedgerServiceClient
}

// usageError is a command-line mistake: exit 2 with the message.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// errCheckFailed is a completed command whose result failed (exit 1).
var errCheckFailed = errors.New("check failed")

// errNoKey: the command needs an API key and none was given (exit 4).
var errNoKey = errors.New("no API key: pass --key or --key-file, set PACTLEDGER_KEY or PACTLEDGER_KEY_FILE, or put key/keyFile in the config file")

// errKeyFile: the key file named cannot be read (exit 4, a key problem,
// as its contents not being a key is).
var errKeyFile = errors.New("cannot read the key file")

// errBadKey: the key given is not an API key's text (exit 4).
var errBadKey = errors.New("does not hold an API key (one line of printable text without spaces)")

// isKeyText reports whether k can be an API key: printable ASCII without
// spaces, as ledgerd's keys are and as a gRPC header carries them ("" is
// no key, which connect refuses on its own).
func isKeyText(k string) bool {
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] > '~' {
			return false
		}
	}
	return true
}

// plaintext reports whether the key may go without TLS to a ledgerd past
// this machine. As for every setting, a flag given (--plaintext, or
// --plaintext=false) beats PACTLEDGER_PLAINTEXT (1 or true, 0 or false),
// which beats the config file's plaintext.
func (c *cli) plaintext(flagGiven bool, fc fileConfig) (bool, error) {
	if flagGiven {
		return c.g.plaintext, nil
	}
	switch v := c.getenv("PACTLEDGER_PLAINTEXT"); strings.ToLower(v) {
	case "":
		return fc.Plaintext, nil
	case "1", "true":
		return true, nil
	case "0", "false":
		return false, nil
	default:
		return false, usagef("PACTLEDGER_PLAINTEXT=%q: want 1 or true to send the API key without TLS, 0 or false not to", v)
	}
}

// checkTransport refuses to send a key to a ledgerd past this machine
// without TLS unless plaintext says to.
func (c *cli) checkTransport(plaintext bool) error {
	if c.key == "" || c.tls || plaintext || local(c.server) {
		return nil
	}
	return usagef("--server %s is past this machine and TLS is off: the API key (%s) would cross the network readable by anyone on the way; pass --tls (with --ca FILE for a private CA), "+
		"or --plaintext to send it unencrypted anyway (only across a link you trust, such as a tunnel or a private network to a proxy that adds TLS)", c.server, c.keySource)
}

// local reports whether the gRPC target server is on this machine: a Unix
// socket, localhost, or a loopback address. A name is taken at its word:
// one that resolves to a loopback address is still past the machine
// (config.LoopbackHost).
func local(server string) bool {
	target := server
	if scheme, rest, ok := strings.Cut(server, ":///"); ok {
		if scheme == "unix" {
			return true
		}
		target = rest
	}
	if strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") {
		return true
	}
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		host = target
	}
	return config.LoopbackHost(strings.Trim(host, "[]"))
}

// checkServer refuses a --server that is not a gRPC target: a URL, or a
// host without its port (which gRPC would dial at 443).
func checkServer(server string) error {
	if strings.HasPrefix(server, "http://") || strings.HasPrefix(server, "https://") {
		return usagef("--server %s: want ledgerd's gRPC HOST:PORT, not a URL (such as 127.0.0.1:9090; --tls for TLS)", server)
	}
	if strings.Contains(server, ":///") || strings.HasPrefix(server, "unix:") {
		return nil // a gRPC target with its scheme, such as dns:///host:9090 or unix:///path
	}
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		host = strings.TrimSuffix(strings.TrimPrefix(server, "["), "]")
	}
	if err != nil || port == "" {
		return usagef("--server %s: want HOST:PORT, such as %s (ledgerd's default gRPC port is 9090)", server, net.JoinHostPort(host, "9090"))
	}
	return nil
}

// run runs ledgerctl with args and returns its exit code.
func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	c := &cli{out: stdout, errw: stderr, getenv: getenv}
	root := c.root()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if c.conn != nil {
		c.conn.Close()
	}
	return c.exit(err)
}

// connect reads the configuration file, the environment and the global
// flags (a flag beats the environment, which beats the file), picks the
// API key and prepares the connection to ledgerd. It dials lazily: help,
// completion and offline commands never reach it.
func (c *cli) connect(cmd *cobra.Command) error {
	var fc fileConfig
	path := c.g.config
	if path == "" {
		if home, err := os.UserHomeDir(); err == nil {
			if p := filepath.Join(home, ".config", "pactledger", "ledgerctl.yaml"); fileExists(p) {
				path = p
			}
		}
	}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return usagef("read config: %v", err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
			return usagef("config %s: %v", path, err)
		}
		// A file the configuration names is found beside it, as the
		// configuration's author sees it, wherever ledgerctl runs.
		for _, f := range []*string{&fc.KeyFile, &fc.CA, &fc.TLSCert, &fc.TLSKey} {
			if *f != "" && !filepath.IsAbs(*f) {
				*f = filepath.Join(filepath.Dir(path), *f)
			}
		}
	}
	if err := c.setOutput(cmd, fc.Output); err != nil {
		return err
	}
	if c.g.timeout <= 0 {
		return usagef("--timeout %s: give each call a time above zero, such as 30s", c.g.timeout)
	}
	c.timeout = c.g.timeout
	c.server = first(c.g.server, c.getenv("PACTLEDGER_SERVER"), fc.Server, "127.0.0.1:9090")
	if err := checkServer(c.server); err != nil {
		return err
	}
	c.httpBase = first(c.g.http, c.getenv("PACTLEDGER_HTTP"), fc.HTTP)
	ca := first(c.g.ca, c.getenv("PACTLEDGER_CA"), fc.CA)
	cert := first(c.g.tlsCert, c.getenv("PACTLEDGER_TLS_CERT"), fc.TLSCert)
	certKey := first(c.g.tlsKey, c.getenv("PACTLEDGER_TLS_KEY"), fc.TLSKey)
	c.tls = c.g.tls || fc.TLS || ca != "" || cert != ""
	k, src, keyFile, err := resolveKey(c.g.key, c.g.keyFile, c.getenv, fc, path)
	if err != nil {
		return err // a usage error, or a key file that cannot be read
	}
	if !isKeyText(k) {
		return fmt.Errorf("%s %w; is it the right key or file?", src, errBadKey)
	}
	c.key, c.keySource = k, src
	if keyFile != "" {
		// A key others may read acts for them too: said, not refused, as
		// ledgerd says of its own key files.
		for _, loose := range config.LooseSecretFiles([]string{keyFile}) {
			printf(c.errw, "ledgerctl: warning: the API key is read from %s, and others than its owner may get at it: %s\n", keyFile, loose)
		}
	}
	plain, err := c.plaintext(cmd.Flags().Changed("plaintext"), fc)
	if err != nil {
		return err
	}
	if err := c.checkTransport(plain); err != nil {
		return err
	}
	creds := insecure.NewCredentials()
	if c.tls {
		tc, err := clientTLS(ca, cert, certKey)
		if err != nil {
			return err
		}
		creds = credentials.NewTLS(tc)
		c.tlsConf = tc
	}
	c.conn, err = grpc.NewClient(c.server, grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxAnswerBytes)))
	if err != nil {
		return usagef("server address %q: %v", c.server, err)
	}
	c.c = ledgerv1.NewLedgerServiceClient(c.conn)
	if c.key == "" && cmd.Annotations[annKeyOptional] == "" {
		return errNoKey
	}
	return nil
}

// maxAnswerBytes is the largest answer ledgerctl takes. A ledger keeps its
// read answers within a few MiB; one older than that bound may answer a
// page of large rows past gRPC's default 4 MiB.
const maxAnswerBytes = 64 << 20

// setOutput settles the output format: --output, --json (json), the
// config file's output, else table; csv only for commands that print a
// list.
func (c *cli) setOutput(cmd *cobra.Command, fromFile string) error {
	out := first(c.g.output, fromFile, "table")
	if c.g.json {
		if c.g.output != "" && c.g.output != "json" {
			return usagef("--json and --output %s: pass one", c.g.output)
		}
		out = "json"
	}
	switch out {
	case "table", "json":
	case "csv":
		if cmd.Annotations[annCSV] == "" {
			return usagef("--output csv: %s prints a record, not a list; use --output table or json", c.cmd)
		}
	default:
		return usagef("--output %q: want table, json or csv", out)
	}
	c.output, c.json = out, out == "json"
	return nil
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// resolveKey picks the API key: a flag beats the environment, which beats
// the config file (at configPath); at each level the key itself beats a
// key file. It returns the key, where it came from, for whoami and error
// messages, and the file it was read from ("" for a flag or the
// environment's key itself; configPath for the config file's key).
func resolveKey(flagKey, flagFile string, getenv func(string) string, fc fileConfig, configPath string) (key, source, file string, err error) {
	if flagKey != "" && flagFile != "" {
		return "", "", "", usagef("--key and --key-file both given: pass one")
	}
	levels := []struct{ key, file, keyName, fileName, keyIn string }{
		{flagKey, flagFile, "--key", "--key-file", ""},
		{getenv("PACTLEDGER_KEY"), getenv("PACTLEDGER_KEY_FILE"), "PACTLEDGER_KEY", "PACTLEDGER_KEY_FILE", ""},
		{fc.Key, fc.KeyFile, "the config file's key", "the config file's keyFile", configPath},
	}
	for _, l := range levels {
		if l.key != "" {
			return strings.TrimSpace(l.key), l.keyName, l.keyIn, nil
		}
		if l.file != "" {
			b, err := os.ReadFile(l.file)
			if err != nil {
				return "", "", "", fmt.Errorf("%w (%s): %w", errKeyFile, l.fileName, err)
			}
			return strings.TrimSpace(string(b)), l.fileName + " " + l.file, l.file, nil
		}
	}
	return "", "", "", nil
}

// exit prints err in plain words, naming the command, and returns the
// exit code.
func (c *cli) exit(err error) int {
	if err == nil {
		return exitOK
	}
	name := "ledgerctl"
	if c.cmd != "" {
		name += " " + c.cmd
	}
	var ue usageError
	switch {
	case errors.As(err, &ue):
		printf(c.errw, "%s: %s\n", name, ue.msg)
		return exitUsage
	case errors.Is(err, errCheckFailed):
		return exitCheckFailed
	case errors.Is(err, errNoKey), errors.Is(err, errBadKey), errors.Is(err, errKeyFile):
		printf(c.errw, "%s: %v\n", name, err)
		return exitAuth
	}
	st, ok := status.FromError(err)
	if !ok {
		printf(c.errw, "%s: %v\n", name, err)
		if strings.HasPrefix(err.Error(), "unknown command") {
			return exitUsage
		}
		return exitError
	}
	switch st.Code() {
	case codes.Unauthenticated:
		printf(c.errw, "%s: ledgerd rejected the API key from %s (%s). Check --key, --key-file, PACTLEDGER_KEY or the key file.\n", name, orDash(c.keySource), st.Message())
		return exitAuth
	case codes.PermissionDenied:
		printf(c.errw, "%s: not allowed: %s%s\n", name, st.Message(), c.roleHint())
		return exitAuth
	case codes.NotFound:
		msg := st.Message()
		if !strings.Contains(msg, "not found") {
			msg = "not found: " + msg
		}
		printf(c.errw, "%s: %s\n", name, msg)
		return exitNotFound
	case codes.InvalidArgument:
		printf(c.errw, "%s: %s\n", name, st.Message())
		return exitUsage
	case codes.FailedPrecondition:
		printf(c.errw, "%s: %s\n", name, st.Message())
		if noLeaf(err) {
			return exitNoLeaf
		}
		return exitError
	case codes.Unavailable, codes.DeadlineExceeded:
		switch {
		case logDiverged(err):
			printf(c.errw, "%s: ledgerd at %s answers, but serves no checkpoint or proof of its Merkle log, and no retry brings one: %s\n", name, c.server, st.Message())
			return exitError
		case hasReason(err, codes.Unavailable, "SWEEPER_LEASE_HELD"), hasReason(err, codes.Unavailable, "LEASE_LOST"):
			// ledgerd answered: another replica runs the job, or this one
			// lost its lease during it.
			printf(c.errw, "%s: ledgerd at %s: %s\n", name, c.server, st.Message())
		case answersHTTP(st.Message()):
			printf(c.errw, "%s: %s answers HTTP, not gRPC (%s). --server wants ledgerd's gRPC address (default port 9090), not its REST port (8080).\n", name, c.server, st.Message())
		case c.tls && !c.hasClientCert() && closedMidHandshake(st.Message()):
			// A listener that requires client certificates ends the
			// handshake of a client without one: the alert, or a closed
			// connection, depending on timing.
			printf(c.errw, "%s: %s closed the TLS connection (%s): if it asks for client certificates, pass --tls-cert and --tls-key (or PACTLEDGER_TLS_CERT and PACTLEDGER_TLS_KEY).\n", name, c.server, st.Message())
		case c.tls && strings.Contains(st.Message(), "first record does not look like a TLS handshake"):
			printf(c.errw, "%s: %s answers without TLS (%s). Drop --tls and --ca, or point --server at a TLS listener.\n", name, c.server, st.Message())
		case !c.tls && closedAtPreface(st.Message()):
			printf(c.errw, "%s: cannot reach ledgerd at %s: it closed the connection (%s). If it serves TLS, pass --tls and --ca FILE.\n", name, c.server, st.Message())
		default:
			printf(c.errw, "%s: cannot reach ledgerd at %s: %s. Is it running? (--server, PACTLEDGER_SERVER)\n", name, c.server, st.Message())
		}
		return exitUnavailable
	}
	printf(c.errw, "%s: %s: %s\n", name, st.Code(), st.Message())
	return exitError
}

// closedMidHandshake reports whether a gRPC error says the server ended
// the connection while it was being set up: the TLS alert that asks for
// a client certificate, or, depending on timing, a reset, a broken pipe
// or an EOF before the server's preface (a server that is down refuses
// the connection instead).
func closedMidHandshake(msg string) bool {
	return closedAtPreface(msg) || strings.Contains(msg, "certificate required") ||
		strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset by peer")
}

// hasClientCert reports whether ledgerctl presents a client certificate.
func (c *cli) hasClientCert() bool {
	return c.tlsConf != nil && (len(c.tlsConf.Certificates) > 0 || c.tlsConf.GetClientCertificate != nil)
}

// closedAtPreface reports whether a gRPC error says the server closed
// the connection before its HTTP/2 preface: what a TLS listener does to a
// plaintext client, with EOF or a reset depending on timing.
func closedAtPreface(msg string) bool {
	_, after, ok := strings.Cut(msg, "server preface: ")
	return ok && (strings.HasPrefix(after, "EOF") || strings.Contains(after, "connection reset by peer"))
}

// roleHint names the roles the running command needs, for a refusal.
func (c *cli) roleHint() string {
	if c.roles == "" {
		return ""
	}
	return " (" + c.cmd + " needs a key with the role " + c.roles + ")"
}

// ctx returns a call context with the key and the timeout.
func (c *cli) ctx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	if c.key == "" {
		return ctx, cancel // public calls only (the log's checkpoints and consistency proofs)
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.key), cancel
}

// pages calls fetch for the page at token, then, with all, for each next
// page until the last, each call under its own deadline. fetch keeps what
// a page holds and returns the page's next token; pages returns the token
// after the last page fetched ("" at the end).
func (c *cli) pages(all bool, token string, fetch func(ctx context.Context, token string) (string, error)) (string, error) {
	for {
		ctx, cancel := c.ctx()
		next, err := fetch(ctx, token)
		cancel()
		if err != nil || !all || next == "" {
			return next, err
		}
		token = next
	}
}

// pagesUntil is pages for a list whose pages the ledger may end early for
// their size or for the entries it read, with a token (rows, drill
// reports, access records): without all it reads on until it has limit
// items, or has made maxUntilCalls calls (a listing filtered by two
// values reads a bounded number of entries a call, and rows posted under
// another's name can leave many pages empty). fetch asks for a page of at
// most want items, keeps what it holds and returns how many it held and
// its next token.
func (c *cli) pagesUntil(all bool, token string, limit int, fetch func(ctx context.Context, token string, want int) (int, string, error)) (string, error) {
	got := 0
	for calls := 1; ; calls++ {
		want := limit
		if !all {
			want = limit - got
		}
		ctx, cancel := c.ctx()
		n, next, err := fetch(ctx, token, want)
		cancel()
		got += n
		if err != nil || next == "" || !all && (got >= limit || calls >= maxUntilCalls) {
			return next, err
		}
		token = next
	}
}

// maxUntilCalls bounds the calls pagesUntil makes without all: each reads
// at most 10,000 index entries on the server (docs/api.md, ListRows).
const maxUntilCalls = 10

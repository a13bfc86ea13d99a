// Command ledgerctl is the support lead's and auditor's tool: it finds rows,
// shows their evidence, re-runs the verifier, appends dispute events and
// runs dispute drills, talking to ledgerd over gRPC.
//
//	ledgerctl [global flags] COMMAND [flags] [args]
//
// Run `ledgerctl help` for the commands.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

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
)

const usage = `usage: ledgerctl [global flags] COMMAND [flags] [args]

Commands:
  lookup   --order ID | --principal P | --grant G | --agent A   find rows (newest first)
           [--status authorized|unauthorized|incident|duplicate] [--since T] [--until T] [--limit N]
  show     ROW                      one row: parties, scopes, actions, verifier checks, disputes
  evidence ROW [--full]             the stored receipt, tokens, action log and where each object is held
  verify   ROW                      re-run every check on the stored bytes (exit 1 if the result differs)
  dispute  open|resolve ROW --note TEXT [--as customer-authorized|incident|other]
  drill    TARGET [--principal P]   dispute drill on an order id (exit 1 if a pull fails)
  drill    --row ROW | --principal P
  drill    --monthly [--sample N]   the monthly drill on random rows
           [--proof-dir DIR]        with any drill: write each drilled row's proof bundle to DIR/ROW.proof
  drills   [ID] [--limit N]         stored drill reports, newest first; or one report
  grant    GRANT_ID                 a grant's rows, scopes and revocation
  revoke   GRANT_ID [--at TIME] [--note TEXT]   record a revocation (writer, admin)
  incidents [ID]                    incidents, newest first; or one with the platform's other rows that day
  incidents close ID --note TEXT    close an incident: evidence kept until close + 12 months (admin)
  sweep    [--dry-run]              remove rows past retention now (admin); --dry-run lists what would go
  fsck     [--restore]              compare every row's evidence with its write-time hash and its
                                    write-once copy, every row with its leaf in the Merkle log, and
                                    the tree rebuilt from the leaves with the latest checkpoint
                                    (exit 1 if any differs); --restore puts restorable rows
                                    back from the write-once copy (admin)
  outbox   [--limit N] [--page T]   evidence outbox depth, oldest entry's age, dead letters (admin)
  outbox   retry KEY | retry --all  move dead letters back into the outbox (admin)

The Merkle log (see docs/design/015-merkle-log.md):
  log checkpoint [--log-key KEY] [--save FILE]   fetch the latest signed checkpoint and verify it
                                    (with KEY, or the key the server reports); no API key needed
  log audit --from FILE [--log-key KEY] [--all] [--settle D]   prove the checkpoint kept in FILE is a
                                    prefix of the latest, read every leaf since (--all: every leaf) from
                                    the tiles (--http), compare each with the rows the API key can read
                                    and check every readable row has a leaf (exit 1 on a mismatch)
  proof    ROW [--event dispute/N|incident-close] [--out FILE] [--wait D]   the row's proof bundle
                                    (JSON, to stdout or FILE); verify it offline with proof verify
  proof    verify FILE --log-key KEY   check a proof bundle offline: no server, no API key

Global flags (before the command):
  --server HOST:PORT   ledgerd gRPC address (env PACTLEDGER_SERVER; default 127.0.0.1:9090)
  --http URL           ledgerd REST base for the log's tiles (env PACTLEDGER_HTTP; default the
                       --server host on port 8080, https with --tls)
  --key KEY            API key (env PACTLEDGER_KEY)
  --key-file FILE      file holding the API key (env PACTLEDGER_KEY_FILE)
  --config FILE        YAML with server, http, key or keyFile, tls (default ~/.config/pactledger/ledgerctl.yaml)
  --tls                use TLS to reach ledgerd
  --json               print the server's reply as JSON, for scripts
  --timeout DURATION   per-call timeout (default 60s)

Exit codes: 0 ok, 1 a check failed, 2 usage, 3 not found, 4 bad key or role, 5 ledgerd unreachable, 6 other error.
`

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
}

type cli struct {
	out, errw io.Writer
	json      bool
	timeout   time.Duration
	server    string
	httpBase  string
	tls       bool
	key       string
	conn      *grpc.ClientConn
	c         ledgerv1.LedgerServiceClient
}

// usageError is a command-line mistake: exit 2 with the message.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// checkFailed is a completed command whose result failed (exit 1).
var errCheckFailed = errors.New("check failed")

func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("ledgerctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		server  = fs.String("server", "", "")
		httpURL = fs.String("http", "", "")
		key     = fs.String("key", "", "")
		keyFile = fs.String("key-file", "", "")
		cfgPath = fs.String("config", "", "")
		useTLS  = fs.Bool("tls", false, "")
		asJSON  = fs.Bool("json", false, "")
		timeout = fs.Duration("timeout", 60*time.Second, "")
	)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "ledgerctl: %v\n\n%s", err, usage)
		return exitUsage
	}
	rest := fs.Args()
	if len(rest) == 0 || rest[0] == "help" || rest[0] == "-h" || rest[0] == "--help" {
		fmt.Fprint(stdout, usage)
		if len(rest) == 0 {
			return exitUsage
		}
		return exitOK
	}

	var fc fileConfig
	path := *cfgPath
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
			fmt.Fprintf(stderr, "ledgerctl: read config: %v\n", err)
			return exitUsage
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
			fmt.Fprintf(stderr, "ledgerctl: config %s: %v\n", path, err)
			return exitUsage
		}
	}
	c := &cli{out: stdout, errw: stderr, json: *asJSON, timeout: *timeout}
	c.server = first(*server, getenv("PACTLEDGER_SERVER"), fc.Server, "127.0.0.1:9090")
	c.httpBase = first(*httpURL, getenv("PACTLEDGER_HTTP"), fc.HTTP)
	c.tls = *useTLS || fc.TLS
	k, err := resolveKey(*key, *keyFile, getenv, fc)
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl: %v\n", err)
		return exitUsage
	}
	c.key = k
	creds := insecure.NewCredentials()
	if *useTLS || fc.TLS {
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	c.conn, err = grpc.NewClient(c.server, grpc.WithTransportCredentials(creds))
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl: server address %q: %v\n", c.server, err)
		return exitUsage
	}
	defer c.conn.Close()
	c.c = ledgerv1.NewLedgerServiceClient(c.conn)

	cmds := map[string]func([]string) error{
		"lookup": c.lookup, "show": c.show, "evidence": c.evidence, "verify": c.verify,
		"dispute": c.dispute, "drill": c.drill, "drills": c.drills,
		"grant": c.grant, "revoke": c.revoke, "fsck": c.fsck, "incidents": c.incidents, "sweep": c.sweep,
		"outbox": c.outbox, "log": c.logCmd, "proof": c.proof,
	}
	cmd, ok := cmds[rest[0]]
	if !ok {
		fmt.Fprintf(stderr, "ledgerctl: unknown command %q\n\n%s", rest[0], usage)
		return exitUsage
	}
	if c.key == "" && !keyOptional(rest) {
		fmt.Fprintln(stderr, "ledgerctl: no API key: pass --key, --key-file, set PACTLEDGER_KEY or put key/keyFile in the config file")
		return exitAuth
	}
	return c.exit(cmd(rest[1:]))
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

func resolveKey(flagKey, flagFile string, getenv func(string) string, fc fileConfig) (string, error) {
	if k := first(flagKey, getenv("PACTLEDGER_KEY")); k != "" {
		return k, nil
	}
	file := first(flagFile, getenv("PACTLEDGER_KEY_FILE"), fc.KeyFile)
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read key file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return fc.Key, nil
}

// exit prints err in plain words and returns the exit code.
func (c *cli) exit(err error) int {
	if err == nil {
		return exitOK
	}
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(c.errw, "ledgerctl: %s\n", ue.msg)
		return exitUsage
	case errors.Is(err, errCheckFailed):
		return exitCheckFailed
	}
	st, ok := status.FromError(err)
	if !ok {
		fmt.Fprintf(c.errw, "ledgerctl: %v\n", err)
		return exitError
	}
	switch st.Code() {
	case codes.Unauthenticated:
		fmt.Fprintf(c.errw, "ledgerctl: ledgerd rejected the API key (%s). Check --key, PACTLEDGER_KEY or the key file.\n", st.Message())
		return exitAuth
	case codes.PermissionDenied:
		fmt.Fprintf(c.errw, "ledgerctl: not allowed: %s\n", st.Message())
		return exitAuth
	case codes.NotFound:
		fmt.Fprintf(c.errw, "ledgerctl: not found: %s\n", st.Message())
		return exitNotFound
	case codes.InvalidArgument:
		fmt.Fprintf(c.errw, "ledgerctl: %s\n", st.Message())
		return exitUsage
	case codes.Unavailable, codes.DeadlineExceeded:
		fmt.Fprintf(c.errw, "ledgerctl: cannot reach ledgerd at %s: %s. Is it running? (--server, PACTLEDGER_SERVER)\n", c.server, st.Message())
		return exitUnavailable
	}
	fmt.Fprintf(c.errw, "ledgerctl: %s: %s\n", st.Code(), st.Message())
	return exitError
}

// ctx returns a call context with the key and the timeout.
func (c *cli) ctx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	if c.key == "" {
		return ctx, cancel // public calls only (the log's checkpoints and consistency proofs)
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.key), cancel
}

// parse parses flags that may come before or after the positional args.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

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

	"github.com/pactledger/pactledger/internal/buildinfo"
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
           T is RFC 3339, a date (2026-10-07) or a time ago (90m, 1h, 7d, 2w)
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

  whoami                            the name and roles of the API key in use, and where it came from
  version                           this ledgerctl's version

ROW is the 64-character row id or a unique prefix of at least 8 characters (as tables print).
Help needs no key or server: ledgerctl help COMMAND, or ledgerctl COMMAND --help.

Global flags (anywhere on the line):
  --server HOST:PORT   ledgerd gRPC address (env PACTLEDGER_SERVER; default 127.0.0.1:9090)
  --http URL           ledgerd REST base for the log's tiles (env PACTLEDGER_HTTP; default the
                       --server host on port 8080, https with --tls)
  --key KEY            API key (env PACTLEDGER_KEY)
  --key-file FILE      file holding the API key (env PACTLEDGER_KEY_FILE)
                       a flag beats the environment, which beats the config file
  --config FILE        YAML with server, http, key or keyFile, tls, ca, tlsCert, tlsKey (default ~/.config/pactledger/ledgerctl.yaml)
  --tls                use TLS to reach ledgerd
  --ca FILE            trust only this CA (PEM) for ledgerd's certificate; implies --tls (env PACTLEDGER_CA)
  --tls-cert FILE      client certificate (PEM) for a ledgerd that asks for one (mutual TLS); implies --tls
  --tls-key FILE       its private key (env PACTLEDGER_TLS_CERT, PACTLEDGER_TLS_KEY)
  --json               print the server's reply as JSON, for scripts
  --timeout DURATION   per-call timeout (default 60s)
  --version            print the version and exit

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
	CA      string `yaml:"ca"`
	TLSCert string `yaml:"tlsCert"`
	TLSKey  string `yaml:"tlsKey"`
}

type cli struct {
	out, errw io.Writer
	json      bool
	timeout   time.Duration
	server    string
	httpBase  string
	tls       bool
	tlsConf   *tls.Config // nil without TLS
	key       string
	keySource string // where the key came from
	cmd       string // the command being run, for error messages
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
	globals, rest := splitGlobals(args)
	fs := flag.NewFlagSet("ledgerctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		server  = fs.String("server", "", "")
		httpURL = fs.String("http", "", "")
		key     = fs.String("key", "", "")
		keyFile = fs.String("key-file", "", "")
		cfgPath = fs.String("config", "", "")
		useTLS  = fs.Bool("tls", false, "")
		caFile  = fs.String("ca", "", "")
		tlsCert = fs.String("tls-cert", "", "")
		tlsKey  = fs.String("tls-key", "", "")
		asJSON  = fs.Bool("json", false, "")
		timeout = fs.Duration("timeout", 60*time.Second, "")
		version = fs.Bool("version", false, "")
	)
	if err := fs.Parse(globals); err != nil {
		fmt.Fprintf(stderr, "ledgerctl: %v\n\n%s", err, usage)
		return exitUsage
	}
	if *version {
		fmt.Fprintf(stdout, "ledgerctl %s\n", buildinfo.Read().String())
		return exitOK
	}
	if len(rest) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	// Help needs no key and no server: "help", "help CMD", "CMD --help".
	if rest[0] == "help" || rest[0] == "-h" || rest[0] == "--help" || rest[0] == "-help" {
		if len(rest) > 1 {
			return printHelp(stdout, stderr, rest[1])
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	if wantsHelp(rest[1:]) {
		return printHelp(stdout, stderr, rest[0])
	}
	if rest[0] == "version" {
		fmt.Fprintf(stdout, "ledgerctl %s\n", buildinfo.Read().String())
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
	c := &cli{out: stdout, errw: stderr, json: *asJSON, timeout: *timeout, cmd: rest[0]}
	c.server = first(*server, getenv("PACTLEDGER_SERVER"), fc.Server, "127.0.0.1:9090")
	c.httpBase = first(*httpURL, getenv("PACTLEDGER_HTTP"), fc.HTTP)
	ca := first(*caFile, getenv("PACTLEDGER_CA"), fc.CA)
	cert := first(*tlsCert, getenv("PACTLEDGER_TLS_CERT"), fc.TLSCert)
	certKey := first(*tlsKey, getenv("PACTLEDGER_TLS_KEY"), fc.TLSKey)
	c.tls = *useTLS || fc.TLS || ca != "" || cert != ""
	k, src, err := resolveKey(*key, *keyFile, getenv, fc)
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl: %v\n", err)
		return exitUsage
	}
	c.key, c.keySource = k, src
	creds := insecure.NewCredentials()
	if c.tls {
		tc, err := clientTLS(ca, cert, certKey)
		if err != nil {
			fmt.Fprintf(stderr, "ledgerctl: %v\n", err)
			return exitUsage
		}
		creds = credentials.NewTLS(tc)
		c.tlsConf = tc
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
		"outbox": c.outbox, "log": c.logCmd, "proof": c.proof, "whoami": c.whoami,
	}
	cmd, ok := cmds[rest[0]]
	if !ok {
		fmt.Fprintf(stderr, "ledgerctl: unknown command %q\n\n%s", rest[0], usage)
		return exitUsage
	}
	if c.key == "" && !keyOptional(rest) {
		fmt.Fprintf(stderr, "ledgerctl %s: no API key: pass --key or --key-file, set PACTLEDGER_KEY or PACTLEDGER_KEY_FILE, or put key/keyFile in the config file\n", rest[0])
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

// resolveKey picks the API key: a flag beats the environment, which beats
// the config file; at each level the key itself beats a key file. It
// returns the key and where it came from, for whoami and error messages.
func resolveKey(flagKey, flagFile string, getenv func(string) string, fc fileConfig) (key, source string, err error) {
	if flagKey != "" && flagFile != "" {
		return "", "", usagef("--key and --key-file both given: pass one")
	}
	levels := []struct{ key, file, keyName, fileName string }{
		{flagKey, flagFile, "--key", "--key-file"},
		{getenv("PACTLEDGER_KEY"), getenv("PACTLEDGER_KEY_FILE"), "PACTLEDGER_KEY", "PACTLEDGER_KEY_FILE"},
		{fc.Key, fc.KeyFile, "the config file's key", "the config file's keyFile"},
	}
	for _, l := range levels {
		if l.key != "" {
			return strings.TrimSpace(l.key), l.keyName, nil
		}
		if l.file != "" {
			b, err := os.ReadFile(l.file)
			if err != nil {
				return "", "", fmt.Errorf("read key file (%s): %w", l.fileName, err)
			}
			return strings.TrimSpace(string(b)), l.fileName + " " + l.file, nil
		}
	}
	return "", "", nil
}

// exit prints err in plain words, naming the command, and returns the
// exit code.
func (c *cli) exit(err error) int {
	if err == nil {
		return exitOK
	}
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(c.errw, "ledgerctl %s: %s\n", c.cmd, ue.msg)
		return exitUsage
	case errors.Is(err, errCheckFailed):
		return exitCheckFailed
	}
	st, ok := status.FromError(err)
	if !ok {
		fmt.Fprintf(c.errw, "ledgerctl %s: %v\n", c.cmd, err)
		return exitError
	}
	switch st.Code() {
	case codes.Unauthenticated:
		fmt.Fprintf(c.errw, "ledgerctl %s: ledgerd rejected the API key from %s (%s). Check --key, --key-file, PACTLEDGER_KEY or the key file.\n", c.cmd, orDash(c.keySource), st.Message())
		return exitAuth
	case codes.PermissionDenied:
		need := ""
		if roles, ok := commandRoles[c.cmd]; ok {
			need = " (" + c.cmd + " needs a key with the role " + roles + ")"
		}
		fmt.Fprintf(c.errw, "ledgerctl %s: not allowed: %s%s\n", c.cmd, st.Message(), need)
		return exitAuth
	case codes.NotFound:
		fmt.Fprintf(c.errw, "ledgerctl %s: not found: %s\n", c.cmd, st.Message())
		return exitNotFound
	case codes.InvalidArgument:
		fmt.Fprintf(c.errw, "ledgerctl %s: %s\n", c.cmd, st.Message())
		return exitUsage
	case codes.Unavailable, codes.DeadlineExceeded:
		if answersHTTP(st.Message()) {
			fmt.Fprintf(c.errw, "ledgerctl %s: %s answers HTTP, not gRPC (%s). --server wants ledgerd's gRPC address (default port 9090), not its REST port (8080).\n", c.cmd, c.server, st.Message())
			return exitUnavailable
		}
		if !c.tls && strings.Contains(st.Message(), "server preface: EOF") {
			fmt.Fprintf(c.errw, "ledgerctl %s: cannot reach ledgerd at %s: it closed the connection (%s). If it serves TLS, pass --tls and --ca FILE.\n", c.cmd, c.server, st.Message())
			return exitUnavailable
		}
		fmt.Fprintf(c.errw, "ledgerctl %s: cannot reach ledgerd at %s: %s. Is it running? (--server, PACTLEDGER_SERVER)\n", c.cmd, c.server, st.Message())
		return exitUnavailable
	}
	fmt.Fprintf(c.errw, "ledgerctl %s: %s: %s\n", c.cmd, st.Code(), st.Message())
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

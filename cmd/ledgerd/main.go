// Command ledgerd is the pactledger server: the ledger API over gRPC and
// REST, health, metrics and the evidence uploader.
//
//	ledgerd [--config FILE] [flags]   serve (SIGHUP rereads the TLS files)
//	ledgerd migrate [--config FILE]   create or upgrade the PostgreSQL store's schema
//	ledgerd migrate --from bbolt:PATH [--to postgres:DSN | --config FILE]
//	                                  copy a bbolt ledger into the PostgreSQL store
//	ledgerd config example            print a commented example configuration
//	ledgerd healthcheck [flags]       exit 0 when a running ledgerd is ready (GET /readyz)
//	ledgerd provider rotate-key [--config FILE | --data-dir DIR] [--replace-lost]
//	                                  with ledgerd stopped: make a new signing key current
//	                                  for the Provider, the old one published while it retires
//	ledgerd compact [--config FILE | --data-dir DIR]
//	                                  with ledgerd stopped: bring the bbolt file to this
//	                                  layout, drop the published tiles it still holds
//	                                  and copy it without its free pages
//	ledgerd unmark-moved PATH         with every ledgerd stopped, to roll back a move into
//	                                  PostgreSQL: clear the bbolt file's mark that it was
//	                                  moved, so that ledgerd serves it again
//	ledgerd --version                 print the module version and VCS revision
//	ledgerd --help                    print the commands and the flags
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/pactledger/pactledger/internal/buildinfo"
	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/server"
	"github.com/pactledger/pactledger/storage/bolt"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitStatus(err, os.Stderr))
}

// exitStatus is the exit status for run's error, which it prints: 0 for
// none and for help asked for (the usage is printed already), else 1.
func exitStatus(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, "ledgerd:", err)
	return 1
}

// usage heads `ledgerd --help`: the commands, one line each, before the
// flags of serving.
const usage = `usage: ledgerd [flags]            serve the ledger: gRPC, REST, health, metrics and the Provider
       ledgerd COMMAND [flags]

commands:
  migrate         create or upgrade the PostgreSQL store's schema; with --from, copy a bbolt ledger into it
  compact         with ledgerd stopped: drop published tiles from the bbolt file and copy it without free pages
  unmark-moved    roll back a move into PostgreSQL: let ledgerd serve the moved bbolt file again
  healthcheck     exit 0 when a running ledgerd is ready (GET /readyz)
  provider rotate-key  with ledgerd stopped: a new signing key for the Provider, the old one published while it retires
  config example  print a commented example configuration
  version         print the module version and VCS revision (also --version)
  help            print this help

'ledgerd COMMAND --help' prints a command's flags. SIGHUP rereads the TLS files.

flags:
`

// parseFlags parses args with fs. Asked for help (-h, --help) it prints
// head and the flags to stdout and returns flag.ErrHelp, which main turns
// into exit status 0; after a bad flag the flag package's message goes to
// stderr, and head and the flags with it.
func parseFlags(fs *flag.FlagSet, args []string, head string, stdout, stderr io.Writer) error {
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(fs, head, stdout)
	case err != nil:
		printUsage(fs, head, stderr)
	}
	return err
}

// printUsage writes head and fs's flags to w.
func printUsage(fs *flag.FlagSet, head string, w io.Writer) {
	out := fs.Output()
	fmt.Fprint(w, head)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help"
}

// run runs ledgerd with args until ctx ends (SIGINT or SIGTERM).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		_, err := fmt.Fprintf(stdout, "ledgerd %s\n", buildinfo.Read())
		return err
	}
	if len(args) >= 1 && args[0] == "config" {
		switch {
		case len(args) == 2 && args[1] == "example":
			_, err := stdout.Write(config.Example)
			return err
		case len(args) == 2 && isHelp(args[1]):
			fmt.Fprintln(stdout, "usage: ledgerd config example   print a commented example configuration")
			return flag.ErrHelp
		}
		return errors.New("usage: ledgerd config example")
	}
	if len(args) >= 1 && args[0] == "migrate" {
		return migrate(ctx, args[1:], stdout, stderr)
	}
	if len(args) >= 1 && args[0] == "compact" {
		return compact(ctx, args[1:], stdout, stderr)
	}
	if len(args) >= 1 && args[0] == "unmark-moved" {
		return unmarkMoved(ctx, args[1:], stdout, stderr)
	}
	if len(args) >= 1 && args[0] == "provider" {
		return provider(ctx, args[1:], stdout, stderr)
	}
	if len(args) >= 1 && args[0] == "healthcheck" {
		return healthcheck(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("ledgerd", flag.ContinueOnError)
	var (
		cfgPath      = fs.String("config", "", "read the YAML configuration in `FILE` (see: ledgerd config example)")
		grpcAddr     = fs.String("grpc-addr", "", "serve gRPC on `ADDRESS` (default 127.0.0.1:9090)")
		httpAddr     = fs.String("http-addr", "", "serve REST, health and metrics on `ADDRESS` (default 127.0.0.1:8080)")
		dataDir      = fs.String("data-dir", "", "keep the data in `DIR` (default ./data)")
		evidenceDir  = fs.String("evidence-dir", "", "keep evidence in the local `DIR` (selects evidence type dir)")
		s3Endpoint   = fs.String("s3-endpoint", "", "S3 endpoint host:port (selects evidence type s3)")
		s3Bucket     = fs.String("s3-bucket", "", "S3 bucket with Object Lock")
		s3AccessKey  = fs.String("s3-access-key", "", "S3 access key (secret from PACTLEDGER_S3_SECRET_KEY)")
		s3Insecure   = fs.Bool("s3-insecure", false, "plain http to the S3 endpoint (loopback test servers)")
		s3Create     = fs.Bool("s3-create-bucket", false, "create the bucket with Object Lock when missing")
		audience     = fs.String("audience", "", "aud personal-agent JWTs must carry")
		insecureJWKS = fs.Bool("allow-insecure-loopback-jwks", false, "allow http:// JWKS on loopback (tests only)")
		logLevel     = fs.String("log-level", "", "log `LEVEL`: debug, info, warn or error (default info)")
	)
	if len(args) == 1 && args[0] == "help" {
		printUsage(fs, usage, stdout)
		return nil
	}
	if err := parseFlags(fs, args, usage, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.Listen.GRPC, *grpcAddr)
	set(&cfg.Listen.HTTP, *httpAddr)
	set(&cfg.DataDir, *dataDir)
	set(&cfg.Audience, *audience)
	set(&cfg.Log.Level, *logLevel)
	if *evidenceDir != "" {
		cfg.Evidence.Type, cfg.Evidence.Dir = "dir", *evidenceDir
	}
	if *s3Endpoint != "" {
		cfg.Evidence.Type, cfg.Evidence.S3.Endpoint = "s3", *s3Endpoint
	}
	set(&cfg.Evidence.S3.Bucket, *s3Bucket)
	set(&cfg.Evidence.S3.AccessKey, *s3AccessKey)
	if *s3Insecure {
		cfg.Evidence.S3.Insecure = true
	}
	if *s3Create {
		cfg.Evidence.S3.CreateBucket = true
	}
	if *insecureJWKS {
		cfg.AllowInsecureLoopbackJWKS = true
	}

	level, err := cfg.Log.SlogLevel()
	if err != nil {
		return err
	}
	log := jsonLog(stderr, level)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	srv, err := server.New(ctx, cfg, log)
	if errors.Is(err, bolt.ErrLocked) {
		err = fmt.Errorf("%w: another ledgerd (or ledgerd compact, or migrate --from) is using it: stop that one, or give this one another --data-dir (dataDir in the configuration; store.path when set)", err)
	}
	if err != nil {
		// In the JSON log too, where a log pipeline looks, beside the
		// line main prints.
		log.ErrorContext(ctx, "ledgerd did not start", slog.String("error", err.Error()))
		return err
	}
	go reloadOnHangup(ctx, srv, hup)
	return srv.Serve(ctx)
}

// loadConfig reads the configuration at path (none: the defaults) with
// the environment's overrides applied (config.ApplyEnv). Every command
// that loads the configuration loads it here, so each one takes from the
// environment what serving takes.
func loadConfig(path string) (config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return cfg, err
	}
	cfg.ApplyEnv(os.Getenv)
	return cfg, nil
}

// reloadOnHangup rereads the TLS files on every SIGHUP until ctx is done.
func reloadOnHangup(ctx context.Context, srv *server.Server, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			_ = srv.ReloadTLS(ctx) // logged by ReloadTLS
		}
	}
}

// jsonLog returns ledgerd's log, JSON lines on w from level up, and makes
// it the default, which the stores log to.
func jsonLog(w io.Writer, level slog.Level) *slog.Logger {
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: readableDurations}))
	slog.SetDefault(log)
	return log
}

// readableDurations writes a duration in the log as Go prints it ("1.5ms",
// "2m30s"), not as the bare count of nanoseconds the JSON handler writes.
func readableDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

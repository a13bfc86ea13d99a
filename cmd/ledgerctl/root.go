package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pactledger/pactledger/internal/buildinfo"
)

// Command annotations.
const (
	annRoles       = "roles"       // the roles a command needs, for help and refusals
	annKeyOptional = "keyOptional" // runs without an API key
	annCSV         = "csv"         // prints a list: --output csv works
)

const rootLong = `ledgerctl is the support lead's, auditor's and operator's tool for ledgerd: it finds
rows, shows their evidence, re-runs the verifier, appends dispute events, runs dispute
drills and checks the Merkle log, over gRPC.

ROW is the 64-character row id or a unique prefix of at least 8 characters (as tables
print). T is RFC 3339, a date (2026-10-07) or a time ago (90m, 1h, 7d, 2w).
The API key comes from --key or --key-file, else PACTLEDGER_KEY or PACTLEDGER_KEY_FILE,
else the config file: a flag beats the environment, which beats the file.

Exit codes: 0 ok, 1 a check failed, 2 usage, 3 not found, 4 bad key or role,
5 ledgerd unreachable, 6 other error, 7 the ledger holds a row or event that has no
leaf in the Merkle log and none queued (the row store was changed outside the ledger:
run ledgerctl fsck).`

// usageTemplate is the help every command prints (ledgerctl help CMD,
// ledgerctl CMD --help); it needs no key and no server.
const usageTemplate = `usage: {{if .HasParent}}{{.UseLine}}{{if .HasAvailableSubCommands}}
       {{.CommandPath}} COMMAND [flags]{{end}}{{else}}ledgerctl COMMAND [flags] [args]{{end}}
{{if .HasAvailableSubCommands}}
Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}
{{end}}{{with index .Annotations "roles"}}
Role: {{.}}.
{{end}}{{if .HasParent}}{{if .HasAvailableLocalFlags}}
Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}
{{end}}{{if .HasAvailableInheritedFlags}}
Global flags (anywhere on the line):
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}
{{end}}{{else}}
Global flags (anywhere on the line):
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}
{{end}}{{if .HasAvailableSubCommands}}
"{{.CommandPath}} help COMMAND" or "{{.CommandPath}} COMMAND --help" explains a command.
{{end}}`

// root builds the command tree.
func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:           "ledgerctl",
		Short:         "ledgerd's command-line client",
		Long:          rootLong,
		Version:       buildinfo.Read().String(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q (ledgerctl help lists the commands)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(c.errw)
			_ = cmd.Usage()
			return usagef("name a command")
		},
	}
	root.SetVersionTemplate("ledgerctl {{.Version}}\n")
	root.SetUsageTemplate(usageTemplate)
	root.SetHelpTemplate(`{{with (or .Long .Short)}}{{. | trimTrailingWhitespaces}}

{{end}}{{.UsageString}}`)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		c.cmd = commandName(cmd)
		return usageError{err.Error() + flagHint(cmd, err)}
	})
	c.globalFlags(root)
	root.SetHelpCommand(c.helpCmd(root))
	root.AddCommand(
		c.lookupCmd(), c.showCmd(), c.evidenceCmd(), c.verifyCmd(), c.disputeCmd(),
		c.drillCmd(), c.drillsCmd(), c.grantCmd(), c.revokeCmd(), c.revocationsCmd(), c.incidentsCmd(),
		c.sweepCmd(), c.fsckCmd(), c.outboxCmd(), c.providerCmd(), c.logCmd(), c.proofCmd(), c.whoamiCmd(), c.accessLogCmd(),
		&cobra.Command{
			Use: "version", Short: "print this ledgerctl's version", Args: c.noArgs,
			Run: func(cmd *cobra.Command, _ []string) { printf(c.out, "ledgerctl %s\n", buildinfo.Read()) },
		},
	)
	c.completionCmd(root)
	return root
}

// completionCmd is cobra's "completion bash|zsh|fish|powershell", with a
// missing or unknown shell as a usage error.
func (c *cli) completionCmd(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	comp, _, err := root.Find([]string{"completion"})
	if err != nil || comp == root {
		return
	}
	comp.Short = "print a shell completion script: bash, zsh, fish or powershell"
	comp.Args = cobra.ArbitraryArgs
	comp.RunE = func(cmd *cobra.Command, args []string) error {
		c.cmd = "completion"
		if len(args) > 0 {
			return usagef("no completion for %q: want bash, zsh, fish or powershell", args[0])
		}
		return usagef("name a shell: ledgerctl completion bash|zsh|fish|powershell")
	}
}

// globalFlags are persistent: accepted before or after the command.
func (c *cli) globalFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&c.g.server, "server", "", "ledgerd's gRPC `HOST:PORT` (env PACTLEDGER_SERVER; default 127.0.0.1:9090)")
	f.StringVar(&c.g.http, "http", "", "ledgerd's REST base `URL`, for the log's tiles (env PACTLEDGER_HTTP; default the --server host on port 8080, https with --tls)")
	f.StringVar(&c.g.key, "key", "", "the API `KEY` itself (env PACTLEDGER_KEY)")
	f.StringVar(&c.g.keyFile, "key-file", "", "`FILE` holding the API key (env PACTLEDGER_KEY_FILE); a flag beats the environment, which beats the config file")
	f.StringVar(&c.g.config, "config", "", "a YAML `FILE` with server, http, key or keyFile, tls, plaintext, ca, tlsCert, tlsKey, output (default ~/.config/pactledger/ledgerctl.yaml)")
	f.BoolVar(&c.g.tls, "tls", false, "use TLS to reach ledgerd (the system's roots, or --ca)")
	f.BoolVar(&c.g.plaintext, "plaintext", false, "send the API key without TLS to a ledgerd past this machine (refused otherwise; only across a link you trust; env PACTLEDGER_PLAINTEXT=1)")
	f.StringVar(&c.g.ca, "ca", "", "trust only the CA in `FILE` (PEM) for ledgerd's certificate; implies --tls (env PACTLEDGER_CA)")
	f.StringVar(&c.g.tlsCert, "tls-cert", "", "client certificate `FILE` (PEM) for a ledgerd that asks for one (mutual TLS); implies --tls (env PACTLEDGER_TLS_CERT)")
	f.StringVar(&c.g.tlsKey, "tls-key", "", "the client certificate's key `FILE` (env PACTLEDGER_TLS_KEY)")
	f.StringVarP(&c.g.output, "output", "o", "", "`FORMAT` of the output: table (default), json, or csv for commands that list")
	f.BoolVar(&c.g.json, "json", false, "print the server's reply as JSON, for scripts (same as --output json)")
	f.DurationVar(&c.g.timeout, "timeout", 60*time.Second, "give each call at most `DURATION`")
	_ = root.RegisterFlagCompletionFunc("output", fixed("table", "json", "csv"))
}

// helpCmd is "help [COMMAND]": an unknown command is a usage error.
func (c *cli) helpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND]",
		Short: "help about any command",
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var names []cobra.Completion
			for _, sub := range root.Commands() {
				if sub.IsAvailableCommand() {
					names = append(names, sub.Name())
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 || (target == root && len(args) > 0) {
				return usagef("unknown command %q (ledgerctl help lists the commands)", strings.Join(args, " "))
			}
			target.SetOut(c.out)
			return target.Help()
		},
	}
}

// commandName is the command's path without "ledgerctl", for messages.
// flagHint follows an unknown flag's error: the command's flag closest to
// the one given, when one is close, and where its flags are listed.
func flagHint(cmd *cobra.Command, err error) string {
	typed, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		if !strings.HasPrefix(err.Error(), "unknown shorthand flag") {
			return ""
		}
		return " (" + cmd.CommandPath() + " --help lists its flags)"
	}
	typed, _, _ = strings.Cut(typed, "=")
	best, bestDist := "", 0
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(typed, f.Name)
		// Close: a letter or two off, or the start of the flag's name.
		if d > 2 && !(len(typed) >= 3 && strings.HasPrefix(f.Name, typed)) {
			return
		}
		if best == "" || d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	if best == "" {
		return " (" + cmd.CommandPath() + " --help lists its flags)"
	}
	return " (did you mean --" + best + "? " + cmd.CommandPath() + " --help lists its flags)"
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func commandName(cmd *cobra.Command) string {
	return strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()), " ")
}

// online wraps a command's work: it connects to ledgerd first (which
// needs the key, unless the command says otherwise).
func (c *cli) online(fn func(args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c.cmd, c.roles = commandName(cmd), cmd.Annotations[annRoles]
		if err := c.connect(cmd); err != nil {
			return err
		}
		return fn(args)
	}
}

// noArgs refuses positional arguments as a usage error.
func (c *cli) noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		c.cmd = commandName(cmd)
		return usagef("%s takes no arguments (%q given); see ledgerctl help %s", c.cmd, args[0], c.cmd)
	}
	return nil
}

// fixed completes a flag or argument from a fixed list.
func fixed(values ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

func roles(r string) map[string]string { return map[string]string{annRoles: r} }

const readers = "support, auditor or admin"

func (c *cli) lookupCmd() *cobra.Command {
	var o lookupOpts
	cmd := &cobra.Command{
		Use:   "lookup --order ID | --principal P | --grant G | --agent A | --status S | --since T",
		Short: "find rows, newest first",
		Long: `Find rows, newest first, by order id (target), principal, grant, agent platform,
status or time. --limit rows per page; --all pages through every one.`,
		Args: c.noArgs, Annotations: map[string]string{annRoles: readers, annCSV: "yes"},
		RunE: c.online(func([]string) error { return c.lookup(o) }),
	}
	f := cmd.Flags()
	f.StringVar(&o.order, "order", "", "rows acting on order `ID`")
	f.StringVar(&o.target, "target", "", "rows acting on `TARGET` (the same as --order)")
	f.StringVar(&o.principal, "principal", "", "rows of customer `P`")
	f.StringVar(&o.grant, "grant", "", "rows under grant `G`")
	f.StringVar(&o.agent, "agent", "", "rows of agent platform `A` (its issuer)")
	f.StringVar(&o.status, "status", "", "only rows with status `S`: authorized, unauthorized, incident or duplicate")
	f.StringVar(&o.since, "since", "", "rows issued at or after `T`")
	f.StringVar(&o.until, "until", "", "rows issued before `T`")
	f.IntVar(&o.limit, "limit", 50, "`N` rows per page, 1 to 1000")
	f.BoolVar(&o.all, "all", false, "page through every matching row")
	_ = cmd.RegisterFlagCompletionFunc("status", fixed("authorized", "unauthorized", "incident", "duplicate"))
	return cmd
}

func (c *cli) showCmd() *cobra.Command {
	return &cobra.Command{
		Use: "show ROW", Short: "one row: parties, scopes, actions, verifier checks, disputes",
		Annotations: roles(readers),
		RunE:        c.online(c.show),
	}
}

func (c *cli) evidenceCmd() *cobra.Command {
	var full bool
	cmd := &cobra.Command{
		Use: "evidence ROW", Short: "the stored receipt, tokens, action log and where each object is held (exit 1 if it differs from the write-time hash)",
		Annotations: roles(readers),
		RunE:        c.online(func(args []string) error { return c.evidence(full, args) }),
	}
	cmd.Flags().BoolVar(&full, "full", false, "print tokens and args in full")
	return cmd
}

func (c *cli) verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use: "verify ROW", Short: "re-run every check on the stored bytes (exit 1 if the result differs)",
		Annotations: roles(readers),
		RunE:        c.online(c.verify),
	}
}

func (c *cli) disputeCmd() *cobra.Command {
	var note, as string
	cmd := &cobra.Command{
		Use:   disputeUsage,
		Short: "open or resolve a dispute on a row",
		Long: `Append a dispute event to a row: "open" when a customer disputes it, "resolve"
with --as customer-authorized, incident or other (required: the resolution is
never assumed; incident only for a row the ledger recorded as an incident). The
event names the key that acted.`,
		Annotations: roles("support or admin"),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return []cobra.Completion{"open", "resolve"}, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: c.online(func(args []string) error { return c.dispute(note, as, args) }),
	}
	cmd.Flags().StringVar(&note, "note", "", "what the customer said, or how it was resolved (`TEXT`)")
	cmd.Flags().StringVar(&as, "as", "", "resolve `AS` customer-authorized, incident or other (required for resolve)")
	_ = cmd.RegisterFlagCompletionFunc("as", fixed("customer-authorized", "incident", "other"))
	return cmd
}

func (c *cli) drillCmd() *cobra.Command {
	var o drillOpts
	cmd := &cobra.Command{
		Use:   "drill TARGET [--principal P] | --row ROW | --principal P | --monthly [--sample N]",
		Short: "run a dispute drill (exit 1 if a pull fails)",
		Long: `Run the six timed pulls of the dispute drill on the rows of an order (TARGET), a
row or a customer, and print a reply for the customer; or the monthly drill on random
rows. Every report is kept.`,
		Annotations: roles("support or admin"),
	}
	cmd.RunE = c.online(func(args []string) error {
		o.sampleSet = cmd.Flags().Changed("sample")
		return c.drill(o, args)
	})
	f := cmd.Flags()
	f.StringVar(&o.row, "row", "", "drill one `ROW`")
	f.StringVar(&o.principal, "principal", "", "drill customer `P`'s rows (with TARGET: that customer's rows of the order)")
	f.BoolVar(&o.monthly, "monthly", false, "the monthly drill on random rows")
	f.IntVar(&o.sample, "sample", 0, "`N` rows for the monthly drill to sample, 1 to 100 (default the configured sample)")
	f.StringVar(&o.proofDir, "proof-dir", "", "write each drilled row's proof bundle to `DIR`/ROW.proof")
	return cmd
}

func (c *cli) drillsCmd() *cobra.Command {
	var o listOpts
	cmd := &cobra.Command{
		Use: "drills [ID]", Short: "stored drill reports, newest first; or one report",
		Annotations: map[string]string{annRoles: readers, annCSV: "yes"},
		RunE:        c.online(func(args []string) error { return c.drills(o, args) }),
	}
	listFlags(cmd, &o, 20, "reports")
	return cmd
}

// listFlags adds --limit, --page and --all.
func listFlags(cmd *cobra.Command, o *listOpts, limit int, what string) {
	cmd.Flags().IntVar(&o.limit, "limit", limit, "`N` "+what+" per page, 1 to 1000")
	cmd.Flags().StringVar(&o.page, "page", "", "start at page `TOKEN` (printed after a page)")
	cmd.Flags().BoolVar(&o.all, "all", false, "page through every one")
}

func (c *cli) grantCmd() *cobra.Command {
	return &cobra.Command{
		Use: "grant GRANT_ID", Short: "a grant's rows, scopes and revocation",
		Annotations: roles(readers),
		RunE:        c.online(c.grant),
	}
}

func (c *cli) revokeCmd() *cobra.Command {
	var at, note string
	cmd := &cobra.Command{
		Use: "revoke GRANT_ID [--at T] [--note TEXT]", Short: "record a grant's revocation: later receipts under it are incidents; an admin key's also stops the embedded Provider",
		Annotations: roles("writer or admin"),
		RunE:        c.online(func(args []string) error { return c.revoke(at, note, args) }),
	}
	cmd.Flags().StringVar(&at, "at", "", "revoked at `T`: RFC 3339, a date, now (the default) or a time ago")
	cmd.Flags().StringVar(&note, "note", "", "why (`TEXT`)")
	return cmd
}

func (c *cli) revocationsCmd() *cobra.Command {
	var o listOpts
	var since string
	var notStopping bool
	cmd := &cobra.Command{
		Use: "revocations [--since T] [--not-stopping]", Short: "the grants' revocations the ledger holds, by grant id, and whether each stops the embedded Provider",
		Annotations: map[string]string{annRoles: readers, annCSV: "yes"},
		RunE:        c.online(func(args []string) error { return c.revocations(o, since, notStopping, args) }),
	}
	listFlags(cmd, &o, 100, "revocations")
	cmd.Flags().StringVar(&since, "since", "", "only those recorded or in force from `T` on: RFC 3339, a date or a time ago (7d)")
	cmd.Flags().BoolVar(&notStopping, "not-stopping", false, "only those that stop no embedded Provider (a writer's without the Provider's signed statement): after putting back an older provider.db, revoke them again with an admin key")
	return cmd
}

func (c *cli) incidentsCmd() *cobra.Command {
	var o listOpts
	cmd := &cobra.Command{
		Use: "incidents [ID]", Short: "incidents, newest first; or one with the platform's other rows that day",
		Annotations: map[string]string{annRoles: readers, annCSV: "yes"},
		RunE:        c.online(func(args []string) error { return c.incidents(o, args) }),
	}
	listFlags(cmd, &o, 50, "incidents")
	var note string
	closeCmd := &cobra.Command{
		Use: "close ID --note TEXT", Short: "close an incident: its evidence is kept until the close plus 12 months",
		Annotations: roles("admin"),
		RunE:        c.online(func(args []string) error { return c.incidentClose(note, args) }),
	}
	closeCmd.Flags().StringVar(&note, "note", "", "how it was resolved (`TEXT`)")
	cmd.AddCommand(closeCmd)
	return cmd
}

func (c *cli) sweepCmd() *cobra.Command {
	var dry bool
	var at string
	cmd := &cobra.Command{
		Use: "sweep [--dry-run [--at TIME]]", Short: "remove rows past retention now; --dry-run lists what would go and what is kept",
		Args: c.noArgs, Annotations: map[string]string{annRoles: "admin (a dry run: auditor too)", annCSV: "yes"},
		RunE: c.online(func([]string) error { return c.sweep(dry, at) }),
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "list what would be removed, remove nothing")
	cmd.Flags().StringVar(&at, "at", "", "with --dry-run: list what a sweep at `TIME` (RFC 3339 or a date, such as 2027-06-01) would remove and keep")
	return cmd
}

func (c *cli) fsckCmd() *cobra.Command {
	var restore bool
	var page int
	cmd := &cobra.Command{
		Use:   "fsck [--restore]",
		Short: "check every row's evidence and its leaf in the Merkle log (exit 1 if any differs)",
		Long: `Compare every row's evidence with its write-time hash and its write-once copy, every
row with its leaf in the Merkle log, and the tree rebuilt from the leaves with the latest
checkpoint (exit 1 if any differs); --restore puts restorable rows back from the
write-once copy (admin).`,
		Args: c.noArgs, Annotations: roles("auditor or admin (--restore: admin)"),
		RunE: c.online(func([]string) error { return c.fsck(restore, page) }),
	}
	cmd.Flags().BoolVar(&restore, "restore", false, "put restorable rows back from the write-once copy")
	cmd.Flags().IntVar(&page, "page", 1000, "`N` rows checked per call, 1 to 1000")
	return cmd
}

func (c *cli) outboxCmd() *cobra.Command {
	var o listOpts
	cmd := &cobra.Command{
		Use: "outbox", Short: "evidence outbox depth, oldest entry's age, dead letters",
		Args: c.noArgs, Annotations: map[string]string{annRoles: "admin", annCSV: "yes"},
		RunE: c.online(func([]string) error { return c.outbox(o) }),
	}
	listFlags(cmd, &o, 100, "dead letters")
	var all bool
	retry := &cobra.Command{
		Use: "retry KEY | retry --all", Short: "move dead letters back into the outbox",
		Annotations: roles("admin"),
		RunE:        c.online(func(args []string) error { return c.outboxRetry(all, args) }),
	}
	retry.Flags().BoolVar(&all, "all", false, "every dead letter")
	cmd.AddCommand(retry)
	return cmd
}

func (c *cli) providerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "provider", Short: "the embedded Provider's outbox: what waits for the ledger, what it set aside",
		Args: c.noArgs,
	}
	var o listOpts
	outbox := &cobra.Command{
		Use: "outbox", Short: "the Provider's outbox depth and the entries it set aside, with why",
		Long: `The embedded Provider posts every receipt, refusal and revocation it keeps to the
ledger. What the ledger refused as invalid, or what cannot be read, is set aside in the
Provider's store: on record at the Provider but not in the ledger. This lists those
entries with why; "provider outbox retry" puts them back to be posted again.`,
		Args: c.noArgs, Annotations: map[string]string{annRoles: "admin", annCSV: "yes"},
		RunE: c.online(func([]string) error { return c.providerOutbox(o) }),
	}
	listFlags(outbox, &o, 100, "entries set aside")
	var all bool
	retry := &cobra.Command{
		Use: "retry SEQ | retry --all", Short: "put entries set aside back at the end of the Provider's outbox",
		Annotations: roles("admin"),
		RunE:        c.online(func(args []string) error { return c.providerOutboxRetry(all, args) }),
	}
	retry.Flags().BoolVar(&all, "all", false, "every entry set aside that can be read")
	outbox.AddCommand(retry)
	cmd.AddCommand(outbox)
	return cmd
}

func (c *cli) logCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "log", Short: "the Merkle log: its signed checkpoint, and an audit from a kept one",
		Long: `The Merkle log (docs/design/015-merkle-log.md): every row, dispute event and
incident closure is a leaf. Its checkpoints and tiles are public: no API key needed.`,
		Args: c.noArgs,
	}
	var key, save string
	checkpoint := &cobra.Command{
		Use: "checkpoint [--log-key KEY] [--save FILE]", Short: "fetch the latest signed checkpoint and verify it",
		Long: `Fetch the latest signed checkpoint and verify it with --log-key (the log's published
verifier key, or a file holding it), or the key the server reports.`,
		Args: c.noArgs, Annotations: map[string]string{annRoles: "none", annKeyOptional: "yes"},
		RunE: c.online(func([]string) error { return c.logCheckpoint(key, save) }),
	}
	checkpoint.Flags().StringVar(&key, "log-key", "", "the log's verifier `KEY`, or a file holding it")
	checkpoint.Flags().StringVar(&save, "save", "", "keep the signed checkpoint in `FILE`, for a later log audit")
	var o auditOpts
	audit := &cobra.Command{
		Use:   "audit --from FILE [--log-key KEY] [--all] [--settle D] [--retention PERIODS] [--s3-endpoint HOST:PORT --s3-bucket NAME --s3-access-key KEY]",
		Short: "prove a kept checkpoint is a prefix of the latest and compare the leaves since with the rows",
		Long: `Prove the checkpoint kept in FILE is a prefix of the latest, read every leaf since
(--all: every leaf) from the tiles (--http), compare each with the rows the API key can
read, run each row's checks again here with the JWKS snapshots its leaf names, and
check every readable row has a leaf and is found by the lookups of its customer, orders
and grant (exit 1 on a mismatch); list the keys the rows
passed with, to compare with the keys their signers publish. The leaves before
FILE are read too, for a row, event or closure logged twice; with a key each row leaf's
row must still be held (or be swept), and each dispute event a row shows must have its
leaf (one not yet in the log is printed as not yet checkable while it is newer than the
audited tree's latest leaf). Without a key the log is checked without comparing rows,
and the last line says so (exit 0). With --s3-*, the log ledgerd publishes to its
bucket is read from the bucket itself, before the ledger's latest checkpoint: every
version of its level-0 tiles must hold the ledger's leaves and cover the kept checkpoint
without a gap, and its checkpoints (the newest 2,000; --all: every one) must verify, be
of the ledger's log and be locked under COMPLIANCE for ten years (a ledger that shows another history
than it published fails).`,
		Args: c.noArgs, Annotations: map[string]string{annRoles: "none (comparing rows: support, auditor or admin)", annKeyOptional: "yes"},
		RunE: c.online(func([]string) error { return c.logAudit(o) }),
	}
	f := audit.Flags()
	f.StringVar(&o.from, "from", "", "the kept checkpoint `FILE` (log checkpoint --save)")
	f.StringVar(&o.logKey, "log-key", "", "the log's verifier `KEY`, or a file holding it")
	f.BoolVar(&o.all, "all", false, "compare every leaf as read from the tiles, not only those since the kept checkpoint")
	f.DurationVar(&o.settle, "settle", 5*time.Second, "how long a row or event may wait for its leaf (`D`)")
	f.StringVar(&o.retention, "retention", "", "the ledger's retention `PERIODS` by class (money_moved=18months,read_only=90days,…): a swept row is checked against its class's period")
	f.StringVar(&o.bucket.endpoint, "s3-endpoint", "", "read the log ledgerd publishes to its S3 bucket with Object Lock too, at `HOST:PORT`, and compare it with the kept checkpoint and the ledger's log (with --s3-bucket, --s3-access-key and PACTLEDGER_S3_SECRET_KEY)")
	f.StringVar(&o.bucket.bucket, "s3-bucket", "", "the ledger's bucket `NAME`, as you know it from the operator's commitment, not from the ledger")
	f.StringVar(&o.bucket.accessKey, "s3-access-key", "", "an access `KEY` that may read the bucket (its secret from PACTLEDGER_S3_SECRET_KEY)")
	f.StringVar(&o.bucket.region, "s3-region", "", "the bucket's `REGION` for request signing (default us-east-1)")
	f.BoolVar(&o.bucket.insecure, "s3-insecure", false, "plain http to the S3 endpoint (loopback test servers only)")
	cmd.AddCommand(checkpoint, audit)
	return cmd
}

func (c *cli) proofCmd() *cobra.Command {
	var event, out string
	var wait time.Duration
	cmd := &cobra.Command{
		Use: "proof ROW [--event dispute/N|incident-close] [--out FILE]", Short: "a row's proof bundle from the Merkle log (JSON)",
		Long: `Write a row's proof bundle (JSON, to stdout or --out FILE): its leaf, the inclusion
proof and the signed checkpoint; check it offline with ledgerctl proof verify.
A row or event committed but not yet in a signed checkpoint is waited for (--wait;
exit 6 when the wait ends). One the ledger holds whose leaf is neither in the log nor
queued will never have a proof: exit 7 at once (the row store was changed outside the
ledger, or it was recorded while the ledger kept no log; run ledgerctl fsck).`,
		Annotations: roles(readers),
		RunE:        c.online(func(args []string) error { return c.proof(event, out, wait, args) }),
	}
	cmd.Flags().StringVar(&event, "event", "", "the proof of an `EVENT` of the row: dispute/N or incident-close")
	cmd.Flags().StringVar(&out, "out", "", "write the bundle to `FILE`")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Second, "wait up to `D` for a new row or event to reach the log")
	var key, row, verifyEvent string
	verify := &cobra.Command{
		Use: "verify FILE --log-key KEY [--row ID [--event dispute/N|incident-close]]", Short: "check a proof bundle offline: no server, no API key",
		Long: `Check a proof bundle offline, with nothing but the log's published verifier key:
the checkpoint's signature, the leaf's inclusion under its root, and that the leaf is
one the ledger writes (the version line first, each line once). A bundle names its
row itself, and it comes from the ledger being checked: pass --row ID, the id of the
row you asked about (as your receipt or the support reply names it), and the leaf
must be that row's own, with every line the ledger writes in a row's leaf. With
--event dispute/N or incident-close it must be that event's leaf of the row, as
ledgerctl proof ROW --event wrote it. Exit 0 with "verified: …", or exit 1 with
"NOT VERIFIED" and the reason.`,
		Annotations: map[string]string{annRoles: "none", annKeyOptional: "yes"},
		RunE:        c.online(func(args []string) error { return c.proofVerify(key, row, verifyEvent, args) }),
	}
	verify.Flags().StringVar(&key, "log-key", "", "the log's published verifier `KEY`, or a file holding it")
	verify.Flags().StringVar(&row, "row", "", "the `ID` of the row the proof must be of (the row you asked about)")
	verify.Flags().StringVar(&verifyEvent, "event", "", "with --row, the `EVENT` of the row the proof must be of: dispute/N or incident-close")
	cmd.AddCommand(verify)
	return cmd
}

func (c *cli) whoamiCmd() *cobra.Command {
	return &cobra.Command{
		Use: "whoami", Short: "the name and roles of the API key in use, and where it came from",
		Args: c.noArgs, Annotations: map[string]string{annRoles: "any valid key", annCSV: "yes"},
		RunE: c.online(func([]string) error { return c.whoami() }),
	}
}

func (c *cli) accessLogCmd() *cobra.Command {
	var o accessOpts
	cmd := &cobra.Command{
		Use:   "access-log [--principal P | --order ID | --grant G | --by KEY_NAME] [--since T]",
		Short: "who read what: every read of rows, evidence, snapshots, drills and incidents, oldest first",
		Long: `List the read-access log, oldest first: each read of rows, evidence, snapshots,
drills, incidents and of this log, with the API key's name and roles, the call, what its
query named and how many rows came back. --principal answers "who looked up this
customer's rows": the reads whose query named the customer, the reads of one of
their rows by its id (shown "row=ID of=P"), and the reads whose reply carried their
rows (an order's, every row, a grant, an incident, a drill: shown "of=P,..."; a reply
with more customers' rows than the log lists, "of=...,…", is listed for every
customer). Records are kept for accessLog.retention (default 12 months).`,
		Args: c.noArgs, Annotations: map[string]string{annRoles: "admin", annCSV: "yes"},
		RunE: c.online(func([]string) error { return c.accessLog(o) }),
	}
	f := cmd.Flags()
	f.StringVar(&o.principal, "principal", "", "reads whose query named customer `P`, that read one of P's rows by id, or whose reply carried P's rows")
	f.StringVar(&o.target, "order", "", "reads whose query named order `ID`")
	f.StringVar(&o.grant, "grant", "", "reads whose query named grant `G`")
	f.StringVar(&o.by, "by", "", "reads made with the API key named `KEY_NAME`")
	f.StringVar(&o.since, "since", "", "reads made at or after `T`")
	listFlags(cmd, &o.listOpts, 100, "records")
	return cmd
}

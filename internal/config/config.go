// Package config is ledgerd's configuration: one YAML file, defaults for
// the embedded setup, validation, and the commented example that
// `ledgerd config example` prints.
package config

import (
	"bytes"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// Example is the commented example configuration.
//
//go:embed example.yaml
var Example []byte

// Roles an API key can hold (API.md).
const (
	RoleWriter  = "writer"
	RoleSupport = "support"
	RoleAuditor = "auditor"
	RoleAdmin   = "admin"
)

// Roles lists every role.
var Roles = []string{RoleWriter, RoleSupport, RoleAuditor, RoleAdmin}

// Config is ledgerd's whole configuration.
type Config struct {
	Listen                    Listen          `yaml:"listen"`
	DataDir                   string          `yaml:"dataDir"`
	Store                     Store           `yaml:"store"`
	Evidence                  Evidence        `yaml:"evidence"`
	APIKeys                   []APIKey        `yaml:"apiKeys"`
	Audience                  string          `yaml:"audience"`
	AllowInsecureLoopbackJWKS bool            `yaml:"allowInsecureLoopbackJwks"`
	Brands                    []Brand         `yaml:"brands"`
	Agents                    []Agent         `yaml:"agents"`
	Retention                 Retention       `yaml:"retention"`
	Log                       Log             `yaml:"log"`
	ShutdownTimeout           Duration        `yaml:"shutdownTimeout"`
	Limits                    RequestLimits   `yaml:"limits"`
	Uploader                  UploaderOptions `yaml:"uploader"`
	Leases                    Leases          `yaml:"leases"`
	Readiness                 Readiness       `yaml:"readiness"`
	Clock                     ClockOptions    `yaml:"clock"`
	MerkleLog                 MerkleLog       `yaml:"merkleLog"`
	Drills                    Drills          `yaml:"drills"`
	Provider                  Provider        `yaml:"provider"`
	Console                   Console         `yaml:"console"`
	TLS                       TLS             `yaml:"tls"`
	AccessLog                 AccessLog       `yaml:"accessLog"`
	Verifier                  VerifierOptions `yaml:"verifier"`
	Runtime                   RuntimeOptions  `yaml:"runtime"`
}

// RuntimeOptions tune the Go runtime ledgerd runs on.
type RuntimeOptions struct {
	// HeapFloorMiB is the most, in MiB, the collector's heap floor
	// (internal/heapfloor) lets the process grow to before it collects.
	// The floor is about a second's allocations over the live heap, so a
	// small live heap is collected several times less often under load,
	// for CPU a row, and a ledger that allocates little keeps GOGC's
	// goal. Lowered to a quarter of the cgroup's or the machine's memory
	// and to half of GOMEMLIMIT; 0 leaves the collector to GOGC alone.
	// Default DefaultHeapFloorMiB.
	HeapFloorMiB int `yaml:"heapFloorMiB"`
}

// DefaultHeapFloorMiB is runtime.heapFloorMiB unless set, and
// MaxHeapFloorMiB the most it takes.
const (
	DefaultHeapFloorMiB = 256
	MaxHeapFloorMiB     = 1 << 20
)

// AccessLog configures the read-access log: every read of rows, evidence,
// snapshots, drills and incidents, kept as append-only records.
type AccessLog struct {
	// Retention is how long records are kept, as "12 months" or "90 days";
	// default 12 months.
	Retention string `yaml:"retention"`
}

// AccessRetention is accessLog.retention as a period.
func (c *Config) AccessRetention() (retention.Period, error) {
	p, err := ParsePeriod(c.AccessLog.Retention)
	if err != nil {
		return p, fmt.Errorf("accessLog.retention: %w", err)
	}
	return p, nil
}

// Console configures the web console at /console/.
type Console struct {
	// SecureCookies marks its cookies Secure even on plain HTTP: TLS ends
	// at a proxy in front that does not send X-Forwarded-Proto.
	SecureCookies bool `yaml:"secureCookies"`
	// TrustedProxies are the load balancers and proxies in front (addresses
	// or CIDR prefixes): failed sign-ins through them count against the
	// client's X-Forwarded-For address.
	TrustedProxies []string `yaml:"trustedProxies"`
}

// Proxies parses TrustedProxies.
func (c Console) Proxies() ([]netip.Prefix, error) {
	var ps []netip.Prefix
	for _, s := range c.TrustedProxies {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("console.trustedProxies: %q is not an address or a prefix like 10.0.0.0/8", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		ps = append(ps, p.Masked())
	}
	return ps, nil
}

// TLS serves the gRPC and REST listeners over TLS. The files are read at
// start-up and again on SIGHUP; a file that does not load on SIGHUP keeps
// the previous certificate.
type TLS struct {
	// CertFile and KeyFile are the server's PEM certificate chain and key;
	// both or neither (plaintext, or TLS at a proxy in front).
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// ClientCAFile holds the PEM CAs client certificates must chain to
	// (mutual TLS); empty asks for no client certificate.
	ClientCAFile string `yaml:"clientCaFile"`
	// ClientAuth is "require" (default with a client CA: no connection
	// without a valid client certificate) or "verify-if-given" (a
	// certificate sent must be valid; none is also accepted).
	ClientAuth string `yaml:"clientAuth"`
}

// On reports whether the listeners serve TLS.
func (t TLS) On() bool { return t.CertFile != "" }

// ClientTLS is how a client reaches a ledger over TLS: the CA to trust
// (empty: the system roots) and an optional client certificate.
type ClientTLS struct {
	CAFile   string `yaml:"caFile"`
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

func (t TLS) validate() []error {
	var errs []error
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, errors.New("tls.certFile and tls.keyFile go together"))
	}
	if t.ClientCAFile != "" && t.CertFile == "" {
		errs = append(errs, errors.New("tls.clientCaFile needs tls.certFile and tls.keyFile"))
	}
	switch t.ClientAuth {
	case "", "require", "verify-if-given":
	default:
		errs = append(errs, fmt.Errorf("tls.clientAuth %q: want require or verify-if-given", t.ClientAuth))
	}
	if t.ClientAuth != "" && t.ClientCAFile == "" {
		errs = append(errs, errors.New("tls.clientAuth needs tls.clientCaFile"))
	}
	return errs
}

// Bounds of verifier.cacheSize.
const (
	// DefaultVerifierCacheSize is the default of verifier.cacheSize.
	DefaultVerifierCacheSize = 10000
	// MaxVerifierCacheSize is the largest verifier.cacheSize accepted
	// (at most 4 KiB of token payload an entry).
	MaxVerifierCacheSize = 1000000
)

// VerifierOptions tunes receipt verification.
type VerifierOptions struct {
	// CacheSize is how many verified delegation token signatures are kept,
	// the least recently used dropped first, so that a token sent with
	// every turn of a session is checked once per key set; 0 keeps none.
	// Only the signature check is kept: validity at the receipt's ts,
	// revocation, scopes and bindings are checked on every row. Default
	// DefaultVerifierCacheSize.
	CacheSize int `yaml:"cacheSize"`
	// KeyTables is how many signing keys get a table of their multiples,
	// with which an ES256 check costs about two fifths of crypto/ecdsa's
	// (docs/design/031); 0 checks every signature with crypto/ecdsa
	// alone. A table is about 384 KiB. Default verifier.DefaultKeyTables.
	KeyTables int `yaml:"keyTables"`
}

// Provider configures the embedded PACT Provider.
type Provider struct {
	// Enabled runs the Provider (default true).
	Enabled *bool `yaml:"enabled"`
	// Listen is its own listen address.
	Listen string `yaml:"listen"`
	// BaseURL is its public URL; default http://<listen>.
	BaseURL string `yaml:"baseUrl"`
	// BrandsDir holds one YAML file per brand; default the built-in demo
	// brands (acme, skyways).
	BrandsDir string `yaml:"brandsDir"`
	// Domains maps a brand's own host name to its id, for serving its card
	// at https://{domain}/.well-known/agent-card.json.
	Domains map[string]string `yaml:"domains"`
	// RateLimits per personal agent and per (personal agent, sub).
	RateLimits RateLimits `yaml:"rateLimits"`
	// RefusalLimit bounds, per brand, the refusals of account actions
	// asked under PACT §3 alone that are put on record for the ledger.
	RefusalLimit RefusalLimit `yaml:"refusalLimit"`
	// OpenAgents accepts any personal agent whose issuer serves OIDC
	// discovery with a JWKS, besides the registered ones (default false).
	// The ledger then takes such an agent too, on a delegation token one
	// of the Provider's own brands signed for it (docs/design/050).
	OpenAgents bool `yaml:"openAgents"`
	// LedgerKeyFile holds the writer API key the Provider posts receipts to
	// this ledger with; default the generated <dataDir>/api-keys/writer.key.
	LedgerKeyFile string `yaml:"ledgerKeyFile"`
	// LedgerURL is the REST base URL of the ledger the Provider posts to;
	// default this ledgerd.
	LedgerURL string `yaml:"ledgerUrl"`
	// DevicePollInterval is the least time between a personal agent's
	// token polls during a device authorization (RFC 8628; default 5s).
	DevicePollInterval Duration `yaml:"devicePollInterval"`
	// OutboxMaxBytes bounds the receipts and refusals waiting in the
	// Provider's outbox for the ledger (while the ledger is down, they
	// pile up on disk): past it, a turn that would queue one more answers
	// 500 with Retry-After and is kept nothing of. Default 1 GiB.
	OutboxMaxBytes int64 `yaml:"outboxMaxBytes"`
	// LedgerTLS is how the Provider reaches a ledgerUrl over https: the CA
	// to trust and a client certificate for a ledger that asks for one.
	LedgerTLS ClientTLS `yaml:"ledgerTls"`
	// RetiredKeyTTL is how long a signing key retired by `ledgerd provider
	// rotate-key` stays published in every delegating brand's JWKS, for
	// what it signed to verify; at least 1h. Default 168h (7 days).
	RetiredKeyTTL Duration `yaml:"retiredKeyTTL"`
	// PruneInterval is how often the Provider prunes what has come due in
	// its store (expired conversations, device authorizations, ended
	// grants...) while it runs, whether requests come or not; at least
	// 1s. Default 10m (pact.DefaultPruneInterval).
	PruneInterval Duration `yaml:"pruneInterval"`
}

// DefaultRetiredKeyTTL is provider.retiredKeyTTL's default, the
// Provider's own (pact.DefaultRetiredKeyTTL).
const DefaultRetiredKeyTTL = 7 * 24 * time.Hour

// RateLimits are the Provider's request limits.
type RateLimits struct {
	PerAgent RateLimit `yaml:"perAgent"`
	PerUser  RateLimit `yaml:"perUser"`
}

// RateLimit is a token bucket: rate requests per second, bursts of burst;
// rate 0 means no limit.
type RateLimit struct {
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
}

// RefusalLimit bounds the refusals of account actions asked under PACT
// §3 alone (no delegation grant) that the Provider queues for the ledger:
// they record no action and no grant, and personal agents cost nothing to
// make, so a bound per agent does not bound them. Past it the agent is
// answered as ever and the refusal is counted, not recorded.
type RefusalLimit struct {
	// Rate and Burst are a token bucket per brand: rate 0 means no limit.
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
	// OutboxPercent is the part of outboxMaxBytes, 1 to 100, such
	// refusals may hold; the rest stays for receipts, denied consents and
	// the other refusals. 0: the default, 50.
	OutboxPercent int `yaml:"outboxPercent"`
}

// On reports whether the Provider runs.
func (p Provider) On() bool { return p.Enabled == nil || *p.Enabled }

// Drills configures the monthly drill.
type Drills struct {
	Monthly MonthlyDrill `yaml:"monthly"`
}

// MonthlyDrill is when the monthly drill runs (UTC) and how many rows it
// samples.
type MonthlyDrill struct {
	Enabled *bool `yaml:"enabled"`
	Day     int   `yaml:"day"`
	Hour    int   `yaml:"hour"`
	Minute  int   `yaml:"minute"`
	Sample  int   `yaml:"sample"`
}

// On reports whether the scheduled monthly drill runs (default yes).
func (m MonthlyDrill) On() bool { return m.Enabled == nil || *m.Enabled }

// validate names each field of drills.monthly out of its range, with its
// value.
func (m MonthlyDrill) validate() []error {
	var errs []error
	for _, f := range []struct {
		name           string
		v, least, most int
		note           string
	}{
		{"day", m.Day, 1, 28, " (a day every month has)"},
		{"hour", m.Hour, 0, 23, " (UTC)"},
		{"minute", m.Minute, 0, 59, ""},
		{"sample", m.Sample, 1, 100, " rows"},
	} {
		if f.v < f.least || f.v > f.most {
			errs = append(errs, fmt.Errorf("drills.monthly.%s %d: %d to %d%s", f.name, f.v, f.least, f.most, f.note))
		}
	}
	return errs
}

// Listen holds the listen addresses.
type Listen struct {
	GRPC string `yaml:"grpc"`
	HTTP string `yaml:"http"`
}

// Evidence selects the write-once evidence store.
type Evidence struct {
	// Type is "dir" (default) or "s3".
	Type string `yaml:"type"`
	// Dir is the evidence directory for type dir; default <dataDir>/evidence.
	Dir string `yaml:"dir"`
	S3  S3     `yaml:"s3"`
}

// S3 locates an S3 bucket with Object Lock.
type S3 struct {
	Endpoint     string `yaml:"endpoint"`
	Bucket       string `yaml:"bucket"`
	Region       string `yaml:"region"`
	AccessKey    string `yaml:"accessKey"`
	SecretKey    string `yaml:"secretKey"`
	Insecure     bool   `yaml:"insecure"`
	CreateBucket bool   `yaml:"createBucket"`
	// CheckTimeout bounds one attempt of the bucket check (exists, Object
	// Lock on), which runs in the background from start-up until it
	// passes; default 10s.
	CheckTimeout Duration `yaml:"checkTimeout"`
	// CheckMaxBackoff caps the wait between failed attempts of the bucket
	// check; default 30s.
	CheckMaxBackoff Duration `yaml:"checkMaxBackoff"`
}

// APIKey is one API key: its name, the hex SHA-256 of the key, and roles.
type APIKey struct {
	Name   string   `yaml:"name"`
	SHA256 string   `yaml:"sha256"`
	Roles  []string `yaml:"roles"`
}

// Brand is a trusted brand.
type Brand struct {
	InterfaceURL string `yaml:"interfaceUrl"`
	JWKSURI      string `yaml:"jwksUri"`
	MetadataURL  string `yaml:"metadataUrl"`
	Issuer       string `yaml:"issuer"`
	// DisplayName is what customers call the brand, for dispute replies.
	DisplayName string `yaml:"displayName"`
}

// Agent is a registered personal agent.
type Agent struct {
	Issuer  string `yaml:"issuer"`
	JWKSURI string `yaml:"jwksUri"`
	Enabled *bool  `yaml:"enabled"`
	// DisplayName is the platform's name as customers know it ("MyHelper"),
	// for dispute replies and the embedded Provider's consent and account
	// pages.
	DisplayName string `yaml:"displayName"`
}

// Retention overrides the retention periods and extends the tool table.
type Retention struct {
	// Periods by class name, as "18 months" or "90 days".
	Periods map[string]string `yaml:"periods"`
	// Tools maps a tool to a class name; merged over the built-in table.
	Tools map[string]string `yaml:"tools"`
	// Scopes maps a PACT scope id to a class name; merged over the built-in
	// table. A receipt row is never kept shorter than its scopes used imply;
	// a scope missing from the table takes the longest class.
	Scopes map[string]string `yaml:"scopes"`
	// SweepInterval is how often the sweeper runs (also once at start-up);
	// default 1h.
	SweepInterval Duration `yaml:"sweepInterval"`
}

// Log configures logging.
type Log struct {
	Level string `yaml:"level"`
}

// SlogLevel is Level as a slog level: debug, info (also unset), warn or
// error.
func (l Log) SlogLevel() (slog.Level, error) {
	switch l.Level {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return slog.LevelInfo, fmt.Errorf("log level %q: want debug, info, warn or error", l.Level)
}

// RequestLimits bounds request sizes.
type RequestLimits struct {
	// MaxBodyBytes caps REST bodies and gRPC messages; default 1 MiB, at
	// least MinBodyBytes.
	MaxBodyBytes int `yaml:"maxBodyBytes"`
	// StreamBytes bounds what every AppendReceiptStream together holds
	// in memory: receipts read and not yet answered, answers not yet
	// sent. Once it is spent, streams are not read until answers are
	// sent; one stream holds at most a sixteenth of it. Default
	// DefaultStreamBytes (128 MiB); at least 4 × maxBodyBytes.
	StreamBytes int64 `yaml:"streamBytes"`
	// Streams bounds the AppendReceiptStream calls open at once, a
	// quarter of them (at least one) under one API key: each stream
	// waiting for room in streamBytes holds the receipt it read and its
	// HTTP/2 window besides. Default DefaultStreams; at least 1.
	Streams int `yaml:"streams"`
}

// DefaultStreams is limits.streams unset: far more streams than
// pipelines keep open, and at most about 320 MiB held outside
// limits.streamBytes at the default maxBodyBytes.
const DefaultStreams = 256

// DefaultStreamBytes is limits.streamBytes unset: about 13,000 receipts
// of 5 KB with their answers, 200 streams full at once.
const DefaultStreamBytes = 128 << 20

// MinBodyBytes is the least limits.maxBodyBytes takes: a receipt with its
// three tokens at their 16-KiB caps and its actions.
const MinBodyBytes = 64 << 10

// UploaderOptions tunes the evidence uploader.
type UploaderOptions struct {
	// Workers is how many uploads run at once: 1 to MaxUploaderWorkers;
	// unset (0): 8.
	Workers int `yaml:"workers"`
	// Batch is how many outbox entries one round takes: 1 to
	// MaxUploaderBatch; unset (0): 512.
	Batch int `yaml:"batch"`
	// MaxBackoff caps the wait after a failed upload round; default 30s.
	MaxBackoff Duration `yaml:"maxBackoff"`
	// ClaimTTL is how long the outbox entries one round claims stay this
	// replica's before another replica's uploader may take them; default 5m.
	ClaimTTL Duration `yaml:"claimTTL"`
	// Interval is the most often an upload round starts after one that
	// took less than a full batch; unset: ledger.DefaultUploadInterval
	// (250ms), 0s: rounds back to back.
	Interval *Duration `yaml:"interval,omitempty"`
}

// Bounds of uploader.workers and uploader.batch.
const (
	// MaxUploaderWorkers is the most uploads one ledgerd runs at once. The
	// evidence store's S3 client keeps that many connections open for
	// reuse, and more besides for reads (storage/s3).
	MaxUploaderWorkers = 64
	// MaxUploaderBatch is the most outbox entries one round takes: the
	// round holds their bodies in memory while it uploads them.
	MaxUploaderBatch = 10000
)

// MaxUploadInterval bounds uploader.interval: evidence waits in the row
// store up to this long for its round.
const MaxUploadInterval = time.Minute

// DefaultMinFreeDiskBytes is the default of readiness.minFreeDiskBytes:
// 256 MiB.
const DefaultMinFreeDiskBytes = 256 << 20

// MerkleLog configures the tamper-evident log over all rows.
type MerkleLog struct {
	// Enabled keeps the log (default true).
	Enabled *bool `yaml:"enabled"`
	// Origin is the log's name, the first line of every checkpoint and the
	// name of its key: a schema-less URL such as "ledger.example.com/log".
	// Default "localhost/pactledger"; set it before publishing checkpoints.
	Origin string `yaml:"origin"`
	// Interval is the most often the tree is extended; default 500ms.
	Interval Duration `yaml:"interval"`
	// KeyFile holds the checkpoint signing key (a note signer key);
	// default <dataDir>/log/signing.key, created on first start.
	KeyFile string `yaml:"keyFile"`
	// KeepPublished keeps every leaf and stored hash in the bbolt file
	// (default false: those of each full tile of 256 leaves are dropped
	// once evidence storage holds the tile and they read back equal).
	KeepPublished bool `yaml:"keepPublished"`
}

// On reports whether the log is kept.
func (m MerkleLog) On() bool { return m.Enabled == nil || *m.Enabled }

// ClockOptions are the clocks ledgerd checks its own against, besides
// the S3 evidence store's and the PostgreSQL row store's, which it reads
// whenever it uses them.
type ClockOptions struct {
	// References are URLs of servers whose time ledgerd reads from the
	// Date header of their answer to a HEAD request (RFC 9110 §6.6.1), at
	// most MaxClockReferences: with the embedded default (a bbolt file and
	// an evidence directory) the only clocks besides the host's. HTTPS;
	// plain http only to loopback with allowInsecureLoopbackJwks.
	References []string `yaml:"references"`
}

// MaxClockReferences is the most clock.references.
const MaxClockReferences = 4

// checkClockReference says what is wrong with a clock.references URL.
func checkClockReference(uri string, insecureLoopback bool) error {
	u, err := url.Parse(uri)
	switch {
	case err != nil || u.Host == "":
		return fmt.Errorf("%q is not an absolute URL", uri)
	case u.User != nil:
		return errors.New("a URL with a user name or password: a time reference needs none, and /readyz and the logs must not show one")
	case u.Scheme == "https":
		return nil
	case u.Scheme != "http":
		return fmt.Errorf("%s: scheme %q: want https", uri, u.Scheme)
	}
	a, err := netip.ParseAddr(u.Hostname())
	if insecureLoopback && (u.Hostname() == "localhost" || err == nil && a.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("%s: plain http: want https (http only to loopback, with allowInsecureLoopbackJwks)", uri)
}

// Readiness tunes /readyz and the gRPC health status.
type Readiness struct {
	// MinFreeDiskBytes: below this much free space on the data
	// directory's filesystem ledgerd reports not ready (a write could fail
	// for lack of space); default DefaultMinFreeDiskBytes.
	MinFreeDiskBytes int64 `yaml:"minFreeDiskBytes"`
}

// Duration is a time.Duration written as "30s".
type Duration time.Duration

// UnmarshalYAML parses a Go duration string. Its error is a
// yaml.TypeError, so that decoding goes on and reports the file's other
// errors with it.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a duration like 30s, not %s", n.Line, describe(n))}}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes d as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Default returns the embedded default configuration.
func Default() Config {
	return Config{
		Listen:          Listen{GRPC: "127.0.0.1:9090", HTTP: "127.0.0.1:8080"},
		DataDir:         "./data",
		Evidence:        Evidence{Type: "dir"},
		Audience:        "urn:pactledger:provider",
		Log:             Log{Level: "info"},
		ShutdownTimeout: Duration(30 * time.Second),
		Limits:          RequestLimits{MaxBodyBytes: 1 << 20, StreamBytes: DefaultStreamBytes, Streams: DefaultStreams},
		Readiness:       Readiness{MinFreeDiskBytes: DefaultMinFreeDiskBytes},
		MerkleLog:       MerkleLog{Origin: "localhost/pactledger", Interval: Duration(500 * time.Millisecond)},
		Drills:          Drills{Monthly: MonthlyDrill{Day: 1, Hour: 3, Minute: 0, Sample: 5}},
		Retention:       Retention{SweepInterval: Duration(time.Hour)},
		AccessLog:       AccessLog{Retention: "12 months"},
		Verifier:        VerifierOptions{CacheSize: DefaultVerifierCacheSize, KeyTables: verifier.DefaultKeyTables},
		Runtime:         RuntimeOptions{HeapFloorMiB: DefaultHeapFloorMiB},
		Provider: Provider{Listen: "127.0.0.1:8090", RateLimits: RateLimits{
			PerAgent: RateLimit{Rate: 100, Burst: 200},
			PerUser:  RateLimit{Rate: 5, Burst: 20},
		}, RefusalLimit: RefusalLimit{Rate: 20, Burst: 200, OutboxPercent: 50}, RetiredKeyTTL: Duration(DefaultRetiredKeyTTL)},
	}
}

// Load reads path over the defaults. An empty path means defaults only.
func Load(path string) (Config, error) {
	c := Default()
	if path == "" {
		return c, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return c, loadError(path, b, err)
	}
	return c, nil
}

// EnvS3SecretKey names the environment variable that overrides
// evidence.s3.secretKey, so the secret need not sit in the file.
const EnvS3SecretKey = "PACTLEDGER_S3_SECRET_KEY"

// ApplyEnv applies the environment's overrides of the file to c, reading
// the environment with getenv (os.Getenv): PACTLEDGER_S3_SECRET_KEY, when
// set and not empty, is evidence.s3.secretKey. Every ledgerd command that
// loads the configuration applies them, so each sees what serving sees.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if v := getenv(EnvS3SecretKey); v != "" {
		c.Evidence.S3.SecretKey = v
	}
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Validate checks the configuration and fills derived defaults.
func (c *Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("dataDir is required"))
	}
	if c.Listen.GRPC == "" || c.Listen.HTTP == "" {
		errs = append(errs, errors.New("listen.grpc and listen.http are required"))
	}
	errs = append(errs, c.Store.validate(c.DataDir)...)
	errs = append(errs, c.validateLeases()...)
	switch c.Evidence.Type {
	case "", "dir":
		c.Evidence.Type = "dir"
		if c.Evidence.Dir == "" {
			c.Evidence.Dir = filepath.Join(c.DataDir, "evidence")
		}
	case "s3":
		if c.Evidence.S3.Endpoint == "" || c.Evidence.S3.Bucket == "" {
			errs = append(errs, errors.New("evidence.s3.endpoint and evidence.s3.bucket are required for type s3"))
		}
		// Static keys only: without both, every request is anonymous and
		// the bucket check only ever hears "Access Denied".
		switch s3 := c.Evidence.S3; {
		case s3.AccessKey == "":
			errs = append(errs, errors.New("evidence.s3.accessKey is required for type s3 (--s3-access-key)"))
		case s3.SecretKey == "":
			errs = append(errs, errors.New("evidence.s3.secretKey is empty: set "+EnvS3SecretKey+" (or evidence.s3.secretKey)"))
		}
	default:
		errs = append(errs, fmt.Errorf("evidence.type %q: want dir or s3", c.Evidence.Type))
	}
	names, hashes := map[string]bool{}, map[string]string{}
	for i, k := range c.APIKeys {
		if k.Name == "" || names[k.Name] {
			errs = append(errs, fmt.Errorf("apiKeys[%d]: a unique name is required", i))
		}
		names[k.Name] = true
		switch {
		case !sha256Hex.MatchString(k.SHA256):
			errs = append(errs, fmt.Errorf("apiKeys[%d] %s: sha256 must be 64 lowercase hex (sha256sum of the key)", i, k.Name))
		case k.SHA256 == emptyKeyHash:
			// What printf %s "$KEY" | sha256sum gives with KEY unset: a
			// request without a key would carry it.
			errs = append(errs, fmt.Errorf("apiKeys[%d] %s: sha256 is the hash of an empty key (was the key's variable unset when it was hashed?)", i, k.Name))
		case hashes[k.SHA256] != "":
			errs = append(errs, fmt.Errorf("apiKeys[%d] %s: the same key as %s (its sha256 is the same): give each key a key of its own", i, k.Name, hashes[k.SHA256]))
		default:
			hashes[k.SHA256] = k.Name
		}
		if len(k.Roles) == 0 {
			errs = append(errs, fmt.Errorf("apiKeys[%d] %s: at least one role is required", i, k.Name))
		}
		for _, r := range k.Roles {
			if !slices.Contains(Roles, r) {
				errs = append(errs, fmt.Errorf("apiKeys[%d] %s: unknown role %q (want %s)", i, k.Name, r, strings.Join(Roles, ", ")))
			}
		}
	}
	if c.Audience == "" {
		errs = append(errs, errors.New("audience is required"))
	}
	for i, b := range c.Brands {
		if b.InterfaceURL == "" || (b.JWKSURI == "") == (b.MetadataURL == "") {
			errs = append(errs, fmt.Errorf("brands[%d]: interfaceUrl and exactly one of jwksUri or metadataUrl are required", i))
		}
		for _, u := range []string{b.JWKSURI, b.MetadataURL} {
			if u != "" {
				if err := verifier.CheckFetchURI(u, c.AllowInsecureLoopbackJWKS); err != nil {
					errs = append(errs, fmt.Errorf("brands[%d]: %w", i, err))
				}
			}
		}
	}
	for i, a := range c.Agents {
		if a.Issuer == "" || a.JWKSURI == "" {
			errs = append(errs, fmt.Errorf("agents[%d]: issuer and jwksUri are required", i))
		} else if err := verifier.CheckFetchURI(a.JWKSURI, c.AllowInsecureLoopbackJWKS); err != nil {
			errs = append(errs, fmt.Errorf("agents[%d]: %w", i, err))
		}
		// The issuer names the agent on its rows, and a refusal records it
		// as its claimed agent: it must be a name the ledger takes.
		if err := ledger.CheckName(fmt.Sprintf("agents[%d].issuer", i), a.Issuer); a.Issuer != "" && err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := c.Policy(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Log.SlogLevel(); err != nil {
		errs = append(errs, fmt.Errorf("log.level %q: want debug, info, warn or error", c.Log.Level))
	}
	if len(c.Clock.References) > MaxClockReferences {
		errs = append(errs, fmt.Errorf("clock.references: %d, at most %d", len(c.Clock.References), MaxClockReferences))
	}
	for i, u := range c.Clock.References {
		if err := checkClockReference(u, c.AllowInsecureLoopbackJWKS); err != nil {
			errs = append(errs, fmt.Errorf("clock.references[%d]: %w", i, err))
		}
	}
	errs = append(errs, c.Drills.Monthly.validate()...)
	if u := c.Provider.LedgerURL; u != "" {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			errs = append(errs, fmt.Errorf("provider.ledgerUrl %q: an http(s) URL", u))
		}
	}
	if c.Provider.OutboxMaxBytes < 0 {
		errs = append(errs, errors.New("provider.outboxMaxBytes: not negative (0 for the default, 1 GiB)"))
	}
	if d := time.Duration(c.Provider.DevicePollInterval); d < 0 || (d > 0 && (d < time.Second || d%time.Second != 0)) {
		errs = append(errs, errors.New("provider.devicePollInterval: whole seconds, at least 1s"))
	}
	if d := time.Duration(c.Provider.PruneInterval); d < 0 || (d > 0 && d < time.Second) {
		errs = append(errs, errors.New("provider.pruneInterval: at least 1s (0 for the default, 10m)"))
	}
	if d := time.Duration(c.Provider.RetiredKeyTTL); d != 0 && d < time.Hour {
		errs = append(errs, errors.New("provider.retiredKeyTTL: at least 1h, the life of a delegation token (0 for the default, 168h)"))
	}
	if c.Provider.On() && c.Provider.Listen == "" {
		errs = append(errs, errors.New("provider.listen is required when the provider is enabled"))
	}
	for _, l := range []RateLimit{c.Provider.RateLimits.PerAgent, c.Provider.RateLimits.PerUser} {
		if l.Rate < 0 || l.Burst < 0 {
			errs = append(errs, errors.New("provider.rateLimits: rate and burst must not be negative"))
		}
	}
	if l := c.Provider.RefusalLimit; l.Rate < 0 || l.Burst < 0 {
		errs = append(errs, errors.New("provider.refusalLimit: rate and burst must not be negative"))
	}
	if p := c.Provider.RefusalLimit.OutboxPercent; p < 0 || p > 100 {
		errs = append(errs, fmt.Errorf("provider.refusalLimit.outboxPercent %d: 1 to 100 (0 for the default, 50)", p))
	}
	if _, err := c.Console.Proxies(); err != nil {
		errs = append(errs, err)
	}
	if c.Retention.SweepInterval <= 0 {
		errs = append(errs, errors.New("retention.sweepInterval must be positive, like 1h"))
	}
	if n := c.Verifier.CacheSize; n < 0 || n > MaxVerifierCacheSize {
		errs = append(errs, fmt.Errorf("verifier.cacheSize %d: 0 (no cache) to %d", n, MaxVerifierCacheSize))
	}
	if n := c.Verifier.KeyTables; n < 0 || n > verifier.MaxKeyTables {
		errs = append(errs, fmt.Errorf("verifier.keyTables %d: 0 (none) to %d", n, verifier.MaxKeyTables))
	}
	if n := c.Runtime.HeapFloorMiB; n < 0 || n > MaxHeapFloorMiB {
		errs = append(errs, fmt.Errorf("runtime.heapFloorMiB %d: 0 (none) to %d", n, MaxHeapFloorMiB))
	}
	switch n := c.Limits.MaxBodyBytes; {
	case n == 0:
		c.Limits.MaxBodyBytes = 1 << 20
	case n < MinBodyBytes:
		errs = append(errs, fmt.Errorf("limits.maxBodyBytes %d: at least %d, a receipt with its tokens (0 or unset: 1048576)", n, MinBodyBytes))
	}
	switch n, least := c.Limits.StreamBytes, 4*int64(c.Limits.MaxBodyBytes); {
	case n == 0:
		c.Limits.StreamBytes = DefaultStreamBytes
	case n < least:
		errs = append(errs, fmt.Errorf("limits.streamBytes %d: at least %d, 4 × limits.maxBodyBytes (0 or unset: %d)", n, least, DefaultStreamBytes))
	}
	switch n := c.Limits.Streams; {
	case n == 0:
		c.Limits.Streams = DefaultStreams
	case n < 0:
		errs = append(errs, fmt.Errorf("limits.streams %d: at least 1 (0 or unset: %d)", n, DefaultStreams))
	}
	if c.Evidence.S3.CheckTimeout < 0 || c.Evidence.S3.CheckMaxBackoff < 0 || c.Uploader.MaxBackoff < 0 {
		errs = append(errs, errors.New("evidence.s3.checkTimeout, evidence.s3.checkMaxBackoff and uploader.maxBackoff must not be negative"))
	}
	if n := c.Uploader.Workers; n < 0 || n > MaxUploaderWorkers {
		errs = append(errs, fmt.Errorf("uploader.workers %d: 1 to %d (0 or unset: 8)", n, MaxUploaderWorkers))
	}
	if n := c.Uploader.Batch; n < 0 || n > MaxUploaderBatch {
		errs = append(errs, fmt.Errorf("uploader.batch %d: 1 to %d (0 or unset: 512)", n, MaxUploaderBatch))
	}
	if d := c.Uploader.Interval; d != nil && (*d < 0 || time.Duration(*d) > MaxUploadInterval) {
		errs = append(errs, fmt.Errorf("uploader.interval %s: want 0s (back to back) to %s", time.Duration(*d), MaxUploadInterval))
	}
	errs = append(errs, c.TLS.validate()...)
	if _, err := c.AccessRetention(); err != nil {
		errs = append(errs, err)
	}
	if l := c.Provider.LedgerTLS; (l.CertFile == "") != (l.KeyFile == "") {
		errs = append(errs, errors.New("provider.ledgerTls.certFile and keyFile go together"))
	}
	switch {
	case c.Readiness.MinFreeDiskBytes < 0:
		errs = append(errs, errors.New("readiness.minFreeDiskBytes must not be negative"))
	case c.Readiness.MinFreeDiskBytes == 0:
		c.Readiness.MinFreeDiskBytes = DefaultMinFreeDiskBytes
	}
	return errors.Join(errs...)
}

// ParsePeriod parses "18 months", "90 days" or "1 month".
func ParsePeriod(s string) (retention.Period, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return retention.Period{}, fmt.Errorf("period %q: want like \"18 months\" or \"90 days\"", s)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 {
		return retention.Period{}, fmt.Errorf("period %q: want a positive number", s)
	}
	var p retention.Period
	switch strings.TrimSuffix(f[1], "s") {
	case "month":
		p.Months = n
	case "day":
		p.Days = n
	default:
		return retention.Period{}, fmt.Errorf("period %q: unit must be months or days", s)
	}
	// retention's own parser bounds the count (retention.MaxYears).
	return retention.ParsePeriod(p.String())
}

// Policy returns the retention policy: the defaults with the configured
// periods and tools applied.
func (c *Config) Policy() (retention.Policy, error) {
	p := retention.DefaultPolicy()
	for name, s := range c.Retention.Periods {
		cl, err := retention.ParseClass(name)
		if err != nil {
			return p, fmt.Errorf("retention.periods: %w", err)
		}
		per, err := ParsePeriod(s)
		if err != nil {
			return p, fmt.Errorf("retention.periods.%s: %w", name, err)
		}
		p.Periods[cl] = per
	}
	for tool, name := range c.Retention.Tools {
		cl, err := retention.ParseClass(name)
		if err != nil {
			return p, fmt.Errorf("retention.tools.%s: %w", tool, err)
		}
		p.Tools[tool] = cl
	}
	for scope, name := range c.Retention.Scopes {
		cl, err := retention.ParseClass(name)
		if err != nil {
			return p, fmt.Errorf("retention.scopes.%s: %w", scope, err)
		}
		p.Scopes[scope] = cl
	}
	return p, p.Validate()
}

// VerifierBrands converts the brands for the verifier.
func (c *Config) VerifierBrands() []verifier.Brand {
	out := make([]verifier.Brand, len(c.Brands))
	for i, b := range c.Brands {
		out[i] = verifier.Brand{InterfaceURL: b.InterfaceURL, JWKSURI: b.JWKSURI, MetadataURL: b.MetadataURL, Issuer: b.Issuer}
	}
	return out
}

// VerifierAgents converts the personal-agent registry for the verifier;
// enabled defaults to true.
func (c *Config) VerifierAgents() []verifier.Agent {
	out := make([]verifier.Agent, len(c.Agents))
	for i, a := range c.Agents {
		out[i] = verifier.Agent{Issuer: a.Issuer, JWKSURI: a.JWKSURI, Enabled: a.Enabled == nil || *a.Enabled}
	}
	return out
}

// HashKey returns the hex SHA-256 of an API key, as configured.
func HashKey(key string) string {
	return hex.EncodeToString(sum256([]byte(key)))
}

// emptyKeyHash is HashKey(""), which no key may have.
var emptyKeyHash = HashKey("")

package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/retention"
)

func TestExampleLoadsAndValidates(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledgerd.yaml")
	if err := os.WriteFile(p, config.Example, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the printed example does not validate: %v", err)
	}
	if len(c.Brands) != 1 || len(c.Agents) != 1 || len(c.APIKeys) != 2 {
		t.Fatalf("example parsed to %+v", c)
	}
}

// loadValid loads the configuration text yaml and validates it.
func loadValid(t *testing.T, yaml string) config.Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("%q: %v", yaml, err)
	}
	return c
}

// verifier.keyTables is 16 unless set, and 0 turns the tables off.
func TestKeyTablesSetting(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int
	}{{"verifier: {cacheSize: 5}\n", 16}, {"verifier: {keyTables: 0}\n", 0}, {"verifier: {keyTables: 256}\n", 256}} {
		if c := loadValid(t, tc.yaml); c.Verifier.KeyTables != tc.want {
			t.Fatalf("%q: keyTables %d, want %d", tc.yaml, c.Verifier.KeyTables, tc.want)
		}
	}
}

// runtime.heapFloorMiB is 256 unless set, and 0 leaves the collector to
// GOGC.
func TestHeapFloorSetting(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int
	}{{"log: {level: info}\n", 256}, {"runtime: {heapFloorMiB: 0}\n", 0}, {"runtime: {heapFloorMiB: 1024}\n", 1024}} {
		if c := loadValid(t, tc.yaml); c.Runtime.HeapFloorMiB != tc.want {
			t.Fatalf("%q: heapFloorMiB %d, want %d", tc.yaml, c.Runtime.HeapFloorMiB, tc.want)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown field", "dataDirr: x\n", "dataDirr"},
		{"bad role", "apiKeys: [{name: a, sha256: " + strings.Repeat("a", 64) + ", roles: [root]}]\n", "unknown role"},
		{"bad hash", "apiKeys: [{name: a, sha256: abc, roles: [writer]}]\n", "sha256"},
		{"duplicate key names", "apiKeys: [{name: a, sha256: " + strings.Repeat("a", 64) + ", roles: [writer]}, {name: a, sha256: " + strings.Repeat("b", 64) + ", roles: [admin]}]\n", "unique name"},
		{"hash of an empty key", "apiKeys: [{name: lead, sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855, roles: [support]}]\n", "hash of an empty key"},
		{"one key under two names", "apiKeys: [{name: a, sha256: " + strings.Repeat("a", 64) + ", roles: [writer]}, {name: b, sha256: " + strings.Repeat("a", 64) + ", roles: [admin]}]\n", "the same key as a"},
		{"http jwks", "agents: [{issuer: https://pa, jwksUri: http://pa.example/jwks}]\n", "plain http"},
		{"loopback http without the flag", "agents: [{issuer: https://pa, jwksUri: http://127.0.0.1:1/jwks}]\n", "plain http"},
		{"brand with both uris", "brands: [{interfaceUrl: https://b, jwksUri: https://b/j, metadataUrl: https://b/m}]\n", "exactly one"},
		{"s3 without bucket", "evidence: {type: s3, s3: {endpoint: x:1}}\n", "bucket"},
		{"s3 without keys", "evidence: {type: s3, s3: {endpoint: x:1, bucket: b}}\n", "evidence.s3.accessKey is required"},
		{"s3 without a secret", "evidence: {type: s3, s3: {endpoint: x:1, bucket: b, accessKey: AKIA}}\n", "evidence.s3.secretKey is empty: set PACTLEDGER_S3_SECRET_KEY"},
		{"bad period", "retention: {periods: {read_only: 90 weeks}}\n", "months or days"},
		{"period past any date", "retention: {periods: {refused: 9223372036854775807 months}}\n", "longer than 100 years"},
		{"period of a thousand years", "retention: {periods: {incident: 12000 months}}\n", "longer than 100 years"},
		{"bad class", "retention: {tools: {refund: forever}}\n", "unknown retention class"},
		{"tool to incident", "retention: {tools: {refund: incident}}\n", "tools map to"},
		{"bad duration", "shutdownTimeout: soon\n", "duration"},
		{"negative heap floor", "runtime: {heapFloorMiB: -1}\n", "runtime.heapFloorMiB -1"},
		{"heap floor too large", "runtime: {heapFloorMiB: 2000000}\n", "runtime.heapFloorMiB 2000000"},
		{"negative free disk", "readiness: {minFreeDiskBytes: -1}\n", "readiness.minFreeDiskBytes"},
		{"negative s3 check timeout", "evidence: {type: s3, s3: {endpoint: x:1, bucket: b, checkTimeout: -1s}}\n", "checkTimeout"},
		{"negative uploader backoff", "uploader: {maxBackoff: -1s}\n", "maxBackoff"},
		{"tls cert without key", "tls: {certFile: /c.pem}\n", "tls.certFile and tls.keyFile go together"},
		{"client CA without a certificate", "tls: {clientCaFile: /ca.pem}\n", "tls.clientCaFile needs"},
		{"unknown client auth", "tls: {certFile: /c.pem, keyFile: /k.pem, clientCaFile: /ca.pem, clientAuth: maybe}\n", "tls.clientAuth"},
		{"client auth without a CA", "tls: {certFile: /c.pem, keyFile: /k.pem, clientAuth: require}\n", "needs tls.clientCaFile"},
		{"provider client cert without key", "provider: {ledgerTls: {certFile: /c.pem}}\n", "provider.ledgerTls"},
		{"provider retired key period under a token's life", "provider: {retiredKeyTTL: 30m}\n", "provider.retiredKeyTTL"},
		{"provider prune interval under a second", "provider: {pruneInterval: 10ms}\n", "provider.pruneInterval"},
		{"negative provider prune interval", "provider: {pruneInterval: -1m}\n", "provider.pruneInterval"},
		{"negative provider refusal limit", "provider: {refusalLimit: {rate: -1}}\n", "provider.refusalLimit"},
		{"provider refusals' share of the outbox over 100", "provider: {refusalLimit: {outboxPercent: 101}}\n", "provider.refusalLimit.outboxPercent"},
		{"bad access log retention", "accessLog: {retention: forever}\n", "accessLog.retention"},
		{"negative verifier cache", "verifier: {cacheSize: -1}\n", "verifier.cacheSize"},
		{"huge verifier cache", "verifier: {cacheSize: 1000001}\n", "verifier.cacheSize"},
		{"negative key tables", "verifier: {keyTables: -1}\n", "verifier.keyTables"},
		{"too many key tables", "verifier: {keyTables: 257}\n", "verifier.keyTables"},
		{"negative uploader workers", "uploader: {workers: -8}\n", "uploader.workers -8: 1 to 64"},
		{"too many uploader workers", "uploader: {workers: 65}\n", "uploader.workers 65: 1 to 64"},
		{"negative uploader batch", "uploader: {batch: -1}\n", "uploader.batch -1: 1 to 10000"},
		{"huge uploader batch", "uploader: {batch: 10001}\n", "uploader.batch 10001: 1 to 10000"},
		{"negative body cap", "limits: {maxBodyBytes: -5}\n", "limits.maxBodyBytes -5: at least 65536"},
		{"body cap under a receipt", "limits: {maxBodyBytes: 1000}\n", "limits.maxBodyBytes 1000: at least 65536"},
		{"stream budget under 4 bodies", "limits: {streamBytes: 4000000}\n", "limits.streamBytes 4000000: at least 4194304, 4 × limits.maxBodyBytes"},
		{"negative stream budget", "limits: {maxBodyBytes: 65536, streamBytes: -1}\n", "limits.streamBytes -1: at least 262144"},
		{"negative streams", "limits: {streams: -1}\n", "limits.streams -1: at least 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := config.Load(p)
			if err == nil {
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// A file that does not decode is told in the configuration's words: the
// file and the line, the YAML path of the setting and what it wants, and
// no Go type; every error of the file at once.
func TestLoadErrorsInTheFilesWords(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown field", "listen:\n  grpc: 127.0.0.1:1\n  grcp: 127.0.0.1:2\n", `FILE line 3: unknown field "grcp" in listen`},
		{"unknown top-level field", "dataDirr: x\n", `FILE line 1: unknown field "dataDirr" at the top level`},
		{"unknown nested field", "drills:\n  monthly:\n    dya: 3\n", `FILE line 3: unknown field "dya" in drills.monthly`},
		{"unknown field in a list", "apiKeys:\n  - name: a\n    role: [writer]\n", `FILE line 3: unknown field "role" in apiKeys[0]`},
		{"not a number", "uploader: {workers: many}\n", `FILE line 1: uploader.workers: want a whole number, not "many"`},
		{"long value", "uploader:\n  batch: manymanymanymany\n", `FILE line 2: uploader.batch: want a whole number, not "manymanymanymany"`},
		{"list for a block", "listen: [a]\n", `FILE line 1: listen: want a mapping, not a list`},
		{"list for a string", "retention:\n  periods:\n    read_only: [1]\n", `FILE line 3: retention.periods.read_only: want a string, not a list`},
		{"not a bool", "provider:\n  enabled: maybe\n", `FILE line 2: provider.enabled: want true or false, not "maybe"`},
		{"two on a line", "provider: {rateLimits: {perAgent: {rate: x, burts: 3}}}\n",
			"FILE line 1: provider.rateLimits.perAgent.rate: want a number, not \"x\"\nFILE line 1: unknown field \"burts\" in provider.rateLimits.perAgent"},
		{"empty", "", "config FILE: no settings: the file is empty or only comments"},
		{"only comments", "# listen: {grpc: 127.0.0.1:9090}\n", "config FILE: no settings: the file is empty or only comments"},
		{"bad duration and more", "shutdownTimeout: soon\nlisten: {grcp: x}\n",
			"FILE line 1: shutdownTimeout: want a duration like 30s, not \"soon\"\nFILE line 2: unknown field \"grcp\" in listen"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "ledgerd.yaml")
			if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := config.Load(p)
			if err == nil {
				t.Fatal("loaded")
			}
			if got := strings.ReplaceAll(err.Error(), p, "FILE"); got != tc.want {
				t.Fatalf("error:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// drills.monthly's errors name each field out of its range with its value,
// and no other.
func TestMonthlyDrillBounds(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"day 31", "drills: {monthly: {day: 31}}\n", "drills.monthly.day 31: 1 to 28 (a day every month has)"},
		{"day 0", "drills: {monthly: {day: 0}}\n", "drills.monthly.day 0: 1 to 28 (a day every month has)"},
		{"hour 24", "drills: {monthly: {hour: 24}}\n", "drills.monthly.hour 24: 0 to 23 (UTC)"},
		{"minute -1", "drills: {monthly: {minute: -1}}\n", "drills.monthly.minute -1: 0 to 59"},
		{"sample 0", "drills: {monthly: {sample: 0}}\n", "drills.monthly.sample 0: 1 to 100 rows"},
		{"sample 101", "drills: {monthly: {sample: 101}}\n", "drills.monthly.sample 101: 1 to 100 rows"},
		{"two fields", "drills: {monthly: {day: 31, minute: 60}}\n", "drills.monthly.day 31: 1 to 28 (a day every month has)\ndrills.monthly.minute 60: 0 to 59"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := config.Load(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err == nil || err.Error() != tc.want {
				t.Fatalf("Validate: %v, want %s", err, tc.want)
			}
		})
	}
	loadValid(t, "drills: {monthly: {day: 28, hour: 23, minute: 59, sample: 100}}\n")
	loadValid(t, "drills: {monthly: {day: 1, hour: 0, minute: 0, sample: 1}}\n")
}

func TestPolicyOverrides(t *testing.T) {
	c := config.Default()
	c.Retention.Periods = map[string]string{"read_only": "30 days", "money_moved": "24 months"}
	c.Retention.Tools = map[string]string{"refund_shipping": "money_moved"}
	p, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	if p.Periods[retention.ReadOnly] != (retention.Period{Days: 30}) || p.Periods[retention.MoneyMoved] != (retention.Period{Months: 24}) || p.Tools["refund_shipping"] != retention.MoneyMoved || p.Tools["lookup_orders"] != retention.ReadOnly {
		t.Fatalf("policy %+v", p)
	}
}

func TestEnsureKeysCreatesOnePerRoleOnce(t *testing.T) {
	c := config.Default()
	c.DataDir = t.TempDir()
	keys, dir, created, err := config.EnsureKeys(&c)
	if err != nil || !created || len(keys) != 4 {
		t.Fatalf("first start: %v %v %d", err, created, len(keys))
	}
	for _, role := range config.Roles {
		st, err := os.Stat(filepath.Join(dir, role+".key"))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s.key: %v %v", role, err, st.Mode())
		}
	}
	again, _, created, err := config.EnsureKeys(&c)
	if err != nil || created || again[0].SHA256 != keys[0].SHA256 {
		t.Fatalf("second start created new keys: %v %v", err, created)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "writer.key"))
	if config.HashKey(strings.TrimSpace(string(b))) != keys[0].SHA256 {
		t.Fatalf("stored hash is not the SHA-256 of the key file")
	}
}

// Key files ledgerd made are closed to others; one copied in with a
// looser mode, and a directory opened up, are named.
func TestLooseKeyFilesAreNamed(t *testing.T) {
	c := config.Default()
	c.DataDir = t.TempDir()
	_, dir, _, err := config.EnsureKeys(&c)
	if err != nil {
		t.Fatal(err)
	}
	if loose := config.LooseKeyFiles(dir); len(loose) != 0 {
		t.Fatalf("the files ledgerd made: %q", loose)
	}
	if err := os.Chmod(filepath.Join(dir, "admin.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	want := []string{dir + " (mode 0755)", filepath.Join(dir, "admin.key") + " (mode 0644)"}
	if loose := config.LooseKeyFiles(dir); !slices.Equal(loose, want) {
		t.Fatalf("loose %q, want %q", loose, want)
	}
}

// Every secret file a configuration names (TLS keys, the Provider's
// writer key, the log's key, the database's password) is named when others
// than its owner may read or change it, and its folder when others may
// write into it; files ledgerd made, files not there and sticky folders
// are not.
func TestLooseSecretFilesAreNamed(t *testing.T) {
	c := config.Default()
	c.DataDir = t.TempDir()
	if _, _, _, err := config.EnsureLogKey(&c); err != nil {
		t.Fatal(err)
	}
	shared := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(shared, name)
		if err := os.WriteFile(p, []byte("secret\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	c.TLS.KeyFile = write("tls.key", 0o600)
	c.Store.PasswordFile = write("db.password", 0o600)
	c.Provider.LedgerKeyFile = filepath.Join(shared, "not-there.key")
	if err := os.Chmod(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	files := c.SecretFiles()
	for _, want := range []string{c.TLS.KeyFile, c.Store.PasswordFile, c.Provider.LedgerKeyFile, c.LogKeyFile()} {
		if !slices.Contains(files, want) {
			t.Errorf("secret files %q leave out %s", files, want)
		}
	}
	if loose := config.LooseSecretFiles(files); len(loose) != 0 {
		t.Fatalf("files of mode 0600 in folders of 0700: %q", loose)
	}

	if err := os.Chmod(c.Store.PasswordFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(c.LogKeyFile(), 0o660); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o775); err != nil {
		t.Fatal(err)
	}
	loose := strings.Join(config.LooseSecretFiles(files), "\n")
	for _, want := range []string{
		c.Store.PasswordFile + " (mode 0644: others than its owner may read or change it",
		c.LogKeyFile() + " (mode 0660: others than its owner may read or change it",
		shared + " (mode 0775: others than its owner may replace the secret files in it",
	} {
		if !strings.Contains(loose, want) {
			t.Errorf("loose secret files:\n%s\nwant %s", loose, want)
		}
	}
	if strings.Contains(loose, c.TLS.KeyFile+" ") {
		t.Errorf("a 0600 file named loose:\n%s", loose)
	}

	// A key its group may read is loose unless root owns it.
	if err := os.Chmod(c.TLS.KeyFile, 0o640); err != nil {
		t.Fatal(err)
	}
	named := len(config.LooseSecretFiles([]string{c.TLS.KeyFile})) > 1 // its folder is named too
	if root := os.Geteuid() == 0; named == root {
		t.Errorf("a key of mode 0640 made by uid %d named loose: %v", os.Geteuid(), named)
	}
	if err := os.Chmod(c.TLS.KeyFile, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if loose := strings.Join(config.LooseSecretFiles([]string{c.TLS.KeyFile}), "\n"); loose != "" {
		t.Errorf("a 0600 file in a sticky folder: %s", loose)
	}
}

// A DSN that gives the database password itself is told apart from one
// that leaves it to passwordFile, passwordEnv or the driver's own sources.
func TestADSNHoldingAPasswordIsNoticed(t *testing.T) {
	for dsn, want := range map[string]bool{
		"host=db1 dbname=ledger user=ledgerd":                            false,
		"postgres://ledgerd@db1/ledger?sslmode=verify-full":              false,
		"postgresql://db1/ledger":                                        false,
		"host=db1 user=ledgerd password=hunter2":                         true,
		"password = hunter2 host=db1":                                    true,
		"postgres://ledgerd:hunter2@db1/ledger":                          true,
		"postgresql://ledgerd:@db1/ledger":                               true,
		"postgres://ledgerd@db1/ledger?password=hunter2&sslmode=require": true,
		"host=db1 passfile=/etc/pactledger/pgpass":                       false,
	} {
		if got := (config.Store{Kind: config.StorePostgres, DSN: dsn}).DSNHoldsPassword(); got != want {
			t.Errorf("DSNHoldsPassword(%q) = %v, want %v", dsn, got, want)
		}
	}
}

// A data dir that is not a directory is named as the data dir, not as
// the API key directory within it.
func TestEnsureKeysDataDirNotADirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "afile")
	if err := os.WriteFile(file, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dataDir, want string
	}{
		{"a file", file, "data dir " + file + ": not a directory"},
		{"under a file", filepath.Join(file, "sub"), "data dir " + filepath.Join(file, "sub") + ": mkdir " + file + ": not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			c.DataDir = tc.dataDir
			if _, _, _, err := config.EnsureKeys(&c); err == nil || err.Error() != tc.want {
				t.Fatalf("EnsureKeys: %v, want %s", err, tc.want)
			}
		})
	}
}

func TestReadinessDefaults(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want int64
	}{
		{"absent", "log: {level: info}\n", config.DefaultMinFreeDiskBytes},
		{"zero means the default", "readiness: {minFreeDiskBytes: 0}\n", config.DefaultMinFreeDiskBytes},
		{"set", "readiness: {minFreeDiskBytes: 1048576}\n", 1 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := loadValid(t, tc.yaml).Readiness.MinFreeDiskBytes; got != tc.want {
				t.Fatalf("minFreeDiskBytes = %d, want %d", got, tc.want)
			}
		})
	}
	if config.DefaultMinFreeDiskBytes != 256<<20 {
		t.Fatalf("default %d, want 256 MiB", config.DefaultMinFreeDiskBytes)
	}
}

func TestConsoleTrustedProxies(t *testing.T) {
	got, err := config.Console{TrustedProxies: []string{"10.0.0.0/8", "192.0.2.7", "fd00::1/8"}}.Proxies()
	if err != nil {
		t.Fatal(err)
	}
	if want := "[10.0.0.0/8 192.0.2.7/32 fd00::/8]"; fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
	c := config.Default()
	c.Console.TrustedProxies = []string{"lb.internal"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `console.trustedProxies: "lb.internal"`) {
		t.Errorf("Validate with a host name: %v", err)
	}
}

// ApplyEnv takes evidence.s3.secretKey from PACTLEDGER_S3_SECRET_KEY when
// it is set and leaves the file's value otherwise.
func TestApplyEnv(t *testing.T) {
	for _, tc := range []struct{ file, env, want string }{
		{"", "from-env", "from-env"},
		{"from-file", "from-env", "from-env"},
		{"from-file", "", "from-file"},
	} {
		c := config.Default()
		c.Evidence.S3.SecretKey = tc.file
		c.ApplyEnv(func(k string) string {
			if k == config.EnvS3SecretKey {
				return tc.env
			}
			return ""
		})
		if c.Evidence.S3.SecretKey != tc.want {
			t.Errorf("file %q, environment %q: secretKey %q, want %q", tc.file, tc.env, c.Evidence.S3.SecretKey, tc.want)
		}
	}
}

// A registered agent's issuer names it on its rows, and a refusal records
// it as its claimed agent: one the ledger would refuse as a name (over 512
// bytes, or holding an invisible character) is refused at start, where
// every refusal of the agent would otherwise be set aside for good.
func TestARegisteredAgentsIssuerMustBeANameTheLedgerTakes(t *testing.T) {
	for _, iss := range []string{"https://pa.example/" + strings.Repeat("a", 600), "https://pa.example/\u200b"} {
		c := config.Default()
		c.Agents = []config.Agent{{Issuer: iss, JWKSURI: "https://pa.example/jwks.json"}}
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "agents[0].issuer") {
			t.Errorf("issuer %.40q…: %v; want it refused, naming agents[0].issuer", iss, err)
		}
	}
}

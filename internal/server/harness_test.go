package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/server"
	"github.com/pactledger/pactledger/internal/syncbuf"
)

var s3srv *s3test.Server

func TestMain(m *testing.M) { s3test.Main(m, &s3srv) }

// keys are the test API keys, one per role.
var keys = map[string]string{
	config.RoleWriter:  "test-writer-key",
	config.RoleSupport: "test-support-key",
	config.RoleAuditor: "test-auditor-key",
	config.RoleAdmin:   "test-admin-key",
}

type env struct {
	sc   *pacttest.Scenario
	srv  *server.Server
	base string
	cfg  config.Config
	stop func()
	// client sends e.call's requests; nil is http.DefaultClient (set it
	// for a TLS listener).
	client *http.Client
	// logw receives ledgerd's JSON log; nil discards it.
	logw io.Writer
}

type envOpt func(*config.Config)

func withS3(bucket string) envOpt {
	return func(c *config.Config) {
		c.Evidence.Type = "s3"
		c.Evidence.S3 = config.S3{Endpoint: s3srv.Endpoint, Bucket: bucket, AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, Insecure: true, CreateBucket: true}
	}
}

func testConfig(sc *pacttest.Scenario, dataDir string) config.Config {
	cfg := config.Default()
	cfg.Listen = config.Listen{GRPC: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
	cfg.Provider.Listen = "127.0.0.1:0"
	cfg.DataDir = dataDir
	cfg.Audience = sc.Audience
	cfg.AllowInsecureLoopbackJWKS = true
	for role, k := range keys {
		cfg.APIKeys = append(cfg.APIKeys, config.APIKey{Name: role + "-key", SHA256: config.HashKey(k), Roles: []string{role}})
	}
	for _, b := range sc.Brands() {
		cfg.Brands = append(cfg.Brands, config.Brand{InterfaceURL: b.InterfaceURL, JWKSURI: b.JWKSURI, Issuer: b.Issuer})
	}
	for _, a := range sc.Agents() {
		cfg.Agents = append(cfg.Agents, config.Agent{Issuer: a.Issuer, JWKSURI: a.JWKSURI})
	}
	cfg.ShutdownTimeout = config.Duration(5 * time.Second)
	return cfg
}

func newEnv(t testing.TB, alg jose.SignatureAlgorithm, opts ...envOpt) *env {
	t.Helper()
	sc := pacttest.NewScenario(alg, alg)
	t.Cleanup(sc.Close)
	cfg := testConfig(sc, t.TempDir())
	for _, o := range opts {
		o(&cfg)
	}
	e := &env{sc: sc, cfg: cfg}
	e.start(t)
	return e
}

// newLoggingEnv is newEnv with ES256 keys and ledgerd's JSON log kept in
// the buffer it returns.
func newLoggingEnv(t testing.TB) (*env, *syncbuf.Buffer) {
	t.Helper()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	logs := &syncbuf.Buffer{}
	e := &env{sc: sc, cfg: testConfig(sc, t.TempDir()), logw: logs}
	e.start(t)
	return e, logs
}

func (e *env) start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var h slog.Handler = slog.DiscardHandler
	if e.logw != nil {
		h = slog.NewJSONHandler(e.logw, nil)
	}
	srv, err := server.New(ctx, e.cfg, slog.New(h))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	e.srv, e.base = srv, "http://"+srv.HTTPAddr()
	if a := srv.ProviderAddr(); a != "" && e.cfg.Provider.Listen == "127.0.0.1:0" {
		// A restart keeps the Provider's address, and with it the
		// default provider.baseUrl (the brands' interface URLs), as a
		// deployment does: entries waiting under another one stop a
		// start (docs/design/039).
		e.cfg.Provider.Listen = a
	}
	if e.cfg.TLS.On() {
		e.base = "https://" + srv.HTTPAddr()
	}
	stopped := false
	e.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	}
	t.Cleanup(e.stop)
}

// call sends a REST request with the key of role ("" for none) and decodes
// the JSON reply into out when out is not nil. It returns the status code.
func (e *env) call(t testing.TB, method, path, role string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if role != "" {
		k := keys[role]
		if k == "" {
			k = role // a raw key
		}
		req.Header.Set("Authorization", "Bearer "+k)
	}
	client := e.client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

// post is the body of POST /v1/receipts for r.
func post(r *pacttest.Receipt) map[string]any {
	var actions []map[string]string
	for _, a := range r.Actions {
		actions = append(actions, map[string]string{"tool": a.Tool, "target": a.Target, "argsJson": a.ArgsJSON})
	}
	return map[string]any{"receiptJws": r.ReceiptJWS, "requestJwt": r.RequestJWT, "delegationToken": r.DelegationToken, "actions": actions}
}

// Row is the REST shape of a row (API.md), decoded loosely for assertions.
type Row struct {
	ID        string `json:"id"`
	ReceiptID string `json:"receiptId"`
	Kind      string `json:"kind"`
	Status    string `json:"status"`
	GrantID   string `json:"grantId"`
	Principal string `json:"principal"`
	Brand     string `json:"brand"`
	Agent     struct {
		Platform, RequestJwtKid, JwksSnapshot string
	} `json:"agent"`
	BrandKey struct {
		Kid, JwksSnapshot string
	} `json:"brandKey"`
	ScopeGranted []string `json:"scopeGranted"`
	ScopesUsed   []string `json:"scopesUsed"`
	Actions      []struct {
		Tool, Target, ArgsHash, ArgsHashSource, TargetSource string
	} `json:"actions"`
	IssuedAt string `json:"issuedAt"`
	Verifier struct {
		CheckedBy   string  `json:"checkedBy"`
		Checks      []Check `json:"checks"`
		DuplicateOf string  `json:"duplicateOf"`
	} `json:"verifier"`
	EvidenceSha256 string `json:"evidenceSha256"`
	RetentionClass string `json:"retentionClass"`
	RetainUntil    string `json:"retainUntil"`
	IncidentID     string `json:"incidentId"`
	DisputeStatus  string `json:"disputeStatus"`
	DisputeEvents  []struct {
		At, Status, Note, By string
	} `json:"disputeEvents"`
}

// Check is one verifier check.
type Check struct {
	Name, Result, Detail string
}

func (r Row) check(name string) Check {
	for _, c := range r.Verifier.Checks {
		if c.Name == name {
			return c
		}
	}
	return Check{}
}

type appendReply struct {
	Row     Row    `json:"row"`
	Outcome string `json:"outcome"`
}

package server_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/retention"
)

// brandsDir writes brand files, each the built-in brand file base with
// the replacements (old, new, old, new, …), into a directory of their own.
func brandsDir(t *testing.T, files map[string][]string, base string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("../../pact/brands", base))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, repl := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.NewReplacer(repl...).Replace(string(raw))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// newBrandEnv starts a ledger whose Provider serves the brand files of
// dir, with ledgerd's JSON log kept in the buffer it returns.
func newBrandEnv(t *testing.T, dir string, opts ...envOpt) (*env, *syncbuf.Buffer) {
	t.Helper()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	logs := &syncbuf.Buffer{}
	cfg := testConfig(sc, t.TempDir())
	cfg.Provider.BrandsDir = dir
	for _, o := range opts {
		o(&cfg)
	}
	e := &env{sc: sc, cfg: cfg, logw: logs}
	e.start(t)
	return e, logs
}

// Where two brand files put one tool in different classes, the one the
// configured periods keep longer wins (account_changed kept 36 months
// outlasts money_moved's 18), not a fixed order of the classes; the
// disagreement is logged at start, naming the tool and the brands.
func TestBrandFilesDisagreeingTheLongerConfiguredPeriodWins(t *testing.T) {
	dir := brandsDir(t, map[string][]string{
		"skyways.yaml":  nil,
		"otherair.yaml": {"id: skyways", "id: otherair", "retention: account_changed", "retention: money_moved"},
	}, "skyways.yaml")
	e, logs := newBrandEnv(t, dir, func(c *config.Config) {
		c.Retention.Periods = map[string]string{"account_changed": "36 months"}
	})
	p := e.srv.Ledger().Policy()
	if p.Tools["change_seat"] != retention.AccountChanged || p.Scopes["seats:change"] != retention.AccountChanged {
		t.Errorf("change_seat %s, seats:change %s; want account_changed (36 months) over money_moved (18 months)", p.Tools["change_seat"], p.Scopes["seats:change"])
	}
	if !warned(logs.String(), `"tool":"change_seat"`, "otherair: money_moved", "skyways: account_changed") {
		t.Errorf("no WARN naming change_seat, otherair and skyways in\n%s", logs)
	}
}

// warned reports whether a WARN line of the JSON log holds every one of
// words.
func warned(log string, words ...string) bool {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"level":"WARN"`) && !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(l, w) }) {
			return true
		}
	}
	return false
}

// A brand file does not shorten the class the ledger's own table gives a
// tool or scope, which every other brand's receipts (external brands'
// too) take: a brand filing change_plan (plan:change) as account_changed
// leaves plan changes money_moved. It may lengthen one, and
// retention.tools and retention.scopes in the configuration still win.
func TestABrandFileDoesNotShortenTheLedgersTable(t *testing.T) {
	dir := brandsDir(t, map[string][]string{
		"skyways.yaml": {"change_seat", "change_plan", "seats:change", "plan:change"},
		"acme.yaml":    {"id: skyways", "id: acme", "change_seat", "update_contact", "seats:change", "profile:write", "retention: account_changed", "retention: money_moved"},
	}, "skyways.yaml")
	e, logs := newBrandEnv(t, dir)
	p := e.srv.Ledger().Policy()
	if p.Tools["change_plan"] != retention.MoneyMoved || p.Scopes["plan:change"] != retention.MoneyMoved {
		t.Errorf("change_plan %s, plan:change %s; want the ledger's money_moved", p.Tools["change_plan"], p.Scopes["plan:change"])
	}
	if p.Tools["update_contact"] != retention.MoneyMoved || p.Scopes["profile:write"] != retention.MoneyMoved {
		t.Errorf("update_contact %s, profile:write %s; want the brand file's longer money_moved", p.Tools["update_contact"], p.Scopes["profile:write"])
	}
	if !warned(logs.String(), `"tool":"change_plan"`, "skyways: account_changed") {
		t.Errorf("no WARN naming change_plan and skyways in\n%s", logs)
	}

	e, _ = newBrandEnv(t, dir, func(c *config.Config) {
		c.Retention.Tools = map[string]string{"change_plan": "account_changed"}
		c.Retention.Scopes = map[string]string{"plan:change": "read_only"}
	})
	p = e.srv.Ledger().Policy()
	if p.Tools["change_plan"] != retention.AccountChanged || p.Scopes["plan:change"] != retention.ReadOnly {
		t.Errorf("configured: change_plan %s, plan:change %s", p.Tools["change_plan"], p.Scopes["plan:change"])
	}
}

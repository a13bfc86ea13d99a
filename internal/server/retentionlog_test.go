package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/syncbuf"
)

// ledgerd says at start which retention periods are in force, and warns
// of one shorter than its class's default: money moved kept 90 days would
// otherwise go unseen until its rows were swept. Read only may be shorter.
func TestStartLogsTheRetentionPeriodsAndWarnsOfShortOnes(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	logs := &syncbuf.Buffer{}
	cfg := testConfig(sc, t.TempDir())
	cfg.Retention.Periods = map[string]string{"money_moved": "90 days", "read_only": "30 days"}
	e := &env{sc: sc, cfg: cfg, logw: logs}
	e.start(t)

	var warned []string
	var inForce map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		switch {
		case m["level"] == "WARN" && strings.HasPrefix(m["msg"].(string), "a retention period is shorter"):
			warned = append(warned, m["class"].(string)+" "+m["period"].(string)+" < "+m["default"].(string))
		case m["msg"] == "retention periods in force":
			inForce = m
		}
	}
	if want := []string{"money_moved 90 days < 18 months"}; strings.Join(warned, "; ") != strings.Join(want, "; ") {
		t.Errorf("warnings %q, want %q (read only, which keeps no evidence of an action, may be shorter)", warned, want)
	}
	if inForce == nil || inForce["money_moved"] != "90 days" || inForce["account_changed"] != "12 months" || inForce["incident"] != "12 months" {
		t.Errorf("the periods in force: %v", inForce)
	}
}

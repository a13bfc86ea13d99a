package console_test

import (
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
)

// The row page says under each target what vouches for it: the signed
// args for the pipeline's post of a receipt, marked as a warning the
// action log alone for a real receipt a writer posted with its action
// filed under another order.
func TestRowPageSaysWhereATargetComesFrom(t *testing.T) {
	e := newEnv(t, nil)
	signed := e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"}))
	moved := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-6000"})
	moved.Actions[0].Target = "B-8888"
	movedRow := e.record(t, moved)
	c := e.newWebClient(t)
	c.signIn(t, config.RoleSupport)
	for _, tc := range []struct {
		id, want, not string
	}{
		{signed.GetId(), `<span class="target-source">named in the signed args</span>`, "target-source writer"},
		{movedRow.GetId(), `<span class="target-source writer">the action log's alone — the signed args do not name it</span>`, "named in the signed args"},
	} {
		code, body := c.get(t, "/console/rows/"+tc.id)
		body = html.UnescapeString(body)
		if code != http.StatusOK || !strings.Contains(body, tc.want) || strings.Contains(body, tc.not) {
			t.Errorf("row page %s = %d; want %q, not %q:\n%s", tc.id[:12], code, tc.want, tc.not, body)
		}
	}
}

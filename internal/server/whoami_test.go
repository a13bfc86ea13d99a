package server_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/buildinfo"
	"github.com/pactledger/pactledger/internal/pacttest"
)

func TestWhoAmI(t *testing.T) {
	e := newEnv(t, jose.ES256)
	for role := range keys {
		var got struct {
			Name          string
			Roles         []string
			ServerVersion string
		}
		if code := e.call(t, "GET", "/v1/whoami", role, nil, &got); code != http.StatusOK {
			t.Fatalf("whoami as %s: %d", role, code)
		}
		if got.Name != role+"-key" || !slices.Equal(got.Roles, []string{role}) || got.ServerVersion != buildinfo.Read().String() {
			t.Errorf("whoami as %s: %+v", role, got)
		}
	}
	for _, key := range []string{"", "not-a-key"} {
		if code := e.call(t, "GET", "/v1/whoami", key, nil, nil); code != http.StatusUnauthorized {
			t.Errorf("whoami with key %q: %d, want 401", key, code)
		}
	}
}

// Every RPC that names a row takes a unique prefix of at least 8 hex
// characters; shorter or unknown prefixes are refused.
func TestRowIDPrefixes(t *testing.T) {
	e := newEnv(t, jose.ES256)
	var rep appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{})), &rep)
	id := rep.Row.ID
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/rows/" + id[:8]},
		{"GET", "/v1/rows/" + id[:12] + "/evidence"},
		{"POST", "/v1/rows/" + id[:12] + ":verify"},
	} {
		var got struct {
			Row   struct{ ID string }
			RowID string
		}
		if code := e.call(t, c.method, c.path, "support", map[string]any{}, &got); code != http.StatusOK || (got.Row.ID != id && got.RowID != id) {
			t.Errorf("%s %s: %d %+v", c.method, c.path, code, got)
		}
	}
	var drill struct{ Report struct{ Rows []string } }
	if code := e.call(t, "POST", "/v1/drills", "support", map[string]any{"rowId": id[:10]}, &drill); code != http.StatusOK || !slices.Equal(drill.Report.Rows, []string{id}) {
		t.Errorf("drill by prefix: %d %+v", code, drill)
	}
	unknown := "ffffffff"
	if strings.HasPrefix(id, unknown) {
		unknown = "00000000"
	}
	for path, want := range map[string]int{"/v1/rows/" + id[:7]: http.StatusBadRequest, "/v1/rows/" + unknown: http.StatusNotFound} {
		if code := e.call(t, "GET", path, "support", nil, nil); code != want {
			t.Errorf("GET %s: %d, want %d", path, code, want)
		}
	}
	if code := e.call(t, "GET", "/v1/rows/"+unknown, "writer", nil, nil); code != http.StatusForbidden {
		t.Errorf("writer probing a prefix: %d, want 403", code)
	}
}

func TestBuildInfoMetric(t *testing.T) {
	e := newEnv(t, jose.ES256)
	res, err := http.Get(e.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	b := buildinfo.Read()
	if want := `pactledger_build_info{goversion="` + b.GoVersion + `",revision="` + b.Revision + `",version="` + b.Version + `"} 1`; !strings.Contains(string(body), want) {
		t.Fatalf("/metrics lacks %s", want)
	}
}

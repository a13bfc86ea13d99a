package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/customer"
)

// hostile is a server at another origin than the Provider's: it serves
// card at /card.json and records every other request.
type hostile struct {
	*httptest.Server
	mu   sync.Mutex
	card []byte
	got  []string // method and path of each request but the card's
}

func newHostile(t *testing.T) *hostile {
	t.Helper()
	h := &hostile{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if r.URL.Path == "/card.json" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(h.card)
			return
		}
		h.got = append(h.got, r.Method+" "+r.URL.Path)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hostile) requests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

// cardOf is the Provider's card for the e2e's brand, decoded, with edit
// applied to its device flow (nil: as it is).
func (e *e2e) cardOf(edit func(deviceCode, scheme map[string]any)) []byte {
	e.t.Helper()
	res, err := http.Get(e.card)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var card map[string]any
	if err := json.NewDecoder(res.Body).Decode(&card); err != nil {
		e.t.Fatal(err)
	}
	for _, s := range card["securitySchemes"].(map[string]any) {
		if o, ok := s.(map[string]any)["oauth2SecurityScheme"].(map[string]any); ok && edit != nil {
			edit(o["flows"].(map[string]any)["deviceCode"].(map[string]any), o)
		}
	}
	b, _ := json.Marshal(card)
	return b
}

// A card hosted anywhere may name a Brand's interface (PACT §2.1), but the
// user's grant there is refreshed only at the token endpoint of the
// server that issued it, and nothing signed goes to a card's OAuth
// endpoints off the Provider: a card copying the Brand's with its own
// token, device or metadata URL gets no refresh token and no JWT.
func TestARefreshGoesOnlyToTheServerThatIssuedTheGrant(t *testing.T) {
	e := newE2E(t)
	jane := customer.New("jane@example.com", "acme-jane-demo")
	e.authorizeAll(jane, "jane")
	if g := e.grantFile("jane"); g == nil || g.Server.TokenURL == "" || g.Server.Issuer == "" || g.Server.MetadataURL == "" {
		t.Fatalf("the grant does not name its server: %+v", g)
	}
	e.editGrant("jane", func(g *grantFile) { g.Token.Expires = time.Now() }) // the next send refreshes
	h := newHostile(t)
	for name, edit := range map[string]func(dc, o map[string]any){
		"tokenUrl":               func(dc, _ map[string]any) { dc["tokenUrl"] = h.URL + "/token" },
		"deviceAuthorizationUrl": func(dc, _ map[string]any) { dc["deviceAuthorizationUrl"] = h.URL + "/device" },
		"all three": func(dc, o map[string]any) {
			dc["tokenUrl"], dc["deviceAuthorizationUrl"], o["oauth2MetadataUrl"] = h.URL+"/token", h.URL+"/device", h.URL+"/.well-known/oauth-authorization-server"
		},
	} {
		h.mu.Lock()
		h.card = e.cardOf(edit)
		h.mu.Unlock()
		out, err := e.wait(e.start("send", "--dir", e.dir, "--card", h.URL+"/card.json", "--user", "jane", "status of A-88213"))
		if err == nil || !strings.Contains(err.Error(), "not at the Provider this agent signs its requests for") {
			t.Errorf("a card naming its own %s: %v\n%s", name, err, out)
		}
	}
	if got := h.requests(); len(got) != 0 {
		t.Fatalf("the other host got %q", got)
	}
	// The Brand's own card, wherever it is hosted, refreshes at the Brand.
	h.mu.Lock()
	h.card = e.cardOf(nil)
	h.mu.Unlock()
	old := e.grantFile("jane").Token.RefreshToken
	out, err := e.wait(e.start("send", "--dir", e.dir, "--card", h.URL+"/card.json", "--user", "jane", "status of A-88213"))
	if err != nil || !strings.Contains(out, "shipped") || !strings.Contains(out, "receipt verified") || e.grantFile("jane").Token.RefreshToken == old {
		t.Fatalf("the Brand's card hosted elsewhere: %v\n%s", err, out)
	}
	if got := h.requests(); len(got) != 0 {
		t.Fatalf("the other host got %q", got)
	}
}

// A grant is kept under its interface and the issuer of the server that
// issued it: a grant kept without them (before grants named their server)
// is not used, refreshed or sent, and authorize makes a new one.
func TestAGrantWithoutItsServerIsNotUsed(t *testing.T) {
	e := newE2E(t)
	jane := customer.New("jane@example.com", "acme-jane-demo")
	e.authorizeAll(jane, "jane")
	g := e.grantFile("jane")
	iface := strings.TrimSuffix(e.card, "/.well-known/agent-card.json")
	b, _ := json.Marshal(map[string]any{iface + " jane": map[string]any{"token": g.Token}})
	if err := os.WriteFile(filepath.Join(e.dir, "grants.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := e.wait(e.start(e.agent("jane", "send", "status of A-88213")...))
	if err != nil || strings.Contains(out, "receipt verified") {
		t.Fatalf("send with a grant of no server: %v\n%s", err, out)
	}
}

// Personal-agent JWTs name the audience of one Provider: they go only to
// the Provider's origins (init --provider), never to an interface a card
// on another host names there, where they could be replayed at the
// Provider for 120 s.
func TestSignedRequestsGoOnlyToTheProviderItsAudienceIsFor(t *testing.T) {
	e := newE2E(t)
	h := newHostile(t)
	h.card = []byte(fmt.Sprintf(`{"name":"Other","supportedInterfaces":[{"url":%q,"protocolBinding":"HTTP+JSON","protocolVersion":"1.0"}]}`, h.URL+"/a2a/other"))
	for _, args := range [][]string{
		{"send", "--dir", e.dir, "--card", h.URL + "/card.json", "--user", "jane", "hello"},
		{"authorize", "--dir", e.dir, "--card", h.URL + "/card.json", "--user", "jane", "--scope", "s"},
	} {
		err := run(args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "not at the Provider this agent is set up for") || !strings.Contains(err.Error(), "urn:test:provider") {
			t.Errorf("%s: %v", args[0], err)
		}
	}
	if got := h.requests(); len(got) != 0 {
		t.Fatalf("the other host got %q", got)
	}
	// Settings naming no Provider (made before init asked for one) send
	// nothing signed, and say what to add.
	dir := t.TempDir()
	if err := run([]string{"init", "--dir", dir, "--issuer", "http://127.0.0.1:1", "--audience", "urn:test:provider", "--provider", e.card}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"issuer":"http://127.0.0.1:1","audience":"urn:test:provider"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"send", "--dir", dir, "--card", e.card, "--user", "jane", "hi"}, io.Discard); err == nil || !strings.Contains(err.Error(), `add "providers"`) {
		t.Errorf("settings naming no Provider: %v", err)
	}
	var u usageErr
	if err := run([]string{"init", "--dir", t.TempDir(), "--issuer", "http://127.0.0.1:1", "--audience", "urn:x"}, io.Discard); !errors.As(err, &u) {
		t.Errorf("init without --provider: %v", err)
	}
}

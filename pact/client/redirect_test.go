package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// A request carrying the agent's tokens follows no redirect: a 307 would
// send the delegation token (which Go does not drop) and the body to
// wherever it points. A card's GET carries neither and follows them (PACT
// §2.1: the Brand's domain may redirect to the Provider's card).
func TestSignedRequestsDoNotFollowRedirects(t *testing.T) {
	var hits atomic.Int32
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/card.json" {
			_, _ = w.Write([]byte(`{"name":"Shop"}`))
			return
		}
		hits.Add(1)
		_, _ = w.Write([]byte(`{"message":{"messageId":"r","contextId":"c","role":"ROLE_AGENT","parts":[{"text":"ok"}]}}`))
	}))
	other.Listener = l
	other.Start()
	defer other.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	otherURL := "http://localhost:" + port // another host than the interface's
	iface := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer iface.Close()
	c := newClient(&sleeper{}, iface.URL)
	ctx := context.Background()
	if _, err := c.SendDelegated(ctx, iface.URL+"/a2a/shop", "u", "", "", "cancel A-100", "DELEGATION-TOKEN"); !errors.Is(err, ErrRedirect) {
		t.Errorf("message:send redirected: %v, want ErrRedirect", err)
	}
	if _, err := c.Refresh(ctx, &AuthServer{TokenURL: iface.URL + "/oauth/token"}, "u", "rt"); !errors.Is(err, ErrRedirect) {
		t.Errorf("refresh redirected: %v, want ErrRedirect", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the other host got %d signed requests", n)
	}
	if card, err := c.FetchCard(ctx, iface.URL+"/card.json"); err != nil || card.Name != "Shop" {
		t.Errorf("a card's redirect: %+v, %v", card, err)
	}
}

package server_test

import (
	"net/http"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// ledgerd serves the web console on its REST listener: a visitor without
// a session is sent to sign in.
func TestConsoleIsServed(t *testing.T) {
	e := newEnv(t, jose.ES256)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(e.base + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") == "" {
		t.Fatalf("GET /console/ = %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
}

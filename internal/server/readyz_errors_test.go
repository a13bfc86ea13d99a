package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/freeport"
)

// /readyz needs no key: a load balancer probes it. An error's text, which
// may name the network's hosts, the bucket or the database's user, is
// shown to a key that may read the ledger, not to the probe nor to a
// writer; the statuses and times are shown to all.
func TestReadyzShowsErrorsOnlyToAReader(t *testing.T) {
	e := newEnv(t, jose.ES256, withS3("hidden-bucket"), func(c *config.Config) {
		c.Evidence.S3.Endpoint = freeport.Addr(t)
	})
	type ready struct {
		Evidence struct{ Status, LastError, LastErrorAt string }
	}
	readyz := func(role string) ready {
		t.Helper()
		var r ready
		if code := e.call(t, "GET", "/readyz", role, nil, &r); code != http.StatusOK {
			t.Fatalf("/readyz as %q = %d; the evidence store is a detail", role, code)
		}
		return r
	}
	deadline := time.Now().Add(30 * time.Second)
	for readyz("support").Evidence.LastError == "" {
		if time.Now().After(deadline) {
			t.Fatal("no S3 error on /readyz after 30 s with an endpoint that refuses connections")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, role := range []string{"support", "auditor", "admin"} {
		if r := readyz(role); !strings.Contains(r.Evidence.LastError, "hidden-bucket") {
			t.Errorf("/readyz as %s: lastError %q; want the error's text", role, r.Evidence.LastError)
		}
	}
	for _, role := range []string{"", "writer"} {
		r := readyz(role)
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), "127.0.0.1") || strings.Contains(string(b), "hidden-bucket") || r.Evidence.LastError == "" || r.Evidence.LastErrorAt == "" {
			t.Errorf("/readyz as %q: %s; want the error's time, not its text", role, b)
		}
	}
}

// /readyz names no error's text to a key it does not know, and logs the
// key as any call with an unknown key is logged ("call refused", with the
// key's hash prefix and the caller's address): it is no quiet place to
// try keys. A probe sending no key, and a known key, are not logged.
func TestReadyzLogsAnUnknownKey(t *testing.T) {
	e, logs := newLoggingEnv(t)
	get := func(authorization string) int {
		t.Helper()
		req, err := http.NewRequest("GET", e.base+"/readyz", nil)
		if err != nil {
			t.Fatal(err)
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := get(""); code != http.StatusOK {
		t.Fatalf("/readyz without a key = %d", code)
	}
	if code := get("Bearer " + keys[config.RoleSupport]); code != http.StatusOK {
		t.Fatalf("/readyz with a support key = %d", code)
	}
	if strings.Contains(logs.String(), "call refused") {
		t.Fatalf("/readyz without a key, or with a known one, logged a refusal:\n%s", logs.String())
	}
	if code := get("Bearer not-a-key-of-this-ledger"); code != http.StatusOK {
		t.Fatalf("/readyz with an unknown key = %d; want the answer to a caller sending none", code)
	}
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"msg":"call refused"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line["rpc"] != "readyz" || !strings.HasPrefix(fmt.Sprint(line["key"]), "unknown key sha256:") || !strings.HasPrefix(fmt.Sprint(line["from"]), "127.0.0.1:") || line["code"] != "Unauthenticated" {
		t.Fatalf("the refusal logged for an unknown key on /readyz: %v\n%s", line, logs.String())
	}
}

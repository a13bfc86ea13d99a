package server_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"
)

// maxLines is the most lines a bounded source writes in the time since
// start: a burst of 10, then one a second.
func maxLines(start time.Time) int { return 10 + int(time.Since(start)/time.Second) + 1 }

// Anyone can send the Provider a personal-agent JWT that does not verify,
// with claims of kilobytes: the rejections are logged at most a burst at
// once and one a second after, each reason cut short.
func TestRejectedAgentTokensDoNotFloodTheLog(t *testing.T) {
	e, logs := newLoggingEnv(t)
	url := "http://" + e.srv.ProviderAddr() + "/a2a/acme/message:send"
	hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","typ":"JWT","kid":"` + strings.Repeat("k", 3000) + `"}`))
	pay := base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"https://agent.example/` + strings.Repeat("i", 6000) + `","sub":"s","aud":"x","iat":1,"exp":2}`))
	junk := hdr + "." + pay + "." + strings.Repeat("A", 86)
	before := len(logs.String())
	start := time.Now()
	const n = 200
	for range n {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+junk)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a token that does not verify: %s", resp.Status)
		}
	}
	out := logs.String()[before:]
	lines := strings.Count(out, `"msg":"personal-agent JWT rejected"`)
	if lines == 0 || lines > maxLines(start) {
		t.Errorf("%d rejected tokens wrote %d lines, want 1 to %d", n, lines, maxLines(start))
	}
	if len(out) > lines*2000 {
		t.Errorf("%d lines of %d bytes: the reasons are not cut short", lines, len(out))
	}
}

// Anyone can post the console's sign-in form: refused sign-ins are logged
// at most a burst at once and one a second after.
func TestRefusedConsoleSignInsDoNotFloodTheLog(t *testing.T) {
	e, logs := newLoggingEnv(t)
	before := len(logs.String())
	start := time.Now()
	const n = 200
	for range n {
		resp, err := http.Post(e.base+"/console/signin", "application/x-www-form-urlencoded", strings.NewReader("key=x&csrf=y"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	out := logs.String()[before:]
	if lines := strings.Count(out, `"action":"sign-in refused`); lines == 0 || lines > maxLines(start) {
		t.Errorf("%d refused sign-ins wrote %d lines, want 1 to %d", n, lines, maxLines(start))
	}
}

package provider

import (
	"strings"
	"testing"
)

// FuzzParseSend feeds arbitrary bodies to the message:send parser: it must
// never panic, and what it accepts must follow PACT §4.1.
func FuzzParseSend(f *testing.F) {
	f.Add([]byte(`{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}`))
	f.Add([]byte(`{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":" "},{"url":"x"}]}}`))
	f.Add([]byte(`{"message":{"messageId":"m1","contextId":"c","taskId":"t","role":"ROLE_USER","parts":[{"text":"x","metadata":{}}]}}`))
	f.Add([]byte(`{"message":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, text, err := parseSend(body)
		if err != nil {
			if _, ok := reasonStatus[err.reason]; !ok {
				t.Fatalf("unknown reason %q", err.reason)
			}
			return
		}
		if m.Role != "ROLE_USER" || m.TaskID != "" || m.MessageID == "" || strings.TrimSpace(text) == "" {
			t.Fatalf("accepted a message §4.1 rejects: %+v %q", m, text)
		}
		for _, p := range m.Parts {
			if !p.TextOnly() {
				t.Fatalf("accepted a non-text part")
			}
		}
	})
}

// FuzzBearerToken feeds arbitrary header values to the Bearer reader: what
// it accepts has the scheme name in any case and a token without
// whitespace.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer eyJ.a.b", "bearer x", "BEARER  x ", "Basic x", "Bearer", "Bearer a b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := bearerToken(h)
		if !ok {
			if tok != "" {
				t.Fatalf("a refused header gave token %q", tok)
			}
			return
		}
		if tok == "" || strings.ContainsAny(tok, " \t\r\n") || !strings.EqualFold(h[:6], "bearer") || !strings.Contains(h, tok) {
			t.Fatalf("accepted %q as token %q", h, tok)
		}
	})
}

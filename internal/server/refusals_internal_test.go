package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Refusals are logged at most refusalBurst at once and refusalRate a
// second after that; the next line logged says how many were left out.
func TestRefusalLogIsBounded(t *testing.T) {
	var buf bytes.Buffer
	r := newRefusalLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	r.limit.SetClock(func() time.Time { return now })
	refuse := func(n int) {
		for range n {
			r.note(context.Background(), "/pactledger.ledger.v1.LedgerService/GetRow", "wrong", "", status.Error(codes.Unauthenticated, "unknown API key"))
		}
	}
	lines := func() []map[string]any {
		var out []map[string]any
		for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
			var m map[string]any
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
			out = append(out, m)
		}
		buf.Reset()
		return out
	}
	refuse(100)
	if got := lines(); len(got) != refusalBurst {
		t.Fatalf("100 refusals at once: %d lines, want %d", len(got), refusalBurst)
	}
	now = now.Add(3 * time.Second)
	refuse(100)
	got := lines()
	if len(got) != 3 || got[0]["refusals_not_logged"] != float64(90) || got[1]["refusals_not_logged"] != nil {
		t.Fatalf("3 s later: %d lines, the first %v", len(got), got)
	}
	if l := got[0]; l["level"] != "WARN" || l["msg"] != "call refused" || l["rpc"] != "GetRow" || l["code"] != "Unauthenticated" ||
		l["key"] != "unknown key sha256:8810ad58" || l["reason"] != "unknown API key" {
		t.Errorf("a refusal's line: %v", l)
	}
}

// The HTTP servers' own errors (a refused TLS handshake for each
// connection anyone opens) are bounded as refused calls are.
func TestHTTPErrorLogIsBounded(t *testing.T) {
	var buf bytes.Buffer
	l := httpErrorLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	for range 200 {
		l.Printf("http: TLS handshake error from 127.0.0.1:1234: EOF")
	}
	if n := strings.Count(buf.String(), "TLS handshake error"); n != refusalBurst {
		t.Fatalf("200 errors at once: %d lines, want %d", n, refusalBurst)
	}
	if !strings.Contains(buf.String(), `"level":"WARN"`) {
		t.Errorf("not at WARN in the JSON log:\n%s", buf.String())
	}
}

package logbound_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/logbound"
)

// A limiter writes its burst at once, then its rate a second, and the
// next line it writes counts the lines it left out.
func TestALimiterWritesItsBurstThenItsRate(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	l := logbound.New(3, 1)
	l.SetClock(func() time.Time { return now })
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	for range 10 {
		l.Log(context.Background(), log, slog.LevelWarn, "refused")
	}
	if n := strings.Count(buf.String(), "msg=refused"); n != 3 {
		t.Fatalf("10 lines at once: %d written, want the burst of 3", n)
	}
	now = now.Add(time.Second)
	l.Log(context.Background(), log, slog.LevelWarn, "refused")
	if !strings.HasSuffix(buf.String(), "msg=refused left_out=7\n") {
		t.Fatalf("the line a second later:\n%s\nwant it to count the 7 left out", buf.String())
	}
	if ok, _ := l.Take(); ok {
		t.Fatal("a line more within the second was let through")
	}
}

// A bounded writer passes a log.Logger's lines through the limiter.
func TestABoundedWriterCountsTheLinesItLeftOut(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	l := logbound.New(1, 1)
	l.SetClock(func() time.Time { return now })
	var buf bytes.Buffer
	w := l.Writer(&buf)
	for range 4 {
		if _, err := w.Write([]byte("http: TLS handshake error\n")); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Second)
	if _, err := w.Write([]byte("http: TLS handshake error\n")); err != nil {
		t.Fatal(err)
	}
	want := "http: TLS handshake error\nhttp: TLS handshake error (3 lines like it left out before this one)\n"
	if buf.String() != want {
		t.Fatalf("written:\n%q\nwant\n%q", buf.String(), want)
	}
}

func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc…"},
		{"aé", 2, "a…"}, // not inside the é
	} {
		if got := logbound.Cut(c.s, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

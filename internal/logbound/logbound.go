// Package logbound bounds the log lines that a source anyone can set off
// writes: refused calls, rejected tokens, failed TLS handshakes. A flood
// of them must not flood the log (nor fill the disk the ledger writes
// to). A Limiter writes at most a burst of lines at once and a rate a
// second after that, and the next line it writes says how many it left
// out.
package logbound

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Limiter is a token bucket of log lines. It is safe for concurrent use.
type Limiter struct {
	burst, rate float64
	now         func() time.Time

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int
}

// New returns a limiter of burst lines at once and rate lines a second
// after that.
func New(burst int, rate float64) *Limiter {
	return &Limiter{burst: float64(burst), rate: rate, now: time.Now, tokens: float64(burst)}
}

// SetClock replaces the limiter's clock (tests).
func (l *Limiter) SetClock(now func() time.Time) { l.now = now }

// Take reports whether a line may be written now, and how many were left
// out before it.
func (l *Limiter) Take() (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	}
	l.last = now
	if l.tokens < 1 {
		l.dropped++
		return false, 0
	}
	l.tokens--
	dropped, l.dropped = l.dropped, 0
	return true, dropped
}

// Log writes msg with attrs at level through log when the limiter lets
// it, with the count of lines left out before it ("left_out").
func (l *Limiter) Log(ctx context.Context, log *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	ok, dropped := l.Take()
	if !ok {
		return
	}
	if dropped > 0 {
		attrs = append(attrs, slog.Int("left_out", dropped))
	}
	log.LogAttrs(ctx, level, msg, attrs...)
}

// Writer returns w bounded by l: each Write is one line (as a log.Logger
// writes them), passed on when l lets it, with the count of lines left
// out before it appended to it.
func (l *Limiter) Writer(w io.Writer) io.Writer { return &writer{l: l, w: w} }

type writer struct {
	l *Limiter
	w io.Writer
}

func (b *writer) Write(p []byte) (int, error) {
	ok, dropped := b.l.Take()
	if !ok {
		return len(p), nil
	}
	if dropped > 0 {
		line := string(p)
		nl := len(line) > 0 && line[len(line)-1] == '\n'
		if nl {
			line = line[:len(line)-1]
		}
		line += " (" + strconv.Itoa(dropped) + " lines like it left out before this one)"
		if nl {
			line += "\n"
		}
		if _, err := io.WriteString(b.w, line); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return b.w.Write(p)
}

// Cut returns s cut to at most n bytes, on a rune boundary, with "…"
// after it when cut: for text a caller sent, quoted in a log line.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

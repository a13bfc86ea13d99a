package postgres_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// silencer forwards TCP connections to a PostgreSQL server until it is
// silenced: from then on it forwards nothing in either direction and keeps
// every socket open, as a network partition, or a host that froze, looks
// to both ends (no FIN, no RST). Connections made while silent are taken
// and never forwarded either.
type silencer struct {
	ln     net.Listener
	target string
	silent atomic.Bool
	// replyCut, when set, silences the proxy instead of forwarding a
	// server message containing it: that answer is lost.
	replyCut atomic.Pointer[[]byte]
	mu       sync.Mutex
	conns    []net.Conn
}

// newSilencer starts a proxy to the server dsn names. Close it (close)
// before the stores on it: a connection pgx gave up on is drained until
// its peer closes it, for up to 15 s.
func newSilencer(t *testing.T, dsn string) *silencer {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silencer{ln: ln, target: net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))}
	go p.serve()
	return p
}

// dsn returns dsn with its host and port replaced by the proxy's.
func (p *silencer) dsn(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable", p.ln.Addr().(*net.TCPAddr).Port, cfg.User, cfg.Database)
}

// silence stops all forwarding for good.
func (p *silencer) silence() { p.silent.Store(true) }

// loseReplyWith silences the proxy at the first server message holding m,
// which is not forwarded.
func (p *silencer) loseReplyWith(m []byte) { p.replyCut.Store(&m) }

func (p *silencer) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go p.pipe(c, up, false)
		go p.pipe(up, c, true)
	}
}

// pipe copies src to dst until the proxy is silenced, then reads and
// drops what comes.
func (p *silencer) pipe(src, dst net.Conn, reply bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if m := p.replyCut.Load(); reply && n > 0 && m != nil && bytes.Contains(buf[:n], *m) {
			p.silence()
		}
		if n > 0 && !p.silent.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err == io.EOF && !p.silent.Load() {
				// Pass the close on, as a working network would.
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			return
		}
	}
}

func (p *silencer) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

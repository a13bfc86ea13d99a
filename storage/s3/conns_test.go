package s3_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/storage/s3"
)

// countingProxy forwards loopback connections to target and counts them.
type countingProxy struct {
	l      net.Listener
	target string
	n      atomic.Int64
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn // both ends of every forwarded connection
}

func startProxy(t *testing.T, target string) *countingProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{l: l, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.n.Add(1)
			p.track(c)
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.forward(c)
			}()
		}
	}()
	// Kept-open connections end only when closed: close them all.
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *countingProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *countingProxy) forward(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.track(up)
	defer up.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(up, c)
		up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, up)
	c.(*net.TCPConn).CloseWrite()
	<-done
}

// The store keeps its connections to the object store open from one
// call to the next, as an HTTP client should: a read that left a body
// unread, or a server that closed every connection, would open one a
// call (and, over TLS, a handshake each).
func TestConnectionsReused(t *testing.T) {
	ctx := context.Background()
	p := startProxy(t, srv.Endpoint)
	st, err := s3.Open(ctx, s3.Config{Endpoint: p.l.Addr().String(), Bucket: s3test.Bucket(), AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true, CreateBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	body := []byte(strings.Repeat("evidence ", 400))
	const calls = 40
	for i := range calls {
		key := fmt.Sprintf("segments/%d", i)
		if _, err := st.Put(ctx, key, body, until); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Get(ctx, key); err != nil || string(got) != string(body) {
			t.Fatalf("get %s: %d bytes, %v", key, len(got), err)
		}
		if got, err := st.GetRange(ctx, key, 9, 18); err != nil || string(got) != "evidence evidence " {
			t.Fatalf("range of %s: %q, %v", key, got, err)
		}
		// A put of the same bytes again answers from the object there.
		if _, err := st.Put(ctx, key, body, until); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Get(ctx, "segments/none"); err == nil {
		t.Fatal("get of a missing key: no error")
	}
	if n := p.n.Load(); n > 2 {
		t.Fatalf("%d connections for %d calls one after another, want them kept open (1 or 2)", n, 4*calls+1)
	}
}

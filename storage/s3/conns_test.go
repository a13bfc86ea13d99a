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
	// The gate (gate, pass): gen counts the gates set, want is how many
	// requests the current one holds, arrived how many it holds now; open
	// closes when they are all there.
	gen, want, arrived int
	open               chan struct{}
	// arrivals, when set, has a value sent (without waiting) each time a
	// request reaches the gate.
	arrivals chan struct{}
}

// gate holds the next n requests at the proxy until all n have come: n
// requests in flight at once, each on a connection of its own. A request
// is the first bytes a connection sends after the gate is set.
func (p *countingProxy) gate(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen, p.want, p.arrived, p.open = p.gen+1, n, 0, make(chan struct{})
}

// pass holds a connection's first bytes after a gate was set until the
// gate opens (or a minute has passed: the test then fails on its counts).
// seen is the last gate the connection passed.
func (p *countingProxy) pass(seen *int) {
	p.mu.Lock()
	if p.gen == 0 || *seen == p.gen {
		p.mu.Unlock()
		return
	}
	*seen = p.gen
	p.arrived++
	if p.arrivals != nil {
		select {
		case p.arrivals <- struct{}{}:
		default:
		}
	}
	if p.arrived == p.want {
		close(p.open)
	}
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
	case <-time.After(time.Minute):
	}
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
		seen := 0
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				p.pass(&seen)
				if _, err := up.Write(buf[:n]); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
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

// As many uploads as ledgerd's uploader runs at once (and more) find
// their connections open from one round to the next: an HTTP client that
// keeps fewer idle connections than it had in use closes the rest, and
// every round would open them again (over TLS, a handshake each).
func TestConnectionsKeptForConcurrentRequests(t *testing.T) {
	ctx := context.Background()
	p := startProxy(t, srv.Endpoint)
	st, err := s3.Open(ctx, s3.Config{Endpoint: p.l.Addr().String(), Bucket: s3test.Bucket(), AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true, CreateBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(strings.Repeat("evidence ", 400))
	if _, err := st.Put(ctx, "segments/shared", body, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// More than the 16 idle connections the S3 client keeps by default,
	// fewer than s3.IdleConns.
	const inFlight = 40
	var opened int64 // by the first wave, with what the setup opened
	for wave := range 3 {
		p.gate(inFlight)
		errs := make(chan error, inFlight)
		var wg sync.WaitGroup
		for range inFlight {
			wg.Go(func() {
				got, err := st.Get(ctx, "segments/shared")
				if err == nil && string(got) != string(body) {
					err = fmt.Errorf("%d bytes back", len(got))
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("wave %d: %v", wave, err)
			}
		}
		if wave == 0 {
			opened = p.n.Load()
		}
	}
	if opened < inFlight {
		t.Fatalf("%d connections for %d requests held in flight at once", opened, inFlight)
	}
	if n := p.n.Load(); n != opened {
		t.Fatalf("%d connections opened by two more waves of %d requests at once, want the first wave's %d kept open", n-opened, inFlight, opened)
	}
}

package server_test

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/net/http2"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/server"
)

// A gRPC connection that opens no call (no key to check, nothing to
// refuse) is closed once idle, with a GOAWAY; a connection with a stream
// open is not idle, and its stream goes on.
func TestIdleGRPCConnectionsAreClosed(t *testing.T) {
	server.SetGRPCIdleTimeout(t, 200*time.Millisecond)
	e := newEnv(t, jose.ES256)
	s := openStream(t, e, "writer")

	c, err := net.Dial("tcp", e.srv.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	goAway := false
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("an idle connection is still open after 30 s (GOAWAY sent: %v)", goAway)
			}
			break // closed by the server
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			goAway = true
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		}
	}
	if !goAway {
		t.Fatal("the connection was closed without a GOAWAY")
	}

	send(t, s, 1, request(e.sc.Mint(pacttest.Spec{Target: "I-1"})))
	if got := answers(t, s, 1); got[1].GetCode() != 0 {
		t.Fatalf("the stream open past the idle time: %d %s", got[1].GetCode(), got[1].GetMessage())
	}
}

package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestAddrIsFreeBelowTheEphemeralRangeAndNeverRepeats(t *testing.T) {
	top := ephemeralStart()
	seen := map[string]bool{}
	for range 200 {
		addr := Addr(t)
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		if top-lowest >= 1024 && (p < lowest || p >= top) {
			t.Fatalf("%s lies outside [%d, %d)", addr, lowest, top)
		}
		// Nothing listens there: a server can take it, give it up and
		// take it again.
		for range 2 {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatalf("listen %s: %v", addr, err)
			}
			l.Close()
		}
	}
}

// Package freeport hands tests loopback addresses they can stop listening
// on and listen on again.
//
// A port the kernel picks for "127.0.0.1:0" comes from the ephemeral range,
// the same range it draws on for every outgoing connection and every other
// ":0" listener on the machine. A test that closes such a port to restart a
// server can find it taken when it listens again. The ports handed out here
// lie below that range, where the kernel never picks on its own, and none is
// handed out twice in one process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// lowest is the first port handed out; below it lie the well-known and
// commonly configured services' ports.
const lowest = 20000

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Addr returns a loopback address ("127.0.0.1:port") nothing listens on, on
// a port the kernel does not hand to other sockets by itself. It fails t
// when there is none.
func Addr(t testing.TB) string {
	t.Helper()
	addr, err := Pick()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Port is Addr's port, for servers started by port number.
func Port() (int, error) {
	addr, err := Pick()
	if err != nil {
		return 0, err
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}

// Pick is Addr for code without a testing.TB.
func Pick() (string, error) {
	top := ephemeralStart()
	if top-lowest < 1024 {
		return kernelPick()
	}
	mu.Lock()
	defer mu.Unlock()
	for range 500 {
		p := lowest + rand.IntN(top-lowest)
		if handed[p] {
			continue
		}
		addr := "127.0.0.1:" + strconv.Itoa(p)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		if err := l.Close(); err != nil {
			return "", err
		}
		handed[p] = true
		return addr, nil
	}
	return "", fmt.Errorf("no free loopback port in [%d, %d) after 500 tries", lowest, top)
}

// ephemeralStart is the first port of the kernel's ephemeral range, 32768
// where it cannot be read.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 {
		return 32768
	}
	return n
}

// kernelPick is the fallback where the ephemeral range leaves no room
// below it.
func kernelPick() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

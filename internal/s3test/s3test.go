// Package s3test starts a real S3 server with Object Lock (versitygw) on a
// free loopback port with a throwaway data directory, for tests and
// benchmarks. The binary comes from PACTLEDGER_VERSITYGW, which `make test`
// and `make bench` set after building versitygw at its pinned version.
package s3test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/freeport"
)

// EnvBinary names the environment variable holding the versitygw binary.
const EnvBinary = "PACTLEDGER_VERSITYGW"

// Server is a running versitygw.
type Server struct {
	Endpoint  string // host:port
	AccessKey string
	SecretKey string
	cmd       *exec.Cmd
	dir       string
}

// ErrNoBinary: PACTLEDGER_VERSITYGW is not set.
var ErrNoBinary = errors.New(EnvBinary + " is not set: run the tests with `make test`, which builds versitygw and sets it")

// Start starts versitygw under a new temporary directory on a free
// loopback port.
func Start() (*Server, error) {
	addr, err := freeport.Pick()
	if err != nil {
		return nil, err
	}
	return StartOn(addr, "pactledger-test", randomHex(20))
}

// StartOn starts versitygw under a new temporary directory on addr, a
// loopback host:port, with the given root credentials: for a test that
// points ledgerd at an address before any S3 server answers there.
func StartOn(addr, accessKey, secretKey string) (*Server, error) {
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		return nil, ErrNoBinary
	}
	if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
		return nil, fmt.Errorf("versitygw address %q: want a loopback host:port", addr)
	}
	dir, err := os.MkdirTemp("", "pactledger-s3-")
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"data", "versions"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	s := &Server{Endpoint: addr, AccessKey: accessKey, SecretKey: secretKey, dir: dir}
	// --keep-alive: versitygw otherwise answers every request with
	// "Connection: close", so each S3 call would open a new TCP
	// connection, where object stores in service keep them open.
	s.cmd = exec.Command(bin, "--port", addr, "--health", "/health", "--keep-alive", "posix", "--versioning-dir", filepath.Join(dir, "versions"), filepath.Join(dir, "data"))
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	logf, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Stop()
	log, _ := os.ReadFile(filepath.Join(dir, "versitygw.log"))
	return nil, fmt.Errorf("versitygw did not become healthy on %s: %s", addr, log)
}

// Main starts a server for a test binary, runs its tests and stops the
// server: call it from TestMain. Without a server the tests fail loudly.
func Main(m *testing.M, srv **Server) {
	var err error
	*srv, err = Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "S3 test server:", err)
		os.Exit(1)
	}
	code := m.Run()
	(*srv).Stop()
	os.Exit(code)
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Stop kills the server and removes its data. COMPLIANCE-locked objects
// cannot be removed through S3, so the whole directory goes.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
	_ = os.RemoveAll(s.dir)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Bucket returns a fresh bucket name.
func Bucket() string { return "pl-" + randomHex(6) }

// WithoutDate starts, on loopback, an HTTP server that answers every
// request 200 with no Date header, as an S3 service without a clock (or
// behind a proxy that drops the header) may, and returns its host:port;
// it stops when t ends.
func WithoutDate(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Date"] = nil
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// DateShifted starts, on loopback, a proxy to the S3 server at endpoint
// whose answers carry a Date shifted by *shift (read at each answer), as
// a service whose clock runs that far from the host's would send, and
// returns its host:port; it stops when t ends. Everything else passes
// unchanged.
func DateShifted(t testing.TB, endpoint string, shift *atomic.Int64) string {
	t.Helper()
	p := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: endpoint})
	p.ModifyResponse = func(r *http.Response) error {
		at := time.Now()
		if d, err := http.ParseTime(r.Header.Get("Date")); err == nil {
			at = d
		}
		r.Header.Set("Date", at.Add(time.Duration(shift.Load())).UTC().Format(http.TimeFormat))
		return nil
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

package s3_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/pactledger/pactledger/internal/freeport"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/s3"
)

// hangingListener accepts connections on loopback and never answers.
func hangingListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

func TestNewDoesNoIOAndPutsNothingUnchecked(t *testing.T) {
	st, err := s3.New(s3.Config{Endpoint: hangingListener(t), Bucket: s3test.Bucket(), AccessKey: "k", SecretKey: "s", Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.State(); got.Status != s3.StatusChecking || got.Checked {
		t.Fatalf("state before any check: %+v", got)
	}
	// A put before the check has passed fails at once, with no request: the
	// endpoint never answers, so a request would not return at all.
	_, err = st.Put(context.Background(), "k", []byte("x"), time.Now().Add(time.Hour))
	if !errors.Is(err, s3.ErrNotChecked) || !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("put before the check: %v, want ErrNotChecked", err)
	}
}

func TestCheckIsBoundedAndRetryable(t *testing.T) {
	for name, endpoint := range map[string]string{"hanging": hangingListener(t), "closed port": freeport.Addr(t)} {
		t.Run(name, func(t *testing.T) {
			st, err := s3.New(s3.Config{Endpoint: endpoint, Bucket: s3test.Bucket(), AccessKey: "k", SecretKey: "s", Insecure: true, CheckTimeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			// The attempt ends (the test would time out otherwise) with an
			// error that is not a misconfiguration.
			err = st.Check(context.Background())
			if err == nil || s3.Definite(err) {
				t.Fatalf("check: %v, want a retryable error", err)
			}
			got := st.State()
			if got.Status != s3.StatusUnreachable || got.Checked || got.LastError == "" {
				t.Fatalf("state after a failed check: %+v", got)
			}
		})
	}
}

func TestCheckFindsMisconfiguration(t *testing.T) {
	noLock := s3test.Bucket()
	if err := rawClient(t).MakeBucket(context.Background(), noLock, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		cfg    s3.Config
		want   error
		status s3.Status
	}{
		{"no object lock", s3.Config{Bucket: noLock, SecretKey: srv.SecretKey, CreateBucket: true}, s3.ErrNoObjectLock, s3.StatusMisconfigured},
		{"no bucket", s3.Config{Bucket: s3test.Bucket(), SecretKey: srv.SecretKey}, s3.ErrNoBucket, s3.StatusMisconfigured},
		{"wrong secret", s3.Config{Bucket: s3test.Bucket(), SecretKey: "not-the-secret"}, s3.ErrCredentials, s3.StatusMisconfigured},
		{"created", s3.Config{Bucket: s3test.Bucket(), SecretKey: srv.SecretKey, CreateBucket: true}, nil, s3.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Endpoint, cfg.AccessKey, cfg.Insecure = srv.Endpoint, srv.AccessKey, true
			st, err := s3.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Watch returns at once on both a pass and a misconfiguration.
			err = st.Watch(context.Background(), func(err error, _ time.Duration) { t.Errorf("retried after %v", err) })
			if !errors.Is(err, tc.want) || (tc.want != nil) != s3.Definite(err) {
				t.Fatalf("watch: %v, want %v", err, tc.want)
			}
			if got := st.State(); got.Status != tc.status || got.Checked != (tc.want == nil) {
				t.Fatalf("state: %+v, want status %s", got, tc.status)
			}
		})
	}
}

// A request that began while the bucket gave no answer, and fails after a
// later request was answered, does not make the bucket unreachable again:
// its failure is older news than the answer. It is still the last error.
func TestAnOlderRequestsFailureDoesNotUndoALaterAnswer(t *testing.T) {
	ctx := context.Background()
	p := startProxy(t, srv.Endpoint)
	st, err := s3.Open(ctx, s3.Config{Endpoint: p.l.Addr().String(), Bucket: s3test.Bucket(), AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true, CreateBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	// The older request is held at the proxy until it is given up.
	p.gate(2)
	arrived := make(chan struct{}, 1)
	p.mu.Lock()
	held := p.open
	p.arrivals = arrived
	p.mu.Unlock()
	defer close(held)
	older, cancel := context.WithCancel(ctx)
	failed := make(chan error, 1)
	go func() {
		_, err := st.Get(older, "segments/held")
		failed <- err
	}()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the older request did not reach the proxy")
	}
	// A later request, let through, is answered.
	p.gate(1)
	if _, err := st.Get(ctx, "segments/none"); err == nil {
		t.Fatal("get of a missing key: no error")
	}
	if got := st.State(); got.Status != s3.StatusOK {
		t.Fatalf("after an answer: %+v", got)
	}
	cancel()
	if err := <-failed; err == nil {
		t.Fatal("the held request did not fail")
	}
	got := st.State()
	if got.Status != s3.StatusOK {
		t.Fatalf("after the older request failed: status %s (%s), want ok: the later answer stands", got.Status, got.LastError)
	}
	if got.LastError == "" {
		t.Fatal("the older request's failure is not the last error")
	}
}

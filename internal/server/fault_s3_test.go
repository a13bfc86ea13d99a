package server_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/server"
	"github.com/pactledger/pactledger/storage/s3"
)

// readyBody is the /readyz reply, decoded for assertions.
type readyBody struct {
	Status      string
	Bbolt       string
	OutboxDepth int
	Disk        struct {
		Status                              string
		FreeBytes, TotalBytes, MinFreeBytes uint64
	}
	Evidence struct {
		Type, Status, Since, LastError string
		BucketChecked                  bool
	}
}

// hang is a loopback listener that accepts connections and never answers,
// like an S3 server stopped with SIGSTOP.
type hang struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newHang(t *testing.T) *hang {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hang{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
		}
	}()
	t.Cleanup(h.close)
	return h
}

func (h *hang) close() {
	h.l.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.Close()
	}
	h.conns = nil
}

// pollReady calls /readyz until ok accepts the reply or the deadline
// passes, failing the test when any reply is not 200.
func (e *env) pollReady(t *testing.T, what string, ok func(readyBody) bool) readyBody {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var r readyBody
		if code := e.call(t, "GET", "/readyz", "", nil, &r); code != http.StatusOK {
			t.Fatalf("readyz = %d (%+v) while waiting for %s, want 200", code, r, what)
		}
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz never showed %s: %+v", what, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func grpcServing(t *testing.T, addr string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return h.GetStatus()
}

// TestFaultStartsWithS3Unreachable: with the S3 endpoint refusing
// connections, or accepting them and never answering, ledgerd starts at
// once, answers /healthz, takes writes, and is ready with the S3 state
// "unreachable" as a detail; once a real S3 server answers there, the
// bucket check passes and the outbox drains into it.
func TestFaultStartsWithS3Unreachable(t *testing.T) {
	for _, name := range []string{"closed port", "hanging"} {
		t.Run(name, func(t *testing.T) {
			var endpoint string
			var h *hang
			if name == "hanging" {
				h = newHang(t)
				endpoint = h.l.Addr().String()
			} else {
				endpoint = freeAddr(t)
			}
			const access, secret = "pactledger-fault", "fault-secret-0123456789"
			bucket := s3test.Bucket()
			e := newEnv(t, jose.ES256, func(c *config.Config) {
				c.Evidence.Type = "s3"
				c.Evidence.S3 = config.S3{Endpoint: endpoint, Bucket: bucket, AccessKey: access, SecretKey: secret, Insecure: true, CreateBucket: true,
					CheckTimeout: config.Duration(500 * time.Millisecond), CheckMaxBackoff: config.Duration(500 * time.Millisecond)}
				c.Uploader.MaxBackoff = config.Duration(500 * time.Millisecond)
			})
			// newEnv returned: server.New did not wait for S3.
			if code := e.call(t, "GET", "/healthz", "", nil, nil); code != http.StatusOK {
				t.Fatalf("healthz = %d", code)
			}
			for i := range 5 {
				var rep appendReply
				if code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "S3-" + itoa(i)})), &rep); code != http.StatusOK || rep.Outcome != "APPEND_OUTCOME_CREATED" {
					t.Fatalf("write %d with S3 down: %d %+v", i, code, rep)
				}
			}
			r := e.pollReady(t, `evidence "unreachable"`, func(r readyBody) bool { return r.Evidence.Status == string(s3.StatusUnreachable) })
			if r.OutboxDepth == 0 || r.Evidence.BucketChecked || r.Evidence.Since == "" || r.Evidence.LastError == "" || r.Status != "ready" {
				t.Fatalf("readyz with S3 down: %+v", r)
			}
			if got := grpcServing(t, e.srv.GRPCAddr()); got != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("gRPC health with S3 down: %v, want SERVING", got)
			}

			// A real S3 server comes up at the endpoint.
			if h != nil {
				h.close()
			}
			srv, err := s3test.StartOn(endpoint, access, secret)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Stop)
			// The status is the last request's: one that failed while S3
			// was down (the log's publication) may report after the check
			// passed, until the next request answers.
			r = e.pollReady(t, "the outbox drained and S3 ok", func(r readyBody) bool {
				return r.OutboxDepth == 0 && r.Evidence.Status == string(s3.StatusOK) && r.Evidence.BucketChecked
			})
			if r.Status != "ready" {
				t.Fatalf("readyz after S3 came up: %+v", r)
			}
			c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(access, secret, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for obj := range c.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
				if obj.Err != nil {
					t.Fatal(obj.Err)
				}
				n++
			}
			if n == 0 {
				t.Fatal("the outbox drained but the bucket holds no object")
			}
		})
	}
}

// TestFaultBucketWithoutObjectLockStopsLedgerd: a bucket that exists
// without Object Lock is a definite misconfiguration: ledgerd stops with an
// error naming it (and main exits non-zero).
func TestFaultBucketWithoutObjectLockStopsLedgerd(t *testing.T) {
	bucket := s3test.Bucket()
	c, err := minio.New(s3srv.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3srv.AccessKey, s3srv.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MakeBucket(context.Background(), bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	cfg := testConfig(sc, t.TempDir())
	withS3(bucket)(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = server.Run(ctx, cfg, slog.New(slog.DiscardHandler))
	if !errors.Is(err, s3.ErrNoObjectLock) || ctx.Err() != nil {
		t.Fatalf("run with a bucket without object lock: %v, want ErrNoObjectLock", err)
	}
	if !strings.Contains(err.Error(), bucket) || !strings.Contains(err.Error(), "object lock") {
		t.Fatalf("error %q does not name the bucket and the missing object lock", err)
	}
}

package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/freeport"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/server"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/storage/s3"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The API keys every replica takes, by role.
const writerKey, auditorKey, adminKey = "cluster-writer-key", "cluster-auditor-key", "cluster-admin-key"

// env is what the replicas of one test share: a database (dsn), an S3
// bucket, the signers of the receipts, the Merkle log's key and the lease
// and claim times.
type env struct {
	t        *testing.T
	dir      string
	sc       *pacttest.Scenario
	s3       *s3test.Server
	bucket   string
	dsn      string
	logKey   string // the checkpoint signing key file every replica uses
	vkey     string // its verifier key
	leaseTTL time.Duration
	claimTTL time.Duration
	// uploadBatch, above zero, is every replica's uploader.batch: the most
	// outbox entries one round claims.
	uploadBatch int
}

// newEnv starts an S3 server with a fresh Object Lock bucket, migrates
// the database at dsn and makes the log key the replicas share.
func newEnv(t *testing.T, dsn string, leaseTTL, claimTTL time.Duration) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), sc: pacttest.NewScenario(jose.ES256, jose.ES256), bucket: s3test.Bucket(), dsn: dsn, leaseTTL: leaseTTL, claimTTL: claimTTL}
	t.Cleanup(e.sc.Close)
	var err error
	if e.s3, err = s3test.Start(); err != nil {
		t.Fatalf("S3 test server: %v", err)
	}
	t.Cleanup(e.s3.Stop)
	if _, err := s3.Open(t.Context(), s3.Config{Endpoint: e.s3.Endpoint, Bucket: e.bucket, AccessKey: e.s3.AccessKey, SecretKey: e.s3.SecretKey, Insecure: true, CreateBucket: true}); err != nil {
		t.Fatalf("create the bucket: %v", err)
	}
	if _, _, err := postgres.Migrate(t.Context(), postgres.Config{DSN: dsn}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	c := config.Default()
	c.MerkleLog.KeyFile = filepath.Join(e.dir, "log", "signing.key")
	if _, e.vkey, _, err = config.EnsureLogKey(&c); err != nil {
		t.Fatal(err)
	}
	e.logKey = c.MerkleLog.KeyFile
	return e
}

// config is the configuration of replica name.
func (e *env) config(name string) config.Config {
	off := false
	c := config.Default()
	c.Listen = config.Listen{GRPC: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
	c.DataDir = filepath.Join(e.dir, name)
	c.Store = config.Store{Kind: config.StorePostgres, DSN: e.dsn}
	c.Evidence = config.Evidence{Type: "s3", S3: config.S3{Endpoint: e.s3.Endpoint, Bucket: e.bucket, AccessKey: e.s3.AccessKey, SecretKey: e.s3.SecretKey, Insecure: true}}
	c.Audience = e.sc.Audience
	c.AllowInsecureLoopbackJWKS = true
	c.Provider.Enabled = &off
	c.MerkleLog.KeyFile = e.logKey
	c.MerkleLog.Interval = config.Duration(50 * time.Millisecond)
	c.Leases = config.Leases{Holder: name, TTL: config.Duration(e.leaseTTL)}
	c.Uploader.ClaimTTL = config.Duration(e.claimTTL)
	c.Uploader.Batch = e.uploadBatch
	c.Uploader.MaxBackoff = config.Duration(time.Second)
	c.ShutdownTimeout = config.Duration(5 * time.Second)
	c.APIKeys = []config.APIKey{
		{Name: "writer", SHA256: config.HashKey(writerKey), Roles: []string{config.RoleWriter}},
		{Name: "auditor", SHA256: config.HashKey(auditorKey), Roles: []string{config.RoleAuditor}},
		{Name: "admin", SHA256: config.HashKey(adminKey), Roles: []string{config.RoleAdmin}},
	}
	for _, b := range e.sc.Brands() {
		c.Brands = append(c.Brands, config.Brand{InterfaceURL: b.InterfaceURL, JWKSURI: b.JWKSURI, Issuer: b.Issuer})
	}
	for _, a := range e.sc.Agents() {
		c.Agents = append(c.Agents, config.Agent{Issuer: a.Issuer, JWKSURI: a.JWKSURI})
	}
	return c
}

// replica is one running ledgerd, in this process or a process of its own.
type replica struct {
	name     string
	httpAddr string
	client   ledgerv1.LedgerServiceClient
	conn     *grpc.ClientConn
	cmd      *exec.Cmd      // nil for one in this process
	srv      *server.Server // nil for one in a process of its own
	log      string         // its log file
	stopOnce sync.Once
	stopFn   func()
}

// stop shuts the replica down gracefully.
func (r *replica) stop() { r.stopOnce.Do(r.stopFn) }

// startInProcess starts replica name in this process, its configuration
// changed by more; it stops when the test ends.
func (e *env) startInProcess(name string, more ...func(*config.Config)) *replica {
	t := e.t
	t.Helper()
	r := &replica{name: name, log: filepath.Join(e.dir, name+".log")}
	logf, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	c := e.config(name)
	for _, m := range more {
		m(&c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, c, slog.New(slog.NewJSONHandler(logf, nil)))
	if err != nil {
		cancel()
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	r.httpAddr, r.srv = srv.HTTPAddr(), srv
	r.stopFn = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", name, err)
		}
		logf.Close()
	}
	t.Cleanup(r.stop)
	e.dial(r, srv.GRPCAddr())
	return r
}

// ledgerdBin builds ledgerd once per test binary.
var ledgerdBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "pactledger-cluster-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ledgerd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/pactledger/pactledger/cmd/ledgerd").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build ledgerd: %v\n%s", err, out)
	}
	return bin, nil
})

// startProcess starts replica name as a ledgerd process of its own,
// killed when the test ends, and waits until it is ready.
func (e *env) startProcess(name string) *replica {
	t := e.t
	t.Helper()
	bin, err := ledgerdBin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(bin)) })
	c := e.config(name)
	c.Listen = config.Listen{GRPC: freeAddr(t), HTTP: freeAddr(t)}
	raw, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(e.dir, name+".yaml")
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, httpAddr: c.Listen.HTTP, log: filepath.Join(e.dir, name+".log")}
	logf, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, "--config", cfgPath)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.stopFn = func() {
		_ = r.cmd.Process.Signal(os.Interrupt)
		_ = r.cmd.Wait()
		logf.Close()
	}
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		r.stop()
	})
	e.waitReady(r)
	e.dial(r, c.Listen.GRPC)
	return r
}

// kill kills a replica's process with SIGKILL and waits for it to die.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = r.cmd.Wait()
}

// waitReady polls /readyz until it answers 200.
func (e *env) waitReady(r *replica) {
	t := e.t
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + r.httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(end) {
			t.Fatalf("%s not ready within 30s\n%s", r.name, r.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dial connects a gRPC client to the replica.
func (e *env) dial(r *replica, addr string) {
	t := e.t
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r.conn, r.client = conn, ledgerv1.NewLedgerServiceClient(conn)
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	return freeport.Addr(t)
}

// poll calls try until it returns true, failing t at the deadline.
func poll(t *testing.T, what string, deadline time.Duration, try func() bool) {
	t.Helper()
	pollOr(t, what, deadline, try, nil)
}

// pollOr is poll, adding why's account of the state to the failure.
func pollOr(t *testing.T, what string, deadline time.Duration, try func() bool, why func() string) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !try() {
		if time.Now().After(end) {
			if why != nil {
				t.Fatalf("%s: not within %s\n%s", what, deadline, why())
			}
			t.Fatalf("%s: not within %s", what, deadline)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// as returns ctx carrying the API key.
func as(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
}

// request is the AppendReceipt request of r.
func request(r *pacttest.Receipt) *ledgerv1.AppendReceiptRequest {
	req := &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken}
	for _, a := range r.Actions {
		req.Actions = append(req.Actions, &ledgerv1.Action{Tool: a.Tool, Target: a.Target, ArgsJson: a.ArgsJSON})
	}
	return req
}

// corpus pre-signs n receipts with distinct targets prefix-0, prefix-1…
func (e *env) corpus(n int, prefix string) []*ledgerv1.AppendReceiptRequest {
	out := make([]*ledgerv1.AppendReceiptRequest, n)
	for i := range out {
		out[i] = request(e.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("%s-%d", prefix, i), GrantID: fmt.Sprintf("grant-%d", i%7), User: fmt.Sprintf("user-%d", i%5)}))
	}
	return out
}

// load posts a corpus with writers spread across replicas and records
// what was acknowledged, when and by which replica. Writer i posts to
// replica i mod n; when that replica does not answer it tries the next,
// as a load balancer would.
type load struct {
	mu     sync.Mutex
	acked  map[string]bool // row ids acknowledged
	ackAt  []time.Time
	lastBy map[string]time.Time // the last acknowledgement of each replica
	failed []error
	next   atomic.Int64
	wg     sync.WaitGroup
	stop   chan struct{}
}

// startLoad starts writers posting corpus across replicas until it is
// exhausted or halt is called. With retry above zero a writer posts a
// receipt again, that long after a failure, until it is acknowledged (a
// client riding out an outage); otherwise it moves on to the next.
func startLoad(t *testing.T, replicas []*replica, corpus []*ledgerv1.AppendReceiptRequest, writers int, retry time.Duration) *load {
	l := &load{acked: map[string]bool{}, lastBy: map[string]time.Time{}, stop: make(chan struct{})}
	ctx := as(context.Background(), writerKey)
	for w := range writers {
		l.wg.Go(func() {
			for {
				i := l.next.Add(1) - 1
				if i >= int64(len(corpus)) {
					return
				}
				for !l.postOne(ctx, replicas, w, corpus[i]) && retry > 0 {
					select {
					case <-l.stop:
						return
					case <-time.After(retry):
					}
				}
				select {
				case <-l.stop:
					return
				default:
				}
			}
		})
	}
	t.Cleanup(l.halt)
	return l
}

// postOne posts req once (see post) and records the outcome.
func (l *load) postOne(ctx context.Context, replicas []*replica, first int, req *ledgerv1.AppendReceiptRequest) bool {
	id, by, err := post(ctx, replicas, first, req)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed = append(l.failed, err)
		return false
	}
	now := time.Now()
	l.acked[id] = true
	l.ackAt = append(l.ackAt, now)
	l.lastBy[by] = now
	return true
}

// lastAck returns when replica name last acknowledged a write.
func (l *load) lastAck(name string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastBy[name]
}

// failures returns the errors of the failed posts so far.
func (l *load) failures() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.failed...)
}

// post posts req to replica first mod n and, while a replica answers
// UNAVAILABLE or not at all, to the next ones; it returns the row id of
// the first acknowledgement and the replica that gave it, or the last
// error.
func post(ctx context.Context, replicas []*replica, first int, req *ledgerv1.AppendReceiptRequest) (string, string, error) {
	var err error
	for k := range replicas {
		r := replicas[(first+k)%len(replicas)]
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		rep, perr := r.client.AppendReceipt(cctx, req)
		cancel()
		if perr == nil {
			return rep.GetRow().GetId(), r.name, nil
		}
		err = fmt.Errorf("%s: %w", r.name, perr)
		if status.Code(perr) != codes.Unavailable {
			return "", "", err
		}
	}
	return "", "", err
}

// halt stops the writers and waits for them.
func (l *load) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// wait waits for the writers to run out of receipts.
func (l *load) wait() { l.wg.Wait() }

// counts returns the acknowledged and failed writes so far.
func (l *load) counts() (acked, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked), len(l.failed)
}

// ids returns the acknowledged row ids.
func (l *load) ids() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.acked))
	for id := range l.acked {
		out = append(out, id)
	}
	return out
}

// longestGap returns the longest time between two acknowledgments in a
// row, from start to end (the time without writes).
func (l *load) longestGap(start, end time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, gap := start, time.Duration(0)
	for _, at := range slices.SortedFunc(slices.Values(l.ackAt), time.Time.Compare) {
		if at.Before(start) || at.After(end) {
			continue
		}
		gap = max(gap, at.Sub(last))
		last = at
	}
	return max(gap, end.Sub(last))
}

// missingRows returns how many of ids are not rows in the database at dsn.
func missingRows(t *testing.T, dsn string, ids []string) int {
	t.Helper()
	var n int
	queryRow(t, dsn, "SELECT count(*) FROM unnest($1::text[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM ledger_rows r WHERE r.id = a.id)", []any{ids}, &n)
	return n
}

// queryRow runs a one-row query on the database at dsn.
func queryRow(t *testing.T, dsn, sql string, args []any, dest ...any) {
	t.Helper()
	if err := tryQueryRow(t.Context(), dsn, sql, args, dest...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// tryQueryRow runs a one-row query on the database at dsn.
func tryQueryRow(ctx context.Context, dsn, sql string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql, args...).Scan(dest...)
}

// holders returns the holder and token of each lease in the database.
func holders(t *testing.T, dsn string) map[string]lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT name, holder, token, expires_at > clock_timestamp() FROM leases")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]lease{}
	for rows.Next() {
		var name string
		var l lease
		if err := rows.Scan(&name, &l.holder, &l.token, &l.live); err != nil {
			t.Fatal(err)
		}
		out[name] = l
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// lease is a lease row: its holder, token and whether it is unexpired.
type lease struct {
	holder string
	token  int64
	live   bool
}

// of reports whether the lease is held by the replica named name
// (leases.holder), which holds it under that name and a suffix of its own.
func (l lease) of(name string) bool { return strings.HasPrefix(l.holder, name+"-") }

// logTail returns the end of a replica's log, for a failure message.
func (r *replica) logTail() string {
	b, err := os.ReadFile(r.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return r.name + " log:\n" + strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// Package server wires ledgerd: the gRPC service with authentication and
// roles, the REST gateway, health, metrics, the OpenAPI description and the
// evidence uploader. Generated protobuf types stop here.
package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/mod/sumdb/note"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/console"
	"github.com/pactledger/pactledger/internal/heapfloor"
	"github.com/pactledger/pactledger/internal/logbound"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/pact"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/s3"
	"github.com/pactledger/pactledger/verifier"
)

// Server is a running ledgerd.
type Server struct {
	cfg      config.Config
	auth     *authenticator
	drills   *drill.Runner
	log      *slog.Logger
	store    rowStore
	s3       *s3.Store // nil unless evidence goes to S3
	ledger   *ledger.Ledger
	depth    sharedCount // the outbox's depth, for /readyz
	grpc     *grpc.Server
	health   *health.Server
	http     *http.Server
	grpcLis  net.Listener
	httpLis  net.Listener
	provider *pact.Provider
	// providerStops is from when a revocation stops the embedded
	// Provider (embeddedStops); nil without one.
	providerStops func(grant string, rev *ledger.Revocation) time.Time
	pactLis       net.Listener
	pactHTTP      *http.Server
	pipeKey       string // writer key for the Provider's receipt pipeline
	pipeURL       string // the ledger it posts to; "" is this one
	pipeTLS       *tls.Config
	pipeLis       *bufconn.Listener // this ledgerd's REST API in memory, for its own Provider
	certs         *certs            // nil without tls
	// drillStats follows the stored drill reports for /metrics and the
	// monthly catch-up.
	drillStats *drillStats
	access     *ledger.AccessLog // the read-access log
	// workers runs the receipts of AppendReceipts calls; closeAll stops
	// its goroutines.
	workers *workers
	// draining is closed when shutdown begins (AppendReceiptStream).
	draining chan struct{}
}

// maxHeaderBytes bounds a request's headers, over REST and gRPC alike (and
// the Provider's, whose tokens are a few KiB).
const maxHeaderBytes = 64 << 10

// maxStreams is how many calls a gRPC connection may have open at once:
// net/http2's default. A client wanting more in flight opens another
// connection (or streams its receipts: one call).
const maxStreams = 250

// streamWindow is the HTTP/2 window of a gRPC stream: the most a client
// sends on it ahead of what ledgerd reads. A window that grows with the
// link (gRPC's default) let a writer whose stream is not read, its
// AppendReceiptStream waiting for room (limits.streamBytes), park
// megabytes a stream in ledgerd's memory; 256 KiB is still 50 receipts
// ahead, 5 MB/s at 50 ms. connWindow is the connection's, which gRPC
// opens again as it reads the socket, whatever a stream holds.
const (
	streamWindow = 256 << 10
	connWindow   = 1 << 20
)

// grpcIdleTimeout is how long a gRPC connection with no call open is kept:
// then the server sends GOAWAY and closes it (a client reconnects when it
// next calls). REST's IdleTimeout is the same. A connection holds its
// goroutines and buffers, and one that never makes a call (no key, no
// call to refuse) was otherwise kept for as long as its client liked. An
// open AppendReceiptStream is a call: its connection is not idle.
var grpcIdleTimeout = 2 * time.Minute

// logWatchInterval is how often a ledgerd without the Merkle log reads
// whether the row store keeps one (ledger.RunLogWatch): writes it
// acknowledges in that time after another ledgerd turned the log on have
// no leaf.
var logWatchInterval = time.Second

// streamWorkers is how many goroutines the gRPC server keeps to run calls
// (more calls at once each get a goroutine of their own, as without
// workers). A call runs deep (verification, JSON, the commit's wait): on a
// new goroutine its stack was grown and copied several times a call, about
// 3.5 % of the write path's CPU; a worker keeps its grown stack for the next
// call. REST calls reach the same server through the gateway.
const streamWorkers = 256

// New opens the stores, binds the listeners and prepares every part; Serve
// starts them. On error everything opened so far is closed.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	s := &Server{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			s.closeAll()
		}
	}()
	if cfg.TLS.On() {
		if s.certs, err = newCerts(cfg.TLS); err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
	}
	keys, keyDir, created, err := config.EnsureKeys(&cfg)
	if err != nil {
		return nil, err
	}
	if created {
		log.InfoContext(ctx, "created one API key per role (writer, support, auditor, admin); read them from the files, mode 0600", slog.String("dir", keyDir))
	} else if keyDir != "" {
		log.InfoContext(ctx, "using the API keys in the data directory", slog.String("dir", keyDir))
	}
	if keyDir != "" {
		for _, p := range config.LooseKeyFiles(keyDir) {
			log.WarnContext(ctx, "an API key file or its directory is open to others than its owner: anyone who can read a key file acts with its role; chmod 600 the files and 700 the directory", slog.String("path", p))
		}
	}
	secrets := cfg.SecretFiles()
	if cfg.Provider.On() {
		secrets = append(secrets, pact.SigningKeyPath(providerStorePath(cfg)))
	}
	if u, err := url.Parse(cfg.Provider.LedgerURL); cfg.Provider.On() && err == nil && u.Scheme == "http" && !config.LoopbackHost(u.Hostname()) {
		log.WarnContext(ctx, "provider.ledgerUrl is http:// to a ledger past this machine: the Provider's writer key crosses the network unencrypted, readable by anyone on the way, and acts as a writer; use https (provider.ledgerTls for a private CA)", slog.String("ledger_url", u.Redacted()))
	}
	if cfg.Store.Kind == config.StorePostgres && cfg.Store.DSNHoldsPassword() {
		log.WarnContext(ctx, "store.dsn holds the database password: it is then in the configuration file, its backups and wherever the file is copied; give it in store.passwordFile or store.passwordEnv instead")
	}
	for _, p := range config.LooseSecretFiles(secrets) {
		log.WarnContext(ctx, "a secret file, or the folder holding it, is open to others than its owner: who can read a signing key signs as this ledger or its Provider, who can read a password or API key connects with it, and who can replace one chooses it", slog.String("path", p))
	}
	auth, err := newAuthenticator(keys)
	if err != nil {
		return nil, err
	}
	s.auth = auth

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	batch := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "pactledger_commit_batch_rows", Help: "Transactions per bbolt commit (group commit batch size).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11),
	})
	commitTime := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "pactledger_commit_seconds", Help: "Time a group commit took: running its writes, writing them and syncing them to disk.",
		Buckets: []float64{0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1, 2},
	})
	fetches := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pactledger_jwks_fetches_total", Help: "JWKS and metadata fetches by result."}, []string{"result"})
	for _, r := range []string{verifier.FetchOK, verifier.FetchError, verifier.FetchRejected} {
		fetches.WithLabelValues(r) // every result shows from the start, at 0
	}
	staleServed := prometheus.NewCounter(prometheus.CounterOpts{Name: "pactledger_jwks_stale_served_total", Help: "JWKS and metadata served past their TTL while a refetch runs or fails."})
	reg.MustRegister(batch, commitTime, fetches, staleServed, newBuildInfoGauge())
	metrics := ledger.NewMetrics(reg)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pactledger_provider_pipeline_depth", Help: "The Provider's receipts waiting to be posted to the ledger."}, func() float64 {
		if s.provider == nil {
			return 0
		}
		return float64(s.provider.PipelineDepth())
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pactledger_provider_pipeline_bytes", Help: "The bytes of what waits in the Provider's outbox for the ledger; turns that would queue more than provider.outboxMaxBytes, with what is set aside, are refused until the ledger takes it."}, func() float64 {
		if s.provider == nil {
			return 0
		}
		return float64(s.provider.PipelineBytes())
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pactledger_provider_pipeline_set_aside", Help: "The Provider's receipts, refusals and revocations the ledger refused as invalid, set aside in its store: not in the ledger (alert on any)."}, func() float64 {
		if s.provider == nil {
			return 0
		}
		return float64(s.provider.PipelineSetAside())
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pactledger_provider_pipeline_set_aside_bytes", Help: "The bytes of the Provider's entries set aside: they hold their room under provider.outboxMaxBytes, with pactledger_provider_pipeline_bytes, until the ledger takes them."}, func() float64 {
		if s.provider == nil {
			return 0
		}
		return float64(s.provider.PipelineSetAsideBytes())
	}))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pactledger_provider_pipeline_moved_back_total", Help: "The Provider's receipts and refusals its pipeline moved to the outbox's end because the ledger could not fetch a signer's keys (with the later entries of their grant): posted again later, not holding up the entries behind them."}, func() float64 {
		if s.provider == nil {
			return 0
		}
		return float64(s.provider.PipelineMovedBack())
	}))
	reg.MustRegister(newRefusalsNotRecorded(func() *pact.Provider { return s.provider }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pactledger_provider_retired_keys_held", Help: "The Provider's retired signing keys still published past provider.retiredKeyTTL because receipts, refusals or revocations they signed wait for the ledger or are set aside (alert on any: the ERROR log names the kid and what to do)."}, func() float64 {
		if s.provider == nil {
			return 0
		}
		return float64(s.provider.RetiredKeysHeld())
	}))

	if err := mkdirAll(cfg.DataDir); err != nil {
		return nil, err
	}
	s.store, err = openStore(ctx, cfg, func(n int, took time.Duration) {
		batch.Observe(float64(n))
		commitTime.Observe(took.Seconds())
	})
	if err != nil {
		return nil, err
	}
	if st, ok := s.store.(*bolt.Store); ok {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pactledger_bbolt_key_filter_keys", Help: "Keys in the row store's filter of row ids and request-JWT hashes; 0 while the first is built at open."}, func() float64 {
			keys, _ := st.KeyFilter()
			return float64(keys)
		}))
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pactledger_bbolt_write_seconds_total", Help: "Time committed bbolt transactions spent writing their pages and syncing the file (the part of pactledger_commit_seconds spent on the disk)."}, func() float64 {
				w, _ := st.DiskTimes()
				return w.Seconds()
			}),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pactledger_bbolt_spill_seconds_total", Help: "Time committed bbolt transactions spent turning their changed B+tree nodes into pages before writing them."}, func() float64 {
				_, sp := st.DiskTimes()
				return sp.Seconds()
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pactledger_bbolt_free_pages", Help: "Pages of the bbolt file that are free (4 KiB each); every commit writes their list until commits reuse them."}, func() float64 {
				return float64(st.FreePages())
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pactledger_bbolt_pending_rows", Help: "Rows whose number by id and request JWT are not yet written into the bbolt file's buckets: kept in memory and in a record each, merged a generation at a time."}, func() float64 {
				rows, _, _ := st.PendingKeys()
				return float64(rows)
			}),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pactledger_bbolt_merges_total", Help: "Generations of pending row numbers and request JWTs merged into the bbolt file's buckets since start."}, func() float64 {
				_, merged, _ := st.PendingKeys()
				return float64(merged)
			}),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pactledger_bbolt_merge_failures_total", Help: "Merges of pending row numbers and request JWTs that failed since start (each logged; tried again a minute later)."}, func() float64 {
				_, _, failed := st.PendingKeys()
				return float64(failed)
			}))
	}
	// No network I/O here: the bucket check runs in the background from
	// Serve, so ledgerd starts and takes writes while S3 is unreachable.
	objects, s3store, err := openEvidence(cfg)
	if err != nil {
		return nil, err
	}
	s.s3 = s3store

	fetcher := verifier.NewFetcher(verifier.FetcherConfig{
		AllowInsecureLoopback: cfg.AllowInsecureLoopbackJWKS,
		OnFetch:               func(r string) { fetches.WithLabelValues(r).Inc() },
		OnStale:               func(time.Duration) { staleServed.Inc() },
	})
	// No per-URI label: with open agents the URIs come from writers.
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pactledger_jwks_stale_seconds", Help: "Longest time since the last good fetch among JWKS and metadata URIs whose latest fetch failed (served until the staleness bound)."}, func() float64 {
			var worst time.Duration
			for _, d := range fetcher.Staleness(time.Now()) {
				worst = max(worst, d)
			}
			return worst.Seconds()
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pactledger_jwks_stale_uris", Help: "JWKS and metadata URIs whose latest fetch failed while an earlier document is cached."}, func() float64 {
			return float64(len(fetcher.Staleness(time.Now())))
		}),
	)
	// A replica that runs no Provider, configured with the Provider's
	// public URL, trusts the brands it serves as the Provider's own
	// replica does, and files their tools in the same classes.
	var brands map[string]*pact.Brand
	served := map[string]bool{} // the interface URLs of the trusted Provider's brands
	if !cfg.Provider.On() && cfg.Provider.BaseURL != "" {
		brands, err = pact.LoadBrands(cfg.Provider.BrandsDir)
		if err != nil {
			return nil, fmt.Errorf("provider.brandsDir: %w", err)
		}
		cfg.Brands = slices.Clone(cfg.Brands)
		for _, b := range pact.ServedBrands(cfg.Provider.BaseURL, brands) {
			served[b.InterfaceURL] = true
			if !slices.ContainsFunc(cfg.Brands, func(c config.Brand) bool { return c.InterfaceURL == b.InterfaceURL }) {
				cfg.Brands = append(cfg.Brands, config.Brand{InterfaceURL: b.InterfaceURL, JWKSURI: b.JWKSURI, Issuer: b.Issuer})
			}
		}
	}
	registry, err := verifier.NewRegistry(fetcher, cfg.VerifierBrands(), cfg.VerifierAgents())
	if err != nil {
		return nil, err
	}
	verifier.SetKeyTables(cfg.Verifier.KeyTables, verifier.NewKeyTableMetrics(reg))
	v, err := verifier.New(verifier.Config{Audience: cfg.Audience, CheckedBy: CheckedBy(), CacheSize: cfg.Verifier.CacheSize, Metrics: verifier.NewCacheMetrics(reg)})
	if err != nil {
		return nil, err
	}
	policy, err := cfg.Policy()
	if err != nil {
		return nil, err
	}
	logRetention(ctx, log, policy)
	var ledgerKeys verifier.KeySource = registry
	if len(served) > 0 && cfg.Provider.OpenAgents {
		// The trusted Provider takes open agents: so do its replicas, for
		// the agents its brands granted (openOnGrant).
		registry.OpenAgentsOnGrant()
		ledgerKeys = openOnGrant{KeySource: registry, reg: registry, own: func(b string) bool { return served[b] }}
	}
	if cfg.Provider.On() {
		// The Provider may be open to unregistered agents; the ledger's
		// verification is only for the agents the Provider's own brands
		// granted (openOnGrant), never for any request JWT's issuer.
		pkeys, err := verifier.NewRegistry(fetcher, cfg.VerifierBrands(), cfg.VerifierAgents())
		if err != nil {
			return nil, err
		}
		pkeys.OpenAgents(cfg.Provider.OpenAgents)
		if brands, err = s.startProvider(cfg, v, pkeys, log); err != nil {
			return nil, err
		}
		// The ledger trusts the embedded Provider's delegating brands with
		// their keys in memory.
		ledgerKeys = ownBrands{signers: s.provider.BrandSigners, next: registry}
		if cfg.Provider.OpenAgents {
			registry.OpenAgentsOnGrant()
			ledgerKeys = openOnGrant{KeySource: ledgerKeys, reg: registry, own: func(b string) bool {
				_, ok := s.provider.BrandSigners()[b]
				return ok
			}}
		}
		s.pipeURL = cfg.Provider.LedgerURL
		if strings.HasPrefix(s.pipeURL, "https:") {
			if s.pipeTLS, err = clientTLS(cfg.Provider.LedgerTLS); err != nil {
				return nil, fmt.Errorf("provider.ledgerTls: %w", err)
			}
		}
		if s.pipeKey, err = pipelineKey(cfg, keys, keyDir); errors.Is(err, errAdminPipelineKey) {
			return nil, err
		} else if err != nil {
			log.WarnContext(ctx, "the Provider's receipts wait in its outbox: no writer key for the pipeline", slog.String("reason", err.Error()))
		}
	}
	fileBrandRetention(ctx, log, policy, cfg.Retention, brands)
	accessKept, err := cfg.AccessRetention()
	if err != nil {
		return nil, err
	}
	s.ledger, err = ledger.New(s.store, objects, v, ledgerKeys, ledger.Config{Policy: policy, Metrics: metrics, Logger: log, AccessRetention: accessKept,
		Leases: ledger.LeaseConfig{Holder: replicaHolder(cfg.Leases.Holder), TTL: time.Duration(cfg.Leases.TTL)}, ReferenceClocks: referenceClocks(s.store, s.s3, cfg.Clock.References)})
	if err != nil {
		return nil, err
	}
	s.depth = sharedCount{read: s.ledger.OutboxDepth}
	if n, err := s.ledger.OutboxDepth(ctx); err == nil {
		metrics.OutboxDepth.Set(float64(n))
	}
	s.access = ledger.NewAccessLog(s.store, ledger.AccessLogConfig{Retention: accessKept, Logger: log, Wake: s.ledger.WakeUploader, CheckClock: s.ledger.CheckPruneClock, CheckRecordClock: s.ledger.CheckReadClock})
	var logKey string
	if !cfg.MerkleLog.On() {
		size, queued, err := s.ledger.StoreLog(ctx)
		if err != nil {
			return nil, fmt.Errorf("read whether the row store keeps a Merkle log: %w", err)
		}
		if size > 0 || queued {
			return nil, fmt.Errorf("merkleLog.enabled is false, but the row store keeps a Merkle log (%d leaves logged, leaves queued: %v): every row written to it must be in its log, and a ledgerd without the log would acknowledge rows outside it for good; "+
				"set merkleLog.enabled: true, with the log's origin and key (merkleLog.origin, merkleLog.keyFile) as the ledgerd that keeps it has them (docs/operations.md, \"The Merkle log\")", size, queued)
		}
	}
	if cfg.MerkleLog.On() {
		signer, vkey, created, err := openLogKey(ctx, &cfg, s.ledger)
		if err != nil {
			return nil, err
		}
		if err := s.ledger.EnableLog(ledger.LogConfig{Signer: signer, VerifierKey: vkey, Interval: time.Duration(cfg.MerkleLog.Interval), KeepPublished: cfg.MerkleLog.KeepPublished}); err != nil {
			return nil, err
		}
		// Like the origin, the key is the log's: a replica given another
		// key than the one that signed the row store's checkpoints would
		// sign checkpoints no reader of the published key accepts.
		if err := s.ledger.CheckLogKey(ctx); err != nil {
			if errors.Is(err, ledger.ErrLogKey) {
				return nil, fmt.Errorf("log key %s: %w: every ledgerd on one row store signs with one key, the one whose verifier key was published; "+
					"copy the key file the other replicas use (their merkleLog.keyFile) to this one and point merkleLog.keyFile at it (docs/operations.md, \"Running more than one ledgerd\")", cfg.LogKeyFile(), err)
			}
			return nil, err
		}
		// The periods in force, in the log before any write under them:
		// fsck and log audit check swept rows against them.
		if _, err := s.ledger.LogPolicy(ctx); err != nil {
			return nil, err
		}
		if n, err := s.ledger.TreeSize(ctx); err == nil {
			metrics.LogSize.Set(float64(n))
		}
		logKey = vkey
		if created {
			log.InfoContext(ctx, "created the Merkle log's checkpoint key; publish its verifier key", slog.String("key_file", cfg.LogKeyFile()), slog.String("verifier_key", vkey))
		}
	}

	// gRPC: every RPC is counted and timed; a request left undecoded
	// (protoBody) is refused; then it passes the authenticator (refusals
	// are counted with their code).
	rpcMetrics := newRPCMetrics()
	reg.MustRegister(rpcMetrics)
	body := newProtoBody()
	unary := []grpc.UnaryServerInterceptor{rpcMetrics.UnaryServerInterceptor(), body.unary, auth.unary, accessRecorder{access: s.access, log: log, rows: s.ledger}.unary, rowIDs{rows: s.store}.unary}
	auth.refused = countRefusals(rpcMetrics, &ledgerv1.LedgerService_ServiceDesc)
	auth.refusals = newRefusalLog(log)
	s.grpc = grpc.NewServer(
		grpc.InTapHandle(auth.tap),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(rpcMetrics.StreamServerInterceptor(), auth.stream, body.stream),
		grpc.ForceServerCodecV2(body),
		grpc.MaxRecvMsgSize(cfg.Limits.MaxBodyBytes),
		grpc.MaxHeaderListSize(maxHeaderBytes),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.NumStreamWorkers(streamWorkers),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: grpcIdleTimeout}),
	)
	s.drills = drill.New(s.ledger, drill.Config{DefaultSample: cfg.Drills.Monthly.Sample, Names: drillNames(cfg, s.provider)})
	s.workers = newWorkers(streamWorkers)
	s.draining = make(chan struct{})
	streams := newStreamBudget(cfg.Limits.StreamBytes, cfg.Limits.Streams)
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pactledger_stream_bytes", Help: "Bytes AppendReceiptStream streams hold: receipts read and not yet answered, answers not yet sent; bounded by limits.streamBytes."}, func() float64 {
			held, _ := streams.stats()
			return float64(held)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pactledger_streams_waiting", Help: "AppendReceiptStream streams not read because limits.streamBytes is spent, waiting for answers to be sent."}, func() float64 {
			_, waiting := streams.stats()
			return float64(waiting)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pactledger_streams_unread_ended_total", Help: "AppendReceiptStream streams ended RESOURCE_EXHAUSTED because their writer read no answer for a minute."}, func() float64 {
			return float64(streams.unreadEnded())
		}),
	)
	svc := &service{l: s.ledger, drills: s.drills, log: log, logKey: logKey, access: s.access, workers: s.workers, streams: streams, draining: s.draining, provider: s.provider,
		providerStops:  s.providerStops,
		batchReceipts:  newReceiptCodes(reg, "pactledger_batch_receipts_total", "Receipts answered in AppendReceipts calls, by the gRPC code of each one's result."),
		streamReceipts: newReceiptCodes(reg, "pactledger_stream_receipts_total", "Receipts answered on AppendReceiptStream streams, by the gRPC code of each one's result."),
	}
	ledgerv1.RegisterLedgerServiceServer(s.grpc, svc)
	// The REST gateway and the console call the same service in process,
	// through the same interceptors.
	inproc := newInProcess(unary...)
	inproc.register(&ledgerv1.LedgerService_ServiceDesc, svc)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	rpcMetrics.InitializeMetrics(s.grpc) // every RPC and code shows from the start
	s.drillStats = newDrillStats(s.drills, log)
	reg.MustRegister(s.drillStats)

	if s.grpcLis, err = net.Listen("tcp", cfg.Listen.GRPC); err != nil {
		return nil, fmt.Errorf("listen grpc %s: %w", cfg.Listen.GRPC, err)
	}
	if s.httpLis, err = net.Listen("tcp", cfg.Listen.HTTP); err != nil {
		return nil, fmt.Errorf("listen http %s: %w", cfg.Listen.HTTP, err)
	}
	s.pipeLis = bufconn.Listen(1 << 20)

	gw := runtime.NewServeMux(
		runtime.WithErrorHandler(errorHandler),
		runtime.WithRoutingErrorHandler(routingErrorHandler),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, gatewayJSON()),
	)
	if err := ledgerv1.RegisterLedgerServiceHandlerClient(ctx, gw, ledgerv1.NewLedgerServiceClient(inproc)); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(ledgerv1.OpenAPI)
	})
	if logKey != "" {
		files := logFiles(s.ledger, func(ctx context.Context, what string, err error) {
			log.ErrorContext(ctx, "log file", slog.String("what", what), slog.String("error", err.Error()))
		})
		mux.Handle("GET /v1/log/checkpoint", files)
		mux.Handle("GET /v1/log/tile/", files)
	}
	mux.Handle("/v1/", private(limitBody(gw, int64(cfg.Limits.MaxBodyBytes), auth.identify)))
	// The web console calls the API in process with the signed-in key,
	// through the same interceptors as any client.
	proxies, err := cfg.Console.Proxies()
	if err != nil {
		return nil, err
	}
	con, err := console.New(console.Config{Client: ledgerv1.NewLedgerServiceClient(inproc), Logger: log,
		Secure: cfg.Console.SecureCookies, TrustedProxies: proxies})
	if err != nil {
		return nil, err
	}
	mux.Handle(console.Prefix, con)
	s.http = &http.Server{
		Handler:           nosniff(mux),
		ErrorLog:          httpErrorLog(log), // refused TLS handshakes, in the JSON log
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
	}
	return s, nil
}

// limitBody reads a request's body only for a caller whose key the ledger
// holds (identify, which names it in the request's context): anyone else's
// is dropped unread, and the call, made without it, is refused by the
// authenticator as any call without a key is (decoding a body can cost
// many times its size). A body over max bytes is refused with 413,
// whether it declares its length or is sent in chunks.
func limitBody(next http.Handler, max int64, identify func(ctx context.Context, authorization string) (context.Context, bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, known := identify(r.Context(), r.Header.Get("Authorization"))
		// A copy: the server drains the body it has (without decoding it)
		// before it reads the connection's next request.
		r = r.WithContext(ctx)
		if !known {
			r.Body, r.ContentLength = http.NoBody, 0
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > max {
			tooLarge(w, max)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, max)
		if r.ContentLength < 0 {
			// Chunked: read it here, so that going over max is a 413, not
			// the decoder's error.
			b, err := io.ReadAll(r.Body)
			var over *http.MaxBytesError
			if errors.As(err, &over) {
				tooLarge(w, max)
				return
			}
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 3, "message": "reading the request body: " + err.Error()})
				return
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}
		next.ServeHTTP(w, r)
	})
}

func tooLarge(w http.ResponseWriter, max int64) {
	writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"code": 3, "message": fmt.Sprintf("request body larger than %d bytes", max)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// readyz answers 200 when a write would be acknowledged durably (the row
// store is open and takes writes, and the data directory's filesystem has
// at least readiness.minFreeDiskBytes free), else 503. The evidence backlog
// and the S3 state are details: an evidence outage is what the outbox
// absorbs, never a reason to take ledgerd out of a load balancer.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	shown, known := s.auth.identify(ctx, r.Header.Get("Authorization"))
	if key := bearerKey(r.Header.Get("Authorization")); key != "" && !known {
		// Answered as to a caller sending none, and logged as any call
		// with an unknown key is: /readyz is no quiet place to try keys.
		from := ctx
		if addr, err := net.ResolveTCPAddr("tcp", r.RemoteAddr); err == nil {
			from = peer.NewContext(ctx, &peer.Peer{Addr: addr})
		}
		s.auth.refusals.note(from, "/readyz", key, "", status.Error(codes.Unauthenticated, "unknown API key: /readyz answered as to a caller sending none"))
	}
	ready, body := s.readiness(ctx, canRead(shown))
	s.setHealth(ready)
	code := http.StatusOK
	if !ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, body)
}

// readiness reports whether a write would be acknowledged durably, with
// the details /readyz shows.
func (s *Server) readiness(ctx context.Context, errorsShown bool) (bool, map[string]any) {
	ready, store := s.storeReadiness(ctx, errorsShown)
	body := map[string]any{"store": store}
	if depth, err := s.depth.get(ctx); err != nil {
		if ready {
			// Else the store's own check said why already.
			store["status"] = s.storeDown(err, errorsShown)
		}
		ready = false
		s.log.WarnContext(ctx, "readiness: row store", slog.String("error", err.Error()))
	} else {
		body["outboxDepth"] = depth
	}
	if s.cfg.Store.Kind == config.StoreBbolt {
		body["bbolt"] = store["status"] // the key of earlier releases
	}
	minFree := uint64(max(s.cfg.Readiness.MinFreeDiskBytes, 0))
	disk := map[string]any{"minFreeBytes": minFree}
	if free, total, err := diskSpace(s.cfg.DataDir); err != nil {
		ready, disk["status"] = false, "unknown"
		s.log.WarnContext(ctx, "readiness: disk space", slog.String("error", err.Error()))
	} else {
		disk["freeBytes"], disk["totalBytes"], disk["status"] = free, total, "ok"
		if free < minFree {
			ready, disk["status"] = false, "low"
		}
	}
	body["disk"] = disk
	evidence := map[string]any{"type": s.cfg.Evidence.Type, "status": "ok"}
	if s.s3 != nil {
		st := s.s3.State()
		evidence["status"], evidence["bucketChecked"] = st.Status, st.Checked
		if st.Status != s3.StatusOK {
			evidence["since"] = st.Since.UTC().Format(time.RFC3339)
		}
		if st.LastError != "" {
			evidence["lastError"], evidence["lastErrorAt"] = errorText(st.LastError, errorsShown), st.LastErrAt.UTC().Format(time.RFC3339)
		}
	}
	body["evidence"] = evidence
	if clocks := s.clockReadiness(errorsShown); clocks != nil {
		// A detail too: every replica reads the same servers' clocks, so
		// one of them gone wrong would take them all out of the load
		// balancer, reads with them; a write refused for the clock is
		// answered 503 with a retry delay.
		body["clocks"] = clocks
	}
	if s.ledger.Origin() != "" {
		// A detail too: rows are still recorded and acknowledged, and
		// their leaves wait in the queue, but no checkpoint is signed
		// until a person settles it (docs/operations.md).
		log := map[string]any{"status": "ok"}
		if since, err := s.ledger.LogDiverged(); err != nil {
			log["status"], log["signing"], log["since"] = "diverged", "stopped", since.UTC().Format(time.RFC3339)
			log["error"] = "this ledger stopped signing checkpoints: rows are still recorded, and their leaves wait in the queue until the published log is a prefix of the row store's again (docs/operations.md, \"Another log in the bucket\"): " + errorText(err.Error(), errorsShown)
		}
		// A detail too: the log is signed in the row store, and served as
		// far as it was published; what stops is its copy in the bucket.
		// The replica holding the integrator's lease says so.
		if since, err := s.ledger.LogPublicationRefused(); err != nil && log["status"] == "ok" {
			log["status"], log["publishing"], log["since"] = "not published", "stopped", since.UTC().Format(time.RFC3339)
			see := "Objects the ledger did not write"
			if errors.Is(err, ledger.ErrPublishedLogMissing) {
				see = "An evidence store without the published log"
			}
			log["error"] = "the log is still signed in the row store, and served as far as it was published (docs/operations.md, \"" + see + "\"): " + errorText(err.Error(), errorsShown)
		}
		// A detail too: rows are acknowledged and signed in the row
		// store; what is served waits for write-once storage. Any
		// replica sees it, whichever holds the lease.
		if since, published, signed := s.ledger.LogUnpublished(); !since.IsZero() && time.Since(since) >= logWaitingShown {
			if log["status"] == "ok" {
				log["status"], log["publishing"] = "not published", "behind"
			}
			log["publishedSize"], log["signedSize"] = published, signed
			log["unpublished"] = fmt.Sprintf("the log is signed in the row store up to %d leaves, and write-once storage has held no more than %d since %s: the checkpoint, proofs and tiles are served at %d leaves until publication resumes (docs/operations.md, \"Tiles in the bucket\")",
				signed, published, since.UTC().Format(time.RFC3339), published)
		}
		// A detail too: the rows are acknowledged durably; what waits is
		// their proof. Any replica sees it, whichever holds the lease.
		if since := s.ledger.LogWaiting(); !since.IsZero() && time.Since(since) >= logWaitingShown {
			if log["status"] == "ok" {
				log["status"] = "waiting"
			}
			log["waitingSince"] = since.UTC().Format(time.RFC3339)
			log["waiting"] = "leaves have waited in the log's queue since " + since.UTC().Format(time.RFC3339) + " while the log did not grow: no integrator extends it " +
				"(the integrator's lease held by a ledgerd that does not integrate, a row store or bucket that does not answer, or a diverged log: see each replica's /readyz and log); " +
				"rows recorded meanwhile are acknowledged, and have no proof until it grows (docs/operations.md, \"The log waits\")"
		}
		// Not a detail: this ledger signs nothing of the log until it is
		// restarted with the right key.
		if since, err := s.ledger.LogKeyRefused(); err != nil {
			ready = false
			log["status"], log["error"], log["since"] = "wrong key", "this ledger's log key did not sign the row store's checkpoints: "+errorText(err.Error(), errorsShown), since.UTC().Format(time.RFC3339)
		}
		body["log"] = log
	}
	if since := s.ledger.LogElsewhere(); !since.IsZero() {
		// Not a detail: this ledger refuses every write until restarted
		// with the log on.
		ready = false
		body["log"] = map[string]any{"status": "kept without this ledgerd", "since": since.UTC().Format(time.RFC3339),
			"error": "the row store keeps a Merkle log, and this ledgerd runs with merkleLog.enabled false: its writes are refused, since their rows would have no leaf; restart it with the log on (docs/operations.md, \"The Merkle log\")"}
	}
	if ready {
		body["status"] = "ready"
	} else {
		body["status"] = "not ready"
	}
	return ready, body
}

// clockReadiness is what /readyz shows of the reference clocks the
// ledger checks its own against (nil: none, the embedded default).
func (s *Server) clockReadiness(errorsShown bool) []map[string]any {
	var out []map[string]any
	for _, c := range s.ledger.ClockStates() {
		m := map[string]any{"clock": c.Clock}
		switch {
		case c.NoTime:
			m["status"] = "gives no time: not checked"
		case c.ReadAt.IsZero():
			m["status"] = "not read yet"
		default:
			m["readAt"], m["offSeconds"] = c.ReadAt.UTC().Format(time.RFC3339), c.Off.Round(time.Second).Seconds()
			m["status"] = "ok"
			if !c.OK {
				way := "ahead"
				if c.Off < 0 {
					way = "behind"
				}
				m["status"] = fmt.Sprintf("the ledger's clock is %s %s, more than the %s allowed: writes are refused until the clocks agree", c.Off.Abs().Round(time.Second), way, ledger.ClockTolerance)
			}
		}
		if c.Err != nil {
			m["lastError"], m["lastErrorAt"] = errorText(c.Err.Error(), errorsShown), c.ErrAt.UTC().Format(time.RFC3339)
		}
		out = append(out, m)
	}
	return out
}

// errorText is an error's text as /readyz shows it: to a caller whose key
// may read the ledger (support, auditor, admin) as it is; to anyone else
// (the probe of a load balancer, sending no key) not at all, since it may
// name the network's hosts, the bucket or the database's user.
func errorText(text string, shown bool) string {
	if shown {
		return text
	}
	return hiddenError
}

// hiddenError stands for an error's text in an answer to a caller that
// may not read it.
const hiddenError = "(the error's text is shown to a caller sending a support, auditor or admin key)"

// logWaitingShown is how long leaves wait in the log's queue, the log not
// growing, before /readyz says so: the integrator extends the log every
// merkleLog.interval, and backs off up to 30 s after failures.
var logWaitingShown = time.Minute

// setHealth makes the gRPC health service agree with /readyz.
func (s *Server) setHealth(ready bool) {
	st := healthpb.HealthCheckResponse_SERVING
	if !ready {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	s.health.SetServingStatus("", st)
}

// readinessInterval is how often the gRPC health status is recomputed.
const readinessInterval = time.Second

// watchReadiness keeps the gRPC health status current until ctx is done.
func (s *Server) watchReadiness(ctx context.Context) {
	t := time.NewTicker(readinessInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		ready, _ := s.readiness(rctx, false)
		cancel()
		s.setHealth(ready)
	}
}

// watchEvidence runs the S3 bucket check in the background until it
// passes. On a definite misconfiguration (no Object Lock, no bucket,
// credentials rejected) it returns the error, which stops ledgerd.
func (s *Server) watchEvidence(ctx context.Context) error {
	err := s.s3.Watch(ctx, func(err error, retryIn time.Duration) {
		s.log.WarnContext(ctx, "evidence bucket check failed; writes go on and evidence waits in the outbox; will retry",
			slog.String("error", err.Error()), slog.Duration("retry_in", retryIn))
	})
	switch {
	case err == nil:
		s.log.InfoContext(ctx, "evidence bucket checked: it exists with object lock on", slog.String("bucket", s.cfg.Evidence.S3.Bucket))
		return nil
	case s3.Definite(err):
		s.log.ErrorContext(ctx, "evidence store misconfigured; stopping", slog.String("error", err.Error()))
		return fmt.Errorf("evidence store: %w", err)
	}
	return nil // ctx done
}

// startProvider starts the embedded Provider and returns the brands it
// serves.
func (s *Server) startProvider(cfg config.Config, v *verifier.Verifier, keys verifier.KeySource, log *slog.Logger) (map[string]*pact.Brand, error) {
	brands, err := pact.LoadBrands(cfg.Provider.BrandsDir)
	if err != nil {
		return nil, fmt.Errorf("provider: %w", err)
	}
	if s.pactLis, err = net.Listen("tcp", cfg.Provider.Listen); err != nil {
		return nil, fmt.Errorf("listen provider %s: %w", cfg.Provider.Listen, err)
	}
	base := cfg.Provider.BaseURL
	if base == "" {
		base = "http://" + s.pactLis.Addr().String()
	}
	rl := cfg.Provider.RateLimits
	s.providerStops = embeddedStops(base, brands, func(statement, grant string, at time.Time) bool {
		return s.provider.Signed(statement, grant, at) // built before it serves
	})
	s.provider, err = pact.New(pact.Config{BaseURL: base, Verifier: v, Keys: keys, Brands: brands, StorePath: providerStorePath(cfg), Logger: log,
		AgentNames:           agentNames(cfg),
		Domains:              cfg.Provider.Domains,
		PollInterval:         time.Duration(cfg.Provider.DevicePollInterval),
		MaxOutboxBytes:       cfg.Provider.OutboxMaxBytes,
		RetiredKeyTTL:        time.Duration(cfg.Provider.RetiredKeyTTL),
		PruneInterval:        time.Duration(cfg.Provider.PruneInterval),
		PerAgent:             pact.Limit{Rate: rl.PerAgent.Rate, Burst: rl.PerAgent.Burst},
		PerUser:              pact.Limit{Rate: rl.PerUser.Rate, Burst: rl.PerUser.Burst},
		RefusalLimit:         pact.Limit{Rate: cfg.Provider.RefusalLimit.Rate, Burst: cfg.Provider.RefusalLimit.Burst},
		RefusalOutboxPercent: cfg.Provider.RefusalLimit.OutboxPercent,
		Revocations: ledgerRevocations(func(ctx context.Context, grant string) (*ledger.Revocation, error) {
			return s.ledger.Revocation(ctx, grant) // built before the Provider serves
		}, s.providerStops),
	})
	if err != nil {
		return nil, err
	}
	s.pactHTTP = &http.Server{Handler: s.provider, ErrorLog: httpErrorLog(log), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: maxHeaderBytes}
	return brands, nil
}

// httpErrorLog is the log of an HTTP server's own errors (refused TLS
// handshakes, mostly), at WARN in the JSON log. Anyone who can open a
// connection can set one off, so they are bounded as refused calls are.
func httpErrorLog(log *slog.Logger) *stdlog.Logger {
	w := logbound.New(refusalBurst, refusalRate).Writer(slog.NewLogLogger(log.Handler(), slog.LevelWarn).Writer())
	return stdlog.New(w, "", 0)
}

// replicaHolder is the holder this process takes leases and outbox
// claims as: leases.holder, when set, with a random suffix of this
// process's own, so that two replicas given one name (a config file they
// share) never take each other's leases or claims for their own: a lease
// is taken again at once by its holder, and a claim is its holder's to
// renew. Unset, the ledger's default (hostname-pid-random) is unique
// already.
func replicaHolder(name string) string {
	if name == "" {
		return ""
	}
	return name + "-" + rand.Text()[:8]
}

// embeddedStops is from when a revocation of a grant stops the embedded
// Provider at base with brands (zero: it does not): the earlier of an
// admin's (ledgerctl revoke) and one the Provider's own signed statement
// says it made (docs/design/045), which a copy of its store from before it
// may have forgotten: a statement the ledger checked with the keys of one
// of these brands, or, under a brand URL of another provider.baseUrl, one
// that signed says its keys signed. Any other writer's revocation makes
// receipts incidents but does not stop the Provider: a writer key, which a
// Provider's pipeline holds and which sees every grant id, cannot cut
// customers' grants (docs/design/038); its statement would be checked with
// a brand's keys, and only one of these brands' is this Provider's.
func embeddedStops(base string, brands map[string]*pact.Brand, signed func(statement, grant string, at time.Time) bool) func(grant string, rev *ledger.Revocation) time.Time {
	own := map[string]bool{}
	for id, b := range brands {
		if b.Delegation {
			own[pact.InterfaceURL(base, id)] = true
		}
	}
	return func(grant string, rev *ledger.Revocation) time.Time {
		at := rev.AdminRevokedAt
		if p := rev.EarliestStatement(func(st ledger.ProviderStatement) bool {
			return own[st.Brand] || signed(st.Statement, grant, st.RevokedAt)
		}); !p.IsZero() && (at.IsZero() || p.Before(at)) {
			at = p
		}
		return at
	}
}

// ledgerRevocations are the revocations in the row store (read), through
// any replica, that the embedded Provider honours (stops): a read of the
// store, the ledger being built before the Provider serves.
func ledgerRevocations(read func(context.Context, string) (*ledger.Revocation, error), stops func(string, *ledger.Revocation) time.Time) pact.Revocations {
	return func(ctx context.Context, grant string) (pact.RecordedRevocation, error) {
		rev, err := read(ctx, grant)
		if err != nil || rev == nil {
			return pact.RecordedRevocation{}, err
		}
		return pact.RecordedRevocation{At: stops(grant, rev), Admin: rev.AdminRevokedAt}, nil
	}
}

// ownBrands is the ledger's key source: the embedded Provider's delegating
// brands from memory (the keys their JWKS publishes at the time of the
// check, retired keys in their period among them), everything else from
// the configured registry.
type ownBrands struct {
	signers func() map[string]verifier.Signer
	next    verifier.KeySource
}

func (o ownBrands) Brand(ctx context.Context, url string, refresh bool) (verifier.Signer, error) {
	if s, ok := o.signers()[url]; ok {
		return s, nil
	}
	return o.next.Brand(ctx, url, refresh)
}

func (o ownBrands) Agent(ctx context.Context, iss string, refresh bool) (verifier.Signer, error) {
	return o.next.Agent(ctx, iss, refresh)
}

// openOnGrant is the ledger's key source under provider.openAgents: a
// personal agent no one registered is taken, as the Provider took it (OIDC
// discovery, from public addresses only: verifier.Registry.OpenAgent),
// only for a request JWT posted with a delegation token that one of the
// Provider's own brands signed for that agent (own), the brand's word that
// the Provider granted it under its policy (PACT §3.1). Every other
// request JWT is checked against the registered agents only.
type openOnGrant struct {
	verifier.KeySource
	reg *verifier.Registry
	own func(brand string) bool
}

// GrantedAgent implements verifier.GrantedAgentSource.
func (o openOnGrant) GrantedAgent(ctx context.Context, brand, issuer string, refresh bool) (verifier.Signer, error) {
	if !o.own(brand) {
		return o.Agent(ctx, issuer, refresh)
	}
	return o.reg.OpenAgent(ctx, issuer, refresh)
}

// pipelineKey is the writer key the Provider posts receipts with. One
// that keys, the API keys this ledgerd holds (configured or generated),
// give the admin role is refused (errAdminPipelineKey); one only the
// ledgerd at provider.ledgerUrl knows is not checked here.
func pipelineKey(cfg config.Config, keys []config.APIKey, keyDir string) (string, error) {
	path := cfg.Provider.LedgerKeyFile
	if path == "" {
		if keyDir == "" {
			return "", errors.New("API keys are configured: set provider.ledgerKeyFile to a file holding a writer key")
		}
		path = filepath.Join(keyDir, config.RoleWriter+".key")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	key := strings.TrimSpace(string(b))
	sum := sha256.Sum256([]byte(key))
	for _, k := range keys {
		if strings.EqualFold(k.SHA256, hex.EncodeToString(sum[:])) && slices.Contains(k.Roles, config.RoleAdmin) {
			return "", fmt.Errorf("%w: %s holds the key %s, which has the admin role", errAdminPipelineKey, path, k.Name)
		}
	}
	return key, nil
}

// errAdminPipelineKey: provider.ledgerKeyFile holds a key with the admin
// role. The Provider's posts would be recorded as an admin's: each
// revocation of a grant it replaced would then stop the embedded Provider
// as an admin's does, and end the grant that replaced it, which carries
// its scopes (docs/design/038). ledgerd does not start with one.
var errAdminPipelineKey = errors.New("provider.ledgerKeyFile must hold a writer key without the admin role")

// pipelineClient is how the embedded Provider posts to the ledger: to
// this ledgerd in memory, through the same REST handler, authentication
// and roles as any client (so TLS on the listeners needs nothing from it),
// or to provider.ledgerUrl.
func (s *Server) pipelineClient() *pact.LedgerClient {
	// The pipeline has up to pact.RefusalsAtOnce posts in flight: as many
	// connections stay open between them.
	if s.pipeURL != "" {
		t := http.DefaultTransport.(*http.Transport).Clone()
		if s.pipeTLS != nil {
			t = &http.Transport{TLSClientConfig: s.pipeTLS, ForceAttemptHTTP2: true}
		}
		t.MaxIdleConnsPerHost = pact.RefusalsAtOnce
		return &pact.LedgerClient{URL: strings.TrimRight(s.pipeURL, "/"), Key: s.pipeKey, HTTP: &http.Client{Timeout: 30 * time.Second, Transport: t},
			Statement: s.provider.RevocationStatement, Logger: s.log}
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) { return s.pipeLis.DialContext(ctx) }
	return &pact.LedgerClient{URL: "http://ledgerd", Key: s.pipeKey, HTTP: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: pact.RefusalsAtOnce}},
		Statement: s.provider.RevocationStatement, Logger: s.log}
}

// ReloadTLS reads the certificate, key and client CA files again (on
// SIGHUP): new connections get the new certificate, open ones keep the
// old. A file that does not load keeps the previous configuration, and
// the log says why.
func (s *Server) ReloadTLS(ctx context.Context) error {
	if s.certs == nil {
		s.log.InfoContext(ctx, "tls reload: TLS is not configured; nothing to reload")
		return nil
	}
	leaf, err := s.certs.reload()
	if err != nil {
		s.log.ErrorContext(ctx, "tls reload failed; still serving the previous certificate", slog.String("error", err.Error()))
		return err
	}
	s.log.InfoContext(ctx, "tls certificate reloaded", slog.String("subject", leaf.Subject.String()),
		slog.String("serial", leaf.SerialNumber.Text(16)), slog.Time("not_after", leaf.NotAfter))
	return nil
}

// tlsConfig is the REST (http) or gRPC listener's TLS configuration, or
// nil without tls.
func (s *Server) tlsConfig(http bool) *tls.Config {
	switch {
	case s.certs == nil:
		return nil
	case http:
		return s.certs.httpConfig()
	}
	return s.certs.grpcConfig()
}

func (s *Server) scheme() string {
	if s.certs != nil {
		return "https"
	}
	return "http"
}

// Provider returns the embedded Provider, or nil when it is off.
func (s *Server) Provider() *pact.Provider { return s.provider }

// ProviderAddr is the bound Provider address, or "" when it is off.
func (s *Server) ProviderAddr() string {
	if s.pactLis == nil {
		return ""
	}
	return s.pactLis.Addr().String()
}

// GRPCAddr is the bound gRPC address.
func (s *Server) GRPCAddr() string { return s.grpcLis.Addr().String() }

// HTTPAddr is the bound HTTP address.
func (s *Server) HTTPAddr() string { return s.httpLis.Addr().String() }

// Ledger returns the ledger, for in-process use.
func (s *Server) Ledger() *ledger.Ledger { return s.ledger }

// Serve runs until ctx is done, then shuts down gracefully: it stops taking
// requests, lets in-flight ones finish (up to the shutdown timeout), stops
// the uploader and closes the row store after its last commit.
func (s *Server) Serve(ctx context.Context) error {
	// The collector's heap floor holds while the server serves.
	defer heapfloor.Start(uint64(s.cfg.Runtime.HeapFloorMiB)<<20, s.log)()
	upCtx, stopUploader := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	wg.Add(6)
	go func() {
		defer wg.Done()
		s.watchReadiness(upCtx)
	}()
	if s.s3 != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.watchEvidence(upCtx); err != nil {
				errc <- err
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.access.Run(upCtx) // writes what is queued when it stops; logged
	}()
	go func() {
		defer wg.Done()
		_ = s.ledger.RunSweeper(upCtx, time.Duration(s.cfg.Retention.SweepInterval))
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.ledger.RunClockWatch(upCtx)
	}()
	if !s.cfg.MerkleLog.On() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.ledger.RunLogWatch(upCtx, logWatchInterval) // logged
		}()
	}
	if s.cfg.MerkleLog.On() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.ledger.RunIntegrator(upCtx); err != nil {
				errc <- fmt.Errorf("log integrator: %w", err)
			}
		}()
	}
	go func() {
		defer wg.Done()
		_ = s.ledger.RunUploader(upCtx, ledger.UploaderConfig{Workers: s.cfg.Uploader.Workers, Batch: s.cfg.Uploader.Batch, MaxBackoff: time.Duration(s.cfg.Uploader.MaxBackoff), ClaimTTL: time.Duration(s.cfg.Uploader.ClaimTTL), Interval: defaultOrNone(s.cfg.Uploader.Interval)})
	}()
	go func() {
		defer wg.Done()
		m := s.cfg.Drills.Monthly
		if !m.On() {
			return
		}
		sched := drill.Schedule{Day: m.Day, Hour: m.Hour, Minute: m.Minute, Sample: m.Sample}
		s.log.InfoContext(ctx, "monthly drill scheduled", slog.String("schedule", sched.String()))
		// One scheduler across the ledgers on the store; its reports are
		// written under the lease's fence. It first runs a monthly drill
		// missed while no ledgerd was up.
		_ = s.ledger.RunUnderLease(upCtx, ledger.LeaseDrillScheduler, func(ctx context.Context) error {
			return s.drills.RunSchedulerFrom(ctx, sched, s.catchUpMonthly(ctx, sched), s.log)
		})
	}()
	go func() {
		defer wg.Done()
		if err := s.grpc.Serve(tlsListener(s.grpcLis, s.tlsConfig(false))); err != nil {
			errc <- fmt.Errorf("grpc: %w", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := s.http.Serve(tlsListener(s.httpLis, s.tlsConfig(true))); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.http.Serve(s.pipeLis)
	}()
	if s.pactHTTP != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.pactHTTP.Serve(s.pactLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("provider: %w", err)
			}
		}()
		if s.pipeKey != "" {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = s.provider.RunPipeline(upCtx, s.pipelineClient())
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.provider.RunPruner(upCtx) // logs each pass
		}()
		s.log.InfoContext(ctx, "PACT provider serving", slog.String("addr", s.ProviderAddr()), slog.String("provider", s.provider.String()))
	}
	ready, _ := s.readiness(ctx, false)
	s.setHealth(ready)
	s.log.InfoContext(ctx, "ledgerd serving", slog.String("grpc", s.GRPCAddr()), slog.String("http", s.HTTPAddr()),
		slog.Bool("tls", s.certs != nil), slog.String("data_dir", s.cfg.DataDir), slog.String("store", s.cfg.Store.Kind), slog.String("evidence", s.cfg.Evidence.Type))
	s.log.InfoContext(ctx, "web console: open it and paste a support, auditor or admin key", slog.String("url", s.scheme()+"://"+s.HTTPAddr()+console.Prefix))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	s.log.Info("ledgerd shutting down: finishing in-flight requests")
	s.health.Shutdown()
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(s.cfg.ShutdownTimeout))
	defer cancel()
	_ = s.http.Shutdown(sctx)
	if s.pactHTTP != nil {
		_ = s.pactHTTP.Shutdown(sctx)
	}
	close(s.draining) // streams answer what they read and end
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-sctx.Done():
		s.grpc.Stop()
	}
	stopUploader()
	wg.Wait()
	s.closeAll()
	s.log.Info("ledgerd stopped")
	return serveErr
}

func (s *Server) closeAll() {
	if s.workers != nil {
		s.workers.stop()
	}
	if s.provider != nil {
		if err := s.provider.Close(); err != nil {
			s.log.Error("close provider store", slog.String("error", err.Error()))
		}
		s.provider = nil
	}
	for _, l := range []net.Listener{s.grpcLis, s.httpLis, s.pactLis} {
		if l != nil {
			l.Close()
		}
	}
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			s.log.Error("close row store", slog.String("error", err.Error()))
		}
		s.store = nil
	}
}

// Run starts ledgerd with cfg and serves until ctx is done.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	s, err := New(ctx, cfg, log)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}

// errorHandler is the gateway's default error handler, but a swept row
// (NotFound with reason ROW_EXPIRED) is 410 Gone rather than 404, and a
// 401 names the scheme (RFC 6750) rather than repeating the message.
func errorHandler(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	w = challengeWriter{w}
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == reasonExpired {
				w = goneWriter{w}
			}
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == reasonNoLeaf {
				w = conflictWriter{w}
			}
		}
	}
	runtime.DefaultHTTPErrorHandler(ctx, mux, m, w, r, err)
}

// routingErrorHandler answers a method a path does not take with 405 (the
// gateway's default says 501, Not Implemented), and leaves every other
// routing error to the gateway.
func routingErrorHandler(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	if code == http.StatusMethodNotAllowed {
		writeJSON(w, code, map[string]any{"code": 12, "message": fmt.Sprintf("%s is not a method of %s", r.Method, r.URL.Path)})
		return
	}
	runtime.DefaultRoutingErrorHandler(ctx, mux, m, w, r, code)
}

// nosniff has every answer's Content-Type taken as sent.
func nosniff(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// private keeps the API's answers (rows, evidence, a customer's records)
// out of caches.
func private(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// challengeWriter sets a 401's WWW-Authenticate to the bearer challenge.
type challengeWriter struct{ http.ResponseWriter }

func (c challengeWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		c.Header().Set("WWW-Authenticate", `Bearer realm="pactledger"`)
	}
	c.ResponseWriter.WriteHeader(code)
}

type goneWriter struct{ http.ResponseWriter }

func (g goneWriter) WriteHeader(code int) {
	if code == http.StatusNotFound {
		code = http.StatusGone
	}
	g.ResponseWriter.WriteHeader(code)
}

// openLogKey returns the Merkle log's checkpoint signer and verifier key:
// made on the first start (created), read from merkleLog.keyFile once the
// row store holds checkpoints, since a key made then would sign none the
// published verifier key verifies.
func openLogKey(ctx context.Context, cfg *config.Config, l *ledger.Ledger) (note.Signer, string, bool, error) {
	size, err := l.TreeSize(ctx)
	if err != nil {
		return nil, "", false, fmt.Errorf("the Merkle log's size: %w", err)
	}
	if size == 0 {
		return config.EnsureLogKey(cfg)
	}
	signer, vkey, err := config.ReadLogKey(cfg)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", false, fmt.Errorf("no Merkle log key at %s, and the row store already holds the log's checkpoints (%d leaves): ledgerd makes a key only for a row store with no log, since checkpoints signed by a new key would verify with no published key; "+
			"copy the key file the other replicas use (their merkleLog.keyFile) to this one and point merkleLog.keyFile at it, or restore it from the backup of signing.key (docs/operations.md, \"Running more than one ledgerd\")", cfg.LogKeyFile(), size)
	}
	return signer, vkey, false, err
}

// conflictWriter answers a row or event with no leaf in the log and none
// queued with 409: the row store disagrees with the log (the gateway's
// default for FailedPrecondition is 400, a mistake of the request).
type conflictWriter struct{ http.ResponseWriter }

func (c conflictWriter) WriteHeader(code int) {
	if code == http.StatusBadRequest {
		code = http.StatusConflict
	}
	c.ResponseWriter.WriteHeader(code)
}

// Package s3 is write-once evidence storage on any S3 service with Object
// Lock (AWS S3, MinIO, Ceph RGW, versitygw): every object is created
// create-only (If-None-Match: *) with COMPLIANCE retention until its
// retain-until date.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/pactledger/pactledger/ledger"
)

// Errors of the bucket check. Each is a definite misconfiguration: the S3
// service answered, and retrying without a change of configuration cannot
// help.
var (
	// ErrNoObjectLock: the bucket does not have Object Lock enabled.
	ErrNoObjectLock = errors.New("bucket does not have object lock enabled")
	// ErrNoBucket: the bucket does not exist and CreateBucket is off.
	ErrNoBucket = errors.New("bucket does not exist")
	// ErrCredentials: the service rejected the access key or the signature.
	ErrCredentials = errors.New("credentials rejected")
)

// ErrNotChecked: the bucket check has not passed yet, so nothing is put:
// evidence waits in the outbox rather than go to a bucket that may lack
// Object Lock. It is ledger.ErrStarting, which wraps ledger.ErrUnavailable.
var ErrNotChecked = ledger.ErrStarting

// Config locates the bucket. The zero value of each tuning field means its
// default.
type Config struct {
	Endpoint  string // host:port
	Bucket    string
	AccessKey string
	SecretKey string
	Region    string // default us-east-1
	Insecure  bool   // plain http (loopback test servers)
	// CreateBucket creates the bucket with Object Lock when it is missing.
	CreateBucket bool
	// CheckTimeout bounds one attempt of the bucket check; default 10 s.
	CheckTimeout time.Duration
	// CheckMaxBackoff caps the wait between failed attempts of the bucket
	// check (1 s doubling); default 30 s.
	CheckMaxBackoff time.Duration
	// ResponseTimeout bounds the wait for the answer to any one request
	// (its response headers); default 30 s.
	ResponseTimeout time.Duration
}

// IdleConns is how many connections to the endpoint the store keeps open
// between requests for reuse: as many as ledgerd's uploader runs uploads
// at most (uploader.workers, up to 64), and 16 for the reads, the Merkle
// log's tiles and the checks beside them. A connection returned while
// this many wait idle is closed, and the next request opens a new one
// (over TLS, with a handshake). Idle connections close after a minute.
const IdleConns = 64 + 16

// Status is the bucket's condition as the store last saw it.
type Status string

// Statuses.
const (
	// StatusChecking: no attempt of the bucket check has finished yet.
	StatusChecking Status = "checking"
	// StatusOK: the check passed and the last request was answered.
	StatusOK Status = "ok"
	// StatusUnreachable: the last attempt or request got no answer (a
	// refused or timed-out connection, or a 5xx).
	StatusUnreachable Status = "unreachable"
	// StatusMisconfigured: the check found a definite misconfiguration.
	StatusMisconfigured Status = "misconfigured"
)

// State is the bucket's condition: its status, since when it holds, and
// the last error seen (kept after the status returns to ok).
type State struct {
	Status    Status
	Since     time.Time
	LastError string
	LastErrAt time.Time
	Checked   bool // the bucket check has passed
}

// Store is a ledger.ObjectStore on an S3 bucket with Object Lock.
type Store struct {
	c      *minio.Client
	bucket string
	cfg    Config

	mu    sync.Mutex
	state State
	// statusBegan is when the request or check whose outcome set the
	// status began (observe).
	statusBegan time.Time
}

// String names the store in messages: "the S3 bucket B at ENDPOINT".
func (s *Store) String() string {
	return fmt.Sprintf("the S3 bucket %s at %s", s.bucket, s.cfg.Endpoint)
}

// New returns a store for the bucket without any network I/O; it puts
// nothing (ErrNotChecked) until Check has passed once. Run Check or Watch
// to check the bucket.
func New(cfg Config) (*Store, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, errors.New("s3: endpoint and bucket are required")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = 10 * time.Second
	}
	if cfg.CheckMaxBackoff <= 0 {
		cfg.CheckMaxBackoff = 30 * time.Second
	}
	if cfg.ResponseTimeout <= 0 {
		cfg.ResponseTimeout = 30 * time.Second
	}
	tr, err := minio.DefaultTransport(!cfg.Insecure)
	if err != nil {
		return nil, fmt.Errorf("s3 transport: %w", err)
	}
	tr.ResponseHeaderTimeout = cfg.ResponseTimeout
	tr.MaxIdleConnsPerHost = IdleConns
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       !cfg.Insecure,
		Transport:    datedTransport{next: tr},
		Region:       cfg.Region,
		BucketLookup: minio.BucketLookupPath,
		// The uploader retries whole rounds with its own backoff.
		MaxRetries: 3,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client %s: %w", cfg.Endpoint, err)
	}
	return &Store{c: c, bucket: cfg.Bucket, cfg: cfg, state: State{Status: StatusChecking, Since: time.Now()}}, nil
}

// Open returns a store whose bucket check has passed: New, then one
// attempt of Check bounded by ctx.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Check(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Check makes one attempt, bounded by the check timeout, at checking that
// the bucket exists with Object Lock enabled, creating it when it is
// missing and CreateBucket is set. It returns nil once the check has passed
// (at once after a success), an error wrapping ErrNoObjectLock, ErrNoBucket
// or ErrCredentials on a definite misconfiguration, and any other error
// when the service could not be asked (worth retrying).
func (s *Store) Check(ctx context.Context) error {
	if s.State().Checked {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CheckTimeout)
	defer cancel()
	began := time.Now()
	err := s.check(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.state.Checked = true
		s.statusBegan = began
		s.setStatus(StatusOK)
	case Definite(err):
		s.setStatus(StatusMisconfigured)
		s.noteErr(err)
	default:
		s.setStatus(StatusUnreachable)
		s.noteErr(err)
	}
	return err
}

func (s *Store) check(ctx context.Context) error {
	where := fmt.Sprintf("s3 bucket %s at %s", s.bucket, s.cfg.Endpoint)
	// One GET answers all three questions with an error code in its body
	// (a HEAD would not carry one): the bucket exists, the credentials are
	// accepted, and Object Lock is on.
	enabled, _, _, _, err := s.c.GetObjectLockConfig(ctx, s.bucket)
	if err != nil && minio.ToErrorResponse(err).Code == minio.NoSuchBucket {
		if !s.cfg.CreateBucket {
			return fmt.Errorf("%s: %w", where, ErrNoBucket)
		}
		if err := s.c.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: s.cfg.Region, ObjectLocking: true}); err != nil {
			return fmt.Errorf("create %s with object lock: %w", where, classify(err))
		}
		enabled, _, _, _, err = s.c.GetObjectLockConfig(ctx, s.bucket)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", where, classify(err))
	}
	if enabled != "Enabled" {
		return fmt.Errorf("%s: %w", where, ErrNoObjectLock)
	}
	return nil
}

// classify turns the service's answers that name a misconfiguration into
// the package's errors.
func classify(err error) error {
	r := minio.ToErrorResponse(err)
	switch r.Code {
	case "ObjectLockConfigurationNotFoundError":
		return fmt.Errorf("%w (%s)", ErrNoObjectLock, r.Message)
	case "InvalidAccessKeyId", "SignatureDoesNotMatch":
		return fmt.Errorf("%w: %s", ErrCredentials, r.Code)
	}
	return err
}

// Definite reports whether err is a definite misconfiguration found by the
// bucket check (no object lock, no bucket, credentials rejected).
func Definite(err error) bool {
	return errors.Is(err, ErrNoObjectLock) || errors.Is(err, ErrNoBucket) || errors.Is(err, ErrCredentials)
}

// Watch runs Check until it passes, waiting between failed attempts (1 s,
// doubling, capped at the check's max backoff). It returns nil once the
// check passes, the error on a definite misconfiguration, and ctx.Err()
// when ctx ends first. onRetry, when set, is told each failed attempt and
// the wait before the next.
func (s *Store) Watch(ctx context.Context, onRetry func(err error, retryIn time.Duration)) error {
	backoff := time.Duration(0)
	for {
		err := s.Check(ctx)
		if err == nil || Definite(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		backoff = min(max(2*backoff, time.Second), s.cfg.CheckMaxBackoff)
		if onRetry != nil {
			onRetry(err, backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// State returns the bucket's condition as last seen.
func (s *Store) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// setStatus moves to st, keeping Since when the status does not change.
// The caller holds mu.
func (s *Store) setStatus(st Status) {
	if s.state.Status != st {
		s.state.Status, s.state.Since = st, time.Now()
	}
}

func (s *Store) noteErr(err error) {
	s.state.LastError, s.state.LastErrAt = err.Error(), time.Now()
}

// observe records the outcome of a request begun at began, after the
// check has passed: no answer (a network error or a 5xx) makes the bucket
// unreachable, any answer makes it ok again; every error is kept as the
// last error. An outcome sets the status only when its request began no
// earlier than the request or check whose outcome set it last: a request
// that began while the bucket was down (minio-go retries one for seconds)
// and fails after a later one was answered says nothing new of the
// bucket, and must not undo the later answer until its next request.
func (s *Store) observe(began time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.state.Checked {
		return
	}
	if err != nil {
		s.noteErr(err)
	}
	if began.Before(s.statusBegan) {
		return
	}
	s.statusBegan = began
	if err != nil && noAnswer(err) {
		s.setStatus(StatusUnreachable)
	} else {
		s.setStatus(StatusOK)
	}
}

// noAnswer reports whether err means the service gave no usable answer: a
// transport error (refused, reset, timed out) or a 5xx.
func noAnswer(err error) bool {
	var r minio.ErrorResponse
	if errors.As(err, &r) {
		return r.StatusCode == 0 || r.StatusCode >= 500
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF)
}

// ready returns ErrNotChecked until the bucket check has passed.
func (s *Store) ready() error {
	if !s.State().Checked {
		return fmt.Errorf("s3 bucket %s: %w", s.bucket, ErrNotChecked)
	}
	return nil
}

// Put implements ledger.ObjectStore.
func (s *Store) Put(ctx context.Context, key string, body []byte, retainUntil time.Time) (ledger.Location, error) {
	began := time.Now()
	loc, err := s.put(ctx, key, body, retainUntil)
	s.observe(began, err)
	return loc, err
}

func (s *Store) put(ctx context.Context, key string, body []byte, retainUntil time.Time) (ledger.Location, error) {
	if err := s.ready(); err != nil {
		return ledger.Location{}, err
	}
	opts := lockedPut(body, retainUntil, "application/json")
	opts.SetMatchETagExcept("*")
	info, err := s.c.PutObject(ctx, s.bucket, key, bytes.NewReader(body), int64(len(body)), opts)
	loc := ledger.Location{Store: "s3", Bucket: s.bucket, Key: key, RetainUntil: retainUntil.UTC()}
	if err == nil {
		loc.VersionID = info.VersionID
		return loc, nil
	}
	if minio.ToErrorResponse(err).StatusCode != http.StatusPreconditionFailed {
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	// Already there: from an earlier attempt whose outbox removal did not commit.
	have, err := s.get(ctx, key)
	if err != nil {
		return loc, err
	}
	if !bytes.Equal(have, body) {
		return loc, fmt.Errorf("put %s: %w", key, ledger.ErrObjectExists)
	}
	// The same object put again, perhaps for longer (a JWKS snapshot named
	// anew by a row of a longer class after its last row was swept): it is
	// retained for the new put too, as a put of its own would be.
	loc.VersionID, loc.RetainUntil, err = s.retainAtLeast(ctx, key, "", retainUntil)
	return loc, err
}

// lockedPut is the options of a put of body in one request, kept under
// COMPLIANCE retention until retainUntil.
func lockedPut(body []byte, retainUntil time.Time, contentType string) minio.PutObjectOptions {
	return minio.PutObjectOptions{
		ContentType:      contentType,
		Mode:             minio.Compliance,
		RetainUntilDate:  retainUntil.UTC(),
		DisableMultipart: true,
		// S3 refuses a put with Object Lock parameters that carries
		// neither Content-MD5 nor a checksum.
		SendContentMd5: true,
		// Over plain HTTP the client signs a body in aws-chunked form.
		// For an empty body it declares no length yet still writes the
		// final chunk, so the body goes out chunked; versitygw (v1.8.0)
		// answers without reading it, reads it as the connection's next
		// request and answers that with a 400, which the next request
		// sent on the connection gets as its answer. An empty body has
		// nothing to sign chunk by chunk.
		DisableContentSha256: len(body) == 0,
	}
}

// Get implements ledger.ObjectStore: the key's latest version.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	return s.GetVersion(ctx, key, "")
}

// GetVersion implements ledger.VersionReader: the key's version, or its
// latest for "".
func (s *Store) GetVersion(ctx context.Context, key, version string) ([]byte, error) {
	began := time.Now()
	b, err := s.getVersion(ctx, key, version)
	if errors.Is(err, ledger.ErrNotFound) {
		s.observe(began, nil) // an answer
	} else {
		s.observe(began, err)
	}
	return b, err
}

// maxObject bounds one object read whole: a segment is at most
// ledger.MaxSegmentBytes, a bundle one request body.
var maxObject int64 = 64 << 20

func (s *Store) get(ctx context.Context, key string) ([]byte, error) {
	return s.getVersion(ctx, key, "")
}

func (s *Store) getVersion(ctx context.Context, key, version string) ([]byte, error) {
	obj, err := s.c.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{VersionID: version})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	defer obj.Close()
	// The first Stat sends the request; its size sizes the buffer.
	info, err := obj.Stat()
	if err != nil {
		return nil, getError(key, err)
	}
	b, err := readObject(obj, info.Size, maxObject)
	if err != nil {
		return nil, getError(key, err)
	}
	return b, nil
}

// errTooLarge is the error of an object over the bound of a read.
var errTooLarge = errors.New("more bytes than an object of the ledger holds")

// readObject reads an object of size bytes (-1: not given) from r, at
// most limit of them.
func readObject(r io.Reader, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, fmt.Errorf("%d bytes, over %d: %w", size, limit, errTooLarge)
	}
	if size >= 0 {
		b := make([]byte, size)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	// No length given: read up to the bound, and one byte more to tell
	// an object over it.
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("over %d bytes: %w", limit, errTooLarge)
	}
	return b, nil
}

// getError is err of a read of key, ErrNotFound when there is no such
// object.
func getError(key string, err error) error {
	if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
		return fmt.Errorf("get %s: %w", key, ledger.ErrNotFound)
	}
	return fmt.Errorf("get %s: %w", key, err)
}

// Ping implements ledger.ObjectStore.
func (s *Store) Ping(ctx context.Context) error {
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := s.c.BucketExists(ctx, s.bucket)
	s.observe(began, err)
	return err
}

// SetLegalHold implements ledger.ObjectStore.
func (s *Store) SetLegalHold(ctx context.Context, loc ledger.Location, on bool) (err error) {
	began := time.Now()
	defer func() { s.observe(began, err) }()
	if err := s.ready(); err != nil {
		return err
	}
	st := minio.LegalHoldDisabled
	if on {
		st = minio.LegalHoldEnabled
	}
	if err := s.c.PutObjectLegalHold(ctx, s.bucket, loc.Key, minio.PutObjectLegalHoldOptions{VersionID: loc.VersionID, Status: &st}); err != nil {
		return fmt.Errorf("legal hold %s: %w", loc.Key, err)
	}
	return nil
}

// ExtendRetention implements ledger.ObjectStore.
func (s *Store) ExtendRetention(ctx context.Context, loc ledger.Location, until time.Time) (err error) {
	began := time.Now()
	defer func() { s.observe(began, err) }()
	if err := s.ready(); err != nil {
		return err
	}
	_, _, err = s.retainAtLeast(ctx, loc.Key, loc.VersionID, until)
	return err
}

// retainAtLeast keeps key's version (its latest for "") under COMPLIANCE
// retention until at least until, never shortening it; it returns the
// version and the retain-until it has then.
func (s *Store) retainAtLeast(ctx context.Context, key, version string, until time.Time) (string, time.Time, error) {
	st, err := s.c.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{VersionID: version})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("retention of %s: %w", key, err)
	}
	if cur, err := time.Parse(time.RFC3339, st.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date")); err == nil && !until.After(cur) {
		return st.VersionID, cur.UTC(), nil // never shorten
	}
	mode := minio.Compliance
	until = until.UTC()
	if err := s.c.PutObjectRetention(ctx, s.bucket, key, minio.PutObjectRetentionOptions{Mode: &mode, RetainUntilDate: &until, VersionID: st.VersionID}); err != nil {
		return st.VersionID, time.Time{}, fmt.Errorf("extend retention of %s: %w", key, err)
	}
	return st.VersionID, until, nil
}

// Delete implements ledger.ObjectStore: it removes the object's version.
// The bucket refuses while the version is retained or under legal hold.
func (s *Store) Delete(ctx context.Context, loc ledger.Location) (err error) {
	began := time.Now()
	defer func() { s.observe(began, err) }()
	if err := s.ready(); err != nil {
		return err
	}
	// A delete without a version writes a delete marker, which Object
	// Lock allows whatever the retention: the key would read as gone
	// while its version stays, and the ledger would record it deleted. A
	// location of another store or bucket (the ledger's evidence store
	// changed under it) has no version of this bucket to delete.
	if loc.Store != "s3" || loc.Bucket != s.bucket || loc.VersionID == "" {
		return fmt.Errorf("delete %s: the location is not a version of bucket %s (store %q, bucket %q, version %q): nothing deleted", loc.Key, s.bucket, loc.Store, loc.Bucket, loc.VersionID)
	}
	if err := s.c.RemoveObject(ctx, s.bucket, loc.Key, minio.RemoveObjectOptions{VersionID: loc.VersionID}); err != nil {
		return fmt.Errorf("delete %s: %w", loc.Key, err)
	}
	return nil
}

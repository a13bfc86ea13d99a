package s3_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/freeport"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/s3"
)

// TestServerTime: the store reads the S3 server's clock from the Date of
// its answer, an error answer (credentials rejected, as AWS rejects a
// request signed by a clock far off) included, and fails with
// ErrUnavailable when nothing answers.
func TestServerTime(t *testing.T) {
	ctx := context.Background()
	bucket := s3test.Bucket()
	if _, err := open(t, bucket, true); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		endpoint  string
		secret    string
		wantError bool
	}{
		{"answered", srv.Endpoint, srv.SecretKey, false},
		{"refused credentials", srv.Endpoint, "not-the-secret", false},
		{"nobody listening", freeport.Addr(t), srv.SecretKey, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := s3.New(s3.Config{Endpoint: tc.endpoint, Bucket: bucket, AccessKey: srv.AccessKey, SecretKey: tc.secret, Insecure: true, CheckTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			// A Date is in whole seconds, and servers built on fasthttp
			// (versitygw) refresh theirs once a second; ServerTime gives
			// the middle of the Date's second.
			before := time.Now().Add(-2 * time.Second)
			got, err := st.ServerTime(ctx)
			after := time.Now().Add(time.Second)
			if tc.wantError {
				if !errors.Is(err, ledger.ErrUnavailable) {
					t.Fatalf("ServerTime = %v, %v; want an error wrapping ErrUnavailable", got, err)
				}
				return
			}
			if err != nil || got.Before(before) || got.After(after) {
				t.Fatalf("ServerTime = %v, %v; want a time from %v to %v", got, err, before, after)
			}
		})
	}
}

// A service that answers without a Date header (RFC 9110 lets one with no
// clock leave it out) gives no time: ServerTime says so with
// ledger.ErrNoClock, not as a service down.
func TestServerTimeOfAServiceWithoutADate(t *testing.T) {
	st, err := s3.New(s3.Config{Endpoint: s3test.WithoutDate(t), Bucket: "evidence", AccessKey: "k", SecretKey: "s", Insecure: true, CheckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.ServerTime(context.Background()); !errors.Is(err, ledger.ErrNoClock) || errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("ServerTime = %v, %v; want an error wrapping ErrNoClock alone", got, err)
	}
}

// A proxy or load balancer answering for a service that is down, with an
// error of its own and no Date (as HAProxy's and many others' pages
// have), says nothing of the service's clock: ServerTime says the service
// is unavailable, not that it has no clock (which would have the
// ledger's clock checks pass it over).
func TestServerTimeOfAProxyAnsweringForAServiceDown(t *testing.T) {
	for _, code := range []int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusForbidden} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header()["Date"] = nil
				w.WriteHeader(code)
			}))
			t.Cleanup(down.Close)
			st, err := s3.New(s3.Config{Endpoint: strings.TrimPrefix(down.URL, "http://"), Bucket: "evidence", AccessKey: "k", SecretKey: "s", Insecure: true, CheckTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := st.ServerTime(context.Background()); !errors.Is(err, ledger.ErrUnavailable) || errors.Is(err, ledger.ErrNoClock) {
				t.Fatalf("ServerTime = %v, %v; want an error wrapping ErrUnavailable, not ErrNoClock", got, err)
			}
		})
	}
}

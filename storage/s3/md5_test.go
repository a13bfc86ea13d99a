package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/storage/s3"
)

// TestLockedPutsCarryContentMD5: S3 refuses a PutObject with Object Lock
// parameters that carries neither Content-MD5 nor a checksum header
// (versitygw and MinIO take it). Every put, of a version too and of an
// empty body, goes through a recording proxy to the test server and
// carries its body's MD5.
func TestLockedPutsCarryContentMD5(t *testing.T) {
	target, err := url.Parse("http://" + srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen = map[string]string{} // object path: Content-MD5 of its locked put
	)
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.Header.Get("X-Amz-Object-Lock-Mode") != "" {
			mu.Lock()
			seen[r.URL.Path] = r.Header.Get("Content-Md5")
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()

	ctx := context.Background()
	bucket := s3test.Bucket()
	st, err := s3.Open(ctx, s3.Config{Endpoint: strings.TrimPrefix(front.URL, "http://"), Bucket: bucket, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true, CreateBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	retain := time.Now().Add(time.Hour)
	bodies := map[string][]byte{
		"segments/a.seg": bytes.Repeat([]byte("row "), 1000),
		"empty":          nil,
	}
	for key, body := range bodies {
		if _, err := st.Put(ctx, key, body, retain); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	bodies["log/checkpoint"] = []byte("a checkpoint\n")
	if _, err := st.SwapVersion(ctx, "log/checkpoint", bodies["log/checkpoint"], retain, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for key, body := range bodies {
		sum := md5.Sum(body)
		got, ok := seen["/"+bucket+"/"+key]
		if !ok {
			t.Errorf("%s: no put with Object Lock parameters went through the proxy", key)
			continue
		}
		if want := base64.StdEncoding.EncodeToString(sum[:]); got != want {
			t.Errorf("%s: Content-MD5 %q, want %q", key, got, want)
		}
	}
}

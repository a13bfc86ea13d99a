package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/s3"
)

// TestGetIsBounded reads an object whole, an empty one, one over the
// bound (refused, saying so) and a missing one (ErrNotFound).
func TestGetIsBounded(t *testing.T) {
	ctx := context.Background()
	st, err := open(t, s3test.Bucket(), true)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("0123456789"), 10)
	retain := time.Now().Add(time.Hour)
	if _, err := st.Put(ctx, "log/tile/0/000", body, retain); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "log/tile/0/001", nil, retain); err != nil {
		t.Fatal(err)
	}
	defer s3.SetMaxObject(int64(len(body)))()
	if got, err := st.Get(ctx, "log/tile/0/000"); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("Get at the bound = %q, %v; want the %d bytes put", got, err, len(body))
	}
	if got, err := st.Get(ctx, "log/tile/0/001"); err != nil || len(got) != 0 {
		t.Fatalf("Get of an empty object = %q, %v", got, err)
	}
	s3.SetMaxObject(int64(len(body)) - 1)
	_, err = st.Get(ctx, "log/tile/0/000")
	if err == nil || !strings.Contains(err.Error(), "100 bytes, over 99") {
		t.Fatalf("Get over the bound = %v, want a refusal naming both sizes", err)
	}
	if _, err := st.Get(ctx, "log/tile/0/002"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("missing object: %v, want ErrNotFound", err)
	}
}

// TestEmptyObjectsLeaveConnectionsClean puts empty objects, each read
// back at once on the same kept-alive connection. An empty body signed in
// aws-chunked form left its final chunk unread on the connection: the
// server answered it as a request of its own with a 400, which the next
// read got as its answer or which net/http logged as an unsolicited
// response.
func TestEmptyObjectsLeaveConnectionsClean(t *testing.T) {
	ctx := context.Background()
	st, err := open(t, s3test.Bucket(), true)
	if err != nil {
		t.Fatal(err)
	}
	logged, was := &syncbuf.Buffer{}, log.Writer()
	log.SetOutput(logged)
	defer log.SetOutput(was)
	retain := time.Now().Add(time.Hour)
	for i := range 40 {
		key := fmt.Sprintf("empty/%03d", i)
		if _, err := st.Put(ctx, key, nil, retain); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		if got, err := st.Get(ctx, key); err != nil || len(got) != 0 {
			t.Fatalf("get %s right after its put = %q, %v", key, got, err)
		}
	}
	if s := logged.String(); strings.Contains(s, "Unsolicited response") {
		t.Fatalf("the server answered bytes left on a connection:\n%s", s)
	}
}

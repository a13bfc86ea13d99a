package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"runtime"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// rawCodec sends a message's bytes as they are given and keeps an
// answer's bytes: what a client that encodes its own messages sends.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// allocated returns the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// emptyReceipts is an AppendReceiptsRequest of n empty receipts on the
// wire: two bytes each, about 180 bytes each once decoded.
func emptyReceipts(n int) []byte { return bytes.Repeat([]byte{0x0a, 0x00}, n) }

// A gRPC call without a key that may make it is refused before its
// message is read: a message that cannot be decoded is refused for its
// key, not its bytes, and a megabyte of empty receipts costs the server
// about its size, not the hundred-odd megabytes decoding it would. The
// refusals are counted as any call is. A key that may make the call has
// its message decoded as before.
func TestGRPCRefusesBeforeReading(t *testing.T) {
	e := newEnv(t, jose.ES256)
	conn := dial(t, e)
	before := scrape(t, e)
	invoke := func(ctx context.Context, method string, msg []byte) error {
		var out []byte
		return conn.Invoke(ctx, method, &msg, &out, grpc.ForceCodecV2(rawCodec{}))
	}
	garbage := []byte{0x0a, 0x7f, 0x01} // a receipt 127 bytes long, cut off at one
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{
		{"no key", ctx, codes.Unauthenticated},
		{"unknown key", metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer not-a-key"), codes.Unauthenticated},
		{"a key without the role", authCtx(ctx, "support"), codes.PermissionDenied},
		{"the writer's key", authCtx(ctx, "writer"), codes.Internal}, // decoded, and it cannot be
	} {
		err := invoke(tc.ctx, ledgerv1.LedgerService_AppendReceipts_FullMethodName, garbage)
		if status.Code(err) != tc.want {
			t.Errorf("%s, undecodable message: %v, want %v", tc.name, err, tc.want)
		}
	}

	many := emptyReceipts(e.cfg.Limits.MaxBodyBytes/2 - 64)
	var err error
	n := allocated(func() { err = invoke(ctx, ledgerv1.LedgerService_AppendReceipts_FullMethodName, many) })
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a megabyte of empty receipts without a key: %v", err)
	}
	if n > 16<<20 {
		t.Errorf("a megabyte of empty receipts without a key cost %d MiB: decoded before it was refused", n>>20)
	}

	// Headers over 64 KiB are refused too (gRPC's own bound is 16 MiB).
	big := metadata.AppendToOutgoingContext(authCtx(ctx, "writer"), "x-padding", strings.Repeat("a", 100<<10))
	if err := invoke(big, ledgerv1.LedgerService_WhoAmI_FullMethodName, nil); err == nil {
		t.Errorf("100 KiB of headers: the call was served")
	} else {
		t.Logf("100 KiB of headers: %v", err)
	}

	stream, err := ledgerv1.NewLedgerServiceClient(conn).AppendReceiptStream(ctx)
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a stream without a key: %v", err)
	}

	after := scrape(t, e)
	checkRose(t, before, after, map[string]float64{
		rpc("grpc_server_handled_total", "AppendReceipts", "Unauthenticated"):            3,
		rpc("grpc_server_handled_total", "AppendReceipts", "PermissionDenied"):           1,
		rpc("grpc_server_handled_total", "AppendReceipts", "Internal"):                   0, // gRPC fails it before the interceptors
		streamRPC("grpc_server_handled_total", "AppendReceiptStream", "Unauthenticated"): 1,
	})
}

// From the writer, a megabyte of empty receipts is refused for what it
// holds before it is decoded (InvalidArgument, counted like any refusal),
// as a body of JSON objects is over REST; so is one stream message whose
// receipt lists half a million empty actions. A batch of real size over
// 64 KiB is decoded as before.
func TestGRPCRefusesMessagesOfMessages(t *testing.T) {
	e := newEnv(t, jose.ES256)
	conn := dial(t, e)
	before := scrape(t, e)
	ctx := authCtx(context.Background(), "writer")
	invoke := func(method string, msg []byte) error {
		var out []byte
		return conn.Invoke(ctx, method, &msg, &out, grpc.ForceCodecV2(rawCodec{}))
	}

	var err error
	n := allocated(func() {
		err = invoke(ledgerv1.LedgerService_AppendReceipts_FullMethodName, emptyReceipts(e.cfg.Limits.MaxBodyBytes/2-64))
	})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "more than 10000 protobuf messages") {
		t.Fatalf("a megabyte of empty receipts from the writer: %v, want InvalidArgument", err)
	}
	if n > 16<<20 {
		t.Errorf("a megabyte of empty receipts from the writer cost %d MiB: decoded before it was refused", n>>20)
	}

	var hundred []byte
	for range 100 {
		r := protowire.AppendTag(nil, 1, protowire.BytesType) // receipt_jws
		r = protowire.AppendString(r, strings.Repeat("a", 1000))
		hundred = protowire.AppendTag(hundred, 1, protowire.BytesType)
		hundred = protowire.AppendBytes(hundred, r)
	}
	if err := invoke(ledgerv1.LedgerService_AppendReceipts_FullMethodName, hundred); err != nil {
		t.Errorf("a batch of 100 over 64 KiB: %v, want each receipt answered on its own", err)
	}

	actions := bytes.Repeat([]byte{0x22, 0x00}, e.cfg.Limits.MaxBodyBytes/2-64) // AppendReceiptRequest.actions
	msg := protowire.AppendTag(nil, 2, protowire.BytesType)                     // AppendReceiptStreamRequest.receipt
	msg = protowire.AppendBytes(msg, actions)
	desc := &grpc.StreamDesc{StreamName: "AppendReceiptStream", ServerStreams: true, ClientStreams: true}
	stream, err := conn.NewStream(ctx, desc, ledgerv1.LedgerService_AppendReceiptStream_FullMethodName, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	n = allocated(func() {
		if err = stream.SendMsg(&msg); err == nil {
			var out []byte
			err = stream.RecvMsg(&out)
		}
	})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "more than 10000 protobuf messages") {
		t.Fatalf("a stream message of half a million empty actions: %v, want InvalidArgument", err)
	}
	if n > 16<<20 {
		t.Errorf("a stream message of half a million empty actions cost %d MiB: decoded before it was refused", n>>20)
	}

	after := scrape(t, e)
	checkRose(t, before, after, map[string]float64{
		rpc("grpc_server_handled_total", "AppendReceipts", "InvalidArgument"):            1,
		rpc("grpc_server_handled_total", "AppendReceipts", "OK"):                         1,
		streamRPC("grpc_server_handled_total", "AppendReceiptStream", "InvalidArgument"): 1,
	})
}

// A unary call whose refused message is followed by a second one, or by a
// reset, ends before any interceptor sees it: what the refusal kept must
// go with the call. Twenty such calls, each with a second message of
// 30,000 empty receipts (about 5 MB decoded), leave the heap as it was.
// A client that sends the refusal's mark itself is refused as well.
func TestGRPCRefusalsLeaveNothingBehind(t *testing.T) {
	e := newEnv(t, jose.ES256)
	conn := dial(t, e)
	ctx := authCtx(context.Background(), "writer")
	big := emptyReceipts(200_000)
	small := emptyReceipts(30_000) // under 64 KiB: decoded
	unary := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
	send := func(ctx context.Context, msgs ...[]byte) error {
		st, err := conn.NewStream(ctx, unary, ledgerv1.LedgerService_AppendReceipts_FullMethodName, grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if err := st.SendMsg(&m); err != nil {
				return err
			}
		}
		if err := st.CloseSend(); err != nil {
			return err
		}
		var out []byte
		return st.RecvMsg(&out)
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for range 20 {
		if err := send(ctx, big, small); status.Code(err) != codes.Internal {
			t.Fatalf("two messages on a unary call: %v, want Internal (gRPC's cardinality violation)", err)
		}
	}
	for range 5 {
		// One message and a reset in place of the end of the stream.
		cctx, cancel := context.WithCancel(ctx)
		st, err := conn.NewStream(cctx, unary, ledgerv1.LedgerService_AppendReceipts_FullMethodName, grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(&big); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	if err := send(ctx, big); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a refused message alone: %v, want InvalidArgument", err)
	}
	if grown := int64(heap()) - int64(before); grown > 32<<20 {
		t.Errorf("the heap grew by %d MiB over 25 calls that ended before their refusal was seen: they left their messages behind", grown>>20)
	}

	mark := protowire.AppendString(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.BytesType), "pactledger: too many messages")
	if err := send(ctx, mark); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a request holding the refusal's mark: %v, want InvalidArgument", err)
	}
}

// Over REST, a body from a caller without a key the ledger holds is not
// read: malformed JSON is refused for the key (401, not 400), a megabyte
// of empty receipts costs about its size, and the connection serves the
// next request. A body sent in chunks over limits.maxBodyBytes is a 413,
// as one that declares its length is.
func TestRESTRefusesBeforeReading(t *testing.T) {
	e := newEnv(t, jose.ES256)
	if code := e.call(t, "POST", "/v1/receipts", "", `{"receiptJws":`, nil); code != http.StatusUnauthorized {
		t.Errorf("malformed JSON without a key: %d, want 401", code)
	}
	if code := e.call(t, "POST", "/v1/receipts", "not-a-key", `{"receiptJws":`, nil); code != http.StatusUnauthorized {
		t.Errorf("malformed JSON with an unknown key: %d, want 401", code)
	}
	if code := e.call(t, "POST", "/v1/receipts", "writer", `{"receiptJws":`, nil); code != http.StatusBadRequest {
		t.Errorf("malformed JSON from the writer: %d, want 400", code)
	}

	max := e.cfg.Limits.MaxBodyBytes
	many := `{"receipts":[{}` + strings.Repeat(`,{}`, max/3-10) + `]}`
	var code int
	n := allocated(func() { code = e.call(t, "POST", "/v1/receipts:batch", "", many, nil) })
	if code != http.StatusUnauthorized {
		t.Fatalf("a megabyte of empty receipts without a key: %d, want 401", code)
	}
	if n > 16<<20 {
		t.Errorf("a megabyte of empty receipts without a key cost %d MiB: decoded before it was refused", n>>20)
	}

	// From the writer, the same megabyte is refused for what it holds
	// before it is decoded; a batch of real size is decoded as before.
	var refused struct{ Message string }
	n = allocated(func() { code = e.call(t, "POST", "/v1/receipts:batch", "writer", many, &refused) })
	if code != http.StatusBadRequest || !strings.Contains(refused.Message, "more than 10000 JSON objects") {
		t.Fatalf("a megabyte of empty receipts from the writer: %d %q, want 400", code, refused.Message)
	}
	if n > 16<<20 {
		t.Errorf("a megabyte of empty receipts from the writer cost %d MiB: decoded before it was refused", n>>20)
	}
	hundred := `{"receipts":[{}` + strings.Repeat(`,{"receiptJws":"`+strings.Repeat("a", 1000)+`"}`, 99) + `]}`
	if code := e.call(t, "POST", "/v1/receipts:batch", "writer", hundred, nil); code != http.StatusOK {
		t.Errorf("a batch of 100 over 64 KiB: %d, want 200 (each receipt answered on its own)", code)
	}

	// The connection the refused body came on serves the next request.
	var reused []bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	for i, key := range []string{"", keys["support"]} {
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "POST", e.base+"/v1/drills", strings.NewReader(`{"target":"A-5531"}`))
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want := []int{http.StatusUnauthorized, http.StatusOK}[i]; resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	if len(reused) != 2 || !reused[1] {
		t.Errorf("connections reused %v: the refused request's connection was not kept", reused)
	}

	// In chunks: the client does not know the length of a reader of its own.
	chunked := io.MultiReader(strings.NewReader(`{"receiptJws":"`), strings.NewReader(strings.Repeat("a", max)), strings.NewReader(`"}`))
	req, err := http.NewRequest("POST", e.base+"/v1/receipts", chunked)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keys["writer"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.ContentLength != 0 || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body in chunks over the limit (length %d): %d, want 413", req.ContentLength, resp.StatusCode)
	}
}

// A 401 over REST carries the bearer challenge (RFC 6750), its message
// in the body.
func TestRESTChallenge(t *testing.T) {
	e := newEnv(t, jose.ES256)
	resp, err := http.Get(e.base + "/v1/rows")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || got != `Bearer realm="pactledger"` {
		t.Errorf("GET /v1/rows without a key: %d, WWW-Authenticate %q", resp.StatusCode, got)
	}
	if !strings.Contains(string(body), "missing API key") {
		t.Errorf("the 401's body: %s", body)
	}
}

// The API's answers are not cached or sniffed, and a method a path does
// not take is 405.
func TestRESTHeadersAndMethods(t *testing.T) {
	e := newEnv(t, jose.ES256)
	for _, path := range []string{"/v1/rows", "/v1/whoami", "/healthz", "/metrics"} {
		resp, err := http.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q", path, got)
		}
		if got := resp.Header.Get("Cache-Control"); strings.HasPrefix(path, "/v1/") && got != "no-store" {
			t.Errorf("%s: Cache-Control %q", path, got)
		}
	}
	var refused struct{ Message string }
	if code := e.call(t, "PUT", "/v1/rows", "support", nil, &refused); code != http.StatusMethodNotAllowed || !strings.Contains(refused.Message, "PUT is not a method of /v1/rows") {
		t.Errorf("PUT /v1/rows: %d %q", code, refused.Message)
	}
}

// Every refused call is a warning in the log, over REST and gRPC: the
// call, the code, the key's name or a fingerprint of an unknown key
// (never the key), and where it came from.
func TestRefusalsLogged(t *testing.T) {
	e, logs := newLoggingEnv(t)
	e.call(t, "GET", "/v1/rows", "", nil, nil)
	e.call(t, "GET", "/v1/rows", "not-a-secret-key", nil, nil)
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	ctx := context.Background()
	_, _ = c.WhoAmI(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer not-a-secret-key", "x-forwarded-for", "203.0.113.9"), &ledgerv1.WhoAmIRequest{})
	_, _ = c.AppendRefusal(authCtx(ctx, "support"), &ledgerv1.AppendRefusalRequest{})
	e.stop()

	type line struct{ Level, Msg, RPC, Code, Key, From string }
	var got []line
	for _, l := range strings.Split(logs.String(), "\n") {
		var m line
		if json.Unmarshal([]byte(l), &m) == nil && m.Msg == "call refused" {
			got = append(got, m)
		}
	}
	want := []line{
		{"WARN", "call refused", "ListRows", "Unauthenticated", "none", "127.0.0.1"},
		{"WARN", "call refused", "ListRows", "Unauthenticated", "unknown key sha256:", "127.0.0.1"},
		{"WARN", "call refused", "WhoAmI", "Unauthenticated", "unknown key sha256:", "127.0.0.1:"},
		{"WARN", "call refused", "AppendRefusal", "PermissionDenied", "support-key", "127.0.0.1:"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d refusals logged, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Level != w.Level || g.RPC != w.RPC || g.Code != w.Code || !strings.HasPrefix(g.Key, w.Key) || !strings.HasPrefix(g.From, w.From) {
			t.Errorf("refusal %d: %+v, want %+v", i, g, w)
		}
	}
	if strings.Contains(logs.String(), "not-a-secret-key") {
		t.Errorf("the log holds the key sent")
	}
}

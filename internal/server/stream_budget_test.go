package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/server"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// bigReceipt is a receipt of about 24 KB: 40 actions of 500-byte
// targets. Its answer carries the row, actions and all.
func bigReceipt(e *env, target string) *ledgerv1.AppendReceiptRequest {
	r := e.sc.Mint(pacttest.Spec{Target: target})
	acts := r.Claims["actions"].([]map[string]any)
	for range 39 {
		acts = append(acts, acts[0])
	}
	r.Claims["actions"] = acts
	e.sc.Resign(r)
	req := request(r)
	for i := range 39 {
		req.Actions = append(req.Actions, &ledgerv1.Action{Tool: r.Actions[0].Tool, Target: fmt.Sprintf("%s-%03d-", target, i) + strings.Repeat("x", 490), ArgsJson: r.Actions[0].ArgsJSON})
	}
	return req
}

// settled waits until the rows committed stop growing for a second and
// returns the scrape then.
func settled(t *testing.T, e *env) map[string]float64 {
	t.Helper()
	last, since := -1.0, time.Now()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		m := scrape(t, e)
		if rows := m["pactledger_commit_batch_rows_sum"]; rows != last {
			last, since = rows, time.Now()
		} else if rows > 0 && time.Since(since) > time.Second {
			return m
		}
	}
	t.Fatal("the rows committed did not settle")
	return nil
}

// dialSlow dials e with HTTP/2 windows that do not grow: the client
// takes no more than 64 KiB of answers a stream ahead of its reads, as a
// writer that reads nothing from its socket would.
func dialSlow(t *testing.T, e *env) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(e.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// liveHeap is the bytes of the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Many streams whose writer sends receipts and reads no answers hold,
// all together, no more than limits.streamBytes (and the heap grows by
// about that, not by 64 receipts and answers a stream): the streams not
// read wait for room. Once the writer reads, every receipt sent is
// answered, once, and recorded; nothing is held after.
func TestAppendReceiptStreamsShareABudget(t *testing.T) {
	const budget = 2 << 20
	const streams, each = 40, 80 // more than StreamInFlight a stream
	e := newEnv(t, jose.ES256, func(c *config.Config) { c.Limits.MaxBodyBytes, c.Limits.StreamBytes = 64<<10, budget })
	reqs := make([][]*ledgerv1.AppendReceiptRequest, streams)
	for s := range reqs {
		for i := range each {
			reqs[s] = append(reqs[s], bigReceipt(e, fmt.Sprintf("A-8%02d%02d", s, i)))
		}
	}
	t.Logf("a receipt: %d bytes", proto.Size(&ledgerv1.AppendReceiptStreamRequest{Seq: 1, Receipt: reqs[0][0]}))
	before := liveHeap()

	conn := dialSlow(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	open := make([]ledgerv1.LedgerService_AppendReceiptStreamClient, streams)
	var sent sync.WaitGroup
	for s := range open {
		st, err := ledgerv1.NewLedgerServiceClient(conn).AppendReceiptStream(authCtx(ctx, "writer"))
		if err != nil {
			t.Fatal(err)
		}
		open[s] = st
		sent.Go(func() { // blocks once the server stops reading the stream
			for i, r := range reqs[s] {
				if err := st.Send(&ledgerv1.AppendReceiptStreamRequest{Seq: uint64(i), Receipt: r}); err != nil {
					t.Errorf("stream %d, send %d: %v", s, i, err)
					return
				}
			}
			if err := st.CloseSend(); err != nil {
				t.Errorf("stream %d: %v", s, err)
			}
		})
	}
	m := settled(t, e)
	grown := int64(liveHeap()) - int64(before)
	t.Logf("no answer read: %v rows committed, %v bytes held, %v streams waiting; the heap grew %.1f MB",
		m["pactledger_commit_batch_rows_sum"], m["pactledger_stream_bytes"], m["pactledger_streams_waiting"], float64(grown)/1e6)
	// A receipt's answer may be larger than the room taken for it: allow
	// one answer a stream over.
	if held := m["pactledger_stream_bytes"]; held <= 0 || held > budget+streams*64<<10 {
		t.Errorf("held %v bytes; want some, within the budget (%d)", held, budget)
	}
	if m["pactledger_streams_waiting"] == 0 {
		t.Error("no stream waits for room with the budget spent")
	}
	// What HTTP/2 lets in ahead of a stream not read, and the test's own
	// client, take some more: 56 MB is still under half of what 40
	// streams held before (64 receipts and answers each, about 120 MB).
	if grown > budget+56<<20 {
		t.Errorf("the heap grew %.1f MB with %d streams not read; want about the budget (%d bytes)", float64(grown)/1e6, streams, budget)
	}

	var read sync.WaitGroup
	for s, st := range open {
		read.Go(func() {
			seen := map[uint64]bool{}
			for {
				a, err := st.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Errorf("stream %d after %d answers: %v", s, len(seen), err)
					return
				}
				if seen[a.GetSeq()] {
					t.Errorf("stream %d: seq %d answered twice", s, a.GetSeq())
				}
				seen[a.GetSeq()] = true
				if r := a.GetResult(); r.GetCode() != 0 || r.GetResponse().GetOutcome() != ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED {
					t.Errorf("stream %d, receipt %d: %s", s, a.GetSeq(), brief(r))
				}
			}
			if len(seen) != each {
				t.Errorf("stream %d: %d answers of %d", s, len(seen), each)
			}
		})
	}
	sent.Wait()
	read.Wait()
	m = scrape(t, e)
	if ok := m[`pactledger_stream_receipts_total{code="OK"}`]; ok != streams*each {
		t.Errorf("%v receipts answered OK; want %d", ok, streams*each)
	}
	if m["pactledger_stream_bytes"] != 0 || m["pactledger_streams_waiting"] != 0 {
		t.Errorf("after every stream ended: %v bytes held, %v streams waiting", m["pactledger_stream_bytes"], m["pactledger_streams_waiting"])
	}
}

// Streams whose writer reads no answers for the unread timeout are ended
// RESOURCE_EXHAUSTED once their answers are read, and the room they held
// is freed for the others: a stream opened behind them, that waited for
// room, is read and answered. Every answer sent before the end is OK.
func TestAppendReceiptStreamNotReadIsEnded(t *testing.T) {
	server.SetStreamUnreadTimeout(t, 2*time.Second)
	const budget = 1 << 20
	const streams, each = 30, 12 // each holds about 50 KB: together more than the budget
	e := newEnv(t, jose.ES256, func(c *config.Config) { c.Limits.MaxBodyBytes, c.Limits.StreamBytes = 64<<10, budget })
	conn := dialSlow(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stuck := make([]ledgerv1.LedgerService_AppendReceiptStreamClient, streams)
	var sends sync.WaitGroup
	for s := range stuck {
		st, err := ledgerv1.NewLedgerServiceClient(conn).AppendReceiptStream(authCtx(ctx, "writer"))
		if err != nil {
			t.Fatal(err)
		}
		stuck[s] = st
		sends.Go(func() {
			for i := range each {
				if st.Send(&ledgerv1.AppendReceiptStreamRequest{Seq: uint64(i), Receipt: bigReceipt(e, fmt.Sprintf("A-9%02d%02d", s, i))}) != nil {
					return // the stream was ended
				}
			}
			_ = st.CloseSend()
		})
	}
	m := settled(t, e)
	t.Logf("%d streams not read: %v bytes held, %v streams waiting", streams, m["pactledger_stream_bytes"], m["pactledger_streams_waiting"])
	other := openStream(t, e, "writer")
	send(t, other, 1, request(e.sc.Mint(pacttest.Spec{Target: "A-9999"})))
	if got := answers(t, other, 1)[1]; got.GetCode() != 0 || got.GetResponse().GetOutcome() != ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED {
		t.Errorf("a stream behind those not read: %s", brief(got))
	}
	ended := 0
	for s, st := range stuck {
		for {
			a, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "not read") {
					t.Errorf("stream %d ended with %v; want RESOURCE_EXHAUSTED, answers not read", s, err)
				}
				ended++
				break
			}
			if a.GetResult().GetCode() != 0 {
				t.Errorf("stream %d, receipt %d: %s", s, a.GetSeq(), brief(a.GetResult()))
			}
		}
	}
	sends.Wait()
	m = scrape(t, e)
	t.Logf("%d of %d streams ended for answers not read", ended, streams)
	if ended == 0 || m["pactledger_streams_unread_ended_total"] != float64(ended) || m["pactledger_stream_bytes"] != 0 {
		t.Errorf("%d streams ended not read; metrics: %v ended, %v bytes held", ended, m["pactledger_streams_unread_ended_total"], m["pactledger_stream_bytes"])
	}
}

// A writer that reads an answer now and then, each Send finishing within
// the timeout, still has its stream ended once the answers it leaves
// unread have waited the timeout since they were answered: otherwise a
// few such streams would hold the budget for as long as they like.
func TestAppendReceiptStreamReadTooSlowlyIsEnded(t *testing.T) {
	const timeout = 2 * time.Second
	server.SetStreamUnreadTimeout(t, timeout)
	e := newEnv(t, jose.ES256, func(c *config.Config) { c.Limits.MaxBodyBytes = 64 << 10 })
	conn := dialSlow(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := ledgerv1.NewLedgerServiceClient(conn).AppendReceiptStream(authCtx(ctx, "writer"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	for i := range n {
		if err := st.Send(&ledgerv1.AppendReceiptStreamRequest{Seq: uint64(i), Receipt: bigReceipt(e, fmt.Sprintf("A-8%02d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	read := 0
	tick := time.NewTicker(timeout * 3 / 4) // each read within the timeout of the one before
	defer tick.Stop()
	for {
		<-tick.C
		_, err := st.Recv()
		if err == nil {
			read++
			continue
		}
		if s := status.Convert(err); s.Code() != codes.ResourceExhausted || !strings.Contains(s.Message(), "not read") {
			t.Fatalf("after %d answers read: %v; want RESOURCE_EXHAUSTED, answers not read", read, err)
		}
		break
	}
	if read >= n {
		t.Fatalf("all %d answers were read, one every %v: the stream was never ended", read, timeout*3/4)
	}
	t.Logf("ended after %d of %d answers read", read, n)
}

// Receipt streams open at once are bounded (limits.streams), a quarter of
// them under one key: a writer cannot open streams without end, each
// holding a receipt and its window outside limits.streamBytes. A stream
// closed makes room for another.
func TestReceiptStreamsOpenAtOnceAreBounded(t *testing.T) {
	e := newEnv(t, jose.ES256, func(c *config.Config) { c.Limits.Streams = 8 }) // 2 under one key
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := ledgerv1.NewLedgerServiceClient(dial(t, e))
	open := func() ledgerv1.LedgerService_AppendReceiptStreamClient {
		st, err := client.AppendReceiptStream(authCtx(ctx, "writer"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	first, second := open(), open()
	for i, st := range []ledgerv1.LedgerService_AppendReceiptStreamClient{first, second} {
		send(t, st, 1, request(e.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("A-70%d", i)})))
		if got := answers(t, st, 1)[1]; got.GetCode() != 0 {
			t.Fatalf("stream %d: %s", i, brief(got))
		}
	}
	third := open()
	if _, err := third.Recv(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "of this API key are open") {
		t.Fatalf("a third stream of one key, with two open: %v; want RESOURCE_EXHAUSTED naming the key's streams", err)
	}
	if err := first.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("the first stream's end: %v", err)
	}
	fourth := open()
	send(t, fourth, 1, request(e.sc.Mint(pacttest.Spec{Target: "A-709"})))
	if got := answers(t, fourth, 1)[1]; got.GetCode() != 0 {
		t.Fatalf("a stream opened once one closed: %s", brief(got))
	}
}

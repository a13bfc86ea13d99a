package bench

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// TestSplitBudget checks that each sample goes to the first part its stack
// matches: the load generator's by label or by its transport's frames,
// the commit's three parts only under the commit loop, signatures before
// verification, the request after both.
func TestSplitBudget(t *testing.T) {
	b := newProfileBuilder()
	b.add(1, map[string]string{"side": "client"}, "crypto/ecdsa.VerifyASN1", "github.com/pactledger/pactledger/internal/bench.drive.func2")
	b.add(2, nil, "syscall.Syscall", "google.golang.org/grpc/internal/transport.(*http2Client).reader")
	b.add(4, nil, "runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker")
	b.add(8, nil, "crypto/ecdsa.VerifyASN1", "github.com/pactledger/pactledger/verifier.(*Verifier).VerifyParsed", frameAppend)
	// A check through a key's table (verifier/p256) is a signature check.
	b.add(32768, nil, "filippo.io/nistec.(*P256Point).Add", "github.com/pactledger/pactledger/verifier/p256.(*Table).Verify",
		"github.com/pactledger/pactledger/verifier.(*keyTables).verify", "github.com/pactledger/pactledger/verifier.(*Verifier).VerifyParsed", frameAppend)
	b.add(16, nil, "syscall.Syscall", "go.etcd.io/bbolt.(*Tx).Commit", "go.etcd.io/bbolt.(*DB).Update", frameCommitLoop)
	b.add(32, nil, "encoding/json.Marshal", "github.com/pactledger/pactledger/ledger.(*Ledger).commitRow", frameAppend+".func2", frameCommitLoop)
	b.add(64, nil, "github.com/pactledger/pactledger/ledger.RecordUploads", "github.com/pactledger/pactledger/ledger.(*Ledger).uploadRound.func5", frameCommitLoop)
	b.add(128, nil, "encoding/json.Unmarshal", "github.com/pactledger/pactledger/verifier.(*Verifier).VerifyParsed", frameAppend)
	b.add(256, nil, "encoding/base64.DecodeString", frameAppend)
	b.add(512, nil, "crypto/sha256.Sum256", "github.com/pactledger/pactledger/ledger.(*Ledger).integrateLoop")
	b.add(1024, nil, "net/http.(*persistConn).writeLoop")
	b.add(1024, nil, "github.com/pactledger/pactledger/ledger.(*Ledger).put", "github.com/pactledger/pactledger/ledger.(*Ledger).uploadRound.func3")
	b.add(2048, nil, "google.golang.org/grpc/internal/transport.(*loopyWriter).run")
	b.add(2048, nil, "syscall.read", "net/http.(*connReader).backgroundRead")
	b.add(4096, nil, "runtime.schedule", "runtime.mcall")
	// AppendReceipts parses its receipts before the ledger does, under the
	// gRPC server's frames: that is the request's parse, not transport.
	b.add(16384, nil, "encoding/json.Unmarshal", "github.com/pactledger/pactledger/verifier.Parse", frameParse,
		"github.com/pactledger/pactledger/internal/server.parsedInputs", "google.golang.org/grpc.(*Server).serverWorker")
	// A streamed receipt's answer is built on a kept goroutine, outside
	// gRPC's frames: the transport's.
	b.add(65536, nil, "github.com/pactledger/pactledger/internal/server.rowProto", "github.com/pactledger/pactledger/internal/server.(*service).appendReceipt",
		"github.com/pactledger/pactledger/internal/server.(*receiptStream).record", "github.com/pactledger/pactledger/internal/server.(*workers).keep")
	// A commit outside the commit loop (no such thing in ledgerd) is not
	// the commit's.
	b.add(8192, nil, "go.etcd.io/bbolt.(*Tx).Commit", "google.golang.org/grpc.(*Server).serverWorker")

	got, err := splitBudget(b.p)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{4, 8 + 32768, 16, 32, 64, 128, 256 + 16384, 512, 2 * 1024, 2*2048 + 8192 + 65536, 4096}
	if len(got.parts) != len(want) {
		t.Fatalf("%d parts, want %d", len(got.parts), len(want))
	}
	for i, w := range want {
		if got.parts[i] != w {
			t.Errorf("%s: %d ns, want %d", partName(i), got.parts[i], w)
		}
	}
	if got.client != 3 || got.total != 134143 || got.ledgerd() != 134140 {
		t.Errorf("client %d, total %d, ledgerd %d ns; want 3, 134143, 134140", got.client, got.total, got.ledgerd())
	}
	// Printed for 2 rows in units of 50 µs: 300 µs of signatures out of
	// 1,200 µs are 150 µs a row, 3 units, a quarter of ledgerd's.
	printed := cpuBudget{parts: make([]time.Duration, len(budgetParts)+1), client: 200 * time.Microsecond, total: 1400 * time.Microsecond}
	printed.parts[1], printed.parts[len(budgetParts)] = 300*time.Microsecond, 900*time.Microsecond
	var out bytes.Buffer
	printed.print(&out, 2, verifyUnit{cpu: []time.Duration{50 * time.Microsecond}})
	for _, line := range []string{"(600.0 µs a row, 12.00 verifications; the load generator's 100.0 µs a row left out)",
		"| P-256 signature checks | 150.0 µs | 3.00 | 25.0 % |", "| " + budgetOther + " | 450.0 µs | 9.00 | 75.0 % |"} {
		if !bytes.Contains(out.Bytes(), []byte(line)) {
			t.Errorf("printed budget lacks %q:\n%s", line, out.String())
		}
	}

	if _, err := splitBudget(&profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}}); err == nil {
		t.Error("a heap profile was split as a CPU profile")
	}
}

// TestBudgetOfARealProfile records a CPU profile of P-256 verifications,
// half of them on a goroutine labelled as the load generator's, and checks
// that the runtime's function names are the ones the parts look for.
func TestBudgetOfARealProfile(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("row"))
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	// Each side verifies until it has used enough CPU for the profiler's
	// 100 Hz to sample it many times.
	verify := func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start, err := threadCPU()
		for err == nil {
			var now time.Duration
			if now, err = threadCPU(); now-start >= 300*time.Millisecond {
				break
			}
			for range 50 {
				if !ecdsa.VerifyASN1(&key.PublicKey, digest[:], sig) {
					t.Error("signature did not verify")
					return
				}
			}
		}
		if err != nil {
			t.Error(err)
		}
	}
	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		t.Skipf("a CPU profile is already running: %v", err)
	}
	done := make(chan struct{})
	go pprof.Do(context.Background(), clientLabels, func(context.Context) {
		defer close(done)
		verify()
	})
	verify()
	<-done
	pprof.StopCPUProfile()

	p, err := profile.Parse(&prof)
	if err != nil {
		t.Fatal(err)
	}
	got, err := splitBudget(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.client == 0 {
		t.Error("the labelled goroutine's verifications were not the load generator's")
	}
	if got.parts[1] == 0 {
		t.Errorf("the unlabelled verifications were not P-256 signature checks: %v", got.parts)
	}
}

// profileBuilder makes a CPU profile of given stacks.
type profileBuilder struct {
	p     *profile.Profile
	funcs map[string]*profile.Function
}

func newProfileBuilder() *profileBuilder {
	return &profileBuilder{
		p:     &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}}},
		funcs: map[string]*profile.Function{},
	}
}

// add records a sample of ns nanoseconds with stack, leaf first.
func (b *profileBuilder) add(ns int64, labels map[string]string, stack ...string) {
	s := &profile.Sample{Value: []int64{1, ns}}
	for _, name := range stack {
		fn := b.funcs[name]
		if fn == nil {
			fn = &profile.Function{ID: uint64(len(b.funcs) + 1), Name: name}
			b.funcs[name] = fn
			b.p.Function = append(b.p.Function, fn)
		}
		loc := &profile.Location{ID: uint64(len(b.p.Location) + 1), Line: []profile.Line{{Function: fn}}}
		b.p.Location = append(b.p.Location, loc)
		s.Location = append(s.Location, loc)
	}
	if labels != nil {
		s.Label = map[string][]string{}
		for k, v := range labels {
			s.Label[k] = []string{v}
		}
	}
	b.p.Sample = append(b.p.Sample, s)
}

package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// A budgetPart is one part of a row's CPU, told from a CPU profile's
// samples by the functions on their stacks.
type budgetPart struct {
	name string
	// any: a sample belongs to the part when one of its frames' functions
	// starts with one of these (the first part that matches takes it).
	any []string
	// within, when set, narrows the part to samples that also have a frame
	// starting with one of these.
	within []string
}

const (
	frameCommitLoop = "github.com/pactledger/pactledger/storage/bolt.(*Store).commitLoop"
	frameAppend     = "github.com/pactledger/pactledger/ledger.(*Ledger).AppendReceipt"
	// frameParse parses a receipt's tokens where the caller does so before
	// AppendReceipt (AppendReceipts, to read each receipt's grant).
	frameParse = "github.com/pactledger/pactledger/ledger.(*ReceiptInput).Parse"
)

// budgetParts are the parts of ledgerd's CPU a row, in the order a sample
// is matched against them. The load generator's samples are taken out
// before: its goroutines carry clientLabels, and its gRPC transport's
// goroutines (started when it connected, before the labels) are told by
// their functions (clientFrames). The collector's background work is not
// told apart by side: what the load generator's garbage costs it is
// counted with ledgerd's.
var budgetParts = []budgetPart{
	{name: "the collector: background marking, sweeping, assists", any: []string{
		"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcAssistAlloc"}},
	{name: "P-256 signature checks", any: []string{"crypto/ecdsa.", "github.com/pactledger/pactledger/verifier/p256.", "github.com/pactledger/pactledger/verifier.(*keyTables)"}},
	{name: "the commit: bbolt writing and syncing pages", any: []string{"go.etcd.io/bbolt.(*Tx).Commit"}, within: []string{frameCommitLoop}},
	{name: "the commit: the rows' writes", any: []string{frameAppend, "github.com/pactledger/pactledger/ledger.(*Ledger).commitRow"}, within: []string{frameCommitLoop}},
	{name: "the commit: other members (uploads recorded, log rounds stored, claims)", any: []string{frameCommitLoop}},
	{name: "verification besides the signatures", any: []string{"github.com/pactledger/pactledger/verifier.(*Verifier).VerifyParsed"}},
	{name: "the request besides verification: parsing, lookups before the commit", any: []string{frameAppend, frameParse}},
	{name: "the Merkle log outside the commit: rounds prepared, tiles published", any: []string{
		"github.com/pactledger/pactledger/ledger.(*Ledger).integrateLoop", "github.com/pactledger/pactledger/ledger.(*Ledger).RunIntegrator",
		"github.com/pactledger/pactledger/ledger.(*Ledger).Integrate", "github.com/pactledger/pactledger/ledger.(*Ledger).PublishTiles"}},
	{name: "the uploader outside the commit, with its S3 client", any: []string{
		"github.com/pactledger/pactledger/ledger.(*Ledger).RunUploader", "github.com/pactledger/pactledger/ledger.(*Ledger).uploadRound",
		"github.com/minio/minio-go/",
		"net/http.(*persistConn)", "net/http.(*Transport)"}},
	{name: "transport: gRPC or REST, interceptors, responses", any: []string{
		"google.golang.org/grpc", "golang.org/x/net/http2", "net/http.(*conn)", "net/http.(*connReader)",
		"github.com/grpc-ecosystem/grpc-gateway",
		// A streamed receipt is recorded and answered on a goroutine the
		// server keeps, outside gRPC's frames: its answer is the transport's.
		"github.com/pactledger/pactledger/internal/server.(*receiptStream)"}},
}

// budgetOther takes the samples no part matched: the scheduler, timers,
// syscalls outside the parts above.
const budgetOther = "other: the scheduler, timers, the rest"

// clientFrames are the load generator's transport goroutines.
var clientFrames = []string{
	"google.golang.org/grpc/internal/transport.(*http2Client)",
	"google.golang.org/grpc/internal/transport.NewHTTP2Client",
}

// cpuBudget is a CPU profile's time split into budgetParts.
type cpuBudget struct {
	parts  []time.Duration // by budgetParts' index, then budgetOther
	client time.Duration   // the load generator's
	total  time.Duration   // every sample's
}

// ledgerd is the CPU of the parts, the load generator's left out.
func (b cpuBudget) ledgerd() time.Duration { return b.total - b.client }

// readBudget reads the CPU profile at path and splits it.
func readBudget(path string) (cpuBudget, error) {
	f, err := os.Open(path)
	if err != nil {
		return cpuBudget{}, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return cpuBudget{}, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return splitBudget(p)
}

// splitBudget splits p's CPU time into budgetParts.
func splitBudget(p *profile.Profile) (cpuBudget, error) {
	vi := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			vi = i
		}
	}
	if vi < 0 {
		return cpuBudget{}, fmt.Errorf("not a CPU profile: no sample of cpu nanoseconds")
	}
	b := cpuBudget{parts: make([]time.Duration, len(budgetParts)+1)}
	var frames []string
	for _, s := range p.Sample {
		d := time.Duration(s.Value[vi])
		b.total += d
		frames = frames[:0]
		for _, loc := range s.Location {
			for _, ln := range loc.Line {
				if ln.Function != nil {
					frames = append(frames, ln.Function.Name)
				}
			}
		}
		if s.HasLabel("side", "client") || hasFrame(frames, clientFrames) {
			b.client += d
			continue
		}
		b.parts[partOf(frames)] += d
	}
	return b, nil
}

// partOf is the index in budgetParts of the first part frames match, or
// len(budgetParts) for none.
func partOf(frames []string) int {
	for i, pt := range budgetParts {
		if hasFrame(frames, pt.any) && (pt.within == nil || hasFrame(frames, pt.within)) {
			return i
		}
	}
	return len(budgetParts)
}

func hasFrame(frames, prefixes []string) bool {
	for _, f := range frames {
		for _, p := range prefixes {
			if strings.HasPrefix(f, p) {
				return true
			}
		}
	}
	return false
}

// print writes the budget for rows recorded, in µs a row and in units of
// u, ledgerd's parts only.
func (b cpuBudget) print(w io.Writer, rows int, u verifyUnit) {
	if rows <= 0 || b.total <= 0 {
		return
	}
	perRow := func(d time.Duration) time.Duration { return d / time.Duration(rows) }
	fmt.Fprintf(w, "  ledgerd's CPU a row by part, from the CPU profile (%s a row, %.2f verifications; the load generator's %s a row left out):\n",
		us(perRow(b.ledgerd())), u.units(perRow(b.ledgerd()).Seconds()), us(perRow(b.client)))
	fmt.Fprintf(w, "  | part | CPU a row | verifications | share |\n  |---|---|---|---|\n")
	for i, d := range b.parts {
		fmt.Fprintf(w, "  | %s | %s | %.2f | %.1f %% |\n", partName(i), us(perRow(d)), u.units(perRow(d).Seconds()), 100*float64(d)/float64(b.ledgerd()))
	}
}

// partName is the name of cpuBudget.parts[i].
func partName(i int) string {
	if i < len(budgetParts) {
		return budgetParts[i].name
	}
	return budgetOther
}

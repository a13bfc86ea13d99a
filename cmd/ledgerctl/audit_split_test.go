package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger/proof"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// splitServer stands between ledgerctl and a real ledgerd, as an operator
// holding the log's signing key could: it forwards what the audit asks,
// except the answers its hooks give.
type splitServer struct {
	ledgerv1.UnimplementedLedgerServiceServer
	c          ledgerv1.LedgerServiceClient
	ledgerd    string // ledgerd's gRPC address
	checkpoint func(context.Context) (*ledgerv1.GetCheckpointResponse, error)
	rowProof   func(context.Context, *ledgerv1.GetRowProofRequest) (*ledgerv1.GetRowProofResponse, error)
	consistent func(context.Context, *ledgerv1.GetConsistencyProofRequest) (*ledgerv1.GetConsistencyProofResponse, error)
	row        func(context.Context, *ledgerv1.GetRowRequest) (*ledgerv1.GetRowResponse, error)
	// evidence, when set, changes ledgerd's GetEvidence answer in place.
	evidence func(*ledgerv1.GetEvidenceResponse)
	// snapshot, when set, answers GetJwksSnapshot in ledgerd's place.
	snapshot func(context.Context, *ledgerv1.GetJwksSnapshotRequest) (*ledgerv1.GetJwksSnapshotResponse, error)
}

// forward passes the caller's API key on.
func forward(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	return metadata.NewOutgoingContext(ctx, md)
}

func (s *splitServer) GetCheckpoint(ctx context.Context, r *ledgerv1.GetCheckpointRequest) (*ledgerv1.GetCheckpointResponse, error) {
	if s.checkpoint != nil {
		return s.checkpoint(forward(ctx))
	}
	return s.c.GetCheckpoint(forward(ctx), r)
}

func (s *splitServer) GetConsistencyProof(ctx context.Context, r *ledgerv1.GetConsistencyProofRequest) (*ledgerv1.GetConsistencyProofResponse, error) {
	if s.consistent != nil {
		return s.consistent(forward(ctx), r)
	}
	return s.c.GetConsistencyProof(forward(ctx), r)
}

func (s *splitServer) GetRow(ctx context.Context, r *ledgerv1.GetRowRequest) (*ledgerv1.GetRowResponse, error) {
	if s.row != nil {
		return s.row(forward(ctx), r)
	}
	return s.c.GetRow(forward(ctx), r)
}

func (s *splitServer) GetEvidence(ctx context.Context, r *ledgerv1.GetEvidenceRequest) (*ledgerv1.GetEvidenceResponse, error) {
	rep, err := s.c.GetEvidence(forward(ctx), r)
	if err == nil && s.evidence != nil {
		s.evidence(rep)
	}
	return rep, err
}

func (s *splitServer) GetJwksSnapshot(ctx context.Context, r *ledgerv1.GetJwksSnapshotRequest) (*ledgerv1.GetJwksSnapshotResponse, error) {
	if s.snapshot != nil {
		return s.snapshot(forward(ctx), r)
	}
	return s.c.GetJwksSnapshot(forward(ctx), r)
}

func (s *splitServer) GetIncident(ctx context.Context, r *ledgerv1.GetIncidentRequest) (*ledgerv1.GetIncidentResponse, error) {
	return s.c.GetIncident(forward(ctx), r)
}

func (s *splitServer) GetGrant(ctx context.Context, r *ledgerv1.GetGrantRequest) (*ledgerv1.GetGrantResponse, error) {
	return s.c.GetGrant(forward(ctx), r)
}

func (s *splitServer) ListRows(ctx context.Context, r *ledgerv1.ListRowsRequest) (*ledgerv1.ListRowsResponse, error) {
	return s.c.ListRows(forward(ctx), r)
}

func (s *splitServer) GetRowProof(ctx context.Context, r *ledgerv1.GetRowProofRequest) (*ledgerv1.GetRowProofResponse, error) {
	if s.rowProof != nil {
		return s.rowProof(forward(ctx), r)
	}
	return s.c.GetRowProof(forward(ctx), r)
}

// split puts a splitServer in front of f's ledgerd; ledgerctl then talks
// to it over gRPC, and still reads the tiles from ledgerd's /v1/log/.
func (f *fixture) split(t *testing.T) *splitServer {
	t.Helper()
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s := &splitServer{c: ledgerv1.NewLedgerServiceClient(conn), ledgerd: f.addr}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	ledgerv1.RegisterLedgerServiceServer(gs, s)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	f.addr = lis.Addr().String()
	return s
}

// proofAnswer is a GetRowProof answer carrying bundle b.
func proofAnswer(t *testing.T, b *proof.Bundle) *ledgerv1.GetRowProofResponse {
	t.Helper()
	j, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return &ledgerv1.GetRowProofResponse{LeafIndex: b.LeafIndex, Leaf: b.Leaf, Checkpoint: b.Checkpoint, Bundle: string(j) + "\n"}
}

// keptCheckpointAndSigner logs f's row and keeps the checkpoint that
// holds it, as an auditor would; it returns that file, the log's verifier
// key and a signer with the log's own key, whose holder can sign a tree
// of their own.
func (f *fixture) keptCheckpointAndSigner(t *testing.T) (kept, key string, signer note.Signer) {
	t.Helper()
	f.logged(t, f.rowID)
	kept = filepath.Join(t.TempDir(), "kept.checkpoint")
	if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", kept); code != 0 {
		t.Fatalf("checkpoint: %s", errs)
	}
	raw, err := os.ReadFile(filepath.Join(f.cfg.DataDir, "log", "signing.key"))
	if err != nil {
		t.Fatal(err)
	}
	if signer, err = note.NewSigner(strings.TrimSpace(string(raw))); err != nil {
		t.Fatal(err)
	}
	return kept, f.verifierKey(t), signer
}

// A row inserted behind the log's back must fail the audit even when the
// server proves it under a checkpoint the log's key signed: whoever holds
// the key can sign a tree of their own. Each row's proof has to tie to
// the audited tree.
func TestAuditRefusesRowProofsOfAnotherTree(t *testing.T) {
	f := start(t)
	kept, key, signer := f.keptCheckpointAndSigner(t)
	forged := strings.Repeat("f", 64)
	f.edit(t, tamper.ForgeRow(f.rowID, forged))
	s := f.split(t)

	// forgedLeaf is the copied row's leaf, naming the forged row.
	forgedLeaf := func(ctx context.Context) string {
		real, err := s.c.GetRowProof(ctx, &ledgerv1.GetRowProofRequest{Id: f.rowID})
		if err != nil {
			t.Error(err)
			return ""
		}
		return strings.Replace(real.GetLeaf(), "\nrow "+f.rowID+"\n", "\nrow "+forged+"\n", 1)
	}
	for _, tc := range []struct {
		name  string
		proof func(ctx context.Context) *proof.Bundle
		want  string
	}{
		{"a leaf in the audited tree's range, under a tree of its own", func(ctx context.Context) *proof.Bundle {
			leaf := forgedLeaf(ctx)
			cp, err := proof.Sign(proof.Checkpoint{Origin: signer.Name(), Size: 1, Hash: tlog.RecordHash([]byte(leaf))}, signer)
			if err != nil {
				t.Error(err)
			}
			return proof.NewBundle(forged, 0, []byte(leaf), nil, cp)
		}, "is not the audited tree's leaf 0"},
		{"a leaf past the audited tree, under a larger tree that does not extend it", func(ctx context.Context) *proof.Bundle {
			leaf := forgedLeaf(ctx)
			// A tree of 64 leaves: the forged leaf last, the others made up.
			var hs []tlog.Hash
			for i := range 63 {
				hs = append(hs, tlog.RecordHash([]byte{byte(i)}))
			}
			hs = append(hs, tlog.RecordHash([]byte(leaf)))
			hr := leafHashes(hs)
			root, err := tlog.TreeHash(64, hr)
			if err != nil {
				t.Error(err)
			}
			path, err := tlog.ProveRecord(64, 63, hr)
			if err != nil {
				t.Error(err)
			}
			cp, err := proof.Sign(proof.Checkpoint{Origin: signer.Name(), Size: 64, Hash: root}, signer)
			if err != nil {
				t.Error(err)
			}
			return proof.NewBundle(forged, 63, []byte(leaf), path, cp)
		}, "gives no consistency proof"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.rowProof = func(ctx context.Context, r *ledgerv1.GetRowProofRequest) (*ledgerv1.GetRowProofResponse, error) {
				if r.GetId() == forged && r.GetEvent() == "" {
					return proofAnswer(t, tc.proof(ctx)), nil
				}
				return s.c.GetRowProof(ctx, r)
			}
			code, out, errs := f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", key, "--settle", "200ms")
			if code != exitCheckFailed || !strings.Contains(out, "row "+forged+": its proof is not of the audited log") || !strings.Contains(out, tc.want) {
				t.Fatalf("audit: exit %d, want %d naming row %s and %q\n%s%s", code, exitCheckFailed, forged, tc.want, out, errs)
			}
		})
	}
}

// A row logged after the checkpoint the audit reads is proven under a
// later one; the audit accepts it once that checkpoint is shown to extend
// the audited tree.
func TestAuditAcceptsRowsLoggedSinceItsCheckpoint(t *testing.T) {
	f := start(t)
	f.logged(t, f.rowID)
	kept := filepath.Join(t.TempDir(), "kept.checkpoint")
	if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", kept); code != 0 {
		t.Fatalf("checkpoint: %s", errs)
	}
	s := f.split(t)
	stale, err := s.c.GetCheckpoint(context.Background(), &ledgerv1.GetCheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The audit reads this checkpoint as the latest; the row below comes
	// into the log after it.
	s.checkpoint = func(context.Context) (*ledgerv1.GetCheckpointResponse, error) { return stale, nil }
	proxy := f.addr
	f.addr = s.ledgerd // the writer posts to ledgerd itself
	id := f.append(t, pacttest.Spec{User: "acct-3", Target: "C-3"})
	f.addr = proxy
	f.logged(t, id)
	code, out, errs := f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", f.verifierKey(t))
	if code != 0 || !strings.Contains(out, "audit passed") {
		t.Fatalf("audit: exit %d\n%s%s", code, out, errs)
	}
}

// leafHashes reads the stored hashes of a tree built from leaf hashes.
type leafHashes []tlog.Hash

func (l leafHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	var stored []tlog.Hash
	for i, h := range l {
		more, err := tlog.StoredHashesForRecordHash(int64(i), h, tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(ix))
			for j, x := range ix {
				out[j] = stored[x]
			}
			return out, nil
		}))
		if err != nil {
			return nil, err
		}
		stored = append(stored, more...)
	}
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		out[i] = stored[x]
	}
	return out, nil
}

// A tile the audit cannot read stops it with the error, never a finding
// against an honest ledger; a tile read that does not match the audited
// tree is a finding.
func TestAuditTellsAnUnreadableTileFromAWrongOne(t *testing.T) {
	leaves := leafHashes{tlog.RecordHash([]byte("a")), tlog.RecordHash([]byte("b"))}
	root, err := tlog.TreeHash(2, leaves)
	if err != nil {
		t.Fatal(err)
	}
	newer := proof.Checkpoint{Origin: "example.com/log", Size: 2, Hash: root}
	for _, tc := range []struct {
		name         string
		serve        http.HandlerFunc
		inconsistent bool
	}{
		{"the server down", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) }, false},
		{"a tile withheld", func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) }, true},
		{"a tile of another tree", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write(bytes.Repeat([]byte{7}, 2*tlog.HashSize))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.serve)
			defer srv.Close()
			tr := &tiles{base: srv.URL, client: srv.Client()}
			a := &auditor{newer: newer, hashes: tlog.TileHashReader(tlog.Tree{N: newer.Size, Hash: newer.Hash}, tr), extends: map[proof.Checkpoint]bool{}}
			err := a.inAuditedLog(&proof.Bundle{LeafIndex: 0, Leaf: "a"}, newer)
			var bad *inconsistent
			if err == nil || errors.As(err, &bad) != tc.inconsistent {
				t.Fatalf("leaf 0 with %s: %v (a finding: %v), want a finding %v", tc.name, err, errors.As(err, &bad), tc.inconsistent)
			}
		})
	}
}

// A checkpoint the log's key signed for more leaves than any log reaches
// (tlog's checks loop forever past 2^62) is refused at once, naming its
// size: as the latest checkpoint of log audit, and in a proof file for
// proof verify.
func TestAHugeCheckpointIsRefusedAtOnce(t *testing.T) {
	f := start(t)
	kept, key, signer := f.keptCheckpointAndSigner(t)
	const size = 1<<62 + 1
	huge, err := proof.Sign(proof.Checkpoint{Origin: signer.Name(), Size: size}, signer)
	if err != nil {
		t.Fatal(err)
	}
	s := f.split(t)
	s.checkpoint = func(ctx context.Context) (*ledgerv1.GetCheckpointResponse, error) {
		rep, err := s.c.GetCheckpoint(ctx, &ledgerv1.GetCheckpointRequest{})
		if err != nil {
			return nil, err
		}
		rep.Checkpoint = string(huge)
		return rep, nil
	}
	// A path of 64 hashes, as many as a tree of that size needs.
	s.consistent = func(context.Context, *ledgerv1.GetConsistencyProofRequest) (*ledgerv1.GetConsistencyProofResponse, error) {
		path := make([][]byte, 64)
		for i := range path {
			path[i] = make([]byte, tlog.HashSize)
		}
		return &ledgerv1.GetConsistencyProofResponse{Proof: path}, nil
	}
	want := "size 4611686018427387905 is more than any log reaches"
	code, out, errs := returnsAtOnce(t, func() (int, string, string) {
		return f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", key, "--settle", "200ms")
	})
	if code != exitCheckFailed || !strings.Contains(out+errs, want) {
		t.Errorf("log audit against a checkpoint of size %d: exit %d, want %d naming %q\n%s%s", int64(size), code, exitCheckFailed, want, out, errs)
	}

	b := proof.NewBundle(f.rowID, 3, []byte("pactledger leaf v1\nkind receipt\nrow "+f.rowID+"\n"), make([]tlog.Hash, 63), huge)
	file := filepath.Join(t.TempDir(), "huge.proof")
	j, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, j, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = returnsAtOnce(t, func() (int, string, string) { return offline("proof", "verify", file, "--log-key", key) })
	if code != exitCheckFailed || !strings.Contains(out+errs, want) {
		t.Errorf("proof verify under a checkpoint of size %d: exit %d, want %d naming %q\n%s%s", int64(size), code, exitCheckFailed, want, out, errs)
	}
}

// returnsAtOnce runs a ledgerctl command; one that loops (as tlog's
// checks do past 2^62 leaves) fails the test after a minute instead of
// hanging it.
func returnsAtOnce(t *testing.T, run func() (int, string, string)) (int, string, string) {
	t.Helper()
	type result struct {
		code      int
		out, errs string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errs := run()
		done <- result{code, out, errs}
	}()
	select {
	case r := <-done:
		return r.code, r.out, r.errs
	case <-time.After(time.Minute):
		t.Fatal("ledgerctl did not return: it loops")
		return 0, "", ""
	}
}

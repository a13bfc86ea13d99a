package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/proof"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

func (s *service) GetCheckpoint(ctx context.Context, _ *ledgerv1.GetCheckpointRequest) (*ledgerv1.GetCheckpointResponse, error) {
	cp, err := s.l.Checkpoint(ctx)
	if err != nil {
		return nil, s.logStatus(ctx, "GetCheckpoint", err)
	}
	c, err := s.openCheckpoint(cp)
	if err != nil {
		return nil, s.toStatus(ctx, "GetCheckpoint", err)
	}
	return &ledgerv1.GetCheckpointResponse{Checkpoint: string(cp), Origin: c.Origin, Size: c.Size, VerifierKey: s.logKey}, nil
}

// reasonLogDiverged marks an UNAVAILABLE answer of the log (a checkpoint,
// a proof) while the ledger's log diverged from the one published to
// write-once storage: it signs and serves none until an operator acts,
// so no wait brings one.
const reasonLogDiverged = "LOG_DIVERGED"

// logStatus is toStatus for the log's answers: a log that diverged from
// the published one is UNAVAILABLE (REST 503) with reason LOG_DIVERGED
// and no RetryInfo, saying so and what an operator must do.
func (s *service) logStatus(ctx context.Context, op string, err error) error {
	if !errors.Is(err, ledger.ErrLogDiverged) {
		return s.toStatus(ctx, op, err)
	}
	st := status.New(codes.Unavailable, err.Error())
	if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reasonLogDiverged, Domain: "pactledger"}); derr == nil {
		st = d
	}
	return st.Err()
}

// openedCheckpoint is a signed checkpoint the service verified, with what
// it says.
type openedCheckpoint struct {
	signed []byte
	c      proof.Checkpoint
}

// openCheckpoint verifies cp with the log's key and reads it. The latest
// checkpoint verified is kept: monitors poll GetCheckpoint far more often
// than the log grows, and the same bytes under the same key verify the
// same way, so only new bytes are verified again.
func (s *service) openCheckpoint(cp []byte) (proof.Checkpoint, error) {
	if last := s.lastCP.Load(); last != nil && bytes.Equal(last.signed, cp) {
		return last.c, nil
	}
	c, err := proof.Open(cp, s.logKey)
	if err != nil {
		return proof.Checkpoint{}, err
	}
	s.lastCP.Store(&openedCheckpoint{signed: bytes.Clone(cp), c: c})
	return c, nil
}

func (s *service) GetRowProof(ctx context.Context, req *ledgerv1.GetRowProofRequest) (*ledgerv1.GetRowProofResponse, error) {
	ref, err := proofRef(req.GetId(), req.GetEvent())
	if err != nil {
		return nil, s.toStatus(ctx, "GetRowProof", err)
	}
	if ref == incidentOf {
		row, err := s.l.Get(ctx, req.GetId())
		if err != nil {
			return nil, s.toStatus(ctx, "GetRowProof", err)
		}
		if row.IncidentID == "" {
			return nil, s.toStatus(ctx, "GetRowProof", fmt.Errorf("%w: row %s has no incident", ledger.ErrNotFound, row.ID))
		}
		ref = "incident/" + row.IncidentID + "/close"
	}
	b, err := s.l.Proof(ctx, ref)
	if err != nil {
		return nil, s.logStatus(ctx, "GetRowProof", err)
	}
	return bundleProto(b)
}

// incidentOf stands for "the closure of this row's incident" until the
// incident id is read.
const incidentOf = "incident-of"

// proofRef turns a row id and an event name into the log's leaf ref.
func proofRef(id, event string) (string, error) {
	if len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%w: id must be 64 lowercase hex", ledger.ErrInvalid)
	}
	switch {
	case event == "":
		return id, nil
	case event == "incident-close":
		return incidentOf, nil
	case strings.HasPrefix(event, "dispute/"):
		n := strings.TrimPrefix(event, "dispute/")
		if n == "" || len(n) > 6 || strings.Trim(n, "0123456789") != "" {
			return "", fmt.Errorf("%w: event must be dispute/<n> or incident-close", ledger.ErrInvalid)
		}
		return "dispute/" + id + "/" + n, nil
	}
	return "", fmt.Errorf("%w: event must be dispute/<n> or incident-close", ledger.ErrInvalid)
}

func bundleProto(b *proof.Bundle) (*ledgerv1.GetRowProofResponse, error) {
	path, err := proof.Hashes(b.Inclusion)
	if err != nil {
		return nil, err
	}
	out := &ledgerv1.GetRowProofResponse{LeafIndex: b.LeafIndex, Leaf: b.Leaf, Checkpoint: b.Checkpoint}
	for _, h := range path {
		out.Inclusion = append(out.Inclusion, h[:])
	}
	j, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return nil, err
	}
	out.Bundle = string(j) + "\n"
	return out, nil
}

func (s *service) GetConsistencyProof(ctx context.Context, req *ledgerv1.GetConsistencyProofRequest) (*ledgerv1.GetConsistencyProofResponse, error) {
	path, oldCP, newCP, err := s.l.Consistency(ctx, req.GetFrom(), req.GetTo())
	if err != nil {
		return nil, s.logStatus(ctx, "GetConsistencyProof", err)
	}
	out := &ledgerv1.GetConsistencyProofResponse{FromCheckpoint: string(oldCP), ToCheckpoint: string(newCP)}
	for _, h := range path {
		out.Proof = append(out.Proof, h[:])
	}
	return out, nil
}

// maxTilePath bounds a tile path in a request.
const maxTilePath = 64

// logFiles serves the log as a C2SP tlog-tiles client reads it, under
// /v1/log/: the latest signed checkpoint at /v1/log/checkpoint and tiles at
// /v1/log/tile/... Public: no key needed.
func logFiles(l *ledger.Ledger, log func(context.Context, string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(r.URL.Path, "/v1/log/")
		var (
			data []byte
			err  error
		)
		switch {
		case p == "checkpoint":
			data, err = l.Checkpoint(r.Context())
			w.Header().Set("Cache-Control", "no-store")
		case strings.HasPrefix(p, "tile/") && len(p) <= maxTilePath:
			data, err = l.TileData(r.Context(), p)
			if err == nil && !strings.Contains(p, ".p/") {
				w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			}
		default:
			http.NotFound(w, r)
			return
		}
		switch {
		case err == nil:
		case errors.Is(err, ledger.ErrNotFound), errors.Is(err, ledger.ErrInvalid):
			http.NotFound(w, r)
			return
		case errors.Is(err, ledger.ErrNoLog):
			http.Error(w, "this ledger keeps no Merkle log", http.StatusNotImplemented)
			return
		case errors.Is(err, ledger.ErrLogDiverged):
			// Not the fork: what the ledger holds past the published log
			// is not served until an operator settles it.
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		default:
			log(r.Context(), "serve "+p, err)
			http.Error(w, "internal error; see the server log", http.StatusInternalServerError)
			return
		}
		if p == "checkpoint" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		} else {
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		_, _ = w.Write(data)
	})
}

package server

import (
	"context"
	"regexp"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// MinRowIDPrefix is the shortest row id prefix the API resolves: 8 hex
// characters (32 bits), enough to name one row among many thousands
// while still short enough to read out over the phone.
const MinRowIDPrefix = 8

var rowIDPrefix = regexp.MustCompile(`^[0-9a-f]{8,63}$`)

// rowIDs resolves a unique row id prefix to the full id wherever a request
// names a row, so the ids tables print (12 characters) are accepted back.
type rowIDs struct {
	rows ledger.Store
}

// resolve returns the full id of the one row whose id starts with prefix.
// A full id, or anything that is not a lowercase hex prefix of 8 to 63
// characters, is returned as it is for the ledger to judge.
func (r rowIDs) resolve(ctx context.Context, prefix string) (string, error) {
	if !rowIDPrefix.MatchString(prefix) {
		return prefix, nil
	}
	var found []string
	err := r.rows.View(ctx, func(tx ledger.Tx) error {
		// Row ids are fixed-length hex: the first id at or after the prefix
		// is the only candidate, and the one after it decides uniqueness.
		for key := prefix; len(found) < 2; {
			row, err := tx.RowAfter(key)
			if err != nil {
				return err
			}
			if row == nil || !strings.HasPrefix(row.ID, prefix) || (len(found) > 0 && row.ID == found[0]) {
				return nil
			}
			found = append(found, row.ID)
			key = row.ID + "0"
		}
		return nil
	})
	switch {
	case err != nil:
		return "", status.Error(codes.Unavailable, "row id prefix: the row store is unavailable; retry")
	case len(found) == 0:
		return "", status.Errorf(codes.NotFound, "no row id starts with %s", prefix)
	case len(found) > 1:
		return "", status.Errorf(codes.InvalidArgument, "row id prefix %s is not unique (%s…, %s…, …): give more characters", prefix, found[0][:len(prefix)+4], found[1][:len(prefix)+4])
	}
	return found[0], nil
}

// unary resolves row id prefixes in the requests that name a row. It runs
// after authentication, so only a key that may read the row learns that a
// prefix matches.
func (r rowIDs) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	var id *string
	switch m := req.(type) {
	case *ledgerv1.GetRowRequest:
		id = &m.Id
	case *ledgerv1.GetEvidenceRequest:
		id = &m.Id
	case *ledgerv1.VerifyRowRequest:
		id = &m.Id
	case *ledgerv1.AppendDisputeEventRequest:
		id = &m.Id
	case *ledgerv1.RestoreEvidenceRequest:
		id = &m.Id
	case *ledgerv1.GetRowProofRequest:
		id = &m.Id
	case *ledgerv1.RunDrillRequest:
		id = &m.RowId
	}
	if id != nil && *id != "" {
		full, err := r.resolve(ctx, *id)
		if err != nil {
			return nil, err
		}
		*id = full
	}
	return handler(ctx, req)
}

package server

import (
	"context"
	"slices"

	"github.com/pactledger/pactledger/internal/buildinfo"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// WhoAmI names the calling key and its roles (any valid key may ask).
func (s *service) WhoAmI(ctx context.Context, _ *ledgerv1.WhoAmIRequest) (*ledgerv1.WhoAmIResponse, error) {
	p, _ := ctx.Value(principalKey{}).(principal)
	return &ledgerv1.WhoAmIResponse{Name: p.name, Roles: slices.Clone(p.roles), ServerVersion: buildinfo.Read().String()}, nil
}
